// Mamba-2 CUDA backend against the fp64 reference backend (run on host
// copies of the same bytes). Every comparison is a relative L2 error within
// tolerance() of the precision-limiting dtype; ring records of x and B and
// cursors must match exactly. Outputs are NaN-poisoned before every call.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "mamba2/backend.h"
#include "mamba2/heuristics.h"
#include "mamba2_gpu_util.h"
#include "replayssm/mamba2.h"
#include "replayssm/quant.h"

namespace replayssm::test {
namespace {
using namespace mamba2_gpu;

// ---------------------------------------------------------------------------

TEST(Mamba2Gpu, DecodeAndReplayAllShapesAndDtypes) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(7);
  std::vector<Shape> shapes(std::begin(MODEL_SHAPES), std::end(MODEL_SHAPES));
  shapes.push_back(ODD);
  for (const Shape& s : shapes) {
    for (const Dtypes& d : DTYPE_SET) {
      const std::string what = "H" + std::to_string(s.H) + " P" + std::to_string(s.P) + " N" +
                               std::to_string(s.N) + " G" + std::to_string(s.G) + " " + name(d);
      const double t = tol(d.state, d.act);
      // Baseline decode, T = 1 and T = 3, slots {3, pad, 0}.
      for (int64_t T : {1, 3}) {
        Pool pool(rng, 4, s, d, 4, 1);
        Step st(rng, 3, T, s, d, {3, -1, 0}, T == 3, pool.layer);
        mamba2_decode(st.host(), pool.state, ref_exec());
        DeviceStatus ds;
        mamba2_decode(st.dev(), pool.dstate, ds.exec());
        const HostTensor y = download(st.dy);
        EXPECT_LE(err(y, st.y), t) << what << " decode T=" << T;
        expect_pad_zero(y, 1, T * s.H * s.P, what);
        EXPECT_LE(err(download(pool.dstate), pool.state), t) << what << " decode state";
        EXPECT_EQ(ds.read(), 0);
      }
      replay_run(rng, s, d, 9, what);  // two flushes
    }
  }
}

// >= 2,000 plain decode steps at batch 2 (L = 16, flush every 16 steps):
// outputs every step, checkpoint and records after every flush, and
// non-flush steps leave the checkpoint bytes unchanged. N = 64 runs the
// shared-memory-staged replay kernel, N = 128 the register-streamed one
// (replay1_kernel.cuh).
TEST(Mamba2Gpu, ReplayLongRun) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(11);
  for (const Shape& s : {Shape{8, 32, 64, 2}, Shape{4, 48, 128, 2}})
  for (const Dtypes& d : {Dtypes{DType::f32, DType::bf16, DType::f32}, Dtypes{DType::bf16, DType::bf16, DType::bf16}}) {
    const double t = tol(d.state, d.act);
    Pool pool(rng, 3, s, d, 16, 1);
    double worst = 0;
    for (int step = 0; step < 2000; ++step) {
      const HostTensor before = download(pool.dstate);
      const int32_t count0 = int32_t(pool.cursor.get(2 * 3 + 1));
      Step st(rng, 2, 1, s, d, {2, 0}, false, pool.layer);
      mamba2_replay_step(st.host(), pool.host(), Tensor{}, true, ref_exec());
      mamba2_replay_step(st.dev(), pool.dev(), Tensor{}, true, Exec{Backend::cuda});
      worst = std::max(worst, err(download(st.dy), st.y));
      if (count0 + 1 <= pool.L) {
        ASSERT_TRUE(download(pool.dstate).bytes_equal(before)) << "non-flush step wrote the checkpoint";
      } else {
        pool.expect_match(t, "long run step " + std::to_string(step));
        if (::testing::Test::HasFailure()) return;
      }
    }
    EXPECT_LE(worst, t) << name(d);
  }
}

// Speculative windows: random acceptances committed at the next step.
TEST(Mamba2Gpu, SpeculativeWindows) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(13);
  for (const Shape& s : {ODD, Shape{64, 64, 128, 8}}) {
    for (int64_t T : {2, 4, 5, 8}) {
      const Dtypes d = T == 5 ? Dtypes{DType::bf16, DType::bf16, DType::f32} : Dtypes{DType::f32, DType::bf16, DType::f32};
      const double t = tol(d.state, d.act);
      Pool pool(rng, 5, s, d, 16, T);
      HostTensor acc(DType::i32, {3});
      for (int step = 0; step < 24; ++step) {
        Step st(rng, 3, T, s, d, {4, -1, 1}, true, pool.layer);
        std::uniform_int_distribution<int> a(1, int(T));
        for (int b = 0; b < 3; ++b) acc.set(b, a(rng));
        const DeviceTensor dacc(acc);
        const Tensor ha = step ? acc.t() : Tensor{}, da = step ? dacc.t() : Tensor{};
        mamba2_replay_step(st.host(), pool.host(), ha, false, ref_exec());
        DeviceStatus ds;
        mamba2_replay_step(st.dev(), pool.dev(), da, false, ds.exec());
        EXPECT_EQ(ds.read(), 0);
        EXPECT_LE(err(download(st.dy), st.y), t) << "T=" << T << " step " << step;
      }
      pool.expect_match(t, "spec T=" + std::to_string(T));
      // Commit the last window through mamba2_commit, then flush and materialize.
      HostTensor slots = index_tensor({4, -1, 1});
      const DeviceTensor dslots(slots), dacc(acc);
      mamba2_commit(pool.host(), slots, -1, acc, ref_exec());
      mamba2_commit(pool.dev(), dslots, -1, dacc, Exec{Backend::cuda});
      pool.expect_match(t, "commit");
    }
  }
}

TEST(Mamba2Gpu, SnapshotDecode) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(17);
  for (const Dtypes& d : {Dtypes{DType::f32, DType::bf16, DType::f32}, Dtypes{DType::bf16, DType::f32, DType::f32}})
    for (const Shape& s : {ODD, Shape{96, 80, 128, 8}}) snapshot_run(rng, s, d);
}

// Varlen prefill on a replay pool holding committed records (mamba2_gpu_util.h
// prefill_run): from zero, from the current state, a pad row and an empty
// prompt.
TEST(Mamba2Gpu, PrefillVarlen) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(19);
  for (const Dtypes& d : {Dtypes{DType::f32, DType::bf16, DType::bf16}, Dtypes{DType::f16, DType::f32, DType::f32}})
    for (const Shape& s : {ODD, Shape{128, 64, 128, 8}}) prefill_run(rng, s, d);
}

