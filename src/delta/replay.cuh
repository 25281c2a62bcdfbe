// Replay step: outputs from the frozen checkpoint S_0 plus the ring of
// records, with the flush fused (design/replay.md §2-3, docs/semantics.md).
//
// Block (x: value-head group × V tile, y: key head kh, z: row b) covers nh
// value heads of key head kh (GDN; KDA nh = 1) and vt rows of V each. For
// window token t (m = n_old + t records before it, counted from the
// checkpoint the step reads) and u ∈ {k̂_t, q̂_t}:
//   a_u = S_0 (e^{Λ_m} ⊙ u) + Σ_{j_lo<=j<m} W_{t,u,j} d_j,
//   W_{t,u,j} = (e^{Λ_m − Λ_j} ⊙ k_j)·u   (GDN: e^{Λ_m−Λ_j} (k_j·u); k_j·u per key head)
//   d_t = β_t (v_t − a_k) (stored rounded to ring_d's dtype, the rounded value
//   used from then on), o_t = a_q + (k̂_t·q̂_t) d_t.
// Each lane group reads its rows of S_0 once (the next row prefetched while
// the current one is reduced) and adds its share of the history terms before
// the group reduction, so one reduction per (row, token, u) gives a_u.
// Flush (count + T > L): the same read folds the n_old committed records,
//   S_h = e^{Λ_h} ⊙ S_0 + Σ_j d_j (e^{Λ_h−Λ_j} ⊙ k_j)ᵀ,
// writes S_h once (state dtype) and the window then reads the stored S_h
// with no history (j_lo = n_old, Λ restarting at the new checkpoint).
// Appends: ring_k / ring_ks by the block with x == 0 of each key head (one
// writer), ring_g by the V-tile-0 blocks of each value head, ring_d by the
// row owners. Cursors are updated by a separate launch (delta_launch.cu).
#pragma once
#include <type_traits>

#include "delta/heuristics.h"
#include "delta/kernel_common.cuh"
#include "delta/stream.cuh"
#include "quant/quant.cuh"

