// Mamba-2 reference backend: the oracle the fast backends are tested against.
// Plain loops, fp64 arithmetic on exactly widened inputs, written for
// clarity. The replay step is computed in the replay form (checkpoint + ring
// records, output-only formula of design §2), never by running the standard
// recurrence, so that comparing it with `decode` tests the technique itself.
#include <cmath>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"
#include "core/ring.h"
#include "mamba2/backend.h"

namespace replayssm::mamba2::reference {
namespace {

// Element offset of index (i0, i1, i2, i3) in t (trailing indices unused
// beyond t.ndim).
int64_t at(const Tensor& t, int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) {
  const int64_t idx[4] = {i0, i1, i2, i3};
  int64_t off = 0;
  for (int d = 0; d < t.ndim && d < 4; ++d) off += idx[d] * t.stride[d];
  return off;
}
double get(const Tensor& t, int64_t off) { return load_as_f64(t.data, t.dtype, off); }
void put(const Tensor& t, int64_t off, double v) { store_from_f64(t.data, t.dtype, off, v); }
// Copies one element bit for bit (records are stored exactly as they came).
void copy_elem(const Tensor& dst, int64_t dst_off, const Tensor& src, int64_t src_off) {
  const size_t es = dtype_size(src.dtype);
  std::memcpy(static_cast<char*>(dst.data) + dst_off * int64_t(es),
              static_cast<const char*>(src.data) + src_off * int64_t(es), es);
}

double softplus(double v) { return v > 20.0 ? v : std::log1p(std::exp(v)); }

// Per-head constants.
struct Head {
  double A, bias, D;
};
Head head_params(const Tensor& A, const Tensor& dt_bias, const Tensor& D, int64_t h) {
  return Head{get(A, at(A, h)), dt_bias.defined() ? get(dt_bias, at(dt_bias, h)) : 0.0,
              D.defined() ? get(D, at(D, h)) : 0.0};
}
double activate_dt(double dt, const Head& hp, bool softplus_on) {
  return softplus_on ? softplus(dt + hp.bias) : dt + hp.bias;
}
// y ← y · z · sigmoid(z)
double gate(double y, double z) { return y * z / (1.0 + std::exp(-z)); }

// A head's P×N state in fp64, row-major.
using Mat = std::vector<double>;

Mat load_state(const Tensor& state, int64_t slot, int64_t h, const Dims& d) {
  Mat S(size_t(d.P * d.N));
  for (int64_t p = 0; p < d.P; ++p)
    for (int64_t n = 0; n < d.N; ++n) S[size_t(p * d.N + n)] = get(state, at(state, slot, h, p, n));
  return S;
}
void store_state(const Tensor& state, int64_t slot, int64_t h, const Mat& S, const Dims& d) {
  for (int64_t p = 0; p < d.P; ++p)
    for (int64_t n = 0; n < d.N; ++n) put(state, at(state, slot, h, p, n), S[size_t(p * d.N + n)]);
}

// One token of the standard recurrence: S ← a S + δ x Bᵀ; returns nothing.
// x(p) and Bv(n) are accessors.
template <class X, class BV>
void recur(Mat& S, double delta, double A, X&& x, BV&& Bv, const Dims& d) {
  const double a = std::exp(delta * A);
  for (int64_t p = 0; p < d.P; ++p)
    for (int64_t n = 0; n < d.N; ++n)
      S[size_t(p * d.N + n)] = a * S[size_t(p * d.N + n)] + delta * x(p) * Bv(n);
}

// y_p = Σ_n S[p, n] C_n
template <class CV>
double row_dot(const Mat& S, int64_t p, CV&& Cv, const Dims& d) {
  double acc = 0;
  for (int64_t n = 0; n < d.N; ++n) acc += S[size_t(p * d.N + n)] * Cv(n);
  return acc;
}

// Folds `count` records starting at physical position `start` into S.
void fold(Mat& S, const Mamba2Pool& pool, int64_t slot, int64_t h, double A, int32_t start,
          int32_t count, const Dims& d) {
  const int64_t g = h / (d.H / d.G);
  for (int32_t i = 0; i < count; ++i) {
    const int64_t pos = ring_pos(start, i, int32_t(d.R));
    const double delta = get(pool.ring_dt, at(pool.ring_dt, slot, pos, h));
    recur(
        S, delta, A, [&](int64_t p) { return get(pool.ring_x, at(pool.ring_x, slot, pos, h, p)); },
        [&](int64_t n) { return get(pool.ring_B, at(pool.ring_B, slot, pos, g, n)); }, d);
  }
}

RingCursor read_cursor(const Tensor& c, int64_t slot) {
  const auto* p = static_cast<const int32_t*>(c.data) + slot * c.stride[0];
  return RingCursor{p[0], p[1], p[2]};
}
void write_cursor(const Tensor& c, int64_t slot, RingCursor v) {
  auto* p = static_cast<int32_t*>(c.data) + slot * c.stride[0];
  p[0] = v.start;
  p[1] = v.count;
  p[2] = v.pending;
}

// Zeroes the T·H·P outputs of row b of a [B, T, H, P] tensor.
void zero_row(const Tensor& y, int64_t b, const Dims& d) {
  for (int64_t t = 0; t < d.T; ++t)
    for (int64_t h = 0; h < d.H; ++h)
      for (int64_t p = 0; p < d.P; ++p) put(y, at(y, b, t, h, p), 0.0);
}

// Standard recurrence over the T tokens of row b for head h, starting from S.
// After token t, `after_token(t, S)` is called (snapshot writes).
template <class AfterToken>
void run_tokens(const Mamba2Step& s, int64_t b, int64_t h, Mat& S, const Dims& d,
                AfterToken&& after_token) {
  const Head hp = head_params(s.A, s.dt_bias, s.D, h);
  const int64_t g = h / (d.H / d.G);
  for (int64_t t = 0; t < d.T; ++t) {
    const double delta = activate_dt(get(s.dt, at(s.dt, b, t, h)), hp, s.dt_softplus);
    auto x = [&](int64_t p) { return get(s.x, at(s.x, b, t, h, p)); };
    recur(S, delta, hp.A, x, [&](int64_t n) { return get(s.Bm, at(s.Bm, b, t, g, n)); }, d);
    for (int64_t p = 0; p < d.P; ++p) {
      double y = row_dot(S, p, [&](int64_t n) { return get(s.Cm, at(s.Cm, b, t, g, n)); }, d);
      y += hp.D * x(p);
      if (s.z.defined()) y = gate(y, get(s.z, at(s.z, b, t, h, p)));
      put(s.y, at(s.y, b, t, h, p), y);
    }
    after_token(t, S);
  }
}

}  // namespace

void decode(const Mamba2Step& s, const Tensor& state, const Dims& d) {
  for (int64_t b = 0; b < d.B; ++b) {
    const int64_t slot = check::index_at(s.slot, b);
    if (slot == s.pad_slot_id) {
      zero_row(s.y, b, d);
      continue;
    }
    for (int64_t h = 0; h < d.H; ++h) {
      Mat S = load_state(state, slot, h, d);
      run_tokens(s, b, h, S, d, [](int64_t, const Mat&) {});
      store_state(state, slot, h, S, d);
    }
  }
}

void snapshot_decode(const Mamba2Step& s, const Tensor& state, const Tensor& idx,
                     const Tensor& num_accepted, const Dims& d) {
  for (int64_t b = 0; b < d.B; ++b) {
    if (check::index_at(idx, b, 0) == s.pad_slot_id) {
      zero_row(s.y, b, d);
      continue;
    }
    const int64_t a = num_accepted.defined() ? check::index_at(num_accepted, b) : 1;
    const int64_t src = check::index_at(idx, b, a - 1);
    for (int64_t h = 0; h < d.H; ++h) {
      Mat S = load_state(state, src, h, d);
      run_tokens(s, b, h, S, d, [&](int64_t t, const Mat& St) {
        store_state(state, check::index_at(idx, b, t), h, St, d);
      });
    }
  }
}

void prefill(const Mamba2Prefill& p, const Mamba2Pool& pool, const Dims& d) {
  const bool ring = pool.cursor.defined();
  for (int64_t b = 0; b < d.B; ++b) {
    const int64_t begin = check::index_at(p.cu_seqlens, b), end = check::index_at(p.cu_seqlens, b + 1);
    const int64_t slot = check::index_at(p.slot, b);
    if (slot == p.pad_slot_id) {
      for (int64_t i = begin; i < end; ++i)
        for (int64_t h = 0; h < d.H; ++h)
          for (int64_t q = 0; q < d.P; ++q) put(p.y, at(p.y, i, h, q), 0.0);
      continue;
    }
    const bool from_current = p.initial.defined() && check::index_at(p.initial, b) != 0;
    const RingCursor c = ring ? read_cursor(pool.cursor, slot) : RingCursor{0, 0, 0};
    for (int64_t h = 0; h < d.H; ++h) {
      const Head hp = head_params(p.A, p.dt_bias, p.D, h);
      const int64_t g = h / (d.H / d.G);
      Mat S(size_t(d.P * d.N), 0.0);
      if (from_current) {
        S = load_state(pool.state, slot, h, d);
        if (ring) fold(S, pool, slot, h, hp.A, c.start, c.count, d);
      }
      for (int64_t i = begin; i < end; ++i) {
        const double delta = activate_dt(get(p.dt, at(p.dt, i, h)), hp, p.dt_softplus);
        auto x = [&](int64_t q) { return get(p.x, at(p.x, i, h, q)); };
        recur(S, delta, hp.A, x, [&](int64_t n) { return get(p.Bm, at(p.Bm, i, g, n)); }, d);
        for (int64_t q = 0; q < d.P; ++q) {
          double y = row_dot(S, q, [&](int64_t n) { return get(p.Cm, at(p.Cm, i, g, n)); }, d);
          y += hp.D * x(q);
          if (p.z.defined()) y = gate(y, get(p.z, at(p.z, i, h, q)));
          put(p.y, at(p.y, i, h, q), y);
        }
      }
      store_state(pool.state, slot, h, S, d);
    }
    if (ring) write_cursor(pool.cursor, slot, RingCursor{c.start, 0, 0});
  }
}

void replay_step(const Mamba2Step& s, const Mamba2Pool& pool, const Tensor& num_accepted,
                 bool commit_all, const Dims& d) {
  const int32_t R = int32_t(d.R);
  for (int64_t b = 0; b < d.B; ++b) {
    const int64_t slot = check::index_at(s.slot, b);
    if (slot == s.pad_slot_id) {
      zero_row(s.y, b, d);
      continue;
    }
    RingCursor c = read_cursor(pool.cursor, slot);
    if (num_accepted.defined()) ring_commit(c, int32_t(check::index_at(num_accepted, b)));
    const StepPlan plan = ring_plan_step(c, int32_t(d.T), int32_t(d.L), R);

    // (1) Flush: fold the committed records into the checkpoint, written once.
    if (plan.flush)
      for (int64_t h = 0; h < d.H; ++h) {
        Mat S = load_state(pool.state, slot, h, d);
        fold(S, pool, slot, h, get(s.A, at(s.A, h)), plan.fold_start, plan.fold_count, d);
        store_state(pool.state, slot, h, S, d);
      }

    // (2) Append the T records: x and B as they came, δ activated in fp32.
    for (int64_t t = 0; t < d.T; ++t) {
      const int64_t pos = ring_pos(plan.append_start, int32_t(t), R);
      for (int64_t h = 0; h < d.H; ++h) {
        const Head hp = head_params(s.A, s.dt_bias, s.D, h);
        const double delta = activate_dt(get(s.dt, at(s.dt, b, t, h)), hp, s.dt_softplus);
        put(pool.ring_dt, at(pool.ring_dt, slot, pos, h), delta);
        for (int64_t p = 0; p < d.P; ++p)
          copy_elem(pool.ring_x, at(pool.ring_x, slot, pos, h, p), s.x, at(s.x, b, t, h, p));
      }
      for (int64_t g = 0; g < d.G; ++g)
        for (int64_t n = 0; n < d.N; ++n)
          copy_elem(pool.ring_B, at(pool.ring_B, slot, pos, g, n), s.Bm, at(s.Bm, b, t, g, n));
    }

    // (3) Outputs from checkpoint + records only. Token t is logical record
    // m = hist_count + t; with Λ_m = A Σ_{i≤m} δ_i:
    //   y_m = e^{Λ_m} (S_0 C_m) + Σ_{j≤m} δ_j e^{Λ_m − Λ_j} (B_j·C_m) x_j + D x_m
    for (int64_t h = 0; h < d.H; ++h) {
      const Head hp = head_params(s.A, s.dt_bias, s.D, h);
      const int64_t g = h / (d.H / d.G);
      const Mat S0 = load_state(pool.state, slot, h, d);
      const int32_t records = plan.hist_count + int32_t(d.T);
      std::vector<int64_t> pos(static_cast<size_t>(records));
      std::vector<double> cum(static_cast<size_t>(records));  // Σ_{i≤j} δ_i
      double run = 0;
      for (int32_t j = 0; j < records; ++j) {
        pos[size_t(j)] = ring_pos(plan.hist_start, j, R);
        run += get(pool.ring_dt, at(pool.ring_dt, slot, pos[size_t(j)], h));
        cum[size_t(j)] = run;
      }
      for (int64_t t = 0; t < d.T; ++t) {
        const int32_t m = plan.hist_count + int32_t(t);
        auto Cv = [&](int64_t n) { return get(s.Cm, at(s.Cm, b, t, g, n)); };
        // Per record j ≤ m: δ_j e^{Λ_m − Λ_j} (B_j·C_m), shared by all p.
        std::vector<double> coef(size_t(m + 1));
        for (int32_t j = 0; j <= m; ++j) {
          const int64_t pj = pos[size_t(j)];
          double bc = 0;
          for (int64_t n = 0; n < d.N; ++n)
            bc += get(pool.ring_B, at(pool.ring_B, slot, pj, g, n)) * Cv(n);
          const double delta_j = get(pool.ring_dt, at(pool.ring_dt, slot, pj, h));
          coef[size_t(j)] = delta_j * std::exp(hp.A * (cum[size_t(m)] - cum[size_t(j)])) * bc;
        }
        const double decay = std::exp(hp.A * cum[size_t(m)]);
        for (int64_t p = 0; p < d.P; ++p) {
          double y = decay * row_dot(S0, p, Cv, d);
          for (int32_t j = 0; j <= m; ++j)
            y += coef[size_t(j)] * get(pool.ring_x, at(pool.ring_x, slot, pos[size_t(j)], h, p));
          y += hp.D * get(s.x, at(s.x, b, t, h, p));
          if (s.z.defined()) y = gate(y, get(s.z, at(s.z, b, t, h, p)));
          put(s.y, at(s.y, b, t, h, p), y);
        }
      }
    }

    // (4) Cursor: the new records are pending, or committed with commit_all.
    RingCursor next = plan.next;
    if (commit_all) ring_commit(next, next.pending);
    write_cursor(pool.cursor, slot, next);
  }
}

void commit(const Mamba2Pool& pool, const Tensor& slot, int64_t pad, const Tensor& num_accepted,
            const Dims& d) {
  for (int64_t b = 0; b < d.B; ++b) {
    const int64_t s = check::index_at(slot, b);
    if (s == pad) continue;
    RingCursor c = read_cursor(pool.cursor, s);
    ring_commit(c, int32_t(check::index_at(num_accepted, b)));
    write_cursor(pool.cursor, s, c);
  }
}

void materialize(const Mamba2Pool& pool, const Tensor& slot, int64_t pad, const Tensor& out,
                 const Dims& d) {
  const bool ring = pool.cursor.defined();
  for (int64_t b = 0; b < d.B; ++b) {
    const int64_t s = check::index_at(slot, b);
    if (s == pad) continue;
    const RingCursor c = ring ? read_cursor(pool.cursor, s) : RingCursor{0, 0, 0};
    for (int64_t h = 0; h < d.H; ++h) {
      Mat S = load_state(pool.state, s, h, d);
      if (ring) fold(S, pool, s, h, get(pool.A, at(pool.A, h)), c.start, c.count, d);
      store_state(out, b, h, S, d);
    }
  }
}

void flush(const Mamba2Pool& pool, const Tensor& slot, int64_t pad, const Dims& d) {
  for (int64_t b = 0; b < d.B; ++b) {
    const int64_t s = check::index_at(slot, b);
    if (s == pad) continue;
    const RingCursor c = read_cursor(pool.cursor, s);
    for (int64_t h = 0; h < d.H; ++h) {
      Mat S = load_state(pool.state, s, h, d);
      fold(S, pool, s, h, get(pool.A, at(pool.A, h)), c.start, c.count, d);
      store_state(pool.state, s, h, S, d);
    }
    write_cursor(pool.cursor, s, RingCursor{ring_pos(c.start, c.count, int32_t(d.R)), 0, 0});
  }
}

}  // namespace replayssm::mamba2::reference
