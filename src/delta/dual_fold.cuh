// The high-precision fold of a dual GDN/KDA pool (design §4) and the repack
// of its read copy, one block per (group of hpb value heads, row b).
//
// The committed records j = 0 … count−1 of the row fold into each state row
// v (lane group, row in registers, fp32) as the sequential recurrence
//   u_j = α_j ⊙ k̂_j   (GDN: α_j = e^{g_j} broadcast; k̂_j = k_j·ks_j)
//   d_j = β_j (v_j[v] − S_{j−1}[v]·u_j), rounded to ring_d's dtype
//   S_j[v] = S_{j−1}[v] ⊙ α_j + d_j k̂_j
// computed chunk by chunk (FOLD_CHUNK records, Λ summed from the chunk's
// start c0, all exponents ≤ 0 for decaying gates) in its triangular form
// (design §3), so a row's dot products are independent of each other:
//   P_j = S_{c0}[v]·(e^{Λ_j} ⊙ k̂_j),
//   M_{j,i} = (e^{Λ_j − Λ_i} ⊙ k̂_i)·k̂_j   (i < j, per block, shared by the rows),
//   d_j = β_j (v_j[v] − P_j − Σ_{i<j} M_{j,i} d_i),
//   S_{c1}[v] = e^{Λ_{c1−1}} ⊙ S_{c0}[v] + Σ_j d_j (e^{Λ_{c1−1} − Λ_j} ⊙ k̂_j),
// equal to the sequential form up to rounding. It uses ring_k, ring_ks,
// ring_g, ring_v, ring_beta only: the d̂ of ring_d (computed against the
// copy) are never read, so the checkpoint depends on the checkpoint and the
// raw inputs only. The rows are stored rounded to the state dtype; after a
// block barrier the block re-reads its tile from the checkpoint and packs it
// into the copy (quant/tile_pack.cuh), so the copy equals quant_pack of the
// stored checkpoint byte for byte. The state rows of a head are loaded
// (FOLD_ROWS per thread) before its records, so both arrive together.
#pragma once
#include "delta/heuristics.h"
#include "delta/kernel_common.cuh"
#include "quant/tile_pack.cuh"

