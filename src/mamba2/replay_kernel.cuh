// Replay step (design §2-3): T tokens per row against checkpoint + ring.
//
// Per row b (slot s) the block first replays the cursor logic (commit, plan;
// ring.h), then with n = records read (fold_count when the step flushes,
// hist_count otherwise) and window token t at index n + t:
//
//   non-flush: y_t = e^{Λ_t}(S_0 C_t) + Σ_{j ≤ n+t} δ_j e^{Λ_t − Λ_j}(B_j·C_t) x_j + D x_t
//              Λ counted from the checkpoint over records and window; S_0 is
//              read once and never written.
//   flush:     S_new = e^{Λ_n} S_0 + Σ_{j<n} δ_j e^{Λ_n − Λ_j} x_j B_jᵀ, written once
//              (rounded to the state dtype); then the formula above with S_new
//              and an empty history (Λ restarts at the new checkpoint).
//
// Exponents use suffix sums of δ (Σ_{j<i≤m} δ_i), never differences of long
// prefix sums, so weights keep fp32 relative accuracy.
//
// Phases (one block = group g, heads [h0, h0+nh), rows [p0, p0+np)):
//  0. as soon as the slot is read, issue the 16-byte state loads of the first
//     two passes (raw registers, kernel_common.cuh::load_pass); everything
//     below runs while they are in flight.
//  1. stage C_t, the B of the n records and T window tokens (fp32, smem), δ
//     per head and z; append the step's records: ring_x (own heads and rows),
//     ring_dt (own heads, p-chunk 0), ring_B (the single block hc = pc = 0 of
//     the group: one writer per (slot, position, group)). Appends go to
//     positions append_start…+T−1, disjoint from the n positions read (R >= L+T).
//  2. BC[t][j] = B_j·C_t once for the block (shared by its nh heads).
//  3. one warp per (head, t): dec = e^{Λ_t}, coef[t][j] = δ_j e^{Λ_t−Λ_j} BC[t][j]
//     (suffix sums of δ by a warp scan, suffix_scan); flush: one warp per
//     head for the fold weights fw_j = δ_j e^{Λ_n−Λ_j}, fdec = e^{Λ_n}.
//  4. hist[h][t][p] = Σ_j coef[t][j] x_j[p] + D x_t[p] (coalesced over p);
//     flush: xw[j][r] = fw_j x_j[p] for the block's rows r (the fold then
//     needs no global loads inside the stream).
// Ring positions are start + i with one conditional subtraction (start < R,
// i < R); no integer division by R anywhere.
//  5. stream the state in passes of U rows per lane group, double-buffered in
//     registers (pass q+2 is issued once pass q is consumed); GEMV with C_t
//     for every t, y = dec·(S C_t) + hist, gate, store.
#pragma once
#include "mamba2/kernel_common.cuh"

namespace replayssm::mamba2::kern {

// Physical ring position of logical index i (start < R, 0 <= i < R).
__device__ __forceinline__ int ring_wrap(int start, int i, int R) {
  const int s = start + i;
  return s >= R ? s - R : s;
}

// Warp-parallel suffix sums over j in [lo, hi] (hi − lo may exceed 32):
// calls f(j, s) with s = Σ_{j<i≤hi} d[i] for every j (each once, by one lane)
// and returns Σ_{lo≤i≤hi} d[i] to every lane. Every lane of the warp calls it.
template <class F>
__device__ __forceinline__ float suffix_scan(const float* d, int lo, int hi, int lane, F&& f) {
  float carry = 0.f;
  for (int top = hi; top >= lo; top -= 32) {
    const int j = top - lane;  // lane 0 holds the highest index
    const float v = j >= lo ? d[j] : 0.f;
    float inc = v;  // Σ over lanes <= lane
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const float u = __shfl_up_sync(0xffffffffu, inc, o);
      if (lane >= o) inc += u;
    }
    if (j >= lo) f(j, carry + inc - v);
    carry += __shfl_sync(0xffffffffu, inc, 31);
  }
  return carry;
}

