// Shared-quantised GDN/KDA decode (include/replayssm/dual.h) on the cuda
// backend: the validation hook of api.cpp and the launcher of delta_shared.cu.
#pragma once
#include "delta/backend.h"
#include "delta/params.h"
#include "replayssm/dual.h"

namespace replayssm::delta {

// Validates a decode step as delta_decode does (family, backend, shapes,
// dtypes, devices, strides, gating, the slot vector's shape and device),
// without a state; fills family, B, T, H, HV, K, V. Defined in api.cpp.
Dims check_decode_step(const char* fn, DeltaFamily f, const DeltaStep& step, const Exec& exec);

namespace cuda {
// packed_state [S, HV, L.tile_bytes] u8 on the device, L = quant_layout(format, V, K);
// d from check_decode_step with S set. Slots are checked on the device: a
// call with a slot outside [0, S) (pad aside) writes nothing and reports
// STATUS_BAD_SLOT through exec.device_status.
void decode_shared(const DeltaStep& step, const Tensor& packed_state, const QuantLayout& L,
                   const QuantRounding& rounding, const Dims& d, const Exec& exec);
// The token inputs of a step [B, T, ...] as every delta kernel takes them
// (delta_launch.cu).
cuda_impl::TokenArgs step_tokens(const DeltaStep& step, const Dims& d);
}  // namespace cuda

}  // namespace replayssm::delta
