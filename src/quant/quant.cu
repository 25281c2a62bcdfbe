// CUDA backend of quant_pack / quant_unpack: one CTA per tile [R, K].
//
// Pack: bf16/f16 convert element by element; fp8 gives each thread whole
// 32-value blocks (its E8M0 byte depends only on the block); nvfp4 first
// reduces the tile's finite amax over the CTA (max is order-independent, so
// t is exact and equals the CPU's), then gives each thread whole 16-value
// blocks. Tiles with K = 128 and R % 16 == 0 (the model shapes) pack fp8 /
// nvfp4 rows from lane quads instead (pack_quads: the dual fold's packer,
// tile_pack.cuh pack_row_quad, the same bytes), so that QuantGpu's
// byte-exact tests cover that packer. Unpack decodes whole blocks per
// thread. Stores of codes are 8- or 16-byte vectors: tiles start 16-byte
// aligned and every block's codes sit at a multiple of its own size.
#include <cfloat>

#include "cuda/common.cuh"
#include "quant/backend.h"
#include "quant/quant.cuh"
#include "quant/tile_pack.cuh"

namespace replayssm::quant::cuda {
namespace {

using cuda_util::Traits;

constexpr int THREADS = 256;

struct PackParams {
  const void* in;            // [n, R, K], unit inner stride
  int64_t in_s0, in_s1;      // element strides of tiles and rows
  uint8_t* packed;           // [n, tile_bytes]
  int64_t packed_s0;         // bytes between tiles
  int64_t R, K;
  int64_t scale_offset, tensor_scale_offset;
  Gaps gaps;  // padding bytes, written as zeros
};

struct UnpackParams {
  const uint8_t* packed;
  int64_t packed_s0;
  float* out;  // [n, R, K]
  int64_t out_s0, out_s1;
  int64_t R, K;
  int64_t scale_offset, tensor_scale_offset;
};

// Maximum over the CTA (THREADS threads); every thread gets the result.
__device__ float cta_max(float v) {
  __shared__ float warp_max[THREADS / 32];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = v;
  __syncthreads();
  v = warp_max[0];
#pragma unroll
  for (int w = 1; w < THREADS / 32; ++w) v = fmaxf(v, warp_max[w]);
  return v;
}

// The tile of a CTA (K = 128, R % 16 == 0) packed as the tensor-core dual
// fold packs it (dev::pack_row_quad, from rows held by lane quads), so that
// the tests of quant_pack cover that packer too: warp w takes 16-row slabs
// w, w + 8, …; lane (g, t4) rows g and g + 8 of a slab, columns 16c + 4·t4
// + e. t: the nvfp4 tile scale.
template <ReadFormat F, DType D>
__device__ void pack_quads(const typename Traits<D>::type* x, const PackParams& p, float t) {
  TileGeom tg;
  tg.scale_offset = p.scale_offset;
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, g = lane >> 2, t4 = lane & 3;
  uint8_t* tile = p.packed + int64_t(blockIdx.x) * p.packed_s0;
  for (int64_t r0 = 16 * warp; r0 < p.R; r0 += 16 * (THREADS / 32))  // warp-uniform
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t r = r0 + g + 8 * h;
      float v[32];
#pragma unroll
      for (int c = 0; c < 8; ++c)
#pragma unroll
        for (int e = 0; e < 4; ++e) v[4 * c + e] = Traits<D>::load(x[r * p.in_s1 + 16 * c + 4 * t4 + e]);
      dev::pack_row_quad<F>(v, r, t4, tile, tg, t);
    }
}

template <ReadFormat F, DType D>
__global__ void __launch_bounds__(THREADS) quant_pack_kernel(PackParams p) {
  using T = typename Traits<D>::type;
  const T* x = static_cast<const T*>(p.in) + int64_t(blockIdx.x) * p.in_s0;
  uint8_t* tile = p.packed + int64_t(blockIdx.x) * p.packed_s0;
  const int64_t R = p.R, K = p.K;
#pragma unroll
  for (int g = 0; g < 3; ++g)
    for (int64_t b = p.gaps.begin[g] + threadIdx.x; b < p.gaps.end[g]; b += THREADS) tile[b] = 0;

  if constexpr (F == ReadFormat::bf16 || F == ReadFormat::f16) {
    uint16_t* codes = reinterpret_cast<uint16_t*>(tile);
    for (int64_t i = threadIdx.x; i < R * K; i += THREADS) {
      const float v = Traits<D>::load(x[(i / K) * p.in_s1 + i % K]);
      codes[i] = F == ReadFormat::bf16 ? dev::bf16_encode(v) : dev::f16_encode(v);
    }
  } else if constexpr (F == ReadFormat::fp8_e4m3) {
    if (K == 128 && R % 16 == 0) {
      pack_quads<F, D>(x, p, 0.f);
      return;
    }
    const int64_t nb = K / 32;
    for (int64_t i = threadIdx.x; i < R * nb; i += THREADS) {
      const int64_t r = i / nb, b = i % nb;
      float v[32];
#pragma unroll
      for (int j = 0; j < 32; ++j) v[j] = Traits<D>::load(x[r * p.in_s1 + b * 32 + j]);
      uint32_t c[8];
      tile[p.scale_offset + i] = dev::fp8_encode_block(v, c);
      uint4* dst = reinterpret_cast<uint4*>(tile + r * K + b * 32);
      dst[0] = make_uint4(c[0], c[1], c[2], c[3]);
      dst[1] = make_uint4(c[4], c[5], c[6], c[7]);
    }
  } else {
    float amax = 0.f;
    for (int64_t i = threadIdx.x; i < R * K; i += THREADS)
      amax = fmaxf(amax, dev::finite_abs(Traits<D>::load(x[(i / K) * p.in_s1 + i % K])));
    const float t = dev::nvfp4_tensor_scale(cta_max(amax));
    if (threadIdx.x == 0) *reinterpret_cast<float*>(tile + p.tensor_scale_offset) = t;
    if (K == 128 && R % 16 == 0) {
      pack_quads<F, D>(x, p, t);
      return;
    }
    const int64_t nb = K / 16;
    for (int64_t i = threadIdx.x; i < R * nb; i += THREADS) {
      const int64_t r = i / nb, b = i % nb;
      float v[16];
#pragma unroll
      for (int j = 0; j < 16; ++j) v[j] = Traits<D>::load(x[r * p.in_s1 + b * 16 + j]);
      uint32_t c[2];
      tile[p.scale_offset + i] = dev::nvfp4_encode_block(v, t, c);
      *reinterpret_cast<uint2*>(tile + r * (K / 2) + b * 8) = make_uint2(c[0], c[1]);
    }
  }
}

template <ReadFormat F>
__global__ void __launch_bounds__(THREADS) quant_unpack_kernel(UnpackParams p) {
  const uint8_t* tile = p.packed + int64_t(blockIdx.x) * p.packed_s0;
  float* y = p.out + int64_t(blockIdx.x) * p.out_s0;
  const int64_t R = p.R, K = p.K;

  if constexpr (F == ReadFormat::bf16 || F == ReadFormat::f16) {
    const uint16_t* codes = reinterpret_cast<const uint16_t*>(tile);
    for (int64_t i = threadIdx.x; i < R * K; i += THREADS) {
      const uint16_t c = codes[i];
      y[(i / K) * p.out_s1 + i % K] = F == ReadFormat::bf16
                                          ? __bfloat162float(__ushort_as_bfloat16(c))
                                          : __half2float(__ushort_as_half(c));
    }
  } else if constexpr (F == ReadFormat::fp8_e4m3) {
    const int64_t nb = K / 32;
    for (int64_t i = threadIdx.x; i < R * nb; i += THREADS) {
      const int64_t r = i / nb, b = i % nb;
      const uint32_t e = tile[p.scale_offset + i];
      const uint4* src = reinterpret_cast<const uint4*>(tile + r * K + b * 32);
      const uint4 w0 = src[0], w1 = src[1];
      const uint32_t w[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
      float* yr = y + r * p.out_s1 + b * 32;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const float4 f = dev::fp8_decode_word(w[j], e);
        yr[4 * j] = f.x;
        yr[4 * j + 1] = f.y;
        yr[4 * j + 2] = f.z;
        yr[4 * j + 3] = f.w;
      }
    }
  } else {
    const float t = *reinterpret_cast<const float*>(tile + p.tensor_scale_offset);
    const int64_t nb = K / 16;
    for (int64_t i = threadIdx.x; i < R * nb; i += THREADS) {
      const int64_t r = i / nb, b = i % nb;
      const uint2 w = *reinterpret_cast<const uint2*>(tile + r * (K / 2) + b * 8);
      const uint32_t c[2] = {w.x, w.y};
      float v[16];
      dev::nvfp4_decode_block(c, tile[p.scale_offset + i], t, v);
      float* yr = y + r * p.out_s1 + b * 16;
#pragma unroll
      for (int j = 0; j < 16; ++j) yr[j] = v[j];
    }
  }
}

template <ReadFormat F>
void launch_pack(const PackParams& p, DType dt, int64_t n, cudaStream_t stream) {
  switch (dt) {
    case DType::f32: quant_pack_kernel<F, DType::f32><<<unsigned(n), THREADS, 0, stream>>>(p); break;
    case DType::f16: quant_pack_kernel<F, DType::f16><<<unsigned(n), THREADS, 0, stream>>>(p); break;
    default: quant_pack_kernel<F, DType::bf16><<<unsigned(n), THREADS, 0, stream>>>(p); break;
  }
}

}  // namespace

