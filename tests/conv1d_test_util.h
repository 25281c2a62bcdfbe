// Shared pieces of the conv1d tests: random weights, a random speculative
// schedule (steps with drafts, accepted counts, pad rows), and a direct model
// that convolves each slot's accepted input stream in fp64.
#pragma once
#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <random>
#include <vector>

#include "replayssm/conv1d.h"
#include "test_util.h"

namespace replayssm::test {

struct ConvConfig {
  int64_t S = 6, dim = 37, W = 4, T_max = 8;
  DType x_dtype = DType::f32, state_dtype = DType::f32, weight_dtype = DType::f32;
  bool bias = true, silu = true;
  int64_t R() const { return W - 1 + T_max; }
};

struct ConvWeights {
  HostTensor weight, bias;
  ConvWeights(const ConvConfig& c, std::mt19937_64& rng)
      : weight(c.weight_dtype, {c.dim, c.W}) {
    weight.fill_uniform(rng, -0.6, 0.6);
    if (c.bias) {
      bias.reset(c.weight_dtype, {c.dim});
      bias.fill_uniform(rng, -0.3, 0.3);
    }
  }
};

inline double round_to(DType dt, double v) {
  double buf = 0;
  store_from_f64(&buf, dt, 0, v);
  return load_as_f64(&buf, dt, 0);
}

// One step of a schedule: T tokens for rows with these slots (pad = -1).
struct ConvStepSpec {
  int64_t T = 1;
  std::vector<int64_t> slots;
  std::optional<std::vector<int64_t>> accepted;  // absent: all pending accepted
};

// Random schedule over S slots that tracks each slot's pending count.
class ConvSchedule {
 public:
  ConvSchedule(int64_t S, int64_t T_max) : S_(S), T_max_(T_max), pending_(size_t(S), 0) {}

  ConvStepSpec next(std::mt19937_64& rng, int64_t max_rows) {
    static constexpr int64_t TS[] = {1, 2, 4, 5, 8};
    ConvStepSpec s;
    do s.T = TS[rng() % 5]; while (s.T > T_max_);
    std::vector<int64_t> perm(static_cast<size_t>(S_));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    const int64_t rows = 1 + int64_t(rng() % uint64_t(std::min(max_rows, S_)));
    for (int64_t b = 0; b < rows; ++b) s.slots.push_back(rng() % 5 == 0 ? -1 : perm[size_t(b)]);
    // Accepted counts only when every non-pad row has pending inputs (a row
    // with nothing pending must not be given one); pad rows get junk.
    bool all_pending = true;
    for (int64_t slot : s.slots)
      if (slot >= 0 && pending_[size_t(slot)] == 0) all_pending = false;
    if (all_pending && rng() % 4 != 0) {
      s.accepted.emplace();
      for (int64_t slot : s.slots) {
        const int64_t p = slot < 0 ? 0 : pending_[size_t(slot)];
        s.accepted->push_back(p > 0 ? 1 + int64_t(rng() % uint64_t(p)) : int64_t(rng() % 50) - 20);
      }
    }
    for (int64_t slot : s.slots)
      if (slot >= 0) pending_[size_t(slot)] = s.T;
    return s;
  }
  void prefilled(int64_t slot) { pending_[size_t(slot)] = 0; }
  int64_t pending(int64_t slot) const { return pending_[size_t(slot)]; }

 private:
  int64_t S_, T_max_;
  std::vector<int64_t> pending_;
};

// A batch over every slot that mixes rows with pending drafts (pending p in
// [1, T_max], accepted count in [1, p]), fresh rows (pending 0, about a third)
// and one pad row, for the commit tests; set_pending(s, p) stores each slot's
// pending count. Pad = -1 in every slot list; `pending` has the fresh rows as
// pad, `fresh` the pending rows; `accepted` holds junk on fresh and pad rows.
struct MixedBatch {
  std::vector<int64_t> slots, pending, fresh, accepted;
  int64_t T = 1;
  int64_t B() const { return int64_t(slots.size()); }
};
template <class SetPending>
MixedBatch mixed_batch(std::mt19937_64& rng, int64_t S, int64_t T_max, SetPending&& set_pending) {
  MixedBatch m;
  std::vector<int64_t> perm(static_cast<size_t>(S));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  const size_t pad_at = size_t(rng() % uint64_t(S + 1));
  for (size_t b = 0; b <= size_t(S); ++b) {
    if (b == pad_at) {
      for (auto* v : {&m.slots, &m.pending, &m.fresh}) v->push_back(-1);
      m.accepted.push_back(0);
      continue;
    }
    const int64_t s = perm[b - (b > pad_at ? 1 : 0)];
    const bool fresh = rng() % 3 == 0;
    const int64_t p = fresh ? 0 : 1 + int64_t(rng() % uint64_t(T_max));
    set_pending(s, p);
    m.slots.push_back(s);
    m.pending.push_back(fresh ? -1 : s);
    m.fresh.push_back(fresh ? s : -1);
    m.accepted.push_back(fresh ? int64_t(rng() % 7) - 3 : 1 + int64_t(rng() % uint64_t(p)));
  }
  m.T = 1 + int64_t(rng() % uint64_t(T_max));
  return m;
}

// Direct fp64 convolution over each slot's accepted input stream.
class ConvModel {
 public:
  ConvModel(const ConvConfig& c, const HostTensor& weight, const HostTensor* bias)
      : c_(c), w_(weight.to_f64()), committed_(size_t(c.S)), pending_(size_t(c.S)) {
    if (bias) b_ = bias->to_f64();
    for (auto& s : committed_) s.assign(size_t((c.W - 1) * c.dim), 0.0);
  }

