// Dual-precision GDN / KDA pools on the CUDA backend against the cpu backend
// run on the same inputs (design §4, §5): outputs, the copy equal to
// quant_pack of the checkpoint after every step, checkpoints untouched by
// non-flush steps, checkpoints bit-identical across read formats and close
// to the CPU's, speculative windows, pad rows, slot operations, rejected
// calls, CUDA-graph replay, and the batch-256 step time.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <initializer_list>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "delta/backend.h"
#include "delta/heuristics.h"
#include "gpu_util.h"
#include "replayssm/delta.h"
#include "replayssm/dual.h"

namespace replayssm::test {
namespace {

struct Cfg {
  DeltaFamily f;
  int64_t H, HV, K, V;
  DType state = DType::f32, act = DType::bf16;
};
bool kda(const Cfg& c) { return c.f == DeltaFamily::kda; }
std::string name(const Cfg& c) {
  return std::string(kda(c) ? "kda" : "gdn") + " H" + std::to_string(c.H) + " HV" + std::to_string(c.HV) + " K" +
         std::to_string(c.K) + " V" + std::to_string(c.V) + " state " + dtype_name(c.state) + " act " +
         dtype_name(c.act);
}
const ReadFormat FORMATS[] = {ReadFormat::bf16, ReadFormat::f16, ReadFormat::fp8_e4m3, ReadFormat::nvfp4};

// Model shapes (design §6) and odd shapes (GQA 3, V not a power of two).
std::vector<Cfg> configs() {
  std::vector<Cfg> v;
  for (int64_t HV : {32, 48, 64}) v.push_back({DeltaFamily::gdn, 16, HV, 128, 128});
  v.push_back({DeltaFamily::kda, 32, 32, 128, 128});
  v.push_back({DeltaFamily::gdn, 2, 6, 96, 40});
  v.push_back({DeltaFamily::kda, 3, 3, 64, 24, DType::f32, DType::f32});
  v.push_back({DeltaFamily::gdn, 16, 32, 128, 128, DType::bf16});
  v.push_back({DeltaFamily::kda, 32, 32, 128, 128, DType::bf16});
  v.push_back({DeltaFamily::gdn, 2, 6, 96, 40, DType::bf16});
  v.push_back({DeltaFamily::gdn, 2, 4, 128, 128, DType::f16});  // fp16 checkpoint (tensor-core fold)
  v.push_back({DeltaFamily::kda, 3, 3, 64, 24, DType::f16});     // fp16 checkpoint (CUDA-core fold)
  return v;
}

// Output tolerance (relative, vs the cpu backend's dual run): the two runs
// read copies of checkpoints that differ by fp32 summation order, so a few
// codes (nvfp4: a block scale) may round the other way; plus the act dtype.
double out_tol(const Cfg& c, ReadFormat f) {
  const double fmt = f == ReadFormat::nvfp4 ? 5e-2 : f == ReadFormat::fp8_e4m3 ? 2e-2 : 5e-3;
  return std::max(fmt, c.act == DType::bf16 ? 1e-2 : 1e-4);
}
double state_tol(const Cfg& c) { return c.state == DType::f32 ? 1e-4 : 1e-2; }

Exec cpu_exec() {
  Exec e;
  e.backend = Backend::cpu;
  return e;
}
Exec cuda_exec(int32_t* status = nullptr) {
  Exec e;
  e.backend = Backend::cuda;
  e.device_status = status;
  return e;
}
void sync() { ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess); }

// A host tensor and its device twin: its own allocation, or (after place())
// a piece of a SlotArena.
struct Pair {
  HostTensor h;
  std::unique_ptr<DeviceTensor> d;
  const SlotArena* arena = nullptr;
  int piece = -1;
  void make(DType dt, const std::vector<int64_t>& shape) { h.reset(dt, shape); }
  void place(SlotArena& a, size_t row_pad) {
    arena = &a;
    piece = a.add(h.t().dtype, std::vector<int64_t>(h.t().shape + 1, h.t().shape + h.t().ndim), row_pad);
  }
  void upload() {
    if (arena) arena->upload(piece, h);
    else d = std::make_unique<DeviceTensor>(h);
  }
  void push() {
    if (arena) arena->upload(piece, h);
    else d->upload(h);
  }
  HostTensor fetch() const { return arena ? arena->download(piece) : d->to_host(); }
  Tensor t(bool dev) const {
    if (!h.t().defined()) return Tensor{};
    if (!dev) return h.t();
    return arena ? arena->view(piece) : d->t();
  }
};

Pair index_pair(const std::vector<int64_t>& v) {
  Pair p;
  p.h = index_tensor(v);
  p.upload();
  return p;
}

// Raw-gated inputs with leading dims `lead`.
struct Inputs {
  Pair q, k, v, g, beta, A_log, dt_bias, o;
  template <class Rng>
  Inputs(const Cfg& c, const std::vector<int64_t>& lead, Rng& rng) {
    auto with = [&](std::initializer_list<int64_t> tail) {
      std::vector<int64_t> s(lead);
      s.insert(s.end(), tail);
      return s;
    };
    q.make(c.act, with({c.H, c.K}));
    k.make(c.act, with({c.H, c.K}));
    v.make(c.act, with({c.HV, c.V}));
    g.make(DType::f32, kda(c) ? with({c.HV, c.K}) : with({c.HV}));
    beta.make(DType::f32, with({c.HV}));
    o.make(c.act, with({c.HV, c.V}));
    A_log.make(DType::f32, {c.HV});
    dt_bias.make(DType::f32, kda(c) ? std::vector<int64_t>{c.HV, c.K} : std::vector<int64_t>{c.HV});
    refill(rng);
    A_log.h.fill_uniform(rng, -2, 1);
    dt_bias.h.fill_normal(rng, 0, 0.5);
    for (Pair* p : {&q, &k, &v, &g, &beta, &o, &A_log, &dt_bias}) p->upload();
  }
  template <class Rng>
  void refill(Rng& rng) {
    q.h.fill_normal(rng, 0, 1);
    k.h.fill_normal(rng, 0, 1);
    v.h.fill_normal(rng, 0, 1);
    g.h.fill_normal(rng, 0, 1.5);
    beta.h.fill_normal(rng, 0, 1.5);
    o.h.fill_nan();
  }
  void push() {
    for (Pair* p : {&q, &k, &v, &g, &beta, &o}) p->push();
  }
  DeltaStep step(bool dev, const Pair& slot) const {
    DeltaStep s;
    s.q = q.t(dev), s.k = k.t(dev), s.v = v.t(dev), s.g = g.t(dev), s.beta = beta.t(dev);
    s.A_log = A_log.t(dev), s.dt_bias = dt_bias.t(dev), s.o = o.t(dev);
    s.slot = slot.t(dev);
    s.pad_slot_id = -1;
    return s;
  }
  DeltaPrefill prefill(bool dev, const Pair& cu, const Pair& slot, const Pair* init) const {
    DeltaPrefill p;
    p.q = q.t(dev), p.k = k.t(dev), p.v = v.t(dev), p.g = g.t(dev), p.beta = beta.t(dev);
    p.A_log = A_log.t(dev), p.dt_bias = dt_bias.t(dev), p.o = o.t(dev);
    p.cu_seqlens = cu.t(dev);
    p.slot = slot.t(dev);
    p.pad_slot_id = -1;
    if (init) p.initial = init->t(dev);
    return p;
  }
};

// Bytes of slot s of a [S, ...] tensor.
std::vector<uint8_t> row_bytes(const HostTensor& t, int64_t s) {
  const size_t n = t.bytes() / size_t(t.t().shape[0]);
  const auto* p = static_cast<const uint8_t*>(t.data()) + size_t(s) * n;
  return {p, p + n};
}
std::vector<uint8_t> all_bytes(const HostTensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.data());
  return {p, p + t.bytes()};
}
std::vector<double> row_f64(const HostTensor& t, int64_t s) {
  const int64_t n = t.numel() / t.t().shape[0];
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = t.get(s * n + i);
  return v;
}

