// Device encode/decode of the read-copy formats, in registers. Bit-exact
// with the host codecs (codec.h) and the oracle (quant_oracle.cpp); the
// definitions are in src/quant/README.md.
//
// FP8 E4M3 uses the sm_89+ hardware conversions (cvt.rn.satfinite.e4m3x2.f32,
// cvt.rn.f16x2.e4m3x2) through cuda_fp8.h. Hopper has no FP4 instructions:
// E2M1 encodes by one fma that rounds to the grid index (e2m1_encode) and
// decodes by moving the nibble's bits into an f16 (value · 2^-14, exact), no lookup table.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace replayssm::quant::dev {

inline constexpr float E4M3_MAX = 448.f;
inline constexpr float NVFP4_T_DIV = 2688.f;  // 448 · 6
inline constexpr float NVFP4_MIN_AMAX = 0x1p-100f;
inline constexpr float F32_MAX = 3.40282347e38f;

// 2^k for k in [-149, 127], exact.
__device__ __forceinline__ float exp2i(int k) {
  return k >= -126 ? __uint_as_float(uint32_t(k + 127) << 23) : __uint_as_float(1u << (k + 149));
}

// |v| if v is finite, else −1 (so max-reductions skip NaN and Inf).
__device__ __forceinline__ float finite_abs(float v) {
  const float a = fabsf(v);
  return a <= F32_MAX ? a : -1.f;
}

// The largest |x[i]| of N values as bits (non-negative floats order as
// integers, so an integer max); a result >= 0x7f800000 means a NaN or an
// Inf among them. For values in registers (x indexed by constants once
// unrolled).
template <int N>
__device__ __forceinline__ uint32_t abs_bits_max(const float* x) {
  uint32_t um = 0u;
#pragma unroll
  for (int i = 0; i < N; ++i) um = max(um, __float_as_uint(x[i]) & 0x7fffffffu);
  return um;
}

// ---- FP8 E4M3 -------------------------------------------------------------

// Two E4M3 codes of finite values, lo in bits 0..7: RNE, saturating to
// ±448, magnitudes below 2^-10 (fp32 subnormals included) to ±0 with their
// sign. The hardware conversion alone (cvt.rn.satfinite.e4m3x2.f32). Its
// result equals, on every fp32 bit pattern, that of the form with a guard
// that sent |v| < 2^-11 to ±0 first (QuantGpuExhaustive, all 2^32 inputs).
__device__ __forceinline__ uint32_t e4m3x2_encode_finite(float lo, float hi) {
  return __nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3);
}
// Any two values: as e4m3x2_encode_finite, then NaN → 0x7F, ±Inf → 0x7F | sign.
__device__ __forceinline__ uint32_t e4m3x2_encode(float lo, float hi) {
  uint32_t c = e4m3x2_encode_finite(lo, hi);
  if (!isfinite(lo)) c = (c & 0xFF00u) | (isinf(lo) && lo < 0.f ? 0xFFu : 0x7Fu);
  if (!isfinite(hi)) c = (c & 0x00FFu) | ((isinf(hi) && hi < 0.f ? 0xFFu : 0x7Fu) << 8);
  return c;
}
__device__ __forceinline__ uint8_t e4m3_encode(float v) { return uint8_t(e4m3x2_encode(v, 0.f)); }

// Exact E4M3 values of two codes (bits 0..7 → .x); NaN codes give NaN.
__device__ __forceinline__ float2 e4m3x2_decode(uint32_t c2) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(c2 & 0xFFFFu), __NV_E4M3);
  return __half22float2(*reinterpret_cast<const __half2*>(&h));
}
// The two codes of the low 16 bits as one f16x2 register (exact), low code first.
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t c2) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(c2 & 0xFFFFu), __NV_E4M3);
  return uint32_t(h.x) | (uint32_t(h.y) << 16);
}
__device__ __forceinline__ float e4m3_decode(uint32_t c) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t(c & 0xFFu), __NV_E4M3);
  return __half2float(*reinterpret_cast<const __half*>(&h));
}

