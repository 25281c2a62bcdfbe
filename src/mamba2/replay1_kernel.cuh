// T = 1 replay step for N = 128: the block's state arrives by bulk copies.
//
// Same step as mamba2_replay_kernel (replay_kernel.cuh) at T = 1. The
// block's state (HB heads × P rows, one contiguous block of the slot) streams
// through NST shared-memory stages of one sweep (KERNEL_WARPS × RB rows)
// each, filled by bulk asynchronous copies (cp.async.bulk, the TMA engine:
// one instruction per sweep) that complete on one mbarrier per stage. The
// first NST sweeps are requested as soon as the slot is known, so they fly
// during the block's dependent chain (slot → cursor → ring → coefficients);
// a stage is refilled once the block has read it (docs/perf_notes_mamba2.md,
// v12–v16). The arithmetic follows tools/probe/stream_probe.cu: every lane owns one
// 16-byte column vector of a row (fp32: 32 lanes per row; bf16 / f16: 16),
// forms S·C_t for RB rows and sums them with one transposed reduction
// (RB − 1 + log2(LPR/RB) shuffles for RB rows).
//
// Per block (row b, heads [h0, h0 + HB) of one group, all P rows):
//  1. slot; thread 0 issues the bulk copies of the first NST sweeps.
//  2. with the cursor (plain loads; every thread derives the plan): window
//     inputs (C_t, B_t, δ_t, A, D: batched loads; x_t, z_t: cp.async); then
//     the n records the plan reads, staged by record index (bulk copies when
//     contiguous): shared memory for L records, not the ring's R entries.
//  3. while the first sweeps fly: appends, B_j·C_t, decays and coefficients
//     (one warp per head, suffix sums of δ as in replay_kernel.cuh), fold
//     weights fw_j, fdec (flush), hist = D x_t + Σ_j coef_j x_j.
//  4. the sweeps: S·C_t per row; a flush (block-uniform) first folds the
//     row in registers (fdec·S_0 + Σ_j fw_j x_j[p] B_j, B_j converted from
//     the staged records), rounds it, writes it once and reads it out as
//     stored; the lane holding a row's sum writes y = dec·(S·C_t) + hist,
//     gated.
// Dual precision (p.dual): the state is a bf16 / f16 read copy; a flushing
// row was already folded and re-packed, so it runs with an empty history.
#pragma once
#include "mamba2/replay_kernel.cuh"

