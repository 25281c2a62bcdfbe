// Slot operations (materialize, flush, copy, reset) and varlen prefill.
#include <gtest/gtest.h>

#include <random>

#include "mamba2_fixture.h"

using namespace mamba2_test;
using replayssm::Backend;
namespace rs = replayssm;

namespace {

const Shape SH{4, 8, 16, 2};

// Runs `steps` committed random steps (T ≤ T_max) on slots `sl`, mirrored in
// one oracle per row.
void drive(Pool& pool, const Params& prm, std::vector<Oracle>& orc, const std::vector<int64_t>& sl,
           int steps, std::mt19937& rng, Backend be, int64_t T_max) {
  for (int i = 0; i < steps; ++i) {
    const int64_t T = 1 + rng() % uint32_t(T_max);
    Step st(SH, int64_t(sl.size()), T, DType::f32, false);
    st.randomize(rng, prm);
    st.set_slots(sl);
    rs::mamba2_replay_step(st.view(prm), pool.view(), rs::Tensor{}, true, exec_of(be));
    for (size_t b = 0; b < sl.size(); ++b) orc[b].commit(st, int64_t(b), T, prm);
  }
}

TEST(Mamba2Slots, MaterializeFlushCopyReset) {
  const double tol = rs::test::tolerance(DType::f32);
  for (Backend be : {Backend::reference, Backend::cpu}) {
    std::mt19937 rng(21);
    Params prm(SH, rng);
    const int64_t L = 8, T = 3;
    Pool pool(SH, 4, L, T, DType::f32, DType::f32, prm);
    pool.set_cur(0, {5, 0, 0});
    std::vector<Oracle> orc(1, Oracle(SH));
    drive(pool, prm, orc, {0}, 11, rng, be, T);
    ASSERT_GT(pool.cur(0).count, 0);

    // Materialized state equals the standard state at the committed position.
    HostTensor out(DType::f64, {2, SH.H, SH.P, SH.N}), out2(DType::f64, {2, SH.H, SH.P, SH.N});
    out.fill_nan();
    HostTensor s0 = rs::test::index_tensor({0, -1});
    rs::mamba2_materialize(pool.view(), s0, -1, out, exec_of(be));
    const int64_t per = SH.H * SH.P * SH.N;
    const std::vector<double> all = out.to_f64();
    const std::vector<double> got(all.begin(), all.begin() + per);
    EXPECT_LE(rs::test::rel_err(got, orc[0].S), tol);
    EXPECT_TRUE(std::isnan(out.get(per))) << "pad row of out must stay untouched";

    // Flush then materialize: unchanged (bit-exact with an fp32 state), empty ring.
    HostTensor one = rs::test::index_tensor({0});
    HostTensor m1(DType::f32, {1, SH.H, SH.P, SH.N}), m2(DType::f32, {1, SH.H, SH.P, SH.N});
    rs::mamba2_materialize(pool.view(), one, -1, m1, exec_of(be));
    const auto c = pool.cur(0);
    rs::mamba2_flush(pool.view(), one, -1, exec_of(be));
    EXPECT_EQ(pool.cur(0).count, 0);
    EXPECT_EQ(pool.cur(0).start, (c.start + c.count) % pool.R);
    rs::mamba2_materialize(pool.view(), one, -1, m2, exec_of(be));
    EXPECT_TRUE(m1.bytes_equal(m2));

    // A copied slot continues identically to its source.
    drive(pool, prm, orc, {0}, 3, rng, be, T);
    rs::mamba2_copy_slot(pool.view(), rs::test::index_tensor({0}), rs::test::index_tensor({2}), -1,
                         exec_of(be));
    for (int i = 0; i < 12; ++i) {
      Step st(SH, 2, 2, DType::f32, false);
      st.randomize(rng, prm);
      st.copy_token(1, 0, st, 0, 0), st.copy_token(1, 1, st, 0, 1);
      st.set_slots({0, 2});
      rs::mamba2_replay_step(st.view(prm), pool.view(), rs::Tensor{}, true, exec_of(be));
      for (int64_t k = 0; k < 2 * SH.H * SH.P; ++k)
        ASSERT_EQ(st.y.get(k), st.y.get(2 * SH.H * SH.P + k)) << "copy diverged at step " << i;
    }

    // A reset slot carries nothing over: it behaves like a fresh zero state.
    rs::mamba2_reset_slot(pool.view(), rs::test::index_tensor({2}), -1, exec_of(be));
    EXPECT_EQ(pool.cur(2).count, 0);
    Oracle fresh(SH);
    std::vector<Oracle> fr(1, fresh);
    for (int i = 0; i < 10; ++i) {
      Step st(SH, 1, 2, DType::f32, false);
      st.randomize(rng, prm);
      st.set_slots({2});
      const std::vector<double> want = fr[0].window(st, 0, prm);
      rs::mamba2_replay_step(st.view(prm), pool.view(), rs::Tensor{}, true, exec_of(be));
      fr[0].commit(st, 0, 2, prm);
      ASSERT_LE(rs::test::rel_err(st.row_y(0), want), tol);
    }
  }
}

// Varlen prefill (a zero-length prompt, a pad row, an initial-state row)
// equals the standard recurrence; on a baseline pool too.
TEST(Mamba2Slots, PrefillVarlen) {
  const double tol = rs::test::tolerance(DType::f32);
  for (Backend be : {Backend::reference, Backend::cpu})
    for (bool ring : {true, false}) {
      std::mt19937 rng(ring ? 41 : 42);
      Params prm(SH, rng);
      Pool pool(SH, 5, 8, 4, DType::f32, DType::f32, prm);
      pool.state.fill_normal(rng);
      std::vector<Oracle> orc(1, Oracle(SH));
      if (ring) {
        pool.set_cur(3, {2, 0, 0});
        drive(pool, prm, orc, {3}, 5, rng, be, 4);  // slot 3 holds committed records
      } else {
        orc[0].S = state_f64(pool.state, 3);
      }
      const std::vector<int64_t> len{5, 0, 9, 3, 4}, slots{0, 1, 2, -1, 3};
      const std::vector<int> initial{0, 0, 0, 0, 1};
      int64_t tokens = 0;
      for (int64_t l : len) tokens += l;
      Step prompt(SH, 1, tokens, DType::f32, true);
      prompt.randomize(rng, prm);
      HostTensor cu(DType::i64, {6}), sl = rs::test::index_tensor(slots), ini(DType::i32, {5});
      for (int64_t b = 0, at = 0; b < 5; ++b) cu.set(b, double(at)), at += len[size_t(b)], cu.set(b + 1, double(at));
      for (int64_t b = 0; b < 5; ++b) ini.set(b, initial[size_t(b)]);
      rs::Mamba2Prefill p;
      p.x = rs::Tensor::view(prompt.x.data(), DType::f32, {tokens, SH.H, SH.P});
      p.dt = rs::Tensor::view(prompt.dt.data(), DType::f32, {tokens, SH.H});
      p.Bm = rs::Tensor::view(prompt.Bm.data(), DType::f32, {tokens, SH.G, SH.N});
      p.Cm = rs::Tensor::view(prompt.Cm.data(), DType::f32, {tokens, SH.G, SH.N});
      p.z = rs::Tensor::view(prompt.z.data(), DType::f32, {tokens, SH.H, SH.P});
      p.y = rs::Tensor::view(prompt.y.data(), DType::f32, {tokens, SH.H, SH.P});
      p.A = prm.A, p.dt_bias = prm.dt_bias, p.D = prm.D;
      p.cu_seqlens = cu, p.slot = sl, p.initial = ini;
      rs::Mamba2Pool view = pool.view();
      if (!ring) view.ring_x = view.ring_dt = view.ring_B = view.cursor = rs::Tensor{};
      const int32_t start3 = pool.cur(3).start;
      rs::mamba2_prefill(p, view, exec_of(be));
      for (int64_t b = 0, at = 0; b < 5; ++b) {
        Oracle o = initial[size_t(b)] ? orc[0] : Oracle(SH);
        std::vector<double> want, got;
        for (int64_t i = at; i < at + len[size_t(b)]; ++i) {
          o.apply(prompt, 0, i, prm, &want);
          for (int64_t k = 0; k < SH.H * SH.P; ++k) got.push_back(prompt.y.get(i * SH.H * SH.P + k));
        }
        at += len[size_t(b)];
        if (slots[size_t(b)] < 0) {
          for (double v : got) ASSERT_EQ(v, 0.0);
          continue;
        }
        if (!want.empty()) {
          EXPECT_LE(rs::test::rel_err(got, want), tol) << "row " << b;
        }
        EXPECT_LE(rs::test::rel_err(state_f64(pool.state, slots[size_t(b)]), o.S), tol)
            << "state row " << b;
        if (ring) {
          EXPECT_EQ(pool.cur(slots[size_t(b)]).count, 0);
          EXPECT_EQ(pool.cur(slots[size_t(b)]).pending, 0);
        }
      }
      if (ring) {
        EXPECT_EQ(pool.cur(3).start, start3) << "prefill keeps the ring start";
      }
    }
}

TEST(Mamba2Slots, Sizing) {
  const rs::Mamba2Shape s{128, 64, 128, 8};
  EXPECT_EQ(rs::mamba2_ring_length(16, 5), 21);
  EXPECT_EQ(rs::mamba2_replay_bytes_per_row(s, DType::f32, DType::bf16, 16, 5),
            128 * 64 * 128 * 4 + 21 * (128 * 64 * 2 + 128 * 4 + 8 * 128 * 2) + 12);
  EXPECT_EQ(rs::mamba2_snapshot_bytes_per_row(s, DType::bf16, 5), 5 * 128 * 64 * 128 * 2);
  EXPECT_THROW(rs::mamba2_ring_length(4, 5), rs::Error);
}

}  // namespace