// copy[s] == quant_pack(state[s]) (host pack, bit-identical on every backend).
bool copy_is_pack(const HostTensor& copy, const HostTensor& state, int64_t s, ReadFormat f) {
  const int64_t HV = state.t().shape[1], V = state.t().shape[2], K = state.t().shape[3];
  const int64_t n = HV * V * K;
  HostTensor x(state.t().dtype, {HV, V, K});
  std::memcpy(x.data(), static_cast<const uint8_t*>(state.data()) + size_t(s * n) * dtype_size(state.t().dtype),
              x.bytes());
  HostTensor packed(DType::u8, {HV, quant_layout(f, V, K).tile_bytes});
  quant_pack(f, x, packed, cpu_exec());
  return all_bytes(packed) == row_bytes(copy, s);
}

// A dual pool on the host (cpu backend) and its device twin; in_arena: the
// device tensors are pieces of one SlotArena (slot-major, the last slots
// past 2^31 elements; the checkpoint's and copy's rows followed by row_pad
// bytes, the rings' and cursors' by ring_pad elements).
struct DualPool {
  Pair state, rd, rk, rks, rg, cur, copy, rv, rbeta;
  ReadFormat fmt;
  int64_t L;
  std::unique_ptr<SlotArena> arena;
  template <class Rng>
  DualPool(const Cfg& c, ReadFormat f, int64_t S, int64_t L_, int64_t T_max, Rng& rng, bool in_arena = false,
           size_t row_pad = 0, int64_t ring_pad = 0)
      : fmt(f), L(L_) {
    const int64_t R = L + T_max;
    state.make(c.state, {S, c.HV, c.V, c.K});
    state.h.fill_normal(rng, 0, 0.5);
    copy.make(DType::u8, {S, c.HV, quant_layout(f, c.V, c.K).tile_bytes});
    Tensor flat = Tensor::view(state.h.data(), c.state, {S * c.HV, c.V, c.K});
    Tensor cflat = Tensor::view(copy.h.data(), DType::u8, {S * c.HV, copy.h.t().shape[2]});
    quant_pack(f, flat, cflat, cpu_exec());
    rd.make(DType::f32, {S, R, c.HV, c.V});
    rk.make(c.act, {S, R, c.H, c.K});
    rks.make(DType::f32, {S, R, c.H});
    rg.make(DType::f32, kda(c) ? std::vector<int64_t>{S, R, c.HV, c.K} : std::vector<int64_t>{S, R, c.HV});
    rv.make(c.act, {S, R, c.HV, c.V});
    rbeta.make(DType::f32, {S, R, c.HV});
    cur.make(DType::i32, {S, 3});
    rd.h.fill_normal(rng, 0, 1);  // stale contents: never read
    rv.h.fill_normal(rng, 0, 1);
    std::uniform_int_distribution<int64_t> start(0, R - 1);
    for (int64_t i = 0; i < S; ++i) cur.h.set(i * 3, double(start(rng)));
    if (in_arena) {
      arena = std::make_unique<SlotArena>(S, cuda_arena_memory());
      for (Pair* p : all())
        p->place(*arena, p == &state || p == &copy ? row_pad : size_t(ring_pad) * dtype_size(p->h.t().dtype));
      arena->allocate();
    }
    for (Pair* p : all()) p->upload();
  }
  std::vector<Pair*> all() { return {&state, &rd, &rk, &rks, &rg, &cur, &copy, &rv, &rbeta}; }
  DeltaPool view(bool dev) const {
    DeltaPool p;
    p.state = state.t(dev), p.ring_d = rd.t(dev), p.ring_k = rk.t(dev), p.ring_ks = rks.t(dev);
    p.ring_g = rg.t(dev), p.cursor = cur.t(dev);
    p.read_copy = copy.t(dev), p.read_format = fmt, p.ring_v = rv.t(dev), p.ring_beta = rbeta.t(dev);
    p.L = L;
    return p;
  }
  std::vector<uint8_t> device_bytes() {
    std::vector<uint8_t> v;
    for (Pair* p : all()) {
      const auto b = all_bytes(p->fetch());
      v.insert(v.end(), b.begin(), b.end());
    }
    return v;
  }
  // GPU vs CPU after any call: cursors and raw records exact, checkpoint close,
  // both copies equal to quant_pack of their checkpoints.
  void expect_match(const Cfg& c, const std::vector<int64_t>& slots, const std::string& what) {
    const HostTensor st = state.fetch(), cp = copy.fetch();
    EXPECT_TRUE(cur.fetch().bytes_equal(cur.h)) << what << " cursor";
    EXPECT_TRUE(rk.fetch().bytes_equal(rk.h)) << what << " ring_k";
    EXPECT_TRUE(rv.fetch().bytes_equal(rv.h)) << what << " ring_v";
    EXPECT_LE(rel_err(rbeta.fetch().to_f64(), rbeta.h.to_f64()), 1e-6) << what << " ring_beta";
    EXPECT_LE(rel_err(rg.fetch().to_f64(), rg.h.to_f64()), 1e-5) << what << " ring_g";
    for (int64_t s : slots) {
      if (s < 0) continue;
      const double e = rel_err(row_f64(st, s), row_f64(state.h, s));
      EXPECT_LE(e, state_tol(c)) << what << " checkpoint of slot " << s;
      EXPECT_TRUE(copy_is_pack(cp, st, s, fmt)) << what << " gpu copy != quant_pack(gpu checkpoint), slot " << s;
    }
    if (arena) arena->expect_guards(what);
  }
};

