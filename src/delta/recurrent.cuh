// Baseline recurrence (decode, snapshot decode, prefill) and the fold of
// committed records into a full state (materialize, flush).
//
// Block (x: V tile, y: value head hv, z: row b); lane group = one row v.
// Per token, with k̂, q̂ normalised and scaled (shared memory):
//   GDN: a_k = α (S k̂), a_q = α (S q̂)            KDA: a_k = S(α⊙k̂), a_q = S(α⊙q̂)
//   d = β (v − a_k),  o = a_q + (k̂·q̂) d,  S ← α S + d k̂ᵀ  (KDA: S Diag(α) + d k̂ᵀ)
// The row stays in registers for all tokens; arithmetic is fp32.
#pragma once
#include "delta/heuristics.h"
#include "delta/kernel_common.cuh"

namespace replayssm::delta::cuda_impl {

// Fold vectors of value head hv (key head kh) of slot s over n records from
// ring position `start` (shared memory FV[n][K], E0[K]):
//   FV[j] = e^{Λ_n − Λ_j} ⊙ k_j·ks_j,  E0 = e^{Λ_n}  (GDN: scalar decays broadcast)
// so that S_n = E0 ⊙ S_0 + Σ_j d_j FV[j]ᵀ. The exponents are suffix sums of
// the gates (no difference of large prefix sums). Block-wide; syncs.
template <bool KDA>
__device__ void fold_prep(const Rings& r, int64_t s, int hv, int kh, int start, int n, int K,
                          float* FV, float* E0) {
  for (int x = threadIdx.x; x < n * K; x += blockDim.x) {
    const int j = x / K, i = x % K;
    const int64_t pos = ring_pos(start, j, r.R);
    FV[x] = load_any(r.k, r.k_dt, s * r.k0 + pos * r.k1 + kh * r.k2 + i) *
            r.ks[s * r.ks0 + pos * r.ks1 + kh * r.ks2];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < K; i += blockDim.x) {
    float suf = 0.f;
    for (int j = n - 1; j >= 0; --j) {
      const int64_t pos = ring_pos(start, j, r.R);
      FV[j * K + i] *= expf(suf);
      suf += KDA ? r.g[s * r.g0 + pos * r.g1 + hv * r.g2 + i] : r.g[s * r.g0 + pos * r.g1 + hv * r.g2];
    }
    E0[i] = expf(suf);
  }
  __syncthreads();
}

// Row v of value head hv folded with its records (after fold_prep).
template <DType SD>
__device__ __forceinline__ void fold_row(Row<SD>& row, const Rings& r, int64_t s, int hv, int v,
                                         int start, int n, int K, const float* FV, const float* E0,
                                         int lane, int lpr) {
  row.scale(E0, lane, lpr, K);
  for (int j = 0; j < n; ++j) {
    const int64_t pos = ring_pos(start, j, r.R);
    const float d = load_any(r.d, r.d_dt, s * r.d0 + pos * r.d1 + hv * r.d2 + v);
    row.axpy(d, FV + j * K, lane, lpr, K);
  }
}

// Shared memory of the recurrence kernel, in floats (rb = rows per block).
struct RecLayout {
  int64_t fv, e0, kn, qv, ka, al, sc, vs, total;
};
__host__ __device__ inline RecLayout rec_layout(bool kda, int K, int tc, int L_fold, int rb) {
  RecLayout l{};
  int64_t o = 0;
  l.fv = o; o += align4(int64_t(L_fold) * K);
  l.e0 = o; o += L_fold ? align4(K) : 0;
  l.kn = o; o += align4(int64_t(tc) * K);
  l.qv = o; o += align4(int64_t(tc) * K);
  l.ka = o; o += kda ? align4(int64_t(tc) * K) : 0;
  l.al = o; o += kda ? align4(int64_t(tc) * K) : 0;
  l.sc = o; o += align4(int64_t(tc) * 4);
  l.vs = o; o += align4(int64_t(tc) * rb);
  l.total = o;
  return l;
}

// Block (x: tile of REC_ROWS·rpp rows of V, y: value head hv, z: row b), rpp =
// blockDim/LPR lane groups; lane group g owns rows v = v0 + r·rpp + g, r < REC_ROWS.
// Every state load of the thread is issued as soon as the slot is known,
// before the per-token preparation (q̂, k̂, gates, β, v staged in shared
// memory), so the prologue runs while the state is in flight.
// KC > 0: K = KC and LPR = KC / ELEMS_PER_LANE as constants (launch_recurrent).
template <DType SD, bool KDA, int KC = 0>
__global__ void __launch_bounds__(REC_THREADS, REC_MIN_BLOCKS) delta_recurrent_kernel(RecArgs a) {
  using RW = Row<SD>;
  using TS = typename RW::TS;
  constexpr int NR = REC_ROWS;
  extern __shared__ float4 smem4[];
  float* sm = reinterpret_cast<float*>(smem4);
  const TokenArgs& in = a.in;
  const int K = KC ? KC : in.K, V = in.V, lpr = KC ? KC / ELEMS_PER_LANE : a.lpr;
  const int b = blockIdx.z, hv = blockIdx.y, kh = hv / in.G;
  const int grp = threadIdx.x / lpr, lane = threadIdx.x % lpr, rpp = blockDim.x / lpr;
  const int warp = threadIdx.x >> 5, lane32 = threadIdx.x & 31, nwarps = blockDim.x >> 5;
  const int RBK = NR * rpp;  // rows per block
  const int v0 = blockIdx.x * RBK;
  const bool reporter = threadIdx.x == 0 && blockIdx.x == 0 && blockIdx.y == 0;

  int64_t t0 = 0, nt = a.T, src = -1, dst = -1;
  if (a.mode != REC_SNAPSHOT) src = dst = idx_at(a.slot, b);
  if (a.mode == REC_PREFILL) {
    t0 = idx_at(a.cu, b);
    nt = idx_at(a.cu, b + 1) - t0;
  }
  bool pad = false, from_state = true;
  if (a.mode == REC_SNAPSHOT) {
    pad = idx_at(a.sidx, b, 0) == a.pad;
    if (!pad) {
      const int64_t acc = a.acc.p ? idx_at(a.acc, b) : 1;
      if (acc < 1 || acc > a.T) {
        if (reporter) cuda_util::report(a.status, STATUS_BAD_ACCEPTED);
        return;
      }
      src = idx_at(a.sidx, b, acc - 1);
      bool bad = src < 0 || src >= a.S;
      for (int t = 0; t < a.T; ++t) {
        const int64_t x = idx_at(a.sidx, b, t);
        bad |= x != a.pad && (x < 0 || x >= a.S);
      }
      if (bad) {
        if (reporter) cuda_util::report(a.status, STATUS_BAD_SLOT);
        return;
      }
    }
  } else {
    pad = src == a.pad;
    if (a.mode == REC_PREFILL) from_state = a.init.p && idx_at(a.init, b) != 0;
    if (!pad && (src < 0 || src >= a.S)) {
      if (reporter) cuda_util::report(a.status, STATUS_BAD_SLOT);
      return;
    }
  }
  if (pad) {
    for (int64_t x = threadIdx.x; x < nt * RBK; x += blockDim.x) {
      const int v = v0 + int(x % RBK);
      if (v < V) out_at(in.o, b, t0 + x / RBK, hv, v, 0.f);
    }
    return;
  }

  TS* const state = static_cast<TS*>(a.st.p);
  auto row_off = [&](int r) { return int64_t(hv) * a.st.s1 + int64_t(v0 + r * rpp + grp) * a.st.s2; };
  auto row_in = [&](int r) { return v0 + r * rpp + grp < V; };  // row r of the thread lies in V
  RW row[NR];
#pragma unroll
  for (int r = 0; r < NR; ++r) {
    if (from_state && row_in(r)) row[r].load(state + src * a.st.s0 + row_off(r), lane, lpr, K);
    else row[r].zero();
  }
  // the final state of decode / prefill into slot dst
  auto store_rows = [&]() {
#pragma unroll
    for (int r = 0; r < NR; ++r)
      if (row_in(r)) row[r].store(state + dst * a.st.s0 + row_off(r), lane, lpr, K);
  };

  const RecLayout lay = rec_layout(KDA, K, a.tc, a.rings.d ? a.rings.L : 0, RBK);
  if (a.mode == REC_PREFILL && from_state && a.rings.d) {
    const RingCursor c = cursor_at(a.rings, src);
    if (!cursor_ok(a.rings, c)) {
      if (reporter) cuda_util::report(a.status, STATUS_RING_OVERFLOW);
      return;
    }
    if (c.count > 0) {
      fold_prep<KDA>(a.rings, src, hv, kh, c.start, c.count, K, sm + lay.fv, sm + lay.e0);
#pragma unroll
      for (int r = 0; r < NR; ++r) {
        const int v = v0 + r * rpp + grp;
        if (v < V)
          fold_row<SD>(row[r], a.rings, src, hv, v, c.start, c.count, K, sm + lay.fv, sm + lay.e0, lane, lpr);
      }
    }
  }

  float* KN = sm + lay.kn;
  float* QV = sm + lay.qv;  // q̂ (KDA: α ⊙ q̂)
  float* KA = sm + lay.ka;  // KDA: α ⊙ k̂
  float* AL = sm + lay.al;  // KDA: α
  float* SC = sm + lay.sc;  // per token {α (GDN), β, k̂·q̂, -}
  float* VS = sm + lay.vs;  // [tc][RBK] v of the block's rows
  for (int64_t c0 = 0; c0 < nt; c0 += a.tc) {
    const int n = int(nt - c0 < a.tc ? nt - c0 : int64_t(a.tc));
    if (c0 > 0) __syncthreads();
    for (int x = threadIdx.x; x < n * RBK; x += blockDim.x) {
      const int i = x / RBK, v = v0 + x % RBK;
      VS[x] = v < V ? act_at(in.v, b, t0 + c0 + i, hv, v) : 0.f;
    }
    for (int i = warp; i < n; i += nwarps) {
      const int64_t tok = t0 + c0 + i;
      float ks, kq;
      warp_prep_qk(in, b, tok, kh, KN + i * K, QV + i * K, ks, kq);
      if (lane32 == 0) {
        SC[i * 4 + 1] = beta_at(in, b, tok, hv);
        SC[i * 4 + 2] = kq;
        if (!KDA) SC[i * 4] = expf(gate_at(in, false, b, tok, hv, 0));
      }
      if (KDA) {
        __syncwarp();
        for (int k = lane32; k < K; k += 32) {
          const float al = expf(gate_at(in, true, b, tok, hv, k));
          AL[i * K + k] = al;
          KA[i * K + k] = al * KN[i * K + k];
          QV[i * K + k] *= al;
        }
      }
    }
    __syncthreads();
    // Tokens outer, the thread's rows inner: the rows' dependent chains
    // (products, lane sums, update) interleave.
    for (int i = 0; i < n; ++i) {
      const int64_t tok = t0 + c0 + i;
      const int64_t w = a.mode == REC_SNAPSHOT ? idx_at(a.sidx, b, c0 + i) : a.pad;
      const float alpha = KDA ? 1.f : SC[i * 4], beta = SC[i * 4 + 1], kq = SC[i * 4 + 2];
      float pk[NR], pq[NR];
#pragma unroll
      for (int r = 0; r < NR; ++r) {
        pk[r] = row[r].dot((KDA ? KA : KN) + i * K, lane, lpr, K);
        pq[r] = row[r].dot(QV + i * K, lane, lpr, K);
      }
#pragma unroll
      for (int r = 0; r < NR; ++r) {
        pk[r] = group_sum(pk[r], lpr);
        pq[r] = group_sum(pq[r], lpr);
      }
#pragma unroll
      for (int r = 0; r < NR; ++r) {
        const int rl = r * rpp + grp, v = v0 + rl;
        const bool valid = v < V;
        const float d = beta * (VS[i * RBK + rl] - alpha * pk[r]);
        const float o = alpha * pq[r] + kq * d;
        if (KDA) row[r].scale(AL + i * K, lane, lpr, K);
        else row[r].scale(alpha);
        row[r].axpy(d, KN + i * K, lane, lpr, K);
        if (valid && lane == 0) out_at(in.o, b, tok, hv, v, o);
        if (a.mode == REC_SNAPSHOT && valid && w != a.pad) row[r].store(state + w * a.st.s0 + row_off(r), lane, lpr, K);
      }
    }
    if (a.mode != REC_SNAPSHOT && c0 + n >= nt) store_rows();
  }
  if (a.mode != REC_SNAPSHOT && nt == 0) store_rows();  // empty prompt: the (zero or current) state is written
}

// Materialize (out != null: out[i] = checkpoint ⊕ committed records, any
// float dtype) or flush (fold into the checkpoint in place). Block (x: V tile,
// y: value head, z: entry i of the slot vector).
__device__ __forceinline__ void store_out(void* p, DType dt, int64_t i, float x) {
  if (dt == DType::f64) static_cast<double*>(p)[i] = double(x);
  else store_any(p, dt, i, x);
}

template <DType SD, bool KDA>
__global__ void delta_fold_kernel(FoldArgs a) {
  using RW = Row<SD>;
  using TS = typename RW::TS;
  extern __shared__ float4 smem4[];
  float* sm = reinterpret_cast<float*>(smem4);
  const int K = a.K, V = a.V, lpr = a.lpr;
  const int i = blockIdx.z, hv = blockIdx.y, kh = hv / a.G;
  const int grp = threadIdx.x / lpr, lane = threadIdx.x % lpr;
  const int v = blockIdx.x * (blockDim.x / lpr) + grp;
  const bool valid = v < V;
  const bool reporter = threadIdx.x == 0 && blockIdx.x == 0 && blockIdx.y == 0;
  const int64_t s = idx_at(a.slot, i);
  auto store_row = [&](const RW& row) {
    if (!valid) return;
#pragma unroll
    for (int j = 0; j < RW::NCH; ++j)
#pragma unroll
      for (int e = 0; e < RW::VEC; ++e) {
        const int k = (j * lpr + lane) * RW::VEC + e;
        if (k < K) store_out(a.out, a.out_dt, int64_t(i) * a.o0 + int64_t(hv) * a.o1 + int64_t(v) * a.o2 + k, row.s[j][e]);
      }
  };
  if (s == a.pad) {
    if (a.out) {
      RW z;
      z.zero();
      store_row(z);
    }
    return;
  }
  if (s < 0 || s >= a.S) {
    if (reporter) cuda_util::report(a.status, STATUS_BAD_SLOT);
    return;
  }
  RingCursor c{0, 0, 0};
  if (a.rings.cur) {
    c = cursor_at(a.rings, s);
    if (!cursor_ok(a.rings, c)) {
      if (reporter) cuda_util::report(a.status, STATUS_RING_OVERFLOW);
      return;
    }
    if (!a.out && c.pending != 0) {
      if (reporter) cuda_util::report(a.status, STATUS_UNCOMMITTED);
      return;
    }
  }
  if (!a.out && c.count == 0) return;
  TS* const state = static_cast<TS*>(a.st.p);
  TS* const rowp = state + s * a.st.s0 + int64_t(hv) * a.st.s1 + int64_t(v) * a.st.s2;
  RW row;
  if (valid) row.load(rowp, lane, lpr, K);
  else row.zero();
  if (c.count > 0) {
    float* FV = sm;
    float* E0 = sm + align4(int64_t(a.rings.L) * K);
    fold_prep<KDA>(a.rings, s, hv, kh, c.start, c.count, K, FV, E0);
    if (valid) fold_row<SD>(row, a.rings, s, hv, v, c.start, c.count, K, FV, E0, lane, lpr);
  }
  if (a.out) store_row(row);
  else if (valid) row.store(rowp, lane, lpr, K);
}

}  // namespace replayssm::delta::cuda_impl
