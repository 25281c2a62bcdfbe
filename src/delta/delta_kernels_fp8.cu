// Delta replay kernel on an fp8 read copy (dual pools, both families).
#include "delta/kernels.cuh"

namespace replayssm::delta::cuda_impl {
RSSM_DELTA_INSTANTIATE_QUANT(QF_FP8)
}  // namespace replayssm::delta::cuda_impl