struct RunResult {
  std::vector<uint8_t> state, records;
  int flushes = 0;
};

// `steps` steps of T tokens on B rows (row 1 a pad row; B = 3: slots 3 and
// 0 of 5, else B of B + 2 slots in a random order) of a dual pool, the same
// inputs on the cpu and cuda backends. T = 1 commits all; T > 1 commits
// random acceptances at the start of the next step.
// otol > 0: the output tolerance instead of out_tol.
// in_arena: the device pool in a SlotArena (DualPool's row_pad / ring_pad:
// `padded` gives 16 bytes and one element), row b on slot S − 1 − b (the far
// slots), row 1 a pad row.
RunResult run(const Cfg& c, ReadFormat fmt, int64_t L, int64_t T, int steps, uint32_t seed, int64_t B = 3,
              double otol = 0, bool in_arena = false, bool padded = false) {
  std::mt19937 rng(seed);
  const int64_t S = B == 3 ? 5 : B + 2;
  DualPool pool(c, fmt, S, L, T, rng, in_arena, padded ? 16 : 0, padded ? 1 : 0);
  std::vector<int64_t> slots = B == 3 ? std::vector<int64_t>{3, -1, 0} : shuffled_slots(B, S, rng);
  if (in_arena)
    for (int64_t b = 0; b < B; ++b) slots[size_t(b)] = b == 1 ? -1 : S - 1 - b;
  Pair slot = index_pair(slots);
  Inputs in(c, {B, T}, rng);
  RunResult res;
  bool pending = false;
  for (int it = 0; it < steps; ++it) {
    SCOPED_TRACE("step " + std::to_string(it));
    in.refill(rng);
    in.push();
    Pair acc;
    if (pending) {
      acc.make(DType::i32, {B});
      for (int64_t b = 0; b < B; ++b) acc.h.set(b, double(1 + int64_t(rng() % uint32_t(T))));
      acc.upload();
    }
    const bool commit_all = T == 1;
    std::vector<bool> flush(static_cast<size_t>(B), false);
    std::vector<std::vector<uint8_t>> st0(static_cast<size_t>(B)), cp0(static_cast<size_t>(B));
    const HostTensor st_before = pool.state.fetch(), cp_before = pool.copy.fetch();
    for (int64_t b = 0; b < B; ++b) {
      const int64_t s = slots[size_t(b)];
      if (s < 0) continue;
      const int64_t count = int64_t(pool.cur.h.get(s * 3 + 1)) + (pending ? int64_t(acc.h.get(b)) : 0);
      flush[size_t(b)] = count + T > L;
      st0[size_t(b)] = row_bytes(st_before, s);
      cp0[size_t(b)] = row_bytes(cp_before, s);
    }
    delta_replay_step(c.f, in.step(false, slot), pool.view(false), pending ? acc.t(false) : Tensor{}, commit_all,
                      cpu_exec());
    delta_replay_step(c.f, in.step(true, slot), pool.view(true), pending ? acc.t(true) : Tensor{}, commit_all,
                      cuda_exec());
    sync();
    pending = !commit_all;
    const HostTensor o = in.o.fetch();
    const int64_t per_row = T * c.HV * c.V;
    std::vector<double> got, want;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < per_row; ++i) {
        if (slots[size_t(b)] < 0) {
          if (o.get(b * per_row + i) != 0.0) {
            ADD_FAILURE() << "pad row output not zero";
            return res;
          }
          continue;
        }
        got.push_back(o.get(b * per_row + i));
        want.push_back(in.o.h.get(b * per_row + i));
      }
    const double e = rel_err(got, want);
    EXPECT_LE(e, otol > 0 ? otol : out_tol(c, fmt)) << "outputs vs cpu dual";
    const HostTensor st = pool.state.fetch();
    const HostTensor cp = pool.copy.fetch();
    for (int64_t b = 0; b < B; ++b) {
      const int64_t s = slots[size_t(b)];
      if (s < 0) continue;
      res.flushes += flush[size_t(b)];
      if (!flush[size_t(b)]) {
        EXPECT_EQ(row_bytes(st, s), st0[size_t(b)]) << "non-flush step wrote the checkpoint";
        EXPECT_EQ(row_bytes(cp, s), cp0[size_t(b)]) << "non-flush step wrote the copy";
      }
    }
    pool.expect_match(c, slots, "after step");
    if (::testing::Test::HasFailure()) return res;
  }
  res.state = all_bytes(pool.state.fetch());
  for (Pair* p : {&pool.rk, &pool.rks, &pool.rg, &pool.rv, &pool.rbeta, &pool.cur}) {
    const auto b = all_bytes(p->fetch());
    res.records.insert(res.records.end(), b.begin(), b.end());
  }
  return res;
}

// T = 1 runs of every read format on the same inputs (run's B rows, L,
// steps, seed), each with `flushes` flushes, their checkpoints and records
// bit-identical to the bf16-copy run's.
void formats_agree(const Cfg& c, int64_t L, int steps, uint32_t seed, int64_t B, int flushes) {
  RunResult base;
  for (ReadFormat f : FORMATS) {
    SCOPED_TRACE(read_format_name(f));
    const RunResult r = run(c, f, L, 1, steps, seed, B);
    if (::testing::Test::HasFailure()) return;
    EXPECT_EQ(r.flushes, flushes);
    if (f == ReadFormat::bf16) {
      base = r;
      continue;
    }
    EXPECT_TRUE(r.state == base.state) << "checkpoint bytes differ from the bf16-copy run";
    EXPECT_TRUE(r.records == base.records) << "records differ from the bf16-copy run";
  }
}

// (a)-(d), T = 1: outputs and checkpoints vs cpu, the copy invariant,
// non-flush steps write nothing, checkpoints bit-identical across formats.
TEST(DualDeltaGpu, DecodeStepsMatchCpuAndCheckpointIndependentOfFormat) {
  RSSM_SKIP_WITHOUT_GPU();
  uint32_t seed = 1;
  for (const Cfg& c : configs()) {
    SCOPED_TRACE(name(c));
    formats_agree(c, 4, 11, seed++, 3, 2 * 2);  // L = 4: flushes at steps 4 and 8
    if (::testing::Test::HasFailure()) return;
  }
}