namespace replayssm::mamba2::kern {

inline constexpr int R1_N = 128;  // the one d_state this kernel serves
inline constexpr int R1_RB = 8;   // rows per lane group and warp batch (one transposed reduction)
inline constexpr int R1_BLOCKS_PER_SM = 2;  // shared memory: 2-4 stages of 32 KiB and the ring
inline constexpr int R1_MAX_STAGES = 4;  // sweep stages in flight (one mbarrier each)

// Rows a warp reads per batch; a sweep is KERNEL_WARPS batches.
RSSM_M2_HD int replay1_batch_rows(int state_size) { return R1_RB * (32 / (R1_N * state_size / 16)); }
RSSM_M2_HD int replay1_sweep_rows(int state_size) { return KERNEL_WARPS * replay1_batch_rows(state_size); }

// Shared-memory layout (byte offsets) of one block: the sweep stages, the
// whole ring (R entries) and the per-step arrays; computed on the host and
// passed in Params::r1 (recomputing it took ~250 instructions per thread).
inline Replay1Layout replay1_smem(int L, int R, int nh, int P, int act_size, int state_size, int stages) {
  Replay1Layout m{};
  int64_t o = int64_t(stages) * replay1_sweep_rows(state_size) * R1_N * state_size;  // sweep stages
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
  m.Cs = take(4 * R1_N);
  m.Bw = take(4 * R1_N);
  m.BC = take(4 * (L + 1));
  m.dh = take(4 * int64_t(L) * m.nhp);
  m.dwin = take(4 * nh);
  m.Ah = take(4 * nh);
  m.Dh = take(4 * nh);
  m.coef = take(4 * int64_t(nh) * (L + 1));
  m.dec = take(4 * nh);
  m.fw = take(4 * int64_t(nh) * L);
  m.fdec = take(4 * nh);
  m.hist = take(4 * int64_t(nh) * P);
  m.Bh = take(int64_t(act_size) * L * R1_N);
  m.xh = take(int64_t(act_size) * L * nh * m.Pp);
  m.xwin = take(int64_t(act_size) * nh * m.Pp);
  m.zs = take(int64_t(act_size) * nh * m.Pp);
  m.bytes = int32_t(o);  // < 2^31: bounded by launch.cu::replay1_fits
  return m;
}

#ifdef __CUDACC__
using cuda_util::bulk_g2s;
using cuda_util::mbar_arrive_expect_tx;
using cuda_util::mbar_init;
using cuda_util::mbar_wait;

template <DType SD, DType AD>
__global__ void __launch_bounds__(KERNEL_THREADS, R1_BLOCKS_PER_SM)
mamba2_replay1_kernel(const Params p) {
  using st_t = typename Traits<SD>::type;
  using at_t = typename Traits<AD>::type;
  constexpr int E = VecOf<SD>::value;      // state elements per lane vector
  constexpr int LPR = R1_N / E;            // lanes per row (32 or 16)
  constexpr int RPL = 32 / LPR;            // rows per warp load
  constexpr int RB = R1_RB;
  constexpr int BR = RB * RPL;             // rows per warp batch
  constexpr int CH = 16 / int(sizeof(at_t));
  extern __shared__ float4 smem4[];
  char* base = reinterpret_cast<char*>(smem4);
  const BlockPos bp = block_pos(p);
  const int nh = bp.nh, P = p.P, L = p.L, R = p.R, NH = p.nh;
  const int NST = p.stages;
  const Replay1Layout& m = p.r1;  // host-computed (replay1_smem)
  char* stage = base + m.stage;
  uint64_t* bar = reinterpret_cast<uint64_t*>(base + m.bar);
  float* Cs = reinterpret_cast<float*>(base + m.Cs);
  float* Bw = reinterpret_cast<float*>(base + m.Bw);
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

  // ---- 1. slot, first batch of state rows
  const int64_t slot = row_slot(p, b);
  int32_t bits = 0;
  if (check_slot(p, slot, &bits) != ROW_OK) {
    zero_outputs<AD>(p, bp, b, 0, 1);  // the cursor kernel reports the status
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    return;
  }
  // the block's rows: the slot's heads are one contiguous [H, P, N] block
  // (launch.cu::replay1_fits), so row r of the block is S + r·N
  st_t* S = static_cast<st_t*>(p.state) + slot * p.st_s + int64_t(bp.h0) * p.st_h;
  auto row_ptr = [&](int r) -> st_t* { return S + int64_t(r) * R1_N; };
  constexpr int ROWB = R1_N * int(sizeof(st_t));  // bytes per state row
  constexpr int SW = KERNEL_WARPS * BR;            // rows per sweep
  const int nsw = (rows + SW - 1) / SW;
  // sweep k of rows [k·SW, (k+1)·SW) into stage k % NST, completing on bar[k % NST]
  auto issue_sweep = [&](int k) {
    char* dst = stage + int64_t(k % NST) * SW * ROWB;
    const int r0 = k * SW, nr = min(SW, rows - r0);
    mbar_arrive_expect_tx(bar + k % NST, uint32_t(nr) * ROWB);
    bulk_g2s(dst, row_ptr(r0), uint32_t(nr) * ROWB, bar + k % NST, pol);
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
      for (int k = 0; k < min(NST, nsw); ++k) issue_sweep(k);
    }
  }
  // The lane's vectors of sweep k start at srow(k); row u·RPL of the warp's
  // batch is u·RPL·ROWB further (rows past the block's read stale stage bytes:
  // their sums are never stored).
  auto srow = [&](int k) {
    return stage + (int64_t(k % NST) * SW + warp * BR + sub) * ROWB + lr * 16;
  };

