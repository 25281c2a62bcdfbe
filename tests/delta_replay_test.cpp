// Replay invariants (design/replay.md §5) for GDN and KDA on the reference
// and cpu backends over randomised speculative schedules.
#include <gtest/gtest.h>

#include "delta_fixture.h"

namespace replayssm::test::delta {
namespace {

// Every (L, T_max) with T_max <= L of L ∈ {1,4,8,16,32}, T ∈ {1,2,4,5,8}.
void sweep(DeltaFamily fam, Backend be, int steps) {
  int flushes = 0, nonflush = 0, n = 0;
  for (int64_t L : {1, 4, 8, 16, 32})
    for (int64_t T : {1, 2, 4, 5, 8}) {
      if (T > L) continue;
      Cfg c;
      c.fam = fam;
      c.L = L;
      c.T_max = T;
      c.gating.raw_gate = n % 2 == 0;
      c.gating.l2norm_qk = n % 3 != 2;
      RunOpts o;
      o.backend = be;
      o.seed = 1000 + uint64_t(n++) + (fam == DeltaFamily::kda ? 500 : 0);
      o.steps = steps;
      RunResult r = run_schedule(c, o);
      EXPECT_LE(r.max_out_err, tolerance(DType::f32)) << "L=" << L << " T=" << T;
      EXPECT_LE(r.max_state_err, tolerance(DType::f32)) << "L=" << L << " T=" << T;
      flushes += r.flushes;
      nonflush += r.nonflush_rows;
    }
  EXPECT_GT(flushes, 100);
  EXPECT_GT(nonflush, 100);
}

TEST(GdnReplay, MatchesRecurrenceReference) { sweep(DeltaFamily::gdn, Backend::reference, 60); }
TEST(GdnReplay, MatchesRecurrenceCpu) { sweep(DeltaFamily::gdn, Backend::cpu, 60); }
TEST(KdaReplay, MatchesRecurrenceReference) { sweep(DeltaFamily::kda, Backend::reference, 60); }
TEST(KdaReplay, MatchesRecurrenceCpu) { sweep(DeltaFamily::kda, Backend::cpu, 60); }

// Fused commit (num_accepted on the step) equals a separate delta_commit: same
// outputs and pool bytes, bit for bit.
void fused_vs_separate(DeltaFamily fam, Backend be) {
  Cfg c;
  c.fam = fam;
  c.L = 8;
  c.T_max = 5;
  RunOpts o;
  o.backend = be;
  o.seed = 7;
  o.steps = 80;
  o.commit_mode = 1;
  RunResult a = run_schedule(c, o);
  o.commit_mode = 2;
  RunResult b = run_schedule(c, o);
  EXPECT_TRUE(a.accepted_outputs == b.accepted_outputs);
  for (size_t i = 0; i < a.pool.all().size(); ++i) EXPECT_TRUE(a.pool.all()[i]->bytes_equal(*b.pool.all()[i]));
}
TEST(GdnReplay, FusedCommitEqualsSeparate) {
  fused_vs_separate(DeltaFamily::gdn, Backend::reference);
  fused_vs_separate(DeltaFamily::gdn, Backend::cpu);
}
TEST(KdaReplay, FusedCommitEqualsSeparate) {
  fused_vs_separate(DeltaFamily::kda, Backend::reference);
  fused_vs_separate(DeltaFamily::kda, Backend::cpu);
}

// Two runs that differ only in the contents of rejected drafts produce
// identical accepted outputs and checkpoints.
void garbage_drafts(DeltaFamily fam, Backend be) {
  Cfg c;
  c.fam = fam;
  c.L = 16;
  c.T_max = 8;
  RunOpts o;
  o.backend = be;
  o.seed = 11;
  o.steps = 80;
  o.garbage_seed = 1;
  RunResult a = run_schedule(c, o);
  o.garbage_seed = 2;
  RunResult b = run_schedule(c, o);
  EXPECT_TRUE(a.accepted_outputs == b.accepted_outputs);
  EXPECT_TRUE(a.pool.state.bytes_equal(b.pool.state));
  EXPECT_TRUE(a.pool.cursor.bytes_equal(b.pool.cursor));
}
TEST(GdnReplay, RejectedDraftsLeaveNoTrace) {
  garbage_drafts(DeltaFamily::gdn, Backend::reference);
  garbage_drafts(DeltaFamily::gdn, Backend::cpu);
}
TEST(KdaReplay, RejectedDraftsLeaveNoTrace) {
  garbage_drafts(DeltaFamily::kda, Backend::reference);
  garbage_drafts(DeltaFamily::kda, Backend::cpu);
}

// Drafts submitted and rejected vs never submitted: a pool that sees T = 5
// windows with a accepted equals, bit for bit, a pool that sees only the a
// accepted tokens (no flush happens in either within the test).
void rejected_vs_never_submitted(DeltaFamily fam, Backend be) {
  Cfg c;
  c.fam = fam;
  c.L = 32;
  c.T_max = 5;
  std::mt19937_64 rng(5);
  Params params(c, rng);
  Pool x(c), y(c);
  const Exec ex = exec_of(be);
  HostTensor slot = index_tensor({2});
  x.set_cur(2, RingCursor{7, 0, 0});
  y.set_cur(2, RingCursor{7, 0, 0});
  for (int round = 0; round < 5; ++round) {
    const int64_t a = 1 + int64_t(rng() % 5);
    Inputs ix(c, {1, 5}), iy(c, {1, a});
    for (int64_t t = 0; t < 5; ++t) {
      randomize_token(c, ix, t, rng);
      if (t < a)
        for (auto [dst, src] : {std::pair{&iy.q, &ix.q}, {&iy.k, &ix.k}, {&iy.v, &ix.v}, {&iy.g, &ix.g}, {&iy.beta, &ix.beta}}) {
          const int64_t n = src->numel() / 5;
          for (int64_t i = 0; i < n; ++i) dst->set(t * n + i, src->get(t * n + i));
        }
    }
    HostTensor na = index_tensor({a});
    delta_replay_step(fam, step_view(c, params, ix, slot), x.view(), Tensor{}, false, ex);
    delta_commit(fam, x.view(), slot, -1, na, ex);
    delta_replay_step(fam, step_view(c, params, iy, slot), y.view(), Tensor{}, true, ex);
    const int64_t n = c.HV * c.V;
    for (int64_t i = 0; i < a * n; ++i) ASSERT_EQ(ix.o.get(i), iy.o.get(i)) << "round " << round;
  }
  EXPECT_TRUE(x.state.bytes_equal(y.state));
  EXPECT_TRUE(x.cursor.bytes_equal(y.cursor));
}
TEST(GdnReplay, RejectedEqualsNeverSubmitted) {
  rejected_vs_never_submitted(DeltaFamily::gdn, Backend::reference);
  rejected_vs_never_submitted(DeltaFamily::gdn, Backend::cpu);
}
TEST(KdaReplay, RejectedEqualsNeverSubmitted) {
  rejected_vs_never_submitted(DeltaFamily::kda, Backend::reference);
  rejected_vs_never_submitted(DeltaFamily::kda, Backend::cpu);
}

}  // namespace
}  // namespace replayssm::test::delta