// T = 1 at 40 rows, where the launcher takes its production tiles (GDN: a
// whole key head of 4 value heads per block; KDA: whole heads), so the
// fp8 / nvfp4 copies stream by bulk copies of whole head tiles (the batch-3
// runs above take 32- or 64-row tiles of one head). L = 4: rows flush at
// steps 4 and 8.
TEST(DualDeltaGpu, ProductionTiles) {
  RSSM_SKIP_WITHOUT_GPU();
  uint32_t seed = 900;
  for (const Cfg& c : {Cfg{DeltaFamily::gdn, 16, 64, 128, 128}, Cfg{DeltaFamily::kda, 32, 32, 128, 128}})
    for (ReadFormat f : {ReadFormat::fp8_e4m3, ReadFormat::nvfp4}) {
      SCOPED_TRACE(name(c) + " " + read_format_name(f) + " 40 rows");
      const RunResult r = run(c, f, 4, 1, 9, seed++, 40);
      if (::testing::Test::HasFailure()) return;
      EXPECT_EQ(r.flushes, 2 * 39);
    }
}

// The device pool as pieces of one SlotArena (slot strides of gigabytes,
// the last slots past 2^31 elements of every tensor, read copy included),
// its rows on the far slots, every other item with padded rows (16 bytes
// after the checkpoint's and copy's rows, one element after the rings':
// strides larger than dense, odd ones for the rings): T = 1 at batch 3 and 40 (block and
// production tiles, the fold and pack of flushing rows), the persistent
// step, T = 5 windows; every step against the cpu backend as run() checks
// it, and the guard bands and row padding untouched.
class DualDeltaGpuArena : public GpuTestPart {};
TEST_P(DualDeltaGpuArena, Pools) {
  RSSM_SKIP_WITHOUT_GPU();
  uint32_t seed = 930;
  int item = 0;
  for (const Cfg& c : {Cfg{DeltaFamily::gdn, 16, 64, 128, 128}, Cfg{DeltaFamily::kda, 32, 32, 128, 128}})
    for (ReadFormat f : {ReadFormat::fp8_e4m3, ReadFormat::nvfp4, ReadFormat::bf16}) {
      seed += 4;
      const bool pad = item % 2 == 1;  // padded rows: 16 bytes (checkpoint, copy), one element (rings)
      if (!mine(item++)) continue;
      SCOPED_TRACE(name(c) + " " + read_format_name(f) + (pad ? " padded rows" : ""));
      for (int64_t B : {3, 40}) {
        SCOPED_TRACE(std::to_string(B) + " rows");
        const RunResult r = run(c, f, 4, 1, 6, seed + uint32_t(B), B, 0, true, pad);
        if (::testing::Test::HasFailure()) return;
        EXPECT_EQ(r.flushes, B - 1);
      }
      {
        SCOPED_TRACE("persistent");
        R1PMode on("1");
        run(c, f, 4, 1, 6, seed + 1, 12, 0, true, pad);
        if (::testing::Test::HasFailure()) return;
      }
      SCOPED_TRACE("T5");
      const RunResult r = run(c, f, 16, 5, 8, seed + 2, 3, 0, true, pad);
      if (::testing::Test::HasFailure()) return;
      EXPECT_GT(r.flushes, 0);
    }
}
RSSM_GPU_TEST_PARTS(DualDeltaGpuArena);

// Before the first flush both backends read the same copy bytes (packed on
// the host), so with fp32 activations the outputs agree to fp32 rounding:
// the precision of the packed-copy streams' products (the fp8 stream's
// GDN tensor-core GEMV: hi + lo f16 parts of q̂ and k̂, replay1.cuh), which
// the format tolerance of the other tests would not see. K = 128 at the
// model shapes, at V = 64 (value tiles of 32 rows at this batch: sweeps of
// fewer rows than the warps' tiles) and at V = 40 (split into unequal value
// tiles: the staged stream; the bulk stream once took them, expected the
// full stage's bytes for the shorter tile and hung), 8 steps at L = 8:
// histories of 0 to 7 records, no flush.
const Cfg COPY_PRECISION_CFGS[] = {Cfg{DeltaFamily::gdn, 16, 64, 128, 128, DType::f32, DType::f32},
                                   Cfg{DeltaFamily::kda, 32, 32, 128, 128, DType::f32, DType::f32},
                                   Cfg{DeltaFamily::gdn, 2, 6, 128, 64, DType::f32, DType::f32},
                                   Cfg{DeltaFamily::gdn, 2, 6, 128, 40, DType::f32, DType::f32}};
TEST(DualDeltaGpu, CopyReadsMatchCpuBeforeAFlush) {
  RSSM_SKIP_WITHOUT_GPU();
  uint32_t seed = 940;
  for (const Cfg& c : COPY_PRECISION_CFGS)
    for (ReadFormat f : {ReadFormat::fp8_e4m3, ReadFormat::nvfp4}) {
      SCOPED_TRACE(name(c) + " " + read_format_name(f) + " no flush");
      const RunResult r = run(c, f, 8, 1, 8, seed++, 3, 2e-6);
      if (::testing::Test::HasFailure()) return;
      EXPECT_EQ(r.flushes, 0);
    }
}

// The persistent T = 1 step (replay1p.cuh) on the read copy, forced by
// REPLAYSSM_R1P=1 (its launch choice checked first, so a plan that declined
// it fails here instead of testing replay1.cuh): the preparation kernel is
// the dual fold's programmatic dependent and a flushing row's item waits for
// the fold's grid; bf16 / f16 copies stream as 16-bit states, fp8 / nvfp4
// copies a sweep per value head (codes, block scales, nvfp4 tensor scale),
// whole (V = 128), half (V = 64) and a partial warp tile (V = 40). 40 rows at
// L = 4 (flushes at steps 4 and 8; row 1 a pad row), checkpoints
// bit-identical across the copy's formats; then fp32 activations before a
// flush, to the fp32 rounding of the products (as CopyReadsMatchCpuBeforeAFlush).
bool persistent_taken(const Cfg& c, ReadFormat f, int64_t B, int64_t L) {
  delta::Dims d;
  d.family = c.f;
  d.B = B, d.T = 1, d.H = c.H, d.HV = c.HV, d.K = c.K, d.V = c.V, d.S = B + 2, d.L = L, d.R = L + 1;
  const QuantLayout lay = quant_layout(f, c.V, c.K);
  return delta::cuda::replay1p_choice(d, c.state, DType::f32, c.act, 132, &lay).use;
}
// In GPU_TEST_PARTS parts (the whole took ~2 minutes): item i < 3 runs
// formats_agree on the i-th 40-row configuration, item 3 the no-flush
// precision runs.
class DualDeltaGpuPersistentStep : public GpuTestPart {};
TEST_P(DualDeltaGpuPersistentStep, MatchCpu) {
  RSSM_SKIP_WITHOUT_GPU();
  R1PMode on("1");
  uint32_t seed = 980;
  int item = 0;
  for (const Cfg& c : {Cfg{DeltaFamily::gdn, 16, 64, 128, 128}, Cfg{DeltaFamily::kda, 32, 32, 128, 128},
                       Cfg{DeltaFamily::gdn, 16, 32, 128, 128, DType::bf16}}) {
    const uint32_t sd = seed++;
    if (!mine(item++)) continue;
    SCOPED_TRACE(name(c) + " 40 rows");
    for (ReadFormat f : FORMATS)
      ASSERT_TRUE(persistent_taken(c, f, 40, 4)) << read_format_name(f) << ": the persistent step was not chosen";
    formats_agree(c, 4, 9, sd, 40, 2 * 39);
    if (::testing::Test::HasFailure()) return;
  }
  if (!mine(item)) return;
  for (const Cfg& c : COPY_PRECISION_CFGS)
    for (ReadFormat f : {ReadFormat::fp8_e4m3, ReadFormat::nvfp4}) {
      SCOPED_TRACE(name(c) + " " + read_format_name(f) + " no flush");
      ASSERT_TRUE(persistent_taken(c, f, 3, 8)) << "the persistent step was not chosen";
      const RunResult r = run(c, f, 8, 1, 8, seed++, 3, 2e-6);
      if (::testing::Test::HasFailure()) return;
      EXPECT_EQ(r.flushes, 0);
    }
}
RSSM_GPU_TEST_PARTS(DualDeltaGpuPersistentStep);

