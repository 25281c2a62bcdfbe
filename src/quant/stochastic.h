// Internal interface of the stochastic-rounding pack (stochastic.cpp, the
// validating entry point; stochastic.cu, the cuda backend).
#pragma once
#include "replayssm/dual.h"

namespace replayssm::quant::cuda {

// quant_pack_stochastic on the device (validated arguments): in [n, R, K]
// f32, packed [n, tile_bytes] u8 (16-byte aligned tiles), tile_ids [n] i64
// or absent (tile i has id i); rounding.stochastic is true. Stream-ordered,
// no synchronisation. Bytes equal the CPU's for the same input.
void pack_stochastic(const QuantLayout& L, const Tensor& in, const Tensor& packed,
                     const Tensor& tile_ids, const QuantRounding& rounding, const Exec& exec);

}  // namespace replayssm::quant::cuda
