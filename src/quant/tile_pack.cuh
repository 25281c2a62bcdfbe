// Block-level pack of one state tile [R, K] inside another kernel (the
// dual-precision flushes repack the read copy right after folding the
// checkpoint). Writes exactly the bytes quant_pack writes (src/quant/README.md
// rules; same per-block codecs as quant_pack_kernel in quant.cu): padding
// zeroed, fp8 one thread per 32-value block, nvfp4 the tile's finite amax by
// a block reduction, then one thread per 16-value block. pack_row_quad packs
// a row held in registers by a quad (the tensor-core fold) to the same bytes.
#pragma once
#include "cuda/common.cuh"
#include "quant/quant.cuh"
#include "quant/tile_geom.h"

namespace replayssm::quant::dev {

// Maximum over the block (blockDim.x a multiple of 32); every thread gets it.
// All threads of the block must call it.
__device__ inline float block_max(float v) {
  __shared__ float warp_max[32];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();  // warp_max may still be read by a previous call
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = v;
  __syncthreads();
  v = warp_max[0];
  for (int w = 1; w < int(blockDim.x / 32); ++w) v = fmaxf(v, warp_max[w]);
  return v;
}

// Zeroes the tile's padding bytes (block-strided; every thread may call it).
__device__ __forceinline__ void zero_tile_gaps(uint8_t* tile, const TileGeom& g) {
#pragma unroll
  for (int i = 0; i < 3; ++i)
    for (int64_t b = g.gap_begin[i] + threadIdx.x; b < g.gap_end[i]; b += blockDim.x) tile[b] = 0;
}

// Packs x [R, K] (row stride ld elements, storage dtype D) into `tile`. Every
// thread of the block must call it (nvfp4 reduces over the block).
template <ReadFormat F, DType D>
__device__ void pack_tile_block(const typename cuda_util::Traits<D>::type* x, int64_t ld, uint8_t* tile,
                                const TileGeom& g) {
  using cuda_util::Traits;
  const int64_t R = g.R, K = g.K;
  const int nthr = int(blockDim.x);
  zero_tile_gaps(tile, g);
  if constexpr (F == ReadFormat::bf16 || F == ReadFormat::f16) {
    uint16_t* codes = reinterpret_cast<uint16_t*>(tile);
    for (int64_t i = threadIdx.x; i < R * K; i += nthr) {
      const float v = Traits<D>::load(x[(i / K) * ld + i % K]);
      codes[i] = F == ReadFormat::bf16 ? bf16_encode(v) : f16_encode(v);
    }
  } else if constexpr (F == ReadFormat::fp8_e4m3) {
    const int64_t nb = K / 32;
    for (int64_t i = threadIdx.x; i < R * nb; i += nthr) {
      const int64_t r = i / nb, b = i % nb;
      float v[32];
#pragma unroll
      for (int j = 0; j < 32; ++j) v[j] = Traits<D>::load(x[r * ld + b * 32 + j]);
      uint32_t c[8];
      tile[g.scale_offset + i] = fp8_encode_block(v, c);
      uint4* dst = reinterpret_cast<uint4*>(tile + r * K + b * 32);
      dst[0] = make_uint4(c[0], c[1], c[2], c[3]);
      dst[1] = make_uint4(c[4], c[5], c[6], c[7]);
    }
  } else {
    float amax = 0.f;
    for (int64_t i = threadIdx.x; i < R * K; i += nthr)
      amax = fmaxf(amax, finite_abs(Traits<D>::load(x[(i / K) * ld + i % K])));
    const float t = nvfp4_tensor_scale(block_max(amax));
    if (threadIdx.x == 0) *reinterpret_cast<float*>(tile + g.tensor_scale_offset) = t;
    const int64_t nb = K / 16;
    for (int64_t i = threadIdx.x; i < R * nb; i += nthr) {
      const int64_t r = i / nb, b = i % nb;
      float v[16];
#pragma unroll
      for (int j = 0; j < 16; ++j) v[j] = Traits<D>::load(x[r * ld + b * 16 + j]);
      uint32_t c[2];
      tile[g.scale_offset + i] = nvfp4_encode_block(v, t, c);
      *reinterpret_cast<uint2*>(tile + r * (K / 2) + b * 8) = make_uint2(c[0], c[1]);
    }
  }
}

// Row r of a K = 128 tile packed from the registers of a quad in the
// tensor-core row layout: lane t4 = lane % 4 holds v[4c + e] = x[r][16c +
// 4·t4 + e] (c < 8, e < 4), the values as stored. Writes the row's codes and
// block scales byte for byte as pack_tile_block (the block's amax and
// finiteness reduced over the quad); t: the nvfp4 tile scale, computed by the
// caller over the whole tile. Every lane of the warp must call it.
template <ReadFormat F>
__device__ __forceinline__ void pack_row_quad(const float (&v)[32], int64_t r, int t4, uint8_t* tile,
                                              const TileGeom& g, float t) {
  constexpr int K = 128;
  auto quad_max = [](auto x) {  // float, or the uint32 bits of non-negative floats
    x = max(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return max(x, __shfl_xor_sync(0xffffffffu, x, 2));
  };
  if constexpr (F == ReadFormat::bf16 || F == ReadFormat::f16) {
    auto enc = [](float x) { return uint32_t(F == ReadFormat::bf16 ? bf16_encode(x) : f16_encode(x)); };
    uint16_t* codes = reinterpret_cast<uint16_t*>(tile) + r * K + 4 * t4;
#pragma unroll
    for (int c = 0; c < 8; ++c)
      *reinterpret_cast<uint2*>(codes + 16 * c) =
          make_uint2(enc(v[4 * c]) | enc(v[4 * c + 1]) << 16, enc(v[4 * c + 2]) | enc(v[4 * c + 3]) << 16);
  } else if constexpr (F == ReadFormat::fp8_e4m3) {
#pragma unroll
    for (int b = 0; b < K / 32; ++b) {  // 32-value block b: c = 2b, 2b + 1
      // the largest |v| as bits (non-negative floats order as integers); a
      // lane with a NaN or Inf (bits >= 0x7f800000) takes its finite values'
      // maximum and the encoder with the NaN / Inf fix-ups
      const uint32_t um = abs_bits_max<8>(v + 8 * b);
      const bool fin = um < 0x7f800000u;
      float amax = __uint_as_float(um);
      if (!fin) {
        amax = 0.f;
#pragma unroll
        for (int i = 0; i < 8; ++i) amax = fmaxf(amax, finite_abs(v[8 * b + i]));
      }
      const int k = fp8_block_exp(quad_max(amax));
      const float m = fp8_block_mul(k);
      if (fin) {
#pragma unroll
        for (int c = 2 * b; c < 2 * b + 2; ++c)
          *reinterpret_cast<uint32_t*>(tile + r * K + 16 * c + 4 * t4) =
              e4m3x2_encode_finite(__fmul_rn(v[4 * c], m), __fmul_rn(v[4 * c + 1], m)) |
              e4m3x2_encode_finite(__fmul_rn(v[4 * c + 2], m), __fmul_rn(v[4 * c + 3], m)) << 16;
      } else {
#pragma unroll
        for (int c = 2 * b; c < 2 * b + 2; ++c)
          *reinterpret_cast<uint32_t*>(tile + r * K + 16 * c + 4 * t4) =
              e4m3x2_encode(__fmul_rn(v[4 * c], m), __fmul_rn(v[4 * c + 1], m)) |
              e4m3x2_encode(__fmul_rn(v[4 * c + 2], m), __fmul_rn(v[4 * c + 3], m)) << 16;
      }
      if (t4 == 0) tile[g.scale_offset + r * (K / 32) + b] = uint8_t(k + 127);
    }
  } else {
#pragma unroll
    for (int c = 0; c < K / 16; ++c) {  // 16-value block c
      // the block's largest |v| as bits; bits >= 0x7f800000: a NaN or Inf
      const uint32_t um = quad_max(abs_bits_max<4>(v + 4 * c));
      uint32_t nib = 0;
      uint8_t s = 0x7F;
      if (um < 0x7f800000u) {
        float rcp;
        s = nvfp4_block_scale(__uint_as_float(um), t, rcp);
#pragma unroll
        for (int e = 0; e < 4; ++e) nib |= e2m1_encode(__fmul_rn(v[4 * c + e], rcp)) << (4 * e);
      }
      *reinterpret_cast<uint16_t*>(tile + r * (K / 2) + 8 * c + 2 * t4) = uint16_t(nib);
      if (t4 == 0) tile[g.scale_offset + r * (K / 16) + c] = s;
    }
  }
}
// Runtime format switch over pack_row_quad.
__device__ __forceinline__ void pack_row_quad_any(const float (&v)[32], int64_t r, int t4, uint8_t* tile,
                                                  const TileGeom& g, float t) {
  switch (g.format) {
    case ReadFormat::bf16: pack_row_quad<ReadFormat::bf16>(v, r, t4, tile, g, t); break;
    case ReadFormat::f16: pack_row_quad<ReadFormat::f16>(v, r, t4, tile, g, t); break;
    case ReadFormat::fp8_e4m3: pack_row_quad<ReadFormat::fp8_e4m3>(v, r, t4, tile, g, t); break;
    case ReadFormat::nvfp4: pack_row_quad<ReadFormat::nvfp4>(v, r, t4, tile, g, t); break;
  }
}

// Runtime format switch over pack_tile_block (cold paths).
template <DType D>
__device__ void pack_tile_block_any(const typename cuda_util::Traits<D>::type* x, int64_t ld, uint8_t* tile,
                                    const TileGeom& g) {
  switch (g.format) {
    case ReadFormat::bf16: pack_tile_block<ReadFormat::bf16, D>(x, ld, tile, g); break;
    case ReadFormat::f16: pack_tile_block<ReadFormat::f16, D>(x, ld, tile, g); break;
    case ReadFormat::fp8_e4m3: pack_tile_block<ReadFormat::fp8_e4m3, D>(x, ld, tile, g); break;
    case ReadFormat::nvfp4: pack_tile_block<ReadFormat::nvfp4, D>(x, ld, tile, g); break;
  }
}

}  // namespace replayssm::quant::dev