TEST(Mamba2Gpu, SlotOperations) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(23);
  for (const Dtypes& d : {Dtypes{DType::f32, DType::bf16, DType::f32}, Dtypes{DType::bf16, DType::bf16, DType::f32}})
    slot_ops_run(rng, ODD, d);
}

// Eager T = 1 steps (REPLAYSSM_EAGER_ROWS=4: batches of at most 4 rows fold
// the slot's records and the token into the checkpoint, launch.cu
// replay_step) mixed with replay steps of 8 rows and a speculative window on
// one pool, against the fp64 reference (which replays): the small batch from
// empty rings, 8 rows (records accumulate), the small batch again (its first
// step folds them), a T = 3 window committed by an eager step (num_accepted),
// 8 rows again, then a captured eager step replayed after replay steps.
// Outputs every step (pad row zero), materialised states of the 8 rows after
// each phase, and after eager steps their rows' cursors hold no records.
// Both ways of resetting the cursors (REPLAYSSM_EAGER_CTR).
void eager_run(std::mt19937& rng, const Shape& s, const Dtypes& d, const std::string& what) {
  const double t = tol(d.state, d.act);
  const int64_t S = 10, L = 4, Tm = 3;
  Pool pool(rng, S, s, d, L, Tm);
  const std::vector<int64_t> small = {3, -1, 7}, large = {3, 7, 0, 1, 2, 4, 5, 6};
  auto step = [&](const std::vector<int64_t>& rows, int64_t T, const HostTensor* acc, const std::string& at) {
    const int64_t B = int64_t(rows.size());
    Step st(rng, B, T, s, d, rows, true, pool.layer);
    const bool commit_all = T == 1;
    mamba2_replay_step(st.host(), pool.host(), acc ? acc->t() : Tensor{}, commit_all, ref_exec());
    DeviceStatus ds;
    DeviceTensor dacc;
    if (acc) dacc.upload(*acc);
    mamba2_replay_step(st.dev(), pool.dev(), acc ? dacc.t() : Tensor{}, commit_all, ds.exec());
    EXPECT_EQ(ds.read(), 0) << what << " " << at;
    const HostTensor y = download(st.dy);
    EXPECT_LE(err(y, st.y), t) << what << " " << at;
    if (rows[1] == -1) expect_pad_zero(y, 1, T * s.H * s.P, what + " " + at);
  };
  auto states = [&](const std::string& at) {
    HostTensor slots = index_tensor(large);
    const DeviceTensor dslots(slots);
    HostTensor out(DType::f32, {8, s.H, s.P, s.N});
    out.fill(0.0);
    DeviceTensor dout(out);
    mamba2_materialize(pool.host(), slots, -1, out, ref_exec());
    mamba2_materialize(pool.dev(), dslots, -1, dout, Exec{Backend::cuda});
    EXPECT_LE(err(download(dout), out), t) << what << ": materialized after " << at;
  };
  auto emptied = [&](const std::string& at) {
    const HostTensor cur = download(pool.dcursor);
    for (int64_t r : {small[0], small[2]}) EXPECT_EQ(cur.get(r * 3 + 1), 0.0) << what << " " << at << ": slot " << r;
  };
  for (int i = 0; i < 5; ++i) step(small, 1, nullptr, "eager from empty rings");
  states("eager steps from empty rings");
  for (int i = 0; i < 3; ++i) step(large, 1, nullptr, "replay");
  states("replay steps");
  for (int i = 0; i < 3; ++i) {
    step(small, 1, nullptr, "eager after replay");
    if (i == 0) emptied("the fold of the replay steps' records");
  }
  states("eager steps after replay");
  step(small, Tm, nullptr, "a window");
  HostTensor acc(DType::i32, {3});
  std::uniform_int_distribution<int> a(1, int(Tm));
  for (int64_t b = 0; b < 3; ++b) acc.set(b, a(rng));
  step(small, 1, &acc, "eager commit of the window");
  emptied("an eager step committing a window");
  states("a committed window");
  for (int i = 0; i < 5; ++i) step(large, 1, nullptr, "replay after eager");
  states("replay after eager");
  // captured (the graph stream's counters exist before the capture)
  CapturedGraph g;
  Step gst(rng, 3, 1, s, d, small, true, pool.layer);
  const Exec ge = g.exec(Exec{Backend::cuda});
  mamba2_replay_step(gst.host(), pool.host(), Tensor{}, true, ref_exec());
  mamba2_replay_step(gst.dev(), pool.dev(), Tensor{}, true, ge);
  RSSM_CUDA_OK(cudaStreamSynchronize(g.stream()));
  for (int i = 0; i < 2; ++i) step(large, 1, nullptr, "replay before the graph");
  g.capture([&] { mamba2_replay_step(gst.dev(), pool.dev(), Tensor{}, true, ge); });
  for (int r = 0; r < 6; ++r) {
    mamba2_replay_step(gst.host(), pool.host(), Tensor{}, true, ref_exec());
    g.replay();
    EXPECT_LE(err(download(gst.dy), gst.y), t) << what << " graph replay " << r;
    if (r == 0) emptied("a captured eager step");
  }
  states("graph replays");
}

