// Builds without CUDA: every mamba2::cuda entry point rejects the call.
#if !defined(REPLAYSSM_WITH_CUDA)
#include "mamba2/backend.h"

namespace replayssm::mamba2::cuda {
namespace {
[[noreturn]] void no_cuda(const char* fn) {
  throw Error(fn, "exec", "this build of replayssm has no CUDA backend");
}
}  // namespace

void decode(const Mamba2Step&, const Tensor&, const Dims&, const Exec&) {
  no_cuda("mamba2_decode");
}
void snapshot_decode(const Mamba2Step&, const Tensor&, const Tensor&, const Tensor&, const Dims&,
                     const Exec&) {
  no_cuda("mamba2_snapshot_decode");
}
void prefill(const Mamba2Prefill&, const Mamba2Pool&, const Dims&, const Exec&) {
  no_cuda("mamba2_prefill");
}
void replay_step(const Mamba2Step&, const Mamba2Pool&, const Tensor&, bool, const Dims&,
                 const Exec&) {
  no_cuda("mamba2_replay_step");
}
void commit(const Mamba2Pool&, const Tensor&, int64_t, const Tensor&, const Dims&, const Exec&) {
  no_cuda("mamba2_commit");
}
void materialize(const Mamba2Pool&, const Tensor&, int64_t, const Tensor&, const Dims&,
                 const Exec&) {
  no_cuda("mamba2_materialize");
}
void flush(const Mamba2Pool&, const Tensor&, int64_t, const Dims&, const Exec&) {
  no_cuda("mamba2_flush");
}

}  // namespace replayssm::mamba2::cuda
#endif
