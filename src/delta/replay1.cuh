// Replay step of one token (T = 1, plain decode), with the flush fused
// (design/replay.md §2). Same grid and math as replay.cuh, arranged so the
// checkpoint streams at copy bandwidth:
//   1. the block's first P checkpoint rows per thread are issued (cp.async
//      into shared stages, stream.cuh) as soon as the slot is known;
//   2. while they are in flight everything that does not need S_0 is
//      prepared: cursor, record keys, d records, gates, coefficients, and
//      per row the history terms
//        h_u[v] = Σ_{j<m} W_{u,j} d_j[v],  W_{u,j} = c_j (k̂_j·u)   (GDN)
//        W_{u,j} = (c_j ⊙ k̂_j)·u                                     (KDA)
//      with c_j = e^{Λ_m − Λ_j} (suffix sums of the gates, fp32), m = count;
//   3. the rows stream through the stages (P rows per thread in flight);
//      per row only the two products S_0 u_k, S_0 u_q remain:
//        a_u = e^{Λ_m} (S_0 u) + h_u  (KDA: S_0 (e^{Λ_m} ⊙ u) + h_u),
//        d = β (v − a_k) (rounded to ring_d's dtype), o = a_q + (k̂·q̂) d.
// Flush (count = L): the row is folded first, S_h = e^{Λ_h} ⊙ S_0 +
// Σ_j d_j (c_j ⊙ k̂_j)ᵀ (c_j = e^{Λ_h − Λ_j}), stored once, and the token
// reads S_h with no history and decay e^{g}.
#pragma once
#include <type_traits>

#include "delta/heuristics.h"
#include "delta/stream.cuh"

namespace replayssm::delta::cuda_impl {

// The bulk-copy stream (BULK kernels, K = 128, the block's rows one
// contiguous run of the state): sweeps of R1B_WARPS·RQ·RPL rows land by
// cp.async.bulk in up to R1B_MAX_STAGES stages of shared memory, one
// mbarrier each; every lane owns one 16-byte column vector of a row and the
// two products of RQ rows are summed by one transposed reduction each
// (cuda_util::transpose_sum), as in the Mamba-2 kernel (mamba2/replay1_kernel.cuh).
inline constexpr int R1B_K = 128;
inline constexpr int R1B_MAX_STAGES = 4;
__host__ __device__ constexpr int r1b_rq(bool kda) { return kda ? 4 : 8; }  // rows per lane group and batch
// rows per sweep: every consumer warp's rows (the persistent step,
// replay1p.cuh, may take more warps)
__host__ __device__ constexpr int r1b_sweep_rows(bool kda, int state_size, int warps = REPLAY1_THREADS / 32) {
  return warps * r1b_rq(kda) * (32 / (R1B_K * state_size / 16));
}
// Stages of a block of `rows` rows: the stage budget of the staged kernel
// (64 KiB; KDA 32 KiB) in sweeps, at most one per sweep of the block.
__host__ __device__ inline int r1b_stages(bool kda, int state_size, int rows) {
  const int sw = r1b_sweep_rows(kda, state_size), nsw = (rows + sw - 1) / sw;
  const int budget = (kda ? 32 : 64) * 1024 / (sw * R1B_K * state_size);
  return max(1, min(min(budget, R1B_MAX_STAGES), nsw));
}
__host__ __device__ inline int64_t r1b_stage_floats(bool kda, int state_size, int rows) {
  return int64_t(r1b_stages(kda, state_size, rows)) * r1b_sweep_rows(kda, state_size) * R1B_K * state_size / 4;
}
// The bulk stream of a packed read copy (QF_FP8 / QF_NVFP4 with BULK; dual
// pools, delta_launch.cu::replay1_qbulk_fits): K = 128, sweep k = the block's
// vt <= 128 rows of value head hv0 + k: their codes, their block scales and
// (nvfp4) the tile's tensor scale (16 bytes), three bulk copies on one
// mbarrier. A lane owns 16 values of a row (fp8: 16 code bytes and one of the
// row's 32-value block scales; nvfp4: 8 bytes and its 16-value block scale),
// RQ = 4 rows per lane group and batch: 8 warps cover 128 rows.
inline constexpr int R1Q_MAX_ROWS = 128;
inline constexpr int R1Q_RQ = 4;

// GDN decays of one value head (phase 2; the persistent step's preparation
// too): c_j = e^{tok + Σ_{j<i<m} g_i} into co[j], j < m = n_old, by a suffix
// scan over the warp's lanes (m < 32; longer histories: lane 0's serial
// chain); returns tok + Σ_{i<m} g_i (m < 32: in every lane; else lane 0's),
// the exponent of e^{Λ} (m = 0: 0, the caller uses tok).
__device__ __forceinline__ float gdn_suffix_decays(const float* g, float tok, int n_old, float* co, int lane) {
  if (n_old < 32) {
    // lane j: y_j = g_{j+1} (j + 1 < m), the token's t (j + 1 = m); suffix sums
    float y = lane + 1 < n_old ? g[lane + 1] : lane + 1 == n_old ? tok : 0.f;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const float t = __shfl_down_sync(0xffffffffu, y, o);
      if (lane + o < 32) y += t;
    }
    if (lane < n_old) co[lane] = expf(y);
    return __shfl_sync(0xffffffffu, y, 0) + (n_old > 0 ? g[0] : 0.f);  // t + Σ_{i<m} g_i
  }
  float suf = tok;
  if (lane == 0)
    for (int j = n_old - 1; j >= 0; --j) {
      co[j] = expf(suf);
      suf += g[j];
    }
  return suf;
}

