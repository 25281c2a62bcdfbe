// Dual-precision GDN/KDA pools (pool.read_copy, ring_v or ring_beta set)
// (include/replayssm/dual.h, docs/dual_precision.md). On the reference and
// cpu backends the public entry points of api.cpp hand such pools to the
// functions below; on the cuda backend api.cpp validates the pool as a single
// pool plus check_device_pool and calls delta::cuda::dual_* (delta_launch.cu,
// dual_fold.cuh); copy_slot and reset_slot serve both.
#pragma once
#include <utility>
#include <vector>

#include "replayssm/delta.h"
#include "replayssm/quant.h"

namespace replayssm::delta::dual {

inline bool requested(const DeltaPool& pool) {
  return pool.read_copy.defined() || pool.ring_v.defined() || pool.ring_beta.defined();
}

// The cuda backend: validates the dual tensors of a device pool (read_copy;
// with rings, or need_rings, also ring_v and ring_beta) and returns the
// copy's tile layout. The single-precision tensors are the caller's to check.
QuantLayout check_device_pool(const char* fn, DeltaFamily f, const DeltaPool& pool, bool need_rings,
                              const Exec& exec);

void replay_step(DeltaFamily f, const DeltaStep& step, const DeltaPool& pool,
                 const Tensor& num_accepted, bool commit_all, const Exec& exec);
void prefill(DeltaFamily f, const DeltaPrefill& prefill, const DeltaPool& pool, const Exec& exec);
void materialize(DeltaFamily f, const DeltaPool& pool, const Tensor& slot, int64_t pad_slot_id,
                 const Tensor& out, const Exec& exec);
void flush(DeltaFamily f, const DeltaPool& pool, const Tensor& slot, int64_t pad_slot_id,
           const Exec& exec);
void copy_slot(DeltaFamily f, const DeltaPool& pool, const Tensor& src, const Tensor& dst,
               int64_t pad_slot_id, const Exec& exec);
void reset_slot(DeltaFamily f, const DeltaPool& pool, const Tensor& slot, int64_t pad_slot_id,
                const Exec& exec);

// The high-precision fold of a dual pool (design §4): for each committed
// record j of slot s, in order, d_j = β_j (v_j − S_{j−1}(α_j ⊙ k̂_j)) against
// the running state (rounded to ring_d's dtype), S_j = S_{j−1} Diag(α_j) +
// d_j k̂_jᵀ; out[o] = S_count in out's dtype. Reference: fp64; cpu: fp32.
// rows: pairs (s, o); pool must be validated.
void fold_rows(Backend backend, DeltaFamily f, const DeltaPool& pool,
               const std::vector<std::pair<int64_t, int64_t>>& rows, const Tensor& out,
               int threads);

}  // namespace replayssm::delta::dual
