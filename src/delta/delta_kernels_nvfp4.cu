// Delta replay kernel on an nvfp4 read copy (dual pools, both families).
#include "delta/kernels.cuh"

namespace replayssm::delta::cuda_impl {
RSSM_DELTA_INSTANTIATE_QUANT(QF_NVFP4)
}  // namespace replayssm::delta::cuda_impl
