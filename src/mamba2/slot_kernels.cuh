// Fold (materialize, flush), prefill and cursor kernels.
//
// Fold of the count committed records of a slot (Λ from the checkpoint):
//   S = e^{Λ_c} S_0 + Σ_{j<c} δ_j e^{Λ_c − Λ_j} x_j B_jᵀ
// materialize writes S to out[i] in out's dtype; flush writes it (rounded)
// as the new checkpoint and the cursor kernel then moves start by count.
// A comes from the pool (Mamba2Pool::A), prefill's from its own inputs.
//
// Prefill runs each prompt's tokens through the recurrence with the row's
// state in registers (one state row per lane group, U = 1), from zero or
// from the folded current state, and writes the final state as checkpoint.
//
// Cursors are written only by mamba2_cursor_kernel (cursor_kernel.cuh),
// launched after the state kernel on the same stream, so no block of a
// launch reads a cursor that another block of that launch has already moved.
#pragma once
#include "mamba2/kernel_common.cuh"

namespace replayssm::mamba2::kern {

__device__ __forceinline__ void store_out(const Params& p, int64_t i, float v) {
  if (p.out_dtype == DType::f64) static_cast<double*>(p.out)[i] = double(v);
  else cuda_util::store_any(p.out, p.out_dtype, i, v);
}

// Stage the fold of `n` records starting at ring position `start`:
// Bs[j][ns] = B_j (fp32), fw[hl][j] = δ_j e^{A Σ_{j<i<n} δ_i}, fdec[hl] = e^{A Σ_{i<n} δ_i}.
// Ends with __syncthreads().
template <DType AD>
__device__ void stage_fold(const Params& p, const BlockPos& bp, int64_t slot, int start, int n,
                           float* Bs, float* fw, float* fdec) {
  const int tid = threadIdx.x, ns = p.ns, L = p.L;
  for (int i = tid; i < n * ns; i += blockDim.x) {
    const int j = i / ns, nn = i % ns;
    Bs[i] = nn < p.N ? ld_act<AD>(p.rB, slot * p.rB_s + ring_pos(start, j, p.R) * p.rB_r +
                                            bp.g * p.rB_g + nn)
                     : 0.f;
  }
  for (int hl = tid; hl < bp.nh; hl += blockDim.x) {
    const int h = bp.h0 + hl;
    const float A = n > 0 ? A_of(p, h) : 0.f;  // baseline pools carry no A
    float s = 0.f;
    for (int j = n - 1; j >= 0; --j) {
      const float d = p.rdt[slot * p.rdt_s + ring_pos(start, j, p.R) * p.rdt_r + h];
      fw[hl * L + j] = d * expf(A * s);
      s += d;
    }
    fdec[hl] = expf(A * s);
  }
  __syncthreads();
}

// v ← fdec·v + Σ_j fw_j x_j[p] B_j over the lane's vectors of row (h, pr).
template <DType AD, int VPL, int VEC>
__device__ __forceinline__ void fold_row(const Params& p, int64_t slot, int start, int n, int hl,
                                         int h, int pr, int lr, const float* Bs, const float* fw,
                                         const float* fdec, float (&v)[VPL][VEC]) {
  const float fd = fdec[hl];
#pragma unroll
  for (int k = 0; k < VPL; ++k)
#pragma unroll
    for (int e = 0; e < VEC; ++e) v[k][e] *= fd;
  for (int j = 0; j < n; ++j) {
    const float w = fw[hl * p.L + j] *
                    ld_act<AD>(p.rx, slot * p.rx_s + ring_pos(start, j, p.R) * p.rx_r +
                                         h * p.rx_h + pr);
#pragma unroll
    for (int k = 0; k < VPL; ++k) {
      const int vi = lr + k * p.lpr;
      if (vi < p.nv) fold_smem<VEC>(v[k], w, Bs + j * p.ns + vi * VEC);
    }
  }
}

template <DType SD, DType AD, int VPL>
__global__ void __launch_bounds__(KERNEL_THREADS)
mamba2_fold_kernel(const Params p) {
  using st_t = typename Traits<SD>::type;
  constexpr int VEC = VecOf<SD>::value;
  constexpr int U = 2;
  extern __shared__ float4 smem4[];
  float* sm = reinterpret_cast<float*>(smem4);
  const BlockPos bp = block_pos(p);
  const bool flush = p.mode == Mode::flush;
  const int64_t slot = row_slot(p, bp.row);
  int32_t bits = 0;
  int st = check_slot(p, slot, &bits);
  RingCursor c{0, 0, 0};
  if (st == ROW_OK && p.cursor) {
    c = load_cursor(p, slot);
    if (!cursor_sane(p, c)) { bits |= STATUS_RING_OVERFLOW; st = ROW_BAD; }
    else if (flush && c.pending != 0) { bits |= STATUS_UNCOMMITTED; st = ROW_BAD; }
  }
  if (st != ROW_OK) {
    if (!flush && bits && reporter(bp)) cuda_util::report(p.status, bits);  // flush: cursor kernel
    return;
  }
  const int n = c.count;
  if (flush && n == 0) return;
  float* Bs = sm;                  // [L][ns]
  float* fw = Bs + p.L * p.ns;     // [nh][L]
  float* fdec = fw + p.nh * p.L;   // [nh]
  stage_fold<AD>(p, bp, slot, c.start, n, Bs, fw, fdec);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int lpr = p.lpr, lr = lane & (lpr - 1);
  const int nrg = KERNEL_WARPS * p.rpw, rg = warp * p.rpw + lane / lpr;
  const int rows = bp.nh * bp.np;
  st_t* S = static_cast<st_t*>(p.state) + slot * p.st_s;
  for (int base = 0; base < rows; base += nrg * U) {
    float v[U][VPL][VEC];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int r = base + u * nrg + rg;
      const int hl = r / bp.np, pr = bp.p0 + r % bp.np;
      const st_t* row = S + int64_t(bp.h0 + hl) * p.st_h + int64_t(pr) * p.st_p;
#pragma unroll
      for (int k = 0; k < VPL; ++k) {
        const int vi = lr + k * lpr;
        if (r < rows && vi < p.nv) {
          load_row_vec<SD>(row, vi * VEC, p.N, v[u][k], false);
        } else {
#pragma unroll
          for (int e = 0; e < VEC; ++e) v[u][k][e] = 0.f;
        }
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int r = base + u * nrg + rg;
      if (r >= rows) continue;
      const int hl = r / bp.np, h = bp.h0 + hl, pr = bp.p0 + r % bp.np;
      fold_row<AD, VPL, VEC>(p, slot, c.start, n, hl, h, pr, lr, Bs, fw, fdec, v[u]);
#pragma unroll
      for (int k = 0; k < VPL; ++k) {
        const int vi = lr + k * lpr;
        if (vi >= p.nv) continue;
        if (flush) {
          store_row_vec<SD>(S + int64_t(h) * p.st_h + int64_t(pr) * p.st_p, vi * VEC, p.N, v[u][k]);
        } else {
          const int64_t o = bp.row * p.out_s + int64_t(h) * p.out_h + int64_t(pr) * p.out_p;
#pragma unroll
          for (int e = 0; e < VEC; ++e)
            if (vi * VEC + e < p.N) store_out(p, o + vi * VEC + e, v[u][k][e]);
        }
      }
    }
  }
}

// Prompt b: tokens [cu[b], cu[b+1]). Returns false (and sets bits) when the
// offsets are not 0 <= cu[b] <= cu[b+1] <= tokens.
__device__ __forceinline__ bool prompt_range(const Params& p, int64_t b, int64_t* t0, int64_t* t1,
                                             int32_t* bits) {
  *t0 = cuda_util::load_index(p.cu, p.cu_dtype, b * p.cu_s);
  *t1 = cuda_util::load_index(p.cu, p.cu_dtype, (b + 1) * p.cu_s);
  if (*t0 < 0 || *t1 < *t0 || *t1 > p.tokens) {
    *bits |= STATUS_BAD_SLOT;  // no dedicated bit for offsets; the row is skipped
    return false;
  }
  return true;
}

template <DType SD, DType AD, int VPL>
__global__ void __launch_bounds__(KERNEL_THREADS)
mamba2_prefill_kernel(const Params p) {
  using st_t = typename Traits<SD>::type;
  constexpr int VEC = VecOf<SD>::value;
  constexpr int TC = PREFILL_CHUNK;
  extern __shared__ float4 smem4[];
  float* sm = reinterpret_cast<float*>(smem4);
  const BlockPos bp = block_pos(p);
  const int64_t b = bp.row;
  const int64_t slot = row_slot(p, b);
  int32_t bits = 0;
  int64_t t0 = 0, t1 = 0;
  const bool range_ok = prompt_range(p, b, &t0, &t1, &bits);
  int st = check_slot(p, slot, &bits);
  if (!range_ok && st != ROW_PAD) st = ROW_BAD;
  const bool init = p.initial && p.initial[b * p.init_s] != 0;
  RingCursor c{0, 0, 0};
  if (st == ROW_OK && p.cursor) {
    c = load_cursor(p, slot);
    if (!cursor_sane(p, c)) { bits |= STATUS_RING_OVERFLOW; st = ROW_BAD; }
  }
  if (st != ROW_OK) {
    if (bits && reporter(bp)) cuda_util::report(p.status, bits);
    if (range_ok) {  // pad or skipped row: zero outputs of its tokens
      const int per_t = bp.nh * bp.np;
      for (int64_t i = threadIdx.x; i < (t1 - t0) * per_t; i += blockDim.x) {
        const int64_t t = t0 + i / per_t;
        const int r = int(i % per_t), h = bp.h0 + r / bp.np, pr = bp.p0 + r % bp.np;
        st_act<AD>(p.y, t * p.y_t + int64_t(h) * p.y_h + pr, 0.f);
      }
    }
    return;
  }
  const int n = (init && p.cursor) ? c.count : 0;
  const int ns = p.ns;
  float* Bs = sm;                       // [L][ns] records (initial state fold)
  float* fw = Bs + p.L * ns;            // [nh][L]
  float* fdec = fw + p.nh * p.L;        // [nh]
  float* Bt = fdec + p.nh;              // [TC][ns]
  float* Ct = Bt + TC * ns;             // [TC][ns]
  float* at = Ct + TC * ns;             // [nh][TC] a_t
  float* dt = at + p.nh * TC;           // [nh][TC] δ_t
  // fp32 alignment of Bt: L·ns and TC·ns are multiples of 8; the nh-sized
  // arrays before Bt may not be, so Bt is only read as scalars.
  if (n > 0) stage_fold<AD>(p, bp, slot, c.start, n, Bs, fw, fdec);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int lpr = p.lpr, lr = lane & (lpr - 1);
  const int rg = warp * p.rpw + lane / lpr;
  const int rows = bp.nh * bp.np;  // <= one pass (heuristics.h::prefill_tile)
  const bool ok = rg < rows;
  const int hl = ok ? rg / bp.np : 0, h = bp.h0 + hl, pr = bp.p0 + (ok ? rg % bp.np : 0);
  st_t* row = static_cast<st_t*>(p.state) + slot * p.st_s + int64_t(h) * p.st_h + int64_t(pr) * p.st_p;
  float v[VPL][VEC];
#pragma unroll
  for (int k = 0; k < VPL; ++k) {
    const int vi = lr + k * lpr;
    if (init && ok && vi < p.nv) {
      load_row_vec<SD>(row, vi * VEC, p.N, v[k], false);
    } else {
#pragma unroll
      for (int e = 0; e < VEC; ++e) v[k][e] = 0.f;
    }
  }
  if (n > 0 && ok) fold_row<AD, VPL, VEC>(p, slot, c.start, n, hl, h, pr, lr, Bs, fw, fdec, v);

  for (int64_t c0 = t0; c0 < t1; c0 += TC) {
    const int nt = int(t1 - c0 < TC ? t1 - c0 : int64_t(TC));
    __syncthreads();  // previous chunk fully consumed
    for (int i = tid; i < nt * ns; i += KERNEL_THREADS) {
      const int tt = i / ns, nn = i % ns;
      const int64_t tok = c0 + tt;
      const bool in = nn < p.N;
      Bt[i] = in ? ld_act<AD>(p.Bm, tok * p.B_t + bp.g * p.B_g + nn) : 0.f;
      Ct[i] = in ? ld_act<AD>(p.Cm, tok * p.C_t + bp.g * p.C_g + nn) : 0.f;
    }
    for (int i = tid; i < bp.nh * nt; i += KERNEL_THREADS) {
      const int l = i / nt, tt = i % nt, hh = bp.h0 + l;
      const float d = delta_of(p, 0, c0 + tt, hh);
      dt[l * TC + tt] = d;
      at[l * TC + tt] = expf(d * A_of(p, hh));
    }
    __syncthreads();
    for (int tt = 0; tt < nt; ++tt) {
      const int64_t tok = c0 + tt;
      const float xv = ok ? ld_act<AD>(p.x, tok * p.x_t + int64_t(h) * p.x_h + pr) : 0.f;
      const float a = at[hl * TC + tt], dx = dt[hl * TC + tt] * xv;
      float part = 0.f;
#pragma unroll
      for (int k = 0; k < VPL; ++k) {
        const int vi = lr + k * lpr;
        if (vi >= p.nv) continue;
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          v[k][e] = fmaf(a, v[k][e], dx * Bt[tt * ns + vi * VEC + e]);
          part = fmaf(v[k][e], Ct[tt * ns + vi * VEC + e], part);
        }
      }
      part = group_sum(part, lpr);
      if (ok && lr == 0) {
        float yv = fmaf(D_of(p, h), xv, part);
        if (p.z) yv = silu_gate(yv, ld_act<AD>(p.z, tok * p.z_t + int64_t(h) * p.z_h + pr));
        st_act<AD>(p.y, tok * p.y_t + int64_t(h) * p.y_h + pr, yv);
      }
    }
  }
  if (ok) {
#pragma unroll
    for (int k = 0; k < VPL; ++k) {
      const int vi = lr + k * lpr;
      if (vi < p.nv) store_row_vec<SD>(row, vi * VEC, p.N, v[k]);
    }
  }
}

}  // namespace replayssm::mamba2::kern
