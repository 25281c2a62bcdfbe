// Device vocabulary of the delta kernels: index and input loads, gate
// activations, the L2-normalised q / k of one token, and state rows held in
// registers.
//
// Row layout: a state row (one value index v of one value head: K elements)
// is spread over LPR lanes of a warp (a "lane group"; LPR a power of two
// dividing 32). Lane l of the group holds chunks c = j*LPR + l, j < NCH, of
// VEC contiguous elements (one 16-byte vector of the state dtype each), so a
// lane holds NCH*VEC = 16 elements and K <= 16*LPR <= 512. Reductions over K
// are a partial sum per lane plus log2(LPR) xor-shuffles.
#pragma once
#include "core/ring.h"
#include "cuda/common.cuh"
#include "delta/heuristics.h"
#include "delta/params.h"

namespace replayssm::delta::cuda_impl {

using cuda_util::Traits;
using cuda_util::load_any;
using cuda_util::load_bits;
using cuda_util::widen_bits;
using cuda_util::store_any;
using cuda_util::warp_sum;

inline constexpr int ELEMS_PER_LANE = LANE_ELEMS;  // a lane's share of a state row (heuristics.h)
inline constexpr unsigned FULL_MASK = 0xffffffffu;

// A region of the block's shared memory at offset `off` (elements of *p) of
// a host-computed layout (layouts.h). Every layout offset is a multiple of
// A (four floats; ReplayLayout::bytes of 16 bytes), which the launch wrappers
// check (kernels.cuh check_layout); forming the pointer as p + A·(off / A)
// lets the compiler see the region's 16-byte alignment, as it did when the
// kernels computed their layouts (vector shared-memory accesses).
template <int A = 4, class T>
__device__ __forceinline__ T* at_aligned(T* p, int64_t off) {
  return p + int64_t(uint64_t(off) / A * A);  // offsets are >= 0: one AND
}

__device__ __forceinline__ int64_t idx_at(const Index& x, int64_t i, int64_t j = 0) {
  const int64_t o = i * x.s0 + j * x.s1;
  return x.dt == DType::i64 ? static_cast<const int64_t*>(x.p)[o]
                            : int64_t(static_cast<const int32_t*>(x.p)[o]);
}

__device__ __forceinline__ float act_at(const Act& a, int64_t b, int64_t t, int64_t h, int64_t i = 0) {
  return load_any(a.p, a.dt, b * a.sb + t * a.st + h * a.sh + i);
}
// act_at in two steps (load_bits / widen_bits): a batch of loads in flight at once.
__device__ __forceinline__ uint32_t act_bits(const Act& a, int64_t b, int64_t t, int64_t h, int64_t i = 0) {
  return load_bits(a.p, a.dt, b * a.sb + t * a.st + h * a.sh + i);
}

// Elements i .. i+3 of a float tensor of dtype dt (aligned to 4 elements),
// in two steps as load_bits / widen_bits (cuda/common.cuh): the raw 16 bytes
// (f16 / bf16: the first 8), then the values, so that a batch of record
// loads is in flight at once (widened in the loading branch, a 16-bit record
// load stalled the warp before it issued the next).
__device__ __forceinline__ uint4 load4_bits(const void* p, DType dt, int64_t i) {
  if (dt == DType::f32) return *reinterpret_cast<const uint4*>(static_cast<const float*>(p) + i);
  const uint2 u = *reinterpret_cast<const uint2*>(static_cast<const uint16_t*>(p) + i);
  return make_uint4(u.x, u.y, 0u, 0u);
}
__device__ __forceinline__ float4 widen4(uint4 u, DType dt) {
  if (dt == DType::f32) return make_float4(__uint_as_float(u.x), __uint_as_float(u.y), __uint_as_float(u.z), __uint_as_float(u.w));
  float2 x, y;
  if (dt == DType::bf16) {
    x = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.x));
    y = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.y));
  } else {
    x = __half22float2(*reinterpret_cast<const __half2*>(&u.x));
    y = __half22float2(*reinterpret_cast<const __half2*>(&u.y));
  }
  return make_float4(x.x, x.y, y.x, y.y);
}
__device__ __forceinline__ float4 load4_any(const void* p, DType dt, int64_t i) { return widen4(load4_bits(p, dt, i), dt); }
__device__ __forceinline__ void store4(float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }

