// Baseline decode of one token (T = 1): read S, apply the token, write S
// (recurrent.cuh has the general T / snapshot / prefill kernel; same math).
// Block (x: value-head group × V tile, y: key head kh, z: row b) covers nh
// value heads of kh and vt rows of V each. The first P rows per thread
// (64 KiB) are issued into cp.async stages (stream.cuh) as soon as the slot
// is known; q̂, k̂, gates, β and v are prepared while they are in flight;
// each consumed stage is refilled with the thread's next row; per row
//   a_k = α (S k̂), a_q = α (S q̂)   (KDA: S(α ⊙ k̂), S(α ⊙ q̂))
//   d = β (v − a_k), o = a_q + (k̂·q̂) d, S ← α S + d k̂ᵀ (KDA: S Diag(α) + d k̂ᵀ)
// and the row is written back (streaming store).
//
// EAGER: the T = 1 replay step at small batches (delta_launch.cu,
// run_eager): the same read-update-write on a replay pool's checkpoint,
// after folding the row's committed records into it (S_h = E0 ⊙ S_0 +
// Σ_j d_j FV[j]ᵀ, recurrent.cuh fold_prep / fold_row; none in the steady
// state), so the token's record is not appended and the ring ends empty.
// The cursor changes only on rows that held records (or a pending window):
// there every block counts itself in a.ctr[b] after reading it and the last
// one writes {start + count, 0, 0} (no block can read it after that); without
// counters the cursor kernel's CUR_EAGER does it after the step. One value
// head per block.
#pragma once
#include <type_traits>

#include "delta/heuristics.h"
#include "delta/recurrent.cuh"
#include "delta/stream.cuh"

