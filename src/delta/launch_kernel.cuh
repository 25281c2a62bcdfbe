// The delta kernels' launch: the shared-memory opt-in, then a plain or a
// programmatic dependent launch (Launch::dependent). Included by the
// instantiation units (kernels.cuh, the dual fold units).
#pragma once
#include "cuda/common.cuh"
#include "cuda/runtime.h"
#include "delta/kernels.h"

namespace replayssm::delta::cuda_impl {

// Kernels above 48 KiB of dynamic shared memory opt in once per kernel and
// device (cuda_util::SmemLimit; not a stream operation, so safe during graph
// capture), CARVEOUT with the whole carveout (several resident blocks of a
// large-shared-memory kernel need it). One limit per kernel: K is a
// template argument, so every instance has its own static.
template <auto K, bool CARVEOUT = true>
inline void launch_kernel(const Launch& l, const auto& args) {
  static cuda_util::SmemLimit limit;
  limit.ensure(reinterpret_cast<const void*>(K), l.smem, "delta kernel launch", CARVEOUT);
  const dim3 grid(l.grid[0], l.grid[1], l.grid[2]);
  const cudaStream_t st = reinterpret_cast<cudaStream_t>(l.stream);
  if (l.dependent) (void)cuda_util::launch_dependent(K, grid, dim3(l.threads), l.smem, st, args);  // errors: check_launch
  else K<<<grid, l.threads, l.smem, st>>>(args);
}

}  // namespace replayssm::delta::cuda_impl