__device__ __forceinline__ void out_at(const Out& o, int64_t b, int64_t t, int64_t h, int64_t i, float x) {
  store_any(o.p, o.dt, b * o.sb + t * o.st + h * o.sh + i, x);
}

// x rounded to dtype dt and widened back (what a later read of a stored value sees).
__device__ __forceinline__ float round_to(DType dt, float x) {
  switch (dt) {
    case DType::f16: return __half2float(__float2half_rn(x));
    case DType::bf16: return __bfloat162float(__float2bfloat16_rn(x));
    default: return x;
  }
}

// Activated log-decay of value head hv (KDA: channel i) of token (b, t):
// raw: g = −exp(A_log[hv])·softplus(a + dt_bias); else g as given. In two
// steps for batches (gate_raw: its three loads, issued before any is used;
// gate_of: the gate); gate_at does both.
struct GateRaw {
  uint32_t x;
  float bias, al;
};
__device__ __forceinline__ GateRaw gate_raw(const TokenArgs& in, bool kda, int64_t b, int64_t t, int hv, int i) {
  GateRaw r;
  r.x = kda ? act_bits(in.g, b, t, hv, i) : act_bits(in.g, b, t, hv);
  r.bias = in.raw_gate && in.dt_bias ? in.dt_bias[hv * in.sdb + (kda ? i : 0)] : 0.f;
  r.al = in.raw_gate ? in.A_log[hv * in.sA] : 0.f;
  return r;
}
__device__ __forceinline__ float gate_of(const TokenArgs& in, const GateRaw& r) {
  const float a = widen_bits(r.x, in.g.dt);
  if (!in.raw_gate) return a;
  return -expf(r.al) * cuda_util::softplus(a + r.bias);
}
__device__ __forceinline__ float gate_at(const TokenArgs& in, bool kda, int64_t b, int64_t t, int hv, int i) {
  return gate_of(in, gate_raw(in, kda, b, t, hv, i));
}
__device__ __forceinline__ float beta_of(const TokenArgs& in, uint32_t bits) {
  const float x = widen_bits(bits, in.beta.dt);
  return in.raw_beta ? cuda_util::sigmoid(x) : x;
}
__device__ __forceinline__ float beta_at(const TokenArgs& in, int64_t b, int64_t t, int hv) {
  return beta_of(in, act_bits(in.beta, b, t, hv));
}

// From a lane's partial k·k and q·q: their warp sums, then the l2norm scales
// ks of k and qs of q (q_scale included).
__device__ __forceinline__ void qk_norm_scales(const TokenArgs& in, float sk, float sq, float& ks, float& qs) {
  sk = warp_sum(sk);
  sq = warp_sum(sq);
  ks = in.l2norm ? rsqrtf(sk + 1e-6f) : 1.f;
  qs = (in.l2norm ? rsqrtf(sq + 1e-6f) : 1.f) * in.q_scale;
}

// One warp: k̂ = k·ks and q̂ = q·qs·q_scale of token (b, t), key head kh, into
// shared kn[K], qn[K]; returns ks (1 without l2norm) and k̂·q̂ in every lane.
// With kraw != null the raw k (widened exactly) is also kept there. Loads are
// issued 128 elements at a time (four per lane, unrolled) so their latencies
// overlap.
__device__ __forceinline__ void warp_prep_qk(const TokenArgs& in, int64_t b, int64_t t, int kh,
                                             float* kn, float* qn, float& ks, float& kq,
                                             float* kraw = nullptr) {
  const int lane = threadIdx.x & 31;
  float sk = 0.f, sq = 0.f;
  for (int base = 0; base < in.K; base += 128) {
    uint32_t kb[4], qb[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = base + lane + 32 * e;
      kb[e] = i < in.K ? act_bits(in.k, b, t, kh, i) : 0u;
      qb[e] = i < in.K ? act_bits(in.q, b, t, kh, i) : 0u;
    }
    float k[4], q[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      k[e] = widen_bits(kb[e], in.k.dt);
      q[e] = widen_bits(qb[e], in.q.dt);
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = base + lane + 32 * e;
      if (i < in.K) {
        kn[i] = k[e];
        qn[i] = q[e];
        if (kraw) kraw[i] = k[e];
      }
      sk += k[e] * k[e];
      sq += q[e] * q[e];
    }
  }
  float qs;
  qk_norm_scales(in, sk, sq, ks, qs);
  float dot = 0.f;
  for (int i = lane; i < in.K; i += 32) {
    const float k = kn[i] * ks, q = qn[i] * qs;
    kn[i] = k;
    qn[i] = q;
    dot += k * q;
  }
  kq = warp_sum(dot);
}

