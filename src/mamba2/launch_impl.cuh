// Definitions of the launcher templates; included only by the per-dtype
// instantiation units kernels_<state dtype>.cu.
#pragma once
#include <atomic>

#include "mamba2/decode_kernel.cuh"
#include "mamba2/launchers.cuh"
#include "mamba2/replay1_kernel.cuh"
#include "mamba2/replay_kernel.cuh"
#include "mamba2/slot_kernels.cuh"

namespace replayssm::mamba2::kern {

// One launch of K (cuda_util::launch_smem: the shared-memory opt-in per
// kernel and device, plain or programmatic dependent), checked.
template <auto K>
void run_kernel(const Params& p, const LaunchCfg& c) {
  if (c.grid.x == 0) return;
  cuda_util::launch_smem<K>(c.grid, dim3(KERNEL_THREADS), c.smem, c.stream, c.dependent, c.fn, p);
  cuda_util::check_launch(c.fn);
}

// The hot kernels have one instance: HOT_VPL vectors per lane (lanes with
// fewer skip the rest; heuristics.h::hot_geometry).
template <DType SD, DType AD> void launch_replay(const Params& p, const LaunchCfg& c) {
  run_kernel<mamba2_replay_kernel<SD, AD, HOT_VPL>>(p, c);
}
// T = 1: the FMA stream; T > 1 (speculative steps): the tensor-core stream.
template <DType SD, DType AD> void launch_replay1(const Params& p, const LaunchCfg& c) {
  if (p.T == 1) run_kernel<mamba2_replay1_kernel<SD, AD, false>>(p, c);
  else run_kernel<mamba2_replay1_kernel<SD, AD, true>>(p, c);
}
// Packed read copies (instantiated by dual_replay_fp8.cu / dual_replay_nvfp4.cu).
template <int QF, DType AD> void launch_replay1_packed(const Params& p, const LaunchCfg& c) {
  run_kernel<mamba2_replay1_kernel<DType::bf16, AD, false, QF>>(p, c);
}
template <DType SD, DType AD> void launch_decode(const Params& p, const LaunchCfg& c) {
  if (p.eager) run_kernel<mamba2_decode_kernel<SD, AD, HOT_VPL, true>>(p, c);
  else if (p.big > 0) run_kernel<mamba2_decode_kernel<SD, AD, HOT_VPL, false, true>>(p, c);
  else run_kernel<mamba2_decode_kernel<SD, AD, HOT_VPL>>(p, c);
}
// Slot operations are not on the per-token path: one VPL = 2 instance
// serves every N (lanes with no second vector skip it).
template <DType SD, DType AD> void launch_fold(const Params& p, const LaunchCfg& c) {
  run_kernel<mamba2_fold_kernel<SD, AD, MAX_VPL>>(p, c);
}
template <DType SD, DType AD> void launch_prefill(const Params& p, const LaunchCfg& c) {
  run_kernel<mamba2_prefill_kernel<SD, AD, MAX_VPL>>(p, c);
}

}  // namespace replayssm::mamba2::kern

// Instantiates every launcher for one state dtype and the three activation
// dtypes (use at global scope).
#define RSSM_MAMBA2_INSTANTIATE_ONE(SD, AD)                                                       \
  template void replayssm::mamba2::kern::launch_replay<SD, AD>(const replayssm::mamba2::kern::Params&, const replayssm::mamba2::kern::LaunchCfg&);  \
  template void replayssm::mamba2::kern::launch_replay1<SD, AD>(const replayssm::mamba2::kern::Params&, const replayssm::mamba2::kern::LaunchCfg&); \
  template void replayssm::mamba2::kern::launch_decode<SD, AD>(const replayssm::mamba2::kern::Params&, const replayssm::mamba2::kern::LaunchCfg&);  \
  template void replayssm::mamba2::kern::launch_fold<SD, AD>(const replayssm::mamba2::kern::Params&, const replayssm::mamba2::kern::LaunchCfg&);    \
  template void replayssm::mamba2::kern::launch_prefill<SD, AD>(const replayssm::mamba2::kern::Params&, const replayssm::mamba2::kern::LaunchCfg&);
#define RSSM_MAMBA2_INSTANTIATE(SD)                        \
  RSSM_MAMBA2_INSTANTIATE_ONE(SD, replayssm::DType::f32)  \
  RSSM_MAMBA2_INSTANTIATE_ONE(SD, replayssm::DType::f16)  \
  RSSM_MAMBA2_INSTANTIATE_ONE(SD, replayssm::DType::bf16)
