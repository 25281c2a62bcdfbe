// Fast CPU backend against the fp64 reference: every (state, activation)
// dtype pair, a long run without error growth, odd and model shapes, decay
// extremes, and the standard / snapshot baselines.
#include <gtest/gtest.h>

#include <random>

#include "mamba2_fixture.h"

using namespace mamba2_test;
using replayssm::Backend;
namespace rs = replayssm;

namespace {

// The same random schedule on a reference pool and a cpu pool.
struct Twin {
  Shape sh;
  int64_t rows, L, T_max;
  DType sd, act;
  std::mt19937 rng;
  Params prm;
  Pool ref, cpu;
  std::vector<int64_t> pending;
  int threads;
  Twin(Shape s, int64_t rows_, int64_t L_, int64_t T_max_, DType sd_, DType act_, uint32_t seed,
       Decay regime = Decay::normal, int threads_ = 0)
      : sh(s), rows(rows_), L(L_), T_max(T_max_), sd(sd_), act(act_), rng(seed), prm(s, rng, regime),
        ref(s, rows_, L_, T_max_, sd_, act_, prm), cpu(s, rows_, L_, T_max_, sd_, act_, prm),
        pending(size_t(rows_), 0), threads(threads_) {
    ref.state.fill_normal(rng, 0, 0.5);
    for (int64_t r = 0; r < rows; ++r) ref.set_cur(r, {int32_t(rng() % uint32_t(ref.R)), 0, 0});
    cpu.copy_from(ref);
  }
  // One step with T tokens; returns the relative error of the cpu outputs.
  double step(int64_t T, bool with_z = true) {
    Step a(sh, rows, T, act, with_z), b(sh, rows, T, act, with_z);
    a.randomize(rng, prm);
    std::vector<int64_t> sl(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) sl[size_t(r)] = r;
    a.set_slots(sl);
    b.copy_from_all(a);
    HostTensor acc(DType::i32, {rows});
    bool any = false;
    for (int64_t r = 0; r < rows; ++r) {
      acc.set(r, double(pending[size_t(r)] ? 1 + rng() % uint32_t(pending[size_t(r)]) : 1));
      any |= pending[size_t(r)] > 0;
    }
    const bool commit_all = rng() % 3 == 0;
    rs::mamba2_replay_step(a.view(prm), ref.view(), any ? acc.t() : rs::Tensor{}, commit_all,
                           exec_of(Backend::reference));
    rs::mamba2_replay_step(b.view(prm), cpu.view(), any ? acc.t() : rs::Tensor{}, commit_all,
                           exec_of(Backend::cpu, threads));
    for (auto& p : pending) p = commit_all ? 0 : T;
    EXPECT_TRUE(ref.cursor.bytes_equal(cpu.cursor));
    return rs::test::rel_err(b.y.to_f64(), a.y.to_f64());
  }
  double tol() const { return rs::test::tolerance(limiting(sd, act)); }
  // Commit everything, flush, compare checkpoints.
  double flush_and_compare() {
    HostTensor acc(DType::i32, {rows}), slots(DType::i32, {rows});
    for (int64_t r = 0; r < rows; ++r) slots.set(r, double(r)), acc.set(r, double(pending[size_t(r)]));
    if (pending[0]) {
      rs::mamba2_commit(ref.view(), slots, -1, acc, exec_of(Backend::reference));
      rs::mamba2_commit(cpu.view(), slots, -1, acc, exec_of(Backend::cpu));
    }
    for (auto& p : pending) p = 0;
    rs::mamba2_flush(ref.view(), slots, -1, exec_of(Backend::reference));
    rs::mamba2_flush(cpu.view(), slots, -1, exec_of(Backend::cpu));
    return rs::test::rel_err(cpu.state.to_f64(), ref.state.to_f64());
  }
};

TEST(Mamba2Fast, MatchesReferenceForEveryDtype) {
  uint32_t seed = 1;
  for (DType sd : {DType::f32, DType::bf16, DType::f16})
    for (DType act : {DType::f32, DType::bf16, DType::f16}) {
      Twin tw({6, 16, 32, 3}, 3, 8, 5, sd, act, seed++);
      for (int i = 0; i < 40; ++i) {
        const double e = tw.step(1 + tw.rng() % 5);
        ASSERT_LE(e, tw.tol()) << "state " << rs::dtype_name(sd) << " act " << rs::dtype_name(act);
      }
      EXPECT_LE(tw.flush_and_compare(), tw.tol());
    }
}

// 20,000 steps: the cpu/reference difference does not grow.
TEST(Mamba2Fast, LongRunNoErrorGrowth) {
  Twin tw({2, 8, 16, 1}, 2, 16, 4, DType::f32, DType::f32, 77, Decay::normal, 1);
  const int steps = 20000;
  std::vector<double> err(steps);
  for (int i = 0; i < steps; ++i) {
    err[size_t(i)] = tw.step(1 + tw.rng() % 4, false);
    ASSERT_LE(err[size_t(i)], tw.tol()) << "step " << i;
  }
  double first = 0, last = 0;
  for (int i = 0; i < steps / 10; ++i) first = std::max(first, err[size_t(i)]), last = std::max(last, err[size_t(steps - 1 - i)]);
  EXPECT_LE(last, std::max(4 * first, 1e-6)) << "first 10% max " << first << ", last 10% max " << last;
  EXPECT_LE(tw.flush_and_compare(), tw.tol());
}

TEST(Mamba2Fast, OddSizesAndGroupRatios) {
  const Shape shapes[] = {{6, 80, 64, 3}, {4, 5, 7, 4}, {8, 3, 33, 2}, {8, 16, 24, 2}, {8, 9, 16, 8}};
  uint32_t seed = 30;
  for (const Shape& s : shapes) {
    Twin tw(s, 2, 4, 4, DType::f32, DType::bf16, seed++);
    for (int i = 0; i < 8; ++i) ASSERT_LE(tw.step(1 + tw.rng() % 4), tw.tol()) << "H" << s.H << " P" << s.P << " N" << s.N << " G" << s.G;
    EXPECT_LE(tw.flush_and_compare(), tw.tol());
  }
}

// Per-rank shapes of the Nemotron-3 Mamba-2 layers at TP = 4 and 8.
TEST(Mamba2Fast, ModelShapesPerRank) {
  const Shape shapes[] = {{24, 80, 128, 2}, {32, 64, 128, 2}, {12, 80, 128, 1}, {16, 64, 128, 1}};
  uint32_t seed = 50;
  for (const Shape& s : shapes) {
    Twin tw(s, int64_t(1 + seed % 2), 4, 2, DType::bf16, DType::bf16, seed);
    ++seed;
    for (int i = 0; i < 5; ++i) ASSERT_LE(tw.step(1 + tw.rng() % 2), tw.tol()) << "H" << s.H << " P" << s.P;
    EXPECT_LE(tw.flush_and_compare(), tw.tol());
  }
}

TEST(Mamba2Fast, DecayExtremes) {
  for (Decay r : {Decay::near_one, Decay::near_zero})
    for (DType sd : {DType::f32, DType::bf16}) {
      Twin tw({4, 16, 32, 2}, 2, 16, 5, sd, DType::f32, 9, r);
      for (int i = 0; i < 60; ++i) ASSERT_LE(tw.step(1 + tw.rng() % 5), tw.tol());
      EXPECT_LE(tw.flush_and_compare(), tw.tol());
    }
}

// Standard decode on both backends against the fp64 recurrence.
TEST(Mamba2Fast, DecodeMatchesRecurrence) {
  const Shape sh{6, 16, 32, 2};
  for (DType sd : {DType::f32, DType::bf16})
    for (Backend be : {Backend::reference, Backend::cpu}) {
      std::mt19937 rng(3);
      Params prm(sh, rng);
      HostTensor state(sd, {4, sh.H, sh.P, sh.N});
      std::vector<Oracle> orc(2, Oracle(sh));
      for (int i = 0; i < 30; ++i) {
        const int64_t T = 1 + rng() % 3;
        Step st(sh, 3, T, DType::f32, true);
        st.randomize(rng, prm);
        st.set_slots({3, -1, 1});
        std::vector<double> want0 = orc[0].window(st, 0, prm), want2 = orc[1].window(st, 2, prm);
        rs::mamba2_decode(st.view(prm), state, exec_of(be));
        orc[0].commit(st, 0, T, prm), orc[1].commit(st, 2, T, prm);
        // bf16 state: the oracle state is re-rounded as the pool is.
        if (sd == DType::bf16) {
          orc[0].S = state_f64(state, 3);
          orc[1].S = state_f64(state, 1);
        }
        const double tol = rs::test::tolerance(sd);
        ASSERT_LE(rs::test::rel_err(st.row_y(0), want0), tol);
        ASSERT_LE(rs::test::rel_err(st.row_y(2), want2), tol);
        for (double v : st.row_y(1)) ASSERT_EQ(v, 0.0);
        ASSERT_LE(rs::test::rel_err(state_f64(state, 3), orc[0].S), tol);
      }
      for (int64_t i = 0; i < state.numel() / 4; ++i) ASSERT_EQ(state.get(i), 0.0) << "slot 0 untouched";
    }
}

// Snapshot decode: state after token t lands in state_indices[b, t]; the next
// step starts from column num_accepted − 1.
TEST(Mamba2Fast, SnapshotDecodeMatchesRecurrence) {
  const Shape sh{4, 8, 16, 2};
  const int64_t T = 4;
  for (Backend be : {Backend::reference, Backend::cpu}) {
    std::mt19937 rng(8);
    Params prm(sh, rng);
    HostTensor state(DType::f32, {2 * T + 1, sh.H, sh.P, sh.N});
    HostTensor idx(DType::i32, {2, T});
    for (int64_t t = 0; t < T; ++t) idx.set(t, double(t)), idx.set(T + t, -1);  // row 1 is a pad
    Oracle orc(sh);
    HostTensor acc(DType::i32, {2});
    acc.fill(1);
    for (int i = 0; i < 20; ++i) {
      Step st(sh, 2, T, DType::f32, false);
      st.randomize(rng, prm);
      const std::vector<double> want = orc.window(st, 0, prm);
      const int64_t a = 1 + rng() % T;
      rs::mamba2_snapshot_decode(st.view(prm), state, idx, i ? acc.t() : rs::Tensor{}, exec_of(be));
      ASSERT_LE(rs::test::rel_err(st.row_y(0), want), rs::test::tolerance(DType::f32));
      for (double v : st.row_y(1)) ASSERT_EQ(v, 0.0);
      Oracle tmp = orc;
      for (int64_t t = 0; t < T; ++t) {
        tmp.apply(st, 0, t, prm, nullptr);
        ASSERT_LE(rs::test::rel_err(state_f64(state, int64_t(idx.get(t))), tmp.S), rs::test::tolerance(DType::f32));
      }
      orc.commit(st, 0, a, prm);
      acc.set(0, double(a));
    }
  }
}

}  // namespace