// The raw bits (load_bits) of elements o + lane + 32e, e < 4, of a float
// tensor of dtype dt, with one dtype branch.
__device__ __forceinline__ void raw_row128(const void* src, DType dt, int64_t o, int lane, uint32_t (&x)[4]) {
  if (dt == DType::f32) {
    const uint32_t* p = static_cast<const uint32_t*>(src) + o + lane;
#pragma unroll
    for (int e = 0; e < 4; ++e) x[e] = p[32 * e];
  } else {
    const uint16_t* p = static_cast<const uint16_t*>(src) + o + lane;
#pragma unroll
    for (int e = 0; e < 4; ++e) x[e] = p[32 * e];
  }
}
__device__ __forceinline__ void raw_row128(const Act& a, int64_t b, int64_t t, int64_t h, int lane, uint32_t (&x)[4]) {
  raw_row128(a.p, a.dt, b * a.sb + t * a.st + h * a.sh, lane, x);
}
// warp_prep_qk at K = 128 (the tensor-core T > 1 kernel): the same values,
// the same sums in the same order (lane l: elements l + 32e, e < 4), with the
// token's q / k rows addressed once and their dtype branch taken once per
// row instead of per element, and k̂, q̂ stored once from registers (the
// general form spent ~380 instructions per warp here: docs/perf_notes_delta.md
// v46).
// kw: the widened k (what the ring's k record stores, store_row128).
__device__ __forceinline__ void warp_prep_qk128(const TokenArgs& in, int64_t b, int64_t t, int kh, float* kn,
                                                float* qn, float& ks, float& kq, float (&kw)[4]) {
  const int lane = threadIdx.x & 31;
  uint32_t kb[4], qb[4];
  raw_row128(in.k, b, t, kh, lane, kb);
  raw_row128(in.q, b, t, kh, lane, qb);
  float k[4], q[4], sk = 0.f, sq = 0.f;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    k[e] = widen_bits(kb[e], in.k.dt);
    q[e] = widen_bits(qb[e], in.q.dt);
    kw[e] = k[e];
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    sk += k[e] * k[e];
    sq += q[e] * q[e];
  }
  float qs;
  qk_norm_scales(in, sk, sq, ks, qs);
  float dot = 0.f;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const float kk = k[e] * ks, qq = q[e] * qs;
    kn[lane + 32 * e] = kk;
    qn[lane + 32 * e] = qq;
    dot += kk * qq;
  }
  kq = warp_sum(dot);
}
// x[i] at element o + lane + O_i of a float tensor of dtype dt, rounded as
// store_any does, with one dtype branch for the four.
template <int O0, int O1, int O2, int O3>
__device__ __forceinline__ void store4(void* p, DType dt, int64_t o, int lane, const float (&x)[4]) {
  constexpr int off[4] = {O0, O1, O2, O3};
  if (dt == DType::f32) {
    float* q = static_cast<float*>(p) + o + lane;
#pragma unroll
    for (int i = 0; i < 4; ++i) q[off[i]] = x[i];
  } else if (dt == DType::bf16) {
    __nv_bfloat16* q = static_cast<__nv_bfloat16*>(p) + o + lane;
#pragma unroll
    for (int i = 0; i < 4; ++i) q[off[i]] = __float2bfloat16_rn(x[i]);
  } else {
    __half* q = static_cast<__half*>(p) + o + lane;
#pragma unroll
    for (int i = 0; i < 4; ++i) q[off[i]] = __float2half_rn(x[i]);
  }
}
// Elements lane + 32e (e < 4) of a row at element offset o.
__device__ __forceinline__ void store_row128(void* p, DType dt, int64_t o, int lane, const float (&x)[4]) {
  store4<0, 32, 64, 96>(p, dt, o, lane, x);
}

// Sum over the LPR lanes of a group (every lane of the warp must call it).
__device__ __forceinline__ float group_sum(float x, int lpr) {
  for (int o = lpr >> 1; o > 0; o >>= 1) x += __shfl_xor_sync(FULL_MASK, x, o);
  return x;
}

