// The persistent T = 1 replay step (replay1p.cuh): its preparation kernel
// (GDN, KDA) and its stream kernel for every state dtype, in a unit of its
// own (its eight instances build beside the others; the packed read copies'
// stream: delta_replay1p_quant.cu).
#include "delta/kernels.cuh"
#include "delta/replay1p.cuh"

namespace replayssm::delta::cuda_impl {

template <DType SD, bool KDA> void launch_replay1p(const ReplayArgs& a, const Launch& l) {
  launch_kernel(delta_replay1p_kernel<SD, KDA>, l, a);
}
template <bool KDA> void launch_prep1(const ReplayArgs& a, const Launch& l) {
  launch_kernel(delta_prep1_kernel<KDA>, l, a);
}

#define RSSM_R1P_INSTANTIATE(SD)                                                  \
  template void launch_replay1p<SD, false>(const ReplayArgs&, const Launch&); \
  template void launch_replay1p<SD, true>(const ReplayArgs&, const Launch&);
RSSM_R1P_INSTANTIATE(DType::f32)
RSSM_R1P_INSTANTIATE(DType::bf16)
RSSM_R1P_INSTANTIATE(DType::f16)
template void launch_prep1<false>(const ReplayArgs&, const Launch&);
template void launch_prep1<true>(const ReplayArgs&, const Launch&);

}  // namespace replayssm::delta::cuda_impl