TEST(Mamba2Gpu, EagerSmallBatch) {
  RSSM_SKIP_WITHOUT_GPU();
  ScopedEnv eager("REPLAYSSM_EAGER_ROWS", "4");
  for (const char* ctr : {"1", "0"}) {  // the row's last block resets its cursor / the cursor kernel does
    ScopedEnv counters("REPLAYSSM_EAGER_CTR", ctr);
    std::mt19937 rng(91);
    for (const Dtypes& d : {Dtypes{DType::f32, DType::bf16, DType::f32}, Dtypes{DType::bf16, DType::bf16, DType::bf16}}) {
      for (const Shape& s : {Shape{128, 64, 128, 8}, ODD}) {
        eager_run(rng, s, d, name(d) + " H" + std::to_string(s.H) + ", REPLAYSSM_EAGER_CTR=" + ctr);
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
}

// One process driving two GPUs: the decode, eager, replay and speculative
// kernels on each device in turn, against the reference. Their shared-memory
// limits above 48 KiB are per device (cuda_util::SmemLimit): cudaFuncSetAttribute
// applies to the current device, so a limit raised once per process (before
// c8dc1d4) would leave the second GPU's launches failing.
TEST(Mamba2Gpu, EachDevice) {
  RSSM_SKIP_WITHOUT_GPU();
  const Shape s{128, 64, 128, 8};
  const Dtypes d{DType::f32, DType::bf16, DType::f32};
  RSSM_ON_EACH_DEVICE([&](int dev) {
    std::mt19937 rng(500 + dev);
    Pool pool(rng, 4, s, d, 4, 1);
    Step st(rng, 3, 1, s, d, {3, -1, 0}, false, pool.layer);
    mamba2_decode(st.host(), pool.state, ref_exec());
    DeviceStatus ds;
    mamba2_decode(st.dev(), pool.dstate, ds.exec());
    EXPECT_LE(err(download(st.dy), st.y), tol(d.state, d.act)) << "decode";
    EXPECT_EQ(ds.read(), 0);
    replay_run(rng, s, d, 9, "replay");              // the bulk-copy kernel, two flushes
    replay_run(rng, s, d, 6, "speculative", 3, 5);  // T = 5 on tensor cores
    ScopedEnv eager("REPLAYSSM_EAGER_ROWS", "4");
    replay_run(rng, s, d, 5, "eager");
  });
}

// A tensor that states another device than the current one (as the Python
// binding's DLPack views do) is rejected before anything runs: an Error
// naming it, the state and outputs untouched.
TEST(Mamba2Gpu, TensorOnAnotherDeviceRejected) {
  RSSM_SKIP_WITHOUT_GPU();
  int dev = 0;
  RSSM_CUDA_OK(cudaGetDevice(&dev));
  std::mt19937 rng(77);
  const Shape s{8, 16, 64, 2};
  const Dtypes d{DType::f32, DType::bf16, DType::f32};
  Pool pool(rng, 4, s, d, 4, 1);
  Step st(rng, 3, 1, s, d, {3, -1, 0}, false, pool.layer);
  const HostTensor s0 = download(pool.dstate), y0 = download(st.dy);
  auto same = [](const HostTensor& a, const HostTensor& b) {
    return a.bytes() == b.bytes() && std::memcmp(a.data(), b.data(), a.bytes()) == 0;
  };
  Mamba2Step step = st.dev();
  step.x.device_index = dev + 1;
  try {
    mamba2_decode(step, pool.dstate, Exec{Backend::cuda});
    ADD_FAILURE() << "x on cuda:" << dev + 1 << " passed with cuda:" << dev << " current";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "x") << e.what();
  }
  RSSM_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_TRUE(same(download(pool.dstate), s0)) << "state written by a rejected call";
  EXPECT_TRUE(same(download(st.dy), y0)) << "output written by a rejected call";
  step.x.device_index = dev;  // stated and current: runs
  EXPECT_NO_THROW(mamba2_decode(step, pool.dstate, Exec{Backend::cuda}));
  RSSM_CUDA_OK(cudaDeviceSynchronize());
}

// Step + commit captured once in a CUDA graph (fixed batch, fixed buffers),
// replayed 240 times with new inputs and new acceptances uploaded into the
// same device tensors between replays; outputs and checkpoint match the
// reference after every replay.
TEST(Mamba2Gpu, GraphReplayChangingAcceptances) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(31);
  const Shape s{16, 64, 128, 4};
  for (const Dtypes& d : {Dtypes{DType::f32, DType::bf16, DType::f32}, Dtypes{DType::bf16, DType::bf16, DType::bf16}}) {
    const double t = tol(d.state, d.act);
    const int64_t T = 5, L = 16;
    Pool pool(rng, 6, s, d, L, T);
    Step st(rng, 3, T, s, d, {4, -1, 1}, true, pool.layer);
    // The first window has nothing to commit: eager, without num_accepted.
    mamba2_replay_step(st.host(), pool.host(), Tensor{}, false, ref_exec());
    mamba2_replay_step(st.dev(), pool.dev(), Tensor{}, false, Exec{Backend::cuda});
    HostTensor acc(DType::i32, {3});
    acc.fill(1.0);
    DeviceTensor dacc(acc);
    CapturedGraph graph;
    graph.capture([&] { mamba2_replay_step(st.dev(), pool.dev(), dacc, false, graph.exec(Exec{Backend::cuda})); });
    int flushes = 0;
    std::uniform_int_distribution<int> a(1, int(T));
    for (int it = 0; it < 240; ++it) {
      st.x.fill_normal(rng);
      st.dt.fill_uniform(rng, -4.0, 1.0);
      st.Bm.fill_normal(rng, 0, 0.3);
      st.Cm.fill_normal(rng, 0, 0.3);
      st.z.fill_normal(rng);
      st.upload();  // same device buffers (sizes unchanged); NaN-poisons y
      for (int b = 0; b < 3; ++b) acc.set(b, a(rng));
      dacc.upload(acc);
      const int32_t count0 = int32_t(pool.cursor.get(4 * 3 + 1));
      graph.replay();
      mamba2_replay_step(st.host(), pool.host(), acc, false, ref_exec());
      flushes += count0 + int32_t(acc.get(0)) + T > L;
      EXPECT_LE(err(download(st.dy), st.y), t) << name(d) << " replay " << it;
      EXPECT_LE(err(download(pool.dstate), pool.state), t) << name(d) << " checkpoint, replay " << it;
      if (::testing::Test::HasFailure()) break;
    }
    EXPECT_GE(flushes, 20) << "the schedule must flush";
    pool.expect_match(t, "graph " + name(d));
  }
}

// 1,000 speculative steps at every model shape of design §6 with T drawn from
// {2, 4, 5, 8} each step, random acceptances per row, a pad row, and rows
// leaving and joining (after a varlen prefill) mid-stream. Oracle: the fast
// CPU backend on host copies (itself checked against the fp64 reference by
// the CPU tests); outputs every step, pool after every step that flushed.
class Mamba2GpuSpeculativeLongRun : public GpuTestPart {};
TEST_P(Mamba2GpuSpeculativeLongRun, ModelShapes) {
  RSSM_SKIP_WITHOUT_GPU();
  const Dtypes d{DType::f32, DType::bf16, DType::f32};
  const double t = 2 * tol(d.state, d.act);  // GPU fp32 vs CPU fp32: both within tol of fp64
  const Exec cpu{Backend::cpu};
  int item = 0;
  for (const Shape& s : MODEL_SHAPES) {
    std::mt19937 rng(37 + item);  // one stream per shape, so the parts split the shapes
    if (!mine(item++)) continue;
    const std::string what = "H" + std::to_string(s.H) + " P" + std::to_string(s.P);
    const int64_t L = 16, Tmax = 8, S = 5;
    Pool pool(rng, S, s, d, L, Tmax);
    std::vector<int64_t> rows = {0, -1, 1};  // slot per row; -1 = pad
    int64_t next_slot = 2;
    std::vector<int32_t> last_T(3, 0);        // pending window per row (0 = none)
    const int64_t T_choices[] = {2, 4, 5, 8};
    int flushes = 0;
    for (int step = 0; step < 1000; ++step) {
      if (step > 0 && step % 250 == 0 && next_slot < S) {
        // Row 2 leaves (its slot is abandoned) and a new sequence joins on a
        // fresh slot after a prefill; the others' windows are committed first.
        HostTensor cs = index_tensor({rows[0]}), ca(DType::i32, {1});
        ca.set(0, 1 + int(rng() % uint32_t(last_T[0])));
        const DeviceTensor dcs(cs), dca(ca);
        mamba2_commit(pool.host(), cs, -1, ca, cpu);
        mamba2_commit(pool.dev(), dcs, -1, dca, Exec{Backend::cuda});
        last_T[0] = 0;
        rows[2] = next_slot++;
        last_T[2] = 0;
        const int64_t len = 1 + int64_t(rng() % 40);
        Step pf(rng, 1, len, s, d, {0}, true, pool.layer);
        HostTensor cu = index_tensor({0, len}), ps = index_tensor({rows[2]});
        const DeviceTensor dcu(cu), dps(ps);
        Mamba2Prefill hp{flat(pf.x), flat(pf.dt), flat(pf.Bm), flat(pf.Cm), flat(pf.z), pf.A, pf.dt_bias, pf.D, true, cu, ps, -1, Tensor{}, flat(pf.y)};
        Mamba2Prefill dp{flat(pf.dx), flat(pf.ddt), flat(pf.dB), flat(pf.dC), flat(pf.dz), pf.dA, pf.dbias, pf.dD, true, dcu, dps, -1, Tensor{}, flat(pf.dy)};
        mamba2_prefill(hp, pool.host(), cpu);
        mamba2_prefill(dp, pool.dev(), Exec{Backend::cuda});
        EXPECT_LE(err(download(pf.dy), pf.y), t) << what << " prefill at step " << step;
      }
      const int64_t T = T_choices[rng() % 4];
      Step st(rng, 3, T, s, d, rows, step % 3 == 0, pool.layer);
      const bool any_pending = last_T[0] > 0 || last_T[2] > 0;
      HostTensor acc(DType::i32, {3});
      for (int b = 0; b < 3; ++b) acc.set(b, last_T[size_t(b)] > 0 ? 1 + int(rng() % uint32_t(last_T[size_t(b)])) : 1);
      const DeviceTensor dacc(acc);
      if (any_pending && (last_T[0] == 0 || last_T[2] == 0)) {  // mixed: commit the pending row alone
        const int b = last_T[0] > 0 ? 0 : 2;
        HostTensor cs = index_tensor({rows[size_t(b)]}), ca(DType::i32, {1});
        ca.set(0, acc.get(b));
        const DeviceTensor dcs(cs), dca(ca);
        mamba2_commit(pool.host(), cs, -1, ca, cpu);
        mamba2_commit(pool.dev(), dcs, -1, dca, Exec{Backend::cuda});
      }
      const bool pass_acc = last_T[0] > 0 && last_T[2] > 0;
      const int32_t c0 = int32_t(pool.cursor.get(rows[0] * 3 + 1)) + (pass_acc ? int32_t(acc.get(0)) : 0);
      DeviceStatus ds;
      mamba2_replay_step(st.host(), pool.host(), pass_acc ? acc.t() : Tensor{}, false, cpu);
      mamba2_replay_step(st.dev(), pool.dev(), pass_acc ? dacc.t() : Tensor{}, false, ds.exec());
      ASSERT_EQ(ds.read(), 0) << what << " step " << step;
      last_T[0] = last_T[2] = int32_t(T);
      const HostTensor y = download(st.dy);
      EXPECT_LE(err(y, st.y), t) << what << " T=" << T << " step " << step;
      expect_pad_zero(y, 1, T * s.H * s.P, what);
      if (c0 + T > L) {  // row 0 flushed: its checkpoint (the whole pool at the joins and the end)
        ++flushes;
        EXPECT_LE(err(slot_slice(pool.dstate.t(), rows[0], true), slot_slice(pool.state.t(), rows[0], false)), t)
            << what << " checkpoint after the flush at step " << step;
      }
      if (step % 250 == 249) pool.expect_match(t, what + " step " + std::to_string(step));
      if (::testing::Test::HasFailure()) return;
    }
    EXPECT_GE(flushes, 100) << what;
  }
}
RSSM_GPU_TEST_PARTS(Mamba2GpuSpeculativeLongRun);

// The T = 1 replay at a batch where the launcher takes its production tiles:
// Mamba-2 H128·P64·N128 at 72 rows gets bulk-copy blocks of 8 heads (fp32;
// bf16 likewise) with the ring fetched by bulk copies (launch.cu::
// replay1_ring_bulk); the small batches of the other tests run one or two
// heads per block and gather the ring (ReplaySmallBatchTiles: four heads,
// ring by bulk copies, at 8 rows). Two flushes (L = 4), against the fp64
// reference.
TEST(Mamba2Gpu, ReplayProductionTiles) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(41);
  const Shape s{128, 64, 128, 8};
  for (const Dtypes& d : {Dtypes{DType::f32, DType::bf16, DType::f32}, Dtypes{DType::bf16, DType::bf16, DType::bf16}}) {
    replay_run(rng, s, d, 9, name(d) + " 72 rows", 72);
    // the baseline decode at the same batch
    Pool pool(rng, 73, s, d, 4, 1);
    std::vector<int64_t> rows;
    for (int64_t b = 0; b < 72; ++b) rows.push_back(b == 1 ? -1 : b * 7 % 73);
    Step st(rng, 72, 1, s, d, rows, true, pool.layer);
    mamba2_decode(st.host(), pool.state, ref_exec());
    DeviceStatus ds;
    mamba2_decode(st.dev(), pool.dstate, ds.exec());
    const HostTensor y = download(st.dy);
    EXPECT_LE(err(y, st.y), tol(d.state, d.act)) << name(d) << " decode, 72 rows";
    expect_pad_zero(y, 1, s.H * s.P, "decode pad row");
    EXPECT_LE(err(download(pool.dstate), pool.state), tol(d.state, d.act)) << name(d) << " decode state, 72 rows";
    EXPECT_EQ(ds.read(), 0);
  }
}

