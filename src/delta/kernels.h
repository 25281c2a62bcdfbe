// Typed launch entry points of the delta kernels, instantiated per state
// dtype in kernels_<dtype>.cu (kernels.cuh holds the definitions). Host only.
#pragma once
#include <cstddef>

#include "delta/params.h"

struct CUstream_st;

namespace replayssm::delta::cuda_impl {

struct Launch {
  unsigned grid[3];
  int threads;
  size_t smem;  // dynamic shared memory, bytes
  CUstream_st* stream;
  // Launched as the stream's previous kernel's programmatic dependent
  // (cuda_util::launch_dependent): it must wait (griddepcontrol.wait) before
  // reading what that kernel writes.
  bool dependent = false;
  // The API function, for errors raised at the launch (launch_kernel).
  const char* fn = "delta kernel launch";
};

template <DType SD, bool KDA> void launch_recurrent(const RecArgs& a, const Launch& l);
template <DType SD, bool KDA> void launch_replay(const ReplayArgs& a, const Launch& l);
// T > 1, K = 128: the replay kernel with its rows on tensor cores (replay.cuh, MMA).
template <DType SD, bool KDA> void launch_replay_mma(const ReplayArgs& a, const Launch& l);
template <DType SD, bool KDA> void launch_decode1(const RecArgs& a, const Launch& l);
// The replay step, eager (decode1.cuh); two_per_sm: the grid fits two resident blocks per SM.
template <DType SD, bool KDA> void launch_decode1_eager(const RecArgs& a, const Launch& l, bool two_per_sm);
template <DType SD, bool KDA> void launch_replay1(const ReplayArgs& a, const Launch& l);
template <DType SD, bool KDA> void launch_replay1_bulk(const ReplayArgs& a, const Launch& l);
// The persistent T = 1 step (replay1p.cuh; delta_replay1p.cu): its
// preparation kernel, then its stream kernel (a programmatic dependent).
template <DType SD, bool KDA> void launch_replay1p(const ReplayArgs& a, const Launch& l);
// its stream over a dual pool's fp8 / nvfp4 read copy (QF_FP8 / QF_NVFP4)
template <int QF, bool KDA> void launch_replay1p_quant(const ReplayArgs& a, const Launch& l);
template <bool KDA> void launch_prep1(const ReplayArgs& a, const Launch& l);
template <DType SD, bool KDA> void launch_fold(const FoldArgs& a, const Launch& l);
// Dual pools: the replay kernels (any T; T = 1) on an fp8 / nvfp4 read copy (delta_kernels_fp8.cu,
// delta_kernels_nvfp4.cu) and the high-precision fold + repack (dual_kernels.cu).
template <int QF, bool KDA> void launch_replay_quant(const ReplayArgs& a, const Launch& l);
// bulk: the bulk-copy stream of whole head tiles (delta_launch.cu::replay1_qbulk_fits)
template <int QF, bool KDA> void launch_replay1_quant(const ReplayArgs& a, const Launch& l, bool bulk);
template <DType SD, bool KDA> void launch_dual_fold(const DualArgs& a, const Launch& l);
template <DType SD, bool KDA> void launch_dual_fold_mma(const DualArgs& a, const Launch& l);  // dual_fold_mma_kernels.cu

}  // namespace replayssm::delta::cuda_impl