// L = 32 at the production tiles: the packed-copy stream of a whole GDN key
// head holds 16 of the d records in shared memory (heuristics.h,
// replay1_ld); histories past them come from global memory. 34 rows, 35
// steps (a flush at step 32).
TEST(DualDeltaGpu, LongRingProductionTiles) {
  RSSM_SKIP_WITHOUT_GPU();
  const Cfg c{DeltaFamily::gdn, 16, 64, 128, 128};
  SCOPED_TRACE(name(c) + " fp8 34 rows L32");
  const RunResult r = run(c, ReadFormat::fp8_e4m3, 32, 1, 35, 960, 34);
  EXPECT_EQ(r.flushes, 33);
}

// The same bulk stream on small heads (one key head, GDN two value heads),
// fp8 / nvfp4 copies, 32-row tiles at batch 3: small enough for
// compute-sanitizer (scripts/gpu_check.sh SANITIZE_FILTER).
TEST(DualDeltaGpu, BulkCopySmall) {
  RSSM_SKIP_WITHOUT_GPU();
  uint32_t seed = 950;
  for (const Cfg& c : {Cfg{DeltaFamily::gdn, 1, 2, 128, 128}, Cfg{DeltaFamily::kda, 1, 1, 128, 128}})
    for (ReadFormat f : {ReadFormat::fp8_e4m3, ReadFormat::nvfp4}) {
      SCOPED_TRACE(name(c) + " " + read_format_name(f));
      const RunResult r = run(c, f, 4, 1, 6, seed++);
      if (::testing::Test::HasFailure()) return;
      EXPECT_EQ(r.flushes, 2);
    }
}

// Rings longer than the fold's triangular chunk (16 records): the GPU fold
// runs chunk after chunk, on tensor cores at K = 128 while its shared memory
// allows two blocks per SM (L = 18: 16 + 2), on CUDA cores otherwise (K = 96,
// K = 64, and L = 37), T = 1 and a speculative T = 3, against the cpu
// backend's sequential fold.
TEST(DualDeltaGpu, LongRingsFoldInChunks) {
  RSSM_SKIP_WITHOUT_GPU();
  uint32_t seed = 700;
  for (const Cfg& c : {Cfg{DeltaFamily::gdn, 16, 32, 128, 128}, Cfg{DeltaFamily::kda, 4, 4, 128, 128, DType::f32, DType::f32},
                       Cfg{DeltaFamily::kda, 3, 3, 64, 24, DType::f32, DType::f32},
                       Cfg{DeltaFamily::gdn, 2, 6, 96, 40, DType::bf16}}) {
    for (const auto& [L, T, steps] : {std::tuple<int64_t, int64_t, int>{18, 1, 40}, {37, 3, 40}}) {
      SCOPED_TRACE(name(c) + " L" + std::to_string(L) + " T" + std::to_string(T));
      const RunResult r = run(c, ReadFormat::fp8_e4m3, L, T, steps, seed++);
      if (::testing::Test::HasFailure()) return;
      EXPECT_GT(r.flushes, 0);
    }
  }
}

// The GDN tensor-core fold makes a key head's keys, their split operands and
// their Gram once per block and keeps them for the block's next value heads
// of that key head (dual_fold_mma.cuh), so the heads per block decide what
// is reused: forced by REPLAYSSM_FOLD_HPB to 1 (nothing), 2 and 4 (aligned
// parts / a whole key head of G = 4), 3 (blocks across key heads: the keys
// made again at each key head's first value head) and 8 (two key heads),
// GDN HV64 at batch 3 (a pad row), L = 4 (all formats, checkpoints
// bit-identical across them) and L = 18 (two chunks per fold), against the
// cpu backend.
struct FoldHpb : ScopedEnv {
  explicit FoldHpb(int h) : ScopedEnv("REPLAYSSM_FOLD_HPB", std::to_string(h)) {}
};
// c's dual steps with the fold's heads per block forced to each of hpbs: at
// batch 3, L = 4 (all formats, checkpoints bit-identical across them) and
// L = 18, against the cpu backend.
void fold_heads_per_block_cases(const Cfg& c, std::initializer_list<int> hpbs, uint32_t seed) {
  for (int hpb : hpbs) {
    FoldHpb forced(hpb);
    SCOPED_TRACE(name(c) + " heads per fold block " + std::to_string(hpb));
    formats_agree(c, 4, 9, seed++, 3, 2 * 2);
    if (::testing::Test::HasFailure()) return;
    const RunResult r = run(c, ReadFormat::fp8_e4m3, 18, 1, 20, seed++);
    if (::testing::Test::HasFailure()) return;
    EXPECT_EQ(r.flushes, 2);
  }
}
TEST(DualDeltaGpu, FoldKeysSharedAcrossValueHeads) {
  RSSM_SKIP_WITHOUT_GPU();
  fold_heads_per_block_cases(Cfg{DeltaFamily::gdn, 16, 64, 128, 128}, {1, 2, 3, 4, 8}, 1200);
}

// KDA's tensor-core fold has no keys to share, but a block still loops over
// its value heads (the launcher's rule gives several from B = 198 at 132
// SMs, which no other test reaches): forced to 1, 2 and 3 heads per block
// (3 of 8 heads: a short last block), KDA 8 heads at batch 3 (a pad row),
// L = 4 (all formats, checkpoints bit-identical across them) and L = 18
// (two chunks per fold), against the cpu backend.
TEST(DualDeltaGpu, KdaFoldHeadsPerBlockMatchCpu) {
  RSSM_SKIP_WITHOUT_GPU();
  fold_heads_per_block_cases(Cfg{DeltaFamily::kda, 8, 8, 128, 128}, {1, 2, 3}, 1300);
}

