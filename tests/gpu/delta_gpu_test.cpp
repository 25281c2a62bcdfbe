// CUDA backend of GDN / KDA against the fp64 reference on host copies:
// decode, snapshot decode, prefill, replay steps (T = 1 and speculative
// windows with random acceptances, flushes, random ring starts), commit,
// materialize, flush, copy, reset, device status. Outputs are NaN-poisoned
// before every call; pad rows must come back zero.
#include <algorithm>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "delta/backend.h"
#include "delta/heuristics.h"
#include "delta_gpu_util.h"
#include "replayssm/delta.h"

namespace replayssm::test {
namespace {
using namespace delta_gpu;

// The configurations every test walks: the model shapes of design §6, odd
// shapes and GQA ratios, and the dtype matrix on a small shape.
std::vector<Cfg> configs() {
  std::vector<Cfg> v;
  for (int64_t HV : {32, 48, 64}) v.push_back({DeltaFamily::gdn, {16, HV, 128, 128}});
  v.push_back({DeltaFamily::kda, {32, 32, 128, 128}});
  v.push_back({DeltaFamily::gdn, {16, 64, 128, 128}, DType::bf16});
  v.push_back({DeltaFamily::kda, {32, 32, 128, 128}, DType::bf16, DType::bf16, DType::bf16});
  for (DeltaFamily f : {DeltaFamily::gdn, DeltaFamily::kda}) {
    v.push_back({f, {2, 2, 96, 96}, DType::f32, DType::f32});
    v.push_back({f, {2, 8, 64, 32}, DType::f16, DType::bf16, DType::bf16, DType::f32, false});
    v.push_back({f, {4, 8, 96, 96}, DType::f32, DType::bf16, DType::f32, DType::bf16});
    for (DType st : {DType::f32, DType::bf16, DType::f16})
      for (DType act : {DType::bf16, DType::f32})
        for (bool raw : {true, false})
          v.push_back({f, {1, 2, 64, 64}, st, act, raw ? DType::f32 : act, DType::f32, raw});
  }
  return v;
}


TEST(DeltaGpu, Decode) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(1);
  for (const Cfg& c : configs())
    for (int64_t T : {1, 3}) {
      SCOPED_TRACE(name(c) + " T" + std::to_string(T));
      decode_run(c, 3, 5, T, rng);
    }
}

TEST(DeltaGpu, SnapshotDecode) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(2);
  for (const Cfg& c : configs()) {
    SCOPED_TRACE(name(c));
    snapshot_run(c, rng);
  }
}


TEST(DeltaGpu, ReplayStep) {
  RSSM_SKIP_WITHOUT_GPU();
  uint32_t seed = 10;
  for (const Cfg& c : configs()) {
    SCOPED_TRACE(name(c));
    const bool big = c.s.HV * c.s.V * c.s.K > (1 << 20);
    replay_run(c, 3, 6, 4, 1, big ? 7 : 12, seed++, !big);  // L = 4: flushes at steps 4, 8
    if (::testing::Test::HasFailure()) return;
  }
}

// T = 1 replay and decode at 40 rows, where the launchers pick their
// production tiles (GDN: a whole key head of 4 value heads per replay block,
// decode blocks over several stage rounds and heads; KDA: whole heads), not the split tiles
// that small grids fall back to (the batch-3 tests above).
TEST(DeltaGpu, ProductionTiles) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(5);
  uint32_t seed = 60;
  const Cfg cfgs[] = {{DeltaFamily::gdn, {16, 64, 128, 128}},
                      {DeltaFamily::gdn, {16, 64, 128, 128}, DType::bf16},
                      {DeltaFamily::kda, {32, 32, 128, 128}}};
  for (const Cfg& c : cfgs) {
    SCOPED_TRACE(name(c) + " 40 rows");
    replay_run(c, 40, 41, 4, 1, 6, seed++, false);  // L = 4: a flush at step 4
    decode_run(c, 40, 41, 1, rng);
    if (::testing::Test::HasFailure()) return;
  }
}

// bf16 checkpoints with fp32 activations, gates and d records, before the
// first flush: both backends read the same bf16 state, so the outputs agree
// to fp32 rounding (the fp32 tolerance, not bf16's 3e-2): a check of the
// T = 1 streams' products that bf16's tolerance would not give (it held a
// tensor-core form of the GDN sweep, hi + mid + lo bf16 parts of q̂ and k̂,
// to it; that form was slower and is not on main, perf_notes_delta.md v17).
// 40 rows: GDN HV64's production tile (four sweeps of a key head), V = 64
// with a value head per block (DeltaGpu.PackedCopyLaunchChoice), KDA; 8
// steps at L = 8, histories of 0 to 7 records, no flush.
TEST(DeltaGpu, Bf16StateReadsMatchCpuBeforeAFlush) {
  RSSM_SKIP_WITHOUT_GPU();
  const DType F = DType::f32, H = DType::bf16;
  const Exec cpu{Backend::cpu, nullptr, 0, nullptr};
  const Cfg cfgs[] = {{DeltaFamily::gdn, {16, 64, 128, 128}, H, F, F, F},
                      {DeltaFamily::gdn, {2, 6, 128, 64}, H, F, F, F},
                      {DeltaFamily::kda, {32, 32, 128, 128}, H, F, F, F}};
  uint32_t seed = 70;
  for (const Cfg& c : cfgs) {
    SCOPED_TRACE(name(c) + " 40 rows, no flush");
    replay_run(c, 40, 41, 8, 1, 8, seed++, false, nullptr, cpu, tolerance(F));
    if (::testing::Test::HasFailure()) return;
  }
}

// Eager T = 1 steps (REPLAYSSM_EAGER_ROWS=4: batches of at most 4 rows fold
// their records and token into the checkpoint, delta_launch.cu run_eager)
// mixed with replay steps of 8 rows and speculative windows on one pool,
// against the fp64 reference (which replays): a small batch from empty rings
// (steady state), then 8 rows on the replay kernels (records accumulate), the
// small batch again (its first step folds them), a T = 3 window and an eager
// step that commits it (num_accepted), and 8 rows again. Outputs every step;
// materialised states of all 8 rows after each phase; after an eager step its
// rows' cursors hold no records (the eager path ran). Pad row in the small
// batch; L = 4, so the replay phases flush. Last, a captured eager step
// replayed after replay steps. Both ways of resetting the cursors
// (REPLAYSSM_EAGER_CTR).
void eager_run(const Cfg& c, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t S = 10, L = 4, Tm = 3;
  Pool pool(c, S, L, Tm, rng);
  std::vector<int64_t> ids(static_cast<size_t>(S));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  Pair small, large;
  small.h = index_tensor({ids[0], -1, ids[1]});
  small.upload();
  large.h = index_tensor(std::vector<int64_t>(ids.begin(), ids.begin() + 8));
  large.upload();
  auto step = [&](const Pair& slot, int64_t B, int64_t T, const Pair* acc) {
    Inputs in(c, {B, T}, rng);
    const bool commit_all = T == 1;
    delta_replay_step(c.f, in.step(false, slot, -1), pool.view(false), acc ? acc->ht() : Tensor{}, commit_all, ref_exec());
    delta_replay_step(c.f, in.step(true, slot, -1), pool.view(true), acc ? acc->dt() : Tensor{}, commit_all, cuda_exec());
    sync();
    expect_close(in.o.fetch(), in.o.h, tol(c), "o");
  };
  auto states = [&](const char* what) {
    Pair out;
    out.make(DType::f32, {8, c.s.HV, c.s.V, c.s.K});
    out.h.fill_nan();
    out.upload();
    delta_materialize(c.f, pool.view(false), large.ht(), -1, out.ht(), ref_exec());
    delta_materialize(c.f, pool.view(true), large.dt(), -1, out.dt(), cuda_exec());
    sync();
    expect_close(out.fetch(), out.h, tol(c), std::string("materialized after ") + what);
  };
  auto emptied = [&](const char* what) {  // the small batch's rows after an eager step
    const HostTensor cur = pool.cur.fetch();
    for (int64_t r : {ids[0], ids[1]}) EXPECT_EQ(cur.get(r * 3 + 1), 0.0) << what << ": slot " << r << " holds records";
  };
  for (int i = 0; i < 5; ++i) step(small, 3, 1, nullptr);
  emptied("steady state");
  states("eager steps from empty rings");
  for (int i = 0; i < 3; ++i) step(large, 8, 1, nullptr);
  states("replay steps");
  for (int i = 0; i < 3; ++i) {
    step(small, 3, 1, nullptr);
    if (i == 0) emptied("the fold of the replay steps' records");
  }
  states("eager steps after replay");
  step(small, 3, Tm, nullptr);  // a window (replay kernels), committed by the next eager step
  Pair acc;
  acc.make(DType::i32, {3});
  for (int64_t b = 0; b < 3; ++b) acc.h.set(b, double(1 + int64_t(rng() % Tm)));
  acc.upload();
  step(small, 3, 1, &acc);
  emptied("an eager step committing a window");
  states("a committed window");
  for (int i = 0; i < 5; ++i) step(large, 8, 1, nullptr);
  states("replay after eager");
  // Captured: an eager step on the graph's stream first (its counters exist
  // before the capture), replay steps of 8 rows (records again), then the
  // captured eager step replayed 6 times (the first folds them).
  CapturedGraph g;
  Inputs gin(c, {3, 1}, rng);
  const Exec ge = g.exec(cuda_exec());
  delta_replay_step(c.f, gin.step(false, small, -1), pool.view(false), Tensor{}, true, ref_exec());
  delta_replay_step(c.f, gin.step(true, small, -1), pool.view(true), Tensor{}, true, ge);
  RSSM_CUDA_OK(cudaStreamSynchronize(g.stream()));
  for (int i = 0; i < 2; ++i) step(large, 8, 1, nullptr);
  g.capture([&] { delta_replay_step(c.f, gin.step(true, small, -1), pool.view(true), Tensor{}, true, ge); });
  for (int r = 0; r < 6; ++r) {
    SCOPED_TRACE("graph replay " + std::to_string(r));
    delta_replay_step(c.f, gin.step(false, small, -1), pool.view(false), Tensor{}, true, ref_exec());
    g.replay();
    expect_close(gin.o.fetch(), gin.o.h, tol(c), "o");
    if (r == 0) emptied("a captured eager step");
  }
  states("graph replays");
}

