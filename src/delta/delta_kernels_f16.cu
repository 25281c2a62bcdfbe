// Delta kernels with f16 state (both families).
#include "delta/kernels.cuh"

namespace replayssm::delta::cuda_impl {
RSSM_DELTA_INSTANTIATE(DType::f16)
}  // namespace replayssm::delta::cuda_impl