// The bulk-copy replay kernel's heads per block (no GPU needed, heuristics.h
// replay1_heads_per_block) at H128 (16 heads per group, G = 8) on 132 SMs:
// T = 1 halves toward four blocks per SM but keeps four heads (the ring by
// bulk copies) while the grid has one per SM; speculative steps halve
// toward one per SM; REPLAYSSM_M2_R1_BPS-style targets likewise.
TEST(Mamba2Gpu, ReplayHeadsPerBlockRule) {
  struct Case {
    int64_t B;
    int hb_max, T, bps, want;
  };
  const Case cases[] = {
      // fp32 rows (at most 8 heads of 64 rows per block)
      {1, 8, 1, 0, 1}, {2, 8, 1, 0, 1}, {3, 8, 1, 0, 2}, {4, 8, 1, 0, 2}, {8, 8, 1, 0, 4},
      {16, 8, 1, 0, 4}, {32, 8, 1, 0, 4}, {64, 8, 1, 0, 8}, {256, 8, 1, 0, 8},
      // bf16 rows (16 heads)
      {4, 16, 1, 0, 2}, {32, 16, 1, 0, 4}, {64, 16, 1, 0, 8}, {140, 16, 1, 0, 16},
      // T > 1: one block per SM, no four-head floor; a measurement target: n per SM
      {1, 8, 5, 0, 1}, {4, 8, 5, 0, 2}, {8, 8, 5, 0, 4}, {16, 8, 5, 0, 8}, {64, 8, 5, 0, 8},
      {16, 16, 5, 0, 8}, {16, 8, 5, 8, 1}, {64, 8, 5, 8, 4}, {16, 8, 1, 8, 1}, {4, 8, 1, 1, 2}};
  for (const Case& c : cases)
    EXPECT_EQ(mamba2::replay1_heads_per_block(c.B, 8, 16, c.hb_max, c.T, 132, c.bps), c.want)
        << "B " << c.B << " hb_max " << c.hb_max << " T " << c.T << " bps " << c.bps;
}

