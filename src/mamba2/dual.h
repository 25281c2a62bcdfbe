// Dual-precision Mamba-2 pools (pool.read_copy set): the public entry points
// of api.cpp hand such pools to these functions (include/replayssm/dual.h,
// docs/dual_precision.md). Host backends only.
#pragma once
#include "replayssm/mamba2.h"

namespace replayssm::mamba2::dual {

inline bool requested(const Mamba2Pool& pool) { return pool.read_copy.defined(); }

void replay_step(const Mamba2Step& step, const Mamba2Pool& pool, const Tensor& num_accepted,
                 bool commit_all, const Exec& exec);
void prefill(const Mamba2Prefill& prefill, const Mamba2Pool& pool, const Exec& exec);
void flush(const Mamba2Pool& pool, const Tensor& slot, int64_t pad_slot_id, const Exec& exec);
void copy_slot(const Mamba2Pool& pool, const Tensor& src, const Tensor& dst, int64_t pad_slot_id,
               const Exec& exec);
void reset_slot(const Mamba2Pool& pool, const Tensor& slot, int64_t pad_slot_id, const Exec& exec);

}  // namespace replayssm::mamba2::dual