void pack(const QuantLayout& L, const Tensor& in, const Tensor& packed, const Exec& exec) {
  constexpr const char* FN = "quant_pack";
  cuda_util::require_supported_device(FN);
  const int64_t n = in.shape[0];
  if (n == 0) return;
  PackParams p{in.data, in.stride[0], in.stride[1], static_cast<uint8_t*>(packed.data),
               packed.stride[0], L.R, L.K, L.scale_offset, L.tensor_scale_offset,
               padding_gaps(L)};
  const cudaStream_t stream = cuda_util::stream_of(exec);
  switch (L.format) {
    case ReadFormat::bf16: launch_pack<ReadFormat::bf16>(p, in.dtype, n, stream); break;
    case ReadFormat::f16: launch_pack<ReadFormat::f16>(p, in.dtype, n, stream); break;
    case ReadFormat::fp8_e4m3: launch_pack<ReadFormat::fp8_e4m3>(p, in.dtype, n, stream); break;
    case ReadFormat::nvfp4: launch_pack<ReadFormat::nvfp4>(p, in.dtype, n, stream); break;
  }
  cuda_util::check_launch(FN);
}

void unpack(const QuantLayout& L, const Tensor& packed, const Tensor& out, const Exec& exec) {
  constexpr const char* FN = "quant_unpack";
  cuda_util::require_supported_device(FN);
  const int64_t n = out.shape[0];
  if (n == 0) return;
  UnpackParams p{static_cast<const uint8_t*>(packed.data), packed.stride[0],
                 static_cast<float*>(out.data), out.stride[0], out.stride[1], L.R, L.K,
                 L.scale_offset, L.tensor_scale_offset};
  const cudaStream_t stream = cuda_util::stream_of(exec);
  const unsigned grid = unsigned(n);
  switch (L.format) {
    case ReadFormat::bf16: quant_unpack_kernel<ReadFormat::bf16><<<grid, THREADS, 0, stream>>>(p); break;
    case ReadFormat::f16: quant_unpack_kernel<ReadFormat::f16><<<grid, THREADS, 0, stream>>>(p); break;
    case ReadFormat::fp8_e4m3: quant_unpack_kernel<ReadFormat::fp8_e4m3><<<grid, THREADS, 0, stream>>>(p); break;
    case ReadFormat::nvfp4: quant_unpack_kernel<ReadFormat::nvfp4><<<grid, THREADS, 0, stream>>>(p); break;
  }
  cuda_util::check_launch(FN);
}

}  // namespace replayssm::quant::cuda
