// Metamorphic invariants of replay decode (design §5) on the reference and
// fast CPU backends, over randomized schedules of steps, drafts, acceptances,
// flushes and ring positions, against an independent fp64 recurrence.
#include <gtest/gtest.h>

#include <memory>
#include <random>

#include "mamba2_fixture.h"

using namespace mamba2_test;
using replayssm::Backend;
using replayssm::RingCursor;
namespace rs = replayssm;

namespace {

// Runs a random schedule on one pool and checks every invariant after every
// step. Rows map to distinct slots of a larger pool (other slots must stay
// untouched); a row may be a pad row in a step.
struct Schedule {
  Shape sh;
  int64_t rows, slots, L, T_max;
  DType sd, act;
  Backend backend;
  bool with_z;
  std::mt19937 rng;
  Params params;
  Pool pool;
  std::vector<int64_t> slot_of;
  std::vector<Oracle> oracle;
  std::vector<std::shared_ptr<Step>> last;  // step that left the pending records
  std::vector<int64_t> pending;
  double worst = 0;
  int64_t flushes = 0, steps = 0;

  Schedule(Shape s, int64_t rows_, int64_t L_, int64_t T_max_, DType sd_, DType act_, Backend be,
           bool z, uint32_t seed, Decay regime = Decay::normal)
      : sh(s), rows(rows_), slots(rows_ + 2), L(L_), T_max(T_max_), sd(sd_), act(act_),
        backend(be), with_z(z), rng(seed), params(s, rng, regime),
        pool(s, rows_ + 2, L_, T_max_, sd_, act_, params), oracle(size_t(rows_), Oracle(s)),
        last(static_cast<size_t>(rows_)), pending(size_t(rows_), 0) {
    // Rows use a random subset of the slots; the rest must never change.
    std::vector<int64_t> perm(static_cast<size_t>(slots));
    for (int64_t i = 0; i < slots; ++i) perm[size_t(i)] = i;
    std::shuffle(perm.begin(), perm.end(), rng);
    slot_of.assign(perm.begin(), perm.begin() + rows);
    pool.state.fill_normal(rng, 0, 0.1);  // garbage the prefill must overwrite
    prefill();
  }

  double tol() const { return replayssm::test::tolerance(limiting(sd, act)); }

  // Random prompts (one of length 0), then random ring start positions.
  void prefill() {
    std::vector<int64_t> len(static_cast<size_t>(rows));
    int64_t tokens = 0;
    for (int64_t b = 0; b < rows; ++b) tokens += len[size_t(b)] = b == 1 ? 0 : int64_t(rng() % 6);
    Step prompt(sh, 1, std::max<int64_t>(tokens, 1), act, with_z);
    prompt.randomize(rng, params);
    HostTensor cu(DType::i32, {rows + 1}), slot = rs::test::index_tensor(slot_of);
    rs::Mamba2Prefill p;
    p.x = Tensor::view(prompt.x.data(), act, {tokens, sh.H, sh.P});
    p.dt = Tensor::view(prompt.dt.data(), DType::f32, {tokens, sh.H});
    p.Bm = Tensor::view(prompt.Bm.data(), act, {tokens, sh.G, sh.N});
    p.Cm = Tensor::view(prompt.Cm.data(), act, {tokens, sh.G, sh.N});
    if (with_z) p.z = Tensor::view(prompt.z.data(), act, {tokens, sh.H, sh.P});
    p.y = Tensor::view(prompt.y.data(), act, {tokens, sh.H, sh.P});
    p.A = params.A, p.dt_bias = params.dt_bias, p.D = params.D;
    p.cu_seqlens = cu, p.slot = slot;
    int64_t at = 0;
    cu.set(0, 0);
    for (int64_t b = 0; b < rows; ++b) cu.set(b + 1, double(at += len[size_t(b)]));
    rs::mamba2_prefill(p, pool.view(), exec_of(backend));
    at = 0;
    for (int64_t b = 0; b < rows; ++b) {
      std::vector<double> want, got;
      for (int64_t i = at; i < at + len[size_t(b)]; ++i) {
        oracle[size_t(b)].apply(prompt, 0, i, params, &want);
        for (int64_t k = 0; k < sh.H * sh.P; ++k) got.push_back(prompt.y.get(i * sh.H * sh.P + k));
      }
      at += len[size_t(b)];
      if (!want.empty()) {
        EXPECT_LE(rs::test::rel_err(got, want), tol()) << "prefill row " << b;
      }
      EXPECT_LE(rs::test::rel_err(state_f64(pool.state, slot_of[size_t(b)]), oracle[size_t(b)].S),
                tol()) << "prefill state row " << b;
      pool.set_cur(slot_of[size_t(b)], RingCursor{int32_t(rng() % uint32_t(pool.R)), 0, 0});
    }
  }

