// Delta kernels with bf16 state (both families).
#include "delta/kernels.cuh"

namespace replayssm::delta::cuda_impl {
RSSM_DELTA_INSTANTIATE(DType::bf16)
}  // namespace replayssm::delta::cuda_impl