  // ---- 2. cursor and window inputs; then the records the plan reads, staged
  // by record index (only those: the ring's shared memory is L entries, not R)
  const int64_t acc = p.acc ? cuda_util::load_index(p.acc, p.acc_dtype, b * p.acc_s) : 0;
  const RingCursor cur = load_cursor(p, slot);
  {
    const at_t* x = static_cast<const at_t*>(p.x);
    const at_t* z = static_cast<const at_t*>(p.z);
    const int pch = (P + CH - 1) / CH;
    const int nW = nh * pch * (p.z ? 2 : 1);
    for (int i = tid; i < nW; i += KERNEL_THREADS) {
      const bool isz = i >= nh * pch;
      const int c = isz ? i - nh * pch : i, hl = c / pch, c0 = (c - hl * pch) * CH;
      const int64_t src = b * (isz ? p.z_b : p.x_b) + int64_t(bp.h0 + hl) * (isz ? p.z_h : p.x_h) + c0;
      cp_chunk<at_t>((isz ? zs : xwin) + hl * Pp + c0, (isz ? z : x) + src, min(CH, P - c0), pol);
    }
    cp_async_commit();
    batched<4>(2 * R1_N + 3 * nh,
        [&](int i) -> float {
          if (i < 2 * R1_N) {
            const bool isB = i >= R1_N;
            const int nn = isB ? i - R1_N : i;
            return isB ? ld_act<AD>(p.Bm, b * p.B_b + bp.g * p.B_g + nn)
                       : ld_act<AD>(p.Cm, b * p.C_b + bp.g * p.C_g + nn);
          }
          i -= 2 * R1_N;
          if (i < nh) return delta_of(p, b, 0, bp.h0 + i);
          i -= nh;
          return i < nh ? A_of(p, bp.h0 + i) : D_of(p, bp.h0 + i - nh);
        },
        [&](int i, float val) {
          if (i < 2 * R1_N) { (i < R1_N ? Cs : Bw - R1_N)[i] = val; return; }
          i -= 2 * R1_N;
          if (i < nh) { dwin[i] = val; return; }
          i -= nh;
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
    for (int k = 0; k < min(NST, nsw); ++k) mbar_wait(bar + k, 0);  // no copy outlives the block
    zero_outputs<AD>(p, bp, b, 0, 1);
    return;
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
        const int sg = i / pch, c0 = (i - sg * pch) * CH, j = sg / nh, hl = sg - j * nh;
        cp_chunk<at_t>(xh + (j * NH + hl) * Pp + c0,
                       rx + slot * p.rx_s + int64_t(pos(j)) * p.rx_r + int64_t(bp.h0 + hl) * p.rx_h + c0,
                       min(CH, P - c0), pol);
      } else if (i - nX < nB) {
        const int k = i - nX, j = k / bch, c0 = (k - j * bch) * CH;
        cp_chunk<at_t>(Bh + j * R1_N + c0, rB + slot * p.rB_s + int64_t(pos(j)) * p.rB_r + int64_t(bp.g) * p.rB_g + c0,
                       CH, pol);
      } else {
        const int k = i - nX - nB, j = k / dch, h4 = (k - j * dch) * 4;
        cp_chunk<float>(dh + j * nhp + h4, p.rdt + slot * p.rdt_s + int64_t(pos(j)) * p.rdt_r + bp.h0 + h4,
                        min(4, nh - h4), pol);
      }
    }
    cp_async_commit();
  }
  __syncthreads();  // Cs, Bw, dwin, Ah, Dh (plain stores) visible

  // ---- 3. everything that does not need the state, while the first NST
  // sweeps fly: appends, B·C, decays and coefficients, fold weights (flush),
  // history terms hist[r] = D x_t + Σ_j coef_j x_j[p] (the epilogue after the
  // stream is one fma per output).
  cp_async_wait(0);
  if (rbulk) mbar_wait(rbar, 0);
  __syncthreads();  // ring, x_t, z_t landed
  {  // the step's record at append_start (disjoint from the records read;
     // nothing in this launch uses the entry: other blocks of the row may
     // fetch it with the whole ring, old or new, and ignore it)
    const int64_t q = plan.append_start;
    if (bp.hc == 0)
      for (int i = tid; i < R1_N; i += KERNEL_THREADS) st_act<AD>(p.rB, slot * p.rB_s + q * p.rB_r + bp.g * p.rB_g + i, Bw[i]);
    for (int i = tid; i < nh; i += KERNEL_THREADS) p.rdt[slot * p.rdt_s + q * p.rdt_r + bp.h0 + i] = dwin[i];
    for (int i = tid; i < rows; i += KERNEL_THREADS) {
      const int hl = i / P, pp = i - hl * P;
      static_cast<at_t*>(p.rx)[slot * p.rx_s + q * p.rx_r + int64_t(bp.h0 + hl) * p.rx_h + pp] = xwin[hl * Pp + pp];
    }
  }
  // B_j·C_t for jb <= j <= n (j = n: the window token), one warp per j;
  // flush: fold weights fw_j = δ_j e^{A Σ_{j<i<n} δ_i}, fdec, one warp per head
  const int nbc = n - jb + 1;
  for (int i = warp; i < nbc + (flush ? nh : 0); i += KERNEL_WARPS) {
    if (i < nbc) {
      const int j = jb + i;
      float s = 0.f;
      for (int nn = lane; nn < R1_N; nn += 32)
        s = fmaf(j < n ? Traits<AD>::load(Bh[j * R1_N + nn]) : Bw[nn], Cs[nn], s);
      s = cuda_util::warp_sum(s);
      if (lane == 0) BC[j] = s;
    } else {
      const int hl = i - nbc;
      const float A = Ah[hl];
      auto d = [&](int j) { return dh[j * nhp + hl]; };
      const float tot = suffix_scan(d, 0, n - 1, lane, [&](int j, float s) { fw[hl * L + j] = d(j) * expf(A * s); });
      if (lane == 0) fdec[hl] = expf(A * tot);
    }
  }
  __syncthreads();
  for (int hl = warp; hl < nh; hl += KERNEL_WARPS) {
    const float A = Ah[hl];
    auto d = [&](int j) { return j < n ? dh[j * nhp + hl] : dwin[hl]; };
    float* c = coef + hl * (L + 1);
    // s = Σ_{j < i <= n} δ_i
    const float tot = suffix_scan(d, jb, n, lane, [&](int j, float s) { c[j] = d(j) * expf(A * s) * BC[j]; });
    if (lane == 0) dec[hl] = expf(A * tot);
  }
  __syncthreads();
  for (int i = tid; i < rows; i += KERNEL_THREADS) {
    const int hl = i / P, pp = i - hl * P;
    const float* c = coef + hl * (L + 1);
    const float xt = Traits<AD>::load(xwin[hl * Pp + pp]);
    float h = Dh[hl] * xt;
    for (int j = jb; j < n; ++j) h = fmaf(c[j], Traits<AD>::load(xh[(j * NH + hl) * Pp + pp]), h);
    hist[i] = fmaf(c[n], xt, h);
  }
  __syncthreads();  // hist, read by the stream's epilogue

