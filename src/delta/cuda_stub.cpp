// Stubs of the delta cuda backend for builds without CUDA: every entry point
// throws, so a cuda Exec fails with a clear error instead of a link error.
#include "delta/backend.h"

#if !defined(REPLAYSSM_WITH_CUDA)
namespace replayssm::delta::cuda {
namespace {
[[noreturn]] void none(const char* fn) {
  throw Error(fn, "exec", "this build of replayssm has no CUDA backend");
}
}  // namespace

void decode(const DeltaStep&, const Tensor&, const Dims&, const Exec&) { none("delta_decode"); }
void snapshot_decode(const DeltaStep&, const Tensor&, const Tensor&, const Tensor&, const Dims&,
                     const Exec&) {
  none("delta_snapshot_decode");
}
void prefill(const DeltaPrefill&, const DeltaPool&, const Dims&, const Exec&) { none("delta_prefill"); }
void replay_step(const DeltaStep&, const DeltaPool&, const Tensor&, bool, const Dims&, const Exec&) {
  none("delta_replay_step");
}
void commit(const DeltaPool&, const Tensor&, int64_t, const Tensor&, const Dims&, const Exec&) {
  none("delta_commit");
}
void materialize(const DeltaPool&, const Tensor&, int64_t, const Tensor&, const Dims&, const Exec&) {
  none("delta_materialize");
}
void flush(const DeltaPool&, const Tensor&, int64_t, const Dims&, const Exec&) { none("delta_flush"); }
void dual_replay_step(const DeltaStep&, const DeltaPool&, const QuantLayout&, const Tensor&, bool, const Dims&,
                      const Exec&) {
  none("delta_replay_step");
}
void dual_prefill(const DeltaPrefill&, const DeltaPool&, const QuantLayout&, const Dims&, const Exec&) {
  none("delta_prefill");
}
void dual_materialize(const DeltaPool&, const QuantLayout&, const Tensor&, int64_t, const Tensor&, const Dims&,
                      const Exec&) {
  none("delta_materialize");
}
void dual_flush(const DeltaPool&, const QuantLayout&, const Tensor&, int64_t, const Dims&, const Exec&) {
  none("delta_flush");
}
void dual_pack(const DeltaPool&, const QuantLayout&, const Tensor&, int64_t, const Dims&, const Exec&) {
  none("delta_reset_slot");
}
size_t workspace_bytes(SsmOp, const Dims&) { return 0; }

}  // namespace replayssm::delta::cuda
#endif