// Pieces of the bulk stream's sweep shared with the persistent step
// (replay1p.cuh), on a lane's E elements of FG rows f[i]:
// one record of a flush's fold, f_i += w_i k̂ (kv: the lane's channels of k̂);
template <int FG, int E>
__device__ __forceinline__ void r1b_fold_record(float (&f)[FG][E], const float (&w)[FG], const float* kv) {
#pragma unroll
  for (int e = 0; e < E; e += 4) {
    const float4 k4 = *reinterpret_cast<const float4*>(kv + e);
#pragma unroll
    for (int i = 0; i < FG; ++i) {
      f[i][e] += w[i] * k4.x; f[i][e + 1] += w[i] * k4.y; f[i][e + 2] += w[i] * k4.z; f[i][e + 3] += w[i] * k4.w;
    }
  }
}
// the folded rows r0 + (u0 + i)·rpl + sub stored (rows < rb; col: the
// lane's first element) and kept as stored, since the outputs read the
// checkpoint as stored;
template <DType SD, int FG, int E>
__device__ __forceinline__ void r1b_store_rows(float (&f)[FG][E], typename Traits<SD>::type* base, int r0, int u0,
                                               int rpl, int sub, int rb, int col) {
  using TS = typename Traits<SD>::type;
#pragma unroll
  for (int i = 0; i < FG; ++i) {
    const int ri = r0 + (u0 + i) * rpl + sub;
    uint4 out;
    TS* x = reinterpret_cast<TS*>(&out);
#pragma unroll
    for (int e = 0; e < E; ++e) {
      x[e] = Traits<SD>::store(f[i][e]);
      f[i][e] = Traits<SD>::load(x[e]);
    }
    if (ri < rb) __stcs(reinterpret_cast<uint4*>(base + int64_t(ri) * R1B_K + col), out);
  }
}
// the rows' partial products with u_k and u_q, times qs[i];
template <int FG, int E>
__device__ __forceinline__ void r1b_row_dots(const float (&f)[FG][E], const float (&uk)[E], const float (&uq)[E],
                                             const float (&qs)[FG], float* ak, float* aq) {
#pragma unroll
  for (int i = 0; i < FG; ++i) {
    float pk = 0.f, pq = 0.f;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      pk = fmaf(f[i][e], uk[e], pk);
      pq = fmaf(f[i][e], uq[e], pq);
    }
    ak[i] = pk * qs[i];
    aq[i] = pq * qs[i];
  }
}
// and the end of a sweep: the products of the warp's RQ row groups summed
// per row (transposed reductions), then, by the lane that holds row r
// (< rlim; value head r / vt of the block's from hv0), the token's d record
// round(v_s − β e a_k) and output e a_q + h_q + (k̂·q̂) d; eu, beta per
// value head (KDA: e = 1), vs, hq per row.
template <bool KDA, int LPB, int RQ>
__device__ __forceinline__ void r1b_finish_rows(float (&ak)[RQ], float (&aq)[RQ], int lr, int r0, int rpl, int sub,
                                                int rlim, int vt, int hv0, const float* eu, const float* beta,
                                                const float* vs, const float* hq, float kq, const Rings& rg,
                                                const TokenArgs& in, int64_t d_base, int64_t o_base) {
  cuda_util::transpose_sum<RQ, LPB>(ak, lr);
  cuda_util::transpose_sum<RQ, LPB>(aq, lr);
  if ((lr & (LPB / RQ - 1)) == 0) {
    const int r = r0 + (lr / (LPB / RQ)) * rpl + sub;
    if (r < rlim) {
      const int hl = div_small(r, vt), vl = r - hl * vt;
      const int64_t hv = hv0 + hl;
      const float e = KDA ? 1.f : eu[hl];
      const float aqv = e * aq[0] + hq[r];
      const float dr = round_to(rg.d_dt, vs[r] - beta[hl] * e * ak[0]);
      store_any(rg.d, rg.d_dt, d_base + hv * rg.d2 + vl, dr);
      store_any(in.o.p, in.o.dt, o_base + hv * in.o.sh + vl, aqv + kq * dr);
    }
  }
}
// The GDN fp8 copy's sweep on tensor cores (docs/perf_notes_delta.md v17;
// replay1.cuh's phase 4 and, since v46, the persistent stream): warp w takes
// rows 16w .. 16w + 15 of a value head as one m16n8k16 tile (lane (g, t):
// rows g and g + 8), lane t their codes 32t .. 32t + 31, i.e. fp8 block t of
// each row. k-step c multiplies codes 32t + 4c + {0..3} (exact in f16) with B
// column n = 2b + v: u_v on block b only (v = 0: u_q, 1: u_k), so D[r][2b + v]
// is block b's sum, scaled by its 2^(e − 127) in fp32 before the four blocks
// are added. B holds 2^σ_v u_v (σ_v brings max |u_v| to [2^13, 2^14), clear
// of f16's subnormals) as hi + lo f16 parts, two products per step: ~22 bits
// of u, fp32 accumulation.
struct Fp8TcB {
  uint32_t bh[8][2], bl[8][2];
  float usq, usk;  // 2^−σ: the sums' unscaling
};
// the B operands of u_q (uqp) and u_k (ukp), K = R1B_K floats each (shared
// memory); live false: zeros. NV4: in the nvfp4 sweep's order (nv4_tc_mma).
template <bool NV4 = false>
__device__ __forceinline__ void fp8_tc_operands(const float* uqp, const float* ukp, bool live, int lane32, Fp8TcB& o) {
  const int g = lane32 >> 2, t = lane32 & 3;
  float mq = 0.f, mk = 0.f;
  if (live)
#pragma unroll
    for (int e = lane32; e < R1B_K; e += 32) mq = fmaxf(mq, fabsf(uqp[e])), mk = fmaxf(mk, fabsf(ukp[e]));
#pragma unroll
  for (int of = 16; of >= 1; of /= 2) {
    mq = fmaxf(mq, __shfl_xor_sync(0xffffffffu, mq, of));
    mk = fmaxf(mk, __shfl_xor_sync(0xffffffffu, mk, of));
  }
  const int sq = cuda_util::f16_split_exp(mq), sk = cuda_util::f16_split_exp(mk);
  const bool vk = g & 1, on = live && (g >> 1) == t;
  const float* const u = (vk ? ukp : uqp) + 32 * t;
  const float sc = quant::dev::exp2i(vk ? sk : sq);
  if constexpr (NV4) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {  // k-steps 2j, 2j + 1: values 8j + {0, 4}, {1, 5} and {2, 6}, {3, 7}
      const float4 x = on ? *reinterpret_cast<const float4*>(u + 8 * j) : make_float4(0.f, 0.f, 0.f, 0.f);
      const float4 y = on ? *reinterpret_cast<const float4*>(u + 8 * j + 4) : make_float4(0.f, 0.f, 0.f, 0.f);
      cuda_util::f16x2_split(x.x * sc, y.x * sc, o.bh[2 * j][0], o.bl[2 * j][0]);
      cuda_util::f16x2_split(x.y * sc, y.y * sc, o.bh[2 * j][1], o.bl[2 * j][1]);
      cuda_util::f16x2_split(x.z * sc, y.z * sc, o.bh[2 * j + 1][0], o.bl[2 * j + 1][0]);
      cuda_util::f16x2_split(x.w * sc, y.w * sc, o.bh[2 * j + 1][1], o.bl[2 * j + 1][1]);
    }
  } else {
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      const float4 x = on ? *reinterpret_cast<const float4*>(u + 4 * c) : make_float4(0.f, 0.f, 0.f, 0.f);
      cuda_util::f16x2_split(x.x * sc, x.y * sc, o.bh[c][0], o.bl[c][0]);
      cuda_util::f16x2_split(x.z * sc, x.w * sc, o.bh[c][1], o.bl[c][1]);
    }
  }
  o.usq = quant::dev::exp2i(-sq);
  o.usk = quant::dev::exp2i(-sk);
}
// A tile's codes and block scales: rows ra, rb of a stage (rows of R1B_K
// code bytes, their srb scale bytes after nrows rows)
struct Fp8TcRows {
  uint32_t wa[8], wb[8], ea, eb;
};
__device__ __forceinline__ void fp8_tc_load(const char* sg, int ra, int rb, int nrows, int srb, int t, Fp8TcRows& x) {
  const uint4* const pa = reinterpret_cast<const uint4*>(sg + ra * R1B_K + 32 * t);
  const uint4* const pb = reinterpret_cast<const uint4*>(sg + rb * R1B_K + 32 * t);
  const uint4 a0 = pa[0], a1 = pa[1], b0 = pb[0], b1 = pb[1];
  x.wa[0] = a0.x, x.wa[1] = a0.y, x.wa[2] = a0.z, x.wa[3] = a0.w, x.wa[4] = a1.x, x.wa[5] = a1.y, x.wa[6] = a1.z, x.wa[7] = a1.w;
  x.wb[0] = b0.x, x.wb[1] = b0.y, x.wb[2] = b0.z, x.wb[3] = b0.w, x.wb[4] = b1.x, x.wb[5] = b1.y, x.wb[6] = b1.z, x.wb[7] = b1.w;
  x.ea = uint8_t(sg[nrows * R1B_K + ra * srb + t]);
  x.eb = uint8_t(sg[nrows * R1B_K + rb * srb + t]);
}
__device__ __forceinline__ void fp8_tc_mma(const Fp8TcRows& x, const Fp8TcB& o, float (&dh)[4], float (&dl)[4]) {
#pragma unroll
  for (int c = 0; c < 8; ++c) {
    const uint32_t x0 = quant::dev::e4m3x2_to_f16x2(x.wa[c]), x1 = quant::dev::e4m3x2_to_f16x2(x.wb[c]);
    const uint32_t x2 = quant::dev::e4m3x2_to_f16x2(x.wa[c] >> 16), x3 = quant::dev::e4m3x2_to_f16x2(x.wb[c] >> 16);
    cuda_util::mma_f16(dh, x0, x1, x2, x3, o.bh[c][0], o.bh[c][1]);
    cuda_util::mma_f16(dl, x0, x1, x2, x3, o.bl[c][0], o.bl[c][1]);
  }
}
// the rows' sums: lanes t = 0 / 2 get row g / g + 8's (aq, ak), unscaled
__device__ __forceinline__ void fp8_tc_sums(const float (&dh)[4], const float (&dl)[4], const Fp8TcRows& x,
                                            const Fp8TcB& o, int t, float& aq, float& ak) {
  // lane t: D[g][2t], D[g][2t + 1], the same of row g + 8 = block t's q and k sums
  const float fa = quant::dev::exp2i(int(x.ea) - 127), fb = quant::dev::exp2i(int(x.eb) - 127);
  float v[4] = {(dh[0] + dl[0]) * fa, (dh[1] + dl[1]) * fa, (dh[2] + dl[2]) * fb, (dh[3] + dl[3]) * fb};
  cuda_util::transpose_sum<4, 4>(v, t);  // lane t: v[t] summed over the blocks
  const float vk = __shfl_xor_sync(0xffffffffu, v[0], 1);
  aq = v[0] * o.usq;
  ak = vk * o.usk;
}