// Smallest k >= -127 with amax · 2^-k <= 448 (amax finite, >= 0):
// amax = M·2^E, k = E − 8 when M <= 1.75, else E − 7.
__device__ __forceinline__ int fp8_block_exp(float amax) {
  const uint32_t u = __float_as_uint(amax);
  if (u < 0x00800000u) return -127;
  const int k = int(u >> 23) - 135 + ((u & 0x7fffffu) > 0x600000u ? 1 : 0);
  return max(k, -127);
}
// 2^-k for a k of fp8_block_exp: k <= 120 (the largest finite amax), so
// 2^-k is a normal float built from its exponent alone (exp2i without its
// subnormal branch).
__device__ __forceinline__ float fp8_block_mul(int k) { return __uint_as_float(uint32_t(127 - k) << 23); }

// One FP8 block of 32 values → 32 codes (codes[j] holds values 4j..4j+3,
// little-endian) and returns its E8M0 byte k + 127. The scale 2^-k is a
// power of two, so x·2^-k is exact down to E4M3's zero threshold.
__device__ __forceinline__ uint8_t fp8_encode_block(const float (&x)[32], uint32_t (&codes)[8]) {
  float amax = 0.f;
#pragma unroll
  for (int i = 0; i < 32; ++i) amax = fmaxf(amax, finite_abs(x[i]));
  const int k = fp8_block_exp(amax);
  const float m = exp2i(-k);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const uint32_t lo = e4m3x2_encode(__fmul_rn(x[4 * j], m), __fmul_rn(x[4 * j + 1], m));
    const uint32_t hi = e4m3x2_encode(__fmul_rn(x[4 * j + 2], m), __fmul_rn(x[4 * j + 3], m));
    codes[j] = lo | (hi << 16);
  }
  return uint8_t(k + 127);
}

// Decodes 4 FP8 codes of one word with block byte e: y = e4m3 · 2^(e−127), exact.
__device__ __forceinline__ float4 fp8_decode_word(uint32_t w, uint32_t e) {
  const float m = exp2i(int(e) - 127);
  const float2 a = e4m3x2_decode(w), b = e4m3x2_decode(w >> 16);
  return make_float4(__fmul_rn(a.x, m), __fmul_rn(a.y, m), __fmul_rn(b.x, m), __fmul_rn(b.y, m));
}

// ---- E2M1 / NVFP4 ----------------------------------------------------------

// E2M1 code of a non-NaN value, sign in bit 3, ties to the even code:
// 0 |.25| .5 |.75| 1 |1.25| 1.5 |1.75| 2 |2.5| 3 |3.5| 4 |5| 6. The code of
// |v| is its value's index on the grid, which is uniform on each binade
// range: rint(2a) on [0, 2), rint(a) + 2 on [2, 4), rint(a / 2) + 4 above,
// saturating at 7 (a clamped to 8 first). One fma forms it: a·s is exact
// (s a power of two) and adding 2^23 + offset rounds it to an integer, ties
// to even (the offsets are even), which the float's low mantissa bits then
// hold. Equal to the midpoint count (a > .25) + (a ≥ .75) + (a > 1.25) + (a ≥
// 1.75) + (a > 2.5) + (a ≥ 3.5) + (a > 5) on every non-NaN float (checked
// over all 2^32 bit patterns: experiments/2026-12-07_t59/e2m1_encode_check.cpp),
// in ~14 instructions instead of ~26.
__device__ __forceinline__ uint32_t e2m1_encode(float v) {
  const float a = fminf(fabsf(v), 8.f);
  const bool lt2 = a < 2.f, lt4 = a < 4.f;
  const float s = lt2 ? 2.f : lt4 ? 1.f : 0.5f, c = lt2 ? 8388608.f : lt4 ? 8388610.f : 8388612.f;
  const uint32_t k = __float_as_uint(fmaf(a, s, c)) - 0x4B000000u;
  return min(k, 7u) | ((__float_as_uint(v) >> 28) & 8u);
}

