// Replay step for N = 128 and T <= 8: the block's state arrives by bulk
// copies. T = 1 streams on CUDA cores (MMA = false, below); speculative steps
// (T > 1, MMA = true) verify on tensor cores (phase 4, T > 1).
//
// Same step as mamba2_replay_kernel (replay_kernel.cuh). The
// block's state (HB heads × P rows, one contiguous block of the slot) streams
// through NST shared-memory stages of one sweep (KERNEL_WARPS × RB rows)
// each, filled by bulk asynchronous copies (cp.async.bulk, the TMA engine:
// one instruction per sweep) that complete on one mbarrier per stage. The
// first NST sweeps are requested as soon as the slot is known, so they fly
// during the block's dependent chain (slot → cursor → ring → coefficients);
// a stage is refilled once the block has read it (docs/perf_notes_mamba2.md,
// "the stream's roofline, then a bulk-copy T = 1 kernel"). The arithmetic
// follows tools/probe/stream_probe.cu: every lane owns one 16-byte column
// vector of a row (fp32: 32 lanes per row; bf16 / f16: 16), forms S·C_t for RB
// rows and sums them with one transposed reduction (RB − 1 + log2(LPR/RB)
// shuffles for RB rows).
//
// Per block (row b, heads [h0, h0 + HB) of one group, all P rows):
//  1. slot; thread 0 issues the bulk copies of the first NST sweeps.
//  2. with the cursor (plain loads; every thread derives the plan): the
//     window's T tokens (C_t, B_t, δ_t, A, D: batched loads; x_t, z_t:
//     cp.async); then the n records the plan reads, staged by record index
//     (bulk copies when contiguous): shared memory for L records, not the
//     ring's R entries.
//  3. while the first sweeps fly: the T appends, B_j·C_t, decays and
//     coefficients (one warp per (head, t), suffix sums of δ as in
//     replay_kernel.cuh), fold weights fw_j, fdec (flush),
//     hist_t = D x_t + Σ_j coef_tj x_j (an fp8 copy: in phase 4's epilogue,
//     per row, which leaves room for a group's 16 heads per block).
//  4. the sweeps: S·C_t per row; a flush (block-uniform) first folds the
//     row in registers (fdec·S_0 + Σ_j fw_j x_j[p] B_j, B_j converted from
//     the staged records), rounds it, writes it once and reads it out as
//     stored; the lane holding a row's sum writes y = dec·(S·C_t) + hist,
//     gated. T > 1: the same outputs, S·[C_1 … C_T] on tensor cores (the
//     MMA branch of phase 4 describes the fragments), and the fold there
//     too (Params::fold_tc: W·B as tf32 products on the same accumulators;
//     otherwise the FMA stream).
// Dual precision (p.dual): the state is a bf16 / f16 read copy, or (QF, T = 1)
// a packed fp8 / nvfp4 one; a flushing row is folded and re-packed by the
// pack kernel, which this launch overlaps as its programmatic dependent: the
// first sweeps wait for the plan, a flushing row waits for the pack grid
// (griddepcontrol.wait) and runs with an empty history.
#pragma once
#include "mamba2/replay_kernel.cuh"