  // ---- 4. stream, one sweep of SW rows at a time from its stage (NST
  // stages in flight): part[r] = S·C_t (flush: fold, round, write first).
  // Every sweep is waited on, so no copy is pending when the block exits.
  float cq[E];
#pragma unroll
  for (int e = 0; e < E; ++e) cq[e] = Cs[lr * E + e];
  // A flush folds FG rows at a time, records outer (one fp32 B_j vector per
  // record, reused by the FG rows): f = fdec·S_0, then f + round(w·B_j) with
  // w = fw_j x_j[p] for j = 0 … n−1, as replay_pass and the dual pack kernel.
  constexpr int FG = E == 4 ? RB : RB / 2;
  for (int k = 0; k < nsw; ++k) {
    mbar_wait(bar + k % NST, uint32_t(k / NST) & 1u);
    const int r0 = k * SW + warp * BR;
    const char* const sk = srow(k);
    float a[RB];
#pragma unroll
    for (int g0 = 0; g0 < RB; g0 += FG) {
      float f[FG][E];
#pragma unroll
      for (int u = 0; u < FG; ++u) widen<SD>(*reinterpret_cast<const uint4*>(sk + (g0 + u) * RPL * ROWB), f[u]);
      if (flush) {
        int hl[FG], pp[FG];
#pragma unroll
        for (int u = 0; u < FG; ++u) {
          const int rc = min(r0 + (g0 + u) * RPL + sub, rows - 1);
          hl[u] = rc / P;
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
            float bj[E];
#pragma unroll
            for (int e = 0; e < E; ++e) bj[e] = Traits<AD>::load(Bh[j * R1_N + lr * E + e]);  // B_j as staged
#pragma unroll
            for (int u = 0; u < FG; ++u) {
              const float w = __shfl_sync(0xffffffffu, wl[u], jl, LPR);
#pragma unroll
              for (int e = 0; e < E; ++e) f[u][e] = fmaf(1.f, f[u][e], __fmul_rn(w, bj[e]));
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
        a[g0 + u] = sum;
      }
    }
    cuda_util::transpose_sum<RB, LPR>(a, lr);
    if ((lr & (LPR / RB - 1)) == 0) {  // y = dec·(S·C_t) + hist, gate, from the lane holding the row's sum
      const int r = r0 + (lr / (LPR / RB)) * RPL + sub;
      if (r < rows) {
        const int hl = r / P, pp = r - hl * P;
        float yv = fmaf(a[0], dec[hl], hist[r]);
        if (p.z) yv = silu_gate(yv, Traits<AD>::load(zs[hl * Pp + pp]));
        st_act<AD>(p.y, b * p.y_b + int64_t(bp.h0 + hl) * p.y_h + pp, yv);
      }
    }
    __syncthreads();  // stage k % NST consumed: refill it with sweep k + NST
    if (tid == 0 && k + NST < nsw) {
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      issue_sweep(k + NST);
    }
  }
}
#endif  // __CUDACC__

}  // namespace replayssm::mamba2::kern
