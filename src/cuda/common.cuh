// Shared device vocabulary: error checks, dtype traits, reductions.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstring>
#include <string>

#include "cuda/runtime.h"
#include "replayssm/types.h"

namespace replayssm::cuda_util {

// Throws replayssm::Error on a failed CUDA call or launch.
void check(cudaError_t err, const char* fn, const char* what);
inline void check_launch(const char* fn) { check(cudaGetLastError(), fn, "kernel launch"); }
// require_supported_device(fn) is declared in cuda/runtime.h.
inline cudaStream_t stream_of(const Exec& e) { return static_cast<cudaStream_t>(e.stream); }

// Launches k as the programmatic dependent of the previous kernel in the
// stream (its blocks may start before that grid ends; k must execute
// griddepcontrol.wait before reading what the previous kernel writes or
// writing what it reads). Returns the launch's error.
template <class Kernel, class... Args>
cudaError_t launch_dependent(Kernel k, dim3 grid, dim3 block, size_t smem, cudaStream_t stream, const Args&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, k, args...);
}

// Launches kernel K with `smem` bytes of dynamic shared memory, raising its
// limit first where that is above 48 KiB: once per kernel and device
// (SmemLimit; not a stream operation, so safe during graph capture; K is a
// template argument, so every instance keeps its own limit). CARVEOUT: also
// prefer the whole carveout (several resident blocks of a large-shared-memory
// kernel). `dependent`: as the stream's previous kernel's programmatic
// dependent (launch_dependent). Launch errors: check_launch(fn) after it.
template <auto K, bool CARVEOUT = false, class... Args>
void launch_smem(dim3 grid, dim3 block, size_t smem, cudaStream_t stream, bool dependent, const char* fn,
                 const Args&... args) {
  static SmemLimit limit;
  limit.ensure(reinterpret_cast<const void*>(K), smem, fn, CARVEOUT);
  if (dependent) (void)launch_dependent(K, grid, block, smem, stream, args...);
  else K<<<grid, block, smem, stream>>>(args...);
}

// a / b for 0 <= a < 2^22 and b >= 1, exact: the fp32 quotient estimate is
// within one of a / b there (inputs exact, __fdividef within 2 ulp), and
// one correction step fixes it. About half the instructions of the
// compiler's division by a runtime int (setup and per-row index math of
// the delta and Mamba-2 replay kernels).
__device__ __forceinline__ int div_small(int a, int b) {
  int q = int(__fdividef(float(a), float(b)));
  const int r = a - q * b;
  return q + (r >= b) - (r < 0);
}

// Storage type of a DType and its fp32 conversions.
template <DType D> struct Traits;
template <> struct Traits<DType::f32> {
  using type = float;
  __device__ __forceinline__ static float load(float v) { return v; }
  __device__ __forceinline__ static float store(float v) { return v; }
};
template <> struct Traits<DType::f16> {
  using type = __half;
  __device__ __forceinline__ static float load(__half v) { return __half2float(v); }
  __device__ __forceinline__ static __half store(float v) { return __float2half_rn(v); }
};
template <> struct Traits<DType::bf16> {
  using type = __nv_bfloat16;
  __device__ __forceinline__ static float load(__nv_bfloat16 v) { return __bfloat162float(v); }
  __device__ __forceinline__ static __nv_bfloat16 store(float v) { return __float2bfloat16_rn(v); }
};

