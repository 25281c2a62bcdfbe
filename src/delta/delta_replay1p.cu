// The persistent T = 1 replay kernel (replay1p.cuh) for every state dtype,
// in a unit of its own (its six instances build beside the others).
#include "delta/kernels.cuh"
#include "delta/replay1p.cuh"

namespace replayssm::delta::cuda_impl {

template <DType SD, bool KDA> void launch_replay1p(const ReplayArgs& a, const Launch& l) {
  launch_kernel(delta_replay1p_kernel<SD, KDA>, l, a);
}

#define RSSM_R1P_INSTANTIATE(SD)                                                  \
  template void launch_replay1p<SD, false>(const ReplayArgs&, const Launch&); \
  template void launch_replay1p<SD, true>(const ReplayArgs&, const Launch&);
RSSM_R1P_INSTANTIATE(DType::f32)
RSSM_R1P_INSTANTIATE(DType::bf16)
RSSM_R1P_INSTANTIATE(DType::f16)

}  // namespace replayssm::delta::cuda_impl