// The nvfp4 copy's sweep on tensor cores, in the fp8 sweep's form: lane t
// takes bytes 16t .. 16t + 15 of rows g and g + 8 (values 32t .. 32t + 31:
// nvfp4 blocks 2t and 2t + 1); word j of them (values 32t + 8j + i) makes
// the f16x2 pairs p_i = (value i, value i + 4) · 2^-14, exact
// (quant::dev::e2m1x8_to_f16x2_pairs), and k-step c = 2j + s takes p_{2s}
// as columns 2t, 2t + 1 and p_{2s+1} as 2t + 8, 2t + 9 (B in that order:
// fp8_tc_operands<true>). k-steps 0–3 (block 2t) and 4–7 (block 2t + 1)
// accumulate apart; each block's sums take its E4M3 scale, then 2^14 and the
// tile's scale. A code of 0.5 is an f16 subnormal, which the tensor cores
// take exactly.
struct Nv4TcRows {
  uint32_t wa[4], wb[4];
  float sa[2], sb[2], m;  // the rows' block scales (blocks 2t, 2t + 1); 2^14 · the tile scale
};
// rows ra, rb of a stage: R1B_K / 2 code bytes a row, their srb scale bytes
// after nrows rows, then the tile's fp32 scale
__device__ __forceinline__ void nv4_tc_load(const char* sg, int ra, int rb, int nrows, int srb, int t, Nv4TcRows& x) {
  const uint4 a = *reinterpret_cast<const uint4*>(sg + ra * (R1B_K / 2) + 16 * t);
  const uint4 b = *reinterpret_cast<const uint4*>(sg + rb * (R1B_K / 2) + 16 * t);
  x.wa[0] = a.x, x.wa[1] = a.y, x.wa[2] = a.z, x.wa[3] = a.w;
  x.wb[0] = b.x, x.wb[1] = b.y, x.wb[2] = b.z, x.wb[3] = b.w;
  const uint8_t* const sc = reinterpret_cast<const uint8_t*>(sg + nrows * (R1B_K / 2));
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    x.sa[i] = quant::dev::e4m3_decode(sc[ra * srb + 2 * t + i]);
    x.sb[i] = quant::dev::e4m3_decode(sc[rb * srb + 2 * t + i]);
  }
  x.m = 16384.f * *reinterpret_cast<const float*>(sc + nrows * srb);
}
__device__ __forceinline__ void nv4_tc_mma(const Nv4TcRows& x, const Fp8TcB& o, float (&dh)[2][4], float (&dl)[2][4]) {
  quant::dev::e2m1_tc_ksteps(x.wa, x.wb, [&](int j, int s, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3) {
    cuda_util::mma_f16(dh[j >> 1], a0, a1, a2, a3, o.bh[2 * j + s][0], o.bh[2 * j + s][1]);
    cuda_util::mma_f16(dl[j >> 1], a0, a1, a2, a3, o.bl[2 * j + s][0], o.bl[2 * j + s][1]);
  });
}
// the rows' sums as fp8_tc_sums: lanes t = 0 / 2 get row g / g + 8's (aq, ak)
__device__ __forceinline__ void nv4_tc_sums(const float (&dh)[2][4], const float (&dl)[2][4], const Nv4TcRows& x,
                                            const Fp8TcB& o, int t, float& aq, float& ak) {
  float v[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float s0 = i < 2 ? x.sa[0] : x.sb[0], s1 = i < 2 ? x.sa[1] : x.sb[1];
    v[i] = (dh[0][i] + dl[0][i]) * s0 + (dh[1][i] + dl[1][i]) * s1;
  }
  cuda_util::transpose_sum<4, 4>(v, t);  // lane t: v[t] summed over the blocks
  const float vk = __shfl_xor_sync(0xffffffffu, v[0], 1);
  aq = v[0] * x.m * o.usq;
  ak = vk * x.m * o.usk;
}

__host__ __device__ inline int64_t r1q_sweep_bytes(bool nvfp4, int vt, int64_t scale_row_bytes) {
  return int64_t(vt) * (nvfp4 ? R1B_K / 2 : R1B_K) + vt * scale_row_bytes + (nvfp4 ? 16 : 0);
}
__host__ __device__ inline int r1q_stages(int64_t sweep_bytes, int nh) {
  const int budget = int(R1Q_STAGE_BYTES / sweep_bytes);
  return max(1, min(min(budget, R1B_MAX_STAGES), nh));
}
__host__ __device__ inline int64_t r1q_stage_floats(int64_t sweep_bytes, int nh) {
  return int64_t(r1q_stages(sweep_bytes, nh)) * sweep_bytes / 4;
}

// The d records held in shared memory ([ld][rbm] floats of DT): all L when
// they fit (ld = L). Long rings (L = 32 at a whole GDN key head: 64 KiB of
// fp32 d) would cost the block its second (KDA: third) slot on the SM, so the
// launcher may take ld < L (delta_launch.cu): a step reads its records past
// ld from global memory (L2, prefetched), and a flush of more than ld
// records stages the fold weights of all L records sweep by sweep (GDN: in
// the same region, sw = rows per bulk sweep; KDA in its gates' region, and
// kernels that do not flush by sweeps: sw = 0).
__host__ __device__ inline int64_t replay1_dt_floats(int L, int ld, int rbm, int sw) {
  const int64_t tile = int64_t(ld) * rbm, staged = int64_t(L) * sw;
  return ld >= L ? int64_t(L) * rbm : (tile > staged ? tile : staged);
}

// Shared memory of the T = 1 replay kernel, in floats (stages first: 16-byte
// aligned). rbm = nh·vt rows, np rows per thread, dt_floats: replay1_dt_floats.
struct Replay1Layout {
  int64_t stg, bar, kv, kr, qv, uk, uq, e0v, gs, dt, dk, dq, co, eu, e0, beta, misc, vs, hq, total;
};
// bulk_floats > 0 (the bulk-copy stream, BULK kernels): the stages are
// bulk_floats (stages × sweep) and four mbarriers follow.
__host__ __device__ inline Replay1Layout replay1_layout(bool kda, int K, int L, int nh, int rbm, int64_t dt_floats,
                                                        int nch, int np, int64_t bulk_floats = 0) {
  Replay1Layout l{};
  int64_t o = 0;
  const int64_t L1 = int64_t(L) + 1;
  l.stg = o; o += bulk_floats > 0 ? bulk_floats : stage_floats(nch, np, REPLAY1_THREADS, kda ? REPLAY1_KDA_CHUNKS : 16);
  l.bar = o; o += bulk_floats > 0 ? 2 * R1B_MAX_STAGES : 0;
  l.kv = o; o += align4(L1 * K);
  l.kr = o; o += align4(K);
  l.qv = o; o += align4(K);
  l.uk = o; o += kda ? align4(K) : 0;
  l.uq = o; o += kda ? align4(K) : 0;
  l.e0v = o; o += kda ? align4(K) : 0;
  l.gs = o; o += align4(L1 * (kda ? K : nh));
  l.dt = o; o += align4(dt_floats);
  l.dk = o; o += align4(L);
  l.dq = o; o += align4(L);
  l.co = o; o += kda ? 0 : align4(int64_t(nh) * L);
  l.eu = o; o += align4(nh);
  l.e0 = o; o += align4(nh);
  l.beta = o; o += align4(nh);
  l.misc = o; o += 4;
  l.vs = o; o += align4(rbm);
  l.hq = o; o += align4(rbm);
  l.total = o;
  return l;
}

// Per-block timelines (builds with -DREPLAYSSM_R1_TIMING only; the macros are
// empty otherwise): a thread writes %globaltimer into 16 stamps per block of
// mapped host memory that the launcher dumps at exit to the file named by
// R1_TIMING (delta_launch.cu; scripts/r1_timeline.py reads it, the stamps
// are listed there; docs/perf_notes_delta.md, "timelines again; token and
// record loads in flight together"). Stamp 7 holds the SM and the plan.
#if defined(REPLAYSSM_R1_TIMING)
__device__ __forceinline__ size_t r1_block() {
  return blockIdx.x + size_t(gridDim.x) * (blockIdx.y + size_t(gridDim.y) * blockIdx.z);
}
__device__ __forceinline__ void r1_stamp(const ReplayArgs& a, int i, unsigned who = 0) {
  if (!a.timing || threadIdx.x != who) return;
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
  a.timing[r1_block() * 16 + i] = t;
}
__device__ __forceinline__ void r1_tag(const ReplayArgs& a, unsigned v) {
  if (!a.timing || threadIdx.x != 0) return;
  unsigned sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  a.timing[r1_block() * 16 + 7] = (unsigned long long)sm | ((unsigned long long)v << 32);
}
#define R1_STAMP(i) r1_stamp(a, i)
#define R1_STAMPW(i, w) r1_stamp(a, i, w)
#define R1_TAG(v) r1_tag(a, v)
#else
#define R1_STAMP(i)
#define R1_STAMPW(i, w)
#define R1_TAG(v)
#endif

