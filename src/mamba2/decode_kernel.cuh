// Standard decode (the baseline) and the snapshot speculative baseline.
//
// Per head h, row p (N-vector S[p, :]), tokens t = 0..T-1 in fp32 registers:
//   S ← a_t S + (δ_t x_t[p]) B_t,  a_t = e^{δ_t A}
//   y_t[p] = S·C_t + D x_t[p]   (y ← y·silu(z) with z)
// decode:   S is read from and written back (rounded once) to the row's slot.
// snapshot: S starts from slot state_indices[b, a_b − 1] and the state after
//           token t is stored (rounded) into slot state_indices[b, t]; the
//           running fp32 state continues unrounded.
// A block owns group g, heads [h0, h0+nh), rows [p0, p0+np); B_t, C_t (fp32)
// and the per-head a_t, δ_t are staged in shared memory.
#pragma once
#include "mamba2/kernel_common.cuh"

namespace replayssm::mamba2::kern {

template <DType SD, DType AD, int VPL>
// Two resident blocks per SM (<= 128 registers) keep ~32 KiB of loads in flight.
__global__ void __launch_bounds__(KERNEL_THREADS, 2)
mamba2_decode_kernel(const Params p) {
  using st_t = typename Traits<SD>::type;
  constexpr int VEC = VecOf<SD>::value;
  constexpr int U = VPL == 1 ? 4 : 2;
  extern __shared__ float4 smem4[];
  float* sm = reinterpret_cast<float*>(smem4);

  const BlockPos bp = block_pos(p);
  const int64_t b = bp.row;
  const bool snap = p.mode == Mode::snapshot;
  const int T = p.T, ns = p.ns, N = p.N, nh = bp.nh, np = bp.np;

  // Source slot of the row and validation of every slot it touches.
  int32_t bits = 0;
  int st = ROW_OK;
  int64_t src = 0;
  if (!snap) {
    src = row_slot(p, b);
    st = check_slot(p, src, &bits);
  } else if (cuda_util::load_index(p.sidx, p.sidx_dtype, b * p.sidx_b) == p.pad) {
    st = ROW_PAD;
  } else {
    for (int t = 0; t < T; ++t) {
      const int64_t s = cuda_util::load_index(p.sidx, p.sidx_dtype, b * p.sidx_b + t * p.sidx_t);
      if (s < 0 || s >= p.S) { bits |= STATUS_BAD_SLOT; st = ROW_BAD; }
    }
    const int64_t a = p.acc ? cuda_util::load_index(p.acc, p.acc_dtype, b * p.acc_s) : 1;
    if (a < 1 || a > T) { bits |= STATUS_BAD_ACCEPTED; st = ROW_BAD; }
    if (st == ROW_OK)
      src = cuda_util::load_index(p.sidx, p.sidx_dtype, b * p.sidx_b + (a - 1) * p.sidx_t);
  }
  if (st != ROW_OK) {
    if (bits && reporter(bp)) cuda_util::report(p.status, bits);
    zero_outputs<AD>(p, bp, b, 0, T);
    return;
  }

  float* Bs = sm;               // [T][ns]
  float* Cs = Bs + T * ns;      // [T][ns]
  float* decay = Cs + T * ns;   // [nh][T]  a_t
  float* dl = decay + p.nh * T; // [nh][T]  δ_t
  const int tid = threadIdx.x;
  for (int i = tid; i < T * ns; i += KERNEL_THREADS) {
    const int t = i / ns, nn = i % ns;
    const bool in = nn < N;
    Bs[i] = in ? ld_act<AD>(p.Bm, b * p.B_b + t * p.B_t + bp.g * p.B_g + nn) : 0.f;
    Cs[i] = in ? ld_act<AD>(p.Cm, b * p.C_b + t * p.C_t + bp.g * p.C_g + nn) : 0.f;
  }
  for (int i = tid; i < nh * T; i += KERNEL_THREADS) {
    const int hl = i / T, t = i % T, h = bp.h0 + hl;
    const float d = delta_of(p, b, t, h);
    dl[hl * T + t] = d;
    decay[hl * T + t] = expf(d * A_of(p, h));
  }
  __syncthreads();

  const int lane = tid & 31, warp = tid >> 5;
  const int lpr = p.lpr, lr = lane & (lpr - 1);
  const int nrg = KERNEL_WARPS * p.rpw, rg = warp * p.rpw + lane / lpr;
  const int rows = nh * np;
  st_t* base_state = static_cast<st_t*>(p.state);
  const st_t* S_src = base_state + src * p.st_s;

  for (int base = 0; base < rows; base += nrg * U) {
    float v[U][VPL][VEC];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int r = base + u * nrg + rg;
      const int hl = r / np, pr = bp.p0 + r % np;
      const st_t* row = S_src + int64_t(bp.h0 + hl) * p.st_h + int64_t(pr) * p.st_p;
#pragma unroll
      for (int k = 0; k < VPL; ++k) {
        const int vi = lr + k * lpr;
        if (r < rows && vi < p.nv) {
          load_row_vec<SD>(row, vi * VEC, N, v[u][k], false);
        } else {
#pragma unroll
          for (int e = 0; e < VEC; ++e) v[u][k][e] = 0.f;
        }
      }
    }
    for (int t = 0; t < T; ++t) {
      const int64_t dst = snap ? cuda_util::load_index(p.sidx, p.sidx_dtype, b * p.sidx_b + t * p.sidx_t) : 0;
      float part[U], xv[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int r = base + u * nrg + rg;
        const bool ok = r < rows;
        const int hl = ok ? r / np : 0, pr = bp.p0 + (ok ? r % np : 0);
        xv[u] = ok ? ld_act<AD>(p.x, b * p.x_b + t * p.x_t + int64_t(bp.h0 + hl) * p.x_h + pr) : 0.f;
        const float a = decay[hl * T + t], dx = dl[hl * T + t] * xv[u];
        part[u] = 0.f;
#pragma unroll
        for (int k = 0; k < VPL; ++k) {
          const int vi = lr + k * lpr;
          if (vi >= p.nv) continue;
          axpby_smem<VEC>(v[u][k], a, dx, Bs + t * ns + vi * VEC);
          part[u] += dot_smem<VEC>(v[u][k], Cs + t * ns + vi * VEC);
          if (snap && ok) {
            float w[VEC];
#pragma unroll
            for (int e = 0; e < VEC; ++e) w[e] = v[u][k][e];
            store_row_vec<SD>(base_state + dst * p.st_s + int64_t(bp.h0 + hl) * p.st_h +
                                  int64_t(pr) * p.st_p,
                              vi * VEC, N, w);
          }
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) part[u] = group_sum(part[u], lpr);
      if (lr == 0) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
          const int r = base + u * nrg + rg;
          if (r >= rows) continue;
          const int h = bp.h0 + r / np, pr = bp.p0 + r % np;
          float yv = fmaf(D_of(p, h), xv[u], part[u]);
          if (p.z) yv = silu_gate(yv, ld_act<AD>(p.z, b * p.z_b + t * p.z_t + h * p.z_h + pr));
          st_act<AD>(p.y, b * p.y_b + t * p.y_t + int64_t(h) * p.y_h + pr, yv);
        }
      }
    }
    if (!snap) {
      st_t* S_dst = base_state + src * p.st_s;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int r = base + u * nrg + rg;
        if (r >= rows) continue;
        const int hl = r / np, pr = bp.p0 + r % np;
        st_t* row = S_dst + int64_t(bp.h0 + hl) * p.st_h + int64_t(pr) * p.st_p;
#pragma unroll
        for (int k = 0; k < VPL; ++k) {
          const int vi = lr + k * lpr;
          if (vi < p.nv) store_row_vec<SD>(row, vi * VEC, N, v[u][k]);
        }
      }
    }
  }
}

}  // namespace replayssm::mamba2::kern
