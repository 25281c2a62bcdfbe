// Host scalar codecs of the read-copy formats (fast CPU path, bit tricks).
// The definitions they implement are in src/quant/README.md; the oracle in
// quant_oracle.cpp implements the same definitions by enumeration, and the
// device helpers in quant.cuh by hardware conversions and midpoint counts.
#pragma once
#include <cstdint>

#include "core/dtype.h"

namespace replayssm::quant {

inline constexpr float E4M3_MAX = 448.f;
inline constexpr float E2M1_MAX = 6.f;
inline constexpr uint8_t E4M3_NAN = 0x7F;       // also the code of +Inf inputs (0xFF for −Inf)
inline constexpr uint8_t E4M3_MAX_CODE = 0x7E;  // 448
inline constexpr float NVFP4_T_DIV = 2688.f;    // E4M3_MAX · E2M1_MAX
// An nvfp4 tile whose largest finite magnitude is below this is stored as
// zeros (t = 0). Above it every intermediate of the scale rule is a normal
// fp32 number: t ≥ 2^-111.4, s_b·t ≥ 2^-120.4, 1/(s_b·t) ≤ 2^120.4.
inline constexpr float NVFP4_MIN_AMAX = 0x1p-100f;
inline constexpr int E8M0_BIAS = 127;
inline constexpr int FP8_MIN_EXP = -127;  // smallest block exponent k (E8M0 byte 0)

// 2^k as fp32 for k in [-149, 127] (exact; subnormal below -126).
inline float exp2i(int k) {
  return k >= -126 ? bits_to_f32(uint32_t(k + 127) << 23) : bits_to_f32(1u << (k + 149));
}

// E4M3 encode: round to nearest even, saturate finite magnitudes to 448;
// NaN → 0x7F, ±Inf → 0x7F | sign.
inline uint8_t e4m3_encode(float v) {
  const uint32_t u = f32_to_bits(v);
  const uint8_t sign = uint8_t((u >> 24) & 0x80u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return E4M3_NAN;
  if (a == 0x7f800000u) return uint8_t(sign | E4M3_NAN);
  if (a >= 0x43e00000u) return uint8_t(sign | E4M3_MAX_CODE);  // |v| >= 448
  if (a < 0x3c800000u) {
    // |v| < 2^-6: the grid is m·2^-9, m = RNE(|v|·2^9) in [0, 8] (8 is the
    // code of 2^-6). Adding 2^23 rounds to an integer in the fp32 adder.
    const float f = bits_to_f32(a) * 512.f + 8388608.f;
    return uint8_t(sign | (f32_to_bits(f) - 0x4b000000u));
  }
  // Normal: RNE to 3 mantissa bits; a carry rolls into the exponent.
  const uint32_t r = a + 0x7ffffu + ((a >> 20) & 1u);
  return uint8_t(sign | ((((r >> 23) - 120u) << 3) | ((r >> 20) & 7u)));
}

// E4M3 decode (0x7F, 0xFF → NaN).
inline float e4m3_decode(uint8_t c) {
  const uint32_t sign = uint32_t(c & 0x80u) << 24, e = (c >> 3) & 0xFu, m = c & 7u;
  if (e == 15 && m == 7) return bits_to_f32(sign | 0x7fc00000u);
  if (e == 0) return bits_to_f32(sign | f32_to_bits(float(m) * 0x1p-9f));
  return bits_to_f32(sign | ((e + 120u) << 23) | (m << 20));
}

// E2M1 encode of a non-NaN value: round to nearest even on
// {0, 0.5, 1, 1.5, 2, 3, 4, 6}, saturate to 6; sign in bit 3.
inline uint8_t e2m1_encode(float v) {
  const uint32_t u = f32_to_bits(v);
  const uint8_t sign = uint8_t((u >> 28) & 8u);
  const uint32_t a = u & 0x7fffffffu;
  if (a >= 0x40c00000u) return uint8_t(sign | 7u);  // |v| >= 6
  if (a < 0x3f800000u) {                            // |v| < 1: m = RNE(2|v|) in [0, 2]
    const float f = bits_to_f32(a) * 2.f + 8388608.f;
    return uint8_t(sign | (f32_to_bits(f) - 0x4b000000u));
  }
  const uint32_t r = a + 0x1fffffu + ((a >> 22) & 1u);  // RNE to 1 mantissa bit
  return uint8_t(sign | ((((r >> 23) - 126u) << 1) | ((r >> 22) & 1u)));
}

inline float e2m1_decode(uint8_t nib) {
  static constexpr float MAG[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
  return bits_to_f32(f32_to_bits(MAG[nib & 7u]) | (uint32_t(nib & 8u) << 28));
}

// FP8 block exponent: the smallest k >= -127 with amax · 2^-k <= 448, for a
// finite amax >= 0. Writing amax = M·2^E (M in [1, 2)): k = E − 8 when
// M <= 1.75 (448 = 1.75·2^8), else E − 7.
inline int fp8_block_exp(float amax) {
  const uint32_t u = f32_to_bits(amax);
  if (u < 0x00800000u) return FP8_MIN_EXP;  // zero or subnormal
  const int k = int(u >> 23) - 135 + ((u & 0x7fffffu) > 0x600000u ? 1 : 0);
  return k < FP8_MIN_EXP ? FP8_MIN_EXP : k;
}

// NVFP4 tile scale t = amax / 2688 (0 below NVFP4_MIN_AMAX).
inline float nvfp4_tensor_scale(float amax) {
  return amax < NVFP4_MIN_AMAX ? 0.f : amax / NVFP4_T_DIV;
}

}  // namespace replayssm::quant
