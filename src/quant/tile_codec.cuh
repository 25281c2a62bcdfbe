// Device tile codec of the shared-quantised mode (include/replayssm/dual.h):
// decode of 4-element chunks of a packed tile and a block-wide encode of an
// fp32 tile [R, K], round to nearest even or stochastic. Bit exact with the
// CPU (quant.cpp::pack_tile, stochastic.cpp::pack_tile_stochastic): the same
// scale rules (src/quant/README.md), the same codecs (quant.cuh) and the same
// random bits, a splitmix64 hash of (seed, tile id, step, element index).
//
// Encode layout: the tile is cut into chunks of 4 consecutive values along K
// (chunk c of row r holds k = 4c .. 4c+3); thread-strided chunk i = r·⌈K/4⌉ + c
// with a warp on 32 consecutive chunks, so an FP8 block (32 values) is 8
// lanes and an NVFP4 block (16 values) 4 lanes of one warp, reduced by xor
// shuffles (K is a multiple of the block, so groups never straddle rows).
#pragma once
#include <cstdint>

#include "quant/backend.h"
#include "quant/quant.cuh"

namespace replayssm::quant::dev {

// The layout fields a kernel needs (quant_layout, padding_gaps).
struct TileFmt {
  ReadFormat format = ReadFormat::bf16;
  int64_t R = 0, K = 0;
  int64_t scale_offset = -1, tensor_scale_offset = -1;
  Gaps gaps;
};
inline TileFmt tile_fmt(const QuantLayout& L) {
  return TileFmt{L.format, L.R, L.K, L.scale_offset, L.tensor_scale_offset, padding_gaps(L)};
}

// ---- random bits (stochastic.cpp) -------------------------------------------

__device__ __forceinline__ uint64_t sr_mix(uint64_t z) {  // splitmix64 finaliser
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
__device__ __forceinline__ uint64_t sr_stream(uint64_t seed, uint64_t tile, uint64_t step) {
  return sr_mix(seed ^ sr_mix(tile ^ sr_mix(step)));
}
// Uniform in [0, 1) with 24 bits for element `elem` of stream `base`.
__device__ __forceinline__ float sr_uniform(uint64_t base, uint64_t elem) {
  return __uint2float_rn(uint32_t(sr_mix(base ^ (elem * 0xd1342543de82ef95ull)) >> 40)) * 0x1p-24f;
}

// ---- stochastic rounding on a code grid ---------------------------------------

// E2M1 magnitude of code c (0..7): 0, .5, 1, 1.5, 2, 3, 4, 6.
__device__ __forceinline__ float e2m1_mag(uint32_t c) {
  c &= 7u;
  return c < 2u ? 0.5f * float(c) : __uint_as_float((((c >> 1) + 126u) << 23) | ((c & 1u) << 22));
}

// One of the two representable neighbours of y: the round-to-nearest code,
// or its other neighbour with probability (|y| − v_rne)/(v_other − v_rne)
// (u < p). NaN / Inf, exact and saturated values keep the RNE code. enc:
// RNE code, dec: value of a magnitude code (codes ordered like their values).
template <class Enc, class Dec>
__device__ __forceinline__ uint32_t round_stochastic(float y, Enc enc, Dec dec, uint32_t sign_bit,
                                                     uint32_t max_code, float u) {
  const uint32_t rne = enc(y);
  if (!(fabsf(y) <= F32_MAX)) return rne;
  const float m = fabsf(y);
  const uint32_t cm = rne & ~sign_bit;
  const float vm = dec(cm);
  if (vm == m) return rne;
  uint32_t other;
  if (vm < m) {
    if (cm >= max_code) return rne;
    other = cm + 1;
  } else {
    if (cm == 0) return rne;
    other = cm - 1;
  }
  const float vo = dec(other);
  const float p = __fdiv_rn(__fsub_rn(m, vm), __fsub_rn(vo, vm));
  return u < p ? ((rne & sign_bit) | other) : rne;
}

__device__ __forceinline__ uint32_t bf16_code(float v, bool sr, float u) {
  if (!sr || v != v) return bf16_encode(v);
  return round_stochastic(v, [](float x) -> uint32_t { return bf16_encode(x); },
                          [](uint32_t c) { return __uint_as_float(c << 16); }, 0x8000u, 0x7F7Fu, u);
}
__device__ __forceinline__ uint32_t f16_code(float v, bool sr, float u) {
  if (!sr || v != v) return f16_encode(v);
  return round_stochastic(v, [](float x) -> uint32_t { return f16_encode(x); },
                          [](uint32_t c) { return __half2float(__ushort_as_half(uint16_t(c))); }, 0x8000u,
                          0x7BFFu, u);
}
__device__ __forceinline__ uint32_t e4m3_code(float y, bool sr, float u) {
  if (!sr) return e4m3_encode(y);
  return round_stochastic(y, [](float x) -> uint32_t { return e4m3_encode(x); },
                          [](uint32_t c) { return e4m3_decode(c); }, 0x80u, 0x7Eu, u);
}
__device__ __forceinline__ uint32_t e2m1_code(float y, bool sr, float u) {
  if (!sr) return e2m1_encode(y);
  return round_stochastic(y, [](float x) { return e2m1_encode(x); }, [](uint32_t c) { return e2m1_mag(c); },
                          8u, 7u, u);
}

// ---- decode -------------------------------------------------------------------

// Values k0 .. k0+3 of row r (k0 a multiple of 4; values at k >= K read 0),
// equal to quant_unpack's.
__device__ __forceinline__ void decode_chunk(const TileFmt& f, const uint8_t* tile, int64_t r, int64_t k0,
                                             float (&y)[4]) {
  const int64_t K = f.K;
  switch (f.format) {
    case ReadFormat::bf16:
    case ReadFormat::f16: {
      const uint16_t* c = reinterpret_cast<const uint16_t*>(tile) + r * K;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const uint32_t v = k0 + e < K ? c[k0 + e] : 0u;
        y[e] = f.format == ReadFormat::bf16 ? __uint_as_float(v << 16) : __half2float(__ushort_as_half(uint16_t(v)));
      }
      return;
    }
    case ReadFormat::fp8_e4m3: {
      const uint32_t w = *reinterpret_cast<const uint32_t*>(tile + r * K + k0);
      const float4 v = fp8_decode_word(w, tile[f.scale_offset + r * (K / 32) + k0 / 32]);
      y[0] = v.x, y[1] = v.y, y[2] = v.z, y[3] = v.w;
      return;
    }
    case ReadFormat::nvfp4: {
      const uint32_t w = *reinterpret_cast<const uint16_t*>(tile + r * (K / 2) + k0 / 2);
      const float sf = e4m3_decode(tile[f.scale_offset + r * (K / 16) + k0 / 16]);
      const float t = *reinterpret_cast<const float*>(tile + f.tensor_scale_offset);
      float e[8];
      e2m1x8_decode(w, e);
#pragma unroll
      for (int i = 0; i < 4; ++i) y[i] = __fmul_rn(__fmul_rn(e[i], sf), t);
      return;
    }
  }
}

// ---- encode -------------------------------------------------------------------

// Maximum over the block (blockDim.x a multiple of 32); every thread gets it.
__device__ __forceinline__ float block_max(float v) {
  __shared__ float warp_max[32];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = v;
  __syncthreads();
  v = warp_max[0];
  for (int w = 1; w < int(blockDim.x >> 5); ++w) v = fmaxf(v, warp_max[w]);
  __syncthreads();
  return v;
}

// Max / and over aligned groups of `width` lanes (a power of two <= 32).
__device__ __forceinline__ float group_max(float v, int width) {
  for (int o = width >> 1; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ int group_and(int v, int width) {
  for (int o = width >> 1; o > 0; o >>= 1) v &= __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Packs the fp32 tile x(r, k) into `tile` (every byte, padding zeroed), as
// quant_pack (sr = false) or quant_pack_stochastic with stream `base`
// (sr_stream(seed, tile id, step)). Block-wide: every thread of the block
// must call it; nvfp4 syncs the block (the tile scale needs the whole tile).
template <class Src>
__device__ void encode_tile(const TileFmt& f, const Src& x, uint8_t* tile, bool sr, uint64_t base) {
  const int64_t R = f.R, K = f.K;
#pragma unroll
  for (int g = 0; g < 3; ++g)
    for (int64_t i = f.gaps.begin[g] + threadIdx.x; i < f.gaps.end[g]; i += blockDim.x) tile[i] = 0;
  float t = 0.f;
  if (f.format == ReadFormat::nvfp4) {
    float amax = 0.f;
    for (int64_t i = threadIdx.x; i < R * K; i += blockDim.x) amax = fmaxf(amax, finite_abs(x(i / K, i % K)));
    t = nvfp4_tensor_scale(block_max(amax));
    if (threadIdx.x == 0) *reinterpret_cast<float*>(tile + f.tensor_scale_offset) = t;
  }
  const int lane = int(threadIdx.x & 31);
  const int64_t CR = (K + 3) / 4, total = R * CR, step = int64_t(blockDim.x);
  for (int64_t i0 = int64_t(threadIdx.x) - lane; i0 < total; i0 += step) {  // warp-uniform trip count
    const int64_t i = i0 + lane;
    const bool in = i < total;
    const int64_t r = in ? i / CR : 0, k0 = in ? (i % CR) * 4 : 0;
    float v[4], u[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      v[e] = in && k0 + e < K ? x(r, k0 + e) : 0.f;
      if (sr) u[e] = sr_uniform(base, uint64_t(r * K + k0 + e));
    }
    switch (f.format) {
      case ReadFormat::bf16:
      case ReadFormat::f16: {
        if (!in) break;
        uint16_t* c = reinterpret_cast<uint16_t*>(tile) + r * K;
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (k0 + e < K)
            c[k0 + e] = uint16_t(f.format == ReadFormat::bf16 ? bf16_code(v[e], sr, u[e]) : f16_code(v[e], sr, u[e]));
        break;
      }
      case ReadFormat::fp8_e4m3: {
        float a = 0.f;
#pragma unroll
        for (int e = 0; e < 4; ++e) a = fmaxf(a, finite_abs(v[e]));
        const int kx = fp8_block_exp(group_max(a, 8));
        const float m = exp2i(-kx);
        uint32_t w = 0u;
#pragma unroll
        for (int e = 0; e < 4; ++e) w |= e4m3_code(__fmul_rn(v[e], m), sr, u[e]) << (8 * e);
        if (in) {
          *reinterpret_cast<uint32_t*>(tile + r * K + k0) = w;
          if (k0 % 32 == 0) tile[f.scale_offset + r * (K / 32) + k0 / 32] = uint8_t(kx + 127);
        }
        break;
      }
      case ReadFormat::nvfp4: {
        float a = 0.f;
        int finite = 1;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float q = finite_abs(v[e]);
          finite &= q >= 0.f ? 1 : 0;
          a = fmaxf(a, q);
        }
        a = group_max(a, 4);
        finite = group_and(finite, 4);
        uint8_t s = 0x7F;  // a NaN or Inf poisons its block: scale NaN, codes 0
        uint32_t w = 0u;
        if (finite) {
          s = t > 0.f ? uint8_t(e4m3_encode(__fdiv_rn(a, __fmul_rn(6.f, t)))) : uint8_t(0);
          const float d = __fmul_rn(e4m3_decode(s), t);
          const float rcp = d > 0.f ? __fdiv_rn(1.f, d) : 0.f;
#pragma unroll
          for (int e = 0; e < 4; ++e) w |= e2m1_code(__fmul_rn(v[e], rcp), sr, u[e]) << (4 * e);
        }
        if (in) {
          *reinterpret_cast<uint16_t*>(tile + r * (K / 2) + k0 / 2) = uint16_t(w);
          if (k0 % 16 == 0) tile[f.scale_offset + r * (K / 16) + k0 / 16] = s;
        }
        break;
      }
    }
  }
}

}  // namespace replayssm::quant::dev