namespace replayssm::delta::cuda_impl {

using cuda_util::ld4;
using cuda_util::mma_tf32x3;
using cuda_util::st4;
using cuda_util::tf32_split;

// Shared memory of the replay kernel: the log-decays first (GDN: fp64 Λ per
// head and record; KDA: fp32 partial sums per record and channel, then their
// totals), then floats; sizes in bytes. NM = L + T bounds the records of a
// step (n_old <= L with a flush, <= L − T without), RB = nh·vt rows
// (ReplayLayout, layouts.h).
// mma (the tensor-core stream): d rows of the old records only (the window's
// d stay in registers), KDA's UA in the stream's operand region.
// a3 (KDA's tensor-core instance at three blocks per SM, A3 below): the
// warps' stages (REPLAY_MMA_STAGES bytes) lie at offset 0, over what only the
// preparation uses (the gates' sums and totals, q̂, UK, UQ), padded to the
// stages' size; the arrays the stream reads (from KV on) follow, and
// replay_mma_extra_bytes(true) adds no stages after the operand region.
inline constexpr int REPLAY_MMA_STAGE = 16 * 256;  // bytes per warp
inline constexpr int REPLAY_MMA_STAGES = REPLAY_THREADS / 32 * REPLAY_MMA_STAGE;
__host__ __device__ inline ReplayLayout replay_layout(bool kda, int K, int T, int L, int nh, int rb, bool mma = false,
                                                      bool a3 = false) {
  ReplayLayout l{};
  const int64_t NM = int64_t(L) + T;
  l.lamd = 0;
  l.float_base = align4(kda ? (NM + 1) * K : 2 * int64_t(nh) * NM);  // in floats
  int64_t o = 0;
  if (a3) {  // q̂, UK, UQ right after the gates' sums, then past the stages
    l.qv = o; o += align4(int64_t(T) * K);
    l.uk = o; o += align4(int64_t(T) * K);
    l.uq = o; o += align4(int64_t(T) * K);
    o = o + l.float_base > REPLAY_MMA_STAGES / 4 ? o : REPLAY_MMA_STAGES / 4 - l.float_base;
    l.kv = o; o += align4(NM * K);
  } else {
    l.kv = o; o += align4(NM * K);
    l.qv = o; o += align4(int64_t(T) * K);
    l.uk = o; o += kda ? align4(int64_t(T) * K) : 0;
    l.uq = o; o += kda ? align4(int64_t(T) * K) : 0;
  }
  l.e0v = o; o += kda ? align4(K) : 0;
  l.ua = o; o += kda && !mma ? align4(2 * int64_t(T) * K) : 0;
  l.w = o; o += align4(int64_t(nh) * T * 2 * NM);
  l.dt = o; o += align4((mma ? int64_t(L) : NM) * rb);
  l.gs = o; o += align4(int64_t(nh) * NM);
  l.beta = o; o += align4(int64_t(nh) * T);
  l.eu = o; o += align4(int64_t(nh) * T);
  l.kq = o; o += align4(T);
  l.cf = o; o += align4(int64_t(nh) * NM);
  l.e0 = o; o += align4(nh);
  l.bytes = (l.float_base + o) * 4;
  return l;
}

// The tensor-core stream's shared memory after replay_layout: the A
// operands (the window's û_k, û_q of 8 tokens, split hi / lo: two uint4
// {û_k[2p], û_q[2p], û_k[2p + 1], û_q[2p + 1]} per token and column pair p,
// rows of UBP = 65 units so that the fragment loads of a quarter warp hit 8
// distinct 16-byte bank groups), the window's ring positions and one 4 KiB
// stage per warp (a unit of 16 rows × 256 bytes: half a tile of fp32 rows,
// a whole tile of 16-bit rows).
inline constexpr int REPLAY_MMA_K = 128;  // the one key dimension of the tensor-core stream
inline constexpr int REPLAY_MMA_UBP = REPLAY_MMA_K / 2 + 1;
inline constexpr int REPLAY_MMA_UB_BYTES = 2 * 8 * REPLAY_MMA_UBP * 16 + 8 * 4;  // A operands + ring positions
// The A operands' bytes (UH, UL), which REC16 first uses to stage the old
// records' keys, d rows and key scales (delta_launch.cu rec16_fits).
inline constexpr int REPLAY_MMA_REC_BYTES = 2 * 8 * REPLAY_MMA_UBP * 16;
__host__ __device__ constexpr int64_t replay_mma_extra_bytes(bool a3 = false) {
  return REPLAY_MMA_UB_BYTES + (a3 ? 0 : int64_t(REPLAY_MMA_STAGES));
}

// A row of a packed read copy (QF_FP8 / QF_NVFP4) decoded into the fp32
// register layout (Row<f32>: chunk c = j·lpr + lane holds elements 4c..4c+3).
// codes: the row's codes, scales: its block scales, t: the tile's fp32 scale.
template <int QF>
__device__ __forceinline__ void load_quant_row(Row<DType::f32>& r, const uint8_t* codes, const uint8_t* scales,
                                               float t, int lane, int lpr, int K) {
  using RW = Row<DType::f32>;
#pragma unroll
  for (int j = 0; j < RW::NCH; ++j) {
    const int c = j * lpr + lane;
    if (!RW::has(j, lane, lpr, K)) {
#pragma unroll
      for (int e = 0; e < 4; ++e) r.s[j][e] = 0.f;
      continue;
    }
    if constexpr (QF == QF_FP8) {
      const float4 f = quant::dev::fp8_decode_word(*reinterpret_cast<const uint32_t*>(codes + 4 * c), scales[c / 8]);
      r.s[j][0] = f.x, r.s[j][1] = f.y, r.s[j][2] = f.z, r.s[j][3] = f.w;
    } else {
      float y[8];
      quant::dev::e2m1x8_decode(uint32_t(*reinterpret_cast<const uint16_t*>(codes + 2 * c)), y);
      const float sf = quant::dev::e4m3_decode(scales[c / 4]);
#pragma unroll
      for (int e = 0; e < 4; ++e) r.s[j][e] = __fmul_rn(__fmul_rn(y[e], sf), t);
    }
  }
}

// One warp, K = 128 (4 channels per lane): the 16 dot products x·a_t
// (value t < 8) and x·b_t (value 8 + t) for t < T (T <= 8; the others 0),
// summed over the warp by one transposed reduction: lane l ends with value
// l / 2 in v[0]. x, a_t = a + t·K, b_t = b + t·K in shared memory, 16-byte aligned.
__device__ __forceinline__ void warp_dots16(const float* x, const float* a, const float* b, int T, int K, int lane,
                                            float (&v)[16]) {
  const float4 xv = *reinterpret_cast<const float4*>(x + 4 * lane);
#pragma unroll
  for (int u = 0; u < 16; ++u) {
    const int t = u & 7;
    v[u] = 0.f;
    if (t < T) {
      const float4 y = *reinterpret_cast<const float4*>((u < 8 ? a : b) + t * K + 4 * lane);
      v[u] = fmaf(xv.x, y.x, fmaf(xv.y, y.y, fmaf(xv.z, y.z, xv.w * y.w)));
    }
  }
  cuda_util::transpose_sum<16, 32>(v, lane);
}

// x[i] at element o + {0, 1, 8, 9}[i]: a lane's accumulator rows in the
// tensor-core stream.
__device__ __forceinline__ void store_quad(void* p, DType dt, int64_t o, const float (&x)[4]) {
  store4<0, 1, 8, 9>(p, dt, o, 0, x);
}

// MMA (T > 1, QF_NONE, K = 128): the rows on tensor cores (see below).
// A3 (KDA, MMA, fp32 state, one value head of V = 128 per block: one tile
// per warp): three blocks per SM (80 registers) on shared memory without the
// stages of their own (replay_layout a3: the stages over the preparation's
// arrays), so each warp's first tile goes to L2 before the preparation and
// into its stage only after it (delta_launch.cu spec_plan).
template <DType SD, bool KDA, int QF = QF_NONE, bool MMA = false, bool R16 = false, bool A3 = false>
__global__ void __launch_bounds__(256, MMA ? (A3 ? 3 : 2) : 3) delta_replay_kernel(ReplayArgs a) {
  // QF != QF_NONE: the state is a packed read copy decoded to fp32 rows.
  using RW = Row<QF == QF_NONE ? SD : DType::f32>;
  using TS = std::conditional_t<QF == QF_NONE, typename RW::TS, uint8_t>;
  extern __shared__ float4 smem4[];
  const TokenArgs& in = a.in;
  const Rings& rg = a.rings;
  // the tensor-core instance: the block size and K are compile-time (no
  // division by them in the preparation; GDN fp32 kept a runtime K while its
  // products' A fragments were the state rows: docs/perf_notes_delta.md, "the
  // T > 1 preparation without fp64 or divisions")
  const int K = MMA ? REPLAY_MMA_K : in.K, V = in.V, T = a.T, lpr = a.lpr, R = rg.R;
  constexpr int NT = REPLAY_THREADS;
  const int NM = rg.L + T;
  const int b = blockIdx.z, kh = blockIdx.y;
  const int hgroup = blockIdx.x / a.vtiles, vtile = blockIdx.x % a.vtiles;
  const int hv0 = kh * in.G + hgroup * a.nh;
  const int v0 = vtile * a.vt;
  const int vt = min(a.vt, V - v0);
  const int RB = a.nh * vt, RBM = a.nh * a.vt;
  const int tid = threadIdx.x, warp = tid >> 5, lane32 = tid & 31, nwarps = NT >> 5;
  const int grp = tid / lpr, lane = tid % lpr, rpp = NT / lpr;
  const int np = (RB + rpp - 1) / rpp;
  const bool reporter = tid == 0 && blockIdx.x == 0 && kh == 0;

  const int64_t s = idx_at(a.slot, b);
  if (s == a.pad) {
    for (int x = tid; x < RB * T; x += NT) {
      const int rr = x % RB, t = x / RB;
      out_at(in.o, b, t, hv0 + rr / vt, v0 + rr % vt, 0.f);
    }
    return;
  }
  if (s < 0 || s >= a.S) {
    if (reporter) cuda_util::report(a.status, STATUS_BAD_SLOT);
    return;
  }
  TS* const state = static_cast<TS*>(a.st.p) + s * a.st.s0;
  auto row_ptr = [&](int rr) {
    return state + int64_t(hv0 + rr / vt) * a.st.s1 + int64_t(v0 + rr % vt) * a.st.s2;
  };
  auto load_row = [&](RW& r, int rr) {
    if constexpr (QF == QF_NONE) {
      r.load(row_ptr(rr), lane, lpr, K);
    } else {
      const uint8_t* tile = state + int64_t(hv0 + rr / vt) * a.st.s1;
      const int v = v0 + rr % vt;
      const float t = QF == QF_NVFP4 ? *reinterpret_cast<const float*>(tile + a.qg.tensor_scale_offset) : 0.f;
      load_quant_row<QF>(r, tile + int64_t(v) * a.st.s2, tile + a.qg.scale_offset + int64_t(v) * a.qg.scale_row_bytes,
                         t, lane, lpr, K);
    }
  };
  // The first checkpoint row is in flight while the records are prepared.
  RW cur, nxt;
  if (!MMA && grp < RB) load_row(cur, grp);
  else cur.zero();

  RingCursor c = cursor_at(rg, s);
  if (!cursor_ok(rg, c)) {
    if (reporter) cuda_util::report(a.status, STATUS_RING_OVERFLOW);
    return;
  }
  if (a.acc.p) {
    if (!ring_commit(c, int32_t(idx_at(a.acc, b)))) {
      if (reporter) cuda_util::report(a.status, STATUS_BAD_ACCEPTED);
      return;
    }
  } else if (c.pending != 0) {
    if (reporter) cuda_util::report(a.status, STATUS_UNCOMMITTED);
    return;
  }
  // Tensor-core stream: each warp's first unit of state rows is in flight
  // (cp.async into its stage) while the records are prepared.
  // KDA: the layout from the host (kernels.cuh with_replay_layout); GDN
  // computes it here (layouts.h HOST_LAYOUT). The regions are spelt out as
  // ternaries, the bytes past the layout three times: a helper function, a
  // lambda or one hoisted pointer for them changed GDN's SASS.
  constexpr bool HL = HOST_LAYOUT<KDA>;
  const ReplayLayout lay = HL ? a.rl : replay_layout(KDA, K, T, rg.L, a.nh, RBM, MMA);
  static_assert(!A3 || (MMA && KDA && SD == DType::f32 && QF == QF_NONE), "A3: KDA's fp32 tensor-core instance");
  char* const stg = A3 ? reinterpret_cast<char*>(smem4) + warp * REPLAY_MMA_STAGE
                       : (HL ? at_aligned<16>(reinterpret_cast<char*>(smem4), lay.bytes)
                             : reinterpret_cast<char*>(smem4) + lay.bytes) +
                             REPLAY_MMA_UB_BYTES + warp * REPLAY_MMA_STAGE;
  // Unit (tile, hf): 16 rows × 16 chunks of 16 bytes (fp32: columns 64·hf …
  // 64·hf + 63; 16-bit: the whole row). Chunk q of row r lands at chunk
  // q ^ swz(r), so the fragment loads (rows g, g + 8; lanes t4 along the
  // columns) are free of bank conflicts.
  constexpr bool WIDE = SD == DType::f32;
  auto swz = [](int r) { return WIDE ? (r & 1) << 2 : (r & 3) << 1; };
  // Copy i of a lane takes row r = 2i + (lane >> 4), chunk q = lane & 15:
  // one 64-bit source step per copy (2 rows), destinations at fixed offsets
  // (swz(r) depends on i only through i & 1). A tile's rows never cross a
  // value head (replay_mma_fits), so row r of tile rr0 is row_ptr(rr0) + r·s2.
  const int u_hi = lane32 >> 4, u_q = lane32 & 15;
  const int64_t row_step = a.st.s2 * int64_t(sizeof(TS));
  auto issue_unit = [&](const TS* row0, int hf) {  // row0: the tile's first row
    const char* src = reinterpret_cast<const char*>(row0 + (WIDE ? hf * 64 : 0)) + u_hi * row_step + u_q * 16;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int r = 2 * i + u_hi;
      cp_async16(stg + (r * 16 + (u_q ^ swz(r))) * 16, src);
      src += 2 * row_step;
    }
    cp_async_commit();
  };
  // SPF (KDA, fp32 state): a warp keeps the tile after the one its stage
  // fetches in L2 (lanes 0–15: a row each), so that the stream's one unit in
  // flight per warp mostly hits L2 (measured: faster on KDA fp32, slower on
  // GDN and 16-bit states; perf_notes_delta.md v42)
  constexpr bool SPF = MMA && KDA && SD == DType::f32 && QF == QF_NONE;
  [[maybe_unused]] auto prefetch_tile = [&](int t) {
    if (t < RB / 16 && lane32 < 16)
      cuda_util::prefetch_l2(row_ptr(t * 16) + int64_t(lane32) * a.st.s2, uint32_t(K * sizeof(TS)));
  };
  if constexpr (A3) {
    // the stages hold the preparation's arrays until the stream: the warp's
    // whole first tile into L2 (lanes 0-15: a row each), its first unit
    // issued after the A operands
    if (warp < RB / 16 && lane32 < 16)
      cuda_util::prefetch_l2(row_ptr(warp * 16) + int64_t(lane32) * a.st.s2, uint32_t(K * sizeof(TS)));
    prefetch_tile(warp + nwarps);
  } else if constexpr (MMA) {
    if (warp < RB / 16) issue_unit(row_ptr(warp * 16), 0);
    // a.half_pf (fp32 states): the second half of the warp's first tile in
    // L2 too (its unit after the preparation, which else waits a whole round
    // trip then; lanes 0-15: a row's columns 64-127 each; KDA only: GDN's
    // stream took 0.3 % longer with the switch's branches, perf_notes_delta.md v58)
    if constexpr (KDA && WIDE && QF == QF_NONE)
      if (a.half_pf && warp < RB / 16 && lane32 < 16)
        cuda_util::prefetch_l2(row_ptr(warp * 16) + int64_t(lane32) * a.st.s2 + 64, uint32_t(64 * sizeof(TS)));
    if constexpr (SPF) prefetch_tile(warp + nwarps);
  }
  // the last warp: L2 prefetch of the records of the block a.rec_pf ahead
  // (KDA, not on packed copies: heuristics.h, replay_spec_prefetch_distance)
  if constexpr (KDA && QF == QF_NONE)
    if (a.rec_pf > 0 && warp == nwarps - 1) prefetch_block_ahead<KDA, true>(a, T, lane32);
  StepPlan p = ring_plan_step(c, T, rg.L, R);
  if (a.dual) p.flush = false;  // folded before this launch: the window reads the fresh copy, no history
  const int n_old = p.flush ? p.fold_count : p.hist_count;
  const int old_start = p.flush ? p.fold_start : p.hist_start;
  const int j_lo = p.flush ? n_old : 0;
  const int n = n_old + T;
  // Ring position of record i after `start` (start < R: cursor_ok and
  // ring_plan_step; i <= L + T <= R), without the division of ring_pos.
  auto rpos = [R](int start, int i) { return ring_pos_near(start, i, R); };