  // Expected outputs [B, T, dim] of a step (x [B, T, dim]); updates the model.
  std::vector<double> step(const ConvStepSpec& spec, const HostTensor& x) {
    const int64_t B = int64_t(spec.slots.size()), T = spec.T, D = c_.dim;
    std::vector<double> out(size_t(B * T * D), 0.0);
    for (int64_t b = 0; b < B; ++b) {
      const int64_t s = spec.slots[size_t(b)];
      if (s < 0) continue;
      auto& pend = pending_[size_t(s)];
      if (!pend.empty()) {
        const int64_t p = int64_t(pend.size()) / D;
        const int64_t a = spec.accepted ? (*spec.accepted)[size_t(b)] : p;
        commit(s, pend, a);
      }
      std::vector<double> xs(size_t(T * D));
      for (int64_t i = 0; i < T * D; ++i) xs[size_t(i)] = x.get(b * T * D + i);
      convolve(s, xs, T, &out[size_t(b * T * D)]);
      pend = xs;
    }
    return out;
  }

  // Expected outputs [tokens, dim] of a prefill; updates the model.
  std::vector<double> prefill(const std::vector<int64_t>& cu, const std::vector<int64_t>& slots,
                              const std::vector<int64_t>& initial, const HostTensor& x) {
    const int64_t D = c_.dim;
    std::vector<double> out(size_t(cu.back() * D), 0.0);
    for (size_t b = 0; b < slots.size(); ++b) {
      const int64_t s = slots[b];
      if (s < 0) continue;
      const int64_t n = cu[b + 1] - cu[b];
      pending_[size_t(s)].clear();  // uncommitted inputs are dropped
      if (!initial[b]) std::fill(committed_[size_t(s)].begin(), committed_[size_t(s)].end(), 0.0);
      std::vector<double> xs(size_t(n * D));
      for (int64_t i = 0; i < n * D; ++i) xs[size_t(i)] = x.get(cu[b] * D + i);
      convolve(s, xs, n, &out[size_t(cu[b] * D)]);
      commit(s, xs, n);
    }
    return out;
  }

 private:
  double act(double v) const { return c_.silu ? v / (1 + std::exp(-v)) : v; }

  // Outputs for inputs xs [n, dim] on top of the slot's committed history.
  void convolve(int64_t s, const std::vector<double>& xs, int64_t n, double* out) const {
    const int64_t D = c_.dim, H = c_.W - 1;
    const auto& hist = committed_[size_t(s)];
    const int64_t hn = int64_t(hist.size()) / D;
    for (int64_t t = 0; t < n; ++t)
      for (int64_t c = 0; c < D; ++c) {
        double acc = b_.empty() ? 0.0 : b_[size_t(c)];
        for (int64_t i = 0; i < c_.W; ++i) {
          const int64_t q = t + i - H;  // < 0: history
          const double u = q >= 0 ? xs[size_t(q * D + c)] : hist[size_t((hn + q) * D + c)];
          acc += w_[size_t(c * c_.W + i)] * u;
        }
        out[t * D + c] = act(acc);
      }
  }
  // Append the first a inputs of xs (rounded to the state dtype).
  void commit(int64_t s, const std::vector<double>& xs, int64_t a) {
    auto& hist = committed_[size_t(s)];
    for (int64_t i = 0; i < a * c_.dim; ++i) hist.push_back(round_to(c_.state_dtype, xs[size_t(i)]));
    const size_t keep = size_t((c_.W - 1) * c_.dim);
    hist.erase(hist.begin(), hist.end() - std::ptrdiff_t(keep));
  }

  ConvConfig c_;
  std::vector<double> w_, b_;
  std::vector<std::vector<double>> committed_, pending_;
};

// A conv state pool on the host: conv_state [S, R, dim], conv_pending [S].
struct ConvPool {
  HostTensor state, pending;
  explicit ConvPool(const ConvConfig& c)
      : state(c.state_dtype, {c.S, c.R(), c.dim}), pending(DType::i32, {c.S}) {}
};

inline Conv1dStep make_conv_step(const ConvConfig& c, const HostTensor& x, const ConvWeights& w,
                                 const HostTensor& slot, const HostTensor& out) {
  Conv1dStep s;
  s.x = x.t();
  s.weight = w.weight.t();
  if (c.bias) s.bias = w.bias.t();
  s.silu = c.silu;
  s.slot = slot.t();
  s.pad_slot_id = -1;
  s.out = out.t();
  return s;
}

inline HostTensor accepted_tensor(const ConvStepSpec& spec) {
  return spec.accepted ? index_tensor(*spec.accepted, DType::i32) : HostTensor();
}

}  // namespace replayssm::test
