// Mamba-2 pools as views into one slot-major allocation (SlotArena: slot
// strides of gigabytes, the last slots past 2^31 elements of every pool
// tensor), against the fp64 reference on dense host pools: T = 1 replay
// steps on the batch-3 and production tiles, eager steps, speculative
// windows, the baseline and snapshot decodes, prefill and the slot
// operations; and pools whose rows are padded (strides larger than dense).
// A 32-bit address anywhere on a slot's path reads or writes the wrong
// bytes; the guard bands around every piece must stay untouched.
#include <random>
#include <string>
#include <vector>

#include "mamba2_gpu_util.h"

namespace replayssm::test {
namespace {
using namespace mamba2_gpu;

const Shape H128{128, 64, 128, 8};
const Dtypes F32{DType::f32, DType::bf16, DType::f32};
const Dtypes BF16{DType::bf16, DType::bf16, DType::bf16};

// B rows on S slots (S prime to 7, B <= S): row b on slot (S − 1 − 7b) mod S,
// so row 0 takes the last slot (the farthest from the arena's start); row 1
// a pad row when B > 2.
std::vector<int64_t> far_rows(int64_t B, int64_t S) {
  std::vector<int64_t> v;
  for (int64_t b = 0; b < B; ++b) v.push_back(b == 1 && B > 2 ? -1 : ((S - 1 - 7 * b) % S + S) % S);
  return v;
}

Exec cuda() { return Exec{Backend::cuda}; }

// `steps` replay steps of T tokens (L, random acceptances when T > 1) of B
// rows on the far slots of an arena pool of B + 1 slots; padded: 16 bytes
// after every checkpoint row and one element after every ring row (strides
// larger than dense, odd ones for the rings). Outputs every step and the
// pool at the end against the reference (replay_steps).
void arena_steps(std::mt19937& rng, const Dtypes& d, int64_t B, int64_t L, int64_t T, int steps, bool padded) {
  Pool pool(rng, B + 1, H128, d, L, T, true, padded ? 16 : 0, padded ? 1 : 0);
  replay_steps(rng, pool, far_rows(B, B + 1), H128, d, steps,
               name(d) + " " + std::to_string(B) + " rows T" + std::to_string(T) + (padded ? " padded" : ""), T);
}

// The baseline decode of B rows of T tokens on the far slots of an arena
// pool of B + 1 slots (padded: 16 bytes after every checkpoint row).
void arena_decode(std::mt19937& rng, const Dtypes& d, int64_t B, int64_t T, bool padded) {
  const std::string what = name(d) + " decode T" + std::to_string(T) + (padded ? " padded" : "");
  const double t = tol(d.state, d.act);
  Pool pool(rng, B + 1, H128, d, 4, 1, true, padded ? 16 : 0);
  Step st(rng, B, T, H128, d, far_rows(B, B + 1), T > 1, pool.layer);
  mamba2_decode(st.host(), pool.state, ref_exec());
  DeviceStatus ds;
  mamba2_decode(st.dev(), pool.dev_state(), ds.exec());
  EXPECT_EQ(ds.read(), 0) << what;
  const HostTensor y = download(st.dy);
  EXPECT_LE(err(y, st.y), t) << what;
  expect_pad_zero(y, 1, T * H128.H * H128.P, what);
  EXPECT_LE(err(pool.fetch(0), pool.state), t) << what << ": state";
  pool.arena->expect_guards(what);
}

// T = 1 steps with flushes (L = 4) at batch 3 (small tiles) and 40
// (production tiles); speculative windows at T = 5 (40 rows) and T = 8 (3
// rows), L = 16, random acceptances: rows flush at different steps.
TEST(Mamba2GpuArena, ReplaySteps) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(911);
  for (const Dtypes& d : {F32, BF16}) {
    for (int64_t B : {3, 40}) arena_steps(rng, d, B, 4, 1, 6, false);
    arena_steps(rng, d, 40, 16, 5, 7, false);
    arena_steps(rng, d, 3, 16, 8, 7, false);
    if (::testing::Test::HasFailure()) return;
  }
}

// Padded rows (16 bytes after every checkpoint row, one element after every
// ring row: strides larger than dense, the launchers' non-dense paths and
// the rings' element-wise loads) at the far slots: T = 1 at batch 3 and 40,
// T = 5 windows at 12 rows, and the baseline decode; the padding must stay
// untouched.
TEST(Mamba2GpuArena, PaddedRows) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(915);
  for (const Dtypes& d : {F32, BF16}) {
    for (int64_t B : {3, 40}) arena_steps(rng, d, B, 4, 1, 6, true);
    arena_steps(rng, d, 12, 16, 5, 7, true);
    arena_decode(rng, d, 40, 1, true);
    if (::testing::Test::HasFailure()) return;
  }
}