// Load an element of a runtime-typed float tensor (small, non-hot inputs).
__device__ __forceinline__ float load_any(const void* p, DType dt, int64_t i) {
  switch (dt) {
    case DType::f32: return static_cast<const float*>(p)[i];
    case DType::f16: return __half2float(static_cast<const __half*>(p)[i]);
    case DType::bf16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default: return 0.f;
  }
}
// load_any in two steps, for loads whose latencies must overlap: the raw
// bits (f32: 32, f16 / bf16: 16), then their value. load_any widens a 16-bit
// element inside the branch that loaded it, so a warp waits for each such load
// before it issues the next; issue every load_bits of a batch first.
__device__ __forceinline__ uint32_t load_bits(const void* p, DType dt, int64_t i) {
  return dt == DType::f32 ? static_cast<const uint32_t*>(p)[i] : uint32_t(static_cast<const uint16_t*>(p)[i]);
}
__device__ __forceinline__ float widen_bits(uint32_t x, DType dt) {
  return dt == DType::f32    ? __uint_as_float(x)
         : dt == DType::bf16 ? __uint_as_float(x << 16)
                             : __half2float(__ushort_as_half(static_cast<unsigned short>(x)));
}
__device__ __forceinline__ void store_any(void* p, DType dt, int64_t i, float v) {
  switch (dt) {
    case DType::f32: static_cast<float*>(p)[i] = v; break;
    case DType::f16: static_cast<__half*>(p)[i] = __float2half_rn(v); break;
    case DType::bf16: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
    default: break;
  }
}
__device__ __forceinline__ int64_t load_index(const void* p, DType dt, int64_t i) {
  return dt == DType::i64 ? static_cast<const int64_t*>(p)[i] : static_cast<const int32_t*>(p)[i];
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum each of RB values over the LPR lanes of a row group (RB <= LPR <= 32,
// powers of two; lr = lane index within the group), transposed: lane lr ends
// with the full sum of value lr / (LPR / RB) in v[0] (LPR / RB lanes hold
// each). RB − 1 + log2(LPR / RB) shuffles for RB sums, against RB·log2(LPR)
// for RB separate reductions. Every lane of the warp calls it.
template <int RB, int LPR>
__device__ __forceinline__ void transpose_sum(float (&v)[RB], int lr) {
  int o = LPR / 2;
#pragma unroll
  for (int w = RB / 2; w >= 1; w /= 2, o /= 2) {
    const bool up = lr & o;
#pragma unroll
    for (int i = 0; i < w; ++i) {
      const float send = up ? v[i] : v[i + w];
      const float keep = up ? v[i + w] : v[i];
      v[i] = keep + __shfl_xor_sync(0xffffffffu, send, o);
    }
  }
#pragma unroll
  for (; o >= 1; o /= 2) v[0] += __shfl_xor_sync(0xffffffffu, v[0], o);
}

__device__ __forceinline__ float softplus(float x) { return x > 20.f ? x : log1pf(expf(x)); }
__device__ __forceinline__ float sigmoid(float x) { return 1.f / (1.f + expf(-x)); }

__device__ __forceinline__ void report(int32_t* status, int32_t bit) {
  if (status) atomicOr(status, bit);
}

// One thread per block of a row's nblk blocks, after the block's last read of
// what the row's last arrival will rewrite (the eager steps' cursors):
// counts the block in *ctr (runtime.h row_counters) and returns true for the
// last arrival, which gets the counter zeroed again for the next launch.
__device__ __forceinline__ bool last_row_arrival(unsigned* ctr, unsigned nblk) {
  __threadfence();
  if (atomicAdd(ctr, 1u) != nblk - 1) return false;
  *ctr = 0;
  return true;
}

// mbarriers and bulk asynchronous copies (cp.async.bulk, sm_90): a stage of
// shared memory is filled by one copy instruction and completes on its
// mbarrier, which the issuing thread primes with the bytes it expects.
__device__ __forceinline__ uint32_t smem_u32(const void* ptr) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}
__device__ __forceinline__ void mbar_init(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes)
               : "memory");
}
// Waits for the completion of bar's phase of the given parity.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred done;\n"
      "WAIT_%=:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      " @!done bra WAIT_%=;\n"
      "}\n" ::"r"(smem_u32(bar)),
      "r"(parity)
      : "memory");
}
// The cursor of a ring of n mbarrier-guarded stages visited in order: visit i
// uses slot i mod n and waits for the phase of parity (i / n) & 1. next()
// advances both without dividing.
struct StageCursor {
  int slot = 0;
  uint32_t phase = 0;
  __device__ __forceinline__ void next(int n) {
    if (++slot == n) {
      slot = 0;
      phase ^= 1u;
    }
  }
};
// One arrival on bar (release: the caller's earlier writes are seen by its waiters).
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}
// Named barrier `id` (1..15) among `threads` threads (a multiple of 32) of the block.
__device__ __forceinline__ void named_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
// Bulk copy global → shared (16-byte aligned, bytes a multiple of 16),
// completing `bytes` on bar; pol: an L2 cache policy (createpolicy).
__device__ __forceinline__ void bulk_g2s(void* dst, const void* src, uint32_t bytes, uint64_t* bar, uint64_t pol) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::
          "r"(smem_u32(dst)),
      "l"(src), "r"(bytes), "r"(smem_u32(bar)), "l"(pol)
      : "memory");
}
// L2 cache policies for the .L2::cache_hint copies.
__device__ __forceinline__ uint64_t l2_policy_evict_first() {
  uint64_t pol;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  return pol;
}
__device__ __forceinline__ uint64_t l2_policy_evict_normal() {
  uint64_t pol;
  asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(pol));
  return pol;
}
// Asks L2 to fetch [src, src + bytes) from global memory (nothing lands in
// shared memory, no completion): one bulk prefetch when src and bytes are
// 16-byte multiples, else a line prefetch per 128 bytes.
__device__ __forceinline__ void prefetch_l2(const void* src, uint32_t bytes) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(src);
  if (a % 16 == 0 && bytes % 16 == 0) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(src), "r"(bytes) : "memory");
  } else {
    for (uintptr_t l = a & ~uintptr_t(127); l < a + bytes; l += 128)
      asm volatile("prefetch.global.L2 [%0];" ::"l"(l) : "memory");
  }
}
__device__ __forceinline__ void bulk_g2s(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   smem_u32(dst)),
               "l"(src), "r"(bytes), "r"(smem_u32(bar))
               : "memory");
}

