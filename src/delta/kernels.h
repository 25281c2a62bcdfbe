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
};

template <DType SD, bool KDA> void launch_recurrent(const RecArgs& a, const Launch& l);
template <DType SD, bool KDA> void launch_replay(const ReplayArgs& a, const Launch& l);
template <DType SD, bool KDA> void launch_decode1(const RecArgs& a, const Launch& l);
template <DType SD, bool KDA> void launch_replay1(const ReplayArgs& a, const Launch& l);
template <DType SD, bool KDA> void launch_fold(const FoldArgs& a, const Launch& l);

}  // namespace replayssm::delta::cuda_impl
