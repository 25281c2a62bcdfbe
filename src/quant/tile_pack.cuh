// Block-level pack of one state tile [R, K] inside another kernel (the
// dual-precision flushes repack the read copy right after folding the
// checkpoint). Writes exactly the bytes quant_pack writes (src/quant/README.md
// rules; same per-block codecs as quant_pack_kernel in quant.cu): padding
// zeroed, fp8 one thread per 32-value block, nvfp4 the tile's finite amax by
// a block reduction, then one thread per 16-value block.
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

// Packs x [R, K] (row stride ld elements, storage dtype D) into `tile`. Every
// thread of the block must call it (nvfp4 reduces over the block).
template <ReadFormat F, DType D>
__device__ void pack_tile_block(const typename cuda_util::Traits<D>::type* x, int64_t ld, uint8_t* tile,
                                const TileGeom& g) {
  using cuda_util::Traits;
  const int64_t R = g.R, K = g.K;
  const int nthr = int(blockDim.x);
#pragma unroll
  for (int i = 0; i < 3; ++i)
    for (int64_t b = g.gap_begin[i] + threadIdx.x; b < g.gap_end[i]; b += nthr) tile[b] = 0;
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