  double* LAMD = reinterpret_cast<double*>(smem4);   // GDN [nh][NM]
  float* GF = reinterpret_cast<float*>(smem4);       // KDA [NM][K] partial sums of the gates
  float* TOT = GF + int64_t(NM) * K;                 // KDA [K]
  float* sm = HL ? at_aligned(reinterpret_cast<float*>(smem4), lay.float_base)
                 : reinterpret_cast<float*>(smem4) + lay.float_base;
  float* KV = HL ? at_aligned(sm, lay.kv) : sm + lay.kv;  // [NM][K] k̂ of old records then window (KDA: old records as fold vectors)
  float* QV = HL ? at_aligned(sm, lay.qv) : sm + lay.qv;  // [T][K] q̂
  float* UK = HL ? at_aligned(sm, lay.uk) : sm + lay.uk;  // KDA [T][K] e^{Λ_m} ⊙ k̂_t
  float* UQ = HL ? at_aligned(sm, lay.uq) : sm + lay.uq;  // KDA [T][K] e^{Λ_m} ⊙ q̂_t
  float* E0V = HL ? at_aligned(sm, lay.e0v) : sm + lay.e0v;
  float* W = HL ? at_aligned(sm, lay.w) : sm + lay.w;    // [nh][T][2][NM]
  float* DT = HL ? at_aligned(sm, lay.dt) : sm + lay.dt;  // [NM][RBM] d of old records then window, per block row
  float* GS = HL ? at_aligned(sm, lay.gs) : sm + lay.gs;  // GDN [nh][NM] gates
  float* BETA = HL ? at_aligned(sm, lay.beta) : sm + lay.beta;
  float* EU = HL ? at_aligned(sm, lay.eu) : sm + lay.eu;
  float* KQ = HL ? at_aligned(sm, lay.kq) : sm + lay.kq;
  float* CF = HL ? at_aligned(sm, lay.cf) : sm + lay.cf;
  float* E0 = HL ? at_aligned(sm, lay.e0) : sm + lay.e0;

  // REC16 (a.rec16: the KDA tensor-core instance with 16-byte record rows,
  // one value head of V = 128 per block): the old records' key, d and gate
  // rows and key scales are requested here at once by cp.async (keys, d and
  // scales raw into the operand region, which nothing reads before UA and
  // the A operands; gates into their GF rows, summed in place below), so the
  // preparation waits one round trip for all of them instead of one per loop
  // (keys, d; the gates two). The same values, and the same sums in the same
  // order, as the loads they replace.
  // R16: its own instance (launch_replay_mma takes it where a.rec16), so the
  // loads' path compiles without REC16's code beside it.
  constexpr bool rec16 = MMA && KDA && QF == QF_NONE && R16;
  char* const rks = HL ? at_aligned<16>(reinterpret_cast<char*>(smem4), lay.bytes)
                       : reinterpret_cast<char*>(smem4) + lay.bytes;  // [L][K] raw keys
  const int kcb = REPLAY_MMA_K * (rg.k_dt == DType::f32 ? 4 : 2);    // bytes per key row
  const int dcb = REPLAY_MMA_K * (rg.d_dt == DType::f32 ? 4 : 2);    // bytes per d row
  char* const rds = rks + rg.L * kcb;                                 // [L][V] raw d
  float* const rss = reinterpret_cast<float*>(rds + rg.L * dcb);      // [L] key scales
  if constexpr (rec16) {
    const int kc = kcb / 16, dc = dcb / 16, nc = kc + dc + REPLAY_MMA_K / 4;
    for (int j = warp; j < n_old; j += nwarps) {
      const int64_t pos = rpos(old_start, j);
      const char* ksrc = static_cast<const char*>(rg.k) + (s * rg.k0 + pos * rg.k1 + int64_t(kh) * rg.k2) * (kcb / REPLAY_MMA_K);
      const char* dsrc = static_cast<const char*>(rg.d) + (s * rg.d0 + pos * rg.d1 + int64_t(hv0) * rg.d2 + v0) * (dcb / REPLAY_MMA_K);
      const char* gsrc = reinterpret_cast<const char*>(rg.g + s * rg.g0 + pos * rg.g1 + int64_t(hv0) * rg.g2);
      for (int c = lane32; c < nc; c += 32) {
        if (c < kc) cp_async16(rks + j * kcb + 16 * c, ksrc + 16 * c);
        else if (c < kc + dc) cp_async16(rds + j * dcb + 16 * (c - kc), dsrc + 16 * (c - kc));
        else cp_async16(reinterpret_cast<char*>(GF + j * REPLAY_MMA_K) + 16 * (c - kc - dc), gsrc + 16 * (c - kc - dc));
      }
      if (lane32 == 0) cp_async4(rss + j, rg.ks + s * rg.ks0 + pos * rg.ks1 + int64_t(kh) * rg.ks2);
    }
    cp_async_commit();
  }