  // One random step; checks outputs, checkpoints, untouched bytes.
  void step(int64_t T, double pad_prob = 0.15) {
    std::uniform_real_distribution<double> u(0, 1);
    auto st = std::make_shared<Step>(sh, rows, T, act, with_z);
    st->randomize(rng, params);
    std::vector<int64_t> sl(static_cast<size_t>(rows));
    bool all_pending = true;
    for (int64_t b = 0; b < rows; ++b) {
      sl[size_t(b)] = u(rng) < pad_prob ? -1 : slot_of[size_t(b)];
      if (sl[size_t(b)] >= 0 && pending[size_t(b)] == 0) all_pending = false;
    }
    st->set_slots(sl);
    // Accepted counts of the previous windows: fused into this step when
    // every live row has pending records (at random), else a commit call.
    HostTensor acc(DType::i32, {rows});
    for (int64_t b = 0; b < rows; ++b) {
      const int64_t a = pending[size_t(b)] ? 1 + int64_t(rng() % uint64_t(pending[size_t(b)])) : 1;
      acc.set(b, double(a));
    }
    const bool fused = all_pending && u(rng) < 0.5;
    if (!fused) {
      std::vector<int64_t> cs(size_t(rows), -1);
      bool any = false;
      for (int64_t b = 0; b < rows; ++b)
        if (sl[size_t(b)] >= 0 && pending[size_t(b)]) cs[size_t(b)] = sl[size_t(b)], any = true;
      if (any) rs::mamba2_commit(pool.view(), rs::test::index_tensor(cs), -1, acc, exec_of(backend));
    }
    std::vector<int64_t> in_step(size_t(rows), 0);  // commits the step itself applies
    for (int64_t b = 0; b < rows; ++b)
      if (sl[size_t(b)] >= 0 && pending[size_t(b)]) {
        oracle[size_t(b)].commit(*last[size_t(b)], b, int64_t(acc.get(b)), params);
        pending[size_t(b)] = 0;
        if (fused) in_step[size_t(b)] = int64_t(acc.get(b));
      }
    // Expected flushes and the bytes that must not change.
    std::vector<bool> flush(size_t(rows), false);
    std::vector<std::vector<uint8_t>> before(static_cast<size_t>(slots));
    for (int64_t s = 0; s < slots; ++s) before[size_t(s)] = pool.slot_bytes(s);
    std::vector<std::vector<uint8_t>> ckpt(static_cast<size_t>(rows));
    for (int64_t b = 0; b < rows; ++b) {
      if (sl[size_t(b)] < 0) continue;
      const RingCursor c = pool.cur(sl[size_t(b)]);
      flush[size_t(b)] = c.count + in_step[size_t(b)] + T > L;
      ckpt[size_t(b)] = pool.state_bytes(sl[size_t(b)]);
    }
    const bool commit_all = u(rng) < 0.3;
    rs::mamba2_replay_step(st->view(params), pool.view(), fused ? acc.t() : Tensor{}, commit_all,
                           exec_of(backend));
    ++steps;
    for (int64_t b = 0; b < rows; ++b) {
      const int64_t s = sl[size_t(b)];
      if (s < 0) {
        for (double v : st->row_y(b)) ASSERT_EQ(v, 0.0) << "pad row output";
        continue;
      }
      const double e = rs::test::rel_err(st->row_y(b), oracle[size_t(b)].window(*st, b, params));
      worst = std::max(worst, e);
      ASSERT_LE(e, tol()) << "outputs, step " << steps << " row " << b << " T " << T;
      if (flush[size_t(b)]) {
        ++flushes;
        ASSERT_LE(rs::test::rel_err(state_f64(pool.state, s), oracle[size_t(b)].S), tol())
            << "checkpoint after flush, step " << steps;
      } else {
        ASSERT_TRUE(pool.state_bytes(s) == ckpt[size_t(b)]) << "non-flush step wrote the checkpoint";
      }
      if (commit_all) {
        oracle[size_t(b)].commit(*st, b, T, params);
      } else {
        pending[size_t(b)] = T;
        last[size_t(b)] = st;
      }
    }
    // Slots not addressed by a live row are byte-identical.
    for (int64_t s = 0; s < slots; ++s) {
      bool live = false;
      for (int64_t b = 0; b < rows; ++b) live |= sl[size_t(b)] == s;
      if (!live) {
        ASSERT_TRUE(pool.slot_bytes(s) == before[size_t(s)]) << "untouched slot " << s;
      }
    }
  }
};

struct Config {
  int64_t L, T;
};
const Config CONFIGS[] = {{1, 1},  {4, 1},  {4, 2},  {4, 4},  {8, 1},  {8, 2},  {8, 4},
                          {8, 5},  {8, 8},  {16, 1}, {16, 2}, {16, 4}, {16, 5}, {16, 8},
                          {32, 1}, {32, 2}, {32, 4}, {32, 5}, {32, 8}};

void run_configs(Backend backend, int steps_per_config) {
  const Shape sh{4, 8, 16, 2};
  uint32_t seed = backend == Backend::cpu ? 100 : 200;
  int64_t total = 0, flushes = 0;
  for (const Config& c : CONFIGS) {
    const DType act = seed % 2 ? DType::bf16 : DType::f32;
    // Fixed T for half the configs; T varying per step up to T_max for the rest.
    Schedule s(sh, 3, c.L, c.T, DType::f32, act, backend, seed % 3 == 0, seed);
    const bool vary = seed % 2 == 0;
    for (int i = 0; i < steps_per_config; ++i) {
      const int64_t T = vary ? 1 + int64_t(s.rng() % uint32_t(c.T)) : c.T;
      s.step(T);
      if (::testing::Test::HasFatalFailure()) {
        ADD_FAILURE() << "config L=" << c.L << " T=" << c.T << " act " << rs::dtype_name(act);
        return;
      }
    }
    total += s.steps, flushes += s.flushes;
    ++seed;
  }
  EXPECT_GT(flushes, total / 20);
  ::testing::Test::RecordProperty("steps", int(total));
}

TEST(Mamba2Replay, ReferenceMatchesStandardRecurrence) { run_configs(Backend::reference, 70); }
TEST(Mamba2Replay, CpuMatchesStandardRecurrence) { run_configs(Backend::cpu, 70); }

TEST(Mamba2Replay, DecayRegimes) {
  for (Backend be : {Backend::reference, Backend::cpu})
    for (Decay r : {Decay::near_one, Decay::near_zero}) {
      Schedule s({4, 8, 16, 1}, 2, 8, 5, DType::f32, DType::f32, be, true, 7, r);
      for (int i = 0; i < 40; ++i) {
        s.step(1 + int64_t(s.rng() % 5));
        ASSERT_FALSE(::testing::Test::HasFatalFailure());
      }
    }
}

// Rejected drafts leave no trace: NaN drafts vs random drafts (bit-identical
// accepted outputs and pools), and vs never submitting them (same values).
TEST(Mamba2Replay, RejectedDraftsLeaveNoTrace) {
  const Shape sh{4, 8, 16, 2};
  for (Backend be : {Backend::reference, Backend::cpu}) {
    std::mt19937 rng(11);
    Params prm(sh, rng);
    const int64_t L = 8, T = 4, rows = 2;
    Pool pa(sh, rows, L, T, DType::f32, DType::f32, prm), pb(sh, rows, L, T, DType::f32, DType::f32, prm),
        pc(sh, rows, L, T, DType::f32, DType::f32, prm);
    HostTensor slots = rs::test::index_tensor({0, 1});
    std::vector<int64_t> prev_acc;
    for (int step = 0; step < 60; ++step) {
      Step common(sh, rows, T, DType::f32, false);
      common.randomize(rng, prm);
      std::vector<int64_t> acc(static_cast<size_t>(rows));
      for (auto& a : acc) a = 1 + int64_t(rng() % T);
      Step sa(sh, rows, T, DType::f32, false), sb(sh, rows, T, DType::f32, false);
      sb.randomize(rng, prm);
      sa.x.fill_nan(), sa.Bm.fill_nan(), sa.Cm.fill_nan(), sa.dt.fill_nan(), sa.y.fill_nan();
      for (int64_t b = 0; b < rows; ++b)
        for (int64_t t = 0; t < acc[size_t(b)]; ++t) sa.copy_token(b, t, common, b, t), sb.copy_token(b, t, common, b, t);
      sa.set_slots({0, 1}), sb.set_slots({0, 1});
      HostTensor na = rs::test::index_tensor(prev_acc.empty() ? std::vector<int64_t>{1, 1} : prev_acc);
      const Tensor num = prev_acc.empty() ? Tensor{} : na.t();
      rs::mamba2_replay_step(sa.view(prm), pa.view(), num, false, exec_of(be));
      rs::mamba2_replay_step(sb.view(prm), pb.view(), num, false, exec_of(be));
      // Never submitted: each row's accepted tokens alone, committed at once.
      for (int64_t b = 0; b < rows; ++b) {
        Step sc(sh, 1, acc[size_t(b)], DType::f32, false);
        for (int64_t t = 0; t < acc[size_t(b)]; ++t) sc.copy_token(0, t, common, b, t);
        sc.y.fill_nan();
        sc.set_slots({b});
        rs::mamba2_replay_step(sc.view(prm), pc.view(), Tensor{}, true, exec_of(be));
        for (int64_t t = 0; t < acc[size_t(b)]; ++t)
          for (int64_t k = 0; k < sh.H * sh.P; ++k) {
            const int64_t i = (b * T + t) * sh.H * sh.P + k;
            ASSERT_EQ(sa.y.get(i), sb.y.get(i)) << "accepted output depends on rejected drafts";
            ASSERT_NEAR(sa.y.get(i), sc.y.get(t * sh.H * sh.P + k), 1e-4 * (1 + std::fabs(sc.y.get(t * sh.H * sh.P + k))));
          }
      }
      prev_acc = acc;
    }
    // Checkpoints agree bit for bit between the two draft variants after a flush.
    HostTensor na = rs::test::index_tensor(prev_acc);
    rs::mamba2_commit(pa.view(), slots, -1, na, exec_of(be));
    rs::mamba2_commit(pb.view(), slots, -1, na, exec_of(be));
    rs::mamba2_flush(pa.view(), slots, -1, exec_of(be));
    rs::mamba2_flush(pb.view(), slots, -1, exec_of(be));
    EXPECT_TRUE(pa.state.bytes_equal(pb.state));
    EXPECT_TRUE(pa.cursor.bytes_equal(pb.cursor));
  }
}

// Commit fused into the next step == a separate mamba2_commit call.
TEST(Mamba2Replay, FusedCommitEqualsSeparateCommit) {
  const Shape sh{6, 8, 16, 3};
  for (Backend be : {Backend::reference, Backend::cpu}) {
    std::mt19937 rng(5);
    Params prm(sh, rng);
    const int64_t rows = 3, L = 8, T = 5;
    Pool pf(sh, 4, L, T, DType::bf16, DType::bf16, prm), ps(sh, 4, L, T, DType::bf16, DType::bf16, prm);
    pf.state.fill_normal(rng);
    ps.copy_from(pf);
    std::vector<int64_t> sl{2, -1, 0};
    HostTensor slots = rs::test::index_tensor(sl);
    for (int step = 0; step < 30; ++step) {
      Step a(sh, rows, T, DType::bf16, true);
      a.randomize(rng, prm);
      a.set_slots(sl);
      Step b(sh, rows, T, DType::bf16, true);
      b.copy_from_all(a);
      HostTensor acc(DType::i32, {rows});
      for (int64_t r = 0; r < rows; ++r) acc.set(r, double(1 + rng() % T));
      const bool first = step == 0;
      rs::mamba2_replay_step(a.view(prm), pf.view(), first ? Tensor{} : acc.t(), false, exec_of(be));
      if (!first) rs::mamba2_commit(ps.view(), slots, -1, acc, exec_of(be));
      rs::mamba2_replay_step(b.view(prm), ps.view(), Tensor{}, false, exec_of(be));
      ASSERT_TRUE(a.y.bytes_equal(b.y));
      ASSERT_TRUE(pf.bytes_equal(ps));
    }
  }
}

}  // namespace
