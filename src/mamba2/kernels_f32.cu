// Mamba-2 kernels with f32 state, for every activation dtype.
#include "mamba2/launch_impl.cuh"

RSSM_MAMBA2_INSTANTIATE(replayssm::DType::f32)
