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

// `steps` replay steps of T tokens (L, random acceptances when T > 1) of B
// rows on the far slots of an arena pool of B + 1 slots; padded: 16 bytes
// after every checkpoint row and one element after every ring row (strides
// larger than dense, odd ones for the rings). Outputs every step and the
// pool at the end against the reference (replay_steps).
void arena_steps(const Cfg& c, int64_t B, int64_t L, int64_t T, int steps, bool padded, std::mt19937& rng) {
  SCOPED_TRACE(name(c) + " " + std::to_string(B) + " rows T" + std::to_string(T) + (padded ? " padded" : ""));
  Pool pool(c, B + 1, L, T, rng, true, true, padded ? 16 : 0, padded ? 1 : 0);
  replay_steps(c, pool, far_slots(B, B + 1), T, steps, rng, false);
}

// The baseline decode of B rows of T tokens on the far slots of an arena
// state pool of B + 1 slots (padded: 16 bytes after every row).
void arena_decode(const Cfg& c, int64_t B, int64_t T, bool padded, std::mt19937& rng) {
  SCOPED_TRACE(name(c) + " decode T" + std::to_string(T) + (padded ? " padded" : ""));
  Inputs in(c, {B, T}, rng);
  Pool pool(c, B + 1, 0, 0, rng, false, true, padded ? 16 : 0);
  const Pair slot = far_slots(B, B + 1);
  delta_decode(c.f, in.step(false, slot, -1), pool.state.ht(), ref_exec());
  delta_decode(c.f, in.step(true, slot, -1), pool.state.dt(), cuda_exec());
  sync();
  expect_close(in.o.fetch(), in.o.h, tol(c), "decode o");
  pool.expect_equal(c, "decode");
}

// T = 1 steps with flushes (L = 4), at batch 3 (split tiles) and 40
// (production tiles), and through the persistent step.
TEST(DeltaGpuArena, ReplayT1) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(901);
  for (const Cfg& c : {GDN_F32, GDN_BF16, KDA_F32, KDA_BF16})
    for (int64_t B : {3, 40}) {
      arena_steps(c, B, 4, 1, 6, false, rng);
      if (::testing::Test::HasFailure()) return;
    }
}

TEST(DeltaGpuArena, PersistentStep) {
  RSSM_SKIP_WITHOUT_GPU();
  R1PMode on("1");
  std::mt19937 rng(902);
  for (const Cfg& c : {GDN_F32, GDN_BF16, KDA_F32}) {
    arena_steps(c, 12, 4, 1, 6, false, rng);
    if (::testing::Test::HasFailure()) return;
  }
}

// Padded rows (16 bytes after every checkpoint row, one element after every
// ring row: strides larger than dense, the launchers' non-dense paths and
// the rings' element-wise loads) at the far slots: T = 1 at batch 3 and 40,
// the persistent step, T = 5 windows at 12 rows, and the baseline decode;
// the padding must stay untouched.
TEST(DeltaGpuArena, PaddedRows) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(907);
  for (const Cfg& c : {GDN_F32, GDN_BF16, KDA_F32}) {
    for (int64_t B : {3, 40}) arena_steps(c, B, 4, 1, 6, true, rng);
    {
      R1PMode on("1");
      arena_steps(c, 12, 4, 1, 6, true, rng);
    }
    arena_steps(c, 12, 16, 5, 7, true, rng);
    if (::testing::Test::HasFailure()) return;
  }
  arena_decode(GDN_F32, 40, 1, true, rng);
}

