// Host launchers of the Mamba-2 kernels, one explicit instantiation per
// (state dtype, activation dtype) in kernels_<state dtype>.cu; launch.cu
// holds the dispatch switch.
#pragma once
#include <cuda_runtime.h>

#include "mamba2/kernel_common.cuh"

namespace replayssm::mamba2::kern {

struct LaunchCfg {
  dim3 grid;
  size_t smem = 0;
  cudaStream_t stream = nullptr;
  int vpl = 1;  // vectors per lane (heuristics.h::RowGeometry)
  const char* fn = "";
};

template <DType SD, DType AD> void launch_replay(const Params& p, const LaunchCfg& c);
template <DType SD, DType AD> void launch_decode(const Params& p, const LaunchCfg& c);
template <DType SD, DType AD> void launch_fold(const Params& p, const LaunchCfg& c);
template <DType SD, DType AD> void launch_prefill(const Params& p, const LaunchCfg& c);

}  // namespace replayssm::mamba2::kern