// One pass of the replay stream over the raw vectors v (rows of pass q).
// flush: fold, round, write the checkpoint and continue with the stored value.
template <DType SD, DType AD, int VPL, int U>
__device__ __forceinline__ void replay_pass(const Params& p, const BlockPos& bp, const Lane& l,
                                            typename Traits<SD>::type* S, int64_t b, int64_t slot,
                                            bool flush, int n, const float* Cs,
                                            const float* Bs, const float* dec, const float* xw,
                                            const float* fdec, const float* hist, const float* zs,
                                            int q, uint4 (&v)[U][VPL]) {
  constexpr int VEC = VecOf<SD>::value;
  const int T = p.T, ns = p.ns, N = p.N;
  if (flush) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int r = (q * U + u) * l.nrg + l.rg;
      if (r >= l.rows) continue;
      const int hl = r / l.np, h = bp.h0 + hl, pr = bp.p0 + r % l.np;
      const float fd = fdec[hl];
      float f[VPL][VEC];
#pragma unroll
      for (int k = 0; k < VPL; ++k) {
        widen<SD>(v[u][k], f[k]);
#pragma unroll
        for (int e = 0; e < VEC; ++e) f[k][e] *= fd;
      }
#pragma unroll 4
      for (int j = 0; j < n; ++j) {
        const float w = xw[j * l.rows + r];  // fw_j x_j[p]
#pragma unroll
        for (int k = 0; k < VPL; ++k) {
          const int vi = l.lr + k * l.lpr;
          if (vi < p.nv) axpby_smem<VEC>(f[k], 1.f, w, Bs + j * ns + vi * VEC);
        }
      }
      typename Traits<SD>::type* row = S + int64_t(h) * p.st_h + int64_t(pr) * p.st_p;
#pragma unroll
      for (int k = 0; k < VPL; ++k) {
        const int vi = l.lr + k * l.lpr;
        if (vi >= p.nv) continue;
        v[u][k] = narrow<SD>(f[k]);  // outputs read the checkpoint as stored
        store_raw<SD>(row, vi * VEC, N, v[u][k], false);
      }
    }
  }
  for (int t = 0; t < T; ++t) {
    float part[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      part[u] = 0.f;
#pragma unroll
      for (int k = 0; k < VPL; ++k) {
        const int vi = l.lr + k * l.lpr;
        if (vi < p.nv) {
          float f[VEC];
          widen<SD>(v[u][k], f);
          part[u] += dot_smem<VEC>(f, Cs + t * ns + vi * VEC);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) part[u] = group_sum(part[u], l.lpr);
    if (l.lr == 0) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int r = (q * U + u) * l.nrg + l.rg;
        if (r >= l.rows) continue;
        const int hl = r / l.np, h = bp.h0 + hl, pp = r % l.np, pr = bp.p0 + pp;
        const int o = (hl * T + t) * l.np + pp;
        float yv = fmaf(part[u], dec[hl * T + t], hist[o]);
        if (p.z) yv = silu_gate(yv, zs[o]);
        st_act<AD>(p.y, b * p.y_b + t * p.y_t + int64_t(h) * p.y_h + pr, yv);
      }
    }
  }
}