// Checkpoint rows one element apart from dense (4 or 2 bytes: not 16-byte
// aligned, which the cuda backend requires of the checkpoint) at the far
// slots: every call that reads or writes the pool's checkpoint is rejected
// with an Error naming it, and writes nothing (every piece, its guards and
// padding as before).
TEST(DeltaGpuArena, MisalignedRowsRejected) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(908);
  for (const Cfg& c : {GDN_F32, KDA_BF16}) {
    SCOPED_TRACE(name(c));
    const int64_t B = 3, S = 4, T = 2;
    Pool pool(c, S, 4, T, rng, true, true, dtype_size(c.state));
    const Pair slot = far_slots(B, S);
    std::vector<HostTensor> before;
    for (Pair* p : pool.pairs()) before.push_back(p->fetch());
    auto rejected = [&](const char* what, const char* arg, auto&& call) {
      try {
        call();
        ADD_FAILURE() << what << ": accepted";
      } catch (const Error& e) {
        EXPECT_EQ(e.argument(), arg) << what << ": " << e.what();
      }
      sync();
      const std::vector<Pair*> pairs = pool.pairs();
      for (size_t i = 0; i < pairs.size(); ++i)
        EXPECT_TRUE(pairs[i]->fetch().bytes_equal(before[i])) << what << ": pool tensor " << i << " written";
      pool.arena->expect_guards(what);
    };
    Inputs in(c, {B, T}, rng);
    const DeltaPool v = pool.view(true);
    rejected("replay step", "pool.state", [&] { delta_replay_step(c.f, in.step(true, slot, -1), v, Tensor{}, false, cuda_exec()); });
    rejected("decode", "state", [&] { delta_decode(c.f, in.step(true, slot, -1), pool.state.dt(), cuda_exec()); });
    Pair snap;
    snap.h = index_tensor({3, 2, 1, 0, -1, -1}, DType::i64);
    snap.h.t().ndim = 2, snap.h.t().shape[0] = B, snap.h.t().shape[1] = T, snap.h.t().stride[0] = T, snap.h.t().stride[1] = 1;
    snap.upload();
    Pair none;
    rejected("snapshot decode", "state", [&] {
      delta_snapshot_decode(c.f, in.step(true, none, -1), pool.state.dt(), snap.dt(), Tensor{}, cuda_exec());
    });
    Pair acc;
    acc.h = index_tensor({1, 1, 1});
    acc.upload();
    rejected("commit", "pool.state", [&] { delta_commit(c.f, v, slot.dt(), -1, acc.dt(), cuda_exec()); });
    Pair out;
    out.make(DType::f32, {B, c.s.HV, c.s.V, c.s.K});
    out.upload();
    rejected("materialize", "pool.state", [&] { delta_materialize(c.f, v, slot.dt(), -1, out.dt(), cuda_exec()); });
    rejected("flush", "pool.state", [&] { delta_flush(c.f, v, slot.dt(), -1, cuda_exec()); });
    Pair src = last_slots(1, S), dst;
    dst.h = index_tensor({0});
    dst.upload();
    rejected("copy", "pool.state", [&] { delta_copy_slot(c.f, v, src.dt(), dst.dt(), -1, cuda_exec()); });
    rejected("reset", "pool.state", [&] { delta_reset_slot(c.f, v, src.dt(), -1, cuda_exec()); });
    Inputs pin(c, {7}, rng);
    Pair cus, ps;
    cus.h = index_tensor({0, 4, 4, 7});
    cus.upload();
    ps.h = index_tensor({3, -1, 2});
    ps.upload();
    rejected("prefill", "pool.state", [&] { delta_prefill(c.f, pin.prefill(true, cus, ps, Pair{}), v, cuda_exec()); });
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

// Speculative windows (T = 5 at 40 rows with fp32 states, else 3; T = 8 at
// 3; L = 16, random acceptances committed by the next step): rows flush at
// different steps.
TEST(DeltaGpuArena, SpeculativeWindows) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(903);
  for (const Cfg& c : {GDN_F32, KDA_F32, GDN_BF16})
    for (int64_t T : {5, 8}) {
      arena_steps(c, T == 5 && c.state == DType::f32 ? 40 : 3, 16, T, 7, false, rng);
      if (::testing::Test::HasFailure()) return;
    }
}

// The baseline decode (40 rows, T = 1 and 2) and the snapshot decode
// (delta_gpu_util.h snapshot_run, the snapshots on the far slots).
TEST(DeltaGpuArena, DecodeAndSnapshot) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(904);
  for (const Cfg& c : {GDN_F32, KDA_F32, GDN_BF16}) {
    SCOPED_TRACE(name(c));
    for (int64_t T : {1, 2}) arena_decode(c, 40, T, false, rng);
    snapshot_run(c, rng, true);
    if (::testing::Test::HasFailure()) return;
  }
}

// Prefill and the slot operations (delta_gpu_util.h prefill_run,
// slot_ops_run) with the pool in an arena and the rows on its last slots.
TEST(DeltaGpuArena, PrefillAndSlotOps) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(905);
  for (const Cfg& c : {GDN_F32, KDA_F32, GDN_BF16}) {
    SCOPED_TRACE(name(c));
    prefill_run(c, rng, true);
    slot_ops_run(c, rng, true);
    if (::testing::Test::HasFailure()) return;
  }
}

}  // namespace
}  // namespace replayssm::test
