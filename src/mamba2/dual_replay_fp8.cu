// Dual-precision replay step streaming a fp8 read copy (replay_kernel.cuh,
// QF = QF_FP8), for every activation dtype. The checkpoint dtype does not enter
// the stream, so one instance per activation dtype serves all of them.
#include "mamba2/launch_impl.cuh"

namespace replayssm::mamba2::kern {

template <int QF, DType AD>
void launch_replay_packed(const Params& p, const LaunchCfg& c) {
  run_kernel<mamba2_replay_kernel<DType::f32, AD, HOT_VPL, QF>>(p, c);
}

template void launch_replay_packed<QF_FP8, DType::f32>(const Params&, const LaunchCfg&);
template void launch_replay_packed<QF_FP8, DType::f16>(const Params&, const LaunchCfg&);
template void launch_replay_packed<QF_FP8, DType::bf16>(const Params&, const LaunchCfg&);

// the bulk-copy T = 1 stream (launch_impl.cuh)
template void launch_replay1_packed<QF_FP8, DType::f32>(const Params&, const LaunchCfg&);
template void launch_replay1_packed<QF_FP8, DType::f16>(const Params&, const LaunchCfg&);
template void launch_replay1_packed<QF_FP8, DType::bf16>(const Params&, const LaunchCfg&);

}  // namespace replayssm::mamba2::kern
