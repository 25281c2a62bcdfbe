// The split T = 1 replay step's preparation kernel (both families; it reads
// records and token inputs only, so one instantiation serves every state dtype).
#include "delta/kernels.cuh"

namespace replayssm::delta::cuda_impl {
template void launch_replay1_prep<false>(const ReplayArgs&, const Launch&);
template void launch_replay1_prep<true>(const ReplayArgs&, const Launch&);
}  // namespace replayssm::delta::cuda_impl