// tf32 tensor-core helpers (the speculative replay streams). The products read the top
// 19 bits of each 32-bit operand (the low 13 are ignored), so a value exact
// in tf32 (bf16, f16) passes as is; SPLIT: hi = x with the low 13 bits
// cleared, lo = x − hi (exact in fp32; its own low bits are dropped by the
// product), hi·b + lo·b carrying ~21 bits of x (3xTF32-style products).
template <bool SPLIT>
__device__ __forceinline__ void tf32_split(float x, uint32_t& hi, uint32_t& lo) {
  if constexpr (SPLIT) {
    hi = __float_as_uint(x) & 0xffffe000u;
    lo = __float_as_uint(x - __uint_as_float(hi));
  } else {
    hi = __float_as_uint(x);
  }
}
// d += A·B, m16n8k8, tf32 inputs, fp32 accumulators (PTX fragment layout).
__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// d += A·B, m16n8k16, f16 inputs (f16x2 registers: a0 row g, a1 row g + 8,
// a2 / a3 the same rows at k + 8; b0 k = 2t, 2t + 1, b1 k + 8), fp32 accumulators.
__device__ __forceinline__ void mma_f16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                        uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
// The power of two σ that brings a vector of largest magnitude m to
// [2^13, 2^14) before f16x2_split (σ = 140 − e for m ∈ [2^(e−127),
// 2^(e−126))); 0 for a zero or non-finite m.
__device__ __forceinline__ int f16_split_exp(float m) {
  const int e = int(__float_as_uint(m) >> 23) & 255;
  return e == 0 || e == 255 ? 0 : min(140 - e, 126);
}
// (x0, x1) ≈ hi + lo as two f16x2 registers (~22 bits of each value; the
// caller scales x below 2^15 and away from f16's subnormals: f16_split_exp).
__device__ __forceinline__ void f16x2_split(float x0, float x1, uint32_t& hi, uint32_t& lo) {
  const __half2 h = __floats2half2_rn(x0, x1);
  const float2 hf = __half22float2(h);
  const __half2 l = __floats2half2_rn(x0 - hf.x, x1 - hf.y);
  hi = *reinterpret_cast<const uint32_t*>(&h);
  lo = *reinterpret_cast<const uint32_t*>(&l);
}
// d += (ah + al)·(b_h + b_l) without the lo·lo term (3xTF32): al·b_h, ah·b_l,
// ah·b_h, in that order. A_LO / B_LO false: that operand is exact in tf32
// (no low part, its product skipped).
template <bool A_LO = true, bool B_LO = true>
__device__ __forceinline__ void mma_tf32x3(float (&d)[4], const uint32_t (&ah)[4], const uint32_t (&al)[4],
                                           uint32_t b0h, uint32_t b1h, uint32_t b0l, uint32_t b1l) {
  if constexpr (A_LO) mma_tf32(d, al, b0h, b1h);
  if constexpr (B_LO) mma_tf32(d, ah, b0l, b1l);
  mma_tf32(d, ah, b0h, b1h);
}
// The same products with ah·b_h into d and the correction terms into cor
// (the caller adds cor to d at the end): two shorter dependent chains where
// a long sum of products would make one. A_LO / B_LO as mma_tf32x3.
template <bool A_LO = true, bool B_LO = true>
__device__ __forceinline__ void mma_tf32x3_apart(float (&d)[4], float (&cor)[4], const uint32_t (&ah)[4],
                                                 const uint32_t (&al)[4], uint32_t b0h, uint32_t b1h, uint32_t b0l,
                                                 uint32_t b1l) {
  if constexpr (A_LO) mma_tf32(cor, al, b0h, b1h);
  if constexpr (B_LO) mma_tf32(cor, ah, b0l, b1l);
  mma_tf32(d, ah, b0h, b1h);
}
// The A fragment (m16n8k8 tf32) of a lane's two register rows r0 (row g)
// and r1 (row g + 8), element i at k = t4 and element i + 1 at k = t4 + 4,
// split hi + lo (SPLIT false: hi only, the value exact in tf32).
template <bool SPLIT>
__device__ __forceinline__ void a_frag_rows(const float* r0, const float* r1, int i, uint32_t (&ah)[4],
                                            uint32_t (&al)[4]) {
  tf32_split<SPLIT>(r0[i], ah[0], al[0]);
  tf32_split<SPLIT>(r1[i], ah[1], al[1]);
  tf32_split<SPLIT>(r0[i + 1], ah[2], al[2]);
  tf32_split<SPLIT>(r1[i + 1], ah[3], al[3]);
}
// Four consecutive state elements (16 or 8 bytes, aligned) widened to fp32.
template <DType SD>
__device__ __forceinline__ void ld4(const char* src, float* v) {
  if constexpr (SD == DType::f32) {
    const float4 q = *reinterpret_cast<const float4*>(src);
    v[0] = q.x; v[1] = q.y; v[2] = q.z; v[3] = q.w;
  } else {
    const uint2 q = *reinterpret_cast<const uint2*>(src);
    const uint32_t w[2] = {q.x, q.y};
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      v[2 * i] = SD == DType::bf16 ? __uint_as_float(w[i] << 16) : __half2float(__ushort_as_half(static_cast<unsigned short>(w[i] & 0xffffu)));
      v[2 * i + 1] = SD == DType::bf16 ? __uint_as_float(w[i] & 0xffff0000u) : __half2float(__ushort_as_half(static_cast<unsigned short>(w[i] >> 16)));
    }
  }
}
// Rounds four values to the state dtype in place and stores them at dst
// (nullptr: round only).
template <DType SD>
__device__ __forceinline__ void st4(typename Traits<SD>::type* dst, float* v) {
  using st_t = typename Traits<SD>::type;
  st_t q[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    q[i] = Traits<SD>::store(v[i]);
    v[i] = Traits<SD>::load(q[i]);
  }
  if (dst == nullptr) return;
  if constexpr (SD == DType::f32) {
    *reinterpret_cast<float4*>(dst) = make_float4(q[0], q[1], q[2], q[3]);
  } else {
    uint16_t u[4];
    memcpy(u, q, sizeof(u));
    *reinterpret_cast<uint2*>(dst) = make_uint2(u[0] | uint32_t(u[1]) << 16, u[2] | uint32_t(u[3]) << 16);
  }
}

}  // namespace replayssm::cuda_util