namespace replayssm::delta::cuda_impl {

inline constexpr int DUAL_THREADS = 256;
inline constexpr int FOLD_CHUNK = 16;  // records per triangular chunk (P, d of a row in registers)
inline constexpr int FOLD_ROWS = 4;    // state rows per thread in flight (V = 128 at K = 128: one pass)

// Shared memory of the fold (floats): KH, W, F, G (KDA: [L][K], GDN: [L]),
// E [chunks][K], M [L][FOLD_CHUNK], β [L], the records' v [L][V].
struct FoldLayout {
  int64_t kh, w, f, g, e, m, bt, vj, floats;
};
__host__ __device__ inline FoldLayout dual_fold_layout(bool kda, int K, int V, int L) {
  FoldLayout l{};
  const int64_t LK = align4(int64_t(L) * K), nch = (L + FOLD_CHUNK - 1) / FOLD_CHUNK;
  l.kh = 0;
  l.w = l.kh + LK;
  l.f = l.w + LK;
  l.g = l.f + LK;
  l.e = l.g + (kda ? LK : align4(L));
  l.m = l.e + align4(nch * K);
  l.bt = l.m + align4(int64_t(L) * FOLD_CHUNK);
  l.vj = l.bt + align4(L);
  l.floats = l.vj + align4(int64_t(L) * V);
  return l;
}
__host__ __device__ inline int64_t dual_fold_floats(bool kda, int K, int V, int L) {
  return dual_fold_layout(kda, K, V, L).floats;
}

__device__ __forceinline__ void dual_store_out(void* p, DType dt, int64_t i, float x) {
  if (dt == DType::f64) static_cast<double*>(p)[i] = double(x);
  else store_any(p, dt, i, x);
}

template <DType SD, bool KDA>
__global__ void __launch_bounds__(DUAL_THREADS, 2) delta_dual_fold_kernel(DualArgs a) {
  using RW = Row<SD>;
  using TS = typename RW::TS;
  extern __shared__ float4 smem4[];
  float* sm = reinterpret_cast<float*>(smem4);
  const Rings& rg = a.rings;
  const int K = a.K, V = a.V, lpr = a.lpr;
  const int b = blockIdx.y;
  const int hv_lo = blockIdx.x * a.hpb, hv_hi = min(a.HV, hv_lo + a.hpb);
  const int tid = threadIdx.x, nthr = blockDim.x;
  const int grp = tid / lpr, lane = tid % lpr, rpp = nthr / lpr;
  const bool reporter = tid == 0 && blockIdx.x == 0;
  const bool mat = a.op == DUAL_MATERIALIZE;
  // Errors of DUAL_STEP rows are reported by the step kernel (same checks).
  const bool reports = a.op != DUAL_STEP;

  const int64_t s = idx_at(a.slot, b);
  if (s == a.pad) {
    if (mat)
      for (int hv = hv_lo; hv < hv_hi; ++hv)
        for (int64_t x = tid; x < int64_t(V) * K; x += nthr)
          dual_store_out(a.out, a.out_dt, int64_t(b) * a.o0 + int64_t(hv) * a.o1 + (x / K) * a.o2 + x % K, 0.f);
    return;
  }
  if (s < 0 || s >= a.S) {
    if (reporter && reports) cuda_util::report(a.status, STATUS_BAD_SLOT);
    return;
  }
  int start = 0, count = 0;
  if (rg.cur) {
    RingCursor c = cursor_at(rg, s);
    if (!cursor_ok(rg, c)) {
      if (reporter && reports) cuda_util::report(a.status, STATUS_RING_OVERFLOW);
      return;
    }
    switch (a.op) {
      case DUAL_STEP:
        if (a.acc.p) {
          if (!ring_commit(c, int32_t(idx_at(a.acc, b)))) return;
        } else if (c.pending != 0) {
          return;
        }
        if (!ring_plan_step(c, a.T, rg.L, rg.R).flush) return;
        break;
      case DUAL_FLUSH:
        if (c.pending != 0) {
          if (reporter) cuda_util::report(a.status, STATUS_UNCOMMITTED);
          return;
        }
        break;
      case DUAL_INIT:
        if (!a.init.p || idx_at(a.init, b) == 0) return;
        break;
      default: break;
    }
    start = c.start;
    count = a.op == DUAL_PACK ? 0 : c.count;
  } else if (a.op == DUAL_STEP || a.op == DUAL_INIT) {
    return;
  }
  const bool pack = a.op == DUAL_STEP || a.op == DUAL_FLUSH || a.op == DUAL_PACK;
  const int L = rg.cur ? rg.L : 0;
  const FoldLayout fl = dual_fold_layout(KDA, K, V, L);
  float* KH = sm + fl.kh;  // [L][K] k̂_j
  float* W = sm + fl.w;    // [L][K] e^{Λ_j} ⊙ k̂_j (Λ from the chunk's start)
  float* F = sm + fl.f;    // [L][K] e^{Λ_{c1−1} − Λ_j} ⊙ k̂_j
  float* GJ = sm + fl.g;   // g_j: KDA [L][K], GDN [L]
  float* E = sm + fl.e;    // [chunks][K] e^{Λ_{c1−1}}
  float* M = sm + fl.m;    // [L][FOLD_CHUNK] M_{j, i − c0}
  float* BT = sm + fl.bt;  // [L] β_j
  float* VJ = sm + fl.vj;  // [L][V] v of the records, so the row loop reads no global memory
  const int warp = tid / 32, wl = tid % 32, nwarps = nthr / 32;
  const int rows_per_pass = FOLD_ROWS * rpp;

  for (int hv = hv_lo; hv < hv_hi; ++hv) {  // uniform over the block
    const int kh = hv / a.G;
    TS* const tile = static_cast<TS*>(a.st.p) + s * a.st.s0 + int64_t(hv) * a.st.s1;
    if (count > 0 || mat) {
      for (int base = 0; base < V; base += rows_per_pass) {  // uniform: group sums need whole warps
        RW row[FOLD_ROWS];
#pragma unroll
        for (int p = 0; p < FOLD_ROWS; ++p) {
          const int v = base + p * rpp + grp;
          if (v < V) row[p].load(tile + int64_t(v) * a.st.s2, lane, lpr, K);
          else row[p].zero();
        }
        if (base == 0 && count > 0) {
          // Records of the head (the rows above are in flight meanwhile).
#pragma unroll 4
          for (int x = tid; x < count * K; x += nthr) {
            const int j = x / K, i = x - j * K;
            const int64_t pos = ring_pos(start, j, rg.R);
            KH[x] = load_any(rg.k, rg.k_dt, s * rg.k0 + pos * rg.k1 + int64_t(kh) * rg.k2 + i) *
                    rg.ks[s * rg.ks0 + pos * rg.ks1 + int64_t(kh) * rg.ks2];
            if (KDA) GJ[x] = rg.g[s * rg.g0 + pos * rg.g1 + int64_t(hv) * rg.g2 + i];
          }
          for (int j = tid; j < count; j += nthr) {
            const int64_t pos = ring_pos(start, j, rg.R);
            BT[j] = static_cast<const float*>(a.ring_beta.p)[s * a.ring_beta.s0 + pos * a.ring_beta.s1 +
                                                             int64_t(hv) * a.ring_beta.s2];
            if (!KDA) GJ[j] = rg.g[s * rg.g0 + pos * rg.g1 + int64_t(hv) * rg.g2];
          }
#pragma unroll 4
          for (int x = tid; x < count * V; x += nthr) {
            const int j = x / V, v = x - j * V;
            const int64_t pos = ring_pos(start, j, rg.R);
            VJ[x] = load_any(a.ring_v.p, a.ring_v.dt, s * a.ring_v.s0 + pos * a.ring_v.s1 + int64_t(hv) * a.ring_v.s2 + v);
          }
          __syncthreads();
          // Per channel i: W, F, E of every chunk (running sums of g from the
          // chunk's start, suffix sums from its end).
          for (int i = tid; i < K; i += nthr)
            for (int c0 = 0; c0 < count; c0 += FOLD_CHUNK) {
              const int c1 = min(c0 + FOLD_CHUNK, count);
              float lam = 0.f;
              for (int j = c0; j < c1; ++j) {
                lam += KDA ? GJ[j * K + i] : GJ[j];
                W[j * K + i] = expf(lam) * KH[j * K + i];
              }
              E[(c0 / FOLD_CHUNK) * K + i] = expf(lam);
              float suf = 0.f;
              for (int j = c1 - 1; j >= c0; --j) {
                F[j * K + i] = expf(suf) * KH[j * K + i];
                suf += KDA ? GJ[j * K + i] : GJ[j];
              }
            }
          // M: a warp per (chunk, i), lanes over the channels, j running up.
          for (int c0 = 0; c0 < count; c0 += FOLD_CHUNK) {
            const int c1 = min(c0 + FOLD_CHUNK, count);
            for (int i = c0 + warp; i < c1; i += nwarps) {
              float lam[MAX_K / 32];
#pragma unroll
              for (int r = 0; r < MAX_K / 32; ++r) lam[r] = 0.f;
              for (int j = i + 1; j < c1; ++j) {
                float part = 0.f;
#pragma unroll
                for (int r = 0; r < MAX_K / 32; ++r) {
                  const int ch = wl + 32 * r;
                  if (ch < K) {
                    lam[r] += KDA ? GJ[j * K + ch] : GJ[j];
                    part += expf(lam[r]) * KH[i * K + ch] * KH[j * K + ch];
                  }
                }
                part = warp_sum(part);
                if (wl == 0) M[j * FOLD_CHUNK + (i - c0)] = part;
              }
            }
          }
          __syncthreads();
        }
#pragma unroll
        for (int p = 0; p < FOLD_ROWS; ++p) {
          const int v = base + p * rpp + grp;
          const bool valid = v < V;
          for (int c0 = 0; c0 < count; c0 += FOLD_CHUNK) {
            const int n = min(FOLD_CHUNK, count - c0);
            float pd[FOLD_CHUNK];  // P_j, then d_j
#pragma unroll
            for (int jj = 0; jj < FOLD_CHUNK; ++jj) pd[jj] = jj < n ? row[p].dot(W + (c0 + jj) * K, lane, lpr, K) : 0.f;
#pragma unroll
            for (int jj = 0; jj < FOLD_CHUNK; ++jj) pd[jj] = group_sum(pd[jj], lpr);
#pragma unroll
            for (int jj = 0; jj < FOLD_CHUNK; ++jj) {
              if (jj >= n) break;
              const float* mj = M + (c0 + jj) * FOLD_CHUNK;
              float sk = pd[jj];
#pragma unroll
              for (int ii = 0; ii < jj; ++ii) sk += mj[ii] * pd[ii];
              const float vj = valid ? VJ[(c0 + jj) * V + v] : 0.f;
              pd[jj] = round_to(rg.d_dt, BT[c0 + jj] * (vj - sk));
            }
            row[p].scale(E + (c0 / FOLD_CHUNK) * K, lane, lpr, K);
#pragma unroll
            for (int jj = 0; jj < FOLD_CHUNK; ++jj)
              if (jj < n) row[p].axpy(pd[jj], F + (c0 + jj) * K, lane, lpr, K);
          }
          if (!valid) continue;
          TS* const rowp = tile + int64_t(v) * a.st.s2;
          if (mat) {
#pragma unroll
            for (int j = 0; j < RW::NCH; ++j)
#pragma unroll
              for (int e = 0; e < RW::VEC; ++e) {
                const int k = (j * lpr + lane) * RW::VEC + e;
                if (k < K)
                  dual_store_out(a.out, a.out_dt, int64_t(b) * a.o0 + int64_t(hv) * a.o1 + int64_t(v) * a.o2 + k,
                                 row[p].s[j][e]);
              }
          } else {
            row[p].store(rowp, lane, lpr, K);
          }
        }
      }
    }
    __syncthreads();  // the head's checkpoint rows are visible to the block; records free
    if (pack)
      quant::dev::pack_tile_block_any<SD>(tile, a.st.s2, a.copy.p + s * a.copy.s0 + int64_t(hv) * a.copy.s1,
                                          a.geom);
  }
}

}  // namespace replayssm::delta::cuda_impl