// The tile the launcher takes (no GPU needed, backend.h replay1_tile_heads)
// at H128·P64·N128 (16 heads per group), L = 16, T = 1, bf16 activations on
// 132 SMs: at B = 256 fp32 states take 8 heads (256 KiB of rows), bf16 states
// and both packed copies a group's 16 (the fp8 copy since its history terms
// are formed in the stream's epilogue: with the rows' array, two sweeps of
// codes beside a group's records exceeded the 113 KiB of a block); at B = 40
// the small-batch rule halves the fp8 tile to 8 unless one block per SM is
// the target (REPLAYSSM_M2_R1_BPS=1, DualMamba2Gpu.BulkCopyWholeGroupTiles).
TEST(Mamba2Gpu, ReplayTileHeads) {
  using mamba2::cuda::replay1_tile_heads;
  const int fp8 = int(quant_layout(ReadFormat::fp8_e4m3, 64, 128).scale_row_bytes);
  const int nvfp4 = int(quant_layout(ReadFormat::nvfp4, 64, 128).scale_row_bytes);
  EXPECT_EQ(replay1_tile_heads(256, 8, 16, 64, 16, 1, 2, 4, 0, 0, 132), 8);
  EXPECT_EQ(replay1_tile_heads(256, 8, 16, 64, 16, 1, 2, 2, 0, 0, 132), 16);
  EXPECT_EQ(replay1_tile_heads(256, 8, 16, 64, 16, 1, 2, 1, 1, fp8, 132), 16);
  EXPECT_EQ(replay1_tile_heads(256, 8, 16, 64, 16, 1, 2, 1, 2, nvfp4, 132), 16);
  EXPECT_EQ(replay1_tile_heads(40, 8, 16, 64, 16, 1, 2, 1, 1, fp8, 132), 8);
  EXPECT_EQ(replay1_tile_heads(40, 8, 16, 64, 16, 1, 2, 1, 1, fp8, 132, 1), 16);
}

// The block-ahead prefetch's rule (no GPU needed, heuristics.h
// replay1_prefetch_distance): half a resident grid (one block per SM of the
// two) for T = 1 fp32 steps from batch 32 on; none for bf16 states, T > 1,
// dual steps or small batches; an override wins everywhere.
TEST(Mamba2Gpu, ReplayPrefetchRule) {
  EXPECT_EQ(mamba2::replay1_prefetch_distance(256, 1, false, 4, 132), 132);
  EXPECT_EQ(mamba2::replay1_prefetch_distance(32, 1, false, 4, 132), 132);
  EXPECT_EQ(mamba2::replay1_prefetch_distance(31, 1, false, 4, 132), 0);
  EXPECT_EQ(mamba2::replay1_prefetch_distance(256, 1, false, 2, 132), 0);
  EXPECT_EQ(mamba2::replay1_prefetch_distance(256, 5, false, 4, 132), 0);
  EXPECT_EQ(mamba2::replay1_prefetch_distance(256, 1, true, 1, 132), 0);
  EXPECT_EQ(mamba2::replay1_prefetch_distance(256, 1, true, 4, 132), 0);
  EXPECT_EQ(mamba2::replay1_prefetch_distance(4, 5, true, 1, 132, 7), 7);
  EXPECT_EQ(mamba2::replay1_prefetch_distance(256, 1, false, 4, 132, 0), 0);
}

// The T = 1 stream's sweep-ahead L2 prefetch rule (no GPU needed,
// heuristics.h replay1_sweep_prefetch): one sweep ahead for T = 1 fp32
// steps from 16 blocks per SM on (H128: 8 heads per block, 16 blocks per
// row, so B = 256 but not B = 64 on 132 SMs) on devices below 4 TB/s (an
// H100, 3,352 GB/s; not an H200, 4,800, nor a device that reports none);
// never for 16-bit states, dual steps or T > 1, even with an override; an
// override sets the distance on any device.
TEST(Mamba2Gpu, ReplaySweepPrefetchRule) {
  const double h100 = 3352.3, h200 = 4800.0;
  EXPECT_EQ(mamba2::replay1_sweep_prefetch(256 * 16, 1, false, 4, 132, h100), 1);
  EXPECT_EQ(mamba2::replay1_sweep_prefetch(132 * 16, 1, false, 4, 132, h100), 1);
  EXPECT_EQ(mamba2::replay1_sweep_prefetch(132 * 16 - 1, 1, false, 4, 132, h100), 0);
  EXPECT_EQ(mamba2::replay1_sweep_prefetch(64 * 16, 1, false, 4, 132, h100), 0);
  EXPECT_EQ(mamba2::replay1_sweep_prefetch(256 * 16, 1, false, 4, 132, h200), 0);
  EXPECT_EQ(mamba2::replay1_sweep_prefetch(256 * 16, 1, false, 4, 132, 0.0), 0);
  EXPECT_EQ(mamba2::replay1_sweep_prefetch(256 * 16, 1, false, 2, 132, h100), 0);
  EXPECT_EQ(mamba2::replay1_sweep_prefetch(256 * 16, 5, false, 4, 132, h100), 0);
  EXPECT_EQ(mamba2::replay1_sweep_prefetch(256 * 16, 1, true, 4, 132, h100), 0);
  EXPECT_EQ(mamba2::replay1_sweep_prefetch(64 * 16, 1, false, 4, 132, h100, 2), 2);
  EXPECT_EQ(mamba2::replay1_sweep_prefetch(64 * 16, 1, false, 4, 132, h200, 1), 1);
  EXPECT_EQ(mamba2::replay1_sweep_prefetch(256 * 16, 1, false, 2, 132, h100, 1), 0);
  EXPECT_EQ(mamba2::replay1_sweep_prefetch(256 * 16, 1, false, 4, 132, h100, 0), 0);
}

