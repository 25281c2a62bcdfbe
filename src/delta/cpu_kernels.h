// fp32 building blocks of the fast delta CPU backend: vectorisable dot /
// axpy over K, state-row conversion by storage dtype, token preparation and
// the fold of ring records into checkpoint rows.
#pragma once
#include <immintrin.h>

#include <cmath>
#include <vector>

#include "delta/common.h"

namespace replayssm::delta::cpu {

// Σ a[i] b[i] with 16 independent partial sums (vectorises without
// reassociation flags; the summation order is fixed, so results are
// deterministic).
inline float dot(const float* __restrict a, const float* __restrict b, int64_t n) {
  float acc[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int l = 0; l < 16; ++l) acc[l] += a[i + l] * b[i + l];
  float s = 0;
  for (; i < n; ++i) s += a[i] * b[i];
  for (int l = 0; l < 8; ++l) acc[l] += acc[l + 8];
  for (int l = 0; l < 4; ++l) acc[l] += acc[l + 4];
  return s + ((acc[0] + acc[2]) + (acc[1] + acc[3]));
}
// y += a x
inline void axpy(float* __restrict y, float a, const float* __restrict x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}
// y = a ⊙ x
inline void mul(float* __restrict y, const float* __restrict a, const float* __restrict x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] * x[i];
}

// State rows by storage dtype.
template <DType SD>
inline void load_row(const typename Storage<SD>::type* __restrict p, float* __restrict dst, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__)
  if constexpr (SD == DType::f16)
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i))));
#endif
  for (; i < n; ++i) dst[i] = Storage<SD>::load(p[i]);
}
template <DType SD>
inline void store_row(typename Storage<SD>::type* __restrict p, const float* __restrict src, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__)
  if constexpr (SD == DType::f16)
    for (; i + 8 <= n; i += 8)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(p + i),
                       _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
#endif
  for (; i < n; ++i) p[i] = Storage<SD>::store(src[i]);
}
template <DType SD>
inline typename Storage<SD>::type* row_ptr(const Tensor& st, int64_t s, int64_t h, int64_t v) {
  return static_cast<typename Storage<SD>::type*>(st.data) + off(st, s, h, v);
}

// Thread-local scratch of n floats (slot i of a small set).
inline float* scratch(int i, int64_t n) {
  thread_local std::vector<float> bufs[12];
  auto& b = bufs[i];
  if (int64_t(b.size()) < n) b.resize(size_t(n));
  return b.data();
}

// Key-head inputs of token (r, t): raw k (kr), k̂ = k·ks, q̂ = q·qs·q_scale.
inline void prep_keys(const Inputs& in, int64_t K, int64_t r, int64_t t, int64_t kh, float* kr,
                      float* khat, float* ks, float* qhat) {
  load_vec(in.k, off(in.k, r, t, kh), K, kr);
  load_vec(in.q, off(in.q, r, t, kh), K, qhat);
  const float qsc = float(q_scale_of(in.gating, K));
  float s = 1.f, qs = qsc;
  if (in.gating.l2norm_qk) {
    s = 1.f / std::sqrt(dot(kr, kr, K) + 1e-6f);
    qs = qsc / std::sqrt(dot(qhat, qhat, K) + 1e-6f);
  }
  *ks = s;
  for (int64_t i = 0; i < K; ++i) { khat[i] = kr[i] * s; qhat[i] *= qs; }
}

// Value-head inputs of token (r, t): log-decay g [GW], β, v [V].
inline void prep_value(const Inputs& in, const Dims& d, int64_t r, int64_t t, int64_t h, float* g,
                       float* beta, float* v) {
  const int64_t GW = gate_width(d);
  if (GW > 1) load_vec(in.g, off(in.g, r, t, h, 0), GW, g);
  else g[0] = load_one<float>(in.g, off(in.g, r, t, h));
  if (in.gating.raw_gate) {
    const float A = -std::exp(load_one<float>(in.A_log, off(in.A_log, h)));
    for (int64_t i = 0; i < GW; ++i) {
      const float bias = !in.dt_bias.defined() ? 0.f
                         : GW > 1 ? load_one<float>(in.dt_bias, off(in.dt_bias, h, i))
                                  : load_one<float>(in.dt_bias, off(in.dt_bias, h));
      g[i] = A * softplus(g[i] + bias);
    }
  }
  const float b = load_one<float>(in.beta, off(in.beta, r, t, h));
  *beta = in.gating.raw_beta ? sigmoid(b) : b;
  load_vec(in.v, off(in.v, r, t, h), d.V, v);
}

