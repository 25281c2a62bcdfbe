// Shared pieces of the fast CPU backend (cpu.cpp, cpu_replay.cpp): fp32
// row kernels over contiguous N, dtype-templated row conversion, record
// gathering and the fold of records into a state row.
//
// Arithmetic is fp32. State rows are converted to fp32 once per (head, p)
// row; a head's inputs are converted to fp32 scratch before the hot loops,
// so no loop over N or P switches on a dtype. All scratch is carved from the
// call's workspace (core/workspace.h): shared tables once per call, the rest
// from the slab of the worker running the item; nothing is allocated while
// the step computes.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__F16C__) && defined(__AVX__)
#include <immintrin.h>
#endif

#include "core/check.h"
#include "core/dtype.h"
#include "core/ring.h"
#include "core/workspace.h"
#include "mamba2/backend.h"

namespace replayssm::mamba2::cpu {

template <DType D> using Elem = typename Storage<D>::type;

// Typed element pointer at element offset `off` of t.
template <class E> E* ptr(const Tensor& t, int64_t off) { return static_cast<E*>(t.data) + off; }

inline int64_t off2(const Tensor& t, int64_t i0, int64_t i1) { return i0 * t.stride[0] + i1 * t.stride[1]; }
inline int64_t off3(const Tensor& t, int64_t i0, int64_t i1, int64_t i2) {
  return i0 * t.stride[0] + i1 * t.stride[1] + i2 * t.stride[2];
}

// One scalar of an f32 | f16 | bf16 tensor (per-token scalars only, e.g. dt).
inline float scalar(const Tensor& t, int64_t off) { return float(load_as_f64(t.data, t.dtype, off)); }

// dst[i] = float(src[i]), i < n.
template <DType D> inline void to_f32(const Elem<D>* src, float* dst, int64_t n) {
  if constexpr (D == DType::f32) {
    std::memcpy(dst, src, size_t(n) * sizeof(float));
  } else {
    int64_t i = 0;
#if defined(__F16C__) && defined(__AVX__)
    if constexpr (D == DType::f16)
      for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
#endif
    for (; i < n; ++i) dst[i] = Storage<D>::load(src[i]);
  }
}
// dst[i] = round_D(src[i]), i < n (round to nearest even).
template <DType D> inline void from_f32(const float* src, Elem<D>* dst, int64_t n) {
  if constexpr (D == DType::f32) {
    std::memcpy(dst, src, size_t(n) * sizeof(float));
  } else {
    int64_t i = 0;
#if defined(__F16C__) && defined(__AVX__)
    if constexpr (D == DType::f16)
      for (; i + 8 <= n; i += 8)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
#endif
    for (; i < n; ++i) dst[i] = Storage<D>::store(src[i]);
  }
}
// v[i] ← float(round_D(v[i])): the value a stored row reads back as.
template <DType D> inline void round_trip(float* v, int64_t n) {
  if constexpr (D != DType::f32) {
    Elem<D> tmp[64];
    for (int64_t i = 0; i < n; i += 64) {
      const int64_t k = n - i < 64 ? n - i : 64;
      from_f32<D>(v + i, tmp, k);
      to_f32<D>(tmp, v + i, k);
    }
  }
}

// Σ a[i] b[i] with eight partial sums (vectorisable without reassociation
// flags; the summation order is fixed, so results are deterministic).
inline float dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += a[i + k] * b[i + k];
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}
// y ← a y + k x
inline void scale_axpy(float* y, float a, float k, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = a * y[i] + k * x[i];
}
// y ← y + k x
inline void axpy(float* y, float k, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += k * x[i];
}

inline float softplus(float v) { return v > 20.0f ? v : std::log1p(std::exp(v)); }
// y · z · sigmoid(z)
inline float gate(float y, float z) { return y * z / (1.0f + std::exp(-z)); }

struct HeadParams {
  float A, bias, D;
};
inline HeadParams head_params(const Tensor& A, const Tensor& dt_bias, const Tensor& D, int64_t h) {
  return HeadParams{ptr<const float>(A, 0)[h * A.stride[0]],
                    dt_bias.defined() ? ptr<const float>(dt_bias, 0)[h * dt_bias.stride[0]] : 0.0f,
                    D.defined() ? ptr<const float>(D, 0)[h * D.stride[0]] : 0.0f};
}
inline float activate_dt(float dt, const HeadParams& hp, bool on) {
  return on ? softplus(dt + hp.bias) : dt + hp.bias;
}

