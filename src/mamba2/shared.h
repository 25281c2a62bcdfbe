// Shared-quantised Mamba-2 decode (include/replayssm/dual.h) on the cuda
// backend: the validation hook of api.cpp and the launcher of shared.cu.
#pragma once
#include "mamba2/backend.h"
#include "replayssm/dual.h"

namespace replayssm::mamba2 {

// Validates a decode step as mamba2_decode does (backend, shapes, dtypes,
// devices, strides, the slot vector's shape and device), without a state;
// fills B, T, H, P, G, N. Defined in api.cpp.
Dims check_decode_step(const char* fn, const Mamba2Step& step, const Exec& exec);

namespace cuda {
// packed_state [S, H, L.tile_bytes] u8 on the device, L = quant_layout(format, P, N);
// d from check_decode_step with S set. Slots are checked on the device: a
// call with a slot outside [0, S) (pad aside) writes nothing and reports
// STATUS_BAD_SLOT through exec.device_status.
void decode_shared(const Mamba2Step& step, const Tensor& packed_state, const QuantLayout& L,
                   const QuantRounding& rounding, const Dims& d, const Exec& exec);
}  // namespace cuda

}  // namespace replayssm::mamba2
