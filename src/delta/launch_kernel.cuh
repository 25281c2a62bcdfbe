// The delta kernels' launch: the shared-memory opt-in, then a plain or a
// programmatic dependent launch (Launch::dependent). Included by the
// instantiation units (kernels.cuh, the dual fold units).
#pragma once
#include "cuda/common.cuh"
#include "cuda/runtime.h"
#include "delta/kernels.h"

namespace replayssm::delta::cuda_impl {

// cuda_util::launch_smem with a Launch; CARVEOUT (the whole carveout for
// shared memory) by default, as several resident blocks of the
// large-shared-memory kernels need it. Errors: check_launch by the caller.
template <auto K, bool CARVEOUT = true>
inline void launch_kernel(const Launch& l, const auto& args) {
  cuda_util::launch_smem<K, CARVEOUT>(dim3(l.grid[0], l.grid[1], l.grid[2]), dim3(l.threads), l.smem,
                                      reinterpret_cast<cudaStream_t>(l.stream), l.dependent, l.fn, args);
}

}  // namespace replayssm::delta::cuda_impl