// The sweep-ahead prefetch forced (REPLAYSSM_M2_T1_L2PF = 1, 3; by default
// it starts at 16 blocks per SM) on fp32 states at 3, 8 and 72 rows of
// H128·P64·N128 (one to eight heads per block, so one to eight sweeps of
// which two or three are in stages at once: the prefetched sweep inside
// the block, at its end and past it), and 10 rows of the odd shape, against
// the reference. A prefetch only hints the cache; this holds its addresses
// to the block's own rows (memcheck) and the outputs to unchanged.
TEST(Mamba2Gpu, ReplaySweepPrefetch) {
  RSSM_SKIP_WITHOUT_GPU();
  const Shape s{128, 64, 128, 8};
  const Dtypes d{DType::f32, DType::bf16, DType::f32};
  for (const char* v : {"1", "3"}) {
    ScopedEnv pf("REPLAYSSM_M2_T1_L2PF", v);
    std::mt19937 rng(97);
    for (int64_t B : {3, 8, 72}) replay_run(rng, s, d, 9, std::string("sweep pf ") + v + " " + std::to_string(B) + " rows", B);
    replay_run(rng, Shape{4, 48, 128, 2}, d, 9, std::string("sweep pf ") + v + " {4, 48, 128, 2}", 10);
    if (::testing::Test::HasFailure()) return;
  }
}

// ReplayHeadsPerBlockRule's small-batch tiles on the GPU, H128·P64·N128:
// two heads per block (ring gathered) at 4 rows, four (ring by bulk copies)
// at 8, fp32 and bf16 states, L = 4 (a flush at steps 4 and 8), against the
// fp64 reference.
TEST(Mamba2Gpu, ReplaySmallBatchTiles) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(43);
  const Shape s{128, 64, 128, 8};
  for (const Dtypes& d : {Dtypes{DType::f32, DType::bf16, DType::f32}, Dtypes{DType::bf16, DType::bf16, DType::bf16}})
    for (int64_t B : {4, 8}) {
      replay_run(rng, s, d, 9, name(d) + " " + std::to_string(B) + " rows", B);
      if (::testing::Test::HasFailure()) return;
    }
}

// More blocks of the bulk-copy kernel than are resident at once, on a
// small shape (80 rows × 4 one-head blocks), small enough for
// compute-sanitizer; then the same batch with three rows rejected on the
// device (an uncommitted window): their outputs are zero, their slots
// untouched, and every other row equals the reference run with those rows
// padded (rejected blocks wait for their in-flight copies).
TEST(Mamba2Gpu, ReplayManyItems) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(43);
  const Shape s{4, 48, 128, 2};
  const Dtypes d{DType::f32, DType::bf16, DType::f32};
  replay_run(rng, s, d, 9, "80 rows", 80);
  Pool pool(rng, 81, s, d, 4, 2);
  const std::vector<int64_t> bad = {5, 17, 40};
  {
    Step w(rng, 3, 2, s, d, bad, false, pool.layer);  // a window of 2, left uncommitted
    mamba2_replay_step(w.host(), pool.host(), Tensor{}, false, ref_exec());
    mamba2_replay_step(w.dev(), pool.dev(), Tensor{}, false, Exec{Backend::cuda});
  }
  for (int step = 0; step < 3; ++step) {
    std::vector<int64_t> rows, ref_rows;
    for (int64_t b = 0; b < 80; ++b) {
      const int64_t sl = b == 1 ? -1 : b * 7 % 81;
      rows.push_back(sl);
      ref_rows.push_back(std::find(bad.begin(), bad.end(), sl) != bad.end() ? -1 : sl);
    }
    Step st(rng, 80, 1, s, d, rows, true, pool.layer);
    const HostTensor ref_slot = index_tensor(ref_rows);
    Mamba2Step h = st.host();
    h.slot = ref_slot;
    mamba2_replay_step(h, pool.host(), Tensor{}, true, ref_exec());
    DeviceStatus ds;
    mamba2_replay_step(st.dev(), pool.dev(), Tensor{}, true, ds.exec());
    EXPECT_NE(ds.read() & STATUS_UNCOMMITTED, 0) << "step " << step;
    EXPECT_LE(err(download(st.dy), st.y), tol(d.state, d.act)) << "rejected rows, step " << step;
  }
  pool.expect_match(tol(d.state, d.act), "rejected rows");
}

// bf16 states at 140 rows: the launcher's 16-head bulk-copy blocks (the
// whole group; fewer rows halve them), two flushes, against the reference.
TEST(Mamba2Gpu, ReplayProductionTilesBf16Wide) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(47);
  replay_run(rng, Shape{128, 64, 128, 8}, Dtypes{DType::bf16, DType::bf16, DType::bf16}, 9, "bf16 140 rows", 140);
}

// Speculative steps (T > 1) on the tensor-core stream of the bulk-copy
// kernel (N = 128: every model shape), every state / activation dtype pair
// at T = 5, and T = 2 and 8 on H64, against the fp64 reference: outputs of
// all T tokens every step (accepted or not: the next step commits a random
// count per row), the checkpoint, ring and cursors at the end. 10 steps at
// L = 8 flush every row several times. Prints the largest output error.
class Mamba2GpuSpecTensorCores : public GpuTestPart {};
TEST_P(Mamba2GpuSpecTensorCores, AllShapesAndDtypes) {
  RSSM_SKIP_WITHOUT_GPU();
  int item = 0;
  for (const Shape& s : MODEL_SHAPES)
    for (const Dtypes& d : DTYPE_SET)
      for (int64_t T : {2, 5, 8}) {
        if (T != 5 && s.H != 64) continue;
        std::mt19937 rng(53 + item);
        if (!mine(item++)) continue;
        const std::string what = "H" + std::to_string(s.H) + " P" + std::to_string(s.P) + " " + name(d);
        const double e = replay_run(rng, s, d, 10, what, 3, T);
        std::printf("  spec %s T=%d: max output error %.3g (tol %.3g)\n", what.c_str(), int(T), e, tol(d.state, d.act));
      }
}
RSSM_GPU_TEST_PARTS(Mamba2GpuSpecTensorCores);

