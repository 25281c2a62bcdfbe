// GDN / KDA pools as views into one slot-major allocation (SlotArena: slot
// strides of gigabytes, the last slots past 2^31 elements of every pool
// tensor), against the fp64 reference on dense host pools: T = 1 replay
// steps on the batch-3 and production tiles, the persistent and eager steps,
// speculative windows, the baseline and snapshot decodes, prefill and the
// slot operations; and pools whose rows are padded (strides larger than
// dense). A 32-bit address anywhere on a slot's path reads or writes the
// wrong bytes; the guard bands around every piece must stay untouched.
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "delta_gpu_util.h"

namespace replayssm::test {
namespace {
using namespace delta_gpu;

const Cfg GDN_F32{DeltaFamily::gdn, {16, 64, 128, 128}};
const Cfg GDN_BF16{DeltaFamily::gdn, {16, 64, 128, 128}, DType::bf16};
const Cfg KDA_F32{DeltaFamily::kda, {32, 32, 128, 128}};
const Cfg KDA_BF16{DeltaFamily::kda, {32, 32, 128, 128}, DType::bf16, DType::bf16, DType::bf16};

// B rows on S slots (S prime to 7, B <= S): row b on slot (S − 1 − 7b) mod S,
// so row 0 takes the last slot (the farthest from the arena's start) and row
// 2 the one 7 below; row 1 a pad row when B > 2.
Pair far_slots(int64_t B, int64_t S) {
  std::vector<int64_t> v;
  for (int64_t b = 0; b < B; ++b) v.push_back(b == 1 && B > 2 ? -1 : ((S - 1 - 7 * b) % S + S) % S);
  Pair p;
  p.h = index_tensor(v);
  p.upload();
  return p;
}

// T = 1 steps with flushes (L = 4), at batch 3 (split tiles) and 40
// (production tiles), and through the persistent step.
TEST(DeltaGpuArena, ReplayT1) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(901);
  for (const Cfg& c : {GDN_F32, GDN_BF16, KDA_F32, KDA_BF16})
    for (int64_t B : {3, 40}) {
      SCOPED_TRACE(name(c) + " " + std::to_string(B) + " rows");
      const int64_t S = B + 1;
      Pool pool(c, S, 4, 1, rng, true, true);
      replay_steps(c, pool, far_slots(B, S), 1, 6, rng, false);
      if (::testing::Test::HasFailure()) return;
    }
}

TEST(DeltaGpuArena, PersistentStep) {
  RSSM_SKIP_WITHOUT_GPU();
  R1PMode on("1");
  std::mt19937 rng(902);
  for (const Cfg& c : {GDN_F32, GDN_BF16, KDA_F32}) {
    SCOPED_TRACE(name(c));
    const int64_t B = 12, S = 13;
    Pool pool(c, S, 4, 1, rng, true, true);
    replay_steps(c, pool, far_slots(B, S), 1, 6, rng, false);
    if (::testing::Test::HasFailure()) return;
  }
}

// Rows followed by 16 bytes in every pool tensor (every stride but the last
// larger than dense: the launchers' non-dense paths) at the far slots: T = 1
// at batch 3 and 40, the persistent step, T = 5 windows at 40 rows, and the
// baseline decode; the row padding must stay untouched.
TEST(DeltaGpuArena, PaddedRows) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(907);
  for (const Cfg& c : {GDN_F32, GDN_BF16, KDA_F32}) {
    SCOPED_TRACE(name(c));
    for (int64_t B : {3, 40}) {
      SCOPED_TRACE(std::to_string(B) + " rows");
      Pool pool(c, B + 1, 4, 1, rng, true, true, 16);
      replay_steps(c, pool, far_slots(B, B + 1), 1, 6, rng, false);
      if (::testing::Test::HasFailure()) return;
    }
    {
      SCOPED_TRACE("persistent");
      R1PMode on("1");
      Pool pool(c, 13, 4, 1, rng, true, true, 16);
      replay_steps(c, pool, far_slots(12, 13), 1, 6, rng, false);
      if (::testing::Test::HasFailure()) return;
    }
    {
      SCOPED_TRACE("T5");
      Pool pool(c, 41, 16, 5, rng, true, true, 16);
      replay_steps(c, pool, far_slots(40, 41), 5, 7, rng, false);
      if (::testing::Test::HasFailure()) return;
    }
    const int64_t B = 40, S = 41;
    Inputs in(c, {B, 1}, rng);
    Pool pool(c, S, 0, 0, rng, false, true, 16);
    const Pair slot = far_slots(B, S);
    delta_decode(c.f, in.step(false, slot, -1), pool.state.ht(), ref_exec());
    delta_decode(c.f, in.step(true, slot, -1), pool.state.dt(), cuda_exec());
    sync();
    expect_close(in.o.fetch(), in.o.h, tol(c), "decode o");
    pool.expect_equal(c, "decode");
    if (::testing::Test::HasFailure()) return;
  }
}