// A state row in registers: s[j][e] = row[(j*lpr + lane)*VEC + e]. Chunks past
// K (K < 16·LPR) hold zeros and are skipped by every operation (the shared
// vectors they would pair with have only K elements).
template <DType SD>
struct Row {
  using TS = typename Traits<SD>::type;
  static constexpr int VEC = 16 / int(sizeof(TS));
  static constexpr int NCH = ELEMS_PER_LANE / VEC;
  float s[NCH][VEC];

  __device__ __forceinline__ static bool has(int j, int lane, int lpr, int K) {
    return (j * lpr + lane) * VEC < K;
  }
  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int j = 0; j < NCH; ++j)
#pragma unroll
      for (int e = 0; e < VEC; ++e) s[j][e] = 0.f;
  }
  __device__ __forceinline__ void load(const TS* row, int lane, int lpr, int K) {
#pragma unroll
    for (int j = 0; j < NCH; ++j) {
      if (has(j, lane, lpr, K)) {
        const uint4 u = __ldcs(reinterpret_cast<const uint4*>(row + (j * lpr + lane) * VEC));
        const TS* x = reinterpret_cast<const TS*>(&u);
#pragma unroll
        for (int e = 0; e < VEC; ++e) s[j][e] = Traits<SD>::load(x[e]);
      } else {
#pragma unroll
        for (int e = 0; e < VEC; ++e) s[j][e] = 0.f;
      }
    }
  }
  // Store rounded to the state dtype (streaming: rows are not read again in
  // this kernel); with `keep`, the registers take the rounded value.
  __device__ __forceinline__ void store(TS* row, int lane, int lpr, int K, bool keep = false) {
#pragma unroll
    for (int j = 0; j < NCH; ++j) {
      if (!has(j, lane, lpr, K)) continue;
      uint4 u;
      TS* x = reinterpret_cast<TS*>(&u);
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        x[e] = Traits<SD>::store(s[j][e]);
        if (keep) s[j][e] = Traits<SD>::load(x[e]);
      }
      __stcs(reinterpret_cast<uint4*>(row + (j * lpr + lane) * VEC), u);
    }
  }
  // Σ_i s[i]·u[i] over this lane's elements (u in shared memory, 16-byte aligned).
  __device__ __forceinline__ float dot(const float* u, int lane, int lpr, int K) const {
    float acc = 0.f;
#pragma unroll
    for (int j = 0; j < NCH; ++j) {
      if (!has(j, lane, lpr, K)) continue;
      const float4* p = reinterpret_cast<const float4*>(u + (j * lpr + lane) * VEC);
#pragma unroll
      for (int e = 0; e < VEC / 4; ++e) {
        const float4 w = p[e];
        acc += s[j][4 * e] * w.x + s[j][4 * e + 1] * w.y + s[j][4 * e + 2] * w.z + s[j][4 * e + 3] * w.w;
      }
    }
    return acc;
  }
  // s ← this lane's share of a K-vector in shared memory (zeros past K): a
  // vector used for every row of a block kept in registers.
  __device__ __forceinline__ void load_shared(const float* u, int lane, int lpr, int K) {
#pragma unroll
    for (int j = 0; j < NCH; ++j) {
      if (has(j, lane, lpr, K)) {
        const float4* p = reinterpret_cast<const float4*>(u + (j * lpr + lane) * VEC);
#pragma unroll
        for (int e = 0; e < VEC / 4; ++e) {
          const float4 w = p[e];
          s[j][4 * e] = w.x; s[j][4 * e + 1] = w.y; s[j][4 * e + 2] = w.z; s[j][4 * e + 3] = w.w;
        }
      } else {
#pragma unroll
        for (int e = 0; e < VEC; ++e) s[j][e] = 0.f;
      }
    }
  }
  // Σ s·u over this lane's elements, u another register row (both zero past K).
  __device__ __forceinline__ float dot(const Row& u) const {
    float acc = 0.f;
#pragma unroll
    for (int j = 0; j < NCH; ++j)
#pragma unroll
      for (int e = 0; e < VEC; ++e) acc += s[j][e] * u.s[j][e];
    return acc;
  }
  // s ← s + c·u, u another register row.
  __device__ __forceinline__ void axpy(float c, const Row& u) {
#pragma unroll
    for (int j = 0; j < NCH; ++j)
#pragma unroll
      for (int e = 0; e < VEC; ++e) s[j][e] += c * u.s[j][e];
  }
  // s ← a·s (scalar).
  __device__ __forceinline__ void scale(float a) {
#pragma unroll
    for (int j = 0; j < NCH; ++j)
#pragma unroll
      for (int e = 0; e < VEC; ++e) s[j][e] *= a;
  }
  // s ← s ⊙ a (vector in shared memory).
  __device__ __forceinline__ void scale(const float* a, int lane, int lpr, int K) {
#pragma unroll
    for (int j = 0; j < NCH; ++j) {
      if (!has(j, lane, lpr, K)) continue;
      const float4* p = reinterpret_cast<const float4*>(a + (j * lpr + lane) * VEC);
#pragma unroll
      for (int e = 0; e < VEC / 4; ++e) {
        const float4 w = p[e];
        s[j][4 * e] *= w.x; s[j][4 * e + 1] *= w.y; s[j][4 * e + 2] *= w.z; s[j][4 * e + 3] *= w.w;
      }
    }
  }
  // s ← s + c·u (u in shared memory).
  __device__ __forceinline__ void axpy(float c, const float* u, int lane, int lpr, int K) {
#pragma unroll
    for (int j = 0; j < NCH; ++j) {
      if (!has(j, lane, lpr, K)) continue;
      const float4* p = reinterpret_cast<const float4*>(u + (j * lpr + lane) * VEC);
#pragma unroll
      for (int e = 0; e < VEC / 4; ++e) {
        const float4 w = p[e];
        s[j][4 * e] += c * w.x; s[j][4 * e + 1] += c * w.y; s[j][4 * e + 2] += c * w.z; s[j][4 * e + 3] += c * w.w;
      }
    }
  }
};

