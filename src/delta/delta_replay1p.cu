// The persistent T = 1 replay step (replay1p.cuh): its preparation kernel
// (GDN, KDA; plain and dual steps) and its stream kernel for every state
// dtype and a dual pool's bf16 / f16 read copy, in a unit of its own (its
// fourteen instances build beside the others; the fp8 / nvfp4 copies'
// stream: delta_replay1p_quant.cu).
#include "delta/kernels.cuh"
#include "delta/replay1p.cuh"

namespace replayssm::delta::cuda_impl {

template <DType SD, bool KDA> void launch_replay1p(const ReplayArgs& a, const Launch& l) {
  if constexpr (SD != DType::f32)
    if (a.dual) return launch_kernel<delta_replay1p_kernel<SD, KDA, QF_NONE, true>>(l, a);  // a bf16 / f16 read copy
  launch_kernel<delta_replay1p_kernel<SD, KDA>>(l, a);
}
// the preparation's per-warp layout and result buffer, on the host
template <bool KDA> void launch_prep1(const ReplayArgs& a, const Launch& l) {
  ReplayArgs b = a;
  b.p1 = check_layout(p1_layout(KDA, a.in.K, a.rings.L, a.nh), "delta_prep1_kernel");
  b.p1res = check_layout(r1p_res(KDA, a.in.K, a.rings.L, a.nh, a.nh * a.in.V), "delta_prep1_kernel");
  if (a.dual) launch_kernel<delta_prep1_kernel<KDA, true>>(l, b);
  else launch_kernel<delta_prep1_kernel<KDA, false>>(l, b);
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
