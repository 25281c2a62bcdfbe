// Mamba-2 test fixture: owning pools and step inputs, random parameters in
// three decay regimes, and an independent fp64 sequential recurrence (the
// "standard" oracle, sharing no code with src/mamba2).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/ring.h"
#include "replayssm/mamba2.h"
#include "test_util.h"

namespace mamba2_test {

using replayssm::DType;
using replayssm::Tensor;
using replayssm::test::HostTensor;

struct Shape {
  int64_t H, P, N, G;
};

enum class Decay { normal, near_one, near_zero };

// Per-head parameters, and the raw-dt range that goes with the regime.
struct Params {
  HostTensor A, dt_bias, D;
  double dt_lo = -3.0, dt_hi = 0.5;
  Params(const Shape& s, std::mt19937& rng, Decay regime = Decay::normal)
      : A(DType::f32, {s.H}), dt_bias(DType::f32, {s.H}), D(DType::f32, {s.H}) {
    std::uniform_real_distribution<double> u(0, 1);
    for (int64_t h = 0; h < s.H; ++h) {
      switch (regime) {
        case Decay::normal: A.set(h, -std::exp(std::log(0.5) + u(rng) * std::log(24.0))); break;
        case Decay::near_one: A.set(h, -1e-4 * (0.5 + u(rng))); break;
        case Decay::near_zero: A.set(h, -8.0 * (0.8 + 0.4 * u(rng))); break;
      }
      dt_bias.set(h, u(rng) - 0.5);
      D.set(h, u(rng) * 2 - 1);
    }
    if (regime == Decay::near_one) dt_lo = -6, dt_hi = -3;
    if (regime == Decay::near_zero) dt_lo = 2, dt_hi = 6;
  }
};

inline double softplus(double v) { return v > 20 ? v : std::log1p(std::exp(v)); }

// Owning replay pool [S, ...] with ring length R = L + T_max.
struct Pool {
  HostTensor state, ring_x, ring_dt, ring_B, cursor;
  int64_t L, R;
  const Params* params;
  Pool(const Shape& s, int64_t S, int64_t L_, int64_t T_max, DType sd, DType act, const Params& p)
      : state(sd, {S, s.H, s.P, s.N}), ring_x(act, {S, L_ + T_max, s.H, s.P}),
        ring_dt(DType::f32, {S, L_ + T_max, s.H}), ring_B(act, {S, L_ + T_max, s.G, s.N}),
        cursor(DType::i32, {S, 3}), L(L_), R(L_ + T_max), params(&p) {}
  replayssm::Mamba2Pool view() const {
    replayssm::Mamba2Pool v;
    v.state = state;
    v.ring_x = ring_x;
    v.ring_dt = ring_dt;
    v.ring_B = ring_B;
    v.cursor = cursor;
    v.L = L;
    v.A = params->A;
    return v;
  }
  replayssm::RingCursor cur(int64_t slot) const {
    const int32_t* c = cursor.as<int32_t>() + slot * 3;
    return {c[0], c[1], c[2]};
  }
  void set_cur(int64_t slot, replayssm::RingCursor c) {
    int32_t* p = cursor.as<int32_t>() + slot * 3;
    p[0] = c.start, p[1] = c.count, p[2] = c.pending;
  }
  // Bytes of one slot's row of every pool tensor.
  std::vector<uint8_t> slot_bytes(int64_t slot) const {
    std::vector<uint8_t> out;
    for (const HostTensor* t : {&state, &ring_x, &ring_dt, &ring_B, &cursor}) {
      const size_t row = t->bytes() / size_t(t->t().shape[0]);
      const auto* p = static_cast<const uint8_t*>(t->data()) + row * size_t(slot);
      out.insert(out.end(), p, p + row);
    }
    return out;
  }
  std::vector<uint8_t> state_bytes(int64_t slot) const {
    const size_t row = state.bytes() / size_t(state.t().shape[0]);
    const auto* p = static_cast<const uint8_t*>(state.data()) + row * size_t(slot);
    return {p, p + row};
  }
  void copy_from(const Pool& o) {
    state.copy_from(o.state), ring_x.copy_from(o.ring_x), ring_dt.copy_from(o.ring_dt);
    ring_B.copy_from(o.ring_B), cursor.copy_from(o.cursor);
  }
  bool bytes_equal(const Pool& o) const {
    return state.bytes_equal(o.state) && ring_x.bytes_equal(o.ring_x) &&
           ring_dt.bytes_equal(o.ring_dt) && ring_B.bytes_equal(o.ring_B) &&
           cursor.bytes_equal(o.cursor);
  }
};

// Inputs of one step: B rows, T tokens.
struct Step {
  HostTensor x, dt, Bm, Cm, z, slot, y;
  int64_t B, T;
  Step(const Shape& s, int64_t B_, int64_t T_, DType act, bool with_z, DType dt_dtype = DType::f32)
      : x(act, {B_, T_, s.H, s.P}), dt(dt_dtype, {B_, T_, s.H}), Bm(act, {B_, T_, s.G, s.N}),
        Cm(act, {B_, T_, s.G, s.N}), slot(DType::i32, {B_}), y(act, {B_, T_, s.H, s.P}), B(B_), T(T_) {
    if (with_z) z.reset(act, {B_, T_, s.H, s.P});
  }
  void randomize(std::mt19937& rng, const Params& p) {
    x.fill_normal(rng);
    Bm.fill_normal(rng, 0, 0.5);
    Cm.fill_normal(rng, 0, 0.5);
    dt.fill_uniform(rng, p.dt_lo, p.dt_hi);
    if (z.data()) z.fill_normal(rng);
    y.fill_nan();
  }
  replayssm::Mamba2Step view(const Params& p) const {
    replayssm::Mamba2Step v;
    v.x = x, v.dt = dt, v.Bm = Bm, v.Cm = Cm;
    if (z.data()) v.z = z;
    v.A = p.A, v.dt_bias = p.dt_bias, v.D = p.D;
    v.slot = slot, v.y = y;
    return v;
  }
  void set_slots(const std::vector<int64_t>& s) {
    for (size_t i = 0; i < s.size(); ++i) slot.set(int64_t(i), double(s[i]));
  }
  // Byte copy of every tensor of a step of the same shape.
  void copy_from_all(const Step& o) {
    x.copy_from(o.x), dt.copy_from(o.dt), Bm.copy_from(o.Bm), Cm.copy_from(o.Cm);
    slot.copy_from(o.slot), y.copy_from(o.y);
    if (z.data()) z.copy_from(o.z);
  }
  // Token (b, t) copied from another step (same shape per token).
  void copy_token(int64_t b, int64_t t, const Step& o, int64_t ob, int64_t ot) {
    auto cp = [&](HostTensor& dst, const HostTensor& src) {
      const int64_t per = dst.numel() / (B * T), oper = src.numel() / (o.B * o.T);
      for (int64_t i = 0; i < per; ++i) dst.set((b * T + t) * per + i, src.get((ob * o.T + ot) * oper + i));
    };
    cp(x, o.x), cp(dt, o.dt), cp(Bm, o.Bm), cp(Cm, o.Cm);
    if (z.data()) cp(z, o.z);
  }
  // Outputs of row b, all tokens, as doubles.
  std::vector<double> row_y(int64_t b) const {
    const int64_t per = y.numel() / B;
    std::vector<double> v(static_cast<size_t>(per));
    for (int64_t i = 0; i < per; ++i) v[size_t(i)] = y.get(b * per + i);
    return v;
  }
};

// The standard recurrence in fp64 on one row: S [H, P, N].
struct Oracle {
  Shape s;
  std::vector<double> S;
  explicit Oracle(const Shape& sh) : s(sh), S(size_t(sh.H * sh.P * sh.N), 0.0) {}
  // Applies token (b, t) of `st`; appends its H·P outputs to y when given.
  void apply(const Step& st, int64_t b, int64_t t, const Params& p, std::vector<double>* y) {
    const int64_t H = s.H, P = s.P, N = s.N, hg = s.H / s.G;
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / hg, xi = ((b * st.T + t) * H + h) * P, bi = ((b * st.T + t) * s.G + g) * N;
      const double delta = softplus(st.dt.get((b * st.T + t) * H + h) + p.dt_bias.get(h));
      const double a = std::exp(delta * p.A.get(h));
      for (int64_t q = 0; q < P; ++q) {
        double* row = &S[size_t((h * P + q) * N)];
        const double xv = st.x.get(xi + q);
        double acc = 0;
        for (int64_t n = 0; n < N; ++n) {
          row[n] = a * row[n] + delta * xv * st.Bm.get(bi + n);
          acc += row[n] * st.Cm.get(bi + n);
        }
        if (y) {
          double v = acc + p.D.get(h) * xv;
          if (st.z.data()) {
            const double z = st.z.get(xi + q);
            v = v * z / (1 + std::exp(-z));
          }
          y->push_back(v);
        }
      }
    }
  }
  // Outputs of all T tokens of row b, without changing the state.
  std::vector<double> window(const Step& st, int64_t b, const Params& p) const {
    Oracle tmp = *this;
    std::vector<double> y;
    for (int64_t t = 0; t < st.T; ++t) tmp.apply(st, b, t, p, &y);
    return y;
  }
  void commit(const Step& st, int64_t b, int64_t a, const Params& p) {
    for (int64_t t = 0; t < a; ++t) apply(st, b, t, p, nullptr);
  }
};

// State of slot `slot` of a pool as doubles [H·P·N].
inline std::vector<double> state_f64(const HostTensor& state, int64_t slot) {
  const int64_t per = state.numel() / state.t().shape[0];
  std::vector<double> v(static_cast<size_t>(per));
  for (int64_t i = 0; i < per; ++i) v[size_t(i)] = state.get(slot * per + i);
  return v;
}

// The less precise of two dtypes (the key of test::tolerance).
inline DType limiting(DType a, DType b) {
  auto rank = [](DType d) { return d == DType::bf16 ? 0 : d == DType::f16 ? 1 : 2; };
  return rank(a) <= rank(b) ? a : b;
}

inline replayssm::Exec exec_of(replayssm::Backend b, int threads = 0) {
  replayssm::Exec e;
  e.backend = b;
  e.num_threads = threads;
  return e;
}

}  // namespace mamba2_test