  // Window k̂, q̂; the key head's records are appended by block x == 0.
  const bool k_writer = blockIdx.x == 0, g_writer = vtile == 0;
  for (int t = warp; t < T; t += nwarps) {
    float ks, kq;
    if constexpr (MMA) {  // K = 128: one address and dtype branch per row
      float kw[4];
      warp_prep_qk128(in, b, t, kh, KV + (n_old + t) * K, QV + t * K, ks, kq, kw);
      if (lane32 == 0) KQ[t] = kq;
      if (k_writer) {
        const int64_t pos = rpos(p.append_start, t);
        store_row128(rg.k, rg.k_dt, s * rg.k0 + pos * rg.k1 + int64_t(kh) * rg.k2, lane32, kw);
        if (lane32 == 0) rg.ks[s * rg.ks0 + pos * rg.ks1 + int64_t(kh) * rg.ks2] = ks;
      }
      continue;
    }
    warp_prep_qk(in, b, t, kh, KV + (n_old + t) * K, QV + t * K, ks, kq);
    if (lane32 == 0) KQ[t] = kq;
    if (k_writer) {
      const int64_t pos = rpos(p.append_start, t);
      const int64_t ko = s * rg.k0 + pos * rg.k1 + int64_t(kh) * rg.k2;
      for (int i0 = 0; i0 < K; i0 += 128) {  // raw loads first (act_at waits for each 16-bit k)
        uint32_t kb[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) kb[u] = i0 + lane32 + 32 * u < K ? act_bits(in.k, b, t, kh, i0 + lane32 + 32 * u) : 0u;
#pragma unroll
        for (int u = 0; u < 4; ++u)
          if (i0 + lane32 + 32 * u < K) store_any(rg.k, rg.k_dt, ko + i0 + lane32 + 32 * u, widen_bits(kb[u], in.k.dt));
      }
      if (lane32 == 0) rg.ks[s * rg.ks0 + pos * rg.ks1 + int64_t(kh) * rg.ks2] = ks;
    }
  }
  // REC16: the window's raw gates and their constants, loaded beside the
  // records by the threads that take them in the gates' part 1 below
  [[maybe_unused]] GateRaw wgr{};
  [[maybe_unused]] uint32_t wraw[8];
  if constexpr (rec16) {
    // the token's β and window gates first (one value head per block: their
    // loads beside the records'), then the staged rows: KV[j][i] =
    // k_j[i]·ks_j, DT[j][v] = d_j[v] (RBM = vt = 128)
    if (tid >= REPLAY_MMA_K) {  // part 1's channel tid − K (T <= 8)
      const int k = tid - REPLAY_MMA_K;
      wgr = gate_raw(in, true, b, 0, hv0, k);
      const int64_t gin = b * in.g.sb + int64_t(hv0) * in.g.sh + k;
#pragma unroll
      for (int e = 0; e < 8; ++e)
        if (e < T) wraw[e] = load_bits(in.g.p, in.g.dt, gin + int64_t(e) * in.g.st);
    }
    if (tid < T) {
      const float be = beta_at(in, b, tid, hv0);
      BETA[tid] = be;
      if (a.dual && g_writer)
        static_cast<float*>(a.ring_beta.p)[s * a.ring_beta.s0 + int64_t(rpos(p.append_start, tid)) * a.ring_beta.s1 +
                                           int64_t(hv0) * a.ring_beta.s2] = be;
    }
    cp_async_wait_all();
    __syncthreads();
    constexpr int KM = REPLAY_MMA_K;
    if (rg.k_dt == DType::f32)
      for (int x = tid; x < n_old * KM; x += NT) KV[x] = reinterpret_cast<const float*>(rks)[x] * rss[x / KM];
    else
      for (int x = tid; x < n_old * KM; x += NT)
        KV[x] = widen_bits(reinterpret_cast<const uint16_t*>(rks)[x], rg.k_dt) * rss[x / KM];
    if (rg.d_dt == DType::f32)
      for (int x = tid; x < n_old * KM; x += NT) DT[(x / KM) * RBM + x % KM] = reinterpret_cast<const float*>(rds)[x];
    else
      for (int x = tid; x < n_old * KM; x += NT)
        DT[(x / KM) * RBM + x % KM] = widen_bits(reinterpret_cast<const uint16_t*>(rds)[x], rg.d_dt);
  }
  // Keys of the old records, a warp per record, two records and 128
  // channels at a time: every load issued before any is widened (load_any
  // widens a 16-bit key in the branch that loads it, so the warp waited for
  // each: docs/perf_notes_delta.md, "the same for the T > 1 kernel's keys and
  // the dual fold's records").
  for (int j0 = warp; j0 < (rec16 ? 0 : n_old); j0 += 2 * nwarps) {
    for (int c0 = 0; c0 < K; c0 += 128) {
      uint32_t kb[2][4];
      float ksv[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int j = j0 + r * nwarps;
        if (j < n_old) {
          const int64_t pos = rpos(old_start, j);
          ksv[r] = rg.ks[s * rg.ks0 + pos * rg.ks1 + int64_t(kh) * rg.ks2];
          const int64_t ko = s * rg.k0 + pos * rg.k1 + int64_t(kh) * rg.k2;
          if constexpr (MMA) {  // K = 128: one dtype branch per record
            raw_row128(rg.k, rg.k_dt, ko, lane32, kb[r]);
          } else {
#pragma unroll
            for (int u = 0; u < 4; ++u) {
              const int i = c0 + lane32 + 32 * u;
              kb[r][u] = i < K ? load_bits(rg.k, rg.k_dt, ko + i) : 0u;
            }
          }
        }
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int j = j0 + r * nwarps;
        if (j < n_old) {
#pragma unroll
          for (int u = 0; u < 4; ++u) {
            const int i = c0 + lane32 + 32 * u;
            if (i < K) KV[j * K + i] = widen_bits(kb[r][u], rg.k_dt) * ksv[r];
          }
        }
      }
    }
  }
  // d of the old records: a warp per (record, head), lanes along the head's
  // vt rows (row rr = hvl·vt + v − v0; no division per element); two items
  // and 128 rows at a time, raw, as the keys.
  for (int jh0 = warp; jh0 < (rec16 ? 0 : n_old * a.nh); jh0 += 2 * nwarps) {
    for (int c0 = 0; c0 < vt; c0 += 128) {
      uint32_t db[2][4];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int jh = jh0 + r * nwarps;
        if (jh < n_old * a.nh) {
          const int j = jh / a.nh, hvl = jh - j * a.nh;
          const int64_t base = s * rg.d0 + int64_t(rpos(old_start, j)) * rg.d1 + int64_t(hv0 + hvl) * rg.d2 + v0;
          if (MMA && vt == 128) {  // one dtype branch per record
            raw_row128(rg.d, rg.d_dt, base, lane32, db[r]);
            continue;
          }
#pragma unroll
          for (int u = 0; u < 4; ++u) {
            const int v = c0 + lane32 + 32 * u;
            db[r][u] = v < vt ? load_bits(rg.d, rg.d_dt, base + v) : 0u;
          }
        }
      }
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const int jh = jh0 + r * nwarps;
        if (jh < n_old * a.nh) {
          const int j = jh / a.nh, hvl = jh - j * a.nh;
          float* dst = DT + j * RBM + hvl * vt;
#pragma unroll
          for (int u = 0; u < 4; ++u) {
            const int v = c0 + lane32 + 32 * u;
            if (v < vt) dst[v] = widen_bits(db[r][u], rg.d_dt);
          }
        }
      }
    }
  }
  for (int x = tid; x < (rec16 ? 0 : a.nh * T); x += NT) {
    const float be = beta_at(in, b, x % T, hv0 + x / T);
    BETA[x] = be;
    if (a.dual && g_writer)
      static_cast<float*>(a.ring_beta.p)[s * a.ring_beta.s0 + int64_t(rpos(p.append_start, x % T)) * a.ring_beta.s1 +
                                         int64_t(hv0 + x / T) * a.ring_beta.s2] = be;
  }
  // Gates and cumulative log-decays Λ (GDN: fp64 sums per head, restarting
  // at the new checkpoint for the window of a flushing step; KDA: below).
  // Window gates are appended.
  if (!KDA) {
    for (int x = tid; x < a.nh * n; x += NT) {
      const int hvl = x / n, i = x % n, hv = hv0 + hvl;
      float g;
      if (i < n_old) {
        g = rg.g[s * rg.g0 + int64_t(rpos(old_start, i)) * rg.g1 + int64_t(hv) * rg.g2];
      } else {
        const int t = i - n_old;
        g = gate_at(in, false, b, t, hv, 0);
        if (g_writer) rg.g[s * rg.g0 + int64_t(rpos(p.append_start, t)) * rg.g1 + int64_t(hv) * rg.g2] = g;
      }
      GS[hvl * NM + i] = g;
    }
    __syncthreads();
    for (int hvl = tid; hvl < a.nh; hvl += NT) {
      double lam = 0;
      for (int i = 0; i < n; ++i) {
        if (p.flush && i == n_old) lam = 0;
        lam += GS[hvl * NM + i];
        LAMD[hvl * NM + i] = lam;
      }
    }
  } else {
    // KDA, per channel k: fp32 partial sums of the gates in GF — an old
    // record j <= r = n_old − 1 gets
    // Σ_{j<i<=r} g_i = Λ_r − Λ_j (backwards from r), a window record m gets
    // Σ_{n_old<=i<=m} g_i = Λ_m − Λ_r, and TOT[k] = Σ_{i<=r} g_i = Λ_r. Every
    // exponent below is one of these or a difference of two window sums, each
    // a sum of at most L + T gates of one sign for decaying gates.
    // Two threads per channel (every thread at K = 128): part 0 the old
    // records, backwards (ring loads in batches of 8, then the suffix sums
    // and TOT), part 1 the window, forwards (its T raw gate loads first, then
    // the gates, appended, and their prefix sums); the same sums in the same
    // order as one thread taking both.
    const int hv = hv0;
    for (int x = tid; x < 2 * K; x += NT) {
      const int part = x >= K, k = x - part * K;
      // the channel's ring gates, addressed once
      float* const gring = rg.g + s * rg.g0 + int64_t(hv) * rg.g2 + k;
      float acc = 0.f;
      if (part == 0 && rec16) {  // the staged gates, in place
        for (int j = n_old - 1; j >= 0; --j) {
          const float g = GF[j * K + k];
          GF[j * K + k] = acc;
          acc += g;
        }
        TOT[k] = acc;
      } else if (part == 0) {
        for (int j0 = n_old - 1; j0 >= 0; j0 -= 8) {
          float g[8];
#pragma unroll
          for (int e = 0; e < 8; ++e)
            if (j0 - e >= 0) g[e] = gring[int64_t(rpos(old_start, j0 - e)) * rg.g1];
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            if (j0 - e < 0) break;
            GF[(j0 - e) * K + k] = acc;
            acc += g[e];
          }
        }
        TOT[k] = acc;
      } else {
        GateRaw gr = rec16 ? wgr : gate_raw(in, true, b, 0, hv, k);  // the raw-gate constants; .x per token below
        // −e^{A_log} once per channel (gate_of's factor; the same product below)
        [[maybe_unused]] const float nega = MMA && in.raw_gate ? -expf(gr.al) : 0.f;
        const int64_t gin = b * in.g.sb + int64_t(hv) * in.g.sh + k;
        for (int t0 = 0; t0 < T; t0 += 8) {
          uint32_t raw[8];
#pragma unroll
          for (int e = 0; e < 8; ++e)
            if (t0 + e < T) raw[e] = rec16 ? wraw[e] : load_bits(in.g.p, in.g.dt, gin + int64_t(t0 + e) * in.g.st);
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            const int t = t0 + e;
            if (t >= T) break;
            gr.x = raw[e];
            float g;
            if constexpr (MMA) {
              g = widen_bits(raw[e], in.g.dt);
              if (in.raw_gate) g = nega * cuda_util::softplus(g + gr.bias);
            } else {
              g = gate_of(in, gr);
            }
            if (g_writer) gring[int64_t(rpos(p.append_start, t)) * rg.g1] = g;
            acc += g;
            GF[(n_old + t) * K + k] = acc;
          }
        }
      }
    }
  }
  __syncthreads();

  // Coefficients: W (history and earlier window terms), the checkpoint
  // scales e^{Λ_m} and, with a flush, the fold coefficients.
  if (!KDA) {
    if (p.flush) {
      for (int x = tid; x < a.nh * n_old; x += NT) {
        const int hvl = x / n_old, j = x % n_old;
        CF[hvl * NM + j] = expf(float(LAMD[hvl * NM + n_old - 1] - LAMD[hvl * NM + j]));
      }
      for (int hvl = tid; hvl < a.nh; hvl += NT) E0[hvl] = expf(float(LAMD[hvl * NM + n_old - 1]));
    }
    for (int x = tid; x < a.nh * T; x += NT) EU[x] = expf(float(LAMD[(x / T) * NM + n_old + x % T]));
    if constexpr (MMA) {
      // a warp per record j_lo <= j < n_old + T − 1: lane l forms channels
      // 4l … 4l + 3 of k̂_j·k̂_m and k̂_j·q̂_t for every token (value u < 8: k̂
      // of token u, u >= 8: q̂ of token u − 8), one transposed reduction sums
      // them (lanes 2u, 2u + 1 hold value u); lanes 2t + h (t < T, m > j) take
      // the q̂ value from lane 16 + 2t + h and write both terms of heads h,
      // h + 2, … (one e^{Λ_m − Λ_j} per head).
      for (int j = j_lo + warp; j < n_old + T - 1; j += nwarps) {
        float v[16];
        warp_dots16(KV + j * K, KV + n_old * K, QV, T, K, lane32, v);
        const float dq = __shfl_down_sync(0xffffffffu, v[0], 16);
        const int t = lane32 >> 1, m = n_old + t;
        if (lane32 < 16 && t < T && m > j)
          for (int hvl = lane32 & 1; hvl < a.nh; hvl += 2) {
            const float e = expf(float(LAMD[hvl * NM + m] - LAMD[hvl * NM + j]));
            W[((hvl * T + t) * 2) * NM + j] = e * v[0];
            W[((hvl * T + t) * 2 + 1) * NM + j] = e * dq;
          }
      }
    } else {
      // a warp per (token t, record j_lo <= j < m)
      for (int t = 0; t < T; ++t)
        for (int j = j_lo + warp, m = n_old + t; j < m; j += nwarps) {
          float dk = 0.f, dq = 0.f;
          for (int i = lane32; i < K; i += 32) {
            const float kj = KV[j * K + i];
            dk += kj * KV[m * K + i];
            dq += kj * QV[t * K + i];
          }
          dk = warp_sum(dk);
          dq = warp_sum(dq);
          for (int hvl = lane32; hvl < a.nh; hvl += 32) {
            const float e = expf(float(LAMD[hvl * NM + m] - LAMD[hvl * NM + j]));
            W[((hvl * T + t) * 2) * NM + j] = e * dk;
            W[((hvl * T + t) * 2 + 1) * NM + j] = e * dq;
          }
        }
    }
  } else {
    for (int x = tid; x < T * K; x += NT) {  // e^{Λ_m}, Λ restarting at n_old with a flush
      const int t = x / K, k = x % K, m = n_old + t;
      const float e = expf(p.flush ? GF[m * K + k] : TOT[k] + GF[m * K + k]);
      UK[x] = e * KV[m * K + k];
      UQ[x] = e * QV[x];
    }
    // The old records' terms factor through the last old record r = n_old − 1
    // (Λ_r − Λ_j <= 0 for j <= r, Λ_m − Λ_r <= 0 for m > r):
    //   W_{t,u,j} = (e^{Λ_m − Λ_r} ⊙ u)·(e^{Λ_r − Λ_j} ⊙ k̂_j),
    // the second factor the fold vector of a flush, so (T + n_old)·K
    // exponentials instead of T·n_old·K. Window records (j >= n_old) keep
    // the direct form.
    // [2][T][K] e^{Λ_m − Λ_r} ⊙ k̂_m, e^{Λ_m − Λ_r} ⊙ q̂_t (MMA: in the operand region, filled later)
    float* UA = MMA ? reinterpret_cast<float*>(HL ? at_aligned<16>(reinterpret_cast<char*>(smem4), lay.bytes)
                                                  : reinterpret_cast<char*>(smem4) + lay.bytes)
                    : HL ? at_aligned(sm, lay.ua)
                         : sm + lay.ua;
    const bool old_terms = j_lo < n_old;
    if (n_old > 0) {
      for (int x = tid; x < n_old * K; x += NT) KV[x] *= expf(GF[x]);
      if (old_terms)
        for (int x = tid; x < T * K; x += NT) {
          const int t = x / K, k = x % K, m = n_old + t;
          const float e = expf(GF[m * K + k]);
          UA[x] = e * KV[m * K + k];
          UA[T * K + x] = e * QV[x];
        }
    }
    if (p.flush)
      for (int k = tid; k < K; k += NT) E0V[k] = expf(TOT[k]);
    // window records: a warp per pair (t, n_old <= j < m), the T(T − 1)/2
    // pairs numbered t by t and dealt round the warps (pair q: t with
    // t(t − 1)/2 <= q < t(t + 1)/2), so no warp takes more than
    // ceil(pairs / warps) (by t, warp 0 took T − 1 of them)
    for (int q = warp; q < T * (T - 1) / 2; q += nwarps) {
      int t = 1, q0 = 0;
      while (q >= q0 + t) q0 += t++;
      const int m = n_old + t, j = n_old + q - q0;
      float wk = 0.f, wq = 0.f;
      for (int k = lane32; k < K; k += 32) {
        const float kk = expf(GF[m * K + k] - GF[j * K + k]) * KV[j * K + k];
        wk += kk * KV[m * K + k];
        wq += kk * QV[t * K + k];
      }
      wk = warp_sum(wk);
      wq = warp_sum(wq);
      if (lane32 == 0) {
        W[(t * 2) * NM + j] = wk;
        W[(t * 2 + 1) * NM + j] = wq;
      }
    }
    if (old_terms && MMA) {
      __syncthreads();  // UA and the scaled keys stored
      // a warp per old record j, its 2T products at once (as GDN's above)
      for (int j = warp; j < n_old; j += nwarps) {
        float v[16];
        warp_dots16(KV + j * K, UA, UA + T * K, T, K, lane32, v);
        const int u = lane32 >> 1, t = u & 7;
        if (!(lane32 & 1) && t < T) W[(t * 2 + (u >> 3)) * NM + j] = v[0];
      }
    } else if (old_terms) {
      __syncthreads();  // UA and the scaled keys stored
      for (int t = 0; t < T; ++t)
        for (int j = warp; j < n_old; j += nwarps) {
          float wk = 0.f, wq = 0.f;
          for (int k = lane32; k < K; k += 32) {
            const float kj = KV[j * K + k];
            wk += kj * UA[t * K + k];
            wq += kj * UA[(T + t) * K + k];
          }
          wk = warp_sum(wk);
          wq = warp_sum(wq);
          if (lane32 == 0) {
            W[(t * 2) * NM + j] = wk;
            W[(t * 2 + 1) * NM + j] = wq;
          }
        }
    }
  }
  __syncthreads();

  if constexpr (MMA) {
    // ---- Tensor-core stream (T > 1, K = 128, tiles of 16 rows inside one
    // value head: delta_launch.cu::replay_mma_fits). A warp owns whole tiles
    // (tile = warp + nwarps·i; no barrier in the stream). Per tile, as
    // m16n8k8 tf32 products with the tokens as rows (fp32 operands split hi
    // + lo, cuda_util::tf32_split): [A_k; A_q]ᵀ = [û_k,0 … û_k,7; û_q,0 …
    // û_q,7]ᵀ·S_0ᵀ (û: k̂ / q̂ of the window, KDA with e^{Λ_m} folded in; 16
    // token rows × 8 state rows per product, two products per k-step for the
    // tile's 16 rows) over the two column halves of S_0 in turn (from the
    // warp's stage; the next unit is issued as soon as the current one is in
    // registers), GDN's e^{Λ_m} per token applied, then the old records'
    // history [W_k; W_q]·[d_j] (token rows × records · records × state rows)
    // added to the same accumulators. Lane (g, t4) holds state rows g, g + 8
    // at columns 64·half + 16c + 4·t4 + e; inside a k-step k = t4 is column
    // 16c + 4·t4 + 2s and k = t4 + 4 the next, for A and B alike, so a B
    // fragment is a pair of consecutive registers of a row as loaded, and an
    // A fragment one 16-byte load of UH / UL. The accumulators give lane
    // (g, t4) token g (k̂ and q̂ products) of state rows 2·t4, 2·t4 + 1, 2·t4
    // + 8, 2·t4 + 9, so the window's T × T lower-triangular system is solved
    // down the lanes of one t4: token t is finished by lanes g = t (d_t
    // rounded to ring_d's dtype, o_t) and broadcast by shuffle to the later
    // tokens' lanes, which add W_{g,u,m} d_t; d and o are stored after the
    // solve.
    // A flush first folds the tile's rows in registers, e^{Λ_h} S_0 +
    // Σ_j (c_j d_j) k̂_j with the sum as tensor-core products (split hi + lo;
    // the CUDA-core and T = 1 kernels fold sequentially: equal to rounding),
    // stores them and reads them out as stored.
    constexpr int KM = REPLAY_MMA_K, UBP = REPLAY_MMA_UBP;
    constexpr bool SPLIT_S = SD == DType::f32;  // the state's low part (16-bit states are exact in tf32)
    // A operands, split: UH / UL [token t][column pair p] = {û_k,t[2p], û_q,t[2p],
    // û_k,t[2p + 1], û_q,t[2p + 1]} (hi / lo); rows of UBP = 65 units, so the
    // 16-byte loads of a quarter warp (two tokens, four pairs two apart) hit
    // 8 distinct 16-byte bank groups.
    uint4* UH = reinterpret_cast<uint4*>(HL ? at_aligned<16>(reinterpret_cast<char*>(smem4), lay.bytes)
                                            : reinterpret_cast<char*>(smem4) + lay.bytes);  // [8][UBP]
    uint4* UL = UH + 8 * UBP;                                                        // [8][UBP]
    int* POS = reinterpret_cast<int*>(UL + 8 * UBP);                                 // [8] ring positions
    static_assert(8 * (KM / 2) % NT == 0, "whole passes over the A operands");
#pragma unroll
    for (int i = 0; i < 8 * (KM / 2) / NT; ++i) {
      const unsigned x = unsigned(tid + i * NT);
      const unsigned t = x / (KM / 2), kk = 2 * (x % (KM / 2));
      float2 vk = make_float2(0.f, 0.f), vq = make_float2(0.f, 0.f);
      if (t < unsigned(T)) {
        vk = *reinterpret_cast<const float2*>((KDA ? UK + t * KM : KV + (n_old + t) * KM) + kk);
        vq = *reinterpret_cast<const float2*>((KDA ? UQ : QV) + t * KM + kk);
      }
      uint4 h, l;
      tf32_split<true>(vk.x, h.x, l.x);
      tf32_split<true>(vq.x, h.y, l.y);
      tf32_split<true>(vk.y, h.z, l.z);
      tf32_split<true>(vq.y, h.w, l.w);
      UH[t * UBP + kk / 2] = h;
      UL[t * UBP + kk / 2] = l;
    }
    if (tid < T) POS[tid] = rpos(p.append_start, tid);
    __syncthreads();
    // A3: the preparation's arrays are read; the first unit into the stage
    if constexpr (A3)
      if (warp < RB / 16) issue_unit(row_ptr(warp * 16), 0);
    const int g = lane32 >> 2, t4 = lane32 & 3;
    const bool tok = g < T;  // this lane's token g is in the window
    const int ntiles = RB / 16;
    // the tile's value head and first row inside it, advanced per tile
    // without a division (vt is a multiple of 16)
    int t_hvl = (warp * 16) / vt, t_rem = (warp * 16) % vt;
    for (int tile = warp; tile < ntiles; tile += nwarps) {
      const int rr0 = tile * 16, hvl = t_hvl, hv = hv0 + hvl, hwi = KDA ? 0 : hvl;
      const int vs = v0 + t_rem;  // the tile's first v
      TS* const trow = state + int64_t(hv) * a.st.s1 + int64_t(vs) * a.st.s2;  // the tile's first row
      for (t_rem += 16 * nwarps; t_rem >= vt; t_rem -= vt) ++t_hvl;  // now the warp's next tile
      // The lane's accumulator rows: vs + 2·t4 + ro(i), i < 4.
      auto ro = [](int i) { return (i & 1) + 8 * (i >> 1); };
      // token g's inputs v at those rows (raw loads first: act_at would wait
      // for each 16-bit v in turn)
      uint32_t vb[4];
      float vin[4];
      const int64_t vbase = b * in.v.sb + int64_t(g) * in.v.st + int64_t(hv) * in.v.sh + vs + 2 * t4;
#pragma unroll
      for (int i = 0; i < 4; ++i) vb[i] = tok ? load_bits(in.v.p, in.v.dt, vbase + ro(i)) : 0u;
#pragma unroll
      for (int i = 0; i < 4; ++i) vin[i] = widen_bits(vb[i], in.v.dt);
      // [n-tile h: rows 2·t4, 2·t4 + 1 (+ 8h)][k̂ token g at those rows: 0, 1; q̂ token g: 2, 3]
      float acc[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int col0 = hf * 64 + 4 * t4;
        float f[2][16];  // [row g + 8h][16c + 4·t4 + e]
        if (WIDE || hf == 0) {
          cp_async_wait_all();
          __syncwarp();
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = g + 8 * h;
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            // byte offset in the unit's row: fp32 16·(4c + t4); 16-bit 2·(64·hf + 16c + 4·t4)
            const int bo = WIDE ? 16 * (4 * c + t4) : 128 * hf + 32 * c + 8 * t4;
            ld4<SD>(stg + r * 256 + (((bo >> 4) ^ swz(r)) << 4) + (bo & 15), f[h] + 4 * c);
          }
        }
        if (WIDE || hf == 1) {  // the stage is read: the warp's next unit
          __syncwarp();
          const int nt = WIDE && hf == 0 ? tile : tile + nwarps;
          if (nt < ntiles)
            issue_unit(WIDE && hf == 0 ? trow : state + int64_t(hv0 + t_hvl) * a.st.s1 + int64_t(v0 + t_rem) * a.st.s2,
                       WIDE && hf == 0 ? 1 : 0);
          // a.half_pf: the next tile's second half into L2 beside its first
          // (two units in flight per warp, one of them in L2; KDA only)
          if constexpr (KDA && WIDE && QF == QF_NONE)
            if (a.half_pf && hf == 1 && nt < ntiles && lane32 < 16)
              cuda_util::prefetch_l2(state + int64_t(hv0 + t_hvl) * a.st.s1 + int64_t(v0 + t_rem + lane32) * a.st.s2 + 64,
                                     uint32_t(64 * sizeof(TS)));
          if constexpr (SPF)
            if (!(WIDE && hf == 0)) prefetch_tile(tile + 2 * nwarps);
        }
        if (p.flush) {
#pragma unroll
          for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int e = 0; e < 16; ++e) f[h][e] *= KDA ? E0V[col0 + 16 * (e / 4) + e % 4] : E0[hvl];
          // Σ_j (c_j d_j) k̂_j as products rows × records · records × columns
          // (A: c_j d_j of rows g, g + 8, records j0 + t4, j0 + t4 + 4; B: the
          // record keys (KDA: the fold vectors, c_j inside)). The accumulator
          // of n-tile nt of column group c holds columns 16c + 4·t4 + 2·nt + {0, 1}
          // of rows g, g + 8: exactly f's layout, so B's column n is
          // 16c + 4·(n >> 1) + 2·nt + (n & 1).
          const int hb = hf * 64 + 4 * (g >> 1) + (g & 1);
          for (int j0 = 0; j0 < n_old; j0 += 8) {
            const int ja = j0 + t4, jb = ja + 4;
            const float ca = ja < n_old ? (KDA ? 1.f : CF[hvl * NM + ja]) : 0.f;
            const float cb = jb < n_old ? (KDA ? 1.f : CF[hvl * NM + jb]) : 0.f;
            const float a4[4] = {ja < n_old ? DT[ja * RBM + rr0 + g] * ca : 0.f, ja < n_old ? DT[ja * RBM + rr0 + g + 8] * ca : 0.f,
                                 jb < n_old ? DT[jb * RBM + rr0 + g] * cb : 0.f, jb < n_old ? DT[jb * RBM + rr0 + g + 8] * cb : 0.f};
            uint32_t ah[4], al[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) tf32_split<true>(a4[i], ah[i], al[i]);
            const float* ka = KV + min(ja, n_old - 1) * KM + hb;
            const float* kb = KV + min(jb, n_old - 1) * KM + hb;
#pragma unroll
            for (int c = 0; c < 4; ++c)
#pragma unroll
              for (int nt = 0; nt < 2; ++nt) {
                uint32_t b0h, b0l, b1h, b1l;
                tf32_split<true>(ja < n_old ? ka[16 * c + 2 * nt] : 0.f, b0h, b0l);
                tf32_split<true>(jb < n_old ? kb[16 * c + 2 * nt] : 0.f, b1h, b1l);
                float acc[4] = {f[0][4 * c + 2 * nt], f[0][4 * c + 2 * nt + 1], f[1][4 * c + 2 * nt], f[1][4 * c + 2 * nt + 1]};
                mma_tf32x3(acc, ah, al, b0h, b1h, b0l, b1l);
                f[0][4 * c + 2 * nt] = acc[0], f[0][4 * c + 2 * nt + 1] = acc[1];
                f[1][4 * c + 2 * nt] = acc[2], f[1][4 * c + 2 * nt + 1] = acc[3];
              }
          }
#pragma unroll
          for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int c = 0; c < 4; ++c) st4<SD>(trow + int64_t(g + 8 * h) * a.st.s2 + col0 + 16 * c, f[h] + 4 * c);
        }