namespace replayssm::mamba2::kern {

inline constexpr int R1_N = 128;  // the one d_state this kernel serves
inline constexpr int R1_RB = 8;   // rows per lane group and warp batch (one transposed reduction)
inline constexpr int R1_BLOCKS_PER_SM = 2;  // shared memory: 2-4 stages of 32 KiB and the ring
inline constexpr int R1_MAX_STAGES = 4;  // sweep stages in flight (one mbarrier each)
inline constexpr int R1_MAX_T = 8;  // tokens per step (the tensor-core stream's n = 8)

// Rows a warp reads per batch; a sweep is KERNEL_WARPS batches.
RSSM_M2_HD int replay1_batch_rows(int state_size) { return R1_RB * (32 / (R1_N * state_size / 16)); }
RSSM_M2_HD int replay1_sweep_rows(int state_size) { return KERNEL_WARPS * replay1_batch_rows(state_size); }
// A packed fp8 / nvfp4 read copy (QF, dual pools, T = 1; launch.cu::
// replay1_qfits): a lane owns 16 values of a row (fp8: 16 code bytes and one
// of the row's 32-value block scales, nvfp4: 8 bytes and its 16-value block
// scale), so a sweep is replay1_sweep_rows(1) = 256 rows, whole heads (P
// divides it). Its stage holds the codes of the sweep's rows, then their
// scale rows, then (nvfp4) one 16-byte tensor-scale slot per head: per head
// two or three bulk copies on the stage's mbarrier.
RSSM_M2_HD int64_t replay1_qsweep_bytes(int qf, int P, int srb) {
  const int sw = replay1_sweep_rows(1);
  return int64_t(sw) * (qf == QF_NVFP4 ? R1_N / 2 : R1_N) + int64_t(sw) * srb + (qf == QF_NVFP4 ? 16 * (sw / P) : 0);
}

// Shared-memory layout (byte offsets) of one block: the sweep stages, the
// (at most L) records the step reads, the window's T tokens and the per-step
// arrays; computed on the host and passed in Params::r1 (recomputing it took
// ~250 instructions per thread).
// qf (QF_FP8 / QF_NVFP4, srb scale bytes per row): stages of a packed copy.
inline Replay1Layout replay1_smem(int L, int T, int nh, int P, int act_size, int state_size, int stages,
                                  bool mma, int qf = QF_NONE, int srb = 0) {
  Replay1Layout m{};
  const int J = L + T;  // records (at most L) and the window's T tokens
  m.swb = int32_t(qf != QF_NONE ? replay1_qsweep_bytes(qf, P, srb)
                                : int64_t(replay1_sweep_rows(state_size)) * R1_N * state_size);
  int64_t o = int64_t(stages) * m.swb;  // sweep stages
  m.stage = 0;
  auto take = [&](int64_t bytes) {
    const int32_t at = int32_t(o);
    o += (bytes + 15) / 16 * 16;
    return at;
  };
  // every region starts 16-byte aligned (take rounds each size up)
  m.bar = take(8 * (R1_MAX_STAGES + 1));  // mbarriers: one per stage, then the ring's
  m.Pp = (P + 7) / 8 * 8;
  m.nhp = (nh + 3) / 4 * 4;
  // regions read only before the stream first (Cs … Ah): the tensor-core
  // stream's partial-sum buffer reuses them when they are large enough
  const int64_t dead0 = o;
  m.Cs = take(int64_t(act_size) * T * R1_N);            // [T][N]      C_t (activation dtype: exact)
  m.Bw = take(int64_t(act_size) * T * R1_N);            // [T][N]      B of the window
  m.BC = take(4 * T * J);                               // [T][J]      B_j·C_t
  m.dh = take(4 * int64_t(L) * m.nhp);                  // [L][nhp]    δ of the records
  m.dwin = take(4 * nh * T);                            // [nh][T]     δ of the window
  m.Ah = take(4 * nh);
  const int64_t dead = o - dead0;
  m.Dh = take(4 * nh);
  m.coef = take(4 * int64_t(nh) * T * J);               // [nh][T][J]
  m.xwin = take(int64_t(act_size) * T * nh * m.Pp);     // [T][nh][Pp] x of the window
  m.dec = take(4 * nh * T);                             // [nh][T]
  m.fw = take(4 * int64_t(nh) * L);                     // [nh][L]     fold weights
  m.fdec = take(4 * nh);
  // FMA stream: the history terms per row (the tensor-core stream forms them
  // from coef and x in its sweeps, an fp8 copy's stream in its epilogue per
  // row: 4 KiB less at 16 heads, so a group's 16 heads fit two 256-row
  // stages of codes)
  m.hist = mma || qf == QF_FP8 ? 0 : take(4 * int64_t(T) * nh * P);  // [T][nh·P]
  m.Bh = take(int64_t(act_size) * L * R1_N);            // [L][N]      B of the records
  m.xh = take(int64_t(act_size) * L * nh * m.Pp);       // [L][nh][Pp] x of the records
  m.zs = take(int64_t(act_size) * T * nh * m.Pp);       // [T][nh][Pp] z of the window
  // tensor-core stream: the column-half-1 warps' partial sums of two sweeps
  const int64_t red = 2 * (replay1_sweep_rows(state_size) / 16) * 32 * 16;
  m.red = !mma ? 0 : red <= dead ? m.Cs : take(red);
  m.bytes = int32_t(o);  // < 2^31: bounded by launch.cu::replay1_fits
  return m;
}

#ifdef __CUDACC__
using cuda_util::bulk_g2s;
using cuda_util::mbar_arrive_expect_tx;
using cuda_util::mbar_init;
using cuda_util::mbar_wait;
using cuda_util::mma_tf32;
using cuda_util::mma_tf32x3;
using cuda_util::mma_tf32x3_apart;
using cuda_util::tf32_split;
using cuda_util::ld4;
using cuda_util::st4;

// L2 prefetch for the block p.rec_pf after this one in grid order: its
// slot index, cursor and num_accepted, the window's token inputs and the
// records its plan reads, so that when it starts its dependent chain (slot →
// cursor → records) hits L2 instead of waiting loaded DRAM round trips behind
// the state streams (the delta kernels' prefetch_block_ahead,
// docs/perf_notes_delta.md, "records prefetched into L2 half a resident grid
// ahead"). The chain rides on this block's own: the ahead row's slot is loaded
// with this block's slot (ahead_begin, which also prefetches the tokens), its
// cursor with this block's cursor (ahead_cursor), and the records are
// prefetched once this block's are requested (ahead_records), so the
// prefetching warp adds no round trip of its own. A row that would be rejected
// is skipped (its blocks report it).
struct AheadRow {
  int64_t b = -1, slot = 0, acc = 0;
  int g = 0, h0 = 0;
  RingCursor cur{};
};
template <DType AD>
__device__ __forceinline__ AheadRow ahead_begin(const Params& p, int T, int nh, int lane) {
  AheadRow a;
  const int blk = int(blockIdx.x) + p.rec_pf;  // < 2^31 blocks; replay1: pchunks = 1
  if (blk >= int(gridDim.x)) return a;
  const int gh = blk / p.hchunks, hc = blk - gh * p.hchunks, row = gh / p.G;
  a.b = row;
  a.g = gh - row * p.G;
  a.h0 = a.g * p.hpg + hc * nh;
  a.slot = row_slot(p, a.b);
  if (p.acc) a.acc = cuda_util::load_index(p.acc, p.acc_dtype, a.b * p.acc_s);
  // tokens: per t, x and z of the heads, B and C of the group, δ of the heads
  constexpr int64_t as = sizeof(typename Traits<AD>::type);
  const int64_t ds = p.dt_dtype == DType::f32 ? 4 : 2;
  for (int u = lane; u < 5 * T; u += 32) {
    const int t = u / 5, k = u - 5 * t;
    if (k <= 1) {  // x, z: nh·P contiguous when the heads are
      const void* base = k == 0 ? p.x : p.z;
      if (!base) continue;
      const int64_t sh = k == 0 ? p.x_h : p.z_h;
      const char* q = static_cast<const char*>(base) +
                      (a.b * (k == 0 ? p.x_b : p.z_b) + t * (k == 0 ? p.x_t : p.z_t) + a.h0 * sh) * as;
      if (sh == p.P) cuda_util::prefetch_l2(q, uint32_t(nh * p.P * as));
      else for (int h = 0; h < nh; ++h) cuda_util::prefetch_l2(q + h * sh * as, uint32_t(p.P * as));
    } else if (k <= 3) {
      const bool isB = k == 2;
      cuda_util::prefetch_l2(static_cast<const char*>(isB ? p.Bm : p.Cm) +
                                 (a.b * (isB ? p.B_b : p.C_b) + t * (isB ? p.B_t : p.C_t) + a.g * (isB ? p.B_g : p.C_g)) * as,
                             uint32_t(p.N * as));
    } else {
      cuda_util::prefetch_l2(static_cast<const char*>(p.dt) + (a.b * p.dt_b + t * p.dt_t + a.h0) * ds, uint32_t(nh * ds));
    }
  }
  return a;
}
__device__ __forceinline__ void ahead_cursor(const Params& p, AheadRow& a) {
  if (a.b < 0) return;
  if (a.slot == p.pad || a.slot < 0 || a.slot >= p.S) { a.b = -1; return; }
  a.cur = load_cursor(p, a.slot);
}
template <DType AD>
__device__ __forceinline__ void ahead_records(const Params& p, const AheadRow& a, int nh, int lane) {
  if (a.b < 0) return;
  StepPlan q;
  int32_t bits = 0;
  if (plan_from_cursor(p, a.cur, a.acc, &q, &bits) != ROW_OK) return;
  const bool flush = q.flush && !p.dual;
  const int n = flush ? q.fold_count : q.hist_count, st = flush ? q.fold_start : q.hist_start;
  constexpr int64_t as = sizeof(typename Traits<AD>::type);
  for (int j = lane; j < n; j += 32) {
    const int64_t e = ring_wrap(st, j, p.R);
    const char* x = static_cast<const char*>(p.rx) + (a.slot * p.rx_s + e * p.rx_r + a.h0 * p.rx_h) * as;
    if (p.rx_h == p.P) cuda_util::prefetch_l2(x, uint32_t(nh * p.P * as));
    else for (int h = 0; h < nh; ++h) cuda_util::prefetch_l2(x + h * p.rx_h * as, uint32_t(p.P * as));
    cuda_util::prefetch_l2(static_cast<const char*>(p.rB) + (a.slot * p.rB_s + e * p.rB_r + a.g * p.rB_g) * as,
                           uint32_t(p.N * as));
    cuda_util::prefetch_l2(p.rdt + a.slot * p.rdt_s + e * p.rdt_r + a.h0, uint32_t(4 * nh));
  }
}

// The fold of a flushing block's 16 × 64 tile on tensor cores
// (Params::fold_tc), in the m16n8k8 accumulator layout of phase 4's T > 1
// sweeps: lane (g, t4) holds rows g, g + 8 (f[0], f[1]) of the tile at
// columns kh·64 + 4·t4 + 16c + e (f[h][4c + e]). f = fd·S_0, then f += W·B
// over the n records, W[r][j] = fw_j·x_j[r] (the same fp32 product as the
// FMA stream's weights) and B[j][·] the record's B_j, as tf32 products,
// eight records per k-step (records past n: W = B = 0). W is split hi + lo
// (tf32_split), fp32 B too; bf16 / f16 B is exact in tf32. n-tile (c, s2)
// takes the columns kh·64 + 16c + 4·(i >> 1) + 2·s2 + (i & 1) for its n
// index i, so that the lane's accumulators are exactly f[h][4c + 2·s2 +
// {0, 1}] and its B operand is column i = g: two of the four values one 8-
// or 16-byte load of columns kh·64 + 4·(g >> 1) + 16c … + 3 gives.
// Per row h (g, g + 8), of its own head: fd[h] its fold decay, fwh[h] its
// fold weights, xr[h] record 0's x at the row (record j at + j·xstep); bg:
// record 0's B_j at column kh·64 + 4·(g >> 1) (record j at + j·R1_N).
template <DType AD>
__device__ __forceinline__ void fold_tile_tc(float (&f)[2][16], const float (&fd)[2], const float* const (&fwh)[2],
                                             const typename Traits<AD>::type* const (&xr)[2], int xstep,
                                             const typename Traits<AD>::type* bg, int n, int lane) {
  using at_t = typename Traits<AD>::type;
  constexpr bool SPLIT_B = AD == DType::f32;
  const int t4 = lane & 3;
  const bool odd = (lane >> 2) & 1;
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int e = 0; e < 16; ++e) f[h][e] *= fd[h];
  // widens only the two values it takes (ld4 of all four and a select: the
  // bf16-state, f16-activation T = 1 instance 114 → 128 registers)
  auto bpair = [&](const at_t* q, bool v, float& b0, float& b1) {
    b0 = b1 = 0.f;
    if (!v) return;
    if constexpr (AD == DType::f32) {
      const float4 w = *reinterpret_cast<const float4*>(q);
      b0 = odd ? w.y : w.x;
      b1 = odd ? w.w : w.z;
    } else {
      const uint2 w = *reinterpret_cast<const uint2*>(q);
      if constexpr (AD == DType::bf16) {
        const int sh = odd ? 0 : 16;  // the value's bf16 bits to the high half
        b0 = __uint_as_float((w.x << sh) & 0xffff0000u);
        b1 = __uint_as_float((w.y << sh) & 0xffff0000u);
      } else {
        const int sh = odd ? 16 : 0;
        b0 = __half2float(__ushort_as_half(static_cast<unsigned short>(w.x >> sh)));
        b1 = __half2float(__ushort_as_half(static_cast<unsigned short>(w.y >> sh)));
      }
    }
  };
  for (int j0 = 0; j0 < n; j0 += 8) {
    const int ja = j0 + t4, jc = ja + 4;  // this lane's k = t4, t4 + 4
    const bool va = ja < n, vc = jc < n;
    // a0 / a1: rows g / g + 8 at k = t4; a2 / a3: at k = t4 + 4
    const float w[4] = {va ? fwh[0][ja] * Traits<AD>::load(xr[0][ja * xstep]) : 0.f,
                        va ? fwh[1][ja] * Traits<AD>::load(xr[1][ja * xstep]) : 0.f,
                        vc ? fwh[0][jc] * Traits<AD>::load(xr[0][jc * xstep]) : 0.f,
                        vc ? fwh[1][jc] * Traits<AD>::load(xr[1][jc * xstep]) : 0.f};
    uint32_t ah[4], al[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) tf32_split<true>(w[i], ah[i], al[i]);
    const at_t* const ba = bg + ja * R1_N, *const bc = bg + jc * R1_N;
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      float bv[2][2];  // [k = t4, t4 + 4][s2]
      bpair(ba + 16 * c, va, bv[0][0], bv[0][1]);
      bpair(bc + 16 * c, vc, bv[1][0], bv[1][1]);
#pragma unroll
      for (int s2 = 0; s2 < 2; ++s2) {
        uint32_t b0h, b0l, b1h, b1l;
        tf32_split<SPLIT_B>(bv[0][s2], b0h, b0l);
        tf32_split<SPLIT_B>(bv[1][s2], b1h, b1l);
        float acc[4] = {f[0][4 * c + 2 * s2], f[0][4 * c + 2 * s2 + 1], f[1][4 * c + 2 * s2], f[1][4 * c + 2 * s2 + 1]};
        mma_tf32x3<true, SPLIT_B>(acc, ah, al, b0h, b1h, b0l, b1l);
        f[0][4 * c + 2 * s2] = acc[0];
        f[0][4 * c + 2 * s2 + 1] = acc[1];
        f[1][4 * c + 2 * s2] = acc[2];
        f[1][4 * c + 2 * s2 + 1] = acc[3];
      }
    }
  }
}