namespace replayssm::delta::cuda_impl {

// Shared memory of the T = 1 decode kernel, in floats (stages first).
struct Decode1Layout {
  int64_t stg, kn, qn, ka, qa, al, sc, vs, fv, e0, cr, total;
};
// L_fold: records an eager step may fold (FV [L_fold][K], E0 [K]); 0 otherwise.
__host__ __device__ inline Decode1Layout decode1_layout(bool kda, int K, int nh, int rbm, int nch, int np,
                                                        int kpb = 1, int L_fold = 0) {
  Decode1Layout l{};
  int64_t o = 0;
  l.stg = o; o += stage_floats(nch, np, DECODE1_THREADS);
  l.kn = o; o += int64_t(kpb) * align4(K);
  l.qn = o; o += int64_t(kpb) * align4(K);
  l.ka = o; o += kda ? align4(int64_t(nh) * K) : 0;
  l.qa = o; o += kda ? align4(int64_t(nh) * K) : 0;
  l.al = o; o += kda ? align4(int64_t(nh) * K) : 0;
  l.sc = o; o += align4(int64_t(nh) * 2 + kpb);
  l.vs = o; o += align4(rbm);
  l.fv = o; o += align4(int64_t(L_fold) * K);
  l.e0 = o; o += L_fold ? align4(K) : 0;
  l.cr = o; o += L_fold ? 4 : 0;  // eager: the row's cursor
  l.total = o;
  return l;
}

// EAGER: 0 for the baseline decode, else the eager step's resident blocks
// per SM: 2 (registers for the fold without spills) when its grid fits two
// per SM, 3 (the baseline's bound) otherwise (delta_launch.cu, run_eager).
//
// TAIL (a.big > 0, the baseline decode; delta_launch.cu): a 1-D grid whose
// first a.big blocks are the tiles (nh, vt, kpb) of rows [0, a.tb0) and whose
// last ones smaller tiles (a.tnh, a.tvt, a.tkpb) of rows [a.tb0, B), so the
// blocks that start last (the grid's tail) finish sooner.
template <DType SD, bool KDA, int EAGER = 0, bool TAIL = false>
__global__ void __launch_bounds__(DECODE1_THREADS, EAGER ? EAGER : DECODE1_MIN_BLOCKS) delta_decode1_kernel(RecArgs a) {
  using RW = Row<SD>;
  using ST = Stage<SD>;
  using TS = typename RW::TS;
  constexpr int P = ST::P;
  extern __shared__ float4 smem4[];
  float* sm = reinterpret_cast<float*>(smem4);
  const TokenArgs& in = a.in;
  const int K = in.K, V = in.V, lpr = a.lpr;
  int bx = blockIdx.x, by = blockIdx.y, b = blockIdx.z, KPB = a.kpb, nh = a.nh, VT = a.vt, VTILES = a.vtiles;
  if constexpr (TAIL) {
    unsigned i = blockIdx.x;
    const bool small = i >= a.big;
    if (small) {
      i -= a.big;
      KPB = a.tkpb;
      nh = a.tnh;
      VT = a.tvt;
      VTILES = a.tvtiles;
    }
    const unsigned gx = unsigned(in.G * KPB / nh * VTILES), gy = unsigned(in.H / KPB), yz = i / gx, z = yz / gy;
    bx = int(i - yz * gx);
    by = int(yz - z * gy);
    b = int(z) + (small ? a.tb0 : 0);
  }
  const int kh0 = by * KPB;
  const int hgroup = div_small(bx, VTILES), vtile = bx - hgroup * VTILES;
  const int hv0 = kh0 * in.G + hgroup * nh;
  // key head of local value head hl: kh0 (GQA), kh0 + hl (G = 1, KPB = nh)
  auto kx = [&](int hl) { return KPB == 1 ? 0 : hl; };
  const int AK = (K + 3) & ~3;  // stride of the per-key-head vectors
  const int v0 = vtile * VT;
  const int vt = min(VT, V - v0);
  const int RB = nh * vt, RBM = nh * VT;
  const int tid = threadIdx.x, warp = tid >> 5, lane32 = tid & 31;
  const int nthr = blockDim.x;
  const int lsh = __ffs(lpr) - 1;  // lpr is a power of two (lanes_per_row)
  const int grp = tid >> lsh, lane = tid & (lpr - 1), rpp = nthr >> lsh;
  const int np = div_small(RBM + rpp - 1, rpp);
  const bool reporter = tid == 0 && bx == 0 && by == 0;

  const int64_t s = idx_at(a.slot, b);
  if (s == a.pad) {
    for (int x = tid; x < RB; x += nthr) out_at(in.o, b, 0, hv0 + x / vt, v0 + x % vt, 0.f);
    return;
  }
  if (s < 0 || s >= a.S) {
    if (reporter) cuda_util::report(a.status, STATUS_BAD_SLOT);
    return;
  }
  TS* const state = static_cast<TS*>(a.st.p) + s * a.st.s0;
  auto row_ptr = [&](int rr) {
    const int h = div_small(rr, vt);
    return state + int64_t(hv0 + h) * a.st.s1 + int64_t(v0 + rr - h * vt) * a.st.s2;
  };
  const Decode1Layout lay = decode1_layout(KDA, K, nh, RBM, ST::NCH, np, KPB, EAGER ? a.rings.L : 0);
  uint4* STG = reinterpret_cast<uint4*>(sm + lay.stg);
  // Eager: the row's cursor is the first async copy (group 0, committed by
  // every thread so the group counts stay uniform), ahead of the state's
  // stages, so a cold cursor does not queue behind them; it is taken after
  // the token's barrier below, so it adds no round trip to the chain.
  int32_t* CUR = reinterpret_cast<int32_t*>(sm + lay.cr);
  int32_t acc = 0;
  if constexpr (EAGER != 0) {
    if (tid == 0) {
      const int32_t* c = a.rings.cur + s * a.rings.c0;
      cp_async_small<4>(CUR, c);
      cp_async_small<4>(CUR + 1, c + a.rings.c1);
      cp_async_small<4>(CUR + 2, c + 2 * a.rings.c1);
    }
    cp_async_commit();
    if (a.acc.p) acc = int32_t(idx_at(a.acc, b));
  }
#pragma unroll
  for (int pi = 0; pi < P; ++pi) {
    const int rr = pi * rpp + grp;
    if (pi < np && rr < RB) ST::issue(STG, nthr, pi, row_ptr(rr), lane, lpr, K);
    cp_async_commit();
  }
  float* KN = sm + lay.kn;  // [KPB][AK] k̂
  float* QN = sm + lay.qn;  // [KPB][AK] q̂
  float* KA = sm + lay.ka;  // KDA [nh][K] α ⊙ k̂
  float* QA = sm + lay.qa;  // KDA [nh][K] α ⊙ q̂
  float* AL = sm + lay.al;  // KDA [nh][K] α
  float* SC = sm + lay.sc;  // [nh] α (GDN), [nh] β, [KPB] k̂·q̂
  float* VS = sm + lay.vs;  // [RBM] v
  if (warp < KPB) {  // warp w prepares key head kh0 + w
    float ks, kq;
    warp_prep_qk(in, b, 0, kh0 + warp, KN + warp * AK, QN + warp * AK, ks, kq);
    if (lane32 == 0) SC[2 * nh + warp] = kq;
  } else {  // v, β and gates while warps 0 .. KPB−1 prepare q̂, k̂
    // Raw loads of a batch first, then their values (act_at / gate_at widen
    // a 16-bit input in the branch that loads it: one round trip each).
    const int me = tid - 32 * KPB, nt = nthr - 32 * KPB;
    constexpr int UB = 4;
    for (int x0 = me; x0 < RB; x0 += UB * nt) {
      uint32_t vb[UB];
#pragma unroll
      for (int u = 0; u < UB; ++u) {
        const int x = x0 + u * nt, h = div_small(x, vt);
        vb[u] = x < RB ? act_bits(in.v, b, 0, hv0 + h, v0 + x - h * vt) : 0u;
      }
#pragma unroll
      for (int u = 0; u < UB; ++u)
        if (x0 + u * nt < RB) VS[x0 + u * nt] = widen_bits(vb[u], in.v.dt);
    }
    for (int x = me; x < nh; x += nt) {
      const uint32_t bb = act_bits(in.beta, b, 0, hv0 + x);
      if (!KDA) SC[x] = expf(gate_at(in, false, b, 0, hv0 + x, 0));
      SC[nh + x] = beta_of(in, bb);
    }
    if (KDA)
      for (int x0 = me; x0 < nh * K; x0 += UB * nt) {
        GateRaw gr[UB];
#pragma unroll
        for (int u = 0; u < UB; ++u) {
          const int x = min(x0 + u * nt, nh * K - 1), h = div_small(x, K);
          gr[u] = gate_raw(in, true, b, 0, hv0 + h, x - h * K);
        }
#pragma unroll
        for (int u = 0; u < UB; ++u)
          if (x0 + u * nt < nh * K) AL[x0 + u * nt] = expf(gate_of(in, gr[u]));
      }
  }
  if constexpr (EAGER != 0) cp_async_wait<P>();  // the cursor's group (tid 0's copies)
  __syncthreads();
  // Eager: the committed records (after the fused commit; errors as the
  // replay kernels report them). Rows whose cursor changes (records to fold;
  // a committed window has some): the last block of the row resets it (every
  // block read it before counting itself).
  int n_fold = 0, fold_start = 0;
  if constexpr (EAGER != 0) {
    RingCursor cur{CUR[0], CUR[1], CUR[2]};
    int status = 0;
    if (!cursor_ok(a.rings, cur)) status = STATUS_RING_OVERFLOW;
    else if (a.acc.p) status = ring_commit(cur, acc) ? 0 : STATUS_BAD_ACCEPTED;
    else if (cur.pending != 0) status = STATUS_UNCOMMITTED;
    if (status != 0) {
      cp_async_wait_all();  // no copy outlives the block
      if (reporter) cuda_util::report(a.status, status);
      return;
    }
    n_fold = cur.count;
    fold_start = cur.start;
    if (a.ctr && n_fold > 0 && tid == 0 && cuda_util::last_row_arrival(a.ctr + b, gridDim.x * gridDim.y)) {
      int32_t* p = a.rings.cur + s * a.rings.c0;
      p[0] = ring_pos(cur.start, cur.count, a.rings.R);
      p[a.rings.c1] = 0;
      p[2 * a.rings.c1] = 0;
    }
  }
  float* FV = sm + lay.fv;  // eager [L][K] fold vectors, E0 [K] (fold_prep)
  float* E0 = sm + lay.e0;
  if (EAGER != 0 && n_fold > 0) fold_prep<KDA>(a.rings, s, hv0, kh0, fold_start, n_fold, K, FV, E0);  // (syncs)
  if (KDA) {
    for (int x = tid; x < nh * K; x += nthr) {
      const int hl = div_small(x, K), i = x - hl * K;
      KA[x] = AL[x] * KN[kx(hl) * AK + i];
      QA[x] = AL[x] * QN[kx(hl) * AK + i];
    }
    __syncthreads();
  }

  // Row rr = pi·rpp + grp is (value head hv0 + hl, v0 + vl), advanced without
  // divisions; the refill row (rr + P·rpp) likewise. The key vector every row
  // is multiplied with stays in registers (KDA: per head, so when nh == 1).
  RW uk;  // k̂ (KDA: α ⊙ k̂; with nh == 1; GDN: with one key head)
  const bool ureg = KDA ? nh == 1 : KPB == 1;
  if (ureg) uk.load_shared(KDA ? KA : KN, lane, lpr, K);
  auto advance = [&](int& h, int& v, int by) {
    v += by;
    while (v >= vt) {
      v -= vt;
      ++h;
    }
  };
  int hl = 0, vl = 0, hn = 0, vn = 0;
  advance(hl, vl, grp);
  advance(hn, vn, P * rpp + grp);
  const int64_t o_base = int64_t(b) * in.o.sb + v0;
  // The row stream; an eager step's rows with records to fold take their own
  // instance, so the steady state's stream is the baseline's.
  auto stream_rows = [&](auto fold) {
    constexpr bool FOLD = decltype(fold)::value;
    for (int pi = 0; pi < np; ++pi) {
      const bool valid = hl < nh;
      const int hc = valid ? hl : 0;
      cp_async_wait<P - 1>();
      RW row;
      if (valid) ST::read(row, STG, nthr, pi, lane, lpr, K);
      else row.zero();
      if (FOLD && valid) fold_row<SD>(row, a.rings, s, hv0, v0 + vl, fold_start, n_fold, K, FV, E0, lane, lpr);
      float pk = ureg ? row.dot(uk) : row.dot(KDA ? KA + hc * K : KN + kx(hc) * AK, lane, lpr, K);
      float pq = row.dot(KDA ? QA + hc * K : QN + kx(hc) * AK, lane, lpr, K);
      {  // refill the stage just consumed
        const int pn = pi + P;
        if (pn < np && hn < nh)
          ST::issue(STG, nthr, pn, state + int64_t(hv0 + hn) * a.st.s1 + int64_t(v0 + vn) * a.st.s2, lane, lpr, K);
        cp_async_commit();
        advance(hn, vn, rpp);
      }
      pk = group_sum(pk, lpr);
      pq = group_sum(pq, lpr);
      const float alpha = KDA ? 1.f : SC[hc];
      const float kq = SC[2 * nh + kx(hc)];
      const float d = SC[nh + hc] * (VS[valid ? pi * rpp + grp : 0] - alpha * pk);
      if (KDA) {
        row.scale(AL + hc * K, lane, lpr, K);
        row.axpy(d, KN + kx(hc) * AK, lane, lpr, K);
      } else {
        row.scale(alpha);
        if (ureg) row.axpy(d, uk);
        else row.axpy(d, KN + kx(hc) * AK, lane, lpr, K);
      }
      if (valid) {
        row.store(state + int64_t(hv0 + hl) * a.st.s1 + int64_t(v0 + vl) * a.st.s2, lane, lpr, K);
        if (lane == 0)
          store_any(in.o.p, in.o.dt, o_base + int64_t(hv0 + hl) * in.o.sh + vl, alpha * pq + kq * d);
      }
      advance(hl, vl, rpp);
    }
  };
  if constexpr (EAGER != 0) {
    if (n_fold > 0) return stream_rows(std::true_type{});
  }
  stream_rows(std::false_type{});
}

}  // namespace replayssm::delta::cuda_impl