template <DType SD, DType AD, int VPL>
// Two resident blocks per SM (<= 128 registers, no spills): with two passes of U rows
// per lane group in flight that is 32-64 KiB of loads per SM.
__global__ void __launch_bounds__(KERNEL_THREADS, 2)
mamba2_replay_kernel(const Params p) {
  using st_t = typename Traits<SD>::type;
  constexpr int U = VPL >= 4 ? 1 : VPL == 1 ? 4 : 2;  // 16 registers per buffer
  extern __shared__ float4 smem4[];
  float* sm = reinterpret_cast<float*>(smem4);

  const BlockPos bp = block_pos(p);
  const int64_t b = bp.row;
  const Lane l = lane_of(p, bp);
  const int npass = (l.rows + l.nrg * U - 1) / (l.nrg * U);

  // ---- 0. state loads first (the checkpoint is only read before any write)
  int64_t slot = row_slot(p, b);
  int32_t bits = 0;
  const bool slot_ok = check_slot(p, slot, &bits) == ROW_OK;
  st_t* S = static_cast<st_t*>(p.state) + (slot_ok ? slot : 0) * p.st_s;
  uint4 va[U][VPL], vb[U][VPL];
  if (slot_ok) {  // rows that fail below return before reading these
    load_pass<SD, VPL, U>(p, bp, l, S, 0, true, va);
    load_pass<SD, VPL, U>(p, bp, l, S, 1, true, vb);
  }

  StepPlan plan;
  if (step_row_plan(p, b, &slot, &plan, &bits) != ROW_OK) {
    zero_outputs<AD>(p, bp, b, 0, p.T);  // the cursor kernel reports the status
    return;
  }
  const int T = p.T, J = p.jmax, ns = p.ns, N = p.N, R = p.R, nh = bp.nh, np = bp.np;
  const bool flush = plan.flush;
  const int n = flush ? plan.fold_count : plan.hist_count;
  const int rec_start = flush ? plan.fold_start : plan.hist_start;
  const int jb = flush ? n : 0;  // first index the outputs read
  const int nj = n + T;
  const int tid = threadIdx.x;

  // Shared memory carve-up (heuristics.h::replay_smem_floats).
  float* Cs = sm;                    // [T][ns]
  float* Bs = Cs + T * ns;           // [J][ns]
  float* BC = Bs + J * ns;           // [T][J]
  float* dl = BC + T * J;            // [nh][J]   δ
  float* coef = dl + p.nh * J;       // [nh][T][J]
  float* dec = coef + p.nh * T * J;  // [nh][T]
  float* fw = dec + p.nh * T;        // [nh][J]   fold weights
  float* fdec = fw + p.nh * J;       // [nh]
  float* hist = fdec + p.nh;         // [nh][T][np]
  float* zs = hist + p.nh * T * p.np;  // [nh][T][np] gate inputs
  float* xw = zs + p.nh * T * p.np;    // [J][nh·np]  fw_j x_j[p] (flush)

  // ---- 1. staging and appends
  const int lane = tid & 31, warp = tid >> 5;
  // one warp per staged vector: C_t (v < T), then B_j (records, then window)
  for (int v = warp; v < T + nj; v += KERNEL_WARPS) {
    const void* src;
    int64_t base;
    float* dst;
    if (v < T) {
      src = p.Cm; base = b * p.C_b + v * p.C_t + bp.g * p.C_g; dst = Cs + v * ns;
    } else if (v - T < n) {
      src = p.rB;
      base = slot * p.rB_s + int64_t(ring_wrap(rec_start, v - T, R)) * p.rB_r + bp.g * p.rB_g;
      dst = Bs + (v - T) * ns;
    } else {
      src = p.Bm; base = b * p.B_b + (v - T - n) * p.B_t + bp.g * p.B_g; dst = Bs + (v - T) * ns;
    }
#pragma unroll 4
    for (int nn = lane; nn < ns; nn += 32) dst[nn] = nn < N ? ld_act<AD>(src, base + nn) : 0.f;
  }
  for (int i = tid; i < nh * nj; i += KERNEL_THREADS) {
    const int hl = i / nj, j = i - hl * nj, h = bp.h0 + hl;
    dl[hl * J + j] = j < n ? p.rdt[slot * p.rdt_s + ring_wrap(rec_start, j, R) * p.rdt_r + h]
                           : delta_of(p, b, j - n, h);
  }
  if (p.z) {
    for (int i = tid; i < nh * T * np; i += KERNEL_THREADS) {
      const int hl = i / (T * np), t = (i / np) % T, pp = i % np;
      zs[i] = ld_act<AD>(p.z, b * p.z_b + t * p.z_t + int64_t(bp.h0 + hl) * p.z_h + bp.p0 + pp);
    }
  }
  if (bp.hc == 0 && bp.pc == 0) {
    for (int i = tid; i < T * N; i += KERNEL_THREADS) {
      const int t = i / N, nn = i % N;
      copy_act<AD>(p.rB, slot * p.rB_s + ring_wrap(plan.append_start, t, R) * p.rB_r + bp.g * p.rB_g + nn,
                   p.Bm, b * p.B_b + t * p.B_t + bp.g * p.B_g + nn);
    }
  }
  if (bp.pc == 0) {
    for (int i = tid; i < T * nh; i += KERNEL_THREADS) {
      const int t = i / nh, h = bp.h0 + i % nh;
      p.rdt[slot * p.rdt_s + ring_wrap(plan.append_start, t, R) * p.rdt_r + h] = delta_of(p, b, t, h);
    }
  }
  for (int i = tid; i < T * nh * np; i += KERNEL_THREADS) {
    const int t = i / (nh * np), r = i % (nh * np);
    const int h = bp.h0 + r / np, pp = bp.p0 + r % np;
    copy_act<AD>(p.rx, slot * p.rx_s + ring_wrap(plan.append_start, t, R) * p.rx_r + h * p.rx_h + pp,
                 p.x, b * p.x_b + t * p.x_t + h * p.x_h + pp);
  }
  __syncthreads();

  // ---- 2. B_j·C_t for jb <= j <= n + t, one warp per pair
  {
    const int span = n + T - jb;  // j index range per t (upper bound)
    for (int i = warp; i < T * span; i += KERNEL_WARPS) {
      const int t = i / span, j = jb + i % span;
      if (j > n + t) continue;  // warp-uniform
      float acc = 0.f;
      for (int nn = lane; nn < N; nn += 32) acc = fmaf(Bs[j * ns + nn], Cs[t * ns + nn], acc);
      acc = cuda_util::warp_sum(acc);
      if (lane == 0) BC[t * J + j] = acc;
    }
  }
  __syncthreads();

  // ---- 3. decays and coefficients per (head, t); fold weights per head
  // warps [0, nh·T): (head, t) coefficients; then (flush) one warp per head
  for (int i = warp; i < nh * T + (flush ? nh : 0); i += KERNEL_WARPS) {
    if (i < nh * T) {
      const int hl = i / T, t = i - hl * T;
      const float A = A_of(p, bp.h0 + hl);
      const float* d = dl + hl * J;
      float* c = coef + (hl * T + t) * J;
      const float* bc = BC + t * J;
      // s = Σ_{j < i <= n+t} δ_i
      const float tot = suffix_scan(d, jb, n + t, lane, [&](int j, float s) {
        c[j] = d[j] * expf(A * s) * bc[j];
      });
      if (lane == 0) dec[hl * T + t] = expf(A * tot);
    } else {
      const int hl = i - nh * T;
      const float A = A_of(p, bp.h0 + hl);
      const float* d = dl + hl * J;
      float* w = fw + hl * J;
      // s = Σ_{j < i < n} δ_i
      const float tot =
          suffix_scan(d, 0, n - 1, lane, [&](int j, float s) { w[j] = d[j] * expf(A * s); });
      if (lane == 0) fdec[hl] = expf(A * tot);
    }
  }
  __syncthreads();

  // ---- 4. history and skip terms per (head, t, p)
  const int64_t rx0 = slot * p.rx_s;
  if (flush) {  // xw[j][r] = fw_j x_j[p], r = hl·np + pp
    const int rows = nh * np;
    for (int r = tid; r < rows; r += KERNEL_THREADS) {
      const int hl = r / np, pp = r - hl * np;
      const int64_t o = rx0 + int64_t(bp.h0 + hl) * p.rx_h + bp.p0 + pp;
#pragma unroll 8
      for (int j = 0; j < n; ++j)
        xw[j * rows + r] = fw[hl * J + j] *
                           ld_act<AD>(p.rx, o + int64_t(ring_wrap(rec_start, j, R)) * p.rx_r);
    }
  }
  for (int i = tid; i < nh * T * np; i += KERNEL_THREADS) {
    const int hl = i / (T * np), tp = i - hl * (T * np), t = tp / np, pp = tp - t * np;
    const int h = bp.h0 + hl, pr = bp.p0 + pp;
    const float* c = coef + (hl * T + t) * J;
    float acc = D_of(p, h) * ld_act<AD>(p.x, b * p.x_b + t * p.x_t + h * p.x_h + pr);
    const int64_t o = rx0 + int64_t(h) * p.rx_h + pr;
#pragma unroll 8
    for (int j = jb; j < n; ++j)
      acc = fmaf(c[j], ld_act<AD>(p.rx, o + int64_t(ring_wrap(rec_start, j, R)) * p.rx_r), acc);
    for (int j = n; j <= n + t; ++j)
      acc = fmaf(c[j], ld_act<AD>(p.x, b * p.x_b + (j - n) * p.x_t + h * p.x_h + pr), acc);
    hist[i] = acc;
  }
  __syncthreads();

  // ---- 5. stream the state rows, two passes in flight
  for (int q = 0; q < npass; q += 2) {
    replay_pass<SD, AD, VPL, U>(p, bp, l, S, b, slot, flush, n, Cs, Bs, dec, xw, fdec, hist, zs,
                                q, va);
    if (q + 2 < npass) load_pass<SD, VPL, U>(p, bp, l, S, q + 2, !flush, va);
    if (q + 1 >= npass) break;
    replay_pass<SD, AD, VPL, U>(p, bp, l, S, b, slot, flush, n, Cs, Bs, dec, xw, fdec, hist, zs,
                                q + 1, vb);
    if (q + 3 < npass) load_pass<SD, VPL, U>(p, bp, l, S, q + 3, !flush, vb);
  }
}

}  // namespace replayssm::mamba2::kern
