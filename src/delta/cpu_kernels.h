// fp32 building blocks of the fast delta CPU backend: AVX2 dot / dot2, exp
// and softplus (<= 2 ulp), axpy over K, state-row conversion by storage
// dtype, token preparation and the fold of ring records into checkpoint rows.
// Every buffer these take is scratch carved from the call's workspace.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "delta/common.h"

namespace replayssm::delta::cpu {

#if defined(__AVX2__) && defined(__FMA__)
// Σ of the 8 lanes of x, in a fixed order.
inline float hsum8(__m256 x) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}
#endif

// Σ a[i] b[i]: 32 partial sums (4 fma chains of 8 lanes) reduced in a fixed
// order, so results are deterministic for a given n.
inline float dot(const float* __restrict a, const float* __restrict b, int64_t n) {
  int64_t i = 0;
  float s = 0;
#if defined(__AVX2__) && defined(__FMA__)
  __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;
  for (; i + 32 <= n; i += 32) {
    c0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), c0);
    c1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), c1);
    c2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), c2);
    c3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), c3);
  }
  for (; i + 8 <= n; i += 8) c0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), c0);
  s = hsum8(_mm256_add_ps(_mm256_add_ps(c0, c2), _mm256_add_ps(c1, c3)));
#endif
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}
// (Σ a[i] b[i], Σ a[i] c[i]) with dot's summation order; a is read once.
inline void dot2(const float* __restrict a, const float* __restrict b, const float* __restrict c,
                 int64_t n, float* rb, float* rc) {
  int64_t i = 0;
  float sb = 0, sc = 0;
#if defined(__AVX2__) && defined(__FMA__)
  __m256 b0 = _mm256_setzero_ps(), b1 = b0, b2 = b0, b3 = b0, c0 = b0, c1 = b0, c2 = b0, c3 = b0;
  for (; i + 32 <= n; i += 32) {
    const __m256 a0 = _mm256_loadu_ps(a + i), a1 = _mm256_loadu_ps(a + i + 8);
    const __m256 a2 = _mm256_loadu_ps(a + i + 16), a3 = _mm256_loadu_ps(a + i + 24);
    b0 = _mm256_fmadd_ps(a0, _mm256_loadu_ps(b + i), b0);
    b1 = _mm256_fmadd_ps(a1, _mm256_loadu_ps(b + i + 8), b1);
    b2 = _mm256_fmadd_ps(a2, _mm256_loadu_ps(b + i + 16), b2);
    b3 = _mm256_fmadd_ps(a3, _mm256_loadu_ps(b + i + 24), b3);
    c0 = _mm256_fmadd_ps(a0, _mm256_loadu_ps(c + i), c0);
    c1 = _mm256_fmadd_ps(a1, _mm256_loadu_ps(c + i + 8), c1);
    c2 = _mm256_fmadd_ps(a2, _mm256_loadu_ps(c + i + 16), c2);
    c3 = _mm256_fmadd_ps(a3, _mm256_loadu_ps(c + i + 24), c3);
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 a0 = _mm256_loadu_ps(a + i);
    b0 = _mm256_fmadd_ps(a0, _mm256_loadu_ps(b + i), b0);
    c0 = _mm256_fmadd_ps(a0, _mm256_loadu_ps(c + i), c0);
  }
  sb = hsum8(_mm256_add_ps(_mm256_add_ps(b0, b2), _mm256_add_ps(b1, b3)));
  sc = hsum8(_mm256_add_ps(_mm256_add_ps(c0, c2), _mm256_add_ps(c1, c3)));
#endif
  for (; i < n; ++i) { sb += a[i] * b[i]; sc += a[i] * c[i]; }
  *rb = sb;
  *rc = sc;
}
// e^x in fp32, branch-free so loops over it vectorise: x = k ln2 + r with
// k = rint(x log2 e), |r| <= ln2/2 (Cody-Waite, two-part ln2), e^r by a
// degree-7 polynomial (Horner, fma), then 2^k applied as two exponent factors
// 2^{k1} 2^{k2} so subnormal results round once. x is clamped to [-104, 89]
// (e^-104 rounds to 0, e^89 overflows to inf); NaN propagates. Max error
// against correctly rounded e^x: <= 2 ulp.
inline float fast_exp(float x) {
  const float xc = x < -104.f ? -104.f : (x > 89.f ? 89.f : x);
  constexpr float kMagic = 12582912.f;  // 1.5 * 2^23: adding it rounds to an integer
  const float t = xc * 1.44269504088896341f + kMagic;
  const float kf = t - kMagic;
  float r = std::fma(kf, -0.693359375f, xc);
  r = std::fma(kf, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = std::fma(p, r, 1.3981999507e-3f);
  p = std::fma(p, r, 8.3334519073e-3f);
  p = std::fma(p, r, 4.1665795894e-2f);
  p = std::fma(p, r, 1.6666665459e-1f);
  p = std::fma(p, r, 5.0000001201e-1f);
  const float y = std::fma(p, r * r, r) + 1.f;
  const int32_t k = std::bit_cast<int32_t>(t) - std::bit_cast<int32_t>(kMagic);
  const int32_t k1 = k >> 1, k2 = k - k1;
  const float s1 = std::bit_cast<float>((k1 + 127) << 23), s2 = std::bit_cast<float>((k2 + 127) << 23);
  const float e = y * s1 * s2;
  return x == x ? e : x;
}
#if defined(__AVX2__) && defined(__FMA__)
// fast_exp on 8 lanes, operation for operation.
inline __m256 exp8(__m256 xv) {
  const __m256 lo = _mm256_set1_ps(-104.f), hi = _mm256_set1_ps(89.f), magic = _mm256_set1_ps(12582912.f);
  const __m256i bias = _mm256_set1_epi32(127), imagic = _mm256_set1_epi32(std::bit_cast<int32_t>(12582912.f));
  const __m256 xc = _mm256_min_ps(_mm256_max_ps(xv, lo), hi);
  const __m256 t = _mm256_add_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)), magic);
  const __m256 kf = _mm256_sub_ps(t, magic);
  __m256 r = _mm256_fmadd_ps(kf, _mm256_set1_ps(-0.693359375f), xc);
  r = _mm256_fmadd_ps(kf, _mm256_set1_ps(2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  const __m256 yv = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.f));
  const __m256i k = _mm256_sub_epi32(_mm256_castps_si256(t), imagic);
  const __m256i k1 = _mm256_srai_epi32(k, 1), k2 = _mm256_sub_epi32(k, k1);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, bias), 23));
  const __m256 e = _mm256_mul_ps(_mm256_mul_ps(yv, s1), s2);
  return _mm256_blendv_ps(e, xv, _mm256_cmp_ps(xv, xv, _CMP_UNORD_Q));
}
// softplus on 8 lanes: x for x > 20, else max(x, 0) + log1p(z), z = e^{−|x|},
// with log1p(z) = 2 atanh(s), s = z / (2 + z) ∈ [0, 1/3], by its odd series
// through s^15 (truncation < 2e-9 relative). Within 2 ulp of log1p(e^x).
inline __m256 softplus8(__m256 x) {
  const __m256 ax = _mm256_andnot_ps(_mm256_set1_ps(-0.f), x);
  const __m256 z = exp8(_mm256_sub_ps(_mm256_setzero_ps(), ax));
  const __m256 sv = _mm256_div_ps(z, _mm256_add_ps(_mm256_set1_ps(2.f), z));
  const __m256 s2 = _mm256_mul_ps(sv, sv);
  __m256 p = _mm256_set1_ps(1.f / 15);
  p = _mm256_fmadd_ps(p, s2, _mm256_set1_ps(1.f / 13));
  p = _mm256_fmadd_ps(p, s2, _mm256_set1_ps(1.f / 11));
  p = _mm256_fmadd_ps(p, s2, _mm256_set1_ps(1.f / 9));
  p = _mm256_fmadd_ps(p, s2, _mm256_set1_ps(1.f / 7));
  p = _mm256_fmadd_ps(p, s2, _mm256_set1_ps(1.f / 5));
  p = _mm256_fmadd_ps(p, s2, _mm256_set1_ps(1.f / 3));
  const __m256 s2v = _mm256_add_ps(sv, sv);
  const __m256 l = _mm256_fmadd_ps(_mm256_mul_ps(s2v, s2), p, s2v);
  const __m256 r = _mm256_add_ps(_mm256_max_ps(x, _mm256_setzero_ps()), l);
  return _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, _mm256_set1_ps(20.f), _CMP_GT_OQ));
}
#endif
// x[i] ← softplus(x[i]) (see softplus8; scalar softplus without AVX2).
inline void softplus_vec(float* x, int64_t n) {
#if defined(__AVX2__) && defined(__FMA__)
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, softplus8(_mm256_loadu_ps(x + i)));
  if (i < n) {  // tail through one padded vector: same operations as the body
    alignas(32) float buf[8] = {};
    std::copy(x + i, x + n, buf);
    _mm256_store_ps(buf, softplus8(_mm256_load_ps(buf)));
    std::copy(buf, buf + (n - i), x + i);
  }