// Ring cursor of slot s.
__device__ __forceinline__ RingCursor cursor_at(const Rings& r, int64_t s) {
  const int32_t* p = r.cur + s * r.c0;
  return RingCursor{p[0], p[r.c1], p[2 * r.c1]};
}
__device__ __forceinline__ bool cursor_ok(const Rings& r, const RingCursor& c) {
  return c.start >= 0 && c.start < r.R && c.count >= 0 && c.pending >= 0 && c.count + c.pending <= r.L;
}

// L2 prefetch of the records (and the step's token inputs) that the replay
// block of grid position (b, kh, bx) reads before its stream (replay1.cuh
// phase 1, replay.cuh's preparation): called for the block a.rec_pf after
// the caller's, so that when it starts those loads hit L2 instead of
// waiting a loaded DRAM round trip behind the state streams. One warp; lane
// j takes records j, j + 32, ...; rows that would be rejected are skipped
// (their own block reports them).
template <bool KDA, bool SPREAD>
__device__ __forceinline__ void prefetch_block_records(const ReplayArgs& a, int T, int b, int kh, int bx, int lane) {
  const TokenArgs& in = a.in;
  const Rings& rg = a.rings;
  const int64_t s = idx_at(a.slot, b);
  if (s == a.pad || s < 0 || s >= a.S) return;
  RingCursor c = cursor_at(rg, s);
  if (!cursor_ok(rg, c)) return;
  if (a.acc.p) {
    if (!ring_commit(c, int32_t(idx_at(a.acc, b)))) return;
  } else if (c.pending != 0) {
    return;
  }
  const StepPlan p = ring_plan_step(c, T, rg.L, rg.R);
  const int n = p.flush ? p.fold_count : p.hist_count, st = p.flush ? p.fold_start : p.hist_start;
  const int hgroup = bx / a.vtiles, v0 = (bx - hgroup * a.vtiles) * a.vt;
  const int nh = a.nh, hv0 = kh * in.G + hgroup * nh, vt = min(a.vt, in.V - v0);
  auto esz = [](DType dt) { return dt == DType::f32 ? int64_t(4) : int64_t(2); };
  const int64_t de = esz(rg.d_dt), ke = esz(rg.k_dt);
  for (int j = lane; j < n; j += 32) {
    const int64_t pos = ring_pos_near(st, j, rg.R);
    const char* d = static_cast<const char*>(rg.d) + (s * rg.d0 + pos * rg.d1 + int64_t(hv0) * rg.d2 + v0) * de;
    if (vt == in.V && rg.d2 == in.V) {
      cuda_util::prefetch_l2(d, uint32_t(nh * vt * de));
    } else {
      for (int h = 0; h < nh; ++h) cuda_util::prefetch_l2(d + h * rg.d2 * de, uint32_t(vt * de));
    }
    cuda_util::prefetch_l2(static_cast<const char*>(rg.k) + (s * rg.k0 + pos * rg.k1 + int64_t(kh) * rg.k2) * ke,
                           uint32_t(in.K * ke));
    cuda_util::prefetch_l2(rg.ks + s * rg.ks0 + pos * rg.ks1 + int64_t(kh) * rg.ks2, 4u);
    cuda_util::prefetch_l2(rg.g + s * rg.g0 + pos * rg.g1 + int64_t(hv0) * rg.g2, uint32_t((KDA ? in.K : nh) * 4));
  }
  // The tokens (all five inputs are required): q, k of the key head, v / β /
  // g of the value heads, 2 + 3·nh prefetches per token; SPREAD: one per
  // lane, else all by the last lane (see prefetch_block_ahead).
  auto act = [&](const Act& x, int t, int h, int i, int cnt) {
    const int64_t e = esz(x.dt);
    cuda_util::prefetch_l2(
        static_cast<const char*>(x.p) + (int64_t(b) * x.sb + int64_t(t) * x.st + int64_t(h) * x.sh + i) * e,
        uint32_t(cnt * e));
  };
  if constexpr (SPREAD) {
    const int per_t = 2 + 3 * nh;
    for (int u = lane; u < T * per_t; u += 32) {
      const int t = u / per_t, x = u - t * per_t;
      const int h = x < 2 ? kh : hv0 + (x - 2) / 3, y = x < 2 ? x : 2 + (x - 2) % 3;
      const Act& in_x = y == 0 ? in.q : y == 1 ? in.k : y == 2 ? in.v : y == 3 ? in.beta : in.g;
      act(in_x, t, h, y == 2 ? v0 : 0, y < 2 ? in.K : y == 2 ? vt : y == 3 ? 1 : (KDA ? in.K : 1));
    }
  } else if (lane == 31) {
    for (int t = 0; t < T; ++t) {
      act(in.q, t, kh, 0, in.K);
      act(in.k, t, kh, 0, in.K);
      for (int h = 0; h < nh; ++h) {
        act(in.v, t, hv0 + h, v0, vt);
        act(in.beta, t, hv0 + h, 0, 1);
        act(in.g, t, hv0 + h, 0, KDA ? in.K : 1);
      }
    }
  }
}

