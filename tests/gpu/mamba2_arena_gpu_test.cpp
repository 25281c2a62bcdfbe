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

// T = 1 steps with flushes (L = 4) at batch 3 (small tiles) and 40
// (production tiles); speculative windows at T = 5 (40 rows) and T = 8 (3
// rows), L = 16, random acceptances: rows flush at different steps.
TEST(Mamba2GpuArena, ReplaySteps) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(911);
  for (const Dtypes& d : {F32, BF16}) {
    for (int64_t B : {3, 40}) {
      const int64_t S = B + 1;
      Pool pool(rng, S, H128, d, 4, 1, true);
      replay_steps(rng, pool, far_rows(B, S), H128, d, 6, name(d) + " T1 " + std::to_string(B) + " rows");
      if (::testing::Test::HasFailure()) return;
    }
    for (int64_t T : {5, 8}) {
      const int64_t B = T == 5 ? 40 : 3, S = B + 1;
      Pool pool(rng, S, H128, d, 16, T, true);
      replay_steps(rng, pool, far_rows(B, S), H128, d, 7, name(d) + " T" + std::to_string(T), T);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

// Rows followed by 16 bytes in every pool tensor (every stride but the last
// larger than dense: the launchers' non-dense paths) at the far slots: T = 1
// at batch 3 and 40, T = 5 windows at 40 rows, and the baseline decode; the
// row padding must stay untouched.
TEST(Mamba2GpuArena, PaddedRows) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(915);
  for (const Dtypes& d : {F32, BF16}) {
    for (int64_t B : {3, 40}) {
      Pool pool(rng, B + 1, H128, d, 4, 1, true, 16);
      replay_steps(rng, pool, far_rows(B, B + 1), H128, d, 6, name(d) + " padded T1 " + std::to_string(B) + " rows");
      if (::testing::Test::HasFailure()) return;
    }
    Pool pool(rng, 41, H128, d, 16, 5, true, 16);
    replay_steps(rng, pool, far_rows(40, 41), H128, d, 7, name(d) + " padded T5", 5);
    if (::testing::Test::HasFailure()) return;
    const double t = tol(d.state, d.act);
    Pool dpool(rng, 41, H128, d, 4, 1, true, 16);
    Step st(rng, 40, 1, H128, d, far_rows(40, 41), false, dpool.layer);
    mamba2_decode(st.host(), dpool.state, ref_exec());
    DeviceStatus ds;
    mamba2_decode(st.dev(), dpool.dev_state(), ds.exec());
    EXPECT_EQ(ds.read(), 0);
    EXPECT_LE(err(download(st.dy), st.y), t) << name(d) << " padded decode";
    EXPECT_LE(err(dpool.fetch(0), dpool.state), t) << name(d) << " padded decode state";
    dpool.arena->expect_guards("padded decode");
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

// The baseline decode (40 rows, T = 1 and 3) and the snapshot decode (8 rows
// of 5 tokens, every token's state in its own slot, the far slots first).
TEST(Mamba2GpuArena, DecodeAndSnapshot) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(913);
  for (const Dtypes& d : {F32, BF16}) {
    const double t = tol(d.state, d.act);
    for (int64_t T : {1, 3}) {
      const int64_t B = 40, S = 41;
      Pool pool(rng, S, H128, d, 4, 1, true);
      Step st(rng, B, T, H128, d, far_rows(B, S), T == 3, pool.layer);
      mamba2_decode(st.host(), pool.state, ref_exec());
      DeviceStatus ds;
      mamba2_decode(st.dev(), pool.dev_state(), ds.exec());
      EXPECT_EQ(ds.read(), 0);
      const HostTensor y = download(st.dy);
      EXPECT_LE(err(y, st.y), t) << name(d) << " decode T=" << T;
      expect_pad_zero(y, 1, T * H128.H * H128.P, "decode");
      EXPECT_LE(err(pool.fetch(0), pool.state), t) << name(d) << " decode state";
      pool.arena->expect_guards("decode");
    }
    const int64_t B = 8, T = 5, S = B * T + 1;
    Pool pool(rng, S, H128, d, 4, 1, true);
    std::vector<int64_t> ids;
    for (int64_t i = 0; i < B * T; ++i) ids.push_back(S - 1 - i);
    ids[1 * T] = -1;  // row 1 is a pad row
    HostTensor idx = index_tensor(ids, DType::i64);
    idx.t().ndim = 2; idx.t().shape[0] = B; idx.t().shape[1] = T; idx.t().stride[0] = T; idx.t().stride[1] = 1;
    const DeviceTensor didx(idx);
    std::vector<int64_t> accepted;
    for (int64_t b = 0; b < B; ++b) accepted.push_back(1 + int64_t(rng() % T));
    HostTensor acc = index_tensor(accepted);
    const DeviceTensor dacc(acc);
    Step st(rng, B, T, H128, d, std::vector<int64_t>(size_t(B), 0), true, pool.layer);
    mamba2_snapshot_decode(st.host(), pool.state, idx, acc, ref_exec());
    DeviceStatus ds;
    mamba2_snapshot_decode(st.dev(), pool.dev_state(), didx, dacc, ds.exec());
    EXPECT_EQ(ds.read(), 0);
    const HostTensor y = download(st.dy);
    EXPECT_LE(err(y, st.y), t) << name(d) << " snapshot";
    expect_pad_zero(y, 1, T * H128.H * H128.P, "snapshot");
    EXPECT_LE(err(pool.fetch(0), pool.state), t) << name(d) << " snapshot states";
    pool.arena->expect_guards("snapshot");
    if (::testing::Test::HasFailure()) return;
  }
}

// Prefill (from zero and from the current state, an empty prompt, a pad
// row) on slots holding committed records, then materialize, flush, copy
// between the far slots and the near ones, reset, and steps after them.
TEST(Mamba2GpuArena, PrefillAndSlotOps) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(914);
  for (const Dtypes& d : {F32, BF16}) {
    const double t = tol(d.state, d.act);
    const int64_t S = 6;
    Pool pool(rng, S, H128, d, 8, 2, true);
    const std::vector<int64_t> rows = {5, 4, 3, 2};
    for (int step = 0; step < 5; ++step) {  // committed records
      Step st(rng, 4, 1, H128, d, rows, false, pool.layer);
      mamba2_replay_step(st.host(), pool.host(), Tensor{}, true, ref_exec());
      mamba2_replay_step(st.dev(), pool.dev(), Tensor{}, true, cuda());
    }
    const std::vector<int64_t> cu = {0, 21, 21, 26, 37};
    Step st(rng, 1, cu.back(), H128, d, {0}, true, pool.layer);  // [1, tokens, ...] viewed as [tokens, ...]
    HostTensor cuh = index_tensor(cu), slots = index_tensor({5, 4, -1, 3}), init = index_tensor({1, 0, 1, 1});
    const DeviceTensor dcu(cuh), dslots(slots), dinit(init);
    Mamba2Prefill hp{flat(st.x), flat(st.dt), flat(st.Bm), flat(st.Cm), flat(st.z), st.A, st.dt_bias, st.D, true, cuh, slots, -1, init, flat(st.y)};
    Mamba2Prefill dp{flat(st.dx), flat(st.ddt), flat(st.dB), flat(st.dC), flat(st.dz), st.dA, st.dbias, st.dD, true, dcu, dslots, -1, dinit, flat(st.dy)};
    mamba2_prefill(hp, pool.host(), ref_exec());
    DeviceStatus ds;
    mamba2_prefill(dp, pool.dev(), ds.exec());
    EXPECT_EQ(ds.read(), 0);
    EXPECT_LE(err(download(st.dy), st.y), t) << name(d) << " prefill outputs";
    pool.expect_match(t, "prefill " + name(d));
    for (int step = 0; step < 3; ++step) {  // records again
      Step s2(rng, 4, 1, H128, d, rows, false, pool.layer);
      mamba2_replay_step(s2.host(), pool.host(), Tensor{}, true, ref_exec());
      mamba2_replay_step(s2.dev(), pool.dev(), Tensor{}, true, cuda());
    }
    HostTensor ms = index_tensor({5, -1, 2, 4});
    const DeviceTensor dms(ms);
    HostTensor out(DType::f32, {4, H128.H, H128.P, H128.N});
    out.fill(0.0);
    DeviceTensor dout(out);
    mamba2_materialize(pool.host(), ms, -1, out, ref_exec());
    mamba2_materialize(pool.dev(), dms, -1, dout, cuda());
    EXPECT_LE(err(download(dout), out), t) << "materialize";
    HostTensor fl = index_tensor({5, -1, 3});
    const DeviceTensor dfl(fl);
    mamba2_flush(pool.host(), fl, -1, ref_exec());
    mamba2_flush(pool.dev(), dfl, -1, cuda());
    pool.expect_match(t, "flush");
    HostTensor src = index_tensor({5, 1}), dst = index_tensor({0, 4}), back_src = index_tensor({2}),
               back_dst = index_tensor({5});  // and a near slot to the farthest
    const DeviceTensor dsrc(src), ddst(dst), dback_src(back_src), dback_dst(back_dst);
    mamba2_copy_slot(pool.host(), src, dst, -1, ref_exec());
    mamba2_copy_slot(pool.dev(), dsrc, ddst, -1, cuda());
    mamba2_copy_slot(pool.host(), back_src, back_dst, -1, ref_exec());
    mamba2_copy_slot(pool.dev(), dback_src, dback_dst, -1, cuda());
    pool.expect_match(t, "copy");
    HostTensor rs = index_tensor({3});
    const DeviceTensor drs(rs);
    mamba2_reset_slot(pool.host(), rs, -1, ref_exec());
    mamba2_reset_slot(pool.dev(), drs, -1, cuda());
    pool.expect_match(t, "reset");
    for (int step = 0; step < 5; ++step) {
      Step s2(rng, 4, 1, H128, d, {5, 0, 3, 4}, false, pool.layer);
      mamba2_replay_step(s2.host(), pool.host(), Tensor{}, true, ref_exec());
      mamba2_replay_step(s2.dev(), pool.dev(), Tensor{}, true, cuda());
      EXPECT_LE(err(download(s2.dy), s2.y), t) << "after slot ops, step " << step;
    }
    pool.expect_match(t, "after slot ops");
    if (::testing::Test::HasFailure()) return;
  }
}

}  // namespace
}  // namespace replayssm::test