#else
  for (int64_t i = 0; i < n; ++i) x[i] = softplus(x[i]);
#endif
}
// y = e^x elementwise (y may alias x). The AVX2 path is fast_exp step for
// step (same operations and rounding), so results do not depend on n or on
// alignment. (The scalar loop does not auto-vectorise: the clamps are
// compares, which -ftrapping-math keeps out of if-conversion.)
inline void exp_vec(float* y, const float* x, int64_t n) {
  int64_t i = 0;
#if defined(__AVX2__) && defined(__FMA__)
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp8(_mm256_loadu_ps(x + i)));
#endif
  for (; i < n; ++i) y[i] = fast_exp(x[i]);
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

// Value-head inputs of token (r, t): log-decay g [GW], β, v [V]; bias is
// scratch of GW floats.
inline void prep_value(const Inputs& in, const Dims& d, int64_t r, int64_t t, int64_t h, float* g,
                       float* beta, float* v, float* bias) {
  const int64_t GW = gate_width(d);
  if (GW > 1) load_vec(in.g, off(in.g, r, t, h, 0), GW, g);
  else g[0] = load_one<float>(in.g, off(in.g, r, t, h));
  if (in.gating.raw_gate) {
    // g ← A softplus(g + dt_bias), A = −e^{A_log[h]}.
    const float A = -std::exp(load_one<float>(in.A_log, off(in.A_log, h)));
    if (in.dt_bias.defined()) {
      if (GW > 1) load_vec(in.dt_bias, off(in.dt_bias, h, 0), GW, bias);
      else bias[0] = load_one<float>(in.dt_bias, off(in.dt_bias, h));
      for (int64_t i = 0; i < GW; ++i) g[i] += bias[i];
    }
    softplus_vec(g, GW);
    for (int64_t i = 0; i < GW; ++i) g[i] *= A;
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
      E[j * GW + i] = acc[i];
      acc[i] += g[j * GW + i];
    }
  exp_vec(E, E, n * GW);
  exp_vec(En, En, GW);
}

// Fold plan for value head h: Hk [n*K] = E_j ⊙ k̂_j and En [K] (expanded),
// from k̂ [n*K] and g [n*GW]; E is scratch of n*GW floats.
inline void fold_factors(const float* khat, const float* g, int64_t n, int64_t GW, int64_t K,
                         float* Hk, float* En, float* E) {
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

// Workspace of the replay step (cpu_replay.cpp).
WorkspacePlan replay_workspace(const Dims& d, int threads);

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
