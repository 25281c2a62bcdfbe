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

namespace replayssm::delta::cuda_impl {

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
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

// Shared memory of the stages (in floats) for np rows per thread.
__host__ __device__ inline int64_t stage_floats(int nch, int np, int threads, int ch = 16) {
  const int P = ch / nch;
  return int64_t(np < P ? np : P) * nch * threads * 4;
}

}  // namespace replayssm::delta::cuda_impl
