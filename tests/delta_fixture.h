// Shared helpers of the delta tests: random problems, pools, and an fp64
// oracle of the standard recurrence (written independently of the library).
#pragma once
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/ring.h"
#include "replayssm/delta.h"
#include "test_util.h"

namespace replayssm::test::delta {

inline size_t sz(int64_t n) { return static_cast<size_t>(n); }

enum class Decay { mixed, near_one, near_zero };

struct Cfg {
  DeltaFamily fam = DeltaFamily::gdn;
  int64_t H = 2, HV = 4, K = 16, V = 8;
  DType act = DType::f32, gate = DType::f32, state = DType::f32, ring_d = DType::f32;
  DeltaGating gating{};
  bool dt_bias = true;
  Decay decay = Decay::mixed;
  int64_t L = 8, T_max = 4, S = 6;
  int64_t R() const { return L + T_max; }
  bool kda() const { return fam == DeltaFamily::kda; }
  int64_t GW() const { return kda() ? K : 1; }
};

inline const char* fam_name(DeltaFamily f) { return f == DeltaFamily::kda ? "kda" : "gdn"; }

// Model parameters (A_log, dt_bias) of a problem.
struct Params {
  HostTensor A_log, dt_bias;
  Params(const Cfg& c, std::mt19937_64& rng) : A_log(DType::f32, {c.HV}) {
    A_log.fill_uniform(rng, -2.0, 0.5);
    if (c.dt_bias && c.gating.raw_gate) {
      if (c.kda()) dt_bias.reset(DType::f32, {c.HV, c.K});
      else dt_bias.reset(DType::f32, {c.HV});
      dt_bias.fill_uniform(rng, -1.0, 1.0);
    }
  }
};

// Per-token inputs for `lead` leading dims ({B, T} or {tokens}).
struct Inputs {
  HostTensor q, k, v, g, beta, o;
  Inputs() = default;
  Inputs(const Cfg& c, std::vector<int64_t> lead) { reset(c, lead); }
  void reset(const Cfg& c, std::vector<int64_t> lead) {
    auto with = [&](std::initializer_list<int64_t> tail) { auto v = lead; v.insert(v.end(), tail); return v; };
    q.reset(c.act, with({c.H, c.K}));
    k.reset(c.act, with({c.H, c.K}));
    v.reset(c.act, with({c.HV, c.V}));
    g.reset(c.gate, c.kda() ? with({c.HV, c.K}) : with({c.HV}));
    beta.reset(c.gate, with({c.HV}));
    o.reset(c.act, with({c.HV, c.V}));
    o.fill_nan();
  }
};

// Random values for token i (flat over the leading dims) of in.
template <class Rng>
void randomize_token(const Cfg& c, Inputs& in, int64_t i, Rng& rng) {
  std::normal_distribution<double> nd(0, 1);
  std::uniform_real_distribution<double> u(0, 1);
  const double ksd = c.gating.l2norm_qk ? 1.0 : 1.0 / std::sqrt(double(c.K));
  for (int64_t j = 0; j < c.H * c.K; ++j) {
    in.q.set(i * c.H * c.K + j, nd(rng) * ksd);
    in.k.set(i * c.H * c.K + j, nd(rng) * ksd);
  }
  for (int64_t j = 0; j < c.HV * c.V; ++j) in.v.set(i * c.HV * c.V + j, nd(rng));
  for (int64_t j = 0; j < c.HV * c.GW(); ++j) {
    double g;
    if (c.gating.raw_gate) g = c.decay == Decay::near_one ? -6 + u(rng) : c.decay == Decay::near_zero ? 6 + 4 * u(rng) : 6 * u(rng) - 3;
    else g = c.decay == Decay::near_one ? -0.02 * u(rng) : c.decay == Decay::near_zero ? -4 - 8 * u(rng) : -2 * u(rng);
    in.g.set(i * c.HV * c.GW() + j, g);
  }
  for (int64_t j = 0; j < c.HV; ++j) in.beta.set(i * c.HV + j, c.gating.raw_beta ? 2 * nd(rng) : u(rng));
}

inline DeltaStep step_view(const Cfg& c, const Params& p, const Inputs& in, const HostTensor& slot,
                           int64_t pad = -1) {
  DeltaStep s;
  s.q = in.q; s.k = in.k; s.v = in.v; s.g = in.g; s.beta = in.beta; s.o = in.o;
  if (c.gating.raw_gate) s.A_log = p.A_log;
  if (p.dt_bias.t().defined() && c.gating.raw_gate) s.dt_bias = p.dt_bias;
  s.gating = c.gating;
  s.slot = slot;
  s.pad_slot_id = pad;
  return s;
}

struct Pool {
  HostTensor state, ring_d, ring_k, ring_ks, ring_g, cursor;
  int64_t L = 0;
  Pool() = default;
  explicit Pool(const Cfg& c, bool rings = true) {
    state.reset(c.state, {c.S, c.HV, c.V, c.K});
    L = c.L;
    if (!rings) return;
    const int64_t R = c.R();
    ring_d.reset(c.ring_d, {c.S, R, c.HV, c.V});
    ring_k.reset(c.act, {c.S, R, c.H, c.K});
    ring_ks.reset(DType::f32, {c.S, R, c.H});
    if (c.kda()) ring_g.reset(DType::f32, {c.S, R, c.HV, c.K});
    else ring_g.reset(DType::f32, {c.S, R, c.HV});
    cursor.reset(DType::i32, {c.S, 3});
  }
  DeltaPool view() const {
    DeltaPool p;
    p.state = state; p.L = L;
    if (ring_d.t().defined()) { p.ring_d = ring_d; p.ring_k = ring_k; p.ring_ks = ring_ks; p.ring_g = ring_g; p.cursor = cursor; }
    return p;
  }
  RingCursor cur(int64_t s) const {
    const int32_t* c = cursor.as<int32_t>() + 3 * s;
    return RingCursor{c[0], c[1], c[2]};
  }
  void set_cur(int64_t s, RingCursor r) {
    int32_t* c = cursor.as<int32_t>() + 3 * s;
    c[0] = r.start; c[1] = r.count; c[2] = r.pending;
  }
  std::vector<const HostTensor*> all() const { return {&state, &ring_d, &ring_k, &ring_ks, &ring_g, &cursor}; }
  // Bytes of slot s of the state tensor.
  std::vector<uint8_t> state_bytes(int64_t s) const {
    const size_t n = state.bytes() / sz(state.t().shape[0]);
    auto* p = static_cast<const uint8_t*>(state.data()) + sz(s) * n;
    return std::vector<uint8_t>(p, p + n);
  }
  std::vector<uint8_t> slot_bytes(int64_t s) const {
    std::vector<uint8_t> out;
    for (auto* t : all()) {
      if (!t->t().defined()) continue;
      const size_t n = t->bytes() / sz(t->t().shape[0]);
      auto* p = static_cast<const uint8_t*>(t->data()) + sz(s) * n;
      out.insert(out.end(), p, p + n);
    }
    return out;
  }
  void copy_from(const Pool& o) { for (size_t i = 0; i < all().size(); ++i) if (all()[i]->t().defined()) const_cast<HostTensor*>(all()[i])->copy_from(*o.all()[i]); }
};

// fp64 standard recurrence, one state [HV, V, K] per sequence.
struct Oracle {
  Cfg c;
  const Params* p;
  explicit Oracle(const Cfg& cfg, const Params& params) : c(cfg), p(&params) {}
  using State = std::vector<double>;
  State zero() const { return State(sz(c.HV * c.V * c.K), 0.0); }

