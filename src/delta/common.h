// Host helpers shared by the delta CPU backends (reference and cpu): element
// offsets of strided views, typed vector loads / stores, gate activations.
// Conversions only; each backend keeps its own arithmetic.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/check.h"
#include "core/dtype.h"
#include "core/ring.h"
#include "delta/backend.h"

namespace replayssm::delta {

// Element offset of index (i0, i1, ...) of t (missing trailing indices = 0).
inline int64_t off(const Tensor& t, int64_t i0) { return i0 * t.stride[0]; }
inline int64_t off(const Tensor& t, int64_t i0, int64_t i1) { return i0 * t.stride[0] + i1 * t.stride[1]; }
inline int64_t off(const Tensor& t, int64_t i0, int64_t i1, int64_t i2) {
  return i0 * t.stride[0] + i1 * t.stride[1] + i2 * t.stride[2];
}
inline int64_t off(const Tensor& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  return i0 * t.stride[0] + i1 * t.stride[1] + i2 * t.stride[2] + i3 * t.stride[3];
}

// dst[i] = t[o + i] for i < n (unit inner stride), widened exactly.
template <class F>
inline void load_vec(const Tensor& t, int64_t o, int64_t n, F* dst) {
  switch (t.dtype) {
    case DType::f32: { auto* p = static_cast<const float*>(t.data) + o; for (int64_t i = 0; i < n; ++i) dst[i] = F(p[i]); break; }
    case DType::bf16: { auto* p = static_cast<const uint16_t*>(t.data) + o; for (int64_t i = 0; i < n; ++i) dst[i] = F(bf16_to_f32(p[i])); break; }
    case DType::f16: { auto* p = static_cast<const uint16_t*>(t.data) + o; for (int64_t i = 0; i < n; ++i) dst[i] = F(f16_to_f32(p[i])); break; }
    default: for (int64_t i = 0; i < n; ++i) dst[i] = F(load_as_f64(t.data, t.dtype, o + i)); break;
  }
}
template <class F>
inline F load_one(const Tensor& t, int64_t o) { F x; load_vec<F>(t, o, 1, &x); return x; }

// t[o + i] = src[i] rounded to t's dtype (through fp32 for 16-bit dtypes).
template <class F>
inline void store_vec(const Tensor& t, int64_t o, int64_t n, const F* src) {
  switch (t.dtype) {
    case DType::f32: { auto* p = static_cast<float*>(t.data) + o; for (int64_t i = 0; i < n; ++i) p[i] = float(src[i]); break; }
    case DType::bf16: { auto* p = static_cast<uint16_t*>(t.data) + o; for (int64_t i = 0; i < n; ++i) p[i] = f32_to_bf16(float(src[i])); break; }
    case DType::f16: { auto* p = static_cast<uint16_t*>(t.data) + o; for (int64_t i = 0; i < n; ++i) p[i] = f32_to_f16(float(src[i])); break; }
    default: for (int64_t i = 0; i < n; ++i) store_from_f64(t.data, t.dtype, o + i, double(src[i])); break;
  }
}
inline void zero_vec(const Tensor& t, int64_t o, int64_t n) {
  const int64_t es = int64_t(dtype_size(t.dtype));
  std::memset(static_cast<char*>(t.data) + o * es, 0, size_t(n * es));
}
// Raw byte copy of n elements between two tensors of the same dtype.
inline void copy_raw(const Tensor& dst, int64_t od, const Tensor& src, int64_t os, int64_t n) {
  const int64_t es = int64_t(dtype_size(src.dtype));
  std::memcpy(static_cast<char*>(dst.data) + od * es, static_cast<const char*>(src.data) + os * es,
              size_t(n * es));
}

// Value x rounded to dtype dt and widened back (the value a later read sees).
template <class F>
inline F round_to(DType dt, F x) {
  switch (dt) {
    case DType::bf16: return F(bf16_to_f32(f32_to_bf16(float(x))));
    case DType::f16: return F(f16_to_f32(f32_to_f16(float(x))));
    case DType::f32: return F(float(x));
    default: return x;
  }
}

// softplus(x) = x for x > 20, else log1p(exp(x)).
template <class F>
inline F softplus(F x) { return x > F(20) ? x : std::log1p(std::exp(x)); }
template <class F>
inline F sigmoid(F x) { return F(1) / (F(1) + std::exp(-x)); }

inline int64_t gate_width(const Dims& d) { return d.family == DeltaFamily::kda ? d.K : 1; }

// Cursor of slot s.
inline RingCursor read_cursor(const Tensor& cursor, int64_t s) {
  const int32_t* p = static_cast<const int32_t*>(cursor.data) + s * cursor.stride[0];
  return RingCursor{p[0], p[cursor.stride[1]], p[2 * cursor.stride[1]]};
}
inline void write_cursor(const Tensor& cursor, int64_t s, RingCursor c) {
  int32_t* p = static_cast<int32_t*>(cursor.data) + s * cursor.stride[0];
  p[0] = c.start;
  p[cursor.stride[1]] = c.count;
  p[2 * cursor.stride[1]] = c.pending;
}
inline bool has_rings(const DeltaPool& pool) { return pool.ring_d.defined(); }

// Commit (shared by both CPU backends; counts were validated by the caller).
inline void commit_rows(const DeltaPool& pool, const Tensor& slot, int64_t pad,
                        const Tensor& num_accepted) {
  for (int64_t b = 0; b < slot.shape[0]; ++b) {
    const int64_t s = check::index_at(slot, b);
    if (s == pad) continue;
    RingCursor c = read_cursor(pool.cursor, s);
    ring_commit(c, int32_t(check::index_at(num_accepted, b)));
    write_cursor(pool.cursor, s, c);
  }
}

}  // namespace replayssm::delta

namespace replayssm::delta {

// Per-token input tensors in step layout [B, T, ...]. A prefill's packed
// [tokens, ...] tensors are viewed as [1, tokens, ...] (leading stride 0).
struct Inputs {
  Tensor q, k, v, g, beta, A_log, dt_bias, o;
  DeltaGating gating;
};
inline Inputs inputs_of(const DeltaStep& s) {
  return Inputs{s.q, s.k, s.v, s.g, s.beta, s.A_log, s.dt_bias, s.o, s.gating};
}
inline Tensor prepend_unit_dim(const Tensor& t) {
  if (!t.defined()) return t;
  Tensor r = t;
  r.ndim = t.ndim + 1;
  r.shape[0] = 1;
  r.stride[0] = 0;
  for (int i = 0; i < t.ndim; ++i) {
    r.shape[i + 1] = t.shape[i];
    r.stride[i + 1] = t.stride[i];
  }
  return r;
}
inline Inputs inputs_of(const DeltaPrefill& p) {
  return Inputs{prepend_unit_dim(p.q), prepend_unit_dim(p.k), prepend_unit_dim(p.v),
                prepend_unit_dim(p.g), prepend_unit_dim(p.beta), p.A_log, p.dt_bias,
                prepend_unit_dim(p.o), p.gating};
}

// q scale: q_scale, or K^-1/2 when 0.
inline double q_scale_of(const DeltaGating& g, int64_t K) {
  return g.q_scale != 0.f ? double(g.q_scale) : 1.0 / std::sqrt(double(K));
}

}  // namespace replayssm::delta