// Eight nibbles of a word → four half2, h[j] = (value 2j, value 2j+1) · 2^-14
// exactly: sign → bit 15, the 3 magnitude bits (e1 e0 m) → bits 11..9, so
// the E2M1 exponent lands in the f16 exponent's low bits and 0.5 on an f16
// subnormal. A GEMV folds the 2^14 into the block scale and stays in half2.
__device__ __forceinline__ void e2m1x8_to_half2(uint32_t w, __half2 (&h)[4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const uint32_t b = w >> (8 * j);
    const uint32_t bits = ((b & 0x8u) << 12) | ((b & 0x7u) << 9) | ((b & 0x80u) << 24) |
                          ((b & 0x70u) << 21);
    h[j] = *reinterpret_cast<const __half2*>(&bits);
  }
}

// The same bit moves, paired across the word's halves: p[i] = (value i,
// value i + 4) · 2^-14 (nibble i → bits 9..11 and 15, nibble i + 4 → bits
// 25..27 and 31), one shift pair and mask per register.
__device__ __forceinline__ void e2m1x8_to_f16x2_pairs(uint32_t w, uint32_t (&p)[4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t x = w >> (4 * i);
    p[i] = ((x << 9) & 0x0E000E00u) | ((x << 12) & 0x80008000u);
  }
}

// The k-steps of an nvfp4 sweep on tensor cores (m16n8k16 f16): words
// wa[j], wb[j] of a lane's 16 code bytes of a 16-row tile's rows g and
// g + 8 make the pairs above, and k-step 2j + s takes the A fragment
// {pa[2s], pb[2s], pa[2s + 1], pb[2s + 1]} (columns 2t, 2t + 1 from value
// 2s's pairs, 2t + 8, 2t + 9 from value 2s + 1's); step(j, s, a0, a1, a2, a3)
// issues the k-step's products (the GDN and Mamba-2 streams, with their own
// B operands and accumulators).
template <class Step>
__device__ __forceinline__ void e2m1_tc_ksteps(const uint32_t (&wa)[4], const uint32_t (&wb)[4], Step&& step) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    uint32_t pa[4], pb[4];
    e2m1x8_to_f16x2_pairs(wa[j], pa);
    e2m1x8_to_f16x2_pairs(wb[j], pb);
#pragma unroll
    for (int s = 0; s < 2; ++s) step(j, s, pa[2 * s], pb[2 * s], pa[2 * s + 1], pb[2 * s + 1]);
  }
}

// Exact E2M1 values of the eight nibbles of a word (nibble i → y[i]).
__device__ __forceinline__ void e2m1x8_decode(uint32_t w, float (&y)[8]) {
  __half2 h[4];
  e2m1x8_to_half2(w, h);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const float2 f = __half22float2(h[j]);
    y[2 * j] = __fmul_rn(f.x, 16384.f);
    y[2 * j + 1] = __fmul_rn(f.y, 16384.f);
  }
}

// 16 values of a packed row held by one lane of a streaming GEMV.
// FP8: 16 codes of one 32-value block, unscaled (the caller applies the
// block's power-of-two scale, exactly, to its sums).
__device__ __forceinline__ void fp8x16_decode_unscaled(uint4 w, float (&f)[16]) {
  const uint32_t ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    const float2 lo = e4m3x2_decode(ws[c]), hi = e4m3x2_decode(ws[c] >> 16);
    f[4 * c] = lo.x, f[4 * c + 1] = lo.y, f[4 * c + 2] = hi.x, f[4 * c + 3] = hi.y;
  }
}
// NVFP4: the 16 values of one block (8 bytes), block scale sf, tile scale t:
// (y · sf) · t per value, as quant_unpack.
__device__ __forceinline__ void nvfp4x16_decode(uint2 w, float sf, float t, float (&f)[16]) {
  float y[8];
  e2m1x8_decode(w.x, y);
#pragma unroll
  for (int e = 0; e < 8; ++e) f[e] = __fmul_rn(__fmul_rn(y[e], sf), t);
  e2m1x8_decode(w.y, y);
#pragma unroll
  for (int e = 0; e < 8; ++e) f[8 + e] = __fmul_rn(__fmul_rn(y[e], sf), t);
}