  // Applies token i of in to S; writes outputs [HV*V] to o.
  void apply(State& S, const Inputs& in, int64_t i, std::vector<double>& o) const {
    const int64_t H = c.H, HV = c.HV, K = c.K, V = c.V, GW = c.GW();
    o.assign(sz(HV * V), 0.0);
    const double qsc = c.gating.q_scale != 0.f ? double(c.gating.q_scale) : 1 / std::sqrt(double(K));
    for (int64_t h = 0; h < HV; ++h) {
      const int64_t kh = h / (HV / H);
      std::vector<double> k(static_cast<size_t>(K)), q(static_cast<size_t>(K)), alpha(static_cast<size_t>(K));
      double nk = 0, nq = 0;
      for (int64_t x = 0; x < K; ++x) {
        k[sz(x)] = in.k.get((i * H + kh) * K + x);
        q[sz(x)] = in.q.get((i * H + kh) * K + x);
        nk += k[sz(x)] * k[sz(x)];
        nq += q[sz(x)] * q[sz(x)];
      }
      const double sk = c.gating.l2norm_qk ? 1 / std::sqrt(nk + 1e-6) : 1;
      const double sq = (c.gating.l2norm_qk ? 1 / std::sqrt(nq + 1e-6) : 1) * qsc;
      for (int64_t x = 0; x < K; ++x) { k[sz(x)] *= sk; q[sz(x)] *= sq; }
      for (int64_t x = 0; x < K; ++x) {
        const int64_t gx = GW > 1 ? x : 0;
        double g = in.g.get((i * HV + h) * GW + gx);
        if (c.gating.raw_gate) {
          const double bias = p->dt_bias.t().defined() ? p->dt_bias.get(h * GW + gx) : 0;
          const double z = g + bias;
          g = -std::exp(p->A_log.get(h)) * (z > 20 ? z : std::log1p(std::exp(z)));
        }
        alpha[sz(x)] = std::exp(g);
      }
      const double bb = in.beta.get(i * HV + h);
      const double beta = c.gating.raw_beta ? 1 / (1 + std::exp(-bb)) : bb;
      for (int64_t v = 0; v < V; ++v) {
        double* s = &S[sz((h * V + v) * K)];
        double skv = 0;
        for (int64_t x = 0; x < K; ++x) { s[x] *= alpha[sz(x)]; skv += s[x] * k[sz(x)]; }
        const double d = beta * (in.v.get((i * HV + h) * V + v) - skv);
        double y = 0;
        for (int64_t x = 0; x < K; ++x) { s[x] += d * k[sz(x)]; y += s[x] * q[sz(x)]; }
        o[sz(h * V + v)] = y;
      }
    }
  }
};

// Values of the [HV, V] outputs of flat token i of o.
inline std::vector<double> token_out(const HostTensor& o, int64_t i, int64_t n) {
  std::vector<double> r(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) r[sz(j)] = o.get(i * n + j);
  return r;
}
// State of slot s as fp64.
inline std::vector<double> slot_state(const HostTensor& st, int64_t s) {
  const int64_t n = st.numel() / st.t().shape[0];
  std::vector<double> r(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) r[sz(j)] = st.get(s * n + j);
  return r;
}

inline Exec exec_of(Backend b, int threads = 2) { Exec e; e.backend = b; e.num_threads = threads; return e; }

inline DType limiting(const Cfg& c) {
  auto rank = [](DType d) { return d == DType::bf16 ? 3 : d == DType::f16 ? 2 : 1; };
  DType worst = DType::f32;
  for (DType d : {c.act, c.state, c.ring_d, c.gate})
    if (rank(d) > rank(worst)) worst = d;
  return worst;
}


// A random speculative schedule on one pool, checked step by step against the
// oracle on the accepted token stream (design §5 invariants 1-4).
struct RunOpts {
  Backend backend = Backend::reference;
  uint64_t seed = 1;
  uint64_t garbage_seed = 99;  // rejected drafts come from this stream
  int steps = 50;
  int commit_mode = 0;         // 0 random, 1 always fused, 2 always separate delta_commit
  bool check_oracle = true;
  int64_t B = 3;               // rows; one of them is a pad row
};
struct RunResult {
  std::vector<double> accepted_outputs;  // outputs of accepted tokens, in order
  double max_out_err = 0, max_state_err = 0;
  int flushes = 0, nonflush_rows = 0;
  Pool pool;
};

inline RunResult run_schedule(const Cfg& c, const RunOpts& opt) {
  std::mt19937_64 rng(opt.seed), grng(opt.garbage_seed);
  Params params(c, rng);
  Oracle oracle(c, params);
  RunResult res;
  res.pool = Pool(c);
  Pool& pool = res.pool;
  const Exec ex = exec_of(opt.backend);
  const int64_t B = opt.B, HVV = c.HV * c.V;
  // Rows: distinct random slots, row `pad_row` is a pad row.
  std::vector<int64_t> perm(sz(c.S));
  for (int64_t i = 0; i < c.S; ++i) perm[sz(i)] = i;
  std::shuffle(perm.begin(), perm.end(), rng);
  const int64_t pad_row = int64_t(rng() % uint64_t(B));
  std::vector<int64_t> slots(sz(B));
  for (int64_t b = 0; b < B; ++b) slots[sz(b)] = b == pad_row ? -1 : perm[sz(b)];
  HostTensor slot = index_tensor(slots);
  // Untouched slots are poisoned with random bytes and must stay unchanged.
  for (auto* t : pool.all()) {
    auto* p = static_cast<uint8_t*>(t->data());
    for (size_t i = 0; i < t->bytes(); ++i) p[i] = uint8_t(rng());
  }
  for (int64_t s = 0; s < c.S; ++s) pool.set_cur(s, RingCursor{0, 0, 0});
  std::vector<std::vector<uint8_t>> untouched;
  for (int64_t s = 0; s < c.S; ++s) untouched.push_back(pool.slot_bytes(s));

  // Prefill with random prompt lengths (0..6).
  std::vector<int64_t> cu{0};
  for (int64_t b = 0; b < B; ++b) cu.push_back(cu.back() + int64_t(rng() % 7));
  const int64_t tokens = cu.back();
  Inputs pin(c, {tokens});
  for (int64_t i = 0; i < tokens; ++i) randomize_token(c, pin, i, rng);
  HostTensor cus = index_tensor(cu);
  DeltaPrefill pf;
  pf.q = pin.q; pf.k = pin.k; pf.v = pin.v; pf.g = pin.g; pf.beta = pin.beta; pf.o = pin.o;
  if (c.gating.raw_gate) pf.A_log = params.A_log;
  if (params.dt_bias.t().defined()) pf.dt_bias = params.dt_bias;
  pf.gating = c.gating; pf.cu_seqlens = cus; pf.slot = slot; pf.pad_slot_id = -1;
  // Prefill needs states for the rows: start from zero (initial absent).
  delta_prefill(c.fam, pf, pool.view(), ex);
  std::vector<Oracle::State> S(sz(B), oracle.zero());
  std::vector<double> o;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = cu[sz(b)]; i < cu[sz(b) + 1]; ++i) {
      if (b == pad_row) continue;
      oracle.apply(S[sz(b)], pin, i, o);
      if (opt.check_oracle) res.max_out_err = std::max(res.max_out_err, rel_err(token_out(pin.o, i, HVV), o));
    }
  // Random ring positions.
  for (int64_t b = 0; b < B; ++b)
    if (b != pad_row) pool.set_cur(slots[sz(b)], RingCursor{int32_t(rng() % uint64_t(c.R())), 0, 0});

