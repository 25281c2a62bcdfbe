// Shared-quantised Mamba-2 decode (one packed state for the recurrence and
// the reads) and pool sizing per precision mode. docs/dual_precision.md.
#include <string>

#include "core/check.h"
#include "core/dual_util.h"
#include "mamba2/shared.h"
#include "replayssm/dual.h"

namespace replayssm {

void mamba2_decode_shared(const Mamba2Step& step, const Tensor& packed_state, ReadFormat format,
                          const QuantRounding& rounding, const Exec& exec) {
  const char* fn = "mamba2_decode_shared";
  const bool cuda = exec.backend == Backend::cuda;
  if (!cuda) dual::require_host(fn, exec, "the shared-quantised mode");
  check::present(fn, "x", step.x);
  check::require(step.x.ndim == 4, fn, "x", "expected shape [B, T, H, P], got " + step.x.shape_str());
  check::present(fn, "Bm", step.Bm);
  check::require(step.Bm.ndim == 4, fn, "Bm", "expected shape [B, T, G, N], got " + step.Bm.shape_str());
  check::present(fn, "packed_state", packed_state);
  check::require(packed_state.ndim == 3, fn, "packed_state",
                 "expected shape [S, H, tile_bytes], got " + packed_state.shape_str());
  const int64_t B = step.x.shape[0], H = step.x.shape[2], P = step.x.shape[3], N = step.Bm.shape[3];
  const int64_t S = packed_state.shape[0];
  if (cuda) {
    // Device tensors; slots are checked on the device (mamba2/shared.h).
    const QuantLayout L = dual::check_packed_pool(fn, "packed_state", packed_state, format, S, H, P, N, &exec);
    mamba2::Dims d = mamba2::check_decode_step(fn, step, exec);
    d.S = S;
    return mamba2::cuda::decode_shared(step, packed_state, L, rounding, d, exec);
  }
  const QuantLayout L = dual::check_packed_pool(fn, "packed_state", packed_state, format, S, H, P, N);
  const std::vector<int64_t> idx = dual::checked_slots(fn, "slot", step.slot, step.pad_slot_id, S, B);
  dual::shared_decode(fn, packed_state, L, idx, rounding, exec, [&](const Tensor& st, const Tensor& slots) {
    Mamba2Step s2 = step;
    s2.slot = slots;
    s2.pad_slot_id = -1;
    mamba2_decode(s2, st, exec);
  });
}

int64_t mamba2_tile_bytes(ReadFormat format, const Mamba2Shape& s) {
  check::positive("mamba2_tile_bytes", "shape.P", s.P);
  check::positive("mamba2_tile_bytes", "shape.N", s.N);
  return quant_layout(format, s.P, s.N).tile_bytes;
}

int64_t mamba2_state_bytes_per_row(PrecisionMode mode, const Mamba2Shape& s, DType state,
                                   ReadFormat format, DType act, int64_t L, int64_t T_max) {
  const char* fn = "mamba2_state_bytes_per_row";
  check::positive(fn, "shape.H", s.H);
  switch (mode) {
    case PrecisionMode::single: return mamba2_replay_bytes_per_row(s, state, act, L, T_max);
    case PrecisionMode::dual:
      return mamba2_replay_bytes_per_row(s, state, act, L, T_max) + s.H * mamba2_tile_bytes(format, s);
    case PrecisionMode::shared: return s.H * mamba2_tile_bytes(format, s);
  }
  check::fail(fn, "mode", "expected single | dual | shared");
}

}  // namespace replayssm

#if !defined(REPLAYSSM_WITH_CUDA)
// Builds without the CUDA backend.
void replayssm::mamba2::cuda::decode_shared(const Mamba2Step&, const Tensor&, const QuantLayout&,
                                            const QuantRounding&, const Dims&, const Exec&) {
  throw Error("mamba2_decode_shared", "exec", "this build of replayssm has no CUDA backend");
}
#endif