// QF (QF_FP8 / QF_NVFP4, T = 1): the state is a packed read copy (dual pools).
template <DType SD, DType AD, bool MMA, int QF = QF_NONE>
__global__ void __launch_bounds__(KERNEL_THREADS, R1_BLOCKS_PER_SM)
mamba2_replay1_kernel(const Params p) {
  constexpr bool QB = QF != QF_NONE;
  static_assert(!QB || !MMA, "packed copies: the T = 1 stream");
  using st_t = std::conditional_t<QB, uint8_t, typename Traits<SD>::type>;
  using at_t = typename Traits<AD>::type;
  constexpr int E = QB ? 16 : VecOf<SD>::value;  // state elements per lane vector
  constexpr int LPR = R1_N / E;            // lanes per row (32 or 16; packed: 8)
  constexpr int RPL = 32 / LPR;            // rows per warp load
  constexpr int RB = R1_RB;
  constexpr int BR = RB * RPL;             // rows per warp batch
  constexpr int CH = 16 / int(sizeof(at_t));
  extern __shared__ float4 smem4[];
  char* base = reinterpret_cast<char*>(smem4);
  const BlockPos bp = block_pos(p);
  // T = 1 is a constant of the FMA stream's instance (its phases compile as
  // before the speculative generalisation)
  const int nh = bp.nh, P = p.P, L = p.L, R = p.R, NH = p.nh, T = MMA ? p.T : 1, J = L + T;
  const int NST = p.stages;
  const Replay1Layout& m = p.r1;  // host-computed (replay1_smem)
  char* stage = base + m.stage;
  uint64_t* bar = reinterpret_cast<uint64_t*>(base + m.bar);
  at_t* Cs = reinterpret_cast<at_t*>(base + m.Cs);
  at_t* Bw = reinterpret_cast<at_t*>(base + m.Bw);
  float* BC = reinterpret_cast<float*>(base + m.BC);
  float* dh = reinterpret_cast<float*>(base + m.dh);
  float* dwin = reinterpret_cast<float*>(base + m.dwin);
  float* Ah = reinterpret_cast<float*>(base + m.Ah);
  float* Dh = reinterpret_cast<float*>(base + m.Dh);
  float* coef = reinterpret_cast<float*>(base + m.coef);
  float* dec = reinterpret_cast<float*>(base + m.dec);
  float* fw = reinterpret_cast<float*>(base + m.fw);
  float* fdec = reinterpret_cast<float*>(base + m.fdec);
  float* hist = reinterpret_cast<float*>(base + m.hist);
  at_t* Bh = reinterpret_cast<at_t*>(base + m.Bh);
  at_t* xh = reinterpret_cast<at_t*>(base + m.xh);
  at_t* xwin = reinterpret_cast<at_t*>(base + m.xwin);
  at_t* zs = reinterpret_cast<at_t*>(base + m.zs);
  const int Pp = m.Pp, nhp = m.nhp;

  const int64_t b = bp.row;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int lr = lane & (LPR - 1), sub = lane / LPR;
  const int rows = nh * P;
  const uint64_t pol = evict_first_policy();

  // ---- 1. slot, first batch of state rows; the last warp loads the slot of
  // the row p.rec_pf blocks ahead and prefetches its tokens (AheadRow).
  // LATE (T = 1 on a 16-bit state): the first sweeps are issued after the
  // records' copies instead of right after the slot (measured: fp32 states
  // are faster early, 16-bit ones late; perf_notes_mamba2.md v42)
  constexpr bool LATE = !MMA && !QB && sizeof(st_t) == 2;
  const bool pfw = p.rec_pf > 0 && warp == KERNEL_WARPS - 1;
  AheadRow ahead;
  if (pfw) ahead = ahead_begin<AD>(p, T, nh, lane);
  const int64_t slot = row_slot(p, b);
  int32_t bits = 0;
  if (check_slot(p, slot, &bits) != ROW_OK) {
    zero_outputs<AD>(p, bp, b, 0, T);  // the cursor kernel reports the status
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    return;
  }
  // the block's rows: the slot's heads are one contiguous [H, P, N] block
  // (launch.cu::replay1_fits), so row r of the block is S + r·N
  st_t* S = static_cast<st_t*>(p.state) + slot * p.st_s + int64_t(bp.h0) * p.st_h;
  auto row_ptr = [&](int r) -> st_t* { return S + int64_t(r) * R1_N; };
  constexpr int ROWB = QF == QF_NVFP4 ? R1_N / 2 : R1_N * int(sizeof(st_t));  // bytes per state row
  constexpr int LB = ROWB / LPR;                   // bytes per lane vector
  constexpr int SW = KERNEL_WARPS * BR;            // rows per sweep
  const int nsw = (rows + SW - 1) / SW;
  const int64_t SWB = m.swb;                       // bytes per stage
  // sweep k of rows [k·SW, (k+1)·SW) into its stage st = k % NST, completing on bar[st]
  auto issue_sweep = [&](int k, int st) {
    char* dst = stage + st * SWB;
    const int r0 = k * SW, nr = min(SW, rows - r0);
    if constexpr (QB) {  // the sweep's heads: codes, scale rows, (nvfp4) tensor scales
      const int hps = SW / P, h0s = k * hps, hn = min(hps, nh - h0s), srb = int(p.q_srb);
      mbar_arrive_expect_tx(bar + st, uint32_t(hn * P * (ROWB + srb) + (QF == QF_NVFP4 ? 16 * hn : 0)));
      for (int i = 0; i < hn; ++i) {
        const uint8_t* tile = reinterpret_cast<const uint8_t*>(S) + int64_t(h0s + i) * p.st_h;
        bulk_g2s(dst + i * P * ROWB, tile, uint32_t(P * ROWB), bar + st, pol);
        bulk_g2s(dst + SW * ROWB + i * P * srb, tile + p.q_scale_off, uint32_t(P * srb), bar + st, pol);
        if (QF == QF_NVFP4) bulk_g2s(dst + SW * (ROWB + srb) + 16 * i, tile + p.q_t_off, 16u, bar + st, pol);
      }
    } else {
      mbar_arrive_expect_tx(bar + st, uint32_t(nr) * ROWB);
      bulk_g2s(dst, row_ptr(r0), uint32_t(nr) * ROWB, bar + st, pol);
      // T > 1 on an fp32 state: the sweep after this one into L2 as well
      // (measured: faster on fp32, slower on 16-bit states; perf_notes_mamba2.md v42)
      if constexpr (MMA && SD == DType::f32)
        if (k + 1 >= NST && k + 1 < nsw) cuda_util::prefetch_l2(row_ptr(r0 + SW), uint32_t(min(SW, rows - r0 - SW)) * ROWB);
      // T = 1 on an fp32 state: the sweep p.t1_l2pf ahead, unless it is one
      // of the first NST (issued into their stages at once)
      if constexpr (!MMA && SD == DType::f32) {
        const int kp = k + p.t1_l2pf;
        if (p.t1_l2pf > 0 && kp >= NST && kp < nsw)
          cuda_util::prefetch_l2(row_ptr(kp * SW), uint32_t(min(SW, rows - kp * SW)) * ROWB);
      }
    }
  };
  // the first NST sweeps, each into its own stage (thread 0: after the
  // slot, or LATE after the records, or for dual pools after the plan)
  auto issue_first_sweeps = [&]() {
    for (int k = 0; k < min(NST, nsw); ++k) issue_sweep(k, k);
  };
  // With m.ring_bulk the ring's R entries (x of the block's heads, B of the
  // group, δ of the heads: each one contiguous run) come by bulk copies too,
  // one lane of warp 0 per entry, completing on rbar; they do not depend on
  // the cursor (the plan picks records by position).
  uint64_t* const rbar = bar + R1_MAX_STAGES;
  const bool rbulk = m.ring_bulk != 0;
  if (warp == 0) {
    if (lane == 0) {
      for (int k = 0; k < NST; ++k) mbar_init(bar + k, 1);
      if (rbulk) mbar_init(rbar, 1);
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      // dual pools: after the plan (a flushing row's copy is repacked by the
      // pack kernel this launch may overlap, launch.cu::dual_replay_step);
      // LATE: after the records' copies (phase 2)
      if (!p.dual && !LATE) issue_first_sweeps();
    }
  }

  // ---- 2. cursor and window inputs; then the records the plan reads, staged
  // by record index (only those: the ring's shared memory is L entries, not R)
  const int64_t acc = p.acc ? cuda_util::load_index(p.acc, p.acc_dtype, b * p.acc_s) : 0;
  const RingCursor cur = load_cursor(p, slot);
  if (pfw) ahead_cursor(p, ahead);
  {
    const at_t* x = static_cast<const at_t*>(p.x);
    const at_t* z = static_cast<const at_t*>(p.z);
    const int pch = (P + CH - 1) / CH, segs = T * nh;  // segment (t, hl)
    const int nW = segs * pch * (p.z ? 2 : 1);
    for (int i = tid; i < nW; i += KERNEL_THREADS) {
      const bool isz = i >= segs * pch;
      const int c = isz ? i - segs * pch : i, sg = cuda_util::div_small(c, pch), c0 = (c - sg * pch) * CH, t = cuda_util::div_small(sg, nh), hl = sg - t * nh;
      const int64_t src = b * (isz ? p.z_b : p.x_b) + t * (isz ? p.z_t : p.x_t) +
                          int64_t(bp.h0 + hl) * (isz ? p.z_h : p.x_h) + c0;
      cp_chunk<at_t>((isz ? zs : xwin) + (t * NH + hl) * Pp + c0, (isz ? z : x) + src, min(CH, P - c0), pol);
    }
    cp_async_commit();
    const int nC = T * R1_N, nD = nh * T;
    batched<4, AD>(p, 2 * nC + nD + 2 * nh,
        [&](int i) -> RawItem {
          if (i < 2 * nC) {
            const bool isB = i >= nC;
            const int c = isB ? i - nC : i, t = c / R1_N, nn = c - t * R1_N;
            return isB ? raw_act<AD>(p.Bm, b * p.B_b + t * p.B_t + bp.g * p.B_g + nn)
                       : raw_act<AD>(p.Cm, b * p.C_b + t * p.C_t + bp.g * p.C_g + nn);
          }
          i -= 2 * nC;
          if (i < nD) { const int hl = cuda_util::div_small(i, T); return raw_delta(p, b, i - hl * T, bp.h0 + hl); }
          i -= nD;
          return i < nh ? raw_f32(p.A, (bp.h0 + i) * p.A_s) : p.D ? raw_f32(p.D, (bp.h0 + i - nh) * p.D_s) : RawItem{};
        },
        [&](int i, float val) {
          if (i < 2 * nC) { (i < nC ? Cs : Bw - nC)[i] = Traits<AD>::store(val); return; }  // exact
          i -= 2 * nC;
          if (i < nD) { dwin[i] = val; return; }  // [hl][t]
          i -= nD;
          (i < nh ? Ah : Dh - nh)[i] = val;
        });
  }
  StepPlan plan;
  const int rs = plan_from_cursor(p, cur, acc, &plan, &bits);
  // Every block has read the row's cursor: the cursor kernel (programmatic
  // dependent) may start; it waits for this grid before it writes.
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if (rs != ROW_OK) {
    cp_async_wait(0);
    __syncthreads();  // barriers initialised
    if (!p.dual && !LATE)
      for (int k = 0; k < min(NST, nsw); ++k) mbar_wait(bar + k, 0);  // no copy outlives the block
    zero_outputs<AD>(p, bp, b, 0, T);
    return;
  }
  if (p.dual) {
    // A flushing row's copy is the pack kernel's output: wait for that grid
    // (a no-op when this launch is not its programmatic dependent); other
    // rows' copies are untouched by it. (warp 0 lane 0 initialised the
    // barriers before the cursor loads.)
    if (plan.flush) asm volatile("griddepcontrol.wait;" ::: "memory");
    if (tid == 0) issue_first_sweeps();
  }
  const bool flush = plan.flush && !p.dual;
  const int n = flush ? plan.fold_count : plan.hist_count;
  const int rec_start = flush ? plan.fold_start : plan.hist_start;
  const int jb = flush ? n : 0;  // first record of the outputs' history
  auto pos = [&](int j) { return ring_wrap(rec_start, j, R); };  // ring entry of record j
  // records j < n (x of the block's heads, B of the group, δ of the heads)
  // into slot j: with m.ring_bulk one bulk copy per record and array (lane j
  // of warp 0), completing on rbar; otherwise 16-byte chunks by cp.async
  if (rbulk) {
    if (warp == 0) {
      if (lane == 0) mbar_arrive_expect_tx(rbar, uint32_t(n) * uint32_t(rows * int(sizeof(at_t)) + R1_N * int(sizeof(at_t)) + 4 * nh));
      __syncwarp();
      for (int j = lane; j < n; j += 32) {
        const int64_t q = pos(j);
        bulk_g2s(xh + j * NH * Pp, static_cast<const at_t*>(p.rx) + slot * p.rx_s + q * p.rx_r + int64_t(bp.h0) * p.rx_h,
                 uint32_t(rows * int(sizeof(at_t))), rbar, pol);
        bulk_g2s(Bh + j * R1_N, static_cast<const at_t*>(p.rB) + slot * p.rB_s + q * p.rB_r + int64_t(bp.g) * p.rB_g,
                 uint32_t(R1_N * int(sizeof(at_t))), rbar, pol);
        bulk_g2s(dh + j * nhp, p.rdt + slot * p.rdt_s + q * p.rdt_r + bp.h0, uint32_t(4 * nh), rbar, pol);
      }
    }
  } else {
    const at_t* rx = static_cast<const at_t*>(p.rx);
    const at_t* rB = static_cast<const at_t*>(p.rB);
    const int pch = (P + CH - 1) / CH, bch = R1_N / CH, dch = (nh + 3) / 4;
    const int nX = n * nh * pch, nB = n * bch, total = nX + nB + n * dch;
    for (int i = tid; i < total; i += KERNEL_THREADS) {
      if (i < nX) {
        const int sg = cuda_util::div_small(i, pch), c0 = (i - sg * pch) * CH, j = cuda_util::div_small(sg, nh), hl = sg - j * nh;
        cp_chunk<at_t>(xh + (j * NH + hl) * Pp + c0,
                       rx + slot * p.rx_s + int64_t(pos(j)) * p.rx_r + int64_t(bp.h0 + hl) * p.rx_h + c0,
                       min(CH, P - c0), pol);
      } else if (i - nX < nB) {
        const int k = i - nX, j = k / bch, c0 = (k - j * bch) * CH;
        cp_chunk<at_t>(Bh + j * R1_N + c0, rB + slot * p.rB_s + int64_t(pos(j)) * p.rB_r + int64_t(bp.g) * p.rB_g + c0,
                       CH, pol);
      } else {
        const int k = i - nX - nB, j = cuda_util::div_small(k, dch), h4 = (k - j * dch) * 4;
        cp_chunk<float>(dh + j * nhp + h4, p.rdt + slot * p.rdt_s + int64_t(pos(j)) * p.rdt_r + bp.h0 + h4,
                        min(4, nh - h4), pol);
      }
    }
    cp_async_commit();
  }
  if (LATE && !p.dual && tid == 0) issue_first_sweeps();  // (warp 0 lane 0, which issued the bulk record copies)
  if (pfw) ahead_records<AD>(p, ahead, nh, lane);  // the ahead row's records, with this block's in flight
  __syncthreads();  // Cs, Bw, dwin, Ah, Dh (plain stores) visible

  // ---- 3. everything that does not need the state, while the first NST
  // sweeps fly: appends, B·C, decays and coefficients, fold weights (flush),
  // history terms hist[t][r] (the epilogue after the stream is one fma per
  // output).
  cp_async_wait(0);
  if (rbulk) mbar_wait(rbar, 0);
  __syncthreads();  // ring, x_t, z_t landed
  {  // the step's T records from append_start (disjoint from the records
     // read; nothing in this launch uses them)
    auto q = [&](int t) { return int64_t(ring_wrap(plan.append_start, t, R)); };
    // with m.ring_bulk every entry is a run of 16-byte chunks (launch.cu::
    // replay1_ring_bulk): copied as such; otherwise element by element
    at_t* const rx = static_cast<at_t*>(p.rx);
    at_t* const rB = static_cast<at_t*>(p.rB);
    if (bp.hc == 0) {
      if (rbulk) {
        for (int i = tid; i < T * (R1_N / CH); i += KERNEL_THREADS) {
          const int t = i / (R1_N / CH), c0 = (i - t * (R1_N / CH)) * CH;
          *reinterpret_cast<uint4*>(rB + slot * p.rB_s + q(t) * p.rB_r + bp.g * p.rB_g + c0) =
              *reinterpret_cast<const uint4*>(Bw + t * R1_N + c0);
        }
      } else {
        for (int i = tid; i < T * R1_N; i += KERNEL_THREADS) {
          const int t = i / R1_N, nn = i - t * R1_N;
          rB[slot * p.rB_s + q(t) * p.rB_r + bp.g * p.rB_g + nn] = Bw[i];
        }
      }
    }
    for (int i = tid; i < T * nh; i += KERNEL_THREADS) {
      const int t = cuda_util::div_small(i, nh), hl = i - t * nh;
      p.rdt[slot * p.rdt_s + q(t) * p.rdt_r + bp.h0 + hl] = dwin[hl * T + t];
    }
    if (rbulk) {  // P % CH == 0 here
      const int pch = P / CH;
      for (int i = tid; i < T * nh * pch; i += KERNEL_THREADS) {
        const int sg = cuda_util::div_small(i, pch), c0 = (i - sg * pch) * CH, t = cuda_util::div_small(sg, nh), hl = sg - t * nh;
        *reinterpret_cast<uint4*>(rx + slot * p.rx_s + q(t) * p.rx_r + int64_t(bp.h0 + hl) * p.rx_h + c0) =
            *reinterpret_cast<const uint4*>(xwin + (t * NH + hl) * Pp + c0);
      }
    } else {
      for (int i = tid; i < T * rows; i += KERNEL_THREADS) {
        const int t = cuda_util::div_small(i, rows), r = i - t * rows, hl = cuda_util::div_small(r, P), pp = r - hl * P;
        rx[slot * p.rx_s + q(t) * p.rx_r + int64_t(bp.h0 + hl) * p.rx_h + pp] = xwin[(t * NH + hl) * Pp + pp];
      }
    }
  }
  // B_j·C_t for jb <= j <= n + t (j >= n: window tokens), one warp per pair;
  // flush: fold weights fw_j = δ_j e^{A Σ_{j<i<n} δ_i}, fdec, one warp per head
  const int span = n + T - jb, nbc = T * span;
  for (int i = warp; i < nbc + (flush ? nh : 0); i += KERNEL_WARPS) {
    if (i < nbc) {
      const int t = cuda_util::div_small(i, span), j = jb + i - t * span;
      if (j > n + t) continue;  // warp-uniform
      float s = 0.f;
      for (int nn = lane; nn < R1_N; nn += 32)
        s = fmaf(Traits<AD>::load(j < n ? Bh[j * R1_N + nn] : Bw[(j - n) * R1_N + nn]), Traits<AD>::load(Cs[t * R1_N + nn]), s);
      s = cuda_util::warp_sum(s);
      if (lane == 0) BC[t * J + j] = s;
    } else {
      const int hl = i - nbc;
      const float A = Ah[hl];
      auto d = [&](int j) { return dh[j * nhp + hl]; };
      const float tot = suffix_scan(d, 0, n - 1, lane, [&](int j, float s) { fw[hl * L + j] = d(j) * expf(A * s); });
      if (lane == 0) fdec[hl] = expf(A * tot);
    }
  }
  __syncthreads();
  for (int i = warp; i < nh * T; i += KERNEL_WARPS) {
    const int hl = cuda_util::div_small(i, T), t = i - hl * T;
    const float A = Ah[hl];
    auto d = [&](int j) { return j < n ? dh[j * nhp + hl] : dwin[hl * T + j - n]; };
    float* c = coef + i * J;
    const float* bc = BC + t * J;
    // s = Σ_{j < i <= n+t} δ_i
    const float tot = suffix_scan(d, jb, n + t, lane, [&](int j, float s) { c[j] = d(j) * expf(A * s) * bc[j]; });
    if (lane == 0) dec[i] = expf(A * tot);
  }
  __syncthreads();
  // hist[t][r] = D x_t[p] + Σ_{jb<=j<n} coef[t][j] x_j[p] + Σ_{u<=t} coef[t][n+u] x_u[p],
  // a thread per row for all T tokens (each x read once); the tensor-core
  // stream forms them in its sweeps instead, an fp8 copy's (T = 1, jb = 0)
  // in its epilogue (the same sums in the same order)
  constexpr bool EPI_HIST = QF == QF_FP8;
  if (!MMA && !EPI_HIST) for (int r = tid; r < rows; r += KERNEL_THREADS) {
    const int hl = cuda_util::div_small(r, P), pp = r - hl * P;
    const float* c = coef + hl * T * J;
    auto xw = [&](int u) { return Traits<AD>::load(xwin[(u * NH + hl) * Pp + pp]); };
    float h[R1_MAX_T];
#pragma unroll
    for (int t = 0; t < R1_MAX_T; ++t)
      if (t < T) h[t] = Dh[hl] * xw(t);
    for (int j = jb; j < n; ++j) {
      const float x = Traits<AD>::load(xh[(j * NH + hl) * Pp + pp]);
#pragma unroll
      for (int t = 0; t < R1_MAX_T; ++t)
        if (t < T) h[t] = fmaf(c[t * J + j], x, h[t]);
    }
#pragma unroll
    for (int u = 0; u < R1_MAX_T; ++u) {
      if (u >= T) break;
      const float x = xw(u);
#pragma unroll
      for (int t = 0; t < R1_MAX_T; ++t)
        if (t >= u && t < T) h[t] = fmaf(c[t * J + n + u], x, h[t]);
    }
#pragma unroll
    for (int t = 0; t < R1_MAX_T; ++t)
      if (t < T) hist[t * rows + r] = h[t];
  }
  __syncthreads();  // hist, read by the stream's epilogue

  if constexpr (!MMA) {
    // ---- 4. stream, one sweep of SW rows at a time from its stage (NST
    // stages in flight): part[r] = S·C_t (flush: fold, round, write first).
    // Every sweep is waited on, so no copy is pending when the block exits.
    // TC (an nvfp4 copy): the sweeps on tensor cores, in the form of the GDN
    // copies' (delta/replay1.cuh nv4_tc_mma): warp w takes the 16-row tiles
    // 2w, 2w + 1 of a sweep, lane (g, t) rows g and g + 8 of each at bytes
    // 16t .. 16t + 15 (values 32t .. 32t + 31: blocks 2t, 2t + 1), word j as
    // the exact f16x2 pairs (value i, value i + 4) · 2^-14. B is
    // block-diagonal with one vector: column 2b holds C·2^σ's f16 hi part and
    // column 2b + 1 its lo part on lane group b's k only, so one m16n8k16 per
    // k-step gives both; k-steps 0–3 (block 2t) and 4–7 (block 2t + 1)
    // accumulate apart and take their E4M3 scales, then 2^14, the head's tile
    // scale and 2^−σ.
    constexpr bool TC = QF == QF_NVFP4;
    [[maybe_unused]] uint32_t cb[8][2];
    [[maybe_unused]] float cus = 0.f;
    if constexpr (TC) {
      const int g = lane >> 2, t = lane & 3;
      float mc = 0.f;
#pragma unroll
      for (int e = lane; e < R1_N; e += 32) mc = fmaxf(mc, fabsf(Traits<AD>::load(Cs[e])));
#pragma unroll
      for (int of = 16; of >= 1; of /= 2) mc = fmaxf(mc, __shfl_xor_sync(0xffffffffu, mc, of));
      const int sg = cuda_util::f16_split_exp(mc);
      const float sc = quant::dev::exp2i(sg);
      cus = 16384.f * quant::dev::exp2i(-sg);
      const bool on = (g >> 1) == t, lo = g & 1;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float x[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) x[i] = on ? Traits<AD>::load(Cs[32 * t + 8 * j + i]) * sc : 0.f;
#pragma unroll
        for (int s2 = 0; s2 < 2; ++s2)
#pragma unroll
          for (int q = 0; q < 2; ++q) {  // b0: values 2s, 2s + 4; b1: 2s + 1, 2s + 5
            uint32_t h, l;
            cuda_util::f16x2_split(x[2 * s2 + q], x[2 * s2 + q + 4], h, l);
            cb[2 * j + s2][q] = lo ? l : h;
          }
      }
    }
    float cq[E];
  #pragma unroll
    for (int e = 0; e < E; ++e) cq[e] = Traits<AD>::load(Cs[lr * E + e]);
    // A flush folds FG rows at a time, records outer (one fp32 B_j vector per
    // record, reused by the FG rows): f = fdec·S_0, then fmaf(w, B_j, f) with
    // w = fw_j x_j[p] for j = 0 … n−1, as replay_pass and the dual pack kernel
    // (kernel_common.cuh fold_smem).
    constexpr int FG = QB ? 1 : E == 4 ? RB : RB / 2;
    // Advanced per sweep, without divisions: the sweep's stage st and its
    // mbarrier phase (stc); the row whose sum this lane may hold after the
    // reduction (row er0 of sweep 0, then SW rows further per sweep), its head
    // ehl, position epp and output offset eyo.
    cuda_util::StageCursor stc;
    const int er0 = warp * BR + (lr / (LPR / RB)) * RPL + sub;
    int ehl = er0 / P, epp = er0 - ehl * P;
    int64_t eyo = b * p.y_b + int64_t(bp.h0 + ehl) * p.y_h + epp;
    // T1_TC: the in-stage tensor-core fold is compiled for fp32 states only
    // (replay1_fold_tc); 16-bit instances keep the FMA stream's code as it was
    constexpr bool T1_TC = !QB && SD == DType::f32;
    const bool fold_tc = T1_TC && flush && p.fold_tc;
    for (int k = 0; k < nsw; ++k, stc.next(NST)) {
      const int st = stc.slot;
      mbar_wait(bar + st, stc.phase);
      if constexpr (T1_TC) if (fold_tc) {
        // a flush on tensor cores: the sweep's rows folded in place in the
        // stage, 16 × 64 tiles in the T > 1 sweeps' layout (warp w: tiles
        // (w & 3) + 4u of column half w >> 2; fold_tile_tc), rounded, written
        // to the checkpoint and back into the stage, which the stream below
        // then reads as stored (tiles wholly past the block's rows: nothing;
        // a tile past them in part: its weights clamped, its rows stored to
        // the stage only)
        const int g = lane >> 2, kh = warp >> 2, wq = warp & 3, col0 = kh * 64 + 4 * (lane & 3);
        st_t* const sb = reinterpret_cast<st_t*>(stage + st * SWB);
#pragma unroll
        for (int u = 0; u < SW / 64; ++u) {
          const int tr = (wq + 4 * u) * 16, r0 = k * SW + tr;  // the tile's first row in the sweep, the block
          if (r0 >= rows) break;                               // warp-uniform
          // rows g, g + 8: their heads and positions (P need not be a multiple of 16 here)
          int hl[2], pp[2];
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int r = min(r0 + g + 8 * h, rows - 1);
            hl[h] = cuda_util::div_small(r, P);
            pp[h] = r - hl[h] * P;
          }
          const float fd[2] = {fdec[hl[0]], fdec[hl[1]]};
          const float* const fwh[2] = {fw + hl[0] * L, fw + hl[1] * L};
          const at_t* const xr[2] = {xh + hl[0] * Pp + pp[0], xh + hl[1] * Pp + pp[1]};
          float f[2][16];  // rows g, g + 8
#pragma unroll
          for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int c = 0; c < 4; ++c)
              ld4<SD>(reinterpret_cast<const char*>(sb + (tr + g + 8 * h) * R1_N + col0 + 16 * c), f[h] + 4 * c);
          fold_tile_tc<AD>(f, fd, fwh, xr, NH * Pp, Bh + kh * 64 + 4 * (g >> 1), n, lane);
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int r = r0 + g + 8 * h;  // rows past the block's (a partial tile): the stage only
#pragma unroll
            for (int c = 0; c < 4; ++c) {
              st4<SD>(r < rows ? row_ptr(r) + col0 + 16 * c : nullptr, f[h] + 4 * c);  // rounds f to the state dtype
              st4<SD>(sb + (tr + g + 8 * h) * R1_N + col0 + 16 * c, f[h] + 4 * c);
            }
          }
        }
        // the stage's generic writes before its next bulk refill (async proxy)
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        __syncthreads();  // the folded stage, read below in the stream's layout
      }
      if constexpr (TC) {
        const int g = lane >> 2, t = lane & 3, srb = int(p.q_srb);
        const char* const sg = stage + st * SWB;
        const uint8_t* const scl = reinterpret_cast<const uint8_t*>(sg + SW * ROWB);
        float v[2][2];  // [tile][row g, g + 8]: the lane's share of the rows' sums
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          const int ra = warp * BR + 16 * u + g;
          const uint4 wa = *reinterpret_cast<const uint4*>(sg + ra * ROWB + 16 * t);
          const uint4 wb = *reinterpret_cast<const uint4*>(sg + (ra + 8) * ROWB + 16 * t);
          const uint32_t xa[4] = {wa.x, wa.y, wa.z, wa.w}, xb[4] = {wb.x, wb.y, wb.z, wb.w};
          float acc[2][4] = {};
          quant::dev::e2m1_tc_ksteps(xa, xb, [&](int j, int s2, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3) {
            cuda_util::mma_f16(acc[j >> 1], a0, a1, a2, a3, cb[2 * j + s2][0], cb[2 * j + s2][1]);
          });
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const uint8_t* const sr = scl + (ra + 8 * h) * srb + 2 * t;
            v[u][h] = (acc[0][2 * h] + acc[0][2 * h + 1]) * quant::dev::e4m3_decode(sr[0]) +
                      (acc[1][2 * h] + acc[1][2 * h + 1]) * quant::dev::e4m3_decode(sr[1]);
          }
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          float& x = v[i >> 1][i & 1];
          x += __shfl_xor_sync(0xffffffffu, x, 1);
          x += __shfl_xor_sync(0xffffffffu, x, 2);
        }
        // lane t stores row g + 8(t & 1) of tile t >> 1
        const int rs = warp * BR + 16 * (t >> 1) + g + 8 * (t & 1), r = k * SW + rs;
        if (r < rows) {
          const int hl = cuda_util::div_small(r, P), pp = r - hl * P;
          const float ts = *reinterpret_cast<const float*>(sg + SW * (ROWB + srb) + 16 * cuda_util::div_small(rs, P));
          const float av = (t >> 1 ? (t & 1 ? v[1][1] : v[1][0]) : (t & 1 ? v[0][1] : v[0][0])) * ts * cus;
          float yv = fmaf(av, dec[hl], hist[r]);
          if (p.z) yv = silu_gate(yv, Traits<AD>::load(zs[hl * Pp + pp]));
          st_act<AD>(p.y, b * p.y_b + int64_t(bp.h0 + hl) * p.y_h + pp, yv);
        }
        __syncthreads();  // stage st consumed: refill it with sweep k + NST
        if (tid == 0 && k + NST < nsw) {
          asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
          issue_sweep(k + NST, st);
        }
        continue;
      }
      const int r0 = k * SW + warp * BR;
      // the lane's vectors of the sweep; row u·RPL of the warp's batch is
      // u·RPL·ROWB further (rows past the block's read stale stage bytes:
      // their sums are never stored)
      const char* const sk = stage + st * SWB + (warp * BR + sub) * ROWB + lr * LB;
      float a[RB];
  #pragma unroll
      for (int g0 = 0; g0 < RB; g0 += FG) {
        float f[FG][E];
        float qs[FG];  // QF_FP8: the rows' block scales 2^(e − 127), applied to the sums (exact)
  #pragma unroll
        for (int u = 0; u < FG; ++u) {
          qs[u] = 1.f;
          if constexpr (QB) {
            // row rs of the sweep: its scale row after the sweep's codes
            const int rs = warp * BR + (g0 + u) * RPL + sub;
            const char* const sg = stage + st * SWB, *const sc = sg + SW * ROWB + rs * int(p.q_srb);
            if constexpr (QF == QF_FP8) {
              const uint4 w = *reinterpret_cast<const uint4*>(sk + (g0 + u) * RPL * ROWB);
              qs[u] = quant::dev::exp2i(int(uint8_t(sc[lr >> 1])) - 127);
              quant::dev::fp8x16_decode_unscaled(w, f[u]);
            } else {  // (y · s) · t per value, as the staged packed stream
              const uint2 w = *reinterpret_cast<const uint2*>(sk + (g0 + u) * RPL * ROWB);
              const float t = *reinterpret_cast<const float*>(sg + SW * (ROWB + int(p.q_srb)) +
                                                              16 * cuda_util::div_small(rs, P));
              quant::dev::nvfp4x16_decode(w, quant::dev::e4m3_decode(uint8_t(sc[lr])), t, f[u]);
            }
          } else {
            widen<SD>(*reinterpret_cast<const uint4*>(sk + (g0 + u) * RPL * ROWB), f[u]);
          }
        }
        if constexpr (!QB) if (flush && !fold_tc) {
          int hl[FG], pp[FG];
  #pragma unroll
          for (int u = 0; u < FG; ++u) {
            const int rc = min(r0 + (g0 + u) * RPL + sub, rows - 1);
            hl[u] = cuda_util::div_small(rc, P);
            pp[u] = rc - hl[u] * P;
            const float fd = fdec[hl[u]];
  #pragma unroll
            for (int e = 0; e < E; ++e) f[u][e] *= fd;
          }
          // w_j = fw_j x_j[p] of LPR records at a time: lane lr of a row's
          // lanes forms record j0 + lr's, and the record loop takes it by shuffle
          for (int j0 = 0; j0 < n; j0 += LPR) {
            const int jw = min(j0 + lr, n - 1), jn = min(LPR, n - j0);
            float wl[FG];
  #pragma unroll
            for (int u = 0; u < FG; ++u) wl[u] = fw[hl[u] * L + jw] * Traits<AD>::load(xh[(jw * NH + hl[u]) * Pp + pp[u]]);
            for (int jl = 0; jl < jn; ++jl) {
              const int j = j0 + jl;
              float bj[E];  // B_j as staged, by vector loads
  #pragma unroll
              for (int c = 0; c < E; c += 4) ld4<AD>(reinterpret_cast<const char*>(Bh + j * R1_N + lr * E + c), bj + c);
  #pragma unroll
              for (int u = 0; u < FG; ++u) {
                const float w = __shfl_sync(0xffffffffu, wl[u], jl, LPR);
  #pragma unroll
                for (int e = 0; e < E; ++e) f[u][e] = fmaf(w, bj[e], f[u][e]);
              }
            }
          }
  #pragma unroll
          for (int u = 0; u < FG; ++u) {
            const int r = r0 + (g0 + u) * RPL + sub;
            const uint4 v = narrow<SD>(f[u]);  // outputs read the checkpoint as stored
            if (r < rows) *reinterpret_cast<uint4*>(row_ptr(r) + lr * E) = v;
            widen<SD>(v, f[u]);
          }
        }
  #pragma unroll
        for (int u = 0; u < FG; ++u) {
          float sum = 0.f;
  #pragma unroll
          for (int e = 0; e < E; ++e) sum = fmaf(f[u][e], cq[e], sum);
          a[g0 + u] = sum * qs[u];
        }
      }
      cuda_util::transpose_sum<RB, LPR>(a, lr);
      if ((lr & (LPR / RB - 1)) == 0) {  // y = dec·(S·C_t) + hist, gate, from the lane holding the row's sum
        const int r = er0 + k * SW;
        if (r < rows) {
          float hr;
          if constexpr (EPI_HIST) {  // T = 1, no flush in this launch: jb = 0
            const float* c = coef + ehl * J;
            const float xt = Traits<AD>::load(xwin[ehl * Pp + epp]);
            hr = Dh[ehl] * xt;
            for (int j = 0; j < n; ++j) hr = fmaf(c[j], Traits<AD>::load(xh[(j * NH + ehl) * Pp + epp]), hr);
            hr = fmaf(c[n], xt, hr);
          } else {
            hr = hist[r];
          }
          float yv = fmaf(a[0], dec[ehl], hr);
          if (p.z) yv = silu_gate(yv, Traits<AD>::load(zs[ehl * Pp + epp]));
          st_act<AD>(p.y, eyo, yv);
        }
      }
      epp += SW;
      eyo += SW;
      while (epp >= P) {
        epp -= P;
        ++ehl;
        eyo += p.y_h - P;
      }
      __syncthreads();  // stage st consumed: refill it with sweep k + NST
      if (tid == 0 && k + NST < nsw) {
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        issue_sweep(k + NST, st);
      }
    }
  } else {
    // ---- 4 (T > 1). The sweeps on tensor cores: part[r][t] = Σ_n S[r][n]·C_t[n]
    // as m16n8k8 tf32 products (rows × tokens, T <= 8). Warp w takes the
    // 16-row tiles (w & 3) + 4u of a sweep over the column half kh = w >> 2;
    // lane (g, t4) = (lane / 4, lane % 4) holds rows g, g + 8 of a tile at
    // columns kh·64 + 16c + 4·t4 + e (c, e < 4), read as one 16- or 8-byte
    // vector per (row, c). The k order inside a k-step is free as long as A
    // and B agree: k-step (c, s) maps k = t4 to column 16c + 4·t4 + 2s and
    // k = t4 + 4 to the column after it, for the state (A) and C (B) alike.
    // fp32 states are split into tf32 hi + lo (two products; a bf16 / f16
    // state and bf16 / f16 C are exact in tf32); fp32 C is split too. The
    // half-1 warps hand their partial sums to the half-0 warps through
    // shared memory (two sweeps' worth); those add, scale, gate and store.
    constexpr int TPW = SW / 64;  // tiles per warp and sweep: fp32 1, bf16 / f16 2
    constexpr bool SPLIT_A = SD == DType::f32, SPLIT_B = AD == DType::f32;
    const int g = lane >> 2, t4 = lane & 3, kh = warp >> 2, wq = warp & 3;
    const int col0 = kh * 64 + 4 * t4;
    uint32_t bh[16], bl[SPLIT_B ? 16 : 1];
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const float v = g < T ? Traits<AD>::load(Cs[g * R1_N + col0 + 16 * (i / 4) + i % 4]) : 0.f;
      tf32_split<SPLIT_B>(v, bh[i], bl[SPLIT_B ? i : 0]);
    }
    float4* red = reinterpret_cast<float4*>(base + m.red);  // [2][SW / 16][32], may reuse Cs … xwin
    // Advanced per sweep, without divisions: the sweep's stage st and its
    // mbarrier phase (stc); the head thl[u] of tile u (its 16 rows lie in one head)
    // and the position tpp[u] of its first row in it (rows past the block:
    // thl >= nh)
    cuda_util::StageCursor stc;
    int thl[TPW], tpp[TPW];
