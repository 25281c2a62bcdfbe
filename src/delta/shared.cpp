// Shared-quantised GDN/KDA decode (one packed state for the recurrence and
// the reads) and pool sizing per precision mode. docs/dual_precision.md.
#include <string>

#include "core/check.h"
#include "core/dual_util.h"
#include "delta/shared.h"
#include "replayssm/dual.h"

namespace replayssm {

void delta_decode_shared(DeltaFamily f, const DeltaStep& step, const Tensor& packed_state,
                         ReadFormat format, const QuantRounding& rounding, const Exec& exec) {
  const char* fn = "delta_decode_shared";
  const bool cuda = exec.backend == Backend::cuda;
  if (!cuda) dual::require_host(fn, exec, "the shared-quantised mode");
  check::present(fn, "k", step.k);
  check::require(step.k.ndim == 4, fn, "k", "expected shape [B, T, H, K], got " + step.k.shape_str());
  check::present(fn, "v", step.v);
  check::require(step.v.ndim == 4, fn, "v", "expected shape [B, T, HV, V], got " + step.v.shape_str());
  check::present(fn, "packed_state", packed_state);
  check::require(packed_state.ndim == 3, fn, "packed_state",
                 "expected shape [S, HV, tile_bytes], got " + packed_state.shape_str());
  const int64_t B = step.v.shape[0], HV = step.v.shape[2], V = step.v.shape[3], K = step.k.shape[3];
  const int64_t S = packed_state.shape[0];
  if (cuda) {
    // Device tensors; slots are checked on the device (delta/shared.h).
    const QuantLayout L = dual::check_packed_pool(fn, "packed_state", packed_state, format, S, HV, V, K, &exec);
    delta::Dims d = delta::check_decode_step(fn, f, step, exec);
    d.S = S;
    return delta::cuda::decode_shared(step, packed_state, L, rounding, d, exec);
  }
  const QuantLayout L = dual::check_packed_pool(fn, "packed_state", packed_state, format, S, HV, V, K);
  const std::vector<int64_t> idx = dual::checked_slots(fn, "slot", step.slot, step.pad_slot_id, S, B);
  dual::shared_decode(fn, packed_state, L, idx, rounding, exec, [&](const Tensor& st, const Tensor& slots) {
    DeltaStep s2 = step;
    s2.slot = slots;
    s2.pad_slot_id = -1;
    delta_decode(f, s2, st, exec);
  });
}

int64_t delta_tile_bytes(ReadFormat format, const DeltaShape& s) {
  check::positive("delta_tile_bytes", "shape.V", s.V);
  check::positive("delta_tile_bytes", "shape.K", s.K);
  return quant_layout(format, s.V, s.K).tile_bytes;
}

int64_t delta_state_bytes_per_row(PrecisionMode mode, DeltaFamily f, const DeltaShape& s,
                                  DType state, ReadFormat format, DType act, DType d_dtype,
                                  int64_t L, int64_t T_max) {
  const char* fn = "delta_state_bytes_per_row";
  check::positive(fn, "shape.HV", s.HV);
  switch (mode) {
    case PrecisionMode::single: return delta_replay_bytes_per_row(f, s, state, act, d_dtype, L, T_max);
    case PrecisionMode::dual: {
      // + the copy, + per ring entry v_j (dtype of v) and β_j (f32).
      const int64_t R = delta_ring_length(L, T_max);
      return delta_replay_bytes_per_row(f, s, state, act, d_dtype, L, T_max) +
             s.HV * delta_tile_bytes(format, s) + R * s.HV * (s.V * int64_t(dtype_size(act)) + 4);
    }
    case PrecisionMode::shared: return s.HV * delta_tile_bytes(format, s);
  }
  check::fail(fn, "mode", "expected single | dual | shared");
}

}  // namespace replayssm

#if !defined(REPLAYSSM_WITH_CUDA)
// Builds without the CUDA backend.
void replayssm::delta::cuda::decode_shared(const DeltaStep&, const Tensor&, const QuantLayout&,
                                           const QuantRounding&, const Dims&, const Exec&) {
  throw Error("delta_decode_shared", "exec", "this build of replayssm has no CUDA backend");
}
#endif
