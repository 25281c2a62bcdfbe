// Independent oracle of the read-copy formats (Backend::reference and tests).
// Shares no arithmetic with codec.h or quant.cuh: values come from the format
// definitions (sign, exponent, mantissa fields via ldexp), encoding scans the
// sorted list of representable values for the nearest one in exact double
// arithmetic, ties to the even code, and scale rules use double arithmetic
// rounded once to fp32 wherever the definition names an fp32 operation
// (double has >= 2·24 + 2 bits, so that equals the fp32 operation).
#pragma once
#include <cstdint>

#include "replayssm/quant.h"

namespace replayssm::quant::oracle {

// Value of a code (NaN for the NaN codes).
double e4m3_value(uint8_t code);
double e2m1_value(uint8_t nibble);
double bf16_value(uint16_t code);
double f16_value(uint16_t code);

// Nearest representable value, ties to the even code, saturating finite
// values to the largest finite one (E4M3 448, E2M1 6). E4M3: NaN → 0x7F,
// ±Inf → 0x7F | sign. E2M1 takes no NaN. bf16 / f16 follow IEEE: overflow
// rounds to ±Inf; NaN → the canonical quiet NaN (bf16 0x7FC0, f16 0x7E00).
uint8_t e4m3_encode(double v);
uint8_t e2m1_encode(double v);
uint16_t bf16_encode(float v);
uint16_t f16_encode(float v);

// Smallest k >= -127 with amax · 2^-k <= 448.
int fp8_block_exp(double amax);

void pack_tile(const QuantLayout& L, const float* x, int64_t ld, uint8_t* tile);
void unpack_tile(const QuantLayout& L, const uint8_t* tile, float* y, int64_t ld);

}  // namespace replayssm::quant::oracle