#pragma unroll
    for (int u = 0; u < TPW; ++u) {
      thl[u] = (wq + 4 * u) * 16 / P;
      tpp[u] = (wq + 4 * u) * 16 - thl[u] * P;
    }
    __syncthreads();  // every warp has read Cs
    for (int k = 0; k < nsw; ++k, stc.next(NST)) {
      const int st = stc.slot;
      mbar_wait(bar + st, stc.phase);
      const char* const sb = stage + st * SW * ROWB;
      float d[TPW][4];
#pragma unroll
      for (int u = 0; u < TPW; ++u) {
        const int tr = (wq + 4 * u) * 16;  // the tile's first row in the sweep
        // the tile's head and first row in it; a tile past the block takes the
        // block's last tile's (its results are never stored)
        const bool tin = thl[u] < nh;
        const int hlt = tin ? thl[u] : nh - 1, ppt = tin ? tpp[u] : P - 16;
        float f[2][16];                    // rows g, g + 8
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int c = 0; c < 4; ++c) ld4<SD>(sb + ((tr + g + 8 * h) * R1_N + col0 + 16 * c) * int(sizeof(st_t)), f[h] + 4 * c);
        if (flush && p.fold_tc) {
          // fold on tensor cores (fold_tile_tc's k-steps, kept here as they
          // were: calling fold_tile_tc, or a form of it taking the weights as
          // a function, changed these instances' registers, and t64 measured
          // bf16 states at T = 5 0.3–0.5 % slower on an H100):
          // f = fdec·S_0, then f += W·B over the
          // records, W[r][j] = fw_j·x_j[r] (the weights the FMA stream forms,
          // the same fp32 product) and B[j][·] the record's B_j, as m16n8k8
          // tf32 products, eight records per k-step (records past n: W = B =
          // 0). W is split hi + lo (tf32_split), fp32 B too; bf16 / f16 B is
          // exact in tf32. n-tile (c, s2) takes the columns kh·64 + 16c +
          // 4·(i >> 1) + 2·s2 + (i & 1) for its n index i, so that lane (g, t4)'s
          // accumulators are exactly f[h][4c + 2·s2 + {0, 1}] (rows g, g + 8)
          // and its B values those of column i = g.
          const float fd = fdec[hlt];
#pragma unroll
          for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int e = 0; e < 16; ++e) f[h][e] *= fd;
          const float* const fwh = fw + hlt * L;
          const at_t* const xg = xh + hlt * Pp + ppt + g;  // record 0, row g (row g + 8: +8)
          // record 0's four columns kh·64 + 4·(g >> 1) + 16c … + 3 (8- or
          // 16-byte aligned): lane g takes the (g & 1)-th and the one two
          // further, the columns of n index g in n-tiles (c, 0) and (c, 1)
          const at_t* const bg = Bh + kh * 64 + 4 * (g >> 1);
          const bool odd = g & 1;
          auto bpair = [&](const at_t* q, bool v, float& b0, float& b1) {
            b0 = b1 = 0.f;
            if (!v) return;
            if constexpr (AD == DType::f32) {
              const float4 w = *reinterpret_cast<const float4*>(q);
              b0 = odd ? w.y : w.x;
              b1 = odd ? w.w : w.z;
            } else {
              const uint2 w = *reinterpret_cast<const uint2*>(q);
              if constexpr (AD == DType::bf16) {
                const int sh = odd ? 0 : 16;  // the value's bf16 bits to the high half
                b0 = __uint_as_float((w.x << sh) & 0xffff0000u);
                b1 = __uint_as_float((w.y << sh) & 0xffff0000u);
              } else {
                const int sh = odd ? 16 : 0;
                b0 = __half2float(__ushort_as_half(static_cast<unsigned short>(w.x >> sh)));
                b1 = __half2float(__ushort_as_half(static_cast<unsigned short>(w.y >> sh)));
              }
            }
          };
          const int xstep = NH * Pp;                                     // between records in xh
          for (int j0 = 0; j0 < n; j0 += 8) {
            const int ja = j0 + t4, jc = ja + 4;  // this lane's k = t4, t4 + 4
            const bool va = ja < n, vc = jc < n;
            const float wa = va ? fwh[ja] : 0.f, wc = vc ? fwh[jc] : 0.f;
            const float w[4] = {va ? wa * Traits<AD>::load(xg[ja * xstep]) : 0.f,
                                va ? wa * Traits<AD>::load(xg[ja * xstep + 8]) : 0.f,
                                vc ? wc * Traits<AD>::load(xg[jc * xstep]) : 0.f,
                                vc ? wc * Traits<AD>::load(xg[jc * xstep + 8]) : 0.f};
            uint32_t ah[4], al[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) tf32_split<true>(w[i], ah[i], al[i]);
            const at_t* const ba = bg + ja * R1_N, *const bc = bg + jc * R1_N;
#pragma unroll
            for (int c = 0; c < 4; ++c) {
              float bv[2][2];  // [k = t4, t4 + 4][s2]
              bpair(ba + 16 * c, va, bv[0][0], bv[0][1]);
              bpair(bc + 16 * c, vc, bv[1][0], bv[1][1]);
#pragma unroll
              for (int s2 = 0; s2 < 2; ++s2) {
                uint32_t b0h, b0l, b1h, b1l;
                tf32_split<SPLIT_B>(bv[0][s2], b0h, b0l);
                tf32_split<SPLIT_B>(bv[1][s2], b1h, b1l);
                float acc[4] = {f[0][4 * c + 2 * s2], f[0][4 * c + 2 * s2 + 1], f[1][4 * c + 2 * s2],
                                f[1][4 * c + 2 * s2 + 1]};
                mma_tf32x3<true, SPLIT_B>(acc, ah, al, b0h, b1h, b0l, b1l);
                f[0][4 * c + 2 * s2] = acc[0];
                f[0][4 * c + 2 * s2 + 1] = acc[1];
                f[1][4 * c + 2 * s2] = acc[2];
                f[1][4 * c + 2 * s2 + 1] = acc[3];
              }
            }
          }
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int r = k * SW + tr + g + 8 * h;
#pragma unroll
            for (int c = 0; c < 4; ++c) st4<SD>(r < rows ? row_ptr(r) + col0 + 16 * c : nullptr, f[h] + 4 * c);
          }
        } else if (flush) {  // fold as the FMA stream: fdec·S_0, then fmaf(w_j, B_j, f), records in order
          // row h's fold weights fw[hl][j] and records x_j[hl][pp], walked by
          // pointer (one add per record instead of the index products)
          const float* fwr[2];
          const at_t* xr[2];
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int hl = hlt, pp = ppt + g + 8 * h;
            fwr[h] = fw + hl * L;
            xr[h] = xh + hl * Pp + pp;
            const float fd = fdec[hl];
#pragma unroll
            for (int e = 0; e < 16; ++e) f[h][e] *= fd;
          }
          const int xstep = NH * Pp;  // between records in xh
          const char* bq = reinterpret_cast<const char*>(Bh + col0);
          for (int j = 0; j < n; ++j, bq += R1_N * int(sizeof(at_t))) {
            float bj[16];
#pragma unroll
            for (int c = 0; c < 4; ++c) ld4<AD>(bq + 16 * c * int(sizeof(at_t)), bj + 4 * c);
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const float w = fwr[h][j] * Traits<AD>::load(*xr[h]);
              xr[h] += xstep;
#pragma unroll
              for (int e = 0; e < 16; ++e) f[h][e] = fmaf(w, bj[e], f[h][e]);
            }
          }
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int r = k * SW + tr + g + 8 * h;
#pragma unroll
            for (int c = 0; c < 4; ++c) st4<SD>(r < rows ? row_ptr(r) + col0 + 16 * c : nullptr, f[h] + 4 * c);
          }
        }
        // the hi·hi products and the split corrections (lo·hi, hi·lo) in
        // accumulators of their own: two dependent HMMA chains of 8, not one
        // of 16–24, added once at the end
        float dc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int i = 0; i < 4; ++i) d[u][i] = 0.f;