// The same at production tiles, against the fast CPU backend (itself tested
// against the fp64 reference): H128·P64·N128 at 72 rows (8-head blocks, ring
// by bulk copies), fp32 and bf16 states, T = 5 and 8; 140 bf16 rows (16-head
// blocks), T = 5.
class Mamba2GpuSpecProductionTiles : public GpuTestPart {};
TEST_P(Mamba2GpuSpecProductionTiles, H128) {
  RSSM_SKIP_WITHOUT_GPU();
  const Shape s{128, 64, 128, 8};
  const Exec cpu{Backend::cpu};
  int item = 0;
  for (const Dtypes& d : {Dtypes{DType::f32, DType::bf16, DType::f32}, Dtypes{DType::bf16, DType::bf16, DType::bf16}})
    for (int64_t T : {5, 8}) {
      std::mt19937 rng(59 + item);
      if (mine(item++)) replay_run(rng, s, d, 6, name(d) + " 72 rows", 72, T, cpu);
    }
  std::mt19937 rng(67);
  if (mine(item++)) replay_run(rng, s, Dtypes{DType::bf16, DType::bf16, DType::bf16}, 6, "bf16 140 rows", 140, 5, cpu);
}
RSSM_GPU_TEST_PARTS(Mamba2GpuSpecProductionTiles);

// Speculative steps (T = 5) on the small-batch tiles (ReplayHeadsPerBlockRule:
// heads per block halved toward one block per SM) at 4 and 8 rows, H128
// fp32, against the fast CPU backend.
TEST(Mamba2Gpu, SpecSmallBatchTiles) {
  RSSM_SKIP_WITHOUT_GPU();
  const Shape s{128, 64, 128, 8};
  const Exec cpu{Backend::cpu};
  for (int64_t B : {4, 8}) {
    std::mt19937 rng(71 + int(B));
    replay_run(rng, s, Dtypes{DType::f32, DType::bf16, DType::f32}, 6, std::to_string(B) + " rows", B, 5, cpu);
    if (::testing::Test::HasFailure()) return;
  }
}

// The L2 prefetch of the block ahead (replay1_kernel.cuh, AheadRow) forced
// at small batches (REPLAYSSM_M2_PF blocks ahead; the default starts at batch
// 32): 1 (every block prefetches the next, across heads, rows, the pad row
// and the grid's end) and 5; T = 1 at 3 rows (ring gathered) and 8 rows (ring
// by bulk copies), fp32 and bf16 states, and T = 5 (tensor-core stream, cpu
// oracle), against the reference. A prefetch only hints the cache, so this
// holds the kernel's extra loads (the ahead row's slot, num_accepted and
// cursor, read before its own are checked) to changing nothing.
TEST(Mamba2Gpu, ReplayPrefetchAhead) {
  RSSM_SKIP_WITHOUT_GPU();
  const Shape s{128, 64, 128, 8};
  for (const char* v : {"1", "5"}) {
    ScopedEnv pf("REPLAYSSM_M2_PF", v);
    std::mt19937 rng(91);
    for (const Dtypes& d : {Dtypes{DType::f32, DType::bf16, DType::f32}, Dtypes{DType::bf16, DType::bf16, DType::bf16}})
      for (int64_t B : {3, 8}) replay_run(rng, s, d, 9, std::string("pf ") + v + " " + name(d) + " " + std::to_string(B) + " rows", B);
    replay_run(rng, s, Dtypes{DType::f32, DType::bf16, DType::f32}, 6, std::string("pf ") + v + " spec 4 rows", 4, 5, Exec{Backend::cpu});
    if (::testing::Test::HasFailure()) return;
  }
}

