// Caller-provided workspace of the fast CPU backend (types.h Workspace,
// *_workspace_bytes). For every family and operation, on 1 and 3 threads:
//   - a workspace of exactly the reported size gives bitwise the same
//     outputs and pool bytes as the internal-allocation path, whether it was
//     poisoned with NaN or with random bytes, and no byte past it is touched;
//   - one byte too small, one alignment unit too small, or misaligned: an
//     Error naming 'workspace', and no output or pool byte changes.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "conv1d_test_util.h"
#include "delta_fixture.h"
#include "mamba2_fixture.h"
#include "replayssm/conv1d.h"
#include "replayssm/delta.h"
#include "replayssm/mamba2.h"
#include "test_util.h"

namespace replayssm::test {
namespace {

// One call under test and the tensors it may write. capture() records their
// bytes; every run starts from them.
struct Harness {
  std::vector<HostTensor*> written;
  std::function<void(const Exec&)> call;
  std::vector<std::vector<uint8_t>> initial;

  void capture() {
    initial.clear();
    for (HostTensor* t : written) {
      const auto* p = static_cast<const uint8_t*>(t->data());
      initial.emplace_back(p, p + t->bytes());
    }
  }
  void restore() {
    for (size_t i = 0; i < written.size(); ++i)
      std::memcpy(written[i]->data(), initial[i].data(), initial[i].size());
  }
  std::vector<uint8_t> bytes() const {
    std::vector<uint8_t> out;
    for (const HostTensor* t : written) {
      const auto* p = static_cast<const uint8_t*>(t->data());
      out.insert(out.end(), p, p + t->bytes());
    }
    return out;
  }
  std::vector<uint8_t> initial_bytes() const {
    std::vector<uint8_t> out;
    for (const auto& v : initial) out.insert(out.end(), v.begin(), v.end());
    return out;
  }
};

// Caller memory: `bytes` usable bytes at a WORKSPACE_ALIGN boundary, then a
// sentinel tail of SENTINEL bytes.
constexpr size_t SENTINEL = 256;
constexpr uint8_t SENTINEL_BYTE = 0xA5;
struct Memory {
  struct Del {
    void operator()(uint8_t* p) const { ::operator delete[](p, std::align_val_t(WORKSPACE_ALIGN)); }
  };
  std::unique_ptr<uint8_t, Del> mem;
  size_t bytes;
  explicit Memory(size_t n)
      : mem(static_cast<uint8_t*>(::operator new[](n + SENTINEL + WORKSPACE_ALIGN,
                                                    std::align_val_t(WORKSPACE_ALIGN)))),
        bytes(n) {}
  uint8_t* data() const { return mem.get(); }
  void poison_nan() { std::memset(data(), 0xFF, bytes); }  // every f32 lane a NaN
  void poison_random(uint64_t seed) {
    std::mt19937_64 rng(seed);
    for (size_t i = 0; i < bytes; ++i) data()[i] = uint8_t(rng());
  }
  void arm_sentinel() { std::memset(data() + bytes, SENTINEL_BYTE, SENTINEL); }
  bool sentinel_intact() const {
    for (size_t i = 0; i < SENTINEL; ++i)
      if (data()[bytes + i] != SENTINEL_BYTE) return false;
    return true;
  }
};

// Runs the call with the given workspace; expects an Error naming it.
void expect_rejected(Harness& h, Exec ex, Workspace ws, const char* fn, const std::string& what) {
  h.restore();
  ex.workspace = ws;
  try {
    h.call(ex);
    ADD_FAILURE() << what << ": accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "workspace") << what << ": " << e.what();
    EXPECT_EQ(e.function(), fn) << what;
    EXPECT_NE(std::string(e.what()).find("workspace"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(h.bytes() == h.initial_bytes()) << what << ": a rejected call wrote";
}

// The checks of the file header for one call; size(ex) is the size function.
// needs_scratch: the operation must report a nonzero size.
void check_call(const char* fn, Harness& h, const std::function<size_t(const Exec&)>& size,
                bool needs_scratch = true) {
  h.capture();
  for (int threads : {1, 3}) {
    SCOPED_TRACE(std::string(fn) + " threads " + std::to_string(threads));
    Exec ex;
    ex.backend = Backend::cpu;
    ex.num_threads = threads;
    h.restore();
    h.call(ex);
    const std::vector<uint8_t> want = h.bytes();
    EXPECT_FALSE(want == h.initial_bytes()) << "the call changed nothing: a vacuous test";

    const size_t need = size(ex);
    if (needs_scratch) EXPECT_GT(need, 0u);
    EXPECT_EQ(need % WORKSPACE_ALIGN, 0u);
    Memory mem(need);
    for (int poison = 0; poison < 2; ++poison) {
      if (poison == 0) mem.poison_nan();
      else mem.poison_random(uint64_t(threads) * 7 + 1);
      mem.arm_sentinel();
      h.restore();
      Exec wex = ex;
      wex.workspace = Workspace{mem.data(), need};
      h.call(wex);
      EXPECT_TRUE(h.bytes() == want) << (poison ? "random" : "NaN") << "-poisoned workspace differs";
      EXPECT_TRUE(mem.sentinel_intact()) << "bytes past the workspace were written";
    }
    // The size for one thread is not enough for three (per-thread slabs).
    if (threads == 3 && needs_scratch) {
      Exec one = ex;
      one.num_threads = 1;
      EXPECT_LT(size(one), need);
    }

    Memory big(need + 2 * WORKSPACE_ALIGN);
    if (need > 0) {
      expect_rejected(h, ex, Workspace{big.data(), need - 1}, fn, "one byte short");
      expect_rejected(h, ex, Workspace{big.data(), need - WORKSPACE_ALIGN}, fn, "one unit short");
    }
    expect_rejected(h, ex, Workspace{big.data() + 8, need + WORKSPACE_ALIGN}, fn, "misaligned");
    // The reference backend needs none and ignores one.
    Exec ref = ex;
    ref.backend = Backend::reference;
    EXPECT_EQ(size(ref), 0u);
  }
}

// ---- Mamba-2 ------------------------------------------------------------------

using mamba2_test::Params;
using mamba2_test::Pool;
using mamba2_test::Shape;
using mamba2_test::Step;

struct Mamba2Case {
  Shape s{4, 8, 20, 2};
  int64_t S = 7, L = 4, T = 3, B = 4;
  std::mt19937 rng{5};
  Params params{s, rng};
  Pool pool{s, S, L, T, DType::bf16, DType::bf16, params};  // pending = T on the rows' slots
  Pool committed{s, S, L, T, DType::bf16, DType::bf16, params};  // count > 0, pending = 0
  Step step{s, B, T, DType::bf16, true};
  HostTensor num_accepted = index_tensor({3, 1, 2, 0}, DType::i32);
  const Exec setup = mamba2_test::exec_of(Backend::cpu, 2);

  Mamba2Case() {
    // Prefill every slot, then a speculative step of T tokens on slots 1, 4, 2 (row 3 a pad).
    HostTensor cu = index_tensor({0, 5, 5, 9, 12, 13, 20, 22}), sl = index_tensor({0, 1, 2, 3, 4, 5, 6});
    HostTensor x(DType::bf16, {22, s.H, s.P}), dt(DType::f32, {22, s.H}), Bm(DType::bf16, {22, s.G, s.N}),
        Cm(DType::bf16, {22, s.G, s.N}), y(DType::bf16, {22, s.H, s.P});
    x.fill_normal(rng), dt.fill_uniform(rng, -3, 0.5), Bm.fill_normal(rng, 0, 0.5), Cm.fill_normal(rng, 0, 0.5);
    Mamba2Prefill p;
    p.x = x, p.dt = dt, p.Bm = Bm, p.Cm = Cm, p.A = params.A, p.dt_bias = params.dt_bias, p.D = params.D;
    p.cu_seqlens = cu, p.slot = sl, p.y = y;
    mamba2_prefill(p, pool.view(), setup);
    step.set_slots({1, 4, 2, -1});
    step.randomize(rng, params);
    mamba2_replay_step(step.view(params), pool.view(), Tensor{}, false, setup);
    committed.copy_from(pool);
    mamba2_commit(committed.view(), step.slot, -1, num_accepted, setup);
    step.randomize(rng, params);
  }
  std::vector<HostTensor*> pool_tensors(Pool& p) {
    return {&p.state, &p.ring_x, &p.ring_dt, &p.ring_B, &p.cursor};
  }
  size_t bytes(SsmOp op, int64_t B_, int64_t T_, const Exec& ex) const {
    return mamba2_workspace_bytes(op, Mamba2Shape{s.H, s.P, s.N, s.G}, B_, T_, L, ex);
  }
};

TEST(Workspace, Mamba2Decode) {
  Mamba2Case c;
  HostTensor state(DType::f32, {c.S, c.s.H, c.s.P, c.s.N});
  state.fill_normal(c.rng);
  Harness h;
  h.written = {&state, &c.step.y};
  h.call = [&](const Exec& ex) { mamba2_decode(c.step.view(c.params), state, ex); };
  check_call("mamba2_decode", h, [&](const Exec& ex) { return c.bytes(SsmOp::decode, c.B, c.T, ex); });
}

TEST(Workspace, Mamba2SnapshotDecode) {
  Mamba2Case c;
  HostTensor state(DType::f16, {3 * c.B, c.s.H, c.s.P, c.s.N});
  state.fill_normal(c.rng);
  HostTensor idx = index_tensor({0, 1, 2, 3, 4, 5, -1, 9, 10, 6, 7, 8});
  idx.t().ndim = 2, idx.t().shape[0] = c.B, idx.t().shape[1] = 3, idx.t().stride[0] = 3, idx.t().stride[1] = 1;
  HostTensor acc = index_tensor({2, 3, 1, 1}, DType::i32);
  Harness h;
  h.written = {&state, &c.step.y};
  h.call = [&](const Exec& ex) { mamba2_snapshot_decode(c.step.view(c.params), state, idx, acc, ex); };
  check_call("mamba2_snapshot_decode", h,
             [&](const Exec& ex) { return c.bytes(SsmOp::snapshot_decode, c.B, c.T, ex); });
}

TEST(Workspace, Mamba2Prefill) {
  Mamba2Case c;
  const Shape& s = c.s;
  // The first row starts from zero (scratch it must clear), the last from its history.
  HostTensor cu = index_tensor({0, 6, 6, 15}), sl = index_tensor({4, -1, 1}), init = index_tensor({0, 0, 1}, DType::i32);
  HostTensor x(DType::bf16, {15, s.H, s.P}), dt(DType::f32, {15, s.H}), Bm(DType::bf16, {15, s.G, s.N}),
      Cm(DType::bf16, {15, s.G, s.N}), y(DType::bf16, {15, s.H, s.P});
  x.fill_normal(c.rng), dt.fill_uniform(c.rng, -3, 0.5), Bm.fill_normal(c.rng, 0, 0.5), Cm.fill_normal(c.rng, 0, 0.5);
  y.fill_nan();
  Mamba2Prefill p;
  p.x = x, p.dt = dt, p.Bm = Bm, p.Cm = Cm, p.A = c.params.A, p.dt_bias = c.params.dt_bias, p.D = c.params.D;
  p.cu_seqlens = cu, p.slot = sl, p.initial = init, p.y = y;
  Harness h;
  h.written = c.pool_tensors(c.committed);
  h.written.push_back(&y);
  h.call = [&](const Exec& ex) { mamba2_prefill(p, c.committed.view(), ex); };
  check_call("mamba2_prefill", h, [&](const Exec& ex) { return c.bytes(SsmOp::prefill, 3, 1, ex); });
}

TEST(Workspace, Mamba2ReplayStep) {
  Mamba2Case c;
  for (bool commit_all : {false, true}) {
    Harness h;
    h.written = c.pool_tensors(c.pool);
    h.written.push_back(&c.step.y);
    h.call = [&](const Exec& ex) {
      mamba2_replay_step(c.step.view(c.params), c.pool.view(), c.num_accepted, commit_all, ex);
    };
    check_call("mamba2_replay_step", h,
               [&](const Exec& ex) { return c.bytes(SsmOp::replay_step, c.B, c.T, ex); });
  }
}

TEST(Workspace, Mamba2SlotOps) {
  Mamba2Case c;
  const HostTensor slots = index_tensor({1, -1, 4, 2});
  {
    Harness h;
    h.written = c.pool_tensors(c.pool);
    h.call = [&](const Exec& ex) { mamba2_commit(c.pool.view(), c.step.slot, -1, c.num_accepted, ex); };
    check_call("mamba2_commit", h, [&](const Exec& ex) { return c.bytes(SsmOp::commit, c.B, 1, ex); },
               false);
  }
  {
    HostTensor out(DType::f32, {4, c.s.H, c.s.P, c.s.N});
    out.fill_nan();
    Harness h;
    h.written = {&out};
    h.call = [&](const Exec& ex) { mamba2_materialize(c.committed.view(), slots, -1, out, ex); };
    check_call("mamba2_materialize", h,
               [&](const Exec& ex) { return c.bytes(SsmOp::materialize, 4, 1, ex); });
  }
  {
    Harness h;
    h.written = c.pool_tensors(c.committed);
    h.call = [&](const Exec& ex) { mamba2_flush(c.committed.view(), slots, -1, ex); };
    check_call("mamba2_flush", h, [&](const Exec& ex) { return c.bytes(SsmOp::flush, 4, 1, ex); });
  }
}

// The size grows with B, T and L, and is 0 where nothing is needed.
TEST(Workspace, SizesAreMonotone) {
  Exec ex;
  ex.num_threads = 2;
  const Mamba2Shape ms{8, 16, 32, 2};
  const DeltaShape ds{2, 4, 32, 16};
  for (SsmOp op : {SsmOp::decode, SsmOp::snapshot_decode, SsmOp::prefill, SsmOp::replay_step,
                   SsmOp::materialize, SsmOp::flush}) {
    size_t prev = 0;
    for (int64_t k = 1; k <= 4; ++k) {
      const size_t m = mamba2_workspace_bytes(op, ms, 4 * k, k, 4 * k, ex);
      EXPECT_GE(m, prev);
      prev = m;
      EXPECT_LE(delta_workspace_bytes(DeltaFamily::gdn, op, ds, 4 * k, k, 4 * k, ex),
                delta_workspace_bytes(DeltaFamily::kda, op, ds, 4 * k, k, 4 * k, ex));
    }
  }
  for (SsmOp op : {SsmOp::commit, SsmOp::copy_slot, SsmOp::reset_slot}) {
    EXPECT_EQ(mamba2_workspace_bytes(op, ms, 8, 1, 16, ex), 0u);
    EXPECT_EQ(delta_workspace_bytes(DeltaFamily::gdn, op, ds, 8, 1, 16, ex), 0u);
  }
  EXPECT_EQ(conv1d_workspace_bytes(Conv1dOp::commit, 8, 0, 64, 4, ex), 0u);
  EXPECT_LE(conv1d_workspace_bytes(Conv1dOp::update, 4, 2, 64, 4, ex),
            conv1d_workspace_bytes(Conv1dOp::update, 4, 3, 64, 4, ex));
  Exec cuda = ex;
  cuda.backend = Backend::cuda;
  EXPECT_EQ(mamba2_workspace_bytes(SsmOp::replay_step, ms, 8, 2, 16, cuda), 0u);
  EXPECT_EQ(delta_workspace_bytes(DeltaFamily::kda, SsmOp::replay_step, ds, 8, 2, 16, cuda), 0u);
  EXPECT_EQ(conv1d_workspace_bytes(Conv1dOp::update, 8, 2, 64, 4, cuda), 0u);
  // Bad arguments name themselves.
  try {
    mamba2_workspace_bytes(SsmOp::decode, ms, 4, 0, 16, ex);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "T");
  }
  try {
    delta_workspace_bytes(DeltaFamily::gdn, SsmOp::prefill, ds, -1, 1, 16, ex);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "B");
  }
  EXPECT_THROW(conv1d_workspace_bytes(Conv1dOp::update, 4, 2, 64, 1, ex), Error);
}

// ---- GDN / KDA ----------------------------------------------------------------

namespace dt = replayssm::test::delta;

struct DeltaCase {
  dt::Cfg c;
  std::mt19937_64 rng{17};
  std::unique_ptr<dt::Params> params;
  dt::Pool pool, committed;
  dt::Inputs in;
  HostTensor slot = index_tensor({1, 4, -1, 2});
  HostTensor num_accepted = index_tensor({3, 1, 0, 2}, DType::i32);
  int64_t B = 4, T = 3;
  const Exec setup = dt::exec_of(Backend::cpu, 2);

  explicit DeltaCase(DeltaFamily f) {
    c.fam = f;
    c.H = 2, c.HV = 4, c.K = 24, c.V = 12, c.L = 4, c.T_max = 3, c.S = 7;
    c.act = DType::bf16;
    params = std::make_unique<dt::Params>(c, rng);
    pool = dt::Pool(c);
    committed = dt::Pool(c);
    // Prefill every slot, then one speculative step of T tokens.
    const std::vector<int64_t> cu = {0, 5, 5, 9, 12, 13, 20, 22};
    dt::Inputs pin(c, {22});
    for (int64_t i = 0; i < 22; ++i) dt::randomize_token(c, pin, i, rng);
    HostTensor cu_t = index_tensor(cu), sl = index_tensor({0, 1, 2, 3, 4, 5, 6});
    DeltaPrefill p = prefill_view(pin, cu_t, sl, HostTensor());
    delta_prefill(f, p, pool.view(), setup);
    in.reset(c, {B, T});
    for (int64_t i = 0; i < B * T; ++i) dt::randomize_token(c, in, i, rng);
    delta_replay_step(f, dt::step_view(c, *params, in, slot), pool.view(), Tensor{}, false, setup);
    committed.copy_from(pool);
    delta_commit(f, committed.view(), slot, -1, num_accepted, setup);
    for (int64_t i = 0; i < B * T; ++i) dt::randomize_token(c, in, i, rng);
    in.o.fill_nan();
  }
  DeltaPrefill prefill_view(const dt::Inputs& pin, const HostTensor& cu, const HostTensor& sl,
                            const HostTensor& init) const {
    DeltaPrefill p;
    p.q = pin.q, p.k = pin.k, p.v = pin.v, p.g = pin.g, p.beta = pin.beta, p.o = pin.o;
    p.A_log = params->A_log;
    if (params->dt_bias.t().defined()) p.dt_bias = params->dt_bias;
    p.gating = c.gating;
    p.cu_seqlens = cu, p.slot = sl;
    if (init.t().defined()) p.initial = init;
    return p;
  }
  std::vector<HostTensor*> pool_tensors(dt::Pool& p) {
    return {&p.state, &p.ring_d, &p.ring_k, &p.ring_ks, &p.ring_g, &p.cursor};
  }
  size_t bytes(SsmOp op, int64_t B_, int64_t T_, const Exec& ex) const {
    return delta_workspace_bytes(c.fam, op, DeltaShape{c.H, c.HV, c.K, c.V}, B_, T_, c.L, ex);
  }
};

class DeltaWorkspace : public ::testing::TestWithParam<DeltaFamily> {};

TEST_P(DeltaWorkspace, Decode) {
  DeltaCase d(GetParam());
  HostTensor state(DType::f32, {d.c.S, d.c.HV, d.c.V, d.c.K});
  state.fill_normal(d.rng, 0, 0.3);
  Harness h;
  h.written = {&state, &d.in.o};
  h.call = [&](const Exec& ex) { delta_decode(d.c.fam, dt::step_view(d.c, *d.params, d.in, d.slot), state, ex); };
  check_call("delta_decode", h, [&](const Exec& ex) { return d.bytes(SsmOp::decode, d.B, d.T, ex); });
}

TEST_P(DeltaWorkspace, SnapshotDecode) {
  DeltaCase d(GetParam());
  HostTensor state(DType::bf16, {3 * d.B, d.c.HV, d.c.V, d.c.K});
  state.fill_normal(d.rng, 0, 0.3);
  HostTensor idx = index_tensor({0, 1, 2, 3, 4, 5, -1, 9, 10, 6, 7, 8});
  idx.t().ndim = 2, idx.t().shape[0] = d.B, idx.t().shape[1] = 3, idx.t().stride[0] = 3, idx.t().stride[1] = 1;
  HostTensor acc = index_tensor({2, 3, 1, 1}, DType::i32);
  Harness h;
  h.written = {&state, &d.in.o};
  h.call = [&](const Exec& ex) {
    delta_snapshot_decode(d.c.fam, dt::step_view(d.c, *d.params, d.in, d.slot), state, idx, acc, ex);
  };
  check_call("delta_snapshot_decode", h,
             [&](const Exec& ex) { return d.bytes(SsmOp::snapshot_decode, d.B, d.T, ex); });
}

TEST_P(DeltaWorkspace, Prefill) {
  DeltaCase d(GetParam());
  // 40 tokens in one prompt: more than one prefill chunk.
  dt::Inputs pin(d.c, {47});
  for (int64_t i = 0; i < 47; ++i) dt::randomize_token(d.c, pin, i, d.rng);
  // The first row starts from zero (scratch it must clear), the last from its history.
  HostTensor cu = index_tensor({0, 40, 40, 47}), sl = index_tensor({4, -1, 1}),
             init = index_tensor({0, 0, 1}, DType::i32);
  const DeltaPrefill p = d.prefill_view(pin, cu, sl, init);
  Harness h;
  h.written = d.pool_tensors(d.committed);
  h.written.push_back(&pin.o);
  h.call = [&](const Exec& ex) { delta_prefill(d.c.fam, p, d.committed.view(), ex); };
  check_call("delta_prefill", h, [&](const Exec& ex) { return d.bytes(SsmOp::prefill, 3, 1, ex); });
}

TEST_P(DeltaWorkspace, ReplayStep) {
  DeltaCase d(GetParam());
  for (bool commit_all : {false, true}) {
    Harness h;
    h.written = d.pool_tensors(d.pool);
    h.written.push_back(&d.in.o);
    h.call = [&](const Exec& ex) {
      delta_replay_step(d.c.fam, dt::step_view(d.c, *d.params, d.in, d.slot), d.pool.view(),
                        d.num_accepted, commit_all, ex);
    };
    check_call("delta_replay_step", h,
               [&](const Exec& ex) { return d.bytes(SsmOp::replay_step, d.B, d.T, ex); });
  }
}

TEST_P(DeltaWorkspace, SlotOps) {
  DeltaCase d(GetParam());
  const HostTensor slots = index_tensor({1, -1, 4, 2});
  {
    Harness h;
    h.written = d.pool_tensors(d.pool);
    h.call = [&](const Exec& ex) { delta_commit(d.c.fam, d.pool.view(), d.slot, -1, d.num_accepted, ex); };
    check_call("delta_commit", h, [&](const Exec& ex) { return d.bytes(SsmOp::commit, d.B, 1, ex); },
               false);
  }
  {
    HostTensor out(DType::f32, {4, d.c.HV, d.c.V, d.c.K});
    out.fill_nan();
    Harness h;
    h.written = {&out};
    h.call = [&](const Exec& ex) { delta_materialize(d.c.fam, d.committed.view(), slots, -1, out, ex); };
    check_call("delta_materialize", h,
               [&](const Exec& ex) { return d.bytes(SsmOp::materialize, 4, 1, ex); });
  }
  {
    Harness h;
    h.written = d.pool_tensors(d.committed);
    h.call = [&](const Exec& ex) { delta_flush(d.c.fam, d.committed.view(), slots, -1, ex); };
    check_call("delta_flush", h, [&](const Exec& ex) { return d.bytes(SsmOp::flush, 4, 1, ex); });
  }
}

INSTANTIATE_TEST_SUITE_P(Families, DeltaWorkspace,
                         ::testing::Values(DeltaFamily::gdn, DeltaFamily::kda),
                         [](const auto& info) { return std::string(dt::fam_name(info.param)); });

// ---- conv1d -------------------------------------------------------------------

TEST(Workspace, Conv1dUpdate) {
  std::mt19937_64 rng(31);
  ConvConfig c{7, 150, 4, 5, DType::bf16, DType::f32, DType::bf16};
  const ConvWeights w(c, rng);
  ConvPool pool(c);
  pool.state.fill_uniform(rng, -1, 1);
  for (int64_t s = 0; s < c.S; ++s) pool.pending.set(s, double(1 + s % 4));
  const HostTensor slot = index_tensor({3, -1, 0, 6}), acc = index_tensor({2, 5, 1, 3}, DType::i32);
  HostTensor x(c.x_dtype, {4, 3, c.dim}), out(c.x_dtype, {4, 3, c.dim});
  x.fill_uniform(rng, -2, 2);
  out.fill_nan();
  for (bool with_acc : {true, false}) {
    Harness h;
    h.written = {&pool.state, &pool.pending, &out};
    h.call = [&](const Exec& ex) {
      conv1d_update(make_conv_step(c, x, w, slot, out), pool.state, pool.pending,
                    with_acc ? acc.t() : Tensor{}, ex);
    };
    check_call("conv1d_update", h, [&](const Exec& ex) {
      return conv1d_workspace_bytes(Conv1dOp::update, 4, 3, c.dim, c.W, ex);
    });
  }
}

TEST(Workspace, Conv1dPrefill) {
  std::mt19937_64 rng(37);
  ConvConfig c{5, 130, 3, 4, DType::f16, DType::bf16, DType::f32};
  const ConvWeights w(c, rng);
  ConvPool pool(c);
  pool.state.fill_uniform(rng, -1, 1);
  const HostTensor cu = index_tensor({0, 70, 70, 72}), slot = index_tensor({2, -1, 4}),
                   init = index_tensor({0, 0, 1});
  HostTensor x(c.x_dtype, {72, c.dim}), out(c.x_dtype, {72, c.dim});
  x.fill_uniform(rng, -2, 2);
  out.fill_nan();
  Conv1dPrefill p;
  p.x = x, p.weight = w.weight, p.bias = w.bias, p.cu_seqlens = cu, p.slot = slot, p.initial = init, p.out = out;
  Harness h;
  h.written = {&pool.state, &pool.pending, &out};
  h.call = [&](const Exec& ex) { conv1d_prefill(p, pool.state, pool.pending, ex); };
  check_call("conv1d_prefill", h, [&](const Exec& ex) {
    return conv1d_workspace_bytes(Conv1dOp::prefill, 3, 1, c.dim, c.W, ex);
  });
}

}  // namespace
}  // namespace replayssm::test