// The fold's heads per block (no GPU needed): HV·rows / (32 per SM), and
// for the GDN tensor-core fold whole key heads (a multiple of G) or an
// aligned part of one (a divisor of G). 132 SMs: GDN HV64 (G = 4) 2 at
// B = 256 (3.9 → 2), 4 at B = 512 (7.8 → 4), 1 below B = 66, 12 at
// B = 1024; GDN HV32 (G = 2) 1 at B = 256 (1.9); KDA (no sharing) 3 at
// B = 512, and on tensor cores 2 from B = 198 (ratio 1.5).
TEST(DualDeltaGpu, FoldHeadsPerBlockRule) {
  using delta::cuda_impl::dual_fold_heads_per_block;
  for (const auto& [B, want] : {std::pair<int64_t, int>{40, 1}, {66, 1}, {132, 2}, {256, 2}, {512, 4}, {1024, 12}})
    EXPECT_EQ(dual_fold_heads_per_block(64, 4, B, 132, true), want) << B;
  EXPECT_EQ(dual_fold_heads_per_block(64, 4, 256, 132, false), 3);
  EXPECT_EQ(dual_fold_heads_per_block(32, 2, 256, 132, true), 1);
  EXPECT_EQ(dual_fold_heads_per_block(32, 2, 512, 132, true), 2);
  EXPECT_EQ(dual_fold_heads_per_block(32, 1, 512, 132, true), 3);
  // KDA's tensor-core fold: 2 for a ratio of 1.5 to 2 (B = 198 … 263 of 32
  // heads at 132 SMs), the plain rule outside it; its CUDA-core fold keeps 1.
  for (const auto& [B, want] : {std::pair<int64_t, int>{64, 1}, {197, 1}, {198, 2}, {256, 2}, {263, 2}, {264, 2},
                                {396, 3}, {512, 3}})
    EXPECT_EQ(dual_fold_heads_per_block(32, 1, B, 132, false, true), want) << B;
  EXPECT_EQ(dual_fold_heads_per_block(32, 1, 256, 132, false, false), 1);
  EXPECT_EQ(dual_fold_heads_per_block(1, 1, 256, 132, false, true), 1);
}

// (e) speculative windows with random acceptances.
class DualDeltaGpuSpeculativeWindows : public GpuTestPart {};
TEST_P(DualDeltaGpuSpeculativeWindows, MatchCpu) {
  RSSM_SKIP_WITHOUT_GPU();
  uint32_t seed = 100;
  int item = 0;
  for (const Cfg& c : configs()) {
    const bool big = c.HV * c.V * c.K > (1 << 20);
    if (big && (c.state != DType::f32 || c.HV > 32)) continue;  // model shapes: GDN HV32, KDA 32
    for (int64_t T : {2, 5, 8}) {
      if (!mine(item++)) {
        ++seed;
        continue;
      }
      SCOPED_TRACE(name(c) + " T" + std::to_string(T));
      RunResult base;
      for (ReadFormat f : FORMATS) {
        SCOPED_TRACE(read_format_name(f));
        const RunResult r = run(c, f, 16, T, int(32 / T) + 4, seed);
        if (::testing::Test::HasFailure()) return;
        EXPECT_GT(r.flushes, 0);
        if (f == ReadFormat::bf16) base = r;
        else EXPECT_TRUE(r.state == base.state) << "checkpoint bytes differ from the bf16-copy run";
      }
      ++seed;
    }
  }
}
RSSM_GPU_TEST_PARTS(DualDeltaGpuSpeculativeWindows);

// (f) prefill (with and without initial, an empty prompt, a pad row),
// materialize (pad entry zero), flush, copy, reset, then a step.
TEST(DualDeltaGpu, SlotOperationsMatchCpu) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(7);
  for (const Cfg& c : {configs()[0], configs()[3], configs()[4], configs()[7]})
    for (ReadFormat f : FORMATS) {
      SCOPED_TRACE(name(c) + " " + read_format_name(f));
      const int64_t S = 6, L = 8, T = 3, B = 4;
      DualPool pool(c, f, S, L, T, rng);
      const std::vector<int64_t> rows = {4, 1, 0, 5};
      Pair slot = index_pair(rows);
      for (int i = 0; i < 2; ++i) {  // committed records plus a pending window
        Inputs in(c, {B, T}, rng);
        delta_replay_step(c.f, in.step(false, slot), pool.view(false), Tensor{}, i == 0, cpu_exec());
        delta_replay_step(c.f, in.step(true, slot), pool.view(true), Tensor{}, i == 0, cuda_exec());
      }
      sync();
      pool.expect_match(c, rows, "steps");
      // materialize (pending ignored; from the high-precision checkpoint)
      Pair ms = index_pair({1, -1, 5});
      for (DType odt : {DType::f32, DType::f64}) {
        Pair out;
        out.make(odt, {3, c.HV, c.V, c.K});
        out.h.fill_nan();
        out.upload();
        delta_materialize(c.f, pool.view(false), ms.t(false), -1, out.t(false), cpu_exec());
        delta_materialize(c.f, pool.view(true), ms.t(true), -1, out.t(true), cuda_exec());
        sync();
        const HostTensor got = out.fetch();
        EXPECT_LE(rel_err(got.to_f64(), out.h.to_f64()), state_tol(c)) << "materialize " << dtype_name(odt);
        for (double x : row_f64(got, 1)) ASSERT_EQ(x, 0.0) << "materialize pad entry";
      }
      // commit random counts, flush two rows and check they equal materialize
      Pair acc;
      acc.make(DType::i64, {B});
      for (int64_t b = 0; b < B; ++b) acc.h.set(b, double(1 + int64_t(rng() % T)));
      acc.upload();
      delta_commit(c.f, pool.view(false), slot.t(false), -1, acc.t(false), cpu_exec());
      delta_commit(c.f, pool.view(true), slot.t(true), -1, acc.t(true), cuda_exec());
      Pair fs = index_pair({4, -1, 0});
      Pair mat;
      mat.make(c.state, {3, c.HV, c.V, c.K});
      mat.upload();
      delta_materialize(c.f, pool.view(true), fs.t(true), -1, mat.t(true), cuda_exec());
      delta_flush(c.f, pool.view(false), fs.t(false), -1, cpu_exec());
      delta_flush(c.f, pool.view(true), fs.t(true), -1, cuda_exec());
      sync();
      pool.expect_match(c, rows, "flush");
      {
        const HostTensor m = mat.fetch(), st = pool.state.fetch();
        EXPECT_EQ(row_bytes(m, 0), row_bytes(st, 4)) << "flush != materialize (same dtype)";
        EXPECT_EQ(row_bytes(m, 2), row_bytes(st, 0)) << "flush != materialize (same dtype)";
      }
      // prefill: slot 1 continues from its records (initial), slot 2 starts
      // fresh, an empty prompt, a pad row
      {
        const std::vector<int64_t> cu = {0, 5, 5, 12, 12};
        Inputs pin(c, {cu.back()}, rng);
        Pair cus = index_pair(cu), ps = index_pair({1, 3, 2, -1}), init = index_pair({1, 0, 0, 0});
        delta_prefill(c.f, pin.prefill(false, cus, ps, &init), pool.view(false), cpu_exec());
        delta_prefill(c.f, pin.prefill(true, cus, ps, &init), pool.view(true), cuda_exec());
        sync();
        EXPECT_LE(rel_err(pin.o.fetch().to_f64(), pin.o.h.to_f64()), std::max(state_tol(c), c.act == DType::bf16 ? 1e-2 : 1e-4))
            << "prefill outputs";
        pool.expect_match(c, {1, 3, 2}, "prefill");
      }
      // copy and reset
      Pair src = index_pair({4, 0}), dst = index_pair({1, 3});
      delta_copy_slot(c.f, pool.view(false), src.t(false), dst.t(false), -1, cpu_exec());
      delta_copy_slot(c.f, pool.view(true), src.t(true), dst.t(true), -1, cuda_exec());
      sync();
      {
        const HostTensor cp = pool.copy.fetch(), rv = pool.rv.fetch();
        EXPECT_EQ(row_bytes(cp, 1), row_bytes(cp, 4));
        EXPECT_EQ(row_bytes(rv, 3), row_bytes(rv, 0));
      }
      Pair rs = index_pair({5, -1});
      delta_reset_slot(c.f, pool.view(false), rs.t(false), -1, cpu_exec());
      delta_reset_slot(c.f, pool.view(true), rs.t(true), -1, cuda_exec());
      sync();
      pool.expect_match(c, {0, 1, 2, 3, 4, 5}, "copy/reset");
      // one step on every slot after the slot operations
      Pair all = index_pair({0, 1, 2, 3});
      Inputs in(c, {B, 1}, rng);
      Pair acc2;
      acc2.make(DType::i32, {B});
      acc2.h.fill(1);
      acc2.upload();
      // slots 0, 3 hold no pending records after copy (0 committed) - commit_all path
      delta_replay_step(c.f, in.step(false, all), pool.view(false), Tensor{}, true, cpu_exec());
      delta_replay_step(c.f, in.step(true, all), pool.view(true), Tensor{}, true, cuda_exec());
      sync();
      EXPECT_LE(rel_err(in.o.fetch().to_f64(), in.o.h.to_f64()), out_tol(c, f)) << "step after slot ops";
      pool.expect_match(c, {0, 1, 2, 3}, "step after slot ops");
      if (::testing::Test::HasFailure()) return;
    }
}