inline RingCursor read_cursor(const Tensor& c, int64_t slot) {
  const int32_t* p = ptr<const int32_t>(c, slot * c.stride[0]);
  return RingCursor{p[0], p[1], p[2]};
}
inline void write_cursor(const Tensor& c, int64_t slot, RingCursor v) {
  int32_t* p = ptr<int32_t>(c, slot * c.stride[0]);
  p[0] = v.start;
  p[1] = v.count;
  p[2] = v.pending;
}

// Records of one head gathered to fp32: δ_j, x_j (P), B_j (N), a_j = exp(δ_j A),
// and the fold weights of the set (fold_weights). Buffers hold `cap`
// records, carved from the call's workspace.
struct Records {
  int32_t n = 0;
  float* delta = nullptr;  // [cap]
  float* a = nullptr;      // [cap]
  float* x = nullptr;      // [cap, P]
  float* B = nullptr;      // [cap, N]
  float* w = nullptr;      // [cap] fold weights
  float decay = 1.0f;
};
inline Records carve_records(Carver& c, int64_t cap, const Dims& d) {
  Records r;
  r.delta = c.take<float>(cap);
  r.a = c.take<float>(cap);
  r.x = c.take<float>(cap * d.P);
  r.B = c.take<float>(cap * d.N);
  r.w = c.take<float>(cap);
  return r;
}

// Gathers `count` (<= the buffers' cap) records from physical position
// `start` for head h (group g).
template <DType AD>
void gather(Records& r, const Mamba2Pool& pool, int64_t slot, int64_t h, int64_t g, float A,
            int32_t start, int32_t count, const Dims& d) {
  r.n = count;
  for (int32_t j = 0; j < count; ++j) {
    const int64_t pos = ring_pos(start, j, int32_t(d.R));
    r.delta[j] = ptr<const float>(pool.ring_dt, off3(pool.ring_dt, slot, pos, h))[0];
    r.a[j] = std::exp(r.delta[j] * A);
    to_f32<AD>(ptr<const Elem<AD>>(pool.ring_x, off3(pool.ring_x, slot, pos, h)), &r.x[j * d.P], d.P);
    to_f32<AD>(ptr<const Elem<AD>>(pool.ring_B, off3(pool.ring_B, slot, pos, g)), &r.B[j * d.N], d.N);
  }
}

// Fold weights of a record set: the state after all records is
//   S = decay · S_0 + Σ_j w_j x_j B_jᵀ,  decay = Π_j a_j,  w_j = δ_j Π_{i>j} a_i.
inline void fold_weights(Records& r) {
  float run = 1.0f;
  for (int32_t j = r.n - 1; j >= 0; --j) {
    r.w[j] = r.delta[j] * run;
    run *= r.a[j];
  }
  r.decay = run;
}
// Row p of the fold: row ← decay · row + Σ_j (w_j x_j[p]) B_j.
inline void fold_row(float* row, const Records& r, int64_t p, const Dims& d) {
  if (r.n == 0) return;
  for (int64_t n = 0; n < d.N; ++n) row[n] *= r.decay;
  for (int32_t j = 0; j < r.n; ++j) axpy(row, r.w[j] * r.x[j * d.P + p], &r.B[j * d.N], d.N);
}

// Workspace of the replay step (cpu_replay.cpp).
WorkspacePlan replay_workspace(const Dims& d, int threads);

// Calls f.template operator()<SD, AD>() for the runtime dtypes.
template <class F> void dispatch(DType state, DType act, F&& f) {
  auto with_state = [&]<DType SD>() {
    switch (act) {
      case DType::f32: return f.template operator()<SD, DType::f32>();
      case DType::f16: return f.template operator()<SD, DType::f16>();
      case DType::bf16: return f.template operator()<SD, DType::bf16>();
      default: check::fail("mamba2(cpu)", "x", "unsupported activation dtype");
    }
  };
  switch (state) {
    case DType::f32: return with_state.template operator()<DType::f32>();
    case DType::f16: return with_state.template operator()<DType::f16>();
    case DType::bf16: return with_state.template operator()<DType::bf16>();
    default: check::fail("mamba2(cpu)", "state", "unsupported state dtype");
  }
}

}  // namespace replayssm::mamba2::cpu
