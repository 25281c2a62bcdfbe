// Dual pools: the high-precision fold and repack kernel (dual_fold.cuh),
// every checkpoint dtype and both families.
#include "delta/dual_fold.cuh"
#include "cuda/runtime.h"
#include "delta/kernels.h"

namespace replayssm::delta::cuda_impl {

template <DType SD, bool KDA> void launch_dual_fold(const DualArgs& a, const Launch& l) {
  auto k = delta_dual_fold_kernel<SD, KDA>;
  static cuda_util::SmemLimit limit;  // per device
  limit.ensure(reinterpret_cast<const void*>(k), l.smem, "delta dual fold");
  k<<<dim3(l.grid[0], l.grid[1], l.grid[2]), l.threads, l.smem, reinterpret_cast<cudaStream_t>(l.stream)>>>(a);
}

template void launch_dual_fold<DType::f32, false>(const DualArgs&, const Launch&);
template void launch_dual_fold<DType::f32, true>(const DualArgs&, const Launch&);
template void launch_dual_fold<DType::bf16, false>(const DualArgs&, const Launch&);
template void launch_dual_fold<DType::bf16, true>(const DualArgs&, const Launch&);
template void launch_dual_fold<DType::f16, false>(const DualArgs&, const Launch&);
template void launch_dual_fold<DType::f16, true>(const DualArgs&, const Launch&);

}  // namespace replayssm::delta::cuda_impl