  bool pending = false;
  std::vector<int64_t> prev_acc(sz(B), 1);
  for (int step = 0; step < opt.steps; ++step) {
    const int64_t T = rng() % 10 < 7 ? c.T_max : 1 + int64_t(rng() % uint64_t(c.T_max));
    const bool commit_all = rng() % 10 < 3;
    std::vector<int64_t> acc(sz(B));
    for (int64_t b = 0; b < B; ++b) acc[sz(b)] = commit_all ? T : 1 + int64_t(rng() % uint64_t(T));
    Inputs in(c, {B, T});
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) {
        if (t < acc[sz(b)]) randomize_token(c, in, b * T + t, rng);
        else randomize_token(c, in, b * T + t, grng);
      }
    HostTensor na = index_tensor(prev_acc);
    Tensor fused;
    if (pending) {
      const bool use_fused = opt.commit_mode == 1 || (opt.commit_mode == 0 && rng() % 2);
      if (use_fused) fused = na;
      else delta_commit(c.fam, pool.view(), slot, -1, na, ex);
    }
    // Expected plan per row and checkpoint bytes before the step.
    std::vector<bool> flush(sz(B));
    std::vector<std::vector<uint8_t>> before(sz(B));
    for (int64_t b = 0; b < B; ++b) {
      if (b == pad_row) continue;
      RingCursor cur = pool.cur(slots[sz(b)]);
      if (fused.defined()) ring_commit(cur, int32_t(prev_acc[sz(b)]));
      flush[sz(b)] = ring_plan_step(cur, int32_t(T), int32_t(c.L), int32_t(c.R())).flush;
      before[sz(b)] = pool.state_bytes(slots[sz(b)]);
    }
    delta_replay_step(c.fam, step_view(c, params, in, slot), pool.view(), fused, commit_all, ex);
    for (int64_t b = 0; b < B; ++b) {
      if (b == pad_row) {
        for (int64_t i = 0; i < T * HVV; ++i) EXPECT_EQ(in.o.get(b * T * HVV + i), 0.0);
        continue;
      }
      const int64_t s = slots[sz(b)];
      if (flush[sz(b)]) {
        ++res.flushes;
        if (opt.check_oracle) res.max_state_err = std::max(res.max_state_err, rel_err(slot_state(pool.state, s), S[sz(b)]));
      } else {
        ++res.nonflush_rows;
        EXPECT_TRUE(before[sz(b)] == pool.state_bytes(s)) << "non-flush step wrote the checkpoint, step " << step;
      }
      Oracle::State run = S[sz(b)];
      for (int64_t t = 0; t < T; ++t) {
        oracle.apply(run, in, b * T + t, o);
        const auto got = token_out(in.o, b * T + t, HVV);
        if (opt.check_oracle) res.max_out_err = std::max(res.max_out_err, rel_err(got, o));
        if (t < acc[sz(b)]) {
          res.accepted_outputs.insert(res.accepted_outputs.end(), got.begin(), got.end());
          if (t + 1 == acc[sz(b)]) S[sz(b)] = run;
        }
      }
    }
    pending = !commit_all;
    prev_acc = acc;
  }
  for (int64_t s = 0; s < c.S; ++s)
    if (std::find(slots.begin(), slots.end(), s) == slots.end())
      EXPECT_TRUE(untouched[sz(s)] == pool.slot_bytes(s)) << "slot " << s << " was touched";
  return res;
}

}  // namespace replayssm::test::delta
