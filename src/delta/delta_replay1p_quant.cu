// The persistent T = 1 replay step's stream kernel (replay1p.cuh) over a
// dual pool's fp8 / nvfp4 read copy, in a unit of its own.
#include "delta/kernels.cuh"
#include "delta/replay1p.cuh"

namespace replayssm::delta::cuda_impl {

template <int QF, bool KDA> void launch_replay1p_quant(const ReplayArgs& a, const Launch& l) {
  launch_kernel<delta_replay1p_kernel<DType::f32, KDA, QF>>(l, a);
}

template void launch_replay1p_quant<QF_FP8, false>(const ReplayArgs&, const Launch&);
template void launch_replay1p_quant<QF_FP8, true>(const ReplayArgs&, const Launch&);
template void launch_replay1p_quant<QF_NVFP4, false>(const ReplayArgs&, const Launch&);
template void launch_replay1p_quant<QF_NVFP4, true>(const ReplayArgs&, const Launch&);

}  // namespace replayssm::delta::cuda_impl