// Eager T = 1 steps (batch 3, REPLAYSSM_EAGER_ROWS=3): the checkpoint is
// folded in place every step, so outputs are compared every step and the
// materialised states at the end (the reference keeps its records).
TEST(DeltaGpuArena, EagerSteps) {
  RSSM_SKIP_WITHOUT_GPU();
  ScopedEnv eager("REPLAYSSM_EAGER_ROWS", "3");
  std::mt19937 rng(906);
  for (const Cfg& c : {GDN_F32, KDA_F32, KDA_BF16}) {
    SCOPED_TRACE(name(c));
    const int64_t B = 3, S = 4;
    Pool pool(c, S, 4, 1, rng, true, true);
    const Pair slot = far_slots(B, S);
    for (int step = 0; step < 6; ++step) {
      Inputs in(c, {B, 1}, rng);
      delta_replay_step(c.f, in.step(false, slot, -1), pool.view(false), Tensor{}, true, ref_exec());
      delta_replay_step(c.f, in.step(true, slot, -1), pool.view(true), Tensor{}, true, cuda_exec());
      sync();
      expect_close(in.o.fetch(), in.o.h, tol(c), "eager o, step " + std::to_string(step));
    }
    Pair out;
    out.make(DType::f32, {B, c.s.HV, c.s.V, c.s.K});
    out.h.fill_nan();
    out.upload();
    delta_materialize(c.f, pool.view(false), slot.ht(), -1, out.ht(), ref_exec());
    delta_materialize(c.f, pool.view(true), slot.dt(), -1, out.dt(), cuda_exec());
    sync();
    expect_close(out.fetch(), out.h, tol(c), "materialised after eager steps");
    pool.arena->expect_guards("eager");
    if (::testing::Test::HasFailure()) return;
  }
}

// Speculative windows (T = 5 and 8, L = 16, random acceptances committed by
// the next step): rows flush at different steps.
TEST(DeltaGpuArena, SpeculativeWindows) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(903);
  for (const Cfg& c : {GDN_F32, KDA_F32, GDN_BF16})
    for (int64_t T : {5, 8}) {
      const int64_t B = T == 5 ? 40 : 3, S = B + 1;
      SCOPED_TRACE(name(c) + " T" + std::to_string(T) + " " + std::to_string(B) + " rows");
      Pool pool(c, S, 16, T, rng, true, true);
      replay_steps(c, pool, far_slots(B, S), T, 7, rng, false);
      if (::testing::Test::HasFailure()) return;
    }
}

// The baseline decode (40 rows, T = 1 and 2) and the snapshot decode (8 rows
// of 5 tokens, every token's state in its own slot of the arena).
TEST(DeltaGpuArena, DecodeAndSnapshot) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(904);
  for (const Cfg& c : {GDN_F32, KDA_F32, GDN_BF16}) {
    SCOPED_TRACE(name(c));
    for (int64_t T : {1, 2}) {
      const int64_t B = 40, S = 41;
      Inputs in(c, {B, T}, rng);
      Pool pool(c, S, 0, 0, rng, false, true);
      const Pair slot = far_slots(B, S);
      delta_decode(c.f, in.step(false, slot, -1), pool.state.ht(), ref_exec());
      delta_decode(c.f, in.step(true, slot, -1), pool.state.dt(), cuda_exec());
      sync();
      expect_close(in.o.fetch(), in.o.h, tol(c), "decode o");
      pool.expect_equal(c, "decode");
    }
    const int64_t B = 8, T = 5, S = B * T + 1;
    Inputs in(c, {B, T}, rng);
    Pool pool(c, S, 0, 0, rng, false, true);
    Pair idx, acc;
    idx.make(DType::i64, {B, T});
    acc.make(DType::i32, {B});
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t t = 0; t < T; ++t) idx.h.set(b * T + t, double(S - 1 - (b * T + t)));  // the far slots first
      acc.h.set(b, double(1 + int64_t(rng() % T)));
    }
    idx.h.set(1 * T + 0, -1);  // row 1 is a pad row
    idx.upload();
    acc.upload();
    Pair none;
    delta_snapshot_decode(c.f, in.step(false, none, -1), pool.state.ht(), idx.ht(), acc.ht(), ref_exec());
    delta_snapshot_decode(c.f, in.step(true, none, -1), pool.state.dt(), idx.dt(), acc.dt(), cuda_exec());
    sync();
    expect_close(in.o.fetch(), in.o.h, tol(c), "snapshot o");
    pool.expect_equal(c, "snapshot");
    if (::testing::Test::HasFailure()) return;
  }
}

