// The delta oracle: plain loops in fp64 on exactly widened inputs. Replay
// steps are computed in the replay form of design/replay.md §2 (never
// building S_{m-1}), standard decode by the plain recurrence. Per value head h
// (key head h / (HV/H)), with per-channel decays (GDN: the scalar broadcast
// over K):
//   α_m S_{m−1} u = S_0 (e^{Λ_m} ⊙ u) + Σ_{j<m} d_j ((e^{Λ_m−Λ_j} ⊙ k_j)·u),  u ∈ {k_m, q_m}
//   d_m = β_m (v_m − α_m S_{m−1} k_m),  o_m = α_m S_{m−1} q_m + (k_m·q_m) d_m
// Records are read back from the ring as stored (d rounded to ring_d's dtype,
// k·ks with ks and g in fp32), the window's own records included.
#include <cmath>
#include <vector>

#include "delta/common.h"

namespace replayssm::delta::reference {
namespace {

using Vec = std::vector<double>;

// Activated inputs of one token of one row (fp64).
struct Token {
  Vec k, ks, q;  // [H*K] raw k, [H] scale, [H*K] q̂ (normalised and scaled)
  Vec g;         // [HV*K] log-decay per channel (GDN: broadcast)
  Vec beta;      // [HV]
  Vec v;         // [HV*V]
};

Token prep(const Inputs& in, const Dims& d, int64_t r, int64_t t) {
  const int64_t H = d.H, HV = d.HV, K = d.K, V = d.V, GW = gate_width(d);
  Token tk{Vec(size_t(H * K)), Vec(size_t(H)), Vec(size_t(H * K)), Vec(size_t(HV * K)),
           Vec(size_t(HV)), Vec(size_t(HV * V))};
  const double qsc = q_scale_of(in.gating, K);
  for (int64_t h = 0; h < H; ++h) {
    double* k = &tk.k[size_t(h * K)];
    double* q = &tk.q[size_t(h * K)];
    load_vec(in.k, off(in.k, r, t, h), K, k);
    load_vec(in.q, off(in.q, r, t, h), K, q);
    double sk = 0, sq = 0;
    for (int64_t i = 0; i < K; ++i) { sk += k[i] * k[i]; sq += q[i] * q[i]; }
    tk.ks[size_t(h)] = in.gating.l2norm_qk ? 1.0 / std::sqrt(sk + 1e-6) : 1.0;
    const double qs = (in.gating.l2norm_qk ? 1.0 / std::sqrt(sq + 1e-6) : 1.0) * qsc;
    for (int64_t i = 0; i < K; ++i) q[i] *= qs;
  }
  std::vector<double> a(static_cast<size_t>(GW)), bias(static_cast<size_t>(GW), 0.0);
  for (int64_t h = 0; h < HV; ++h) {
    if (d.family == DeltaFamily::kda) load_vec(in.g, off(in.g, r, t, h), K, a.data());
    else a[0] = load_one<double>(in.g, off(in.g, r, t, h));
    if (in.gating.raw_gate) {
      const double A = -std::exp(load_one<double>(in.A_log, off(in.A_log, h)));
      if (in.dt_bias.defined()) {
        if (d.family == DeltaFamily::kda) load_vec(in.dt_bias, off(in.dt_bias, h, 0), K, bias.data());
        else bias[0] = load_one<double>(in.dt_bias, off(in.dt_bias, h));
      }
      for (int64_t i = 0; i < GW; ++i) a[size_t(i)] = A * softplus(a[size_t(i)] + bias[size_t(i)]);
    }
    for (int64_t i = 0; i < K; ++i) tk.g[size_t(h * K + i)] = a[size_t(GW == 1 ? 0 : i)];
    const double b = load_one<double>(in.beta, off(in.beta, r, t, h));
    tk.beta[size_t(h)] = in.gating.raw_beta ? sigmoid(b) : b;
    load_vec(in.v, off(in.v, r, t, h), V, &tk.v[size_t(h * V)]);
  }
  return tk;
}

// One token of the standard recurrence on S (V×K) of value head h:
// S ← S Diag(α); d = β (v − S k̂); S ← S + d k̂ᵀ; o = S q̂.
void apply_token(Vec& S, const Token& tk, const Dims& d, int64_t h, double* o) {
  const int64_t K = d.K, V = d.V, kh = h / (d.HV / d.H);
  const double* kr = &tk.k[size_t(kh * K)];
  const double ks = tk.ks[size_t(kh)];
  const double* q = &tk.q[size_t(kh * K)];
  const double* g = &tk.g[size_t(h * K)];
  for (int64_t v = 0; v < V; ++v) {
    double* s = &S[size_t(v * K)];
    double sk = 0;
    for (int64_t i = 0; i < K; ++i) { s[i] *= std::exp(g[i]); sk += s[i] * kr[i] * ks; }
    const double dv = tk.beta[size_t(h)] * (tk.v[size_t(h * V + v)] - sk);
    double y = 0;
    for (int64_t i = 0; i < K; ++i) { s[i] += dv * kr[i] * ks; y += s[i] * q[i]; }
    o[v] = y;
  }
}

Vec load_state(const Tensor& st, const Dims& d, int64_t s, int64_t h) {
  Vec S(static_cast<size_t>(d.V * d.K));
  for (int64_t v = 0; v < d.V; ++v) load_vec(st, off(st, s, h, v), d.K, &S[size_t(v * d.K)]);
  return S;
}
void store_state(const Tensor& st, const Dims& d, int64_t s, int64_t h, const Vec& S) {
  for (int64_t v = 0; v < d.V; ++v) store_vec(st, off(st, s, h, v), d.K, &S[size_t(v * d.K)]);
}

// Records j < n of value head h of slot s from ring position `start`:
// kk [n*K] = k_j·ks_j, lam [n*K] = Λ_j = Σ_{i<=j} g_i (per channel), dd [n*V] for j < nd.
struct Records {
  Vec kk, lam, dd;
};
Records load_records(const DeltaPool& pool, const Dims& d, int64_t s, int64_t h, int32_t start,
                     int64_t n, int64_t nd) {
  const int64_t K = d.K, V = d.V, kh = h / (d.HV / d.H), R = d.R;
  Records rc{Vec(size_t(n * K)), Vec(size_t(n * K)), Vec(size_t(n * V))};
  Vec g(static_cast<size_t>(K));
  for (int64_t j = 0; j < n; ++j) {
    const int64_t p = ring_pos(start, int32_t(j), int32_t(R));
    double* kk = &rc.kk[size_t(j * K)];
    load_vec(pool.ring_k, off(pool.ring_k, s, p, kh), K, kk);
    const double ks = load_one<double>(pool.ring_ks, off(pool.ring_ks, s, p, kh));
    for (int64_t i = 0; i < K; ++i) kk[i] *= ks;
    if (d.family == DeltaFamily::kda) load_vec(pool.ring_g, off(pool.ring_g, s, p, h, 0), K, g.data());
    else std::fill(g.begin(), g.end(), load_one<double>(pool.ring_g, off(pool.ring_g, s, p, h)));
    for (int64_t i = 0; i < K; ++i) rc.lam[size_t(j * K + i)] = (j ? rc.lam[size_t((j - 1) * K + i)] : 0.0) + g[size_t(i)];
    if (j < nd) load_vec(pool.ring_d, off(pool.ring_d, s, p, h), V, &rc.dd[size_t(j * V)]);
  }
  return rc;
}

// Checkpoint of value head h folded with its n records from `start`:
// S_n = S_0 Diag(e^{Λ_n}) + Σ_{j<n} d_j (e^{Λ_n−Λ_j} ⊙ k_j)ᵀ.
Vec fold(const DeltaPool& pool, const Dims& d, int64_t s, int64_t h, int32_t start, int64_t n) {
  Vec S = load_state(pool.state, d, s, h);
  if (n == 0) return S;
  const int64_t K = d.K, V = d.V;
  Records rc = load_records(pool, d, s, h, start, n, n);
  const double* lam_n = &rc.lam[size_t((n - 1) * K)];
  for (int64_t v = 0; v < V; ++v)
    for (int64_t i = 0; i < K; ++i) {
      double x = S[size_t(v * K + i)] * std::exp(lam_n[i]);
      for (int64_t j = 0; j < n; ++j)
        x += rc.dd[size_t(j * V + v)] * std::exp(lam_n[i] - rc.lam[size_t(j * K + i)]) * rc.kk[size_t(j * K + i)];
      S[size_t(v * K + i)] = x;
    }
  return S;
}

// Current state of value head h of slot s: checkpoint ⊕ committed records.
Vec current_state(const DeltaPool& pool, const Dims& d, int64_t s, int64_t h) {
  if (!has_rings(pool)) return load_state(pool.state, d, s, h);
  const RingCursor c = read_cursor(pool.cursor, s);
  return fold(pool, d, s, h, c.start, c.count);
}

// Flush slot s: fold its committed records into the checkpoint.
void flush_slot(const DeltaPool& pool, const Dims& d, int64_t s) {
  RingCursor c = read_cursor(pool.cursor, s);
  if (c.count == 0) return;
  for (int64_t h = 0; h < d.HV; ++h) store_state(pool.state, d, s, h, fold(pool, d, s, h, c.start, c.count));
  c.start = ring_pos(c.start, c.count, int32_t(d.R));
  c.count = 0;
  write_cursor(pool.cursor, s, c);
}

void zero_outputs(const Tensor& o, const Dims& d, int64_t r, int64_t t0, int64_t n) {
  for (int64_t t = t0; t < t0 + n; ++t)
    for (int64_t h = 0; h < d.HV; ++h) zero_vec(o, off(o, r, t, h), d.V);
}

}  // namespace

void decode(const DeltaStep& step, const Tensor& state, const Dims& d) {
  const Inputs in = inputs_of(step);
  Vec o(static_cast<size_t>(d.V));
  for (int64_t b = 0; b < d.B; ++b) {
    const int64_t s = check::index_at(step.slot, b);
    if (s == step.pad_slot_id) { zero_outputs(step.o, d, b, 0, d.T); continue; }
    std::vector<Token> toks;
    for (int64_t t = 0; t < d.T; ++t) toks.push_back(prep(in, d, b, t));
    for (int64_t h = 0; h < d.HV; ++h) {
      Vec S = load_state(state, d, s, h);
      for (int64_t t = 0; t < d.T; ++t) {
        apply_token(S, toks[size_t(t)], d, h, o.data());
        store_vec(step.o, off(step.o, b, t, h), d.V, o.data());
      }
      store_state(state, d, s, h, S);
    }
  }
}

void snapshot_decode(const DeltaStep& step, const Tensor& state, const Tensor& idx,
                     const Tensor& num_accepted, const Dims& d) {
  const Inputs in = inputs_of(step);
  Vec o(static_cast<size_t>(d.V));
  for (int64_t b = 0; b < d.B; ++b) {
    if (check::index_at(idx, b, 0) == step.pad_slot_id) { zero_outputs(step.o, d, b, 0, d.T); continue; }
    const int64_t a = num_accepted.defined() ? check::index_at(num_accepted, b) : 1;
    const int64_t src = check::index_at(idx, b, a - 1);
    std::vector<Token> toks;
    for (int64_t t = 0; t < d.T; ++t) toks.push_back(prep(in, d, b, t));
    for (int64_t h = 0; h < d.HV; ++h) {
      Vec S = load_state(state, d, src, h);
      for (int64_t t = 0; t < d.T; ++t) {
        apply_token(S, toks[size_t(t)], d, h, o.data());
        store_vec(step.o, off(step.o, b, t, h), d.V, o.data());
        const int64_t dst = check::index_at(idx, b, t);
        if (dst != step.pad_slot_id) store_state(state, d, dst, h, S);
      }
    }
  }
}

void prefill(const DeltaPrefill& p, const DeltaPool& pool, const Dims& d) {
  const Inputs in = inputs_of(p);
  Vec o(static_cast<size_t>(d.V));
  for (int64_t b = 0; b < d.B; ++b) {
    const int64_t t0 = check::index_at(p.cu_seqlens, b), n = check::index_at(p.cu_seqlens, b + 1) - t0;
    const int64_t s = check::index_at(p.slot, b);
    if (s == p.pad_slot_id) { zero_outputs(in.o, d, 0, t0, n); continue; }
    const bool init = p.initial.defined() && check::index_at(p.initial, b) != 0;
    std::vector<Token> toks;
    for (int64_t t = 0; t < n; ++t) toks.push_back(prep(in, d, 0, t0 + t));
    std::vector<Vec> states;
    for (int64_t h = 0; h < d.HV; ++h)
      states.push_back(init ? current_state(pool, d, s, h) : Vec(size_t(d.V * d.K), 0.0));
    for (int64_t h = 0; h < d.HV; ++h) {
      for (int64_t t = 0; t < n; ++t) {
        apply_token(states[size_t(h)], toks[size_t(t)], d, h, o.data());
        store_vec(in.o, off(in.o, 0, t0 + t, h), d.V, o.data());
      }
      store_state(pool.state, d, s, h, states[size_t(h)]);
    }
    if (pool.cursor.defined()) {
      RingCursor c = read_cursor(pool.cursor, s);
      write_cursor(pool.cursor, s, RingCursor{c.start, 0, 0});
    }
  }
}

void replay_step(const DeltaStep& step, const DeltaPool& pool, const Tensor& num_accepted,
                 bool commit_all, const Dims& d) {
  const Inputs in = inputs_of(step);
  const int64_t H = d.H, HV = d.HV, K = d.K, V = d.V, T = d.T;
  const int32_t R = int32_t(d.R);
  for (int64_t b = 0; b < d.B; ++b) {
    const int64_t s = check::index_at(step.slot, b);
    if (s == step.pad_slot_id) { zero_outputs(step.o, d, b, 0, T); continue; }
    RingCursor c = read_cursor(pool.cursor, s);
    if (num_accepted.defined()) ring_commit(c, int32_t(check::index_at(num_accepted, b)));
    const StepPlan p = ring_plan_step(c, int32_t(T), int32_t(d.L), R);
    if (p.flush)
      for (int64_t h = 0; h < HV; ++h)
        store_state(pool.state, d, s, h, fold(pool, d, s, h, p.fold_start, p.fold_count));

    // Append the window's k, ks, g records (stored as the replay form reads them).
    std::vector<Token> toks;
    for (int64_t t = 0; t < T; ++t) {
      toks.push_back(prep(in, d, b, t));
      const Token& tk = toks.back();
      const int64_t pos = ring_pos(p.append_start, int32_t(t), R);
      for (int64_t kh = 0; kh < H; ++kh) {
        copy_raw(pool.ring_k, off(pool.ring_k, s, pos, kh), step.k, off(step.k, b, t, kh), K);
        store_vec(pool.ring_ks, off(pool.ring_ks, s, pos, kh), 1, &tk.ks[size_t(kh)]);
      }
      for (int64_t h = 0; h < HV; ++h) {
        if (d.family == DeltaFamily::kda) store_vec(pool.ring_g, off(pool.ring_g, s, pos, h, 0), K, &tk.g[size_t(h * K)]);
        else store_vec(pool.ring_g, off(pool.ring_g, s, pos, h), 1, &tk.g[size_t(h * K)]);
      }
    }

    const int64_t c0 = p.hist_count, n = c0 + T;
    Vec au(static_cast<size_t>(V)), aq(static_cast<size_t>(V)), e(static_cast<size_t>(K)), dm(static_cast<size_t>(V)), o(static_cast<size_t>(V));
    for (int64_t h = 0; h < HV; ++h) {
      const int64_t kh = h / (HV / H);
      const Vec S0 = load_state(pool.state, d, s, h);
      Records rc = load_records(pool, d, s, h, p.hist_start, n, c0);
      for (int64_t t = 0; t < T; ++t) {
        const int64_t m = c0 + t;
        const Token& tk = toks[size_t(t)];
        const double* km = &rc.kk[size_t(m * K)];
        const double* qm = &tk.q[size_t(kh * K)];
        const double* lm = &rc.lam[size_t(m * K)];
        // α_m S_{m−1} u for u = k_m (au) and u = q_m (aq).
        for (int64_t i = 0; i < K; ++i) e[size_t(i)] = std::exp(lm[i]);
        for (int64_t v = 0; v < V; ++v) {
          double xk = 0, xq = 0;
          for (int64_t i = 0; i < K; ++i) {
            xk += S0[size_t(v * K + i)] * e[size_t(i)] * km[i];
            xq += S0[size_t(v * K + i)] * e[size_t(i)] * qm[i];
          }
          au[size_t(v)] = xk;
          aq[size_t(v)] = xq;
        }
        for (int64_t j = 0; j < m; ++j) {
          const double* kj = &rc.kk[size_t(j * K)];
          const double* lj = &rc.lam[size_t(j * K)];
          double wk = 0, wq = 0;
          for (int64_t i = 0; i < K; ++i) {
            const double dk = std::exp(lm[i] - lj[i]) * kj[i];
            wk += dk * km[i];
            wq += dk * qm[i];
          }
          for (int64_t v = 0; v < V; ++v) {
            au[size_t(v)] += wk * rc.dd[size_t(j * V + v)];
            aq[size_t(v)] += wq * rc.dd[size_t(j * V + v)];
          }
        }
        // d_m, stored rounded to ring_d's dtype; the stored value is used from here on.
        const int64_t pos = ring_pos(p.append_start, int32_t(t), R);
        for (int64_t v = 0; v < V; ++v)
          dm[size_t(v)] = tk.beta[size_t(h)] * (tk.v[size_t(h * V + v)] - au[size_t(v)]);
        store_vec(pool.ring_d, off(pool.ring_d, s, pos, h), V, dm.data());
        load_vec(pool.ring_d, off(pool.ring_d, s, pos, h), V, &rc.dd[size_t(m * V)]);
        double kq = 0;
        for (int64_t i = 0; i < K; ++i) kq += km[i] * qm[i];
        for (int64_t v = 0; v < V; ++v) o[size_t(v)] = aq[size_t(v)] + kq * rc.dd[size_t(m * V + v)];
        store_vec(step.o, off(step.o, b, t, h), V, o.data());
      }
    }
    RingCursor next = p.next;
    if (commit_all) ring_commit(next, int32_t(T));
    write_cursor(pool.cursor, s, next);
  }
}

void commit(const DeltaPool& pool, const Tensor& slot, int64_t pad, const Tensor& num_accepted,
            const Dims&) {
  commit_rows(pool, slot, pad, num_accepted);
}

void materialize(const DeltaPool& pool, const Tensor& slot, int64_t pad, const Tensor& out,
                 const Dims& d) {
  for (int64_t b = 0; b < slot.shape[0]; ++b) {
    const int64_t s = check::index_at(slot, b);
    for (int64_t h = 0; h < d.HV; ++h) {
      if (s == pad) {
        for (int64_t v = 0; v < d.V; ++v) zero_vec(out, off(out, b, h, v), d.K);
        continue;
      }
      store_state(out, d, b, h, current_state(pool, d, s, h));
    }
  }
}

void flush(const DeltaPool& pool, const Tensor& slot, int64_t pad, const Dims& d) {
  for (int64_t b = 0; b < slot.shape[0]; ++b) {
    const int64_t s = check::index_at(slot, b);
    if (s != pad) flush_slot(pool, d, s);
  }
}

}  // namespace replayssm::delta::reference