#pragma unroll
        for (int c = 0; c < 4; ++c)
#pragma unroll
          for (int s2 = 0; s2 < 2; ++s2) {
            const int pr = (col0 + 16 * c + 2 * s2) / 2;  // the column pair of k = t4, k = t4 + 4
            const uint4 h4 = UH[g * UBP + pr], l4 = UL[g * UBP + pr];
            const uint32_t ah[4] = {h4.x, h4.y, h4.z, h4.w}, al[4] = {l4.x, l4.y, l4.z, l4.w};
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              uint32_t b0h, b1h, b0l = 0u, b1l = 0u;
              tf32_split<SPLIT_S>(f[h][4 * c + 2 * s2], b0h, b0l);
              tf32_split<SPLIT_S>(f[h][4 * c + 2 * s2 + 1], b1h, b1l);
              mma_tf32x3<true, SPLIT_S>(acc[h], ah, al, b0h, b1h, b0l, b1l);
            }
          }
      }
      // GDN: e^{Λ_m} of token g scales the checkpoint products
      if constexpr (!KDA) {
        const float e = EU[hvl * T + min(g, T - 1)];
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int i = 0; i < 4; ++i) acc[h][i] *= e;
      }
      // history of the old records (none after a flush: j_lo = n_old) into
      // the same accumulators: A = token g's W_k, W_q at records j0 + t4,
      // j0 + t4 + 4; B = those records' d at rows g, g + 8
      const float* const wg = W + ((hwi * T + min(g, T - 1)) * 2) * NM;  // token g's W_k row (W_q: + NM)
      for (int j0 = j_lo; j0 < n_old; j0 += 8) {
        const int ja = j0 + t4, jb = ja + 4;
        const bool va = ja < n_old, vb4 = jb < n_old;
        const float a4[4] = {tok && va ? wg[ja] : 0.f, tok && va ? wg[NM + ja] : 0.f, tok && vb4 ? wg[jb] : 0.f,
                             tok && vb4 ? wg[NM + jb] : 0.f};
        uint32_t ah[4], al[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) tf32_split<true>(a4[i], ah[i], al[i]);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          uint32_t b0h, b0l, b1h, b1l;
          tf32_split<true>(va ? DT[ja * RBM + rr0 + g + 8 * h] : 0.f, b0h, b0l);
          tf32_split<true>(vb4 ? DT[jb * RBM + rr0 + g + 8 * h] : 0.f, b1h, b1l);
          mma_tf32x3(acc[h], ah, al, b0h, b1h, b0l, b1l);
        }
      }
      // The solve down the lanes of one t4: lanes g = t finish token t at
      // their four rows (d_t rounded to ring_d's dtype, o_t) and broadcast
      // d_t; the later tokens' lanes add W_{g,u,m} d_t.
      float rk[4] = {acc[0][0], acc[0][1], acc[1][0], acc[1][1]};
      float rq[4] = {acc[0][2], acc[0][3], acc[1][2], acc[1][3]};
      const float be = tok ? BETA[hvl * T + g] : 0.f, kq = tok ? KQ[g] : 0.f;
      float dfin[4] = {0.f, 0.f, 0.f, 0.f}, ofin[4] = {0.f, 0.f, 0.f, 0.f};
      // one instance per ring_d dtype (rnd: its rounding), so the loop takes
      // no dtype branch per value
      auto solve = [&](auto rnd) {
        for (int t = 0; t < T; ++t) {
          // every lane rounds, lanes g = t keep theirs
          float dc[4];
#pragma unroll
          for (int i = 0; i < 4; ++i) dc[i] = rnd(be * (vin[i] - rk[i]));
          if (g == t) {
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              dfin[i] = dc[i];
              ofin[i] = rq[i] + kq * dfin[i];
            }
          }
          float dv[4];
#pragma unroll
          for (int i = 0; i < 4; ++i) dv[i] = __shfl_sync(0xffffffffu, dfin[i], 4 * t + t4);
          if (tok && g > t) {
            const float wk = wg[n_old + t], wq = wg[NM + n_old + t];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              rk[i] = fmaf(wk, dv[i], rk[i]);
              rq[i] = fmaf(wq, dv[i], rq[i]);
            }
          }
        }
      };
      // (round_to's three cases)
      if (rg.d_dt == DType::bf16) solve([](float x) { return __bfloat162float(__float2bfloat16_rn(x)); });
      else if (rg.d_dt == DType::f16) solve([](float x) { return __half2float(__float2half_rn(x)); });
      else solve([](float x) { return x; });
      // d, o (and a dual step's v records) of token g at this lane's rows; the
      // dual variant apart, so that a plain step computes no ring_v addresses
      auto stores = [&](auto dual) {
        const int64_t pos = POS[g];
        const int64_t dbase = s * rg.d0 + pos * rg.d1 + int64_t(hv) * rg.d2 + vs + 2 * t4;
        const int64_t obase = b * in.o.sb + int64_t(g) * in.o.st + int64_t(hv) * in.o.sh + vs + 2 * t4;
        store_quad(rg.d, rg.d_dt, dbase, dfin);
        store_quad(in.o.p, in.o.dt, obase, ofin);
        if constexpr (decltype(dual)::value)
          store_quad(a.ring_v.p, a.ring_v.dt, s * a.ring_v.s0 + pos * a.ring_v.s1 + int64_t(hv) * a.ring_v.s2 + vs + 2 * t4,
                     vin);
      };
      if (tok) {
        if (a.dual) stores(std::true_type{});
        else stores(std::false_type{});
      }
    }
  } else {
    for (int pi = 0; pi < np; ++pi) {
      const int rr = pi * rpp + grp;
      const bool valid = rr < RB;
      const int rc = valid ? rr : 0;
      if (pi + 1 < np) {
        if (rr + rpp < RB) load_row(nxt, rr + rpp);
        else nxt.zero();
      }
      const int hvl = rc / vt, hv = hv0 + hvl, v = v0 + rc % vt;
      if constexpr (QF == QF_NONE) {
      if (p.flush) {
        if (KDA) {
          cur.scale(E0V, lane, lpr, K);
          for (int j = 0; j < n_old; ++j) cur.axpy(DT[j * RBM + rc], KV + j * K, lane, lpr, K);
        } else {
          cur.scale(E0[hvl]);
          for (int j = 0; j < n_old; ++j) cur.axpy(DT[j * RBM + rc] * CF[hvl * NM + j], KV + j * K, lane, lpr, K);
        }
        if (valid) cur.store(row_ptr(rr), lane, lpr, K, /*keep=*/true);
      }
      }
      for (int t = 0; t < T; ++t) {
        const int m = n_old + t;
        float pk, pq;
        if (KDA) {
          pk = cur.dot(UK + t * K, lane, lpr, K);
          pq = cur.dot(UQ + t * K, lane, lpr, K);
        } else {
          const float e = EU[hvl * T + t];
          pk = e * cur.dot(KV + m * K, lane, lpr, K);
          pq = e * cur.dot(QV + t * K, lane, lpr, K);
        }
        const float* wk = W + ((KDA ? 0 : hvl) * T + t) * 2 * NM;
        const float* wq = wk + NM;
        // A row past the block's rows (uniform in its lane group) reads no
        // history: its clamped index rc = 0 names a row that other warps write.
        for (int j = j_lo + lane, je = valid ? m : j_lo; j < je; j += lpr) {
          const float dj = DT[j * RBM + rc];
          pk += wk[j] * dj;
          pq += wq[j] * dj;
        }
        pk = group_sum(pk, lpr);
        pq = group_sum(pq, lpr);
        if (valid && lane == 0) {
          const float dr = round_to(rg.d_dt, BETA[hvl * T + t] * (act_at(in.v, b, t, hv, v) - pk));
          DT[m * RBM + rr] = dr;
          const int64_t pos = ring_pos(p.append_start, t, R);
          store_any(rg.d, rg.d_dt, s * rg.d0 + pos * rg.d1 + int64_t(hv) * rg.d2 + v, dr);
          out_at(in.o, b, t, hv, v, pq + KQ[t] * dr);
          if (a.dual)
            store_any(a.ring_v.p, a.ring_v.dt, s * a.ring_v.s0 + pos * a.ring_v.s1 + int64_t(hv) * a.ring_v.s2 + v,
                      act_at(in.v, b, t, hv, v));
        }
        __syncwarp();
      }
      cur = nxt;
    }
  }
}

}  // namespace replayssm::delta::cuda_impl