TEST(DeltaGpu, EagerSmallBatch) {
  RSSM_SKIP_WITHOUT_GPU();
  ScopedEnv eager("REPLAYSSM_EAGER_ROWS", "4");
  const Cfg cfgs[] = {{DeltaFamily::gdn, {16, 64, 128, 128}},
                      {DeltaFamily::gdn, {2, 6, 128, 64}, DType::bf16},
                      {DeltaFamily::kda, {32, 32, 128, 128}},
                      {DeltaFamily::kda, {2, 2, 128, 128}, DType::f16}};
  for (const char* ctr : {"1", "0"}) {  // the row's last block resets its cursor / the cursor kernel does
    ScopedEnv counters("REPLAYSSM_EAGER_CTR", ctr);
    uint32_t seed = 1500;
    for (const Cfg& c : cfgs) {
      SCOPED_TRACE(name(c) + ", REPLAYSSM_EAGER_CTR=" + ctr);
      eager_run(c, seed++);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

// The dimensions of a T = 1 step at K = V = 128 (the launch-choice tests).
delta::Dims t1_dims(DeltaFamily f, int64_t H, int64_t HV, int64_t B, int64_t L) {
  delta::Dims d;
  d.family = f;
  d.B = B, d.T = 1, d.H = H, d.HV = HV, d.K = 128, d.V = 128, d.S = B + 1, d.L = L, d.R = L + 1;
  return d;
}

// The T = 1 tile's block target (no GPU needed, heuristics.h
// replay1_tile_bps): one block per SM while the step streams less than 512
// KiB per SM, which at 132 SMs takes a GDN HV64 value head per block at
// B = 4, half a key head at 8, a whole one at 16 (and at 24 and 32 for
// bf16, 48 and 64 MiB), KDA 64-row tiles at 4 and whole heads from 8; fp32
// GDN at B = 24 and 32 (96 and 128 MiB) keeps four per SM (half key heads),
// as REPLAYSSM_R1_TILE_BPS=4 does at every batch (32-row tiles at B = 4).
struct TileBps : ScopedEnv {
  explicit TileBps(const char* v) : ScopedEnv("REPLAYSSM_R1_TILE_BPS", v) {}
};
TEST(DeltaGpu, SmallBatchLaunchChoice) {
  const int sms = 132;
  for (DType st : {DType::f32, DType::bf16}) {
    auto gdn = [&](int64_t B) { return delta::cuda::replay1_choice(t1_dims(DeltaFamily::gdn, 16, 64, B, 16), st, sms); };
    auto kda = [&](int64_t B) { return delta::cuda::replay1_choice(t1_dims(DeltaFamily::kda, 32, 32, B, 16), st, sms); };
    EXPECT_EQ(gdn(4).nh, 1);
    EXPECT_EQ(gdn(4).vt, 128);
    EXPECT_EQ(gdn(8).nh, 2);
    EXPECT_EQ(gdn(16).nh, 4);
    EXPECT_EQ(gdn(24).nh, st == DType::f32 ? 2 : 4);
    EXPECT_EQ(gdn(32).nh, st == DType::f32 ? 2 : 4);
    EXPECT_EQ(kda(4).vt, 64);
    EXPECT_EQ(kda(8).vt, 128);
    TileBps four("4");
    EXPECT_EQ(gdn(4).nh, 1);
    EXPECT_EQ(gdn(4).vt, 32);
    EXPECT_EQ(gdn(32).nh, 2);
    EXPECT_EQ(kda(4).vt, 32);
  }
}

// The speculative (T = 5) tile follows the same rule (no GPU needed,
// delta_launch.cu spec_plan): below 512 KiB streamed per SM it takes what a
// target of one block per SM gives (fewer, larger blocks than the former four),
// above it four per SM, as REPLAYSSM_SPEC_TILE_BPS=4 does; packed read copies
// (fp8 / nvfp4) take one per SM below 48 Ki elements per SM (GDN HV64 at 4
// rows, not 8; KDA at 8, not 16).
TEST(DeltaGpu, SpecSmallBatchLaunchChoice) {
  const int sms = 132;
  auto dims = [](DeltaFamily f, int64_t H, int64_t HV, int64_t B) {
    delta::Dims d = t1_dims(f, H, HV, B, 16);
    d.T = 5;
    d.R = d.L + d.T;
    return d;
  };
  auto rows = [](const delta::cuda::SpecChoice& c) { return c.nh * c.vt; };
  for (DType st : {DType::f32, DType::bf16}) {
    auto gdn = [&](int64_t B) { return delta::cuda::spec_choice(dims(DeltaFamily::gdn, 16, 64, B), st, sms); };
    auto kda = [&](int64_t B) { return delta::cuda::spec_choice(dims(DeltaFamily::kda, 32, 32, B), st, sms); };
    const int64_t batches[] = {1, 4, 8, 16, 64, 256};
    int gdn_rows[6], kda_rows[6];
    for (int i = 0; i < 6; ++i) {
      EXPECT_TRUE(gdn(batches[i]).mma);
      gdn_rows[i] = rows(gdn(batches[i]));
      kda_rows[i] = rows(kda(batches[i]));
    }
    ScopedEnv four("REPLAYSSM_SPEC_TILE_BPS", "4");
    for (int i = 0; i < 6; ++i) {
      SCOPED_TRACE(std::to_string(batches[i]) + " rows");
      if (batches[i] <= 16) {  // fewer, larger blocks
        EXPECT_GT(gdn_rows[i], rows(gdn(batches[i])));
        if (batches[i] > 1) EXPECT_GT(kda_rows[i], rows(kda(batches[i])));
      } else {  // four per SM
        EXPECT_EQ(gdn_rows[i], rows(gdn(batches[i])));
        EXPECT_EQ(kda_rows[i], rows(kda(batches[i])));
      }
    }
  }
  for (ReadFormat f : {ReadFormat::fp8_e4m3, ReadFormat::nvfp4}) {
    SCOPED_TRACE(read_format_name(f));
    const QuantLayout l = quant_layout(f, 128, 128);
    auto gdn = [&](int64_t B) { return rows(delta::cuda::spec_choice(dims(DeltaFamily::gdn, 16, 64, B), DType::f32, sms, &l)); };
    auto kda = [&](int64_t B) { return rows(delta::cuda::spec_choice(dims(DeltaFamily::kda, 32, 32, B), DType::f32, sms, &l)); };
    const int g4 = gdn(4), g8 = gdn(8), k8 = kda(8), k16 = kda(16);
    ScopedEnv four("REPLAYSSM_SPEC_TILE_BPS", "4");
    EXPECT_GT(g4, gdn(4));
    EXPECT_EQ(g8, gdn(8));
    EXPECT_GT(k8, kda(8));
    EXPECT_EQ(k16, kda(16));
  }
}

// SmallBatchLaunchChoice's tiles on the GPU: GDN HV64 fp32 at 4, 8 and 16
// rows (a value head, half and a whole key head per block), KDA bf16 at 4
// rows (64-row tiles), L = 4 (a flush at step 4), against the cpu backend.
TEST(DeltaGpu, SmallBatchTiles) {
  RSSM_SKIP_WITHOUT_GPU();
  const Exec cpu{Backend::cpu, nullptr, 0, nullptr};
  uint32_t seed = 1300;
  for (int64_t B : {4, 8, 16}) {
    const Cfg c{DeltaFamily::gdn, {16, 64, 128, 128}};
    SCOPED_TRACE(name(c) + " " + std::to_string(B) + " rows");
    replay_run(c, B, B + 1, 4, 1, 6, seed++, false, nullptr, cpu);
    if (::testing::Test::HasFailure()) return;
  }
  const Cfg k{DeltaFamily::kda, {32, 32, 128, 128}, DType::bf16};
  SCOPED_TRACE(name(k) + " 4 rows");
  replay_run(k, 4, 5, 4, 1, 6, seed++, false, nullptr, cpu);
}

// The T = 1 launcher's choice for long rings (no GPU needed): at L = 32 a
// whole GDN key head (KDA head) per block keeps its two (three) resident
// blocks per SM by holding fewer d records in shared memory, as the
// LongRingProductionTiles test below runs it; L = 16 keeps all of them.
TEST(DeltaGpu, LongRingLaunchChoice) {
  const int sms = 132;
  for (DType st : {DType::f32, DType::bf16}) {
    const auto g16 = delta::cuda::replay1_choice(t1_dims(DeltaFamily::gdn, 16, 64, 256, 16), st, sms);
    EXPECT_EQ(g16.nh, 4);
    EXPECT_EQ(g16.ld, 16);
    for (int64_t B : {34, 256}) {
      const auto g = delta::cuda::replay1_choice(t1_dims(DeltaFamily::gdn, 16, 64, B, 32), st, sms);
      EXPECT_EQ(g.nh, 4) << B;
      EXPECT_EQ(g.vt, 128) << B;
      EXPECT_TRUE(g.bulk);
      EXPECT_LT(g.ld, 32);
      EXPECT_LE(g.smem, 112 * 1024);
    }
  }
  for (DType st : {DType::f32, DType::bf16}) {
    const auto k16 = delta::cuda::replay1_choice(t1_dims(DeltaFamily::kda, 32, 32, 256, 16), st, sms);
    EXPECT_EQ(k16.ld, 16);
    const auto k = delta::cuda::replay1_choice(t1_dims(DeltaFamily::kda, 32, 32, 17, 32), st, sms);
    EXPECT_EQ(k.vt, 128);
    EXPECT_TRUE(k.bulk);
    EXPECT_LT(k.ld, 32);
    EXPECT_LE(k.smem, 75 * 1024);
  }
}

// The packed-copy bulk stream of the T = 1 step (dual fp8 / nvfp4 copies)
// takes value tiles of equal size only (no GPU needed): GDN HV64 at batch
// 256 (whole heads) and V = 64 at batch 3 (halves) do; V = 40 at batch 3,
// split into unequal tiles, takes the staged stream (the bulk stream hung
// on the shorter tile before 740e97c: DualDeltaGpu.CopyReadsMatchCpuBeforeAFlush).
TEST(DeltaGpu, PackedCopyLaunchChoice) {
  const int sms = 132;
  auto dims = [](int64_t H, int64_t HV, int64_t V, int64_t B) {
    delta::Dims d;
    d.family = DeltaFamily::gdn;
    d.B = B, d.T = 1, d.H = H, d.HV = HV, d.K = 128, d.V = V, d.S = B + 1, d.L = 16, d.R = 17;
    return d;
  };
  for (ReadFormat f : {ReadFormat::fp8_e4m3, ReadFormat::nvfp4}) {
    SCOPED_TRACE(read_format_name(f));
    const QuantLayout l128 = quant_layout(f, 128, 128), l64 = quant_layout(f, 64, 128), l40 = quant_layout(f, 40, 128);
    const auto big = delta::cuda::replay1_choice(dims(16, 64, 128, 256), DType::f32, sms, &l128);
    EXPECT_TRUE(big.qbulk);
    EXPECT_EQ(big.vt, 128);
    const auto v64 = delta::cuda::replay1_choice(dims(2, 6, 64, 3), DType::f32, sms, &l64);
    EXPECT_EQ(64 % v64.vt, 0);
    EXPECT_EQ(v64.vt, 32);
    EXPECT_TRUE(v64.qbulk);
    const auto v40 = delta::cuda::replay1_choice(dims(2, 6, 40, 3), DType::f32, sms, &l40);
    EXPECT_NE(40 % v40.vt, 0);
    EXPECT_FALSE(v40.qbulk);
  }
  // DeltaGpu.Bf16StateReadsMatchCpuBeforeAFlush's V = 64 rows: a value head
  // per bulk block (one block per SM: 3.75 MiB of state).
  const auto b = delta::cuda::replay1_choice(dims(2, 6, 64, 40), DType::bf16, sms);
  EXPECT_TRUE(b.bulk);
  EXPECT_EQ(b.nh, 1);
  EXPECT_EQ(b.vt, 64);
}

// Long rings at the production tiles: L = 32 with a whole GDN key head (or
// KDA head) per block holds 12 of the d records in shared memory
// (heuristics.h, replay1_ld; LongRingLaunchChoice above), so steps with
// longer histories read the rest from global memory and the flush at step
// 32 (32 records, every row) stages its fold weights sweep by sweep. The
// smallest batches that keep whole heads (GDN 34 rows, KDA 17), 35 steps,
// against the cpu backend (the fp64 reference takes minutes here; the cpu
// backend is checked against it on the CPU). The KDA run is small enough
// for compute-sanitizer (scripts/gpu_check.sh SANITIZE_FILTER).
void long_ring_runs(const std::vector<Cfg>& cfgs, int64_t B, uint32_t seed) {
  const Exec cpu{Backend::cpu, nullptr, 0, nullptr};
  for (const Cfg& c : cfgs) {
    SCOPED_TRACE(name(c) + " " + std::to_string(B) + " rows L32");
    replay_run(c, B, B + 1, 32, 1, 35, seed++, false, nullptr, cpu);
    if (::testing::Test::HasFailure()) return;
  }
}
TEST(DeltaGpu, LongRingProductionTiles) {
  RSSM_SKIP_WITHOUT_GPU();
  long_ring_runs({{DeltaFamily::gdn, {16, 64, 128, 128}}, {DeltaFamily::gdn, {16, 64, 128, 128}, DType::bf16}}, 34, 65);
}
TEST(DeltaGpu, LongRingProductionTilesKda) {
  RSSM_SKIP_WITHOUT_GPU();
  long_ring_runs({{DeltaFamily::kda, {32, 32, 128, 128}}, {DeltaFamily::kda, {32, 32, 128, 128}, DType::bf16}}, 17, 68);
}

// The T = 1 replay's bulk-copy stream (K = 128) on small heads, both
// families, fp32 / bf16 states, 3 rows (one a pad), L-record rings.
void bulk_small_runs(int64_t L, int steps, uint32_t seed, const std::string& tag) {
  for (DeltaFamily f : {DeltaFamily::gdn, DeltaFamily::kda})
    for (DType st : {DType::f32, DType::bf16}) {
      const Cfg c{f, {1, 2, 128, 128}, st};
      SCOPED_TRACE(name(c) + tag);
      replay_run(c, 3, 6, L, 1, steps, seed++, true);
      if (::testing::Test::HasFailure()) return;
    }
}

// A flush every fourth step: small enough for compute-sanitizer
// (scripts/gpu_check.sh SANITIZE_FILTER).
TEST(DeltaGpu, ReplayBulkSmall) {
  RSSM_SKIP_WITHOUT_GPU();
  bulk_small_runs(4, 9, 70, "");
}

// Long rings (L = 32, the benchmark's longest): histories of up to 31
// records (the GDN decays' warp scan at its widest) and flushes of 32 (its
// serial path), at steps 32 and 64.
TEST(DeltaGpu, ReplayBulkLongRing) {
  RSSM_SKIP_WITHOUT_GPU();
  bulk_small_runs(32, 70, 75, " L32");
}

// Speculative steps (T = 5) through the tensor-core stream (replay.cuh, MMA:
// K = 128) at 40 rows, where the launcher takes whole key heads (GDN: 4
// value heads per block) and whole KDA heads; L = 8, so rows flush.
TEST(DeltaGpu, SpecProductionTiles) {
  RSSM_SKIP_WITHOUT_GPU();
  uint32_t seed = 80;
  const Cfg cfgs[] = {{DeltaFamily::gdn, {16, 64, 128, 128}},
                      {DeltaFamily::gdn, {16, 64, 128, 128}, DType::bf16},
                      {DeltaFamily::kda, {32, 32, 128, 128}}};
  for (const Cfg& c : cfgs) {
    SCOPED_TRACE(name(c) + " 40 rows T5");
    replay_run(c, 40, 41, 8, 5, 5, seed++, false);
    if (::testing::Test::HasFailure()) return;
  }
}

// Speculative steps (T = 5) on SpecSmallBatchLaunchChoice's small-batch
// tiles: GDN HV64 fp32 at 4 and 8 rows, KDA fp32 at 4 rows; L = 8, so rows
// flush; against the cpu backend.
TEST(DeltaGpu, SpecSmallBatchTiles) {
  RSSM_SKIP_WITHOUT_GPU();
  const Exec cpu{Backend::cpu, nullptr, 0, nullptr};
  const Cfg gdn{DeltaFamily::gdn, {16, 64, 128, 128}}, kda{DeltaFamily::kda, {32, 32, 128, 128}};
  const std::pair<Cfg, int64_t> runs[] = {{gdn, 4}, {gdn, 8}, {kda, 4}};
  uint32_t seed = 1400;
  for (const auto& [c, B] : runs) {
    SCOPED_TRACE(name(c) + " " + std::to_string(B) + " rows T5");
    replay_run(c, B, B + 1, 8, 5, 6, seed++, false, nullptr, cpu);
    if (::testing::Test::HasFailure()) return;
  }
}

// The tensor-core stream on small heads (GDN 2 value heads, KDA), fp32 /
// bf16 / f16 states, T = 5, L = 8: small enough for compute-sanitizer.
TEST(DeltaGpu, SpecMmaSmall) {
  RSSM_SKIP_WITHOUT_GPU();
  uint32_t seed = 90;
  for (DeltaFamily f : {DeltaFamily::gdn, DeltaFamily::kda})
    for (DType st : {DType::f32, DType::bf16, DType::f16}) {
      const Cfg c{f, {1, 2, 128, 128}, st};
      SCOPED_TRACE(name(c) + " T5");
      replay_run(c, 3, 6, 8, 5, 8, seed++, true);
      if (::testing::Test::HasFailure()) return;
    }
}

// REC16 (replay.cuh): where the KDA tensor-core kernel takes its old records
// by 16-byte cp.async — whole 128-row heads, staged keys, d rows and key
// scales within the operand region (L <= 21 with bf16 keys and fp32 d, L <=
// 16 with fp32 keys), never for GDN or packed copies; REPLAYSSM_SPEC_REC16=0
// turns it off. No GPU needed.
TEST(DeltaGpu, SpecRecordsByCopiesChoice) {
  const int sms = 132;
  auto dims = [](DeltaFamily f, int64_t H, int64_t HV, int64_t B, int64_t L) {
    delta::Dims d = t1_dims(f, H, HV, B, L);
    d.T = 5;
    d.R = d.L + d.T;
    return d;
  };
  using delta::cuda::spec_choice;
  for (DType st : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(st));
    const auto k256 = spec_choice(dims(DeltaFamily::kda, 32, 32, 256, 16), st, sms);
    EXPECT_TRUE(k256.mma && k256.nh == 1 && k256.vt == 128);
    EXPECT_TRUE(k256.rec16);
    EXPECT_TRUE(spec_choice(dims(DeltaFamily::kda, 32, 32, 256, 21), st, sms).rec16);
    EXPECT_FALSE(spec_choice(dims(DeltaFamily::kda, 32, 32, 256, 22), st, sms).rec16);
    EXPECT_FALSE(spec_choice(dims(DeltaFamily::kda, 32, 32, 256, 32), st, sms).rec16);
    EXPECT_TRUE(spec_choice(dims(DeltaFamily::kda, 32, 32, 256, 16), st, sms, nullptr, DType::f32, DType::f32).rec16);
    EXPECT_FALSE(spec_choice(dims(DeltaFamily::kda, 32, 32, 256, 17), st, sms, nullptr, DType::f32, DType::f32).rec16);
    EXPECT_FALSE(spec_choice(dims(DeltaFamily::gdn, 16, 64, 256, 16), st, sms).rec16);
    // SpecRecordsByCopiesMatchLoads' launches take it
    EXPECT_TRUE(spec_choice(dims(DeltaFamily::kda, 32, 32, 24, 8), st, sms).rec16);
    EXPECT_TRUE(spec_choice(dims(DeltaFamily::kda, 32, 32, 24, 16), st, sms, nullptr, DType::f32, DType::f32).rec16);
    ScopedEnv off("REPLAYSSM_SPEC_REC16", "0");
    EXPECT_FALSE(spec_choice(dims(DeltaFamily::kda, 32, 32, 256, 16), st, sms).rec16);
  }
  const QuantLayout l = quant_layout(ReadFormat::fp8_e4m3, 128, 128);
  EXPECT_FALSE(spec_choice(dims(DeltaFamily::kda, 32, 32, 256, 16), DType::f32, sms, &l).rec16);
}

// Two pools of the same contents take the same speculative steps (B = 24,
// random acceptances after the first; L = 8 and 16 make rows flush), pool a
// in the current environment, pool b with `name` set to `value`: outputs and
// every pool tensor byte for byte after each of 14 steps.
void expect_spec_steps_match(const Cfg& c, int64_t L, int64_t T, uint32_t seed, const char* name, const char* value) {
  const int64_t B = 24, S = 27;
  std::mt19937 ra(seed), rb(seed);
  Pool pa(c, S, L, T, ra), pb(c, S, L, T, rb);  // the same contents
  std::mt19937 rng(seed + 1);
  Pair slot = make_slots(B, S, 1, -1, rng);
  for (int step = 0; step < 14; ++step) {
    Inputs in(c, {B, T}, rng);
    Pair acc;
    if (step > 0) {
      acc.make(DType::i32, {B});
      for (int64_t b = 0; b < B; ++b) acc.h.set(b, double(1 + int64_t(rng() % T)));
      acc.upload();
    }
    const Tensor at = step > 0 ? acc.dt() : Tensor{};
    delta_replay_step(c.f, in.step(true, slot, -1), pa.view(true), at, false, cuda_exec());
    sync();
    const HostTensor oa = in.o.fetch();
    in.poison();
    {
      ScopedEnv set(name, value);
      delta_replay_step(c.f, in.step(true, slot, -1), pb.view(true), at, false, cuda_exec());
    }
    sync();
    EXPECT_TRUE(in.o.fetch().bytes_equal(oa)) << "o, step " << step;
    for (auto m : {&Pool::state, &Pool::rd, &Pool::rk, &Pool::rks, &Pool::rg, &Pool::cur})
      EXPECT_TRUE((pa.*m).fetch().bytes_equal((pb.*m).fetch())) << "pool, step " << step;
    if (::testing::Test::HasFailure()) return;
  }
}

// REC16 on the GPU against the same kernel's loads (REPLAYSSM_SPEC_REC16=0):
// T = 5, L = 8 and 16; fp32 / bf16 states, bf16 / fp32 d records, bf16 /
// fp32 keys (activations), at the model shape.
// The cpu backend checks the copies' path through the other spec tests.
TEST(DeltaGpu, SpecRecordsByCopiesMatchLoads) {
  RSSM_SKIP_WITHOUT_GPU();
  const DType F = DType::f32, H = DType::bf16;
  const Cfg cfgs[] = {{DeltaFamily::kda, {32, 32, 128, 128}},
                      {DeltaFamily::kda, {32, 32, 128, 128}, H},
                      {DeltaFamily::kda, {32, 32, 128, 128}, F, H, F, H},
                      {DeltaFamily::kda, {32, 32, 128, 128}, F, F, F, F}};
  uint32_t seed = 1500;
  for (const Cfg& c : cfgs)
    for (int64_t L : {8, 16}) {
      SCOPED_TRACE(name(c) + " L" + std::to_string(L));
      expect_spec_steps_match(c, L, 5, seed++, "REPLAYSSM_SPEC_REC16", "0");
      if (::testing::Test::HasFailure()) return;
    }
}

// A3 (replay.cuh): KDA's fp32 tensor-core kernel at three blocks per SM,
// by default from T = 8 (REPLAYSSM_SPEC_A3=1 / 0 sets it), where three
// blocks' shared memory fits 228 KiB: whole 128-row heads, L + T up to 24;
// never for 16-bit states, GDN, L = 32 or a smaller SM. No GPU needed.
TEST(DeltaGpu, SpecThreeBlocksChoice) {
  const int sms = 132, sm228 = 228 * 1024;
  auto dims = [](DeltaFamily f, int64_t H, int64_t HV, int64_t B, int64_t L, int64_t T) {
    delta::Dims d = t1_dims(f, H, HV, B, L);
    d.T = T;
    d.R = d.L + d.T;
    return d;
  };
  using delta::cuda::spec_choice;
  const DType F = DType::f32, Hf = DType::bf16;
  auto kda = [&](int64_t B, int64_t L, int64_t T, DType st = DType::f32, int smem = 228 * 1024) {
    return spec_choice(dims(DeltaFamily::kda, 32, 32, B, L, T), st, sms, nullptr, F, Hf, smem);
  };
  EXPECT_FALSE(kda(256, 16, 5).a3);  // by default from T = 8 (heuristics.h SPEC_A3_MIN_T)
  EXPECT_FALSE(kda(256, 16, 7).a3);
  EXPECT_TRUE(kda(256, 16, 8).a3);
  EXPECT_TRUE(kda(64, 16, 8).a3);
  EXPECT_FALSE(kda(256, 32, 8).a3);  // L + T > 24
  {
    ScopedEnv off("REPLAYSSM_SPEC_A3", "0");
    EXPECT_FALSE(kda(256, 16, 8).a3);
  }
  ScopedEnv on("REPLAYSSM_SPEC_A3", "1");
  for (int64_t T : {2, 5, 8}) {
    const auto c = kda(256, 16, T);
    EXPECT_TRUE(c.a3 && c.mma && c.nh == 1 && c.vt == 128) << "T " << T;
    EXPECT_LE(3 * (c.smem + 1024), sm228) << "T " << T;
    EXPECT_LT(c.smem, kda(256, 16, T, F, 100 * 1024).smem) << "T " << T;  // no stages after the operands
  }
  EXPECT_TRUE(kda(24, 16, 5).a3);  // SpecThreeBlocksMatch's launches
  EXPECT_TRUE(kda(24, 8, 5).a3);
  EXPECT_FALSE(kda(256, 32, 5).a3);
  EXPECT_FALSE(kda(256, 16, 5, DType::bf16).a3);
  EXPECT_FALSE(kda(256, 16, 5, F, 200 * 1024).a3);
  EXPECT_FALSE(spec_choice(dims(DeltaFamily::gdn, 16, 64, 256, 16, 5), F, sms).a3);
  const QuantLayout l = quant_layout(ReadFormat::fp8_e4m3, 128, 128);
  EXPECT_FALSE(spec_choice(dims(DeltaFamily::kda, 32, 32, 256, 16, 5), F, sms, &l).a3);
}

// A3 on the GPU against the same steps at two blocks per SM
// (expect_spec_steps_match with REPLAYSSM_SPEC_A3=1): T = 5 at L = 8, T = 8
// at L = 16, REC16 on and off, bf16 and fp32 keys and d records, at the
// model shape.
TEST(DeltaGpu, SpecThreeBlocksMatch) {
  RSSM_SKIP_WITHOUT_GPU();
  const DType F = DType::f32, H = DType::bf16;
  const Cfg cfgs[] = {{DeltaFamily::kda, {32, 32, 128, 128}},
                      {DeltaFamily::kda, {32, 32, 128, 128}, F, H, F, H},
                      {DeltaFamily::kda, {32, 32, 128, 128}, F, F, F, F}};
  uint32_t seed = 1700;
  for (const Cfg& c : cfgs)
    for (int64_t L : {8, 16})
      for (const char* rec16 : {"1", "0"}) {
        const int64_t T = L == 8 ? 5 : 8;
        SCOPED_TRACE(name(c) + " L" + std::to_string(L) + " T" + std::to_string(T) + " REC16=" + rec16);
        ScopedEnv r16("REPLAYSSM_SPEC_REC16", rec16);
        ScopedEnv off("REPLAYSSM_SPEC_A3", "0");  // pool a at two blocks per SM (T = 8 takes A3 by default)
        expect_spec_steps_match(c, L, T, seed++, "REPLAYSSM_SPEC_A3", "1");
        if (::testing::Test::HasFailure()) return;
      }
}

// Speculative steps through the tensor-core stream (K = 128: the model
// shapes and a small head) with fp32 states, activations, gates and d
// records, against the fp64 reference at the fp32 tolerance (2e-5): the
// split (3xTF32-style) products keep fp32 accuracy. T = 2, 5, 8; L = 8, so
// rows flush (the fold's products too). Prints the largest output error.
class DeltaGpuSpecTensorCores : public GpuTestPart {};
TEST_P(DeltaGpuSpecTensorCores, Fp32Accuracy) {
  RSSM_SKIP_WITHOUT_GPU();
  const DType F = DType::f32;
  const Cfg cfgs[] = {{DeltaFamily::gdn, {16, 64, 128, 128}, F, F, F, F},
                      {DeltaFamily::gdn, {16, 32, 128, 128}, F, F, F, F, false},
                      {DeltaFamily::kda, {32, 32, 128, 128}, F, F, F, F},
                      {DeltaFamily::gdn, {1, 2, 128, 128}, F, F, F, F},
                      {DeltaFamily::kda, {1, 2, 128, 128}, F, F, F, F, false}};
  int item = 0;
  uint32_t seed = 300;
  for (const Cfg& c : cfgs)
    for (int64_t T : {2, 5, 8}) {
      const uint32_t sd = seed++;
      if (!mine(item++)) continue;
      SCOPED_TRACE(name(c) + " T" + std::to_string(T));
      double e = 0;
      replay_run(c, 3, 6, 8, T, 10, sd, c.s.HV * c.s.V * c.s.K <= (1 << 20), &e);
      std::printf("  spec %s T=%d: max output error %.3g (tol %.3g)\n", name(c).c_str(), int(T), e, tol(c));
      if (::testing::Test::HasFailure()) return;
    }
}
RSSM_GPU_TEST_PARTS(DeltaGpuSpecTensorCores);

class DeltaGpuSpeculativeWindows : public GpuTestPart {};
TEST_P(DeltaGpuSpeculativeWindows, MatchCpu) {
  RSSM_SKIP_WITHOUT_GPU();
  uint32_t seed = 100;
  int item = 0;
  for (const Cfg& c : configs()) {
    if (c.s.HV * c.s.V * c.s.K > (1 << 20) && c.state != DType::f32) continue;
    for (int64_t T : {2, 4, 5, 8}) {
      const uint32_t sd = seed++;
      if (!mine(item++)) continue;
      SCOPED_TRACE(name(c) + " T" + std::to_string(T));
      replay_run(c, 3, 6, 16, T, c.s.HV * c.s.V * c.s.K > (1 << 20) ? 5 : 12, sd, true);
      if (::testing::Test::HasFailure()) return;
    }
  }
}
RSSM_GPU_TEST_PARTS(DeltaGpuSpeculativeWindows);

// Long run: 2,000 steps at batch 2, L = 16, checkpoints compared after flushes.
void long_run(const std::vector<Cfg>& cfgs) {
  for (const Cfg& c : cfgs) {
    const DeltaFamily f = c.f;
    SCOPED_TRACE(name(c));
    std::mt19937 rng(7);
    const int64_t B = 2, S = 3, L = 16;
    Pool pool(c, S, L, 1, rng);
    Pair slot = make_slots(B, S, -1, -1, rng);
    for (int step = 0; step < 2000; ++step) {
      Inputs in(c, {B, 1}, rng);
      delta_replay_step(f, in.step(false, slot, -1), pool.view(false), Tensor{}, true, ref_exec());
      delta_replay_step(f, in.step(true, slot, -1), pool.view(true), Tensor{}, true, cuda_exec());
      sync();
      const double e = rel_err(in.o.fetch().to_f64(), in.o.h.to_f64());
      ASSERT_LE(e, tol(c)) << "o at step " << step;
      if (step > 0 && step % int(L) == 0) {  // this step flushed L records (T = 1, count 0 at start)
        SCOPED_TRACE("step " + std::to_string(step));
        pool.expect_equal(c, "after flush", true, 2);
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
}

TEST(DeltaGpu, LongRun) {
  RSSM_SKIP_WITHOUT_GPU();
  long_run({{DeltaFamily::gdn, {2, 4, 64, 64}, DType::f32, DType::bf16},
            {DeltaFamily::kda, {2, 4, 64, 64}, DType::f32, DType::bf16}});
}

// The persistent T = 1 kernel (replay1p.cuh) is taken by default from a
// batch's state of 1–1.75 MiB per SM (heuristics.h, r1p_by_default);
// REPLAYSSM_R1P=1 takes it at any batch (=2 too, falling back to the blocks
// when a capture has no scratch for it, as by default; =0 never), so these
// tests run it on small grids too: blocks with one item, with several (the
// grid is min(items, SMs)), pad rows, flushes and random ring starts.
//
// Against the fp64 reference every step: K = 128 heads (GDN G = 2, KDA),
// f32 / bf16 / f16 states, bf16 and fp32 records and activations, L = 4
// (flushes at steps 4 and 8), 3 rows with a pad row; GDN HV64 at 5 rows.
TEST(DeltaGpu, PersistentStep) {
  RSSM_SKIP_WITHOUT_GPU();
  R1PMode on("1");
  const DType F = DType::f32, H = DType::bf16;
  std::vector<Cfg> cfgs;
  for (DeltaFamily f : {DeltaFamily::gdn, DeltaFamily::kda})
    for (DType st : {DType::f32, DType::bf16, DType::f16})
      cfgs.push_back({f, {1, f == DeltaFamily::kda ? 1 : 2, 128, 128}, st});
  cfgs.push_back({DeltaFamily::gdn, {2, 4, 128, 128}, F, F, F, H});
  cfgs.push_back({DeltaFamily::kda, {2, 2, 128, 128}, H, F, F, H, false});
  uint32_t seed = 300;
  for (const Cfg& c : cfgs) {
    SCOPED_TRACE(name(c));
    replay_run(c, 3, 6, 4, 1, 10, seed++, true);
    if (::testing::Test::HasFailure()) return;
  }
  // production shapes (fp32 KDA streams with 16 consumer warps, the rest
  // with 8), with the stages the device's bandwidth gives and with two (the
  // least r1p_stage_cap keeps: an H100's count for 32 KiB sweeps)
  for (const char* nst : {"", "2"}) {
    ScopedEnv stages("REPLAYSSM_R1P_NST", nst);
    for (const Cfg& c : {Cfg{DeltaFamily::gdn, {16, 64, 128, 128}}, Cfg{DeltaFamily::gdn, {16, 64, 128, 128}, H},
                         Cfg{DeltaFamily::kda, {32, 32, 128, 128}}, Cfg{DeltaFamily::kda, {32, 32, 128, 128}, H}}) {
      SCOPED_TRACE(name(c) + " 5 rows, REPLAYSSM_R1P_NST=" + nst);
      replay_run(c, 5, 7, 4, 1, 6, seed++, false);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

// One process driving two GPUs: T = 1 blocks, the persistent step (its
// grid and stages from the current device's SM count and bandwidth, queried
// per device) and T = 5 on each device in turn, against the reference.
TEST(DeltaGpu, EachDevice) {
  RSSM_SKIP_WITHOUT_GPU();
  RSSM_ON_EACH_DEVICE([&](int dev) {
    uint32_t seed = 700 + 10 * uint32_t(dev);
    for (const Cfg& c : {Cfg{DeltaFamily::gdn, {16, 64, 128, 128}}, Cfg{DeltaFamily::kda, {32, 32, 128, 128}, DType::bf16}}) {
      SCOPED_TRACE(name(c));
      replay_run(c, 5, 7, 4, 1, 6, seed++, false);
      {
        R1PMode on("1");
        replay_run(c, 5, 7, 4, 1, 6, seed++, false);
      }
      replay_run(c, 3, 7, 8, 5, 6, seed++, false);
    }
  });
}

// The persistent kernel's launch choice (no GPU needed): by default for
// bf16 / f16 GDN states of at least 1.75 MiB per SM (HV64 from B = 116 at
// 132 SMs), bf16 / f16 KDA states of 1 MiB (32 × 128 from B = 132), fp32 KDA
// states of 1.375 MiB (from B = 91), never for fp32 GDN, and for a dual pool's
// read copy of any format from 12 items per SM; below the H200's bandwidth
// not fp32 KDA states, nor 16-bit GDN states and copies of G >= 3, and
// 16-bit GDN states of G = 2 from 10 items per SM; with
// REPLAYSSM_R1P=1 at the production shapes at any batch, not beyond L = 32,
// its stages filling what
// its result buffers and flush area leave of 227 KiB (GDN fp32 d records:
// four 32 KiB stages; bf16 d: five; KDA fp32: five of 32 KiB, its 16 consumer
// warps' 64-row sweeps; every other instance 8 consumer warps), a
// grid of at most one block per SM and per item (one item per claim);
// REPLAYSSM_R1P=0 never.
TEST(DeltaGpu, PersistentLaunchChoice) {
  const int sms = 132;
  constexpr double H100 = 3352.0, H200 = 4915.0;  // peak GB/s; 0: unreported (the H200's defaults)
  const DType F = DType::f32, H = DType::bf16;
  auto dflt = [&](DeltaFamily f, int64_t H_, int64_t HV, int64_t B, DType st) {
    return delta::cuda::replay1p_choice(t1_dims(f, H_, HV, B, 16), st, st, H, sms).use;
  };
  for (int64_t B : {64, 115, 116, 256, 512}) {
    EXPECT_EQ(dflt(DeltaFamily::gdn, 16, 64, B, H), B >= 116) << B;
    EXPECT_EQ(dflt(DeltaFamily::gdn, 16, 64, B, DType::f16), B >= 116) << B;
    EXPECT_FALSE(dflt(DeltaFamily::gdn, 16, 64, B, F)) << B;
  }
  for (int64_t B : {64, 90, 91, 131, 132, 231, 512}) {
    EXPECT_EQ(dflt(DeltaFamily::kda, 32, 32, B, H), B >= 132) << B;
    EXPECT_EQ(dflt(DeltaFamily::kda, 32, 32, B, DType::f16), B >= 132) << B;
    EXPECT_EQ(dflt(DeltaFamily::kda, 32, 32, B, F), B >= 91) << B;
  }
  // below the H200's bandwidth class (an H100, 3,352 GB/s; heuristics.h
  // r1p_by_default) fp32 KDA states and 16-bit GDN states of G >= 3 value
  // heads per key head (HV48, HV64) keep the blocks at every batch; 16-bit
  // GDN HV32 (G = 2) takes the step from 10 items per SM, 16-bit KDA keeps
  // its threshold; the H200 and an unreported bandwidth (0) take the
  // defaults above
  {
    auto at = [&](DeltaFamily f, int64_t H_, int64_t HV, int64_t B, DType st, double gbps) {
      return delta::cuda::replay1p_choice(t1_dims(f, H_, HV, B, 16), st, st, H, sms, nullptr, gbps).use;
    };
    for (int64_t B : {128, 256, 512}) {
      for (DType st : {H, DType::f16}) {
        EXPECT_FALSE(at(DeltaFamily::gdn, 16, 64, B, st, H100)) << B;
        EXPECT_FALSE(at(DeltaFamily::gdn, 16, 48, B, st, H100)) << B;
        EXPECT_EQ(at(DeltaFamily::gdn, 16, 48, B, st, H200), B >= 154) << B;  // 1.75 MiB per SM, 1.5 MiB rows
        EXPECT_TRUE(at(DeltaFamily::gdn, 16, 32, B, st, H100)) << B;  // G = 2: from 10 items per SM there
        EXPECT_EQ(at(DeltaFamily::gdn, 16, 32, B, st, H200), B >= 231) << B;  // 1 MiB rows
        EXPECT_TRUE(at(DeltaFamily::gdn, 16, 64, B, st, H200)) << B;
        EXPECT_EQ(at(DeltaFamily::kda, 32, 32, B, st, H100), B >= 132) << B;
      }
      EXPECT_FALSE(at(DeltaFamily::kda, 32, 32, B, F, H100)) << B;
      EXPECT_FALSE(at(DeltaFamily::gdn, 16, 32, B, F, H100)) << B;  // fp32 GDN: never
      EXPECT_TRUE(at(DeltaFamily::kda, 32, 32, B, F, H200)) << B;
      EXPECT_TRUE(at(DeltaFamily::kda, 32, 32, B, F, 0.0)) << B;
    }
    // HV32 (16 key heads per row) from B = 83 (10 × 132 items) below the H200's class
    for (int64_t B : {64, 82, 83, 96})
      for (DType st : {H, DType::f16}) EXPECT_EQ(at(DeltaFamily::gdn, 16, 32, B, st, H100), B >= 83) << B;
  }
  // a dual step's read copy (any format): from 12 items (row, key head) per
  // SM, GDN HV64 (16 per row) from B = 99, KDA (32 per row) from B = 50;
  // below the H200's class GDN HV64's bf16 / f16 copies keep the blocks,
  // HV32's, its fp8 / nvfp4 copies and every KDA copy take the step as above
  for (ReadFormat fmt : {ReadFormat::bf16, ReadFormat::f16, ReadFormat::fp8_e4m3, ReadFormat::nvfp4}) {
    const QuantLayout lay = quant_layout(fmt, 128, 128);
    const bool u16 = fmt == ReadFormat::bf16 || fmt == ReadFormat::f16;
    auto dual = [&](DeltaFamily f, int64_t H_, int64_t HV, int64_t B, double gbps = 0.0) {
      return delta::cuda::replay1p_choice(t1_dims(f, H_, HV, B, 16), F, F, H, sms, &lay, gbps).use;
    };
    for (int64_t B : {64, 98, 99, 256, 512}) EXPECT_EQ(dual(DeltaFamily::gdn, 16, 64, B), B >= 99) << B;
    for (int64_t B : {32, 49, 50, 64, 256}) EXPECT_EQ(dual(DeltaFamily::kda, 32, 32, B), B >= 50) << B;
    EXPECT_EQ(dual(DeltaFamily::gdn, 16, 64, 256, H100), !u16);
    EXPECT_TRUE(dual(DeltaFamily::gdn, 16, 32, 256, H100));
    EXPECT_TRUE(dual(DeltaFamily::gdn, 16, 64, 256, H200));
    EXPECT_TRUE(dual(DeltaFamily::kda, 32, 32, 256, H100));
    // a read copy streams with 8 consumer warps, an fp32 checkpoint's too
    EXPECT_EQ(delta::cuda::replay1p_choice(t1_dims(DeltaFamily::kda, 32, 32, 256, 16), F, F, H, sms, &lay).threads,
              8 * 32 + 64);
  }
  {
    R1PMode two("2");
    EXPECT_TRUE(dflt(DeltaFamily::gdn, 16, 64, 8, F));
  }
  R1PMode on("1");
  for (int64_t B : {1, 32, 64, 256, 512}) {
    const auto g = delta::cuda::replay1p_choice(t1_dims(DeltaFamily::gdn, 16, 64, B, 16), F, F, H, sms);
    EXPECT_TRUE(g.use) << B;
    EXPECT_EQ(g.nst, 4) << B;
    EXPECT_EQ(g.threads, 8 * 32 + 64) << B;  // 8 consumer warps, the loader and the producer
    EXPECT_EQ(g.grid, std::min<int64_t>(B * 16, sms)) << B;  // one item per claim
    EXPECT_LE(g.smem, 227 * 1024) << B;
  }
  EXPECT_EQ(delta::cuda::replay1p_choice(t1_dims(DeltaFamily::gdn, 16, 64, 256, 16), H, H, H, sms).nst, 5);
  const auto k = delta::cuda::replay1p_choice(t1_dims(DeltaFamily::kda, 32, 32, 256, 16), F, F, H, sms);
  EXPECT_TRUE(k.use);
  EXPECT_EQ(k.nst, 3);                     // 64-row sweeps of 32 KiB, R1P_KDA_STAGES
  EXPECT_EQ(k.threads, 16 * 32 + 64);      // fp32 KDA: 16 consumer warps
  EXPECT_EQ(delta::cuda::replay1p_choice(t1_dims(DeltaFamily::kda, 32, 32, 256, 16), H, H, H, sms).threads, 8 * 32 + 64);
  // one item per claim: a one-row batch's grid is its items (key heads)
  EXPECT_EQ(delta::cuda::replay1p_choice(t1_dims(DeltaFamily::kda, 32, 32, 1, 16), F, F, H, sms).grid, 32);
  EXPECT_EQ(delta::cuda::replay1p_choice(t1_dims(DeltaFamily::kda, 32, 32, 1, 16), H, H, H, sms).grid, 32);
  EXPECT_EQ(delta::cuda::replay1p_choice(t1_dims(DeltaFamily::gdn, 16, 64, 1, 16), H, H, H, sms).grid, 16);
  {
    const QuantLayout lay = quant_layout(ReadFormat::fp8_e4m3, 128, 128);
    EXPECT_EQ(delta::cuda::replay1p_choice(t1_dims(DeltaFamily::gdn, 16, 64, 1, 16), F, F, H, sms, &lay).grid, 16);
    EXPECT_EQ(delta::cuda::replay1p_choice(t1_dims(DeltaFamily::kda, 32, 32, 1, 16), F, F, H, sms, &lay).grid, 32);
  }
  EXPECT_LE(k.smem, 227 * 1024);
  // below the H200's bandwidth at most 76 KiB of stages (heuristics.h
  // r1p_stage_cap): on an H100 (3,352 GB/s) 32 KiB sweeps of a bf16 state keep
  // two stages, 16 KiB sweeps and fp8 copies four, nvfp4 copies their eight,
  // fp32 states as many as fit; KDA (R1P_KDA_STAGES) at most three stages
  // with four result buffers on every device, but on nvfp4 copies
  {
    auto nst = [&](DeltaFamily f, int64_t H_, int64_t HV, DType st, double gbps, const QuantLayout* lay = nullptr) {
      return delta::cuda::replay1p_choice(t1_dims(f, H_, HV, 256, 16), st, st, H, sms, lay, gbps).nst;
    };
    auto nb = [&](DeltaFamily f, int64_t H_, int64_t HV, DType st, const QuantLayout* lay = nullptr) {
      return delta::cuda::replay1p_choice(t1_dims(f, H_, HV, 256, 16), st, st, H, sms, lay, H200).nb;
    };
    EXPECT_EQ(nst(DeltaFamily::gdn, 16, 64, H, H100), 2);
    EXPECT_EQ(nst(DeltaFamily::gdn, 16, 64, F, H100), nst(DeltaFamily::gdn, 16, 64, F, H200));
    EXPECT_EQ(nst(DeltaFamily::kda, 32, 32, F, H100), 3);
    EXPECT_EQ(nst(DeltaFamily::kda, 32, 32, H, H100), 3);
    EXPECT_EQ(nst(DeltaFamily::gdn, 16, 64, H, H200), 5);
    EXPECT_EQ(nst(DeltaFamily::kda, 32, 32, F, H200), 3);
    EXPECT_EQ(nst(DeltaFamily::kda, 32, 32, H, H200), 3);
    EXPECT_EQ(nst(DeltaFamily::kda, 32, 32, H, 0.0), 3);
    EXPECT_EQ(nb(DeltaFamily::kda, 32, 32, F), 4);
    EXPECT_EQ(nb(DeltaFamily::kda, 32, 32, H), 4);
    EXPECT_EQ(nb(DeltaFamily::gdn, 16, 64, H), 6);
    const QuantLayout fp8 = quant_layout(ReadFormat::fp8_e4m3, 128, 128);
    const QuantLayout fp4 = quant_layout(ReadFormat::nvfp4, 128, 128);
    EXPECT_EQ(nst(DeltaFamily::gdn, 16, 64, F, H100, &fp8), 4);
    EXPECT_GT(nst(DeltaFamily::gdn, 16, 64, F, H200, &fp8), 4);
    EXPECT_EQ(nst(DeltaFamily::kda, 32, 32, F, H100, &fp8), 3);
    EXPECT_EQ(nst(DeltaFamily::kda, 32, 32, F, H200, &fp8), 3);
    EXPECT_EQ(nb(DeltaFamily::kda, 32, 32, F, &fp8), 4);
    EXPECT_EQ(nb(DeltaFamily::kda, 32, 32, F, &fp4), 8);
    EXPECT_GT(nst(DeltaFamily::kda, 32, 32, F, H200, &fp4), 3);
    for (DeltaFamily f : {DeltaFamily::gdn, DeltaFamily::kda}) {
      const int64_t Hh = f == DeltaFamily::gdn ? 16 : 32, HV = f == DeltaFamily::gdn ? 64 : 32;
      EXPECT_EQ(nst(f, Hh, HV, F, H100, &fp4), nst(f, Hh, HV, F, H200, &fp4));
    }
  }
  EXPECT_TRUE(delta::cuda::replay1p_choice(t1_dims(DeltaFamily::kda, 32, 32, 256, 32), F, F, H, sms).use);
  EXPECT_TRUE(delta::cuda::replay1p_choice(t1_dims(DeltaFamily::gdn, 16, 64, 256, 32), F, F, H, sms).use);
  EXPECT_FALSE(delta::cuda::replay1p_choice(t1_dims(DeltaFamily::gdn, 16, 64, 256, 64), F, F, H, sms).use);
  R1PMode off("0");
  EXPECT_FALSE(delta::cuda::replay1p_choice(t1_dims(DeltaFamily::gdn, 16, 64, 256, 16), F, F, H, sms).use);
}

// A pool and its reference twin (the same random contents), distinct slots
// for B rows (row 2 a pad row) and one token of inputs.
struct Twin {
  std::mt19937 rng, rng2;
  Pool ref, pool;
  Pair slot;
  Inputs in;
  Twin(const Cfg& c, int64_t B, int64_t S, int64_t L, uint32_t seed)
      : rng(seed), rng2(seed), ref(c, S, L, 1, rng), pool(c, S, L, 1, rng2), slot(make_slots(B, S, 2, -1, rng)),
        in(c, {B, 1}, rng) {}
};

// The persistent step's device workspace (delta_workspace_bytes: only at
// T = 1 and only when the persistent step is taken): a workspace of that
// size serves a step captured in a graph (no library buffer on a new
// stream); one byte short, misaligned or host memory is an Error naming
// 'workspace' and nothing is written (outputs, state, rings, cursors);
// capturing with no workspace on a stream the library has no buffer for is
// the same Error.
TEST(DeltaGpu, PersistentWorkspace) {
  RSSM_SKIP_WITHOUT_GPU();
  const Cfg c{DeltaFamily::gdn, {16, 64, 128, 128}};
  const int64_t B = 5, S = 7, L = 4;
  {
    R1PMode off("0");
    EXPECT_EQ(delta_workspace_bytes(c.f, SsmOp::replay_step, dshape(c), B, 1, L, cuda_exec()), 0u);
  }
  R1PMode on("1");
  const size_t need = delta_workspace_bytes(c.f, SsmOp::replay_step, dshape(c), B, 1, L, cuda_exec());
  EXPECT_GT(need, size_t(B * 16) * 4096);
  EXPECT_EQ(delta_workspace_bytes(c.f, SsmOp::replay_step, dshape(c), B, 5, L, cuda_exec()), 0u);
  EXPECT_GE(delta_workspace_bytes(c.f, SsmOp::replay_step, dshape(c), 2 * B, 1, L, cuda_exec()), need);
  Twin t(c, B, S, L, 11);
  Pool &ref = t.ref, &pool = t.pool;
  Pair& slot = t.slot;
  Inputs& in = t.in;
  void* ws = nullptr;
  RSSM_CUDA_OK(cudaMalloc(&ws, need + 64));
  std::vector<char> host(need);
  auto rejected = [&](Workspace w, const char* what) {
    SCOPED_TRACE(what);
    CapturedGraph side;  // a stream of its own, never captured
    Exec e = side.exec(cuda_exec());
    e.workspace = w;
    in.poison();
    try {
      delta_replay_step(c.f, in.step(true, slot, -1), pool.view(true), Tensor{}, true, e);
      ADD_FAILURE() << "no error";
    } catch (const Error& err) {
      EXPECT_EQ(err.argument(), "workspace") << err.what();
    }
    sync();
    EXPECT_TRUE(in.o.fetch().bytes_equal(in.o.h)) << "outputs written";
    for (auto m : {&Pool::state, &Pool::rd, &Pool::rk, &Pool::rks, &Pool::rg, &Pool::cur})
      EXPECT_TRUE((pool.*m).fetch().bytes_equal((ref.*m).h)) << "pool written";
  };
  rejected(Workspace{ws, need - 1}, "one byte short");
  rejected(Workspace{static_cast<char*>(ws) + 16, need}, "misaligned");
  rejected(Workspace{host.data(), need}, "host memory");
  {
    CapturedGraph g;  // capturing with no workspace on a new stream
    in.poison();
    RSSM_CUDA_OK(cudaStreamBeginCapture(g.stream(), cudaStreamCaptureModeThreadLocal));
    bool threw = false;
    try {
      delta_replay_step(c.f, in.step(true, slot, -1), pool.view(true), Tensor{}, true, g.exec(cuda_exec()));
    } catch (const Error& err) {
      threw = true;
      EXPECT_EQ(err.argument(), "workspace") << err.what();
    }
    cudaGraph_t graph = nullptr;
    (void)cudaStreamEndCapture(g.stream(), &graph);
    if (graph) cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    EXPECT_TRUE(threw);
  }
  // The exact size, captured: the step matches the reference.
  CapturedGraph graph;
  Exec e = graph.exec(cuda_exec());
  e.workspace = Workspace{ws, need};
  graph.capture([&] { delta_replay_step(c.f, in.step(true, slot, -1), pool.view(true), Tensor{}, true, e); });
  in.poison();
  graph.replay();
  delta_replay_step(c.f, in.step(false, slot, -1), ref.view(false), Tensor{}, true, ref_exec());
  expect_close(in.o.fetch(), in.o.h, tol(c), "o");
  for (auto m : {&Pool::state, &Pool::rd, &Pool::rk, &Pool::rks, &Pool::rg, &Pool::cur}) std::swap((pool.*m).h, (ref.*m).h);
  pool.expect_equal(c, "after the captured step");
  cudaFree(ws);
}

// The default contract (REPLAYSSM_R1P=2: the persistent step wherever it
// fits, as the default rule takes it at large batches): a step captured on
// a stream the library has no scratch for and with no Exec::workspace takes
// replay1.cuh's blocks instead of failing, and the graph's steps match the
// reference (flushes at L = 4 included); delta_workspace_bytes still
// reports the scratch that would let the capture take the persistent step.
TEST(DeltaGpu, PersistentCaptureWithoutWorkspace) {
  RSSM_SKIP_WITHOUT_GPU();
  R1PMode two("2");
  for (const Cfg& c : {Cfg{DeltaFamily::gdn, {16, 64, 128, 128}, DType::bf16}, Cfg{DeltaFamily::kda, {4, 4, 128, 128}}}) {
    SCOPED_TRACE(name(c));
    const int64_t B = 5, S = 7, L = 4;
    EXPECT_GT(delta_workspace_bytes(c.f, SsmOp::replay_step, dshape(c), B, 1, L, cuda_exec()), 0u);
    Twin t(c, B, S, L, 21);
    Pool &ref = t.ref, &pool = t.pool;
    Inputs& in = t.in;
    CapturedGraph graph;  // a new stream: no library scratch for it
    graph.capture([&] {
      delta_replay_step(c.f, in.step(true, t.slot, -1), pool.view(true), Tensor{}, true, graph.exec(cuda_exec()));
    });
    for (int step = 0; step < 6; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      in.poison();
      graph.replay();
      delta_replay_step(c.f, in.step(false, t.slot, -1), ref.view(false), Tensor{}, true, ref_exec());
      expect_close(in.o.fetch(), in.o.h, tol(c), "o");
      if (::testing::Test::HasFailure()) return;
    }
    for (auto m : {&Pool::state, &Pool::rd, &Pool::rk, &Pool::rks, &Pool::rg, &Pool::cur})
      std::swap((pool.*m).h, (ref.*m).h);
    pool.expect_equal(c, "after the captured steps");
  }
}

// 2,000 steps of the persistent kernel at batch 2 (L = 16, flushes every
// 16th step), checkpoints against the reference after each flush.
TEST(DeltaGpu, PersistentLongRun) {
  RSSM_SKIP_WITHOUT_GPU();
  R1PMode on("1");
  long_run({{DeltaFamily::gdn, {1, 2, 128, 128}, DType::f32, DType::bf16},
            {DeltaFamily::kda, {2, 2, 128, 128}, DType::f32, DType::bf16}});
}

// The persistent kernel and replay1.cuh's blocks compute the same
// arithmetic: at the production tiles (40 rows: several items per block,
// flushes at L = 4) their outputs, states and rings are the same bytes. The
// persistent step is captured once in a CUDA graph and replayed 200 times
// with new inputs in the same buffers, beside the block kernel's eager steps.
TEST(DeltaGpu, PersistentMatchesBlockKernel) {
  RSSM_SKIP_WITHOUT_GPU();
  const Cfg cfgs[] = {{DeltaFamily::gdn, {16, 64, 128, 128}},
                      {DeltaFamily::gdn, {16, 64, 128, 128}, DType::bf16},
                      {DeltaFamily::kda, {32, 32, 128, 128}},
                      {DeltaFamily::kda, {32, 32, 128, 128}, DType::bf16, DType::bf16, DType::bf16, DType::bf16}};
  uint32_t seed = 320;
  for (const Cfg& c : cfgs) {
    SCOPED_TRACE(name(c));
    const int64_t B = 40, S = 43, L = 4;
    std::mt19937 ra(seed), rb(seed);
    Pool pa(c, S, L, 1, ra), pb(c, S, L, 1, rb);  // the same contents
    std::mt19937 rng(seed + 1);
    Pair slot = make_slots(B, S, 7, -1, rng);
    Inputs in(c, {B, 1}, rng);
    CapturedGraph graph;
    void* ws = nullptr;
    {
      R1PMode on("1");
      const size_t bytes = delta_workspace_bytes(c.f, SsmOp::replay_step, dshape(c), B, 1, L, cuda_exec());
      RSSM_CUDA_OK(cudaMalloc(&ws, bytes));
      Exec e = graph.exec(cuda_exec());
      e.workspace = Workspace{ws, bytes};
      graph.capture([&] { delta_replay_step(c.f, in.step(true, slot, -1), pb.view(true), Tensor{}, true, e); });
    }
    struct Free {
      void* p;
      ~Free() { cudaFree(p); }
    } free_ws{ws};
    for (int it = 0; it < 200; ++it) {
      Inputs fresh(c, {B, 1}, rng);
      for (auto m : {&Inputs::q, &Inputs::k, &Inputs::v, &Inputs::g, &Inputs::beta}) (in.*m).d->upload((fresh.*m).h);
      in.poison();
      {
        R1PMode off("0");
        delta_replay_step(c.f, in.step(true, slot, -1), pa.view(true), Tensor{}, true, cuda_exec());
      }
      sync();
      const HostTensor oa = in.o.fetch();
      in.poison();
      graph.replay();
      sync();
      EXPECT_TRUE(in.o.fetch().bytes_equal(oa)) << "o, step " << it;
      if (it % 50 == 3 || it == 199) {
        for (auto m : {&Pool::state, &Pool::rd, &Pool::rk, &Pool::rks, &Pool::rg, &Pool::cur})
          EXPECT_TRUE((pa.*m).fetch().bytes_equal((pb.*m).fetch())) << "pool, step " << it;
      }
      if (::testing::Test::HasFailure()) return;
    }
    ++seed;
  }
}

TEST(DeltaGpu, Prefill) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(3);
  for (const Cfg& c : configs()) {
    SCOPED_TRACE(name(c));
    prefill_run(c, rng);
  }
}

// Step + commit captured once in a CUDA graph (fixed batch and buffers),
// replayed 240 times with new inputs and acceptances uploaded into the same
// device tensors; outputs and pool match the reference after every replay.
TEST(DeltaGpu, GraphReplayChangingAcceptances) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(41);
  for (const Cfg& c : {Cfg{DeltaFamily::gdn, {2, 4, 128, 128}}, Cfg{DeltaFamily::kda, {4, 4, 128, 128}},
                       Cfg{DeltaFamily::gdn, {2, 4, 128, 128}, DType::bf16, DType::bf16, DType::bf16}}) {
    SCOPED_TRACE(name(c));
    const int64_t B = 3, S = 6, T = 5, L = 16;
    Pool pool(c, S, L, T, rng);
    Pair slot = make_slots(B, S, 1, -1, rng);
    Inputs in(c, {B, T}, rng);
    delta_replay_step(c.f, in.step(false, slot, -1), pool.view(false), Tensor{}, false, ref_exec());
    delta_replay_step(c.f, in.step(true, slot, -1), pool.view(true), Tensor{}, false, cuda_exec());
    Pair acc;
    acc.make(DType::i32, {B});
    acc.h.fill(1.0);
    acc.upload();
    CapturedGraph graph;
    graph.capture([&] {
      delta_replay_step(c.f, in.step(true, slot, -1), pool.view(true), acc.dt(), false, graph.exec(cuda_exec()));
    });
    const int64_t row0 = int64_t(slot.h.get(0));
    int flushes = 0;
    for (int it = 0; it < 240; ++it) {
      in.q.h.fill_normal(rng, 0, 1);
      in.k.h.fill_normal(rng, 0, 1);
      in.v.h.fill_normal(rng, 0, 1);
      in.g.h.fill_normal(rng, 0, 1.5);
      in.beta.h.fill_normal(rng, 0, 1.5);
      in.o.h.fill_nan();
      for (Pair* p : {&in.q, &in.k, &in.v, &in.g, &in.beta, &in.o}) p->d->upload(p->h);  // same buffers
      for (int64_t b = 0; b < B; ++b) acc.h.set(b, double(1 + int64_t(rng() % T)));
      acc.d->upload(acc.h);
      const int64_t c0 = int64_t(pool.cur.h.get(row0 * 3 + 1)) + int64_t(acc.h.get(0));
      graph.replay();
      delta_replay_step(c.f, in.step(false, slot, -1), pool.view(false), acc.ht(), false, ref_exec());
      flushes += c0 + T > L;
      expect_close(in.o.fetch(), in.o.h, tol(c), "o, replay " + std::to_string(it));
      pool.expect_equal(c, "replay " + std::to_string(it));
      if (::testing::Test::HasFailure()) break;
    }
    EXPECT_GE(flushes, 20) << "the schedule must flush";
  }
}

// 1,000 speculative steps at every model shape of design §6 with T drawn from
// {2, 4, 5, 8} each step, random acceptances per row, a pad row, and a row
// leaving and a new one joining (after a prefill) every 250 steps. Oracle: the
// fast CPU backend (checked against the fp64 reference by the CPU tests);
// outputs every step, the pool after every step where row 0 flushed.
class DeltaGpuSpeculativeLongRun : public GpuTestPart {};
TEST_P(DeltaGpuSpeculativeLongRun, ModelShapes) {
  RSSM_SKIP_WITHOUT_GPU();
  Exec cpu;
  cpu.backend = Backend::cpu;
  uint32_t seed = 300;
  int item = 0;
  for (const Cfg& c : configs()) {
    if (c.s.HV < 32 || c.state != DType::f32) continue;  // the model shapes (design §6), fp32 state
    const uint32_t sd = seed++;
    if (!mine(item++)) continue;
    SCOPED_TRACE(name(c));
    std::mt19937 rng(sd);
    const int64_t L = 16, Tmax = 8, S = 5, B = 3;
    const double t = 2 * tol(c);
    Pool pool(c, S, L, Tmax, rng);
    std::vector<int64_t> rows = {0, -1, 1};
    int64_t next_slot = 2;
    std::vector<int64_t> last_T(3, 0);
    const int64_t T_choices[] = {2, 4, 5, 8};
    int flushes = 0;
    auto commit_one = [&](int b, int64_t a) {
      Pair cs, ca;
      cs.h = index_tensor({rows[size_t(b)]});
      ca.make(DType::i32, {1});
      ca.h.set(0, double(a));
      cs.upload();
      ca.upload();
      delta_commit(c.f, pool.view(false), cs.ht(), -1, ca.ht(), cpu);
      delta_commit(c.f, pool.view(true), cs.dt(), -1, ca.dt(), cuda_exec());
    };
    for (int step = 0; step < 1000; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      if (step > 0 && step % 250 == 0 && next_slot < S) {
        commit_one(0, 1 + int64_t(rng() % uint32_t(last_T[0])));
        last_T[0] = 0;
        rows[2] = next_slot++;
        last_T[2] = 0;
        const int64_t len = 1 + int64_t(rng() % 40);
        Inputs pin(c, {len}, rng);
        Pair cus, ps;
        cus.h = index_tensor({0, len});
        ps.h = index_tensor({rows[2]});
        cus.upload();
        ps.upload();
        const Pair no_initial;
        delta_prefill(c.f, pin.prefill(false, cus, ps, no_initial), pool.view(false), cpu);
        delta_prefill(c.f, pin.prefill(true, cus, ps, no_initial), pool.view(true), cuda_exec());
        sync();
        expect_close(pin.o.fetch(), pin.o.h, t, "prefill o");
      }
      const int64_t T = T_choices[rng() % 4];
      Inputs in(c, {B, T}, rng);
      Pair slot;
      slot.h = index_tensor(rows);
      slot.upload();
      Pair acc;
      acc.make(DType::i32, {B});
      for (int b = 0; b < 3; ++b)
        acc.h.set(b, double(last_T[size_t(b)] > 0 ? 1 + int64_t(rng() % uint32_t(last_T[size_t(b)])) : 1));
      acc.upload();
      const bool p0 = last_T[0] > 0, p2 = last_T[2] > 0;
      if (p0 != p2) commit_one(p0 ? 0 : 2, int64_t(acc.h.get(p0 ? 0 : 2)));  // mixed: commit alone
      const bool pass_acc = p0 && p2;
      const int64_t c0 = int64_t(pool.cur.h.get(rows[0] * 3 + 1)) + (pass_acc ? int64_t(acc.h.get(0)) : 0);
      Pair status;
      status.h = index_tensor({0});
      status.upload();
      delta_replay_step(c.f, in.step(false, slot, -1), pool.view(false), pass_acc ? acc.ht() : Tensor{}, false, cpu);
      delta_replay_step(c.f, in.step(true, slot, -1), pool.view(true), pass_acc ? acc.dt() : Tensor{}, false,
                        cuda_exec(static_cast<int32_t*>(status.dt().data)));
      sync();
      ASSERT_EQ(status.fetch().get(0), 0.0) << "device status";
      last_T[0] = last_T[2] = int32_t(T);
      const HostTensor o = in.o.fetch();
      expect_close(o, in.o.h, t, "o T=" + std::to_string(T));
      for (int64_t i = T * c.s.HV * c.s.V; i < 2 * T * c.s.HV * c.s.V; ++i)
        if (o.get(i) != 0.0) { ADD_FAILURE() << "pad row output not zero"; break; }
      if (c0 + T > L) {  // row 0 flushed: its checkpoint (the whole pool at the joins and the end)
        ++flushes;
        expect_close(slot_slice(pool.state.dt(), rows[0], true), slot_slice(pool.state.ht(), rows[0], false), t,
                     "checkpoint after flush");
      }
      if (step % 250 == 249) pool.expect_equal(c, "pool", true, 2);
      if (::testing::Test::HasFailure()) return;
    }
    EXPECT_GE(flushes, 100);
  }
}
RSSM_GPU_TEST_PARTS(DeltaGpuSpeculativeLongRun);

TEST(DeltaGpu, SlotOps) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(4);
  for (const Cfg& c : configs()) {
    SCOPED_TRACE(name(c));
    slot_ops_run(c, rng);
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(DeltaGpu, DeviceStatusBadSlot) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(5);
  const Cfg c{DeltaFamily::gdn, {2, 4, 64, 64}};
  const int64_t B = 3, S = 4;
  Pool pool(c, S, 4, 1, rng);
  Pair slot = make_slots(B, S, -1, -1, rng);
  Pair bad;
  bad.h = index_tensor({int64_t(slot.h.get(0)), S + 3, int64_t(slot.h.get(2))});
  bad.upload();
  int32_t* status = nullptr;
  RSSM_CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&status), sizeof(int32_t)));
  RSSM_CUDA_OK(cudaMemset(status, 0, sizeof(int32_t)));
  Inputs in(c, {B, 1}, rng);
  // The reference runs the good rows only (row 1 padded out); the cuda call
  // must skip row 1, set STATUS_BAD_SLOT and leave its output untouched.
  Pair ref_slot;
  ref_slot.h = index_tensor({int64_t(slot.h.get(0)), -1, int64_t(slot.h.get(2))});
  ref_slot.upload();
  delta_replay_step(c.f, in.step(false, ref_slot, -1), pool.view(false), Tensor{}, true, ref_exec());
  delta_replay_step(c.f, in.step(true, bad, -1), pool.view(true), Tensor{}, true, cuda_exec(status));
  sync();
  int32_t bits = 0;
  RSSM_CUDA_OK(cudaMemcpy(&bits, status, sizeof(bits), cudaMemcpyDeviceToHost));
  EXPECT_TRUE(bits & STATUS_BAD_SLOT) << bits;
  HostTensor o = in.o.fetch();
  const int64_t per_row = c.s.HV * c.s.V;
  for (int64_t i = 0; i < per_row; ++i) EXPECT_TRUE(std::isnan(o.get(per_row + i)));
  for (int64_t b : {0, 2})
    for (int64_t i = 0; i < per_row; ++i)
      ASSERT_NEAR(o.get(b * per_row + i), in.o.h.get(b * per_row + i), 0.05 + 0.03 * std::fabs(in.o.h.get(b * per_row + i)));
  pool.expect_equal(c, "bad slot");
  Exec e = cuda_exec(status);
  EXPECT_THROW(check_device_status(e, "delta_gpu_test"), Error);
  cudaFree(status);
}

}  // namespace
}  // namespace replayssm::test