// The block a.rec_pf after the caller's in grid order (x fastest, then key
// head, then row): prefetch_block_records, by one warp of the caller (T: the
// step's tokens, a compile-time 1 in the T = 1 kernel). SPREAD (the tokens'
// prefetches over the lanes) is the callers' choice, as measured at B = 256
// (docs/perf_notes_delta.md, "the prefetch's token lanes"): spread, the T = 1
// GDN HV64 fp32 step ran 317 against 324 µs and the T = 5 KDA fp32 step 655
// against 682, but the T = 1 KDA fp32 step 294–297 against 277–280 — also when
// a runtime rule chose the last lane for it, so the form of the code, not the
// issue order, costs there.
template <bool KDA, bool SPREAD>
__device__ __forceinline__ void prefetch_block_ahead(const ReplayArgs& a, int T, int lane) {
  // 32-bit: at most 65,535 rows (grid z) times the value heads' tiles (y · x)
  const int gx = int(gridDim.x), H = a.in.H;
  const int it = (int(blockIdx.z) * H + int(blockIdx.y)) * gx + int(blockIdx.x) + a.rec_pf;
  if (it < int(gridDim.z) * H * gx) {
    const int bh = it / gx, bn = bh / H;
    prefetch_block_records<KDA, SPREAD>(a, T, bn, bh - bn * H, it - bh * gx, lane);
  }
}

using cuda_util::div_small;  // cuda/common.cuh

// Shared memory is carved in floats; offsets keep 16-byte alignment.
__host__ __device__ __forceinline__ int64_t align4(int64_t n) { return (n + 3) & ~int64_t(3); }

}  // namespace replayssm::delta::cuda_impl