// Checkpoint rows one element apart from dense (not 16-byte aligned, which
// the cuda backend requires of the checkpoint) at the far slots: every call
// that reads or writes the pool's checkpoint is rejected with an Error
// naming it, and writes nothing (every piece, its guards and padding as
// before).
TEST(Mamba2GpuArena, MisalignedRowsRejected) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(916);
  for (const Dtypes& d : {F32, BF16}) {
    SCOPED_TRACE(name(d));
    const int64_t B = 3, S = 4, T = 2;
    Pool pool(rng, S, H128, d, 4, T, true, dtype_size(d.state));
    const std::vector<int64_t> rows = far_rows(B, S);
    std::vector<HostTensor> before;
    for (int i = 0; i < 5; ++i) before.push_back(pool.fetch(i));
    auto rejected = [&](const char* what, auto&& call) {
      try {
        call();
        ADD_FAILURE() << what << ": accepted";
      } catch (const Error& e) {
        EXPECT_EQ(e.argument(), "state") << what << ": " << e.what();
      }
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      for (int i = 0; i < 5; ++i) EXPECT_TRUE(pool.fetch(i).bytes_equal(before[size_t(i)])) << what << ": pool tensor " << i << " written";
      pool.arena->expect_guards(what);
    };
    const Mamba2Pool v = pool.dev();
    const Step st(rng, B, T, H128, d, rows, true, pool.layer);
    rejected("replay step", [&] { mamba2_replay_step(st.dev(), v, Tensor{}, false, cuda()); });
    rejected("decode", [&] { mamba2_decode(st.dev(), pool.dev_state(), cuda()); });
    HostTensor idx = index_tensor({3, 2, 1, 0, -1, -1}, DType::i64);
    idx.t().ndim = 2, idx.t().shape[0] = B, idx.t().shape[1] = T, idx.t().stride[0] = T, idx.t().stride[1] = 1;
    const DeviceTensor didx(idx), dacc(index_tensor({1, 1, 1}));
    rejected("snapshot decode", [&] { mamba2_snapshot_decode(st.dev(), pool.dev_state(), didx, dacc, cuda()); });
    const DeviceTensor dslot(index_tensor(rows));
    rejected("commit", [&] { mamba2_commit(v, dslot, -1, dacc, cuda()); });
    HostTensor out(DType::f32, {B, H128.H, H128.P, H128.N});
    const DeviceTensor dout(out);
    rejected("materialize", [&] { mamba2_materialize(v, dslot, -1, dout, cuda()); });
    rejected("flush", [&] { mamba2_flush(v, dslot, -1, cuda()); });
    const DeviceTensor dsrc(index_tensor({3})), ddst(index_tensor({0}));
    rejected("copy", [&] { mamba2_copy_slot(v, dsrc, ddst, -1, cuda()); });
    rejected("reset", [&] { mamba2_reset_slot(v, dsrc, -1, cuda()); });
    const std::vector<int64_t> cu = {0, 4, 4, 7};
    const Step pst(rng, 1, cu.back(), H128, d, {0}, true, pool.layer);
    const DeviceTensor dcu(index_tensor(cu)), dps(index_tensor({3, -1, 2}));
    Mamba2Prefill dp{flat(pst.dx), flat(pst.ddt), flat(pst.dB), flat(pst.dC), flat(pst.dz), pst.dA, pst.dbias, pst.dD, true,
                     dcu, dps, -1, Tensor{}, flat(pst.dy)};
    rejected("prefill", [&] { mamba2_prefill(dp, v, cuda()); });
    if (::testing::Test::HasFailure()) return;
  }
}

// Eager T = 1 steps (batch 3, REPLAYSSM_EAGER_ROWS=3): the checkpoint is
// folded in place every step, so outputs are compared every step and the
// materialised states at the end (the reference keeps its records).
TEST(Mamba2GpuArena, EagerSteps) {
  RSSM_SKIP_WITHOUT_GPU();
  ScopedEnv eager("REPLAYSSM_EAGER_ROWS", "3");
  std::mt19937 rng(912);
  for (const Dtypes& d : {F32, BF16}) {
    const double t = tol(d.state, d.act);
    const int64_t S = 4;
    Pool pool(rng, S, H128, d, 4, 1, true);
    const std::vector<int64_t> rows = far_rows(3, S);
    for (int step = 0; step < 6; ++step) {
      Step st(rng, 3, 1, H128, d, rows, true, pool.layer);
      mamba2_replay_step(st.host(), pool.host(), Tensor{}, true, ref_exec());
      DeviceStatus ds;
      mamba2_replay_step(st.dev(), pool.dev(), Tensor{}, true, ds.exec());
      EXPECT_EQ(ds.read(), 0);
      EXPECT_LE(err(download(st.dy), st.y), t) << name(d) << " eager step " << step;
    }
    HostTensor slots = index_tensor(rows);
    const DeviceTensor dslots(slots);
    HostTensor out(DType::f32, {3, H128.H, H128.P, H128.N});
    out.fill(0.0);
    DeviceTensor dout(out);
    mamba2_materialize(pool.host(), slots, -1, out, ref_exec());
    mamba2_materialize(pool.dev(), dslots, -1, dout, cuda());
    EXPECT_LE(err(download(dout), out), t) << name(d) << " materialised after eager steps";
    pool.arena->expect_guards("eager");
    if (::testing::Test::HasFailure()) return;
  }
}

// The baseline decode (40 rows, T = 1 and 3) and the snapshot decode
// (mamba2_gpu_util.h snapshot_run, its slots mirrored onto the far ones).
TEST(Mamba2GpuArena, DecodeAndSnapshot) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(913);
  for (const Dtypes& d : {F32, BF16}) {
    for (int64_t T : {1, 3}) arena_decode(rng, d, 40, T, false);
    snapshot_run(rng, H128, d, true);
    if (::testing::Test::HasFailure()) return;
  }
}

// Prefill and the slot operations (mamba2_gpu_util.h prefill_run,
// slot_ops_run) with the pool in an arena and its slots mirrored onto the
// far ones.
TEST(Mamba2GpuArena, PrefillAndSlotOps) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(914);
  for (const Dtypes& d : {F32, BF16}) {
    prefill_run(rng, H128, d, true);
    slot_ops_run(rng, H128, d, true);
    if (::testing::Test::HasFailure()) return;
  }
}

}  // namespace
}  // namespace replayssm::test
