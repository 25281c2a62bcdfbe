// Builds without the CUDA backend: the cuda entry points reject the call.
#if !defined(REPLAYSSM_WITH_CUDA)
#include "conv1d/backend.h"

namespace replayssm::conv1d::cuda {
namespace {
[[noreturn]] void no_cuda(const char* fn) {
  throw Error(fn, "exec", "this build of replayssm has no CUDA backend");
}
}  // namespace

void update(const Conv1dStep&, const Tensor&, const Tensor&, const Tensor&, const Dims&,
            const Exec&) {
  no_cuda("conv1d_update");
}
void prefill(const Conv1dPrefill&, const Tensor&, const Tensor&, const Dims&, const Exec&) {
  no_cuda("conv1d_prefill");
}
void commit(const Tensor&, const Tensor&, const Tensor&, int64_t, const Tensor&, const Dims&,
            const Exec&) {
  no_cuda("conv1d_commit");
}

}  // namespace replayssm::conv1d::cuda
#endif