// (g) rejected calls name the argument and leave every pool byte unchanged.
TEST(DualDeltaGpu, RejectedCallsWriteNothing) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(9);
  const Cfg c{DeltaFamily::gdn, 2, 4, 64, 32};
  DualPool pool(c, ReadFormat::fp8_e4m3, 4, 4, 2, rng);
  Pair slot = index_pair({0, 2});
  Inputs in(c, {2, 2}, rng);
  const auto bytes0 = pool.device_bytes();
  auto expect_error = [&](const char* arg, auto&& fn) {
    try {
      fn();
      ADD_FAILURE() << "no error for " << arg;
    } catch (const Error& e) {
      EXPECT_EQ(e.argument(), arg) << e.what();
    }
    sync();
    EXPECT_TRUE(pool.device_bytes() == bytes0) << arg;
  };
  auto step = [&](const DeltaPool& p) { delta_replay_step(c.f, in.step(true, slot), p, Tensor{}, false, cuda_exec()); };
  Pair wrong;
  wrong.make(DType::u8, {4, c.HV, quant_layout(ReadFormat::bf16, c.V, c.K).tile_bytes});
  wrong.upload();
  {
    DeltaPool p = pool.view(true);
    p.read_copy = wrong.t(true);
    expect_error("pool.read_copy", [&] { step(p); });
  }
  {
    DeltaPool p = pool.view(true);
    p.read_format = ReadFormat::nvfp4;
    expect_error("pool.read_copy", [&] { step(p); });
  }
  {
    DeltaPool p = pool.view(true);
    p.read_copy = pool.copy.t(false);  // host tensor
    expect_error("pool.read_copy", [&] { step(p); });
  }
  {
    DeltaPool p = pool.view(true);
    p.ring_beta = Tensor{};
    expect_error("pool.ring_beta", [&] { step(p); });
  }
  {
    Pair rv32;
    rv32.make(DType::f32, {4, pool.rv.h.t().shape[1], c.HV, c.V});
    rv32.upload();
    DeltaPool p = pool.view(true);
    p.ring_v = rv32.t(true);
    expect_error("pool.ring_v", [&] { step(p); });
  }
  {
    Inputs bad(c, {2, 2}, rng);
    bad.o.make(c.act, {2, 2, c.HV, c.V + 1});
    bad.o.upload();
    expect_error("o", [&] { delta_replay_step(c.f, bad.step(true, slot), pool.view(true), Tensor{}, false, cuda_exec()); });
  }
  {
    DeltaPool p = pool.view(true);
    p.ring_v = Tensor{};
    p.ring_beta = Tensor{};
    expect_error("pool.ring_v", [&] { delta_flush(c.f, p, slot.t(true), -1, cuda_exec()); });
  }
  {  // out-of-range accepted counts: reported on the device, the rows untouched
    Pair st;
    st.h = index_tensor({0});
    st.upload();
    delta_replay_step(c.f, in.step(true, slot), pool.view(true), Tensor{}, false, cuda_exec());
    sync();
    const auto b1 = pool.device_bytes();
    Pair acc = index_pair({0, 3});
    delta_replay_step(c.f, in.step(true, slot), pool.view(true), acc.t(true), false,
                      cuda_exec(static_cast<int32_t*>(st.d->t().data)));
    sync();
    EXPECT_TRUE(int32_t(st.fetch().get(0)) & STATUS_BAD_ACCEPTED);
    // outputs of the rejected rows stay as they were (NaN poison); the pool is unchanged
    const auto b2 = pool.device_bytes();
    EXPECT_TRUE(b2 == b1) << "rows with bad accepted counts were written";
  }
}