// QF != QF_NONE: the state is a packed fp8 / nvfp4 read copy (dual pools),
// staged as codes and scales (QStage) and decoded into Row<bf16>'s layout;
// with BULK the codes and scales arrive by bulk copies and a lane decodes
// its 16 values in phase 4.
// BULK: the state rows stream by bulk copies (delta_launch.cu::replay1_bulk_fits:
// K = 128, the block's rows contiguous and 16-byte aligned; with QF: the
// block's rows of each head with their scales, replay1_qbulk_fits).
// LR (bulk streams only): a.ld may be below L (long rings, replay1_dt_floats);
// without it the kernel holds all L d records (a.ld is not read), and its
// machine code is that of the kernel before long rings were split.
template <DType SD, bool KDA, int QF = QF_NONE, bool BULK = false, bool LR = false>
__global__ void __launch_bounds__(REPLAY1_THREADS, KDA                       ? REPLAY1_KDA_MIN_BLOCKS
                                                   : BULK && QF != QF_NONE ? REPLAY1_QB_MIN_BLOCKS
                                                                           : REPLAY1_MIN_BLOCKS)
    delta_replay1_kernel(ReplayArgs a) {
  static_assert(!LR || BULK, "split d records: bulk streams only");
  constexpr bool QB = BULK && QF != QF_NONE;  // bulk stream of a packed copy
  constexpr int CHUNKS = KDA ? REPLAY1_KDA_CHUNKS : 16;
  using RW = Row<QF == QF_NONE ? SD : DType::bf16>;
  using ST = std::conditional_t<QF == QF_NONE, Stage<SD, CHUNKS>, QStage<QF, CHUNKS>>;
  using TS = std::conditional_t<QF == QF_NONE, typename RW::TS, uint8_t>;
  constexpr int P = ST::P;
  extern __shared__ float4 smem4[];
  float* sm = reinterpret_cast<float*>(smem4);
  const TokenArgs& in = a.in;
  const Rings& rg = a.rings;
  // The bulk streams are K = 128 only (delta_launch.cu replay1_bulk_fits,
  // replay1_qbulk_fits): K and the lanes per row as constants there.
  const int K = BULK ? R1B_K : in.K, V = in.V, lpr = BULK ? R1B_K / LANE_ELEMS : a.lpr, R = rg.R, L = rg.L;
  const int b = blockIdx.z, kh = blockIdx.y;
  const int hgroup = div_small(blockIdx.x, a.vtiles), vtile = blockIdx.x - hgroup * a.vtiles;
  const int nh = a.nh;
  const int hv0 = kh * in.G + hgroup * nh;
  const int v0 = vtile * a.vt;
  const int vt = min(a.vt, V - v0);
  const int RB = nh * vt, RBM = nh * a.vt;
  const int tid = threadIdx.x, warp = tid >> 5, lane32 = tid & 31, nwarps = blockDim.x >> 5;
  const int nthr = blockDim.x;
  const int lsh = __ffs(lpr) - 1;  // lpr is a power of two (lanes_per_row)
  const int grp = tid >> lsh, lane = tid & (lpr - 1), rpp = nthr >> lsh;
  const int np = div_small(RBM + rpp - 1, rpp);  // uniform over the grid (stage sizing)
  const bool reporter = tid == 0 && blockIdx.x == 0 && kh == 0;

  R1_STAMP(0);
  const int64_t s = idx_at(a.slot, b);
  if (s == a.pad) {
    for (int x = tid; x < RB; x += nthr) {
      const int h = div_small(x, vt);
      out_at(in.o, b, 0, hv0 + h, v0 + x - h * vt, 0.f);
    }
    return;
  }
  if (s < 0 || s >= a.S) {
    if (reporter) cuda_util::report(a.status, STATUS_BAD_SLOT);
    return;
  }
  R1_STAMP(1);
  TS* const state = static_cast<TS*>(a.st.p) + s * a.st.s0;
  // bulk stream: sweeps of SW rows (ROWB bytes each) of the block's rows
  // (contiguous from BASE), NST stages of SWB bytes; QB: sweep k = the vt
  // rows of value head hv0 + k (codes, then scales, then the tensor scale)
  constexpr int ROWB = QF == QF_NVFP4 ? R1B_K / 2 : R1B_K * int(sizeof(TS));
  const int SW = QB ? vt : r1b_sweep_rows(KDA, int(sizeof(TS)));
  const int64_t SWB = QB ? r1q_sweep_bytes(QF == QF_NVFP4, a.vt, a.qg.scale_row_bytes) : int64_t(SW) * ROWB;
  const int nsw = !BULK ? 0 : QB ? nh : (RB + SW - 1) / SW;
  const int NST = !BULK ? 1 : QB ? r1q_stages(SWB, nh) : r1b_stages(KDA, int(sizeof(TS)), RBM);
  const int64_t bulk_floats = !BULK ? 0
                              : QB  ? r1q_stage_floats(SWB, nh)
                                    : r1b_stage_floats(KDA, int(sizeof(TS)), RBM);
  // d records in shared memory (replay1_dt_floats): LD of them; a flush of
  // more stages its weights per sweep of SWF rows (bulk f32 / bf16 / f16) in
  // DT (GDN) or in the gates' region GS (KDA: [L+1][K] ≥ [L][SW], free after
  // phase 2)
  const int LD = LR ? a.ld : L;
  const int SWF = BULK && !QB && !KDA ? SW : 0;
  const Replay1Layout lay = replay1_layout(KDA, K, L, nh, RBM, replay1_dt_floats(L, LD, RBM, SWF), ST::NCH, np, bulk_floats);
  uint4* STG = reinterpret_cast<uint4*>(sm + lay.stg);
  uint64_t* BAR = reinterpret_cast<uint64_t*>(sm + lay.bar);
  TS* const BASE = state + int64_t(hv0) * a.st.s1 + int64_t(v0) * a.st.s2;  // BULK: row r at BASE + r·K
  auto issue_sweep = [&](int k, int st) {  // st = k % NST
    char* const dst = reinterpret_cast<char*>(STG) + st * SWB;
    if constexpr (QB) {
      const uint8_t* tile = reinterpret_cast<const uint8_t*>(state) + int64_t(hv0 + k) * a.st.s1;
      const uint32_t cb = uint32_t(vt * ROWB), sb = uint32_t(vt * a.qg.scale_row_bytes);
      cuda_util::mbar_arrive_expect_tx(BAR + st, uint32_t(SWB));  // (vt = a.vt: replay1_qbulk_fits)
      cuda_util::bulk_g2s(dst, tile + int64_t(v0) * ROWB, cb, BAR + st);
      cuda_util::bulk_g2s(dst + cb, tile + a.qg.scale_offset + v0 * a.qg.scale_row_bytes, sb, BAR + st);
      if (QF == QF_NVFP4) cuda_util::bulk_g2s(dst + cb + sb, tile + a.qg.tensor_scale_offset, 16u, BAR + st);
    } else {
      const int r0 = k * SW, nr = min(SW, RB - r0);
      cuda_util::mbar_arrive_expect_tx(BAR + st, uint32_t(nr) * ROWB);
      // evict_first with the records' prefetch (below): the stream's lines
      // leave L2 before the prefetched records of the blocks to come
      cuda_util::bulk_g2s(dst, BASE + int64_t(r0) * R1B_K, uint32_t(nr) * ROWB, BAR + st,
                          a.rec_pf > 0 ? cuda_util::l2_policy_evict_first() : cuda_util::l2_policy_evict_normal());
    }
  };
  // The first rows / sweeps: as soon as the slot is known, except for the
  // GDN bulk stream (thread 0 issues them in phase 1, after its record loads:
  // B = 256, HV64 fp32 383 → 360 µs; only from batch 32 on, batch 1 keeps
  // the early sweeps, 11.8 → 11.1 µs; KDA, whose blocks are a quarter of the
  // size, lost 5 % with it, perf_notes_delta.md, "where a T = 1 block's time
  // goes; late first sweeps" and "records prefetched into L2 half a resident
  // grid ahead") and dual pools (after the plan, below).
  const bool LATE = BULK && !KDA && a.late_first;  // batch >= 32 (delta_launch.cu)
  // early exits: no copy outlives the block
  auto drain = [&]() {
    if (a.dual || LATE) return;
    if constexpr (BULK) {
      __syncthreads();  // barriers initialised
      for (int k = 0; k < min(NST, nsw); ++k) cuda_util::mbar_wait(BAR + k, 0);
    } else {
      cp_async_wait_all();
    }
  };
  // Row (value head hv0 + hl, v0 + vl) into stage pi, and read back.
  auto issue_row = [&](int pi, int hl, int vl) {
    const TS* tile = state + int64_t(hv0 + hl) * a.st.s1;
    if constexpr (QF == QF_NONE) {
      ST::issue(STG, nthr, pi, tile + int64_t(v0 + vl) * a.st.s2, lane, lpr, K);
    } else {
      const int64_t v = v0 + vl;
      ST::issue(STG, nthr, pi, tile + v * a.st.s2, tile + a.qg.scale_offset + v * a.qg.scale_row_bytes,
                tile + a.qg.tensor_scale_offset, lane, lpr, K);
    }
  };
  auto read_row = [&](RW& r, int pi, int vl) {
    if constexpr (QF == QF_NONE) ST::read(r, STG, nthr, pi, lane, lpr, K);
    else ST::read(r, STG, nthr, pi, lane, lpr, K, int64_t(v0 + vl) * a.qg.scale_row_bytes);
  };
  auto issue_first = [&]() {
    if constexpr (BULK) {
      if (tid == 0) {
        for (int k = 0; k < NST; ++k) cuda_util::mbar_init(BAR + k, 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        for (int k = 0; k < min(NST, nsw); ++k) issue_sweep(k, k);
      }
    } else {
#pragma unroll
      for (int pi = 0; pi < P; ++pi) {
        const int rr = pi * rpp + grp;
        if (pi < np && rr < RB) {
          const int h = div_small(rr, vt);
          issue_row(pi, h, rr - h * vt);
        }
        cp_async_commit();
      }
    }
  };
  // Dual pools: a row whose plan flushes reads the copy that the dual fold
  // (the kernel this launch depends on programmatically, delta_launch.cu)
  // repacks, so the first sweeps wait for the plan; every other row's copy is
  // untouched by the fold.
  if (!LATE && !a.dual) issue_first();

  RingCursor c = cursor_at(rg, s);
  if (!cursor_ok(rg, c)) {
    drain();
    if (reporter) cuda_util::report(a.status, STATUS_RING_OVERFLOW);
    return;
  }
  if (a.acc.p) {
    if (!ring_commit(c, int32_t(idx_at(a.acc, b)))) {
      drain();
      if (reporter) cuda_util::report(a.status, STATUS_BAD_ACCEPTED);
      return;
    }
  } else if (c.pending != 0) {
    drain();
    if (reporter) cuda_util::report(a.status, STATUS_UNCOMMITTED);
    return;
  }
  StepPlan p = ring_plan_step(c, 1, L, R);
  R1_STAMP(2);
  R1_TAG(unsigned(p.flush) | (unsigned(p.flush ? p.fold_count : p.hist_count) << 1));
  if (a.dual) {
    // A flushing row was folded by the fold kernel: wait for it to complete
    // (a no-op without a programmatic prerequisite); then the token reads the
    // fresh copy with no history.
    if (p.flush) asm volatile("griddepcontrol.wait;" ::: "memory");
    p.flush = false;
    issue_first();
  }
  const bool flush = p.flush;
  const int n_old = flush ? p.fold_count : p.hist_count;
  const int old_start = flush ? p.fold_start : p.hist_start;
  const int64_t apos = p.append_start;
  // Records of DT (the rest from global memory); a wide flush (more than LD
  // records) stages its weights per sweep (phase 4), so it loads none here.
  const bool wide = LR && flush && n_old > LD;
  const int nd = !LR ? n_old : wide ? 0 : min(n_old, LD);

  float* KV = sm + lay.kv;    // [L+1][K] k̂_j of the old records, then k̂ of the token (KDA: c_j ⊙ k̂_j)
  float* QV = sm + lay.qv;    // [K] q̂
  float* UK = sm + lay.uk;    // KDA [K] e^{Λ_m} ⊙ k̂
  float* UQ = sm + lay.uq;    // KDA [K] e^{Λ_m} ⊙ q̂
  float* E0V = sm + lay.e0v;  // KDA [K] flush decay e^{Λ_h}
  float* GS = sm + lay.gs;    // GDN [nh][L+1], KDA [L+1][K] gates
  float* DT = sm + lay.dt;    // [LD][RBM] d of the old records (flush GDN: times c_j)
  float* const WS = KDA ? GS : DT;  // a wide flush's weights of one sweep, [L][SW]
  float* DK = sm + lay.dk;    // [L] (k̂_j·k̂) (KDA: W_{k,j})
  float* DQ = sm + lay.dq;    // [L] (k̂_j·q̂) (KDA: W_{q,j})
  float* CO = sm + lay.co;    // GDN [nh][L] c_j
  float* EU = sm + lay.eu;    // GDN [nh] decay of S_0 in the outputs
  float* E0 = sm + lay.e0;    // GDN [nh] flush decay
  float* BETA = sm + lay.beta;
  float* MISC = sm + lay.misc;  // {k̂·q̂}
  float* VS = sm + lay.vs;    // [RBM] v, then β (v − h_k)
  float* HQ = sm + lay.hq;    // [RBM] h_q

  // Phase 1: loads that need only the cursor. Every thread first issues all
  // its record loads (kept in registers), then warp 0 prepares the token while
  // they are in flight, then they are stored. Records are read 4 elements at a
  // time: thread ↔ (a column of 4 elements, records j0, j0 + js, ...), so the
  // addresses need no divisions.
  auto pos_of = [&](int j) { return int64_t(ring_pos_near(old_start, j, R)); };
  auto k_off = [&](int j) { return s * rg.k0 + pos_of(j) * rg.k1 + int64_t(kh) * rg.k2; };
  auto ks_at = [&](int j) { return rg.ks[s * rg.ks0 + pos_of(j) * rg.ks1 + int64_t(kh) * rg.ks2]; };
  auto d_off = [&](int j, int hl, int v) {
    return s * rg.d0 + pos_of(j) * rg.d1 + int64_t(hv0 + hl) * rg.d2 + v0 + v;
  };
  auto g_off = [&](int j, int hl) {  // gate record j of value head hv0 + hl
    return s * rg.g0 + pos_of(j) * rg.g1 + int64_t(hv0 + hl) * rg.g2;
  };
  const bool g_writer = vtile == 0;
  constexpr int UD = KDA ? 2 : 8, UR = 2, UV = 2;
  const int vt4 = vt / 4, nq = nh * vt4, K4 = K / 4;
  // d records: column cq = 4 rows (head hd, rows vd..vd+3).
  const bool dv4 = a.d_vec && nq <= nthr;
  const int jd0 = dv4 ? div_small(tid, nq) : 0, jds = dv4 ? div_small(nthr, nq) : 1, cq = dv4 ? tid - jd0 * nq : 0;
  const bool dact = dv4 && tid < jds * nq;
  const int hd = dv4 ? div_small(cq, vt4) : 0, vd = dv4 ? (cq - hd * vt4) * 4 : 0;
  const int64_t dbase = s * rg.d0 + int64_t(hv0 + hd) * rg.d2 + v0 + vd;
  uint4 dr[UD];  // raw: widened at the stores below
#pragma unroll
  for (int u = 0; u < UD; ++u) {
    const int j = jd0 + u * jds;
    if (dact && j < nd) dr[u] = load4_bits(rg.d, rg.d_dt, dbase + pos_of(j) * rg.d1);
  }
  // Old keys (and KDA gates): column ck = 4 key channels.
  const bool kv4 = a.k_vec, gv4 = KDA && a.g_vec;
  const int jk0 = div_small(tid, K4), jks = div_small(nthr, K4), ck = tid - jk0 * K4;
  const bool kact = tid < jks * K4;
  const int64_t kbase = s * rg.k0 + int64_t(kh) * rg.k2 + ck * 4;
  const int64_t gbase = s * rg.g0 + int64_t(hv0) * rg.g2 + ck * 4;
  uint4 kr[UR];  // raw, as dr
  float4 gr[UR];
  float ksr[UR];
#pragma unroll
  for (int u = 0; u < UR; ++u) {
    const int j = jk0 + u * jks;
    if (kact && j < n_old) {
      if (kv4) {
        kr[u] = load4_bits(rg.k, rg.k_dt, kbase + pos_of(j) * rg.k1);
        ksr[u] = ks_at(j);
      }
      if (gv4) gr[u] = *reinterpret_cast<const float4*>(rg.g + gbase + pos_of(j) * rg.g1);
    }
  }
  uint32_t vr[UV];  // raw
#pragma unroll
  for (int u = 0; u < UV; ++u) {
    const int rr = tid + u * nthr;
    if (rr < RB) {
      const int h = div_small(rr, vt);
      vr[u] = act_bits(in.v, b, 0, hv0 + h, v0 + rr - h * vt);
    }
  }
  float og = 0.f;  // GDN old gate (head tid / n_old, record tid % n_old)
  if (!KDA && tid < nh * n_old) {
    const int h = div_small(tid, n_old);
    og = rg.g[g_off(tid - h * n_old, h)];
  }

  // The token: warp 0 prepares q̂, k̂ (and appends k); the others its gates and β.
  float* KR = sm + lay.kr;  // [K] raw k of the token
  if (warp == 0) {
    float ks, kq;
    if (LATE && !a.dual) issue_first();  // (thread 0)
    R1_STAMP(8);
    warp_prep_qk(in, b, 0, kh, KV + int64_t(n_old) * K, QV, ks, kq, KR);
    R1_STAMP(9);
    if (lane32 == 0) MISC[0] = kq;
    if (blockIdx.x == 0) {  // one writer of the key head's record
      __syncwarp();
      const int64_t ko = s * rg.k0 + apos * rg.k1 + int64_t(kh) * rg.k2;
      for (int i = lane32; i < K; i += 32) store_any(rg.k, rg.k_dt, ko + i, KR[i]);
      if (lane32 == 0) rg.ks[s * rg.ks0 + apos * rg.ks1 + int64_t(kh) * rg.ks2] = ks;
    }
    R1_STAMP(10);
  } else {
    const int me = tid - 32, nt = nthr - 32;
    // β of head me (raw) issued with the gates' loads, used after them
    const uint32_t bb = me < nh ? act_bits(in.beta, b, 0, hv0 + me) : 0u;
    R1_STAMPW(11, 32);
    if (!KDA) {
      for (int x = me; x < nh; x += nt) {
        const float g = gate_at(in, false, b, 0, hv0 + x, 0);
        if (g_writer) rg.g[s * rg.g0 + apos * rg.g1 + int64_t(hv0 + x) * rg.g2] = g;
        GS[x * (L + 1) + n_old] = g;
      }
    } else {
      for (int k = me; k < K; k += nt) {
        const float g = gate_at(in, true, b, 0, hv0, k);
        if (g_writer) rg.g[s * rg.g0 + apos * rg.g1 + int64_t(hv0) * rg.g2 + k] = g;
        GS[n_old * K + k] = g;
      }
    }
    for (int x = me; x < nh; x += nt) {
      const float be = x == me ? beta_of(in, bb) : beta_at(in, b, 0, hv0 + x);
      BETA[x] = be;
      if (a.dual && g_writer)
        static_cast<float*>(a.ring_beta.p)[s * a.ring_beta.s0 + apos * a.ring_beta.s1 + int64_t(hv0 + x) * a.ring_beta.s2] = be;
    }
  }

  R1_STAMPW(12, 32);
  // The last warp, after its record stores (below): L2 prefetch of the item
  // a.rec_pf ahead in grid order (x fastest, then key head, then row). Its
  // slot → cursor chain issued while its record loads were in flight waited
  // for them too (GDN bf16 B = 256 277 → 267 µs with it after the stores;
  // docs/perf_notes_delta.md, "the remaining loads that waited one at a time").
  auto prefetch_ahead = [&]() {  // (not for packed copies: dual steps leave rec_pf 0)
    if (!QB && a.rec_pf > 0 && warp == nwarps - 1) prefetch_block_ahead<KDA, !KDA>(a, 1, lane32);  // (KDA: the last lane; kernel_common.cuh)
  };

  R1_STAMPW(13, nthr - 32);
  // Stores (and the items past the registers: long rings, large tiles).
  float* const dcol = DT + hd * vt + vd;
#pragma unroll
  for (int u = 0; u < UD; ++u) {
    const int j = jd0 + u * jds;
    if (dact && j < nd) store4(dcol + j * RBM, widen4(dr[u], rg.d_dt));
  }
  if (dact)
    for (int j = jd0 + UD * jds; j < nd; j += jds) store4(dcol + j * RBM, load4_any(rg.d, rg.d_dt, dbase + pos_of(j) * rg.d1));
#pragma unroll
  for (int u = 0; u < UR; ++u) {
    const int j = jk0 + u * jks;
    if (kact && j < n_old) {
      if (kv4) {
        const float4 k = widen4(kr[u], rg.k_dt);
        const float ks = ksr[u];
        store4(KV + j * K + ck * 4, make_float4(k.x * ks, k.y * ks, k.z * ks, k.w * ks));
      }
      if (gv4) store4(GS + j * K + ck * 4, gr[u]);
    }
  }
  if (kact) {
    for (int j = jk0 + UR * jks; j < n_old; j += jks) {
      if (kv4) {
        const float4 k = load4_any(rg.k, rg.k_dt, kbase + pos_of(j) * rg.k1);
        const float ks = ks_at(j);
        store4(KV + j * K + ck * 4, make_float4(k.x * ks, k.y * ks, k.z * ks, k.w * ks));
      }
      if (gv4) store4(GS + j * K + ck * 4, *reinterpret_cast<const float4*>(rg.g + gbase + pos_of(j) * rg.g1));
    }
  }
#pragma unroll
  for (int u = 0; u < UV; ++u) {
    const int rr = tid + u * nthr;
    if (rr < RB) VS[rr] = widen_bits(vr[u], in.v.dt);
  }
  for (int rr = tid + UV * nthr; rr < RB; rr += nthr) VS[rr] = act_at(in.v, b, 0, hv0 + rr / vt, v0 + rr % vt);
  if (!KDA) {
    if (tid < nh * n_old) {
      const int h = div_small(tid, n_old);
      GS[h * (L + 1) + tid - h * n_old] = og;
    }
    for (int x = tid + nthr; x < nh * n_old; x += nthr) GS[(x / n_old) * (L + 1) + x % n_old] = rg.g[g_off(x % n_old, x / n_old)];
  }
  // Records not aligned to 4 elements (or tiles wider than the block).
  if (!kv4)
    for (int x = tid; x < n_old * K; x += nthr) KV[x] = load_any(rg.k, rg.k_dt, k_off(x / K) + x % K) * ks_at(x / K);
  if (!dv4)
    for (int x = tid; x < nd * RB; x += nthr)
      DT[(x / RB) * RBM + x % RB] = load_any(rg.d, rg.d_dt, d_off(x / RB, (x % RB) / vt, (x % RB) % vt));
  if (KDA && !gv4)
    for (int x = tid; x < n_old * K; x += nthr) GS[x] = rg.g[g_off(x / K, 0) + x % K];
  prefetch_ahead();
  R1_STAMP(14);
  R1_STAMPW(15, 64);
  __syncthreads();
  R1_STAMP(3);
  if (a.dual)  // v_j as it arrived (VS holds it until phase 3)
    for (int rr = tid; rr < RB; rr += nthr)
      store_any(a.ring_v.p, a.ring_v.dt,
                s * a.ring_v.s0 + apos * a.ring_v.s1 + int64_t(hv0 + rr / vt) * a.ring_v.s2 + v0 + rr % vt, VS[rr]);

  // Weight of record j in row rr (block row) from global memory: d_j (GDN:
  // times c_j, as DT after phase 3), for records past DT (after phase 2).
  auto fold_w = [&](auto j, int rr) {  // (generic: instantiated by the LR paths only)
    const int h = div_small(rr, vt);
    const float d = load_any(rg.d, rg.d_dt, d_off(j, h, rr - h * vt));
    return KDA ? d : d * CO[h * L + j];
  };

  // Phases 2 and 3 as a lambda called once: the KDA bf16 kernel's 52 B of
  // spills go (B = 256 296.6 → 273.9 µs, perf_notes_delta.md, "records
  // prefetched into L2 half a resident grid ahead").
  auto phases23 = [&]() {
    // The products k̂_j·k̂ and k̂_j·q̂ of the old records with the token (no
    // flush; KDA: of the decayed keys), a warp per record.
    auto key_products = [&]() {
      if (flush) return;
      const float* kt = KV + int64_t(n_old) * K;
      for (int j = warp; j < n_old; j += nwarps) {
        float dk = 0.f, dq = 0.f;
        for (int i = lane32; i < K; i += 32) {
          const float kj = KV[j * K + i];
          dk += kj * kt[i];
          dq += kj * QV[i];
        }
        dk = warp_sum(dk);
        dq = warp_sum(dq);
        if (lane32 == 0) {
          DK[j] = dk;
          DQ[j] = dq;
        }
      }
    };
    // Phase 2: decays c_j by suffix sums of the gates (no difference of large
    // prefix sums), from the token's gate (no flush) or the new checkpoint
    // (flush); GDN also the key products (independent of the decays).
    if (!KDA) {
      // c_j = e^{t + Σ_{j<i<m} g_i} (t: the token's gate, 0 on a flush): one
      // warp per head, a suffix scan over the lanes (m < 32 records; longer
      // histories: one lane's serial chain)
      for (int hl = warp; hl < nh; hl += nwarps) {
        const float* g = GS + hl * (L + 1);
        const float tok = flush ? 0.f : g[n_old];
        const float all = gdn_suffix_decays(g, tok, n_old, CO + hl * L, lane32);
        if (lane32 == 0) {
          if (flush) {
            E0[hl] = expf(all);
            EU[hl] = expf(g[n_old]);
          } else {
            EU[hl] = expf(n_old > 0 ? all : tok);
          }
        }
      }
      key_products();
    } else {
      for (int k = tid; k < K; k += nthr) {
        float suf = flush ? 0.f : GS[n_old * K + k];
        for (int j = n_old - 1; j >= 0; --j) {
          KV[j * K + k] *= expf(suf);
          suf += GS[j * K + k];
        }
        const float e = expf(suf), eu = flush ? expf(GS[n_old * K + k]) : e;
        if (flush) E0V[k] = e;
        UK[k] = eu * KV[n_old * K + k];
        UQ[k] = eu * QV[k];
      }
      __syncthreads();
      key_products();
    }
    __syncthreads();

    // Phase 3: per row, the history terms (no flush) or the fold weights of
    // the d's (GDN flush: d_j c_j).
    // GDN: rows rr and rr + nthr together (two independent chains per thread;
    // KDA, at its 80-register cap, one row at a time).
    for (int r0 = tid; r0 < RB; r0 += (KDA ? 1 : 2) * nthr) {
      const int r1 = r0 + nthr;
      const bool two = !KDA && r1 < RB;
      const int h0 = div_small(r0, vt), h1 = two ? div_small(r1, vt) : h0;
      float hk0 = 0.f, hq0 = 0.f, hk1 = 0.f, hq1 = 0.f;
      if (flush) {
        if (!KDA)
          for (int j = 0; j < nd; ++j) {
            DT[j * RBM + r0] *= CO[h0 * L + j];
            if (two) DT[j * RBM + r1] *= CO[h1 * L + j];
          }
      } else {
#pragma unroll 4
        for (int j = 0; j < nd; ++j) {
          const float dk = DK[j], dq = DQ[j];
          const float w0 = KDA ? DT[j * RBM + r0] : DT[j * RBM + r0] * CO[h0 * L + j];
          const float w1 = !two ? 0.f : KDA ? DT[j * RBM + r1] : DT[j * RBM + r1] * CO[h1 * L + j];
          hk0 += w0 * dk;
          hq0 += w0 * dq;
          hk1 += w1 * dk;
          hq1 += w1 * dq;
        }
      }
      // records past DT (a.ld < L, no flush): finished by the chunks below
      bool tail = false;
      if constexpr (LR) tail = !flush && n_old > nd;
      VS[r0] = tail ? VS[r0] - hk0 : BETA[h0] * (VS[r0] - hk0);
      HQ[r0] = hq0;
      if (two) {
        VS[r1] = tail ? VS[r1] - hk1 : BETA[h1] * (VS[r1] - hk1);
        HQ[r1] = hq1;
      }
    }
    if constexpr (LR) if (!flush && n_old > nd) {
      // Records nd.. in chunks of LD through DT: each chunk one round trip
      // (L2: the block ahead prefetched them) in phase 1's layout, then the
      // same terms row by row; VS holds v − Σ hk until the last chunk.
      for (int jb = nd; jb < n_old; jb += LD) {
        const int nj = min(LD, n_old - jb);
        __syncthreads();  // the previous chunk's reads of DT are done
        if (dv4) {
          float4 t[UD];
#pragma unroll
          for (int u = 0; u < UD; ++u) {
            const int j = jd0 + u * jds;
            if (dact && j < nj) t[u] = load4_any(rg.d, rg.d_dt, dbase + pos_of(jb + j) * rg.d1);
          }
#pragma unroll
          for (int u = 0; u < UD; ++u) {
            const int j = jd0 + u * jds;
            if (dact && j < nj) store4(dcol + j * RBM, t[u]);
          }
          if (dact)
            for (int j = jd0 + UD * jds; j < nj; j += jds)
              store4(dcol + j * RBM, load4_any(rg.d, rg.d_dt, dbase + pos_of(jb + j) * rg.d1));
        } else {
          for (int x = tid; x < nj * RB; x += nthr)
            DT[(x / RB) * RBM + x % RB] = load_any(rg.d, rg.d_dt, d_off(jb + x / RB, (x % RB) / vt, (x % RB) % vt));
        }
        __syncthreads();
        const bool last = jb + nj == n_old;
        for (int r = tid; r < RB; r += nthr) {
          const int h = div_small(r, vt);
          float hk = 0.f, hq = 0.f;
#pragma unroll 4
          for (int j = 0; j < nj; ++j) {
            const float w = KDA ? DT[j * RBM + r] : DT[j * RBM + r] * CO[h * L + jb + j];
            hk += w * DK[jb + j];
            hq += w * DQ[jb + j];
          }
          VS[r] = last ? BETA[h] * (VS[r] - hk) : VS[r] - hk;
          HQ[r] += hq;
        }
      }
    }
    __syncthreads();
  };
  phases23();
  R1_STAMP(4);

  if constexpr (QB && !KDA) {
    // Phase 4, GDN fp8 / nvfp4 copy, on tensor cores (fp8_tc_operands above):
    // sweep k = value head hv0 + k. B = 256, L = 16: 379.5 → 369.7 µs per dual
    // fp8 step (perf_notes_delta.md, "the GDN fp8 copy's sweep on tensor
    // cores"; nvfp4: v59); KDA blocks (one head, one sweep) lost 2.4 % with it
    // (the per-block setup of B).
    static_assert(REPLAY1_THREADS / 32 * 16 == R1Q_MAX_ROWS, "packed copy: one 16-row tile per warp");
    const int g = lane32 >> 2, t = lane32 & 3;
    Fp8TcB bo;
    fp8_tc_operands<QF == QF_NVFP4>(QV, KV + int64_t(n_old) * K, true, lane32, bo);
    const float kq = MISC[0];
    const int64_t d_base = s * rg.d0 + apos * rg.d1 + v0;
    const int64_t o_base = int64_t(b) * in.o.sb + v0;
    const int srb = int(a.qg.scale_row_bytes);
    const int ra = min(16 * warp + g, vt - 1), rb = min(16 * warp + g + 8, vt - 1);
    cuda_util::StageCursor stc;  // the sweep's stage and its mbarrier phase
    for (int k = 0; k < nsw; ++k, stc.next(NST)) {
      const int st = stc.slot;
      cuda_util::mbar_wait(BAR + st, stc.phase);
      // the rows into registers and their products; then the stage is
      // refilled (sweep k + NST) while the sums are formed
      [[maybe_unused]] Fp8TcRows x8;
      [[maybe_unused]] Nv4TcRows x4;
      [[maybe_unused]] float dh8[4] = {0.f, 0.f, 0.f, 0.f}, dl8[4] = {0.f, 0.f, 0.f, 0.f};
      [[maybe_unused]] float dh4[2][4] = {}, dl4[2][4] = {};
      if constexpr (QF == QF_FP8) {
        fp8_tc_load(reinterpret_cast<const char*>(STG) + st * SWB, ra, rb, vt, srb, t, x8);
        fp8_tc_mma(x8, bo, dh8, dl8);
      } else {
        nv4_tc_load(reinterpret_cast<const char*>(STG) + st * SWB, ra, rb, vt, srb, t, x4);
        nv4_tc_mma(x4, bo, dh4, dl4);
      }
      __syncthreads();  // stage k % NST read: refill it with sweep k + NST
      if (tid == 0 && k + NST < nsw) {
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        issue_sweep(k + NST, st);
      }
      float aq, ak;
      if constexpr (QF == QF_FP8) fp8_tc_sums(dh8, dl8, x8, bo, t, aq, ak);
      else nv4_tc_sums(dh4, dl4, x4, bo, t, aq, ak);
      const int rl = 16 * warp + g + 4 * t;  // t = 0: row g (q, k), t = 2: row g + 8
      if (!(t & 1) && rl < vt) {
        const int64_t hv = hv0 + k;
        const float e = EU[k];
        const int r = k * vt + rl;
        const float dr = round_to(rg.d_dt, VS[r] - BETA[k] * e * ak);
        store_any(rg.d, rg.d_dt, d_base + hv * rg.d2 + rl, dr);
        store_any(in.o.p, in.o.dt, o_base + hv * in.o.sh + rl, e * aq + HQ[r] + kq * dr);
      }
    }
    return;
  }
  if constexpr (BULK) {
    // Phase 4 (bulk): sweep k's rows from stage k % NST; warp w takes rows
    // k·SW + w·BR + u·RPL + sub (u < RQ), lane lr the columns lr·E .. lr·E+E−1
    // (LB bytes of the row).
    constexpr int E = QB ? 16 : 16 / int(sizeof(TS)), LPB = R1B_K / E, RPL = 32 / LPB;
    constexpr int RQ = QB ? R1Q_RQ : r1b_rq(KDA), BR = RQ * RPL, LB = ROWB / LPB;
    static_assert(!QB || R1Q_MAX_ROWS == (REPLAY1_THREADS / 32) * BR, "packed copy: a sweep of up to 128 rows");
    constexpr int FG = QB ? 1 : KDA ? 2 : 4;  // rows per load group (a flush folds them together)
    static_assert(RQ % FG == 0, "whole row groups");
    const int lr = lane32 & (LPB - 1), sub = lane32 / LPB;
    const float kq = MISC[0];
    const float* const ukp = KDA ? UK : KV + int64_t(n_old) * K;
    const float* const uqp = KDA ? UQ : QV;
    float ukr[E], uqr[E], e0r[E];
#pragma unroll
    for (int e = 0; e < E; ++e) {
      ukr[e] = ukp[lr * E + e];
      uqr[e] = uqp[lr * E + e];
      e0r[e] = KDA && flush ? E0V[lr * E + e] : 0.f;
    }
    const int64_t d_base = s * rg.d0 + apos * rg.d1 + v0;
    const int64_t o_base = int64_t(b) * in.o.sb + v0;
    // Two copies of the sweeps: a wide flush (more records than DT holds)
    // stages its fold weights per sweep; the other copy keeps the registers
    // of the plain stream (inlined, the staging cost KDA bf16 16 B of spills).
    auto sweeps = [&](auto wide_c) {
      constexpr bool WIDE = decltype(wide_c)::value;
      cuda_util::StageCursor stc;  // the sweep's stage and its mbarrier phase
      for (int k = 0; k < nsw; ++k, stc.next(NST)) {
        const int st = stc.slot;
        if constexpr (WIDE) {  // the sweep's fold weights, all records: DT[j][row − k·SW]
          const int nr = min(SW, RB - k * SW);
          for (int x = tid; x < n_old * SW; x += nthr) {
            const int j = div_small(x, SW), r = x - j * SW;
            if (r < nr) WS[x] = fold_w(j, k * SW + r);
          }
          __syncthreads();  // (the previous sweep's reads ended at its barrier)
        }
        cuda_util::mbar_wait(BAR + st, stc.phase);
        if (k == 0) R1_STAMP(5);
        const int r0 = k * SW + warp * BR;
        const int rlim = QB ? (k + 1) * SW : RB;  // rows r < rlim are the sweep's
        const char* const sg = reinterpret_cast<const char*>(STG) + st * SWB;  // the stage
        const char* const sk = sg + (warp * BR + sub) * ROWB + lr * LB;
        [[maybe_unused]] const char* const sscale = sg + SW * ROWB;  // QB: the block scales of the sweep's rows
        float ak[RQ], aq[RQ];
        // FG rows at a time: a flush folds them with the records outer (each
        // k̂_j chunk read once for the FG rows)
#pragma unroll
        for (int u0 = 0; u0 < RQ; u0 += FG) {
          float f[FG][E];
          float qs[FG];  // QF_FP8: the rows' block scales 2^(e − 127), applied to the sums (exact)
#pragma unroll
          for (int i = 0; i < FG; ++i) {
            const int u = u0 + i, r = r0 + u * RPL + sub;
            const bool rv = r < rlim;
            qs[i] = 1.f;
            if constexpr (QF == QF_FP8) {  // (row r − k·SW of the sweep)
              const uint4 w = rv ? *reinterpret_cast<const uint4*>(sk + u * RPL * ROWB) : make_uint4(0u, 0u, 0u, 0u);
              const uint32_t eb = rv ? uint8_t(sscale[(r - k * SW) * a.qg.scale_row_bytes + (lr >> 1)]) : 127u;
              qs[i] = quant::dev::exp2i(int(eb) - 127);
              quant::dev::fp8x16_decode_unscaled(w, f[i]);
            } else if constexpr (QF == QF_NVFP4) {  // as QStage::read: (y · s) · t per value
              const uint2 w = rv ? *reinterpret_cast<const uint2*>(sk + u * RPL * ROWB) : make_uint2(0u, 0u);
              const float sf =
                  rv ? quant::dev::e4m3_decode(uint8_t(sscale[(r - k * SW) * a.qg.scale_row_bytes + lr])) : 0.f;
              quant::dev::nvfp4x16_decode(w, sf, *reinterpret_cast<const float*>(sscale + SW * a.qg.scale_row_bytes), f[i]);
            } else {
              const uint4 w = rv ? *reinterpret_cast<const uint4*>(sk + u * RPL * ROWB) : make_uint4(0u, 0u, 0u, 0u);
              const TS* x = reinterpret_cast<const TS*>(&w);
#pragma unroll
              for (int e = 0; e < E; ++e) f[i][e] = Traits<SD>::load(x[e]);
            }
          }
          if constexpr (!QB) if (flush) {  // fold first: S_h = e^{Λ_h} ⊙ S_0 + Σ_j (d_j c_j) k̂_jᵀ (KDA: c_j in KV)
            int rc[FG];
#pragma unroll
            for (int i = 0; i < FG; ++i) {
              rc[i] = min(r0 + (u0 + i) * RPL + sub, RB - 1);
              const float e0 = KDA ? 1.f : E0[div_small(rc[i], vt)];
#pragma unroll
              for (int e = 0; e < E; ++e) f[i][e] *= KDA ? e0r[e] : e0;
            }
            // DT row stride and first row: the block's records, or a wide flush's sweep
            const float* const wt = WIDE ? WS : DT;
            const int ds = WIDE ? SW : RBM, dr0 = WIDE ? k * SW : 0;
            for (int j = 0; j < n_old; ++j) {  // the same operations per element as one row at a time
              float w[FG];
#pragma unroll
              for (int i = 0; i < FG; ++i) w[i] = wt[j * ds + rc[i] - dr0];
              r1b_fold_record(f, w, KV + j * K + lr * E);
            }
            r1b_store_rows<SD>(f, BASE, r0, u0, RPL, sub, RB, lr * E);
          }
          r1b_row_dots(f, ukr, uqr, qs, ak + u0, aq + u0);
        }
        __syncthreads();  // stage k % NST read: refill it with sweep k + NST
        if (tid == 0 && k + NST < nsw) {
          asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
          issue_sweep(k + NST, st);
        }
        r1b_finish_rows<KDA, LPB>(ak, aq, lr, r0, RPL, sub, rlim, vt, hv0, EU, BETA, VS, HQ, kq, rg, in, d_base, o_base);
      }
    };
    if constexpr (QB || !LR) sweeps(std::false_type{});
    else if (wide) sweeps(std::true_type{});
    else sweeps(std::false_type{});
    R1_STAMP(6);
    return;
  }

  // Phase 4: stream the rows. Row rr = pi·rpp + grp is (value head hv0 + hl,
  // v0 + vl), advanced without divisions; the refill row (rr + P·rpp) likewise.
  const float kq = MISC[0];
  RW uk, uq;  // the two vectors every row is multiplied with, in registers
  uk.load_shared(KDA ? UK : KV + int64_t(n_old) * K, lane, lpr, K);
  uq.load_shared(KDA ? UQ : QV, lane, lpr, K);
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
  const int64_t d_base = s * rg.d0 + apos * rg.d1 + v0;
  const int64_t o_base = int64_t(b) * in.o.sb + v0;
  for (int pi = 0; pi < np; ++pi) {
    const int rr = pi * rpp + grp;
    const bool valid = hl < nh;
    const int hc = valid ? hl : 0, rc = valid ? rr : 0;
    cp_async_wait<P - 1>();
    RW cur;
    if (valid) read_row(cur, pi, vl);
    else cur.zero();
    if constexpr (QF == QF_NONE) {
      if (flush) {
        if (KDA) cur.scale(E0V, lane, lpr, K);
        else cur.scale(E0[hc]);
        for (int j = 0; j < n_old; ++j) cur.axpy(DT[j * RBM + rc], KV + j * K, lane, lpr, K);
        if (valid) cur.store(state + int64_t(hv0 + hl) * a.st.s1 + int64_t(v0 + vl) * a.st.s2, lane, lpr, K,
                             /*keep=*/true);
      }
    }
    float pk = cur.dot(uk);
    float pq = cur.dot(uq);
    {  // refill the stage just consumed
      const int pn = pi + P;
      if (pn < np && hn < nh)
        issue_row(pn, hn, vn);
      cp_async_commit();
      advance(hn, vn, rpp);
    }
    pk = group_sum(pk, lpr);
    pq = group_sum(pq, lpr);
    if (valid && lane == 0) {
      const int64_t hv = hv0 + hl;
      const float e = KDA ? 1.f : EU[hl];
      const float aq = e * pq + HQ[rr];
      const float dr = round_to(rg.d_dt, VS[rr] - BETA[hl] * e * pk);
      store_any(rg.d, rg.d_dt, d_base + hv * rg.d2 + vl, dr);
      store_any(in.o.p, in.o.dt, o_base + hv * in.o.sh + vl, aq + kq * dr);
    }
    advance(hl, vl, rpp);
  }
}

}  // namespace replayssm::delta::cuda_impl