#pragma unroll
        for (int c = 0; c < 4; ++c)
#pragma unroll
          for (int s2 = 0; s2 < 2; ++s2) {
            const float a[4] = {f[0][4 * c + 2 * s2], f[1][4 * c + 2 * s2], f[0][4 * c + 2 * s2 + 1], f[1][4 * c + 2 * s2 + 1]};
            uint32_t ah[4], al[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) tf32_split<SPLIT_A>(a[i], ah[i], al[i]);
            mma_tf32x3_apart<SPLIT_A, SPLIT_B>(d[u], dc, ah, al, bh[4 * c + 2 * s2], bh[4 * c + 2 * s2 + 1],
                                               bl[SPLIT_B ? 4 * c + 2 * s2 : 0], bl[SPLIT_B ? 4 * c + 2 * s2 + 1 : 0]);
          }
        if constexpr (SPLIT_A || SPLIT_B) {
#pragma unroll
          for (int i = 0; i < 4; ++i) d[u][i] += dc[i];
        }
        if (kh == 1) {
          // The column-half-1 warps add the history terms: hist[r][t] =
          // Σ_i K[t][i]·X[i][r] over i = the records jb … n − 1, then the
          // window's tokens, with K[t][·] = coef[t][·] (+ D at t's own token,
          // 0 past it) and X the staged x (exact in tf32 unless fp32): an
          // m16n8k8 product per 8 i, coef split hi + lo. The tile's rows are
          // one head (P % 16 == 0: launch.cu::replay1_fits). They hand
          // d·e^{Λ_t} + hist to the half-0 warps.
          const int hl = hlt, pp0 = ppt;
          const int nr = n - jb, ni = tin ? nr + T : 0;  // tiles past the block: nothing
          float hs[4] = {0.f, 0.f, 0.f, 0.f};
          auto xv = [&](int i, int pp) -> float {
            if (i < nr) return Traits<AD>::load(xh[((jb + i) * NH + hl) * Pp + pp]);
            return i < ni ? Traits<AD>::load(xwin[((i - nr) * NH + hl) * Pp + pp]) : 0.f;
          };
          auto kc = [&](int i) -> float {  // K[g][i] (token g)
            if (g >= T || i >= ni) return 0.f;
            const int j = jb + i;
            const float* c = coef + (hl * T + g) * J;
            return j < n + g ? c[j] : j == n + g ? c[j] + Dh[hl] : 0.f;
          };
          for (int i0 = 0; i0 < ni; i0 += 8) {
            const int ia = i0 + t4, ib = ia + 4;
            const float a[4] = {xv(ia, pp0 + g), xv(ia, pp0 + g + 8), xv(ib, pp0 + g), xv(ib, pp0 + g + 8)};
            uint32_t xh4[4], xl4[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) tf32_split<SPLIT_B>(a[i], xh4[i], xl4[i]);
            uint32_t c0h, c0l, c1h, c1l;
            tf32_split<true>(kc(ia), c0h, c0l);
            tf32_split<true>(kc(ib), c1h, c1l);
            mma_tf32(hs, xh4, c0l, c1l);
            if constexpr (SPLIT_B) mma_tf32(hs, xl4, c0h, c1h);
            mma_tf32(hs, xh4, c0h, c1h);
          }
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int t = min(2 * t4 + (i & 1), T - 1);
            hs[i] = fmaf(d[u][i], dec[hl * T + t], hs[i]);
          }
          red[((k & 1) * (SW / 16) + wq + 4 * u) * 32 + lane] = make_float4(hs[0], hs[1], hs[2], hs[3]);
        }
      }
      __syncthreads();  // stage k % NST consumed, half-1 partials stored: refill the stage
      if (tid == 0 && k + NST < nsw) {
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        issue_sweep(k + NST, st);
      }
      if (kh == 0) {
#pragma unroll
        for (int u = 0; u < TPW; ++u) {
          if (thl[u] >= nh) continue;  // the tile past the block
          const float4 o = red[((k & 1) * (SW / 16) + wq + 4 * u) * 32 + lane];  // d·e^{Λ_t} + hist of half 1
          const float rest[4] = {o.x, o.y, o.z, o.w};
#pragma unroll
          for (int h = 0; h < 2; ++h) {  // row g + 8h, tokens 2·t4 and 2·t4 + 1
            const int hl = thl[u], pp = tpp[u] + g + 8 * h;
#pragma unroll
            for (int i = 0; i < 2; ++i) {
              const int t = 2 * t4 + i;
              if (t >= T) continue;
              float yv = fmaf(d[u][2 * h + i], dec[hl * T + t], rest[2 * h + i]);
              if (p.z) yv = silu_gate(yv, Traits<AD>::load(zs[(t * NH + hl) * Pp + pp]));
              st_act<AD>(p.y, b * p.y_b + t * p.y_t + int64_t(bp.h0 + hl) * p.y_h + pp, yv);
            }
          }
        }
      }
#pragma unroll
      for (int u = 0; u < TPW; ++u) {
        tpp[u] += SW;
        while (tpp[u] >= P) {
          tpp[u] -= P;
          ++thl[u];
        }
      }
    }
  }
}
#endif  // __CUDACC__

}  // namespace replayssm::mamba2::kern