// (h) step + commit captured once in a CUDA graph, replayed with new inputs
// and acceptances uploaded into the same buffers; every replay matches cpu.
TEST(DualDeltaGpu, GraphReplayMatchesCpu) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(41);
  for (const Cfg& c : {Cfg{DeltaFamily::gdn, 2, 4, 128, 128}, Cfg{DeltaFamily::kda, 4, 4, 128, 128}})
    for (ReadFormat f : {ReadFormat::bf16, ReadFormat::fp8_e4m3, ReadFormat::nvfp4}) {
      SCOPED_TRACE(name(c) + " " + read_format_name(f));
      const int64_t B = 3, S = 6, T = 5, L = 16;
      DualPool pool(c, f, S, L, T, rng);
      const std::vector<int64_t> rows = {2, -1, 4};
      Pair slot = index_pair(rows);
      Inputs in(c, {B, T}, rng);
      delta_replay_step(c.f, in.step(false, slot), pool.view(false), Tensor{}, false, cpu_exec());
      delta_replay_step(c.f, in.step(true, slot), pool.view(true), Tensor{}, false, cuda_exec());
      Pair acc;
      acc.make(DType::i32, {B});
      acc.h.fill(1);
      acc.upload();
      CapturedGraph graph;
      graph.capture([&] {
        delta_replay_step(c.f, in.step(true, slot), pool.view(true), acc.t(true), false, graph.exec(cuda_exec()));
      });
      int flushes = 0;
      for (int it = 0; it < 60; ++it) {
        in.refill(rng);
        in.push();
        for (int64_t b = 0; b < B; ++b) acc.h.set(b, double(1 + int64_t(rng() % T)));
        acc.push();
        const int64_t c0 = int64_t(pool.cur.h.get(rows[0] * 3 + 1)) + int64_t(acc.h.get(0));
        graph.replay();
        delta_replay_step(c.f, in.step(false, slot), pool.view(false), acc.t(false), false, cpu_exec());
        flushes += c0 + T > L;
        EXPECT_LE(rel_err(in.o.fetch().to_f64(), in.o.h.to_f64()), out_tol(c, f)) << "o, replay " << it;
        pool.expect_match(c, rows, "replay " + std::to_string(it));
        if (::testing::Test::HasFailure()) break;
      }
      EXPECT_GE(flushes, 10) << "the schedule must flush";
      if (::testing::Test::HasFailure()) return;
    }
}

// T = 1 under graph capture: the fold, the replay launched as its
// programmatic dependent and the cursor kernel captured once and replayed
// with fresh inputs; the production tiles (40 rows, GDN HV64: the
// packed-copy bulk stream) with L = 4; staggered rows, so each replay mixes
// flushing and other rows; a pad row; outputs, checkpoints, copies and
// records vs cpu after every replay. With `ws` the capture passes
// Exec::workspace of delta_workspace_bytes' size (exactly) and the caller
// forces the persistent step (REPLAYSSM_R1P=1: under capture without scratch
// an error, never the blocks), so the workspace is what the captured
// preparation and stream use.
const Cfg GRAPH_T1_CFG{DeltaFamily::gdn, 16, 64, 128, 128};
void graph_replay_t1(ReadFormat f, bool ws, std::mt19937& rng) {
  const Cfg& c = GRAPH_T1_CFG;
  const int64_t B = 40, S = 42, L = 4;
  DualPool pool(c, f, S, L, 1, rng);
  std::vector<int64_t> rows(static_cast<size_t>(B));
  std::iota(rows.begin(), rows.end(), 1);
  rows[7] = -1;  // a pad row
  Pair slot = index_pair(rows);
  // stagger the rows: slot r takes r % L uncaptured steps first, so every
  // replay below mixes flushing and other rows
  for (int64_t j = 1; j < L; ++j) {
    std::vector<int64_t> sub;
    for (int64_t r : rows)
      if (r >= 0 && r % L >= j) sub.push_back(r);
    Pair ss = index_pair(sub);
    Inputs pin(c, {int64_t(sub.size()), 1}, rng);
    delta_replay_step(c.f, pin.step(false, ss), pool.view(false), Tensor{}, true, cpu_exec());
    delta_replay_step(c.f, pin.step(true, ss), pool.view(true), Tensor{}, true, cuda_exec());
  }
  Inputs in(c, {B, 1}, rng);
  CapturedGraph graph;
  Exec e = graph.exec(cuda_exec());
  std::unique_ptr<void, decltype(&cudaFree)> buf(nullptr, cudaFree);
  if (ws) {
    const size_t need = delta_workspace_bytes(c.f, SsmOp::replay_step, DeltaShape{c.H, c.HV, c.K, c.V}, B, 1, L, e);
    ASSERT_GT(need, 0u) << "a dual step at this shape reports no workspace";
    void* p = nullptr;
    RSSM_CUDA_OK(cudaMalloc(&p, need));
    buf.reset(p);
    e.workspace = Workspace{p, need};
  }
  graph.capture([&] { delta_replay_step(c.f, in.step(true, slot), pool.view(true), Tensor{}, true, e); });
  int flushes = 0;
  for (int it = 0; it < 12; ++it) {
    in.refill(rng);
    in.push();
    for (int64_t r : rows)
      if (r >= 0) flushes += pool.cur.h.get(r * 3 + 1) + 1 > L;
    graph.replay();
    delta_replay_step(c.f, in.step(false, slot), pool.view(false), Tensor{}, true, cpu_exec());
    const HostTensor o = in.o.fetch();
    for (int64_t i = 0; i < c.HV * c.V; ++i) ASSERT_EQ(o.get(7 * c.HV * c.V + i), 0.0) << "pad row output";
    EXPECT_LE(rel_err(o.to_f64(), in.o.h.to_f64()), out_tol(c, f)) << "o, replay " << it;
    pool.expect_match(c, rows, "replay " + std::to_string(it));
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_GE(flushes, 40) << "the schedule must flush";
}
TEST(DualDeltaGpu, GraphReplayT1MatchesCpu) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(43);
  for (ReadFormat f : {ReadFormat::bf16, ReadFormat::fp8_e4m3, ReadFormat::nvfp4}) {
    SCOPED_TRACE(read_format_name(f));
    graph_replay_t1(f, false, rng);
    if (::testing::Test::HasFailure()) return;
  }
}
// The same with the persistent step forced and an exact workspace (the
// dual step's scratch as delta_workspace_bytes sizes it).
TEST(DualDeltaGpu, GraphReplayT1PersistentWorkspace) {
  RSSM_SKIP_WITHOUT_GPU();
  R1PMode on("1");
  std::mt19937 rng(44);
  for (ReadFormat f : {ReadFormat::bf16, ReadFormat::fp8_e4m3, ReadFormat::nvfp4}) {
    SCOPED_TRACE(read_format_name(f));
    ASSERT_TRUE(persistent_taken(GRAPH_T1_CFG, f, 40, 4)) << "the persistent step was not chosen";
    graph_replay_t1(f, true, rng);
    if (::testing::Test::HasFailure()) return;
  }
}

}  // namespace
}  // namespace replayssm::test
