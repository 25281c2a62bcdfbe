// Staged state rows: asynchronous 16-byte copies (cp.async) of a thread's
// lane share of a state row into a per-thread ring of P shared-memory
// stages, so the bytes in flight are bounded by shared memory, not registers.
//
// Stage layout: STG[(p·NCH + j)·THREADS + tid] (uint4), p < P stages, j < NCH
// chunks of the row share (kernel_common.cuh: chunk j covers elements
// (j·LPR + lane)·VEC ...). Thread-major within a chunk, so the 16-byte
// accesses of a warp hit 32 consecutive 16-byte words (no bank conflicts).
// A stage is written and read by the same thread: cp.async.wait_group is the
// only synchronisation it needs.
#pragma once
#include "delta/kernel_common.cuh"
#include "quant/quant.cuh"

namespace replayssm::delta::cuda_impl {

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
}
// 4 bytes (cp.async.ca: the 4-byte form goes through L1), both addresses 4-byte aligned.
__device__ __forceinline__ void cp_async4(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(s), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// Stages per thread: CH chunks of 16 bytes whatever the state dtype (CH = 16:
// 256 B per thread, 64 KiB per 256-thread block, 4 rows of fp32 or 8 of
// bf16/fp16 in flight per thread).
template <DType SD, int CH = 16>
struct Stage {
  using RW = Row<SD>;
  using TS = typename RW::TS;
  static constexpr int NCH = RW::NCH;
  static constexpr int P = CH / NCH;

  // Issue the copies of this thread's share of `row` into stage p.
  __device__ __forceinline__ static void issue(uint4* stg, int threads, int p, const TS* row, int lane,
                                               int lpr, int K) {
    uint4* dst = stg + int64_t(p % P) * NCH * threads + threadIdx.x;
#pragma unroll
    for (int j = 0; j < NCH; ++j)
      if (RW::has(j, lane, lpr, K)) cp_async16(dst + j * threads, row + (j * lpr + lane) * RW::VEC);
  }
  // Read stage p (after its copies completed) into a register row.
  __device__ __forceinline__ static void read(RW& r, const uint4* stg, int threads, int p, int lane, int lpr,
                                              int K) {
    const uint4* src = stg + int64_t(p % P) * NCH * threads + threadIdx.x;
#pragma unroll
    for (int j = 0; j < NCH; ++j) {
      if (RW::has(j, lane, lpr, K)) {
        const uint4 u = src[j * threads];
        const TS* x = reinterpret_cast<const TS*>(&u);
#pragma unroll
        for (int e = 0; e < RW::VEC; ++e) r.s[j][e] = Traits<SD>::load(x[e]);
      } else {
#pragma unroll
        for (int e = 0; e < RW::VEC; ++e) r.s[j][e] = 0.f;
      }
    }
  }
};

// cp.async of 4 or 8 bytes (L1-allocating form: .cg takes 16 bytes only).
template <int BYTES>
__device__ __forceinline__ void cp_async_small(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(s), "l"(gmem), "n"(BYTES) : "memory");
}

// Stages of a packed read copy (fp8 / nvfp4 codes, dual pools), decoded into
// the register layout of Row<bf16> (chunk c = j·LPR + lane holds elements
// 8c .. 8c+7). Per chunk one 16-byte stage word: codes (fp8: 8 bytes; nvfp4:
// 4 bytes) at +0, the aligned 4-byte word holding the chunk's block scale at
// +8, nvfp4 the tile's fp32 scale at +12.
template <int QF, int CH = 16>
struct QStage {
  using RW = Row<DType::bf16>;
  static constexpr int NCH = RW::NCH;
  static constexpr int P = CH / NCH;
  // Values of chunk c per block scale: fp8 32 / 8, nvfp4 16 / 8.
  static constexpr int CPS = QF == QF_FP8 ? 4 : 2;

  // codes: the row's codes; scales: its block scales; tscale: the tile scale.
  __device__ __forceinline__ static void issue(uint4* stg, int threads, int p, const uint8_t* codes,
                                               const uint8_t* scales, const uint8_t* tscale, int lane, int lpr,
                                               int K) {
    uint4* dst = stg + int64_t(p % P) * NCH * threads + threadIdx.x;
#pragma unroll
    for (int j = 0; j < NCH; ++j) {
      if (!RW::has(j, lane, lpr, K)) continue;
      const int c = j * lpr + lane;
      char* d = reinterpret_cast<char*>(dst + j * threads);
      const uintptr_t sa = reinterpret_cast<uintptr_t>(scales + c / CPS) & ~uintptr_t(3);
      if constexpr (QF == QF_FP8) {
        cp_async_small<8>(d, codes + 8 * c);
      } else {
        cp_async_small<4>(d, codes + 4 * c);
        cp_async_small<4>(d + 12, tscale);
      }
      cp_async_small<4>(d + 8, reinterpret_cast<const void*>(sa));
    }
  }
  // srow: byte offset of the row's scales from a 4-byte aligned address
  // (only its low two bits matter).
  __device__ __forceinline__ static void read(RW& r, const uint4* stg, int threads, int p, int lane, int lpr,
                                              int K, int64_t srow) {
    const uint4* src = stg + int64_t(p % P) * NCH * threads + threadIdx.x;
#pragma unroll
    for (int j = 0; j < NCH; ++j) {
      if (!RW::has(j, lane, lpr, K)) {
#pragma unroll
        for (int e = 0; e < 8; ++e) r.s[j][e] = 0.f;
        continue;
      }
      const int c = j * lpr + lane;
      const uint4 u = src[j * threads];
      const uint32_t sb = (u.z >> (8 * int((srow + c / CPS) & 3))) & 0xFFu;
      if constexpr (QF == QF_FP8) {
        const float4 a = quant::dev::fp8_decode_word(u.x, sb), b = quant::dev::fp8_decode_word(u.y, sb);
        r.s[j][0] = a.x, r.s[j][1] = a.y, r.s[j][2] = a.z, r.s[j][3] = a.w;
        r.s[j][4] = b.x, r.s[j][5] = b.y, r.s[j][6] = b.z, r.s[j][7] = b.w;
      } else {
        float y[8];
        quant::dev::e2m1x8_decode(u.x, y);
        const float sf = quant::dev::e4m3_decode(sb), t = __uint_as_float(u.w);
#pragma unroll
        for (int e = 0; e < 8; ++e) r.s[j][e] = __fmul_rn(__fmul_rn(y[e], sf), t);
      }
    }
  }
};

// Shared memory of the stages (in floats) for np rows per thread.
__host__ __device__ inline int64_t stage_floats(int nch, int np, int threads, int ch = 16) {
  const int P = ch / nch;
  return int64_t(np < P ? np : P) * nch * threads * 4;
}

}  // namespace replayssm::delta::cuda_impl
