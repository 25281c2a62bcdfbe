// Dual pools: the high-precision fold and repack kernel (dual_fold.cuh),
// every checkpoint dtype and both families.
#include "delta/dual_fold.cuh"
#include "delta/kernels.h"
#include "delta/launch_kernel.cuh"

namespace replayssm::delta::cuda_impl {

template <DType SD, bool KDA> void launch_dual_fold(const DualArgs& a, const Launch& l) {
  launch_kernel<delta_dual_fold_kernel<SD, KDA>, false>(l, a);  // without the carveout preference
}

template void launch_dual_fold<DType::f32, false>(const DualArgs&, const Launch&);
template void launch_dual_fold<DType::f32, true>(const DualArgs&, const Launch&);
template void launch_dual_fold<DType::bf16, false>(const DualArgs&, const Launch&);
template void launch_dual_fold<DType::bf16, true>(const DualArgs&, const Launch&);
template void launch_dual_fold<DType::f16, false>(const DualArgs&, const Launch&);
template void launch_dual_fold<DType::f16, true>(const DualArgs&, const Launch&);

}  // namespace replayssm::delta::cuda_impl