// Expand a gate vector of width GW (1 for GDN) to K channels.
inline void expand(float* dst, const float* src, int64_t GW, int64_t K) {
  if (GW == K) std::copy(src, src + K, dst);
  else std::fill(dst, dst + K, src[0]);
}

// One token of the standard recurrence on a state row s [K] (per channel α):
// s ← α ⊙ s; d = β (v − s·k̂); s ← s + d k̂; returns o = s·q̂.
inline float row_token(float* s, const float* alpha, const float* khat, const float* qhat,
                       float beta, float v, int64_t K) {
  for (int64_t i = 0; i < K; ++i) s[i] *= alpha[i];
  const float dv = beta * (v - dot(s, khat, K));
  axpy(s, dv, khat, K);
  return dot(s, qhat, K);
}

// Records of value head h (key head kh) of slot s: n records from `start`.
// kh_out [n*K] k̂_j (when non-null), g [n*GW], dd [n*V] (when non-null).
inline void load_records(const DeltaPool& pool, const Dims& d, int64_t s, int64_t h, int32_t start,
                         int64_t n, float* khat, float* g, float* dd) {
  const int64_t K = d.K, GW = gate_width(d), kh = h / (d.HV / d.H);
  for (int64_t j = 0; j < n; ++j) {
    const int64_t p = ring_pos(start, int32_t(j), int32_t(d.R));
    if (khat) {
      load_vec(pool.ring_k, off(pool.ring_k, s, p, kh), K, khat + j * K);
      const float ks = load_one<float>(pool.ring_ks, off(pool.ring_ks, s, p, kh));
      for (int64_t i = 0; i < K; ++i) khat[j * K + i] *= ks;
    }
    if (GW > 1) load_vec(pool.ring_g, off(pool.ring_g, s, p, h, 0), K, g + j * GW);
    else g[j] = load_one<float>(pool.ring_g, off(pool.ring_g, s, p, h));
    if (dd) load_vec(pool.ring_d, off(pool.ring_d, s, p, h), d.V, dd + j * d.V);
  }
}

// Decays relative to the end of n records: E_j = e^{Σ_{j<i<n} g_i} [n*GW]
// and E_n = e^{Σ_{i<n} g_i} [GW], by backward accumulation (exact suffixes).
inline void suffix_decays(const float* g, int64_t n, int64_t GW, float* E, float* En) {
  float* acc = En;
  std::fill(acc, acc + GW, 0.f);
  for (int64_t j = n - 1; j >= 0; --j)
    for (int64_t i = 0; i < GW; ++i) {
      E[j * GW + i] = std::exp(acc[i]);
      acc[i] += g[j * GW + i];
    }
  for (int64_t i = 0; i < GW; ++i) En[i] = std::exp(acc[i]);
}

// Fold plan for value head h: Hk [n*K] = E_j ⊙ k̂_j and En [K] (expanded),
// from k̂ [n*K] and g [n*GW].
inline void fold_factors(const float* khat, const float* g, int64_t n, int64_t GW, int64_t K,
                         float* Hk, float* En) {
  float* E = scratch(11, n * GW + 1);
  float tail[1];
  float* EnGW = GW > 1 ? En : tail;
  suffix_decays(g, n, GW, E, EnGW);
  if (GW == 1) std::fill(En, En + K, tail[0]);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < K; ++i) Hk[j * K + i] = E[j * GW + (GW > 1 ? i : 0)] * khat[j * K + i];
}

// Row v of the folded state: s = En ⊙ s0 + Σ_j d_j[v] Hk_j (s0 already in s).
inline void fold_row(float* s, const float* En, const float* Hk, const float* dd, int64_t n,
                     int64_t v, int64_t K, int64_t V) {
  for (int64_t i = 0; i < K; ++i) s[i] *= En[i];
  for (int64_t j = 0; j < n; ++j) axpy(s, dd[j * V + v], Hk + j * K, K);
}

// Calls fn.template operator()<SD>() for the state dtype.
template <class Fn>
void by_state_dtype(DType dt, Fn&& fn) {
  switch (dt) {
    case DType::f32: fn.template operator()<DType::f32>(); break;
    case DType::bf16: fn.template operator()<DType::bf16>(); break;
    case DType::f16: fn.template operator()<DType::f16>(); break;
    default: break;
  }
}

}  // namespace replayssm::delta::cpu