// Prefill (from the committed state and from zero, an empty prompt, a pad
// row), then materialize, commit of a pending window, flush, copy and reset
// between the far slots and the near ones, and a step after them.
TEST(DeltaGpuArena, PrefillAndSlotOps) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(905);
  for (const Cfg& c : {GDN_F32, KDA_F32, GDN_BF16}) {
    SCOPED_TRACE(name(c));
    const int64_t S = 6, L = 8, T = 3, B = 4;
    Pool pool(c, S, L, T, rng, true, true);
    const Pair slot = far_slots(B, S);  // slots 5, pad, 3, 2 with S = 6
    Pair rows4;
    rows4.h = index_tensor({5, 4, 3, 2});
    rows4.upload();
    for (int i = 0; i < 3; ++i) {  // committed records
      Inputs st(c, {B, 1}, rng);
      delta_replay_step(c.f, st.step(false, rows4, -1), pool.view(false), Tensor{}, true, ref_exec());
      delta_replay_step(c.f, st.step(true, rows4, -1), pool.view(true), Tensor{}, true, cuda_exec());
    }
    const std::vector<int64_t> cu = {0, 6, 6, 19, 23};  // an empty prompt, a pad row
    Inputs pin(c, {cu.back()}, rng);
    Pair cus, pslot, init;
    cus.h = index_tensor(cu);
    cus.upload();
    pslot.h = index_tensor({5, 4, -1, 3});
    pslot.upload();
    init.h = index_tensor({1, 0, 0, 1});
    init.upload();
    delta_prefill(c.f, pin.prefill(false, cus, pslot, init), pool.view(false), ref_exec());
    delta_prefill(c.f, pin.prefill(true, cus, pslot, init), pool.view(true), cuda_exec());
    sync();
    expect_close(pin.o.fetch(), pin.o.h, tol(c), "prefill o");
    pool.expect_equal(c, "prefill");
    // a committed step, then a pending window
    for (int i = 0; i < 2; ++i) {
      Inputs st(c, {B, T}, rng);
      delta_replay_step(c.f, st.step(false, rows4, -1), pool.view(false), Tensor{}, i == 0, ref_exec());
      delta_replay_step(c.f, st.step(true, rows4, -1), pool.view(true), Tensor{}, i == 0, cuda_exec());
      sync();
      expect_close(st.o.fetch(), st.o.h, tol(c), "window o");
    }
    Pair out;
    out.make(DType::f32, {B, c.s.HV, c.s.V, c.s.K});
    out.h.fill_nan();
    out.upload();
    delta_materialize(c.f, pool.view(false), slot.ht(), -1, out.ht(), ref_exec());
    delta_materialize(c.f, pool.view(true), slot.dt(), -1, out.dt(), cuda_exec());
    sync();
    expect_close(out.fetch(), out.h, tol(c), "materialize");
    Pair acc;
    acc.make(DType::i32, {B});
    for (int64_t b = 0; b < B; ++b) acc.h.set(b, double(1 + int64_t(rng() % T)));
    acc.upload();
    delta_commit(c.f, pool.view(false), rows4.ht(), -1, acc.ht(), ref_exec());
    delta_commit(c.f, pool.view(true), rows4.dt(), -1, acc.dt(), cuda_exec());
    delta_flush(c.f, pool.view(false), slot.ht(), -1, ref_exec());
    delta_flush(c.f, pool.view(true), slot.dt(), -1, cuda_exec());
    sync();
    pool.expect_equal(c, "commit / flush");
    Pair src, dst;
    src.h = index_tensor({5, 1});
    src.upload();
    dst.h = index_tensor({0, 4});
    dst.upload();
    delta_copy_slot(c.f, pool.view(false), src.ht(), dst.ht(), -1, ref_exec());
    delta_copy_slot(c.f, pool.view(true), src.dt(), dst.dt(), -1, cuda_exec());
    Pair back_src, back_dst;  // and from a near slot to the farthest
    back_src.h = index_tensor({2});
    back_src.upload();
    back_dst.h = index_tensor({5});
    back_dst.upload();
    delta_copy_slot(c.f, pool.view(false), back_src.ht(), back_dst.ht(), -1, ref_exec());
    delta_copy_slot(c.f, pool.view(true), back_src.dt(), back_dst.dt(), -1, cuda_exec());
    Pair rs;
    rs.h = index_tensor({3});
    rs.upload();
    delta_reset_slot(c.f, pool.view(false), rs.ht(), -1, ref_exec());
    delta_reset_slot(c.f, pool.view(true), rs.dt(), -1, cuda_exec());
    sync();
    pool.expect_equal(c, "copy / reset");
    Inputs st(c, {B, 1}, rng);
    delta_replay_step(c.f, st.step(false, rows4, -1), pool.view(false), Tensor{}, true, ref_exec());
    delta_replay_step(c.f, st.step(true, rows4, -1), pool.view(true), Tensor{}, true, cuda_exec());
    sync();
    expect_close(st.o.fetch(), st.o.h, tol(c), "o after slot ops");
    pool.expect_equal(c, "after slot ops");
    if (::testing::Test::HasFailure()) return;
  }
}

}  // namespace
}  // namespace replayssm::test
