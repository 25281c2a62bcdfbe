// Mamba-2 kernels with bf16 state, for every activation dtype.
#include "mamba2/launch_impl.cuh"

RSSM_MAMBA2_INSTANTIATE(replayssm::DType::bf16)