// The fold of a flushing T > 1 block (heuristics.h replay1_fold_tc): on
// tensor cores by default, as the FMA stream with REPLAYSSM_M2_FOLD_TC=0,
// each against the fp64 reference: fp32 states with bf16 and fp32
// activations (fp32 B_j split hi + lo as well) and bf16 states, T = 2, 5, 8
// on H64 at L = 8 (folds of 1 to 8 records: one k-step, records past the
// count zeroed), and T = 8 at L = 32 on 40 rows of H128 (folds of up to 32
// records: four k-steps; several heads per block). Prints each fold's
// largest output error.
TEST(Mamba2Gpu, SpecFoldTensorCores) {
  RSSM_SKIP_WITHOUT_GPU();
  const Dtypes ds[] = {{DType::f32, DType::bf16, DType::f32}, {DType::f32, DType::f32, DType::f32},
                       {DType::bf16, DType::bf16, DType::bf16}};
  for (const char* v : {"1", "0"}) {
    ScopedEnv fold("REPLAYSSM_M2_FOLD_TC", v);
    const std::string how = std::string(*v == '1' ? "tensor-core" : "FMA-stream") + " fold ";
    int item = 0;
    for (const Dtypes& d : ds) {
      for (int64_t T : {2, 5, 8}) {
        std::mt19937 rng(211 + item++);
        const std::string what = how + name(d) + " T=" + std::to_string(T);
        const double e = replay_run(rng, Shape{64, 64, 128, 8}, d, 12, what, 3, T);
        std::printf("  %s: max output error %.3g (tol %.3g)\n", what.c_str(), e, tol(d.state, d.act));
      }
      std::mt19937 rng(211 + item++);
      const Shape s{128, 64, 128, 8};
      std::vector<int64_t> rows;
      for (int64_t b = 0; b < 40; ++b) rows.push_back(b == 1 ? -1 : b * 7 % 41);
      Pool pool(rng, 41, s, d, 32, 8);
      const std::string what = how + name(d) + " L=32 T=8 40 rows";
      const double e = replay_steps(rng, pool, rows, s, d, 16, what, 8, Exec{Backend::cpu});
      std::printf("  %s: max output error %.3g against the cpu backend\n", what.c_str(), e);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

// The T = 1 fold of a flushing block (heuristics.h replay1_fold_tc): with
// fp32 states on tensor cores in place in its stage by default, as the FMA
// stream with REPLAYSSM_M2_FOLD_TC=0; 16-bit states have only the FMA stream
// at T = 1 (their instances do not compile the other), run once. Each
// against the fp64 reference: fp32 states with bf16 and fp32 activations,
// bf16 and f16 states, at H128·P64·N128 on 72 rows (8-head blocks) and at
// {6, 40, 128, 3} on 5 rows (P = 40: tiles of 16 rows across two heads, and
// a last tile past the block's rows), L = 4 (a flush every fourth step).
// Prints each fold's largest output error.
TEST(Mamba2Gpu, ReplayFoldTensorCores) {
  RSSM_SKIP_WITHOUT_GPU();
  const Dtypes ds[] = {{DType::f32, DType::bf16, DType::f32}, {DType::f32, DType::f32, DType::f32},
                       {DType::bf16, DType::bf16, DType::bf16}, {DType::f16, DType::bf16, DType::f32}};
  for (const int mode : {1, 0}) {
    ScopedEnv fold("REPLAYSSM_M2_FOLD_TC", mode ? "1" : "0");
    int item = 0;
    for (const Dtypes& d : ds) {
      const int ss = int(dtype_size(d.state));
      if (mode == 1 && ss != 4) continue;  // the same FMA stream as mode 0
      const bool tc = mamba2::replay1_fold_tc(1, false, ss, mode);
      EXPECT_EQ(tc, mode == 1 && ss == 4);
      for (const Shape& s : {Shape{128, 64, 128, 8}, Shape{6, 40, 128, 3}}) {
        std::mt19937 rng(307 + item++);
        const int64_t B = s.H == 128 ? 72 : 5;
        const std::string what = std::string(tc ? "tensor-core" : "FMA-stream") + " fold " + name(d) + " H" +
                                 std::to_string(s.H) + " P" + std::to_string(s.P);
        const double e = replay_run(rng, s, d, 9, what, B);
        std::printf("  %s T=1: max output error %.3g (tol %.3g)\n", what.c_str(), e, tol(d.state, d.act));
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
}

// replay1_fold_tc (no GPU): tensor cores for every single-precision step
// but T = 1 with 16-bit states; the override chooses between the two folds
// there and nowhere else.
TEST(Mamba2Gpu, SpecFoldTensorCoresRule) {
  EXPECT_TRUE(mamba2::replay1_fold_tc(1, false, 4));
  EXPECT_FALSE(mamba2::replay1_fold_tc(1, false, 2));
  EXPECT_FALSE(mamba2::replay1_fold_tc(1, false, 2, 1));
  EXPECT_TRUE(mamba2::replay1_fold_tc(2, false, 4));
  EXPECT_TRUE(mamba2::replay1_fold_tc(2, false, 2));
  EXPECT_TRUE(mamba2::replay1_fold_tc(8, false, 2));
  EXPECT_FALSE(mamba2::replay1_fold_tc(1, true, 4));
  EXPECT_FALSE(mamba2::replay1_fold_tc(5, true, 4));
  EXPECT_FALSE(mamba2::replay1_fold_tc(1, false, 4, 0));
  EXPECT_FALSE(mamba2::replay1_fold_tc(5, false, 2, 0));
  EXPECT_TRUE(mamba2::replay1_fold_tc(5, false, 2, 1));
  EXPECT_FALSE(mamba2::replay1_fold_tc(5, true, 4, 1));
}

// A short speculative run through the tensor-core stream, small enough for
// compute-sanitizer (memcheck and racecheck: the partial-sum buffer reuses
// shared memory the earlier phases read): {4, 48, 128, 2}, T = 5, 3 rows.
TEST(Mamba2Gpu, SpecShortRunN128) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(71);
  replay_run(rng, Shape{4, 48, 128, 2}, Dtypes{DType::f32, DType::bf16, DType::f32}, 6, "spec short run", 3, 5);
  replay_run(rng, Shape{4, 48, 128, 2}, Dtypes{DType::bf16, DType::bf16, DType::bf16}, 6, "spec short run bf16", 3, 5);
}

// Bad slot and bad accepted count: the status bit is set, the row skipped
// (no state, ring or cursor change), the other rows are correct.
// ODD runs the shared-memory-staged replay kernel, {4, 48, 128, 2} the
// bulk-copy one (replay1_kernel.cuh), whose rejected rows must wait for
// their in-flight copies before they exit.
TEST(Mamba2Gpu, DeviceStatusOnBadRows) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(29);
  for (const Shape& s : {ODD, Shape{4, 48, 128, 2}}) {
  const Dtypes d{DType::f32, DType::f32, DType::f32};
  Pool pool(rng, 4, s, d, 8, 2);
  {
    Step st(rng, 2, 1, s, d, {1, 9}, false, pool.layer);  // slot 9 is out of range
    DeviceStatus ds;
    mamba2_replay_step(st.dev(), pool.dev(), Tensor{}, true, ds.exec());
    EXPECT_NE(ds.read() & STATUS_BAD_SLOT, 0);
    EXPECT_THROW(check_device_status(ds.exec(), "test"), Error);
    EXPECT_EQ(download(pool.dcursor).get(1 * 3 + 1), 1.0);  // the good row stepped
    const HostTensor y = download(st.dy);
    expect_pad_zero(y, 1, s.H * s.P, "skipped row");
  }
  {
    Step st(rng, 1, 1, s, d, {2}, false, pool.layer);
    HostTensor acc = index_tensor({1});
    const DeviceTensor dacc(acc);
    DeviceStatus ds;
    const HostTensor cur = download(pool.dcursor);
    mamba2_replay_step(st.dev(), pool.dev(), dacc, true, ds.exec());  // nothing pending
    EXPECT_NE(ds.read() & STATUS_BAD_ACCEPTED, 0);
    EXPECT_TRUE(download(pool.dcursor).bytes_equal(cur));
  }
  {
    Step st(rng, 2, 1, s, d, {2, 11}, false, pool.layer);
    DeviceStatus ds;
    mamba2_decode(st.dev(), pool.dstate, ds.exec());
    EXPECT_NE(ds.read() & STATUS_BAD_SLOT, 0);
  }
  }
}

// A short T = 1 run through the bulk-copy replay kernel (N = 128, L = 4:
// flushes every fourth step; a pad row), every state dtype (f16 states with
// f16 activations too): small enough for compute-sanitizer
// (scripts/gpu_check.sh SANITIZE_FILTER).
TEST(Mamba2Gpu, ReplayShortRunN128) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(31);
  const Shape s{4, 48, 128, 2};
  for (const Dtypes& d : {Dtypes{DType::f32, DType::bf16, DType::f32}, Dtypes{DType::bf16, DType::bf16, DType::bf16},
                          Dtypes{DType::f16, DType::f16, DType::f32}})
    replay_run(rng, s, d, 10, name(d) + " short run");
}

}  // namespace
}  // namespace replayssm::test
