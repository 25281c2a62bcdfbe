// Delta kernels with f32 state (both families).
#include "delta/kernels.cuh"

namespace replayssm::delta::cuda_impl {
RSSM_DELTA_INSTANTIATE(DType::f32)
}  // namespace replayssm::delta::cuda_impl
