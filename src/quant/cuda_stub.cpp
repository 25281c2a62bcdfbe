// Builds without the CUDA backend: the cuda entry points reject the call.
#if !defined(REPLAYSSM_WITH_CUDA)
#include "quant/backend.h"

namespace replayssm::quant::cuda {
namespace {
[[noreturn]] void no_cuda(const char* fn) {
  throw Error(fn, "exec", "this build of replayssm has no CUDA backend");
}
}  // namespace

void pack(const QuantLayout&, const Tensor&, const Tensor&, const Exec&) { no_cuda("quant_pack"); }
void unpack(const QuantLayout&, const Tensor&, const Tensor&, const Exec&) { no_cuda("quant_unpack"); }

}  // namespace replayssm::quant::cuda
#endif
