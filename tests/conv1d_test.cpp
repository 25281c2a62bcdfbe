// Causal conv1d on the CPU backends: the reference against a direct fp64
// convolution of the accepted input stream under random speculative
// schedules, the fast CPU backend against the reference, rollback, pad rows,
// strided pools and argument validation.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>

#include "conv1d_test_util.h"

namespace replayssm::test {
namespace {

// Prefill every slot from zero with short random prompts (some empty).
HostTensor prefill_all(const ConvConfig& c, std::mt19937_64& rng, std::vector<int64_t>& cu,
                       std::vector<int64_t>& slots, std::vector<int64_t>& initial) {
  static constexpr int64_t LENS[] = {0, 1, 2, 3, 7};
  cu = {0};
  slots.clear();
  initial.clear();
  for (int64_t s = 0; s < c.S; ++s) {
    cu.push_back(cu.back() + LENS[rng() % 5]);
    slots.push_back(s);
    initial.push_back(0);
  }
  std::shuffle(slots.begin(), slots.end(), rng);
  HostTensor x(c.x_dtype, {cu.back(), c.dim});
  x.fill_uniform(rng, -2, 2);
  return x;
}

Conv1dPrefill make_prefill(const ConvConfig& c, const HostTensor& x, const ConvWeights& w,
                           const HostTensor& cu, const HostTensor& slot, const HostTensor& initial,
                           const HostTensor& out) {
  Conv1dPrefill p;
  p.x = x.t();
  p.weight = w.weight.t();
  if (c.bias) p.bias = w.bias.t();
  p.silu = c.silu;
  p.cu_seqlens = cu.t();
  p.slot = slot.t();
  p.initial = initial.t();
  p.out = out.t();
  return p;
}

// Runs one random schedule on every backend in lockstep with the direct
// model: outputs against the model, the cpu backend against the reference
// (outputs close, conv_state and conv_pending byte-identical).
void run_schedule(const ConvConfig& c, uint64_t seed, int steps) {
  std::mt19937_64 rng(seed);
  const ConvWeights w(c, rng);
  ConvModel model(c, w.weight, c.bias ? &w.bias : nullptr);
  ConvSchedule sched(c.S, c.T_max);
  const Backend backends[] = {Backend::reference, Backend::cpu};
  std::vector<ConvPool> pools;
  for (int i = 0; i < 2; ++i) pools.emplace_back(c);
  const double tol = tolerance(c.x_dtype);

  auto do_prefill = [&](const std::vector<int64_t>& cu, const std::vector<int64_t>& slots,
                        const std::vector<int64_t>& initial, const HostTensor& x) {
    const HostTensor cu_t = index_tensor(cu), slot_t = index_tensor(slots),
                     init_t = index_tensor(initial);
    const std::vector<double> want = model.prefill(cu, slots, initial, x);
    for (int64_t s : slots)
      if (s >= 0) sched.prefilled(s);
    std::vector<double> got[2];
    for (int i = 0; i < 2; ++i) {
      HostTensor out(c.x_dtype, {x.t().shape[0], c.dim});
      out.fill_nan();
      conv1d_prefill(make_prefill(c, x, w, cu_t, slot_t, init_t, out), pools[size_t(i)].state,
                     pools[size_t(i)].pending, Exec{backends[i], nullptr, 3});
      got[i] = out.to_f64();
      EXPECT_LE(rel_err(got[i], want), tol) << backend_name(backends[i]) << " prefill";
    }
    EXPECT_LE(rel_err(got[1], got[0]), tol);
  };

  std::vector<int64_t> cu, slots, initial;
  const HostTensor x0 = prefill_all(c, rng, cu, slots, initial);
  do_prefill(cu, slots, initial, x0);

  for (int step = 0; step < steps; ++step) {
    const ConvStepSpec spec = sched.next(rng, 4);
    const int64_t B = int64_t(spec.slots.size());
    HostTensor x(c.x_dtype, {B, spec.T, c.dim});
    x.fill_uniform(rng, -2, 2);
    const HostTensor slot = index_tensor(spec.slots), acc = accepted_tensor(spec);
    const std::vector<double> want = model.step(spec, x);
    std::vector<double> got[2];
    for (int i = 0; i < 2; ++i) {
      HostTensor out(c.x_dtype, {B, spec.T, c.dim});
      out.fill_nan();
      conv1d_update(make_conv_step(c, x, w, slot, out), pools[size_t(i)].state,
                    pools[size_t(i)].pending, acc, Exec{backends[i], nullptr, 3});
      got[i] = out.to_f64();
      ASSERT_LE(rel_err(got[i], want), tol)
          << backend_name(backends[i]) << " step " << step << " T " << spec.T;
    }
    EXPECT_LE(rel_err(got[1], got[0]), tol);
    EXPECT_TRUE(pools[0].state.bytes_equal(pools[1].state)) << "step " << step;
    EXPECT_TRUE(pools[0].pending.bytes_equal(pools[1].pending)) << "step " << step;
    for (int64_t s = 0; s < c.S; ++s) ASSERT_EQ(pools[0].pending.get(s), double(sched.pending(s)));

    if (step % 9 == 8) {  // continue two slots with a chunk of prompt (drops pending drafts)
      std::vector<int64_t> pcu = {0, int64_t(rng() % 4)}, ps = {int64_t(rng() % uint64_t(c.S))},
                           pin = {1};
      pcu.push_back(pcu.back() + int64_t(rng() % 70));
      ps.push_back((ps[0] + 1) % c.S);
      pin.push_back(int64_t(rng() % 2));
      HostTensor px(c.x_dtype, {pcu.back(), c.dim});
      px.fill_uniform(rng, -2, 2);
      do_prefill(pcu, ps, pin, px);
    }
  }
}

TEST(Conv1d, ScheduleF32W4) { run_schedule({6, 37, 4, 8}, 1, 40); }
TEST(Conv1d, ScheduleF32W2NoBiasNoSilu) {
  ConvConfig c{5, 70, 2, 8};
  c.bias = false;
  c.silu = false;
  run_schedule(c, 2, 40);
}
TEST(Conv1d, ScheduleBf16W3) {
  ConvConfig c{6, 130, 3, 8, DType::bf16, DType::bf16, DType::bf16};
  run_schedule(c, 3, 40);
}
TEST(Conv1d, ScheduleF16ActF32StateW5) {
  ConvConfig c{4, 65, 5, 8, DType::f16, DType::f32, DType::f16};
  run_schedule(c, 4, 40);
}
TEST(Conv1d, ScheduleBf16ActF16StateTmax5) {
  ConvConfig c{7, 64, 4, 5, DType::bf16, DType::f16, DType::f32};
  run_schedule(c, 5, 40);
}

// Two slots see the same accepted stream but different rejected drafts: the
// next step's outputs and the rows it writes are bit-identical.
TEST(Conv1d, RejectedDraftsLeaveNoTrace) {
  for (Backend be : {Backend::reference, Backend::cpu}) {
    for (int64_t a : {1, 2, 4}) {
      std::mt19937_64 rng(7 + uint64_t(a));
      ConvConfig c{2, 33, 4, 5};
      const ConvWeights w(c, rng);
      ConvPool pool(c);
      pool.state.fill_uniform(rng, -1, 1);  // common committed history
      for (int64_t r = 0; r < c.R(); ++r)
        for (int64_t k = 0; k < c.dim; ++k) pool.state.set(c.R() * c.dim + r * c.dim + k, pool.state.get(r * c.dim + k));
      const HostTensor slot = index_tensor({0, 1});
      HostTensor x1(c.x_dtype, {2, 5, c.dim}), out(c.x_dtype, {2, 5, c.dim});
      x1.fill_uniform(rng, -2, 2);
      for (int64_t i = 0; i < a * c.dim; ++i) x1.set(5 * c.dim + i, x1.get(i));  // same accepted prefix
      conv1d_update(make_conv_step(c, x1, w, slot, out), pool.state, pool.pending, {}, Exec{be});
      HostTensor x2(c.x_dtype, {2, 3, c.dim}), out2(c.x_dtype, {2, 3, c.dim});
      x2.fill_uniform(rng, -2, 2);
      for (int64_t i = 0; i < 3 * c.dim; ++i) x2.set(3 * c.dim + i, x2.get(i));
      const HostTensor acc = index_tensor({a, a});
      out2.fill_nan();
      conv1d_update(make_conv_step(c, x2, w, slot, out2), pool.state, pool.pending, acc, Exec{be});
      const int64_t n = 3 * c.dim;
      EXPECT_EQ(std::memcmp(out2.as<float>(), out2.as<float>() + n, size_t(n) * 4), 0)
          << backend_name(be) << " a " << a;
      const int64_t rows = (c.W - 1 + 3) * c.dim;
      EXPECT_EQ(std::memcmp(pool.state.as<float>(), pool.state.as<float>() + c.R() * c.dim,
                            size_t(rows) * 4), 0);
    }
  }
}

// Pad rows output zeros and touch no slot; slots outside the call keep their bytes.
TEST(Conv1d, PadRowsTouchNothing) {
  for (Backend be : {Backend::reference, Backend::cpu}) {
    std::mt19937_64 rng(11);
    ConvConfig c{5, 70, 4, 8, DType::bf16, DType::bf16, DType::f32};
    const ConvWeights w(c, rng);
    ConvPool pool(c);
    pool.state.fill_uniform(rng, -1, 1);
    for (int64_t s = 0; s < c.S; ++s) pool.pending.set(s, double(1 + s % 3));
    ConvPool before(c);
    before.state.copy_from(pool.state);
    before.pending.copy_from(pool.pending);
    const HostTensor slot = index_tensor({-1, 3, -1});
    const HostTensor acc = index_tensor({0, 1, 9});  // ignored on pad rows
    HostTensor x(c.x_dtype, {3, 4, c.dim}), out(c.x_dtype, {3, 4, c.dim});
    x.fill_uniform(rng, -2, 2);
    out.fill_nan();
    conv1d_update(make_conv_step(c, x, w, slot, out), pool.state, pool.pending, acc, Exec{be});
    for (int64_t b : {0, 2})
      for (int64_t i = 0; i < 4 * c.dim; ++i) ASSERT_EQ(out.get(b * 4 * c.dim + i), 0.0);
    for (int64_t i = 0; i < 4 * c.dim; ++i) ASSERT_TRUE(std::isfinite(out.get(4 * c.dim + i)));
    const int64_t row = c.R() * c.dim * 2;  // bytes per slot
    for (int64_t s = 0; s < c.S; ++s) {
      if (s == 3) continue;
      EXPECT_EQ(std::memcmp(pool.state.as<char>() + s * row, before.state.as<char>() + s * row,
                            size_t(row)), 0) << "slot " << s;
      EXPECT_EQ(pool.pending.get(s), before.pending.get(s));
    }
    EXPECT_EQ(pool.pending.get(3), 4.0);
  }
}

// A conv_state that is one layer of a layer-major allocation [S, 2, R, dim].
TEST(Conv1d, StridedStateMatchesContiguous) {
  for (Backend be : {Backend::reference, Backend::cpu}) {
    std::mt19937_64 rng(13);
    ConvConfig c{4, 40, 4, 8};
    const ConvWeights w(c, rng);
    ConvPool flat(c);
    HostTensor big(c.state_dtype, {c.S, 2, c.R(), c.dim});
    big.fill(7.0);  // sentinel in the other layer
    const Tensor layer = Tensor::strided(big.as<float>() + c.R() * c.dim, c.state_dtype,
                                         {c.S, c.R(), c.dim}, {2 * c.R() * c.dim, c.dim, 1});
    for (int64_t s = 0; s < c.S; ++s)
      for (int64_t i = 0; i < c.R() * c.dim; ++i) big.set((2 * s + 1) * c.R() * c.dim + i, 0.0);
    HostTensor pend(DType::i32, {c.S});
    ConvSchedule sched(c.S, c.T_max);
    for (int step = 0; step < 15; ++step) {
      const ConvStepSpec spec = sched.next(rng, 3);
      const int64_t B = int64_t(spec.slots.size());
      HostTensor x(c.x_dtype, {B, spec.T, c.dim}), o1(c.x_dtype, {B, spec.T, c.dim}),
          o2(c.x_dtype, {B, spec.T, c.dim});
      x.fill_uniform(rng, -2, 2);
      const HostTensor slot = index_tensor(spec.slots), acc = accepted_tensor(spec);
      conv1d_update(make_conv_step(c, x, w, slot, o1), flat.state, flat.pending, acc, Exec{be});
      conv1d_update(make_conv_step(c, x, w, slot, o2), layer, pend, acc, Exec{be});
      ASSERT_TRUE(o1.bytes_equal(o2)) << "step " << step;
    }
    for (int64_t s = 0; s < c.S; ++s)
      for (int64_t i = 0; i < c.R() * c.dim; ++i) {
        ASSERT_EQ(big.get((2 * s + 1) * c.R() * c.dim + i), flat.state.get(s * c.R() * c.dim + i));
        ASSERT_EQ(big.get(2 * s * c.R() * c.dim + i), 7.0);
      }
  }
}

// Long prompts (several staging chunks), prompts shorter than W − 1 that
// continue from the history, empty prompts and pad rows.
TEST(Conv1d, PrefillVarlen) {
  std::mt19937_64 rng(17);
  ConvConfig c{6, 130, 4, 8, DType::f32, DType::f32, DType::f32};
  const ConvWeights w(c, rng);
  ConvModel model(c, w.weight, &w.bias);
  ConvPool ref(c), fast(c);
  const std::vector<int64_t> cu = {0, 150, 151, 151, 221, 223, 230};
  const std::vector<int64_t> slots = {4, 0, 2, -1, 1, 5};
  for (const std::vector<int64_t>& initial : {std::vector<int64_t>{0, 0, 0, 0, 0, 0},
                                              std::vector<int64_t>{1, 1, 1, 0, 0, 1}}) {
    HostTensor x(c.x_dtype, {cu.back(), c.dim}), o1(c.x_dtype, {cu.back(), c.dim}),
        o2(c.x_dtype, {cu.back(), c.dim});
    x.fill_uniform(rng, -2, 2);
    o1.fill_nan();
    o2.fill_nan();
    const HostTensor cu_t = index_tensor(cu, DType::i64), slot_t = index_tensor(slots),
                     init_t = index_tensor(initial);
    const std::vector<double> want = model.prefill(cu, slots, initial, x);
    conv1d_prefill(make_prefill(c, x, w, cu_t, slot_t, init_t, o1), ref.state, ref.pending,
                   Exec{Backend::reference});
    conv1d_prefill(make_prefill(c, x, w, cu_t, slot_t, init_t, o2), fast.state, fast.pending,
                   Exec{Backend::cpu, nullptr, 2});
    EXPECT_LE(rel_err(o1.to_f64(), want), tolerance(DType::f32));
    EXPECT_LE(rel_err(o2.to_f64(), o1.to_f64()), tolerance(DType::f32));
    for (int64_t t = 151; t < 221; ++t)  // the pad row
      for (int64_t k = 0; k < c.dim; ++k) ASSERT_EQ(o1.get(t * c.dim + k), 0.0);
    EXPECT_TRUE(ref.state.bytes_equal(fast.state));
    EXPECT_TRUE(ref.pending.bytes_equal(fast.pending));
  }
}

TEST(Conv1d, StateRows) {
  EXPECT_EQ(conv1d_state_rows(4, 8), 11);
  EXPECT_THROW(conv1d_state_rows(1, 8), Error);
  EXPECT_THROW(conv1d_state_rows(4, 0), Error);
}

// Each bad call throws an Error naming the argument and writes nothing.
TEST(Conv1d, BadInputsChangeNothing) {
  ConvConfig c{4, 24, 4, 5};
  std::mt19937_64 rng(19);
  const ConvWeights w(c, rng);
  ConvPool pool(c);
  pool.state.fill_uniform(rng, -1, 1);
  pool.pending.set(0, 3);
  pool.pending.set(1, 0);
  pool.pending.set(2, 5);
  HostTensor x(c.x_dtype, {2, 3, c.dim}), out(c.x_dtype, {2, 3, c.dim});
  x.fill_uniform(rng, -1, 1);
  out.fill_nan();
  const HostTensor slot = index_tensor({0, 2}), acc = index_tensor({2, 5});
  HostTensor x_f64(DType::f64, {2, 3, c.dim}), x_f16(DType::f16, {2, 3, c.dim}), out_f16(DType::f16, {2, 3, c.dim});
  HostTensor x_long(c.x_dtype, {2, 6, c.dim}), out_long(c.x_dtype, {2, 6, c.dim});
  HostTensor w1(DType::f32, {c.dim, 1}), w_f64(DType::f64, {c.dim, c.W}), b_bad(DType::f32, {c.dim + 1});
  const HostTensor slot_far = index_tensor({0, 4}), slot_dup = index_tensor({2, 2}),
                   slot_fresh = index_tensor({0, 1});  // slot 1 has nothing pending
  const HostTensor acc0 = index_tensor({0, 5}), acc_big = index_tensor({4, 5}),
                   acc_i64 = index_tensor({2, 5}, DType::i64), acc_short = index_tensor({2});
  HostTensor pend_i64(DType::i64, {c.S}), state_f64(DType::f64, {c.S, c.R(), c.dim});
  HostTensor small_state(c.state_dtype, {c.S, c.W - 1, c.dim});

  struct Case {
    const char* arg;
    std::function<void(Conv1dStep&, Tensor& st, Tensor& pe, Tensor& na, Exec& ex)> mutate;
  };
  const std::vector<Case> cases = {
      {"x", [&](auto& s, auto&, auto&, auto&, auto&) { s.x = x_f64.t(); }},
      {"out", [&](auto& s, auto&, auto&, auto&, auto&) { s.x = x_f16.t(); }},
      {"x", [&](auto& s, auto&, auto&, auto&, auto&) { s.x = x_long.t(); s.out = out_long.t(); }},
      {"x", [&](auto& s, auto&, auto&, auto&, auto&) { s.x.stride[2] = 2; s.x.shape[2] = c.dim / 2; }},
      {"out", [&](auto& s, auto&, auto&, auto&, auto&) { s.out = out_f16.t(); }},
      {"out", [&](auto& s, auto&, auto&, auto&, auto&) { s.out.shape[1] = 2; }},
      {"weight", [&](auto& s, auto&, auto&, auto&, auto&) { s.weight = w1.t(); }},
      {"weight", [&](auto& s, auto&, auto&, auto&, auto&) { s.weight = w_f64.t(); }},
      {"bias", [&](auto& s, auto&, auto&, auto&, auto&) { s.bias = b_bad.t(); }},
      {"slot", [&](auto& s, auto&, auto&, auto&, auto&) { s.slot = slot_far.t(); }},
      {"slot", [&](auto& s, auto&, auto&, auto&, auto&) { s.slot = slot_dup.t(); }},
      {"slot", [&](auto& s, auto&, auto&, auto&, auto&) { s.slot = acc_short.t(); }},
      {"num_accepted", [&](auto&, auto&, auto&, auto& na, auto&) { na = acc0.t(); }},
      {"num_accepted", [&](auto& s, auto&, auto&, auto&, auto&) { s.slot = slot_fresh.t(); }},
      {"num_accepted", [&](auto&, auto&, auto&, auto& na, auto&) { na = acc_big.t(); }},
      {"num_accepted", [&](auto&, auto&, auto&, auto& na, auto&) { na = acc_i64.t(); }},
      {"num_accepted", [&](auto&, auto&, auto&, auto& na, auto&) { na = acc_short.t(); }},
      {"conv_pending", [&](auto&, auto&, auto& pe, auto&, auto&) { pe = pend_i64.t(); }},
      {"conv_pending", [&](auto&, auto&, auto& pe, auto&, auto&) { pe.shape[0] = c.S - 1; }},
      {"conv_state", [&](auto&, auto& st, auto&, auto&, auto&) { st = state_f64.t(); }},
      {"conv_state", [&](auto&, auto& st, auto&, auto&, auto&) { st = small_state.t(); }},
      {"conv_state", [&](auto&, auto& st, auto&, auto&, auto&) { st.device = Device::cuda; }},
      {"x", [&](auto& s, auto&, auto&, auto&, auto& ex) { (void)s; ex.backend = Backend::cuda; }},
  };
  for (Backend be : {Backend::reference, Backend::cpu}) {
    for (size_t i = 0; i < cases.size(); ++i) {
      ConvPool before(c);
      before.state.copy_from(pool.state);
      before.pending.copy_from(pool.pending);
      HostTensor out_before(c.x_dtype, {2, 3, c.dim});
      out_before.copy_from(out);
      Conv1dStep s = make_conv_step(c, x, w, slot, out);
      Tensor st = pool.state.t(), pe = pool.pending.t(), na = acc.t();
      Exec ex{be};
      cases[i].mutate(s, st, pe, na, ex);
      try {
        conv1d_update(s, st, pe, na, ex);
        ADD_FAILURE() << "case " << i << " did not throw";
      } catch (const Error& e) {
        EXPECT_EQ(e.argument(), cases[i].arg) << "case " << i << ": " << e.what();
        EXPECT_EQ(e.function(), "conv1d_update");
      }
      EXPECT_TRUE(pool.state.bytes_equal(before.state)) << "case " << i;
      EXPECT_TRUE(pool.pending.bytes_equal(before.pending)) << "case " << i;
      EXPECT_TRUE(out.bytes_equal(out_before)) << "case " << i;
    }
    // Corrupted pending count.
    pool.pending.set(2, 9);
    EXPECT_THROW(conv1d_update(make_conv_step(c, x, w, slot, out), pool.state, pool.pending, {},
                               Exec{be}),
                 Error);
    pool.pending.set(2, 5);
  }
  // The valid call goes through.
  conv1d_update(make_conv_step(c, x, w, slot, out), pool.state, pool.pending, acc, Exec{});
  EXPECT_EQ(pool.pending.get(0), 3.0);
  EXPECT_EQ(pool.pending.get(2), 3.0);
}

// As for the SSM pools, an accepted count for a row with nothing pending is
// an error (same wording); a batch that mixes fresh and pending rows runs as
// two calls, the fresh rows without num_accepted (or as a commit then one
// update, conv1d_commit_test.cpp).
TEST(Conv1d, FreshRowsRejectAcceptedCount) {
  for (Backend be : {Backend::reference, Backend::cpu}) {
    ConvConfig c{3, 40, 4, 4};
    std::mt19937_64 rng(41);
    const ConvWeights w(c, rng);
    ConvPool pool(c), split(c);
    pool.state.fill_uniform(rng, -1, 1);
    pool.pending.set(1, 3);
    split.state.copy_from(pool.state);
    split.pending.copy_from(pool.pending);
    HostTensor x(c.x_dtype, {2, 2, c.dim}), out(c.x_dtype, {2, 2, c.dim});
    x.fill_uniform(rng, -1, 1);
    out.fill_nan();
    const HostTensor slot = index_tensor({0, 1}), acc = index_tensor({1, 2});
    try {
      conv1d_update(make_conv_step(c, x, w, slot, out), pool.state, pool.pending, acc, Exec{be});
      ADD_FAILURE() << "accepted count on a fresh row was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.argument(), "num_accepted");
      EXPECT_NE(std::string(e.what()).find("slot 0 has no pending records to commit"), std::string::npos)
          << e.what();
    }
    EXPECT_TRUE(pool.state.bytes_equal(split.state));
    EXPECT_TRUE(pool.pending.bytes_equal(split.pending));
    for (int64_t k = 0; k < out.numel(); ++k) ASSERT_TRUE(std::isnan(out.get(k)));
    // The split: pending rows with their counts, fresh rows without.
    HostTensor x1(c.x_dtype, {1, 2, c.dim}), x0(c.x_dtype, {1, 2, c.dim}), o1(c.x_dtype, {1, 2, c.dim}),
        o0(c.x_dtype, {1, 2, c.dim});
    for (int64_t i = 0; i < 2 * c.dim; ++i) x0.set(i, x.get(i)), x1.set(i, x.get(2 * c.dim + i));
    const HostTensor s0 = index_tensor({0}), s1 = index_tensor({1}), a1 = index_tensor({2});
    conv1d_update(make_conv_step(c, x1, w, s1, o1), split.state, split.pending, a1, Exec{be});
    conv1d_update(make_conv_step(c, x0, w, s0, o0), split.state, split.pending, {}, Exec{be});
    EXPECT_EQ(split.pending.get(0), 2.0);
    EXPECT_EQ(split.pending.get(1), 2.0);
    // Row 0 continued from its (unshifted) history, row 1 from accepted count 2.
    HostTensor ref_out(c.x_dtype, {1, 2, c.dim});
    ConvPool ref(c);
    ref.state.copy_from(pool.state);
    ref.pending.copy_from(pool.pending);
    conv1d_update(make_conv_step(c, x1, w, s1, ref_out), ref.state, ref.pending, a1, Exec{be});
    EXPECT_TRUE(ref_out.bytes_equal(o1));
  }
}

TEST(Conv1d, BadPrefillChangesNothing) {
  ConvConfig c{4, 24, 4, 5};
  std::mt19937_64 rng(23);
  const ConvWeights w(c, rng);
  ConvPool pool(c);
  pool.state.fill_uniform(rng, -1, 1);
  HostTensor x(c.x_dtype, {9, c.dim}), out(c.x_dtype, {9, c.dim});
  out.fill_nan();
  struct Case {
    const char* arg;
    HostTensor cu, slot, init;
  };
  std::vector<Case> cases;
  cases.push_back({"cu_seqlens", index_tensor({0, 5, 8}), index_tensor({1, 3}), index_tensor({0, 1})});
  cases.push_back({"cu_seqlens", index_tensor({1, 5, 9}), index_tensor({1, 3}), index_tensor({0, 1})});
  cases.push_back({"cu_seqlens", index_tensor({0, 6, 5}), index_tensor({1, 3}), index_tensor({0, 1})});
  cases.push_back({"cu_seqlens", index_tensor({0, 9}), index_tensor({1, 3}), index_tensor({0, 1})});
  cases.push_back({"slot", index_tensor({0, 5, 9}), index_tensor({1, 1}), index_tensor({0, 1})});
  cases.push_back({"slot", index_tensor({0, 5, 9}), index_tensor({1, 4}), index_tensor({0, 1})});
  cases.push_back({"initial", index_tensor({0, 5, 9}), index_tensor({1, 3}), index_tensor({0, 2})});
  for (Backend be : {Backend::reference, Backend::cpu}) {
    for (size_t i = 0; i < cases.size(); ++i) {
      ConvPool before(c);
      before.state.copy_from(pool.state);
      before.pending.copy_from(pool.pending);
      try {
        conv1d_prefill(make_prefill(c, x, w, cases[i].cu, cases[i].slot, cases[i].init, out),
                       pool.state, pool.pending, Exec{be});
        ADD_FAILURE() << "case " << i << " did not throw";
      } catch (const Error& e) {
        EXPECT_EQ(e.argument(), cases[i].arg) << "case " << i << ": " << e.what();
      }
      EXPECT_TRUE(pool.state.bytes_equal(before.state)) << "case " << i;
      for (int64_t k = 0; k < out.numel(); ++k) ASSERT_TRUE(std::isnan(out.get(k)));
    }
  }
}

#if !defined(REPLAYSSM_WITH_CUDA)
TEST(Conv1d, CudaBackendAbsent) {
  ConvConfig c{2, 8, 4, 2};
  std::mt19937_64 rng(29);
  const ConvWeights w(c, rng);
  ConvPool pool(c);
  HostTensor x(c.x_dtype, {1, 1, c.dim}), out(c.x_dtype, {1, 1, c.dim});
  const HostTensor slot = index_tensor({0});
  Conv1dStep s = make_conv_step(c, x, w, slot, out);
  Tensor st = pool.state.t(), pe = pool.pending.t();
  for (Tensor* t : {&s.x, &s.weight, &s.bias, &s.slot, &s.out, &st, &pe}) t->device = Device::cuda;
  EXPECT_THROW(conv1d_update(s, st, pe, {}, Exec{Backend::cuda}), Error);
  EXPECT_FALSE(cuda_available());
}
#endif

}  // namespace
}  // namespace replayssm::test
