// Fast cpu backend vs the fp64 reference, in lockstep on identical pools and
// inputs: dtype sweep, long-run drift, odd sizes, GQA ratios, per-rank model
// shapes, decay extremes, gating variants; baselines (decode, snapshot) vs
// the oracle.
#include <gtest/gtest.h>

#include "delta_fixture.h"

namespace replayssm::test::delta {
namespace {

// Runs `steps` replay steps (B rows, random T <= T_max, random acceptance,
// fused commits) on a reference pool and a cpu pool; returns per-step
// relative output error cpu vs reference.
std::vector<double> lockstep(const Cfg& c, int steps, uint64_t seed, int64_t B = 2, int threads = 2) {
  std::mt19937_64 rng(seed);
  Params params(c, rng);
  Pool pr(c), pc(c);
  std::vector<int64_t> slots;
  for (int64_t b = 0; b < B; ++b) slots.push_back((b * 3 + 1) % c.S);
  HostTensor slot = index_tensor(slots);
  for (int64_t b = 0; b < B; ++b) {
    // Random starting state: run the reference recurrence on a short prompt.
    pr.set_cur(slots[sz(b)], RingCursor{int32_t(rng() % uint64_t(c.R())), 0, 0});
  }
  pc.copy_from(pr);
  std::vector<double> errs;
  bool pending = false;
  std::vector<int64_t> acc(sz(B), 1);
  for (int step = 0; step < steps; ++step) {
    const int64_t T = 1 + int64_t(rng() % uint64_t(c.T_max));
    Inputs ir(c, {B, T}), ic(c, {B, T});
    for (int64_t i = 0; i < B * T; ++i) randomize_token(c, ir, i, rng);
    for (auto [dst, src] : {std::pair{&ic.q, &ir.q}, {&ic.k, &ir.k}, {&ic.v, &ir.v}, {&ic.g, &ir.g}, {&ic.beta, &ir.beta}})
      dst->copy_from(*src);
    HostTensor na = index_tensor(acc);
    const Tensor fused = pending ? na.t() : Tensor{};
    delta_replay_step(c.fam, step_view(c, params, ir, slot), pr.view(), fused, false, exec_of(Backend::reference));
    delta_replay_step(c.fam, step_view(c, params, ic, slot), pc.view(), fused, false, exec_of(Backend::cpu, threads));
    errs.push_back(rel_err(ic.o.to_f64(), ir.o.to_f64()));
    for (int64_t b = 0; b < B; ++b) acc[sz(b)] = 1 + int64_t(rng() % uint64_t(T));
    pending = true;
  }
  // Final states agree too.
  HostTensor mr(DType::f32, {B, c.HV, c.V, c.K}), mc(DType::f32, {B, c.HV, c.V, c.K});
  HostTensor na = index_tensor(acc);
  delta_commit(c.fam, pr.view(), slot, -1, na, exec_of(Backend::reference));
  delta_commit(c.fam, pc.view(), slot, -1, na, exec_of(Backend::cpu));
  delta_materialize(c.fam, pr.view(), slot, -1, mr, exec_of(Backend::reference));
  delta_materialize(c.fam, pc.view(), slot, -1, mc, exec_of(Backend::cpu));
  EXPECT_LE(rel_err(mc.to_f64(), mr.to_f64()), tolerance(limiting(c)));
  return errs;
}

void expect_within(const Cfg& c, int steps, uint64_t seed, const char* what) {
  const auto errs = lockstep(c, steps, seed);
  const double tol = tolerance(limiting(c));
  for (size_t i = 0; i < errs.size(); ++i) ASSERT_LE(errs[i], tol) << what << " step " << i;
}

void dtype_sweep(DeltaFamily fam) {
  struct D { DType state, act, ring_d; };
  const D ds[] = {{DType::f32, DType::f32, DType::f32},   {DType::bf16, DType::f32, DType::f32},
                  {DType::f16, DType::f32, DType::f32},   {DType::f32, DType::bf16, DType::f32},
                  {DType::f32, DType::f16, DType::f32},   {DType::f32, DType::f32, DType::bf16},
                  {DType::bf16, DType::bf16, DType::bf16}, {DType::f16, DType::f16, DType::f32}};
  int n = 0;
  for (const D& d : ds) {
    Cfg c;
    c.fam = fam;
    c.state = d.state;
    c.act = d.act;
    c.ring_d = d.ring_d;
    c.gate = n % 2 ? d.act : DType::f32;
    c.L = 8;
    c.T_max = 5;
    expect_within(c, 60, 300 + uint64_t(n++), dtype_name(d.state));
  }
}
TEST(GdnFast, DtypesMatchReference) { dtype_sweep(DeltaFamily::gdn); }
TEST(KdaFast, DtypesMatchReference) { dtype_sweep(DeltaFamily::kda); }

// 20,000 steps, batch 2: the cpu-vs-reference difference does not grow.
void no_drift(DeltaFamily fam) {
  Cfg c;
  c.fam = fam;
  c.H = 1;
  c.HV = 2;
  c.K = 16;
  c.V = 16;
  c.L = 8;
  c.T_max = 4;
  c.S = 4;
  const auto errs = lockstep(c, 20000, 77, 2, 1);
  const size_t tenth = errs.size() / 10;
  double first = 0, last = 0, worst = 0;
  for (size_t i = 0; i < tenth; ++i) { first += errs[i]; last += errs[errs.size() - 1 - i]; }
  for (double e : errs) worst = std::max(worst, e);
  first /= double(tenth);
  last /= double(tenth);
  EXPECT_LE(worst, tolerance(DType::f32));
  EXPECT_LE(last, 2 * first + 1e-7) << "first 10% mean " << first << ", last 10% mean " << last;
}
TEST(GdnFast, NoDriftOver20kSteps) { no_drift(DeltaFamily::gdn); }
TEST(KdaFast, NoDriftOver20kSteps) { no_drift(DeltaFamily::kda); }

struct Shape { int64_t H, HV, K, V; };
void shapes(DeltaFamily fam, std::initializer_list<Shape> list, int steps) {
  int n = 0;
  for (const Shape& s : list) {
    Cfg c;
    c.fam = fam;
    c.H = s.H;
    c.HV = s.HV;
    c.K = s.K;
    c.V = s.V;
    c.L = 8;
    c.T_max = 5;
    c.S = 4;
    c.state = n % 3 == 1 ? DType::bf16 : DType::f32;
    c.act = n % 2 ? DType::bf16 : DType::f32;
    expect_within(c, steps, 500 + uint64_t(n++), "shape");
  }
}
// Odd sizes and GQA ratios 1, 2, 4.
TEST(GdnFast, OddSizesAndGqa) {
  shapes(DeltaFamily::gdn, {{1, 1, 96, 96}, {2, 4, 64, 32}, {1, 4, 24, 40}, {3, 3, 33, 17}, {2, 8, 16, 8}}, 12);
}
TEST(KdaFast, OddSizesAndGqa) {
  shapes(DeltaFamily::kda, {{1, 1, 96, 96}, {2, 4, 64, 32}, {1, 4, 24, 40}, {3, 3, 33, 17}, {2, 8, 16, 8}}, 12);
}
// Per-rank shapes of the models at TP = 4 and 8 (design §6).
TEST(GdnFast, TensorParallelShapes) { shapes(DeltaFamily::gdn, {{4, 16, 128, 128}, {2, 8, 128, 128}, {2, 6, 128, 128}}, 4); }
TEST(KdaFast, TensorParallelShapes) { shapes(DeltaFamily::kda, {{8, 8, 128, 128}, {4, 4, 128, 128}}, 4); }

// Decays close to 1 and to 0, raw and activated gating, with and without L2 norm.
void gating_variants(DeltaFamily fam) {
  int n = 0;
  for (Decay dec : {Decay::near_one, Decay::near_zero, Decay::mixed})
    for (bool raw : {true, false})
      for (bool l2 : {true, false}) {
        Cfg c;
        c.fam = fam;
        c.decay = dec;
        c.gating.raw_gate = raw;
        c.gating.raw_beta = raw;
        c.gating.l2norm_qk = l2;
        c.gating.q_scale = n % 4 == 3 ? 0.5f : 0.f;
        c.dt_bias = n % 3 != 0;
        c.L = 16;
        c.T_max = 4;
        expect_within(c, 40, 700 + uint64_t(n++), "gating");
        RunOpts o;
        o.backend = Backend::cpu;
        o.seed = 800 + uint64_t(n);
        o.steps = 30;
        RunResult r = run_schedule(c, o);
        EXPECT_LE(r.max_out_err, tolerance(DType::f32));
        EXPECT_LE(r.max_state_err, tolerance(DType::f32));
      }
}
TEST(GdnFast, GatingVariants) { gating_variants(DeltaFamily::gdn); }
TEST(KdaFast, GatingVariants) { gating_variants(DeltaFamily::kda); }

// Baselines: decode (T tokens, state written once) and snapshot decode vs the oracle.
void baselines(DeltaFamily fam, Backend be) {
  for (DType st : {DType::f32, DType::bf16}) {
    Cfg c;
    c.fam = fam;
    c.state = st;
    c.HV = 4;
    c.H = 1;
    c.K = 32;
    c.V = 24;
    std::mt19937_64 rng(31);
    Params params(c, rng);
    Oracle oracle(c, params);
    const int64_t B = 3, T = 3, HVV = c.HV * c.V;
    HostTensor state(c.state, {c.S, c.HV, c.V, c.K});
    state.fill_normal(rng, 0, 0.3);
    HostTensor slot = index_tensor({4, -1, 0});
    std::vector<Oracle::State> S = {slot_state(state, 4), {}, slot_state(state, 0)};
    const double tol = tolerance(limiting(c));
    for (int step = 0; step < 6; ++step) {
      Inputs in(c, {B, T});
      for (int64_t i = 0; i < B * T; ++i) randomize_token(c, in, i, rng);
      delta_decode(fam, step_view(c, params, in, slot), state, exec_of(be));
      std::vector<double> o;
      for (int64_t b : {0, 2}) {
        for (int64_t t = 0; t < T; ++t) {
          oracle.apply(S[sz(b)], in, b * T + t, o);
          EXPECT_LE(rel_err(token_out(in.o, b * T + t, HVV), o), tol);
        }
        EXPECT_LE(rel_err(slot_state(state, b == 0 ? 4 : 0), S[sz(b)]), tol);
      }
      for (int64_t i = 0; i < T * HVV; ++i) EXPECT_EQ(in.o.get(T * HVV + i), 0.0);
    }
    // Snapshot: row 0 writes slots {1, 2, 3}, row 1 is pad, row 2 writes {5, 4, 0}
    // (row 2 continues from its accepted snapshot slot).
    HostTensor idx(DType::i32, {B, T});
    const int32_t ids[] = {1, 2, 3, -1, -1, -1, 5, 4, 0};
    for (int i = 0; i < 9; ++i) idx.set(i, ids[i]);
    HostTensor na = index_tensor({1, 1, 2});  // row 2 starts from idx[2, 1] = slot 4
    Inputs in(c, {B, T});
    for (int64_t i = 0; i < B * T; ++i) randomize_token(c, in, i, rng);
    std::vector<Oracle::State> start = {slot_state(state, 1), {}, slot_state(state, 4)};
    delta_snapshot_decode(fam, step_view(c, params, in, slot), state, idx, na, exec_of(be));
    std::vector<double> o;
    for (int64_t b : {0, 2})
      for (int64_t t = 0; t < T; ++t) {
        oracle.apply(start[sz(b)], in, b * T + t, o);
        EXPECT_LE(rel_err(token_out(in.o, b * T + t, HVV), o), tol);
        EXPECT_LE(rel_err(slot_state(state, ids[b * T + t]), start[sz(b)]), tol);
      }
  }
}
TEST(GdnBaseline, DecodeAndSnapshotMatchRecurrence) {
  baselines(DeltaFamily::gdn, Backend::reference);
  baselines(DeltaFamily::gdn, Backend::cpu);
}
TEST(KdaBaseline, DecodeAndSnapshotMatchRecurrence) {
  baselines(DeltaFamily::kda, Backend::reference);
  baselines(DeltaFamily::kda, Backend::cpu);
}

}  // namespace
}  // namespace replayssm::test::delta
