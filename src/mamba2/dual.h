// Dual-precision Mamba-2 pools (pool.read_copy set; include/replayssm/dual.h,
// docs/dual_precision.md). On the host backends the public entry points of
// api.cpp hand such pools to the functions below. On the cuda backend they
// validate the pool as a single-precision pool plus check_device_copy and
// run the cuda backend, which keeps the copy itself (launch.cu,
// dual_pack.cu, replay_kernel.cuh).
#pragma once
#include "replayssm/mamba2.h"

namespace replayssm::mamba2::dual {

inline bool requested(const Mamba2Pool& pool) { return pool.read_copy.defined(); }
// A dual pool on the host backends (the cuda backend keeps its own path).
inline bool host_dual(const Mamba2Pool& pool, const Exec& exec) {
  return requested(pool) && exec.backend != Backend::cuda;
}

// Validates pool.read_copy (a device tensor [S, H, tile_bytes] u8 of
// pool.read_format's tile layout for [P, N] = pool.state's) for the cuda
// backend; pool.state is validated already.
void check_device_copy(const char* fn, const Mamba2Pool& pool);

void replay_step(const Mamba2Step& step, const Mamba2Pool& pool, const Tensor& num_accepted,
                 bool commit_all, const Exec& exec);
void prefill(const Mamba2Prefill& prefill, const Mamba2Pool& pool, const Exec& exec);
void flush(const Mamba2Pool& pool, const Tensor& slot, int64_t pad_slot_id, const Exec& exec);
void copy_slot(const Mamba2Pool& pool, const Tensor& src, const Tensor& dst, int64_t pad_slot_id,
               const Exec& exec);
void reset_slot(const Mamba2Pool& pool, const Tensor& slot, int64_t pad_slot_id, const Exec& exec);

}  // namespace replayssm::mamba2::dual