// NVFP4 tile scale t = amax / 2688 (0 below 2^-100); amax over finite values.
__device__ __forceinline__ float nvfp4_tensor_scale(float amax) {
  return amax < NVFP4_MIN_AMAX ? 0.f : __fdiv_rn(amax, NVFP4_T_DIV);
}

// E4M3 block scale s = E4M3(ab / (6t)) of an NVFP4 block whose finite
// values have amax ab, and rcp = 1/(s·t) (0 when s·t is 0), the factor its
// values take before E2M1 rounding.
__device__ __forceinline__ uint8_t nvfp4_block_scale(float ab, float t, float& rcp) {
  // ab <= the tile's amax = 2688·t, so ab / (6t) is finite (<= 448 after rounding)
  const uint8_t s = t > 0.f ? uint8_t(e4m3x2_encode_finite(__fdiv_rn(ab, __fmul_rn(6.f, t)), 0.f)) : uint8_t(0);
  const float d = __fmul_rn(e4m3_decode(s), t);
  rcp = d > 0.f ? __fdiv_rn(1.f, d) : 0.f;
  return s;
}

// One NVFP4 block of 16 values with tile scale t → 16 nibbles (codes[0]
// values 0..7, codes[1] values 8..15, value i in bits 4i..4i+3) and returns
// the E4M3 block scale s = E4M3(a_b / (6t)); elements encode E2M1(x · 1/(s·t)).
// A NaN or Inf in the block gives s = 0x7F (NaN) and zero codes.
__device__ __forceinline__ uint8_t nvfp4_encode_block(const float (&x)[16], float t,
                                                       uint32_t (&codes)[2]) {
  float ab = 0.f;
  bool finite = true;
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const float a = finite_abs(x[i]);
    finite = finite && a >= 0.f;
    ab = fmaxf(ab, a);
  }
  codes[0] = codes[1] = 0u;
  if (!finite) return 0x7F;
  float rcp;
  const uint8_t s = nvfp4_block_scale(ab, t, rcp);
#pragma unroll
  for (int i = 0; i < 16; ++i) codes[i / 8] |= e2m1_encode(__fmul_rn(x[i], rcp)) << (4 * (i % 8));
  return s;
}

// Decodes one NVFP4 block: y[i] = (e2m1_i · s) · t, the product e·s exact.
__device__ __forceinline__ void nvfp4_decode_block(const uint32_t (&codes)[2], uint32_t s, float t,
                                                   float (&y)[16]) {
  const float sf = e4m3_decode(s);
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    float e[8];
    e2m1x8_decode(codes[j], e);
#pragma unroll
    for (int i = 0; i < 8; ++i) y[8 * j + i] = __fmul_rn(__fmul_rn(e[i], sf), t);
  }
}

// ---- bf16 / f16 ------------------------------------------------------------

// RNE casts; NaN → the canonical quiet NaN (bf16 0x7FC0, f16 0x7E00).
__device__ __forceinline__ uint16_t bf16_encode(float v) {
  return isnan(v) ? uint16_t(0x7FC0) : __bfloat16_as_ushort(__float2bfloat16_rn(v));
}
__device__ __forceinline__ uint16_t f16_encode(float v) {
  return isnan(v) ? uint16_t(0x7E00) : __half_as_ushort(__float2half_rn(v));
}

}  // namespace replayssm::quant::dev
