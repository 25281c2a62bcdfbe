// Pools as views into one slot-major host allocation (SlotArena: slot
// strides of gigabytes, the last slots past 2^31 elements of every pool
// tensor) on the fast CPU backend: every call gives the same bytes as on
// dense pools (outputs, checkpoints, rings, cursors), and nothing outside a
// slot's pieces is written, with dense rows and with padded ones (Pads).
// GDN, KDA and Mamba-2 at model shapes, single precision and dual (fp8,
// nvfp4 and bf16 read copies): prefill, T = 1 steps with flushes,
// speculative windows with fused and separate commits, materialize, flush,
// copy, reset, the baseline and snapshot decodes; and the conv1d state and
// pending counts (prefill, updates with speculative acceptances, commit).
// The GPU twins: tests/gpu/*_arena_gpu_test.cpp and the ArenaPools tests of
// the dual and conv1d GPU tests.
#include <optional>
#include <utility>
#include <stdexcept>
#include <string>
#include <vector>

#include "delta_fixture.h"
#include "mamba2_fixture.h"
#include "replayssm/conv1d.h"
#include "replayssm/quant.h"
#include "slot_arena.h"

namespace replayssm::test {
namespace {

// Dense host tensors [S, ...] and their copies as pieces of a host arena.
class Twin {
 public:
  // Each piece with the bytes that follow every row (last dimension) of it.
  Twin(int64_t S, const std::vector<std::pair<const HostTensor*, size_t>>& pieces)
      : arena_(S, host_arena_memory()) {
    for (const auto& [t, pad] : pieces) {
      dense_.push_back(t);
      arena_.add(t->t().dtype, std::vector<int64_t>(t->t().shape + 1, t->t().shape + t->t().ndim), pad);
    }
    arena_.allocate();
    for (size_t i = 0; i < dense_.size(); ++i) arena_.upload(int(i), *dense_[i]);
  }
  // The arena view holding dense tensor d's copy (absent stays absent).
  Tensor of(const Tensor& d) const {
    if (!d.defined()) return d;
    for (size_t i = 0; i < dense_.size(); ++i)
      if (dense_[i]->data() == d.data) return arena_.view(int(i));
    throw std::logic_error("Twin::of: not a twinned tensor");
  }
  void expect_same(const std::string& what) const {
    for (size_t i = 0; i < dense_.size(); ++i)
      EXPECT_TRUE(arena_.download(int(i)).bytes_equal(*dense_[i])) << what << ": pool tensor " << i << " differs";
    arena_.expect_guards(what);
  }
  size_t slot_stride_bytes() const { return arena_.slot_stride_bytes(); }

 private:
  std::vector<const HostTensor*> dense_;
  SlotArena arena_;
};

// A second output tensor of the same shape, NaN-filled, and the check that
// both runs wrote the same bytes.
HostTensor twin_out(const HostTensor& o) {
  HostTensor t(o.t().dtype, std::vector<int64_t>(o.t().shape, o.t().shape + o.t().ndim));
  t.fill_nan();
  return t;
}
void expect_same_out(const HostTensor& dense, const HostTensor& arena, const std::string& what) {
  EXPECT_TRUE(arena.bytes_equal(dense)) << what << ": outputs differ";
}

Exec fast() {
  Exec e;
  e.backend = Backend::cpu;
  e.num_threads = 2;
  return e;
}

// Row padding of an arena: `state` bytes after every row of a checkpoint
// or read copy (the cuda backend needs them 16-byte aligned), `ring`
// elements after every row of the rings, cursors and conv states (element
// aligned on every backend: odd strides).
struct Pads {
  size_t state = 0;
  int64_t ring = 0;
  size_t ring_bytes(const HostTensor& t) const { return size_t(ring) * dtype_size(t.t().dtype); }
  std::string str() const { return "pads " + std::to_string(state) + " B / " + std::to_string(ring) + " el"; }
};
// Dense, and padded: checkpoint rows 16 bytes apart from dense, rings with
// odd strides.
const Pads PADS[] = {{0, 0}, {16, 1}};

// ---------------------------------------------------------------- GDN / KDA

DeltaPool arena_pool(const DeltaPool& d, const Twin& tw) {
  DeltaPool a = d;
  a.state = tw.of(d.state);
  a.ring_d = tw.of(d.ring_d);
  a.ring_k = tw.of(d.ring_k);
  a.ring_ks = tw.of(d.ring_ks);
  a.ring_g = tw.of(d.ring_g);
  a.cursor = tw.of(d.cursor);
  a.read_copy = tw.of(d.read_copy);
  a.ring_v = tw.of(d.ring_v);
  a.ring_beta = tw.of(d.ring_beta);
  return a;
}

// fmt: a dual pool with a read copy of that format.
void delta_arena_run(const delta::Cfg& c, uint64_t seed, const Pads& pads, std::optional<ReadFormat> fmt = std::nullopt) {
  using namespace delta;
  std::mt19937_64 rng(seed);
  Params params(c, rng);
  Pool pool(c);
  pool.state.fill_normal(rng, 0, 0.5);
  pool.ring_d.fill_normal(rng);  // stale ring contents: never read
  pool.ring_k.fill_normal(rng);
  pool.ring_ks.fill_uniform(rng, 0.1, 1);
  pool.ring_g.fill_uniform(rng, -1, 0);
  for (int64_t s = 0; s < c.S; ++s) pool.set_cur(s, RingCursor{int32_t(rng() % uint64_t(c.R())), 0, 0});
  std::vector<std::pair<const HostTensor*, size_t>> pieces;
  for (const HostTensor* t : pool.all()) pieces.push_back({t, t == &pool.state ? pads.state : pads.ring_bytes(*t)});
  HostTensor copy, ring_v, ring_beta;
  if (fmt) {
    copy.reset(DType::u8, {c.S, c.HV, quant_layout(*fmt, c.V, c.K).tile_bytes});
    ring_v.reset(c.act, {c.S, c.R(), c.HV, c.V});
    ring_beta.reset(DType::f32, {c.S, c.R(), c.HV});
    pieces.insert(pieces.end(), {{&copy, pads.state}, {&ring_v, pads.ring_bytes(ring_v)}, {&ring_beta, pads.ring_bytes(ring_beta)}});
  }
  const Twin tw(c.S, pieces);
  ASSERT_GE(tw.slot_stride_bytes() * uint64_t(c.S - 1), uint64_t(1) << 33);
  const DeltaPool dp = [&] {
    DeltaPool v = pool.view();
    if (fmt) v.read_copy = copy, v.read_format = *fmt, v.ring_v = ring_v, v.ring_beta = ring_beta;
    return v;
  }();
  const DeltaPool ap = arena_pool(dp, tw);
  const int64_t B = 3;
  const HostTensor rows = index_tensor({c.S - 1, -1, c.S - 2});  // the far slots, a pad row

  // prefill from zero, prompts of 5 and 3 tokens
  const std::vector<int64_t> cu = {0, 5, 5, 8};
  Inputs pin(c, {cu.back()});
  for (int64_t i = 0; i < cu.back(); ++i) randomize_token(c, pin, i, rng);
  const HostTensor cus = index_tensor(cu);
  DeltaPrefill pf;
  pf.q = pin.q; pf.k = pin.k; pf.v = pin.v; pf.g = pin.g; pf.beta = pin.beta;
  if (c.gating.raw_gate) pf.A_log = params.A_log;
  if (params.dt_bias.t().defined()) pf.dt_bias = params.dt_bias;
  pf.gating = c.gating; pf.cu_seqlens = cus; pf.slot = rows; pf.pad_slot_id = -1;
  HostTensor po = twin_out(pin.o);
  pf.o = pin.o;
  delta_prefill(c.fam, pf, dp, fast());
  pf.o = po;
  delta_prefill(c.fam, pf, ap, fast());
  expect_same_out(pin.o, po, "prefill");
  tw.expect_same("prefill");

  // T = 1 steps (flushes every L), then windows of T_max with random
  // acceptances, committed by the next step (fused) or by delta_commit
  HostTensor acc(DType::i32, {B});
  bool pending = false;
  for (int step = 0; step < int(c.L) + 10; ++step) {
    const int64_t T = step < int(c.L) + 2 ? 1 : c.T_max;
    Inputs in(c, {B, T});
    for (int64_t i = 0; i < B * T; ++i) randomize_token(c, in, i, rng);
    Tensor fused;
    if (pending && step % 2 == 0) {
      fused = acc;
    } else if (pending) {
      delta_commit(c.fam, dp, rows, -1, acc, fast());
      delta_commit(c.fam, ap, rows, -1, acc, fast());
    }
    DeltaStep st = step_view(c, params, in, rows);
    HostTensor o2 = twin_out(in.o);
    delta_replay_step(c.fam, st, dp, fused, T == 1, fast());
    st.o = o2;
    delta_replay_step(c.fam, st, ap, fused, T == 1, fast());
    expect_same_out(in.o, o2, "step " + std::to_string(step));
    tw.expect_same("step " + std::to_string(step));
    if (::testing::Test::HasFailure()) return;
    pending = T > 1;
    for (int64_t b = 0; b < B; ++b) acc.set(b, double(1 + int64_t(rng() % uint64_t(T))));
  }

  // slot operations: materialize (the window pending), commit, flush, copy
  // from the far slots to the near ones and back, reset
  HostTensor m1(DType::f32, {B, c.HV, c.V, c.K}), m2 = twin_out(m1);
  m1.fill_nan();
  delta_materialize(c.fam, dp, rows, -1, m1, fast());
  delta_materialize(c.fam, ap, rows, -1, m2, fast());
  expect_same_out(m1, m2, "materialize");
  delta_commit(c.fam, dp, rows, -1, acc, fast());
  delta_commit(c.fam, ap, rows, -1, acc, fast());
  delta_flush(c.fam, dp, rows, -1, fast());
  delta_flush(c.fam, ap, rows, -1, fast());
  tw.expect_same("commit / flush");
  const HostTensor src = index_tensor({c.S - 1}), dst = index_tensor({0}), back = index_tensor({c.S - 1}),
                   from = index_tensor({1}), rs = index_tensor({c.S - 2});
  for (const DeltaPool* p : {&dp, &ap}) {
    delta_copy_slot(c.fam, *p, src, dst, -1, fast());
    delta_copy_slot(c.fam, *p, from, back, -1, fast());
    delta_reset_slot(c.fam, *p, rs, -1, fast());
  }
  tw.expect_same("copy / reset");

  // the baseline decode and the snapshot decode on the arena's states
  Inputs in(c, {B, 2});
  for (int64_t i = 0; i < B * 2; ++i) randomize_token(c, in, i, rng);
  DeltaStep st = step_view(c, params, in, rows);
  HostTensor o2 = twin_out(in.o);
  delta_decode(c.fam, st, dp.state, fast());
  st.o = o2;
  delta_decode(c.fam, st, ap.state, fast());
  expect_same_out(in.o, o2, "decode");
  tw.expect_same("decode");
  const HostTensor idx = [&] {
    HostTensor t(DType::i64, {B, 2});
    const int64_t v[] = {c.S - 1, c.S - 2, -1, -1, 1, 0};  // rows on disjoint slots, row 1 a pad row
    for (int64_t i = 0; i < B * 2; ++i) t.set(i, double(v[i]));
    return t;
  }();
  const HostTensor na = index_tensor({2, 1, 1});
  st = step_view(c, params, in, HostTensor{});
  in.o.fill_nan();
  o2.fill_nan();
  delta_snapshot_decode(c.fam, st, dp.state, idx, na, fast());
  st.o = o2;
  delta_snapshot_decode(c.fam, st, ap.state, idx, na, fast());
  expect_same_out(in.o, o2, "snapshot decode");
  tw.expect_same("snapshot decode");
}

delta::Cfg delta_cfg(DeltaFamily f, int64_t H, int64_t HV, DType state, DType act) {
  delta::Cfg c;
  c.fam = f;
  c.H = H, c.HV = HV, c.K = 128, c.V = 128;
  c.state = state, c.act = act;
  c.L = 8, c.T_max = 5, c.S = 4;
  return c;
}

TEST(ArenaPools, DeltaFastBackend) {
  uint64_t seed = 31;
  for (const Pads& pad : PADS)
    for (const delta::Cfg& c : {delta_cfg(DeltaFamily::gdn, 16, 64, DType::f32, DType::bf16),
                                delta_cfg(DeltaFamily::gdn, 16, 64, DType::bf16, DType::bf16),
                                delta_cfg(DeltaFamily::kda, 32, 32, DType::f32, DType::f32)}) {
      SCOPED_TRACE(std::string(delta::fam_name(c.fam)) + " HV" + std::to_string(c.HV) + " state " +
                   dtype_name(c.state) + " " + pad.str());
      delta_arena_run(c, seed++, pad);
      if (::testing::Test::HasFailure()) return;
    }
}

TEST(ArenaPools, DualDeltaFastBackend) {
  uint64_t seed = 35;
  for (const Pads& pad : PADS)
    for (ReadFormat f : {ReadFormat::fp8_e4m3, ReadFormat::nvfp4, ReadFormat::bf16})
      for (const delta::Cfg& c : {delta_cfg(DeltaFamily::gdn, 16, 64, DType::f32, DType::bf16),
                                  delta_cfg(DeltaFamily::kda, 32, 32, DType::f32, DType::bf16)}) {
        SCOPED_TRACE(std::string(delta::fam_name(c.fam)) + " read copy " + read_format_name(f) + " " + pad.str());
        delta_arena_run(c, seed++, pad, f);
        if (::testing::Test::HasFailure()) return;
      }
}

// ---------------------------------------------------------------- Mamba-2

// fmt: a dual pool with a read copy of that format.
void mamba2_arena_run(DType state, DType act, uint32_t seed, const Pads& pads, std::optional<ReadFormat> fmt = std::nullopt) {
  using namespace mamba2_test;
  const Shape s{128, 64, 128, 8};
  const int64_t S = 4, L = 8, Tm = 5, B = 3;
  std::mt19937 rng(seed);
  const Params p(s, rng);
  Pool pool(s, S, L, Tm, state, act, p);
  pool.state.fill_uniform(rng, -1, 1);
  for (int64_t i = 0; i < S; ++i) pool.set_cur(i, RingCursor{int32_t(rng() % uint64_t(L + Tm)), 0, 0});
  std::vector<std::pair<const HostTensor*, size_t>> pieces = {{&pool.state, pads.state}};
  for (const HostTensor* t : {&pool.ring_x, &pool.ring_dt, &pool.ring_B, &pool.cursor}) pieces.push_back({t, pads.ring_bytes(*t)});
  HostTensor copy;
  if (fmt) {
    copy.reset(DType::u8, {S, s.H, quant_layout(*fmt, s.P, s.N).tile_bytes});
    pieces.push_back({&copy, pads.state});
  }
  const Twin tw(S, pieces);
  ASSERT_GE(tw.slot_stride_bytes() * uint64_t(S - 1), uint64_t(1) << 33);
  const Mamba2Pool dp = [&] {
    Mamba2Pool v = pool.view();
    if (fmt) v.read_copy = copy, v.read_format = *fmt;
    return v;
  }();
  const Mamba2Pool ap = [&] {
    Mamba2Pool a = dp;
    a.state = tw.of(dp.state), a.ring_x = tw.of(dp.ring_x), a.ring_dt = tw.of(dp.ring_dt);
    a.ring_B = tw.of(dp.ring_B), a.cursor = tw.of(dp.cursor), a.read_copy = tw.of(dp.read_copy);
    return a;
  }();
  const std::vector<int64_t> rows = {S - 1, -1, S - 2};
  const HostTensor slots = index_tensor(rows);

  // prefill from zero: a [1, tokens] step viewed as [tokens]
  const std::vector<int64_t> cu = {0, 6, 6, 9};
  Step pst(s, 1, cu.back(), act, true);
  pst.randomize(rng, p);
  auto flat = [](Tensor v) {
    for (int i = 1; i < v.ndim; ++i) {
      v.shape[i - 1] = i == 1 ? v.shape[0] * v.shape[1] : v.shape[i];
      v.stride[i - 1] = v.stride[i];
    }
    v.ndim -= 1;
    return v;
  };
  const HostTensor cus = index_tensor(cu);
  Mamba2Prefill pf{flat(pst.x), flat(pst.dt), flat(pst.Bm), flat(pst.Cm), flat(pst.z), p.A, p.dt_bias, p.D, true,
                   cus, slots, -1, Tensor{}, flat(pst.y)};
  HostTensor py = twin_out(pst.y);
  mamba2_prefill(pf, dp, fast());
  pf.y = flat(py);
  mamba2_prefill(pf, ap, fast());
  expect_same_out(pst.y, py, "prefill");
  tw.expect_same("prefill");

  HostTensor acc(DType::i32, {B});
  bool pending = false;
  for (int step = 0; step < int(L) + 10; ++step) {
    const int64_t T = step < int(L) + 2 ? 1 : Tm;
    Step st(s, B, T, act, step % 2 == 0);
    st.randomize(rng, p);
    st.set_slots(rows);
    Tensor fused;
    if (pending && step % 2 == 0) {
      fused = acc;
    } else if (pending) {
      mamba2_commit(dp, slots, -1, acc, fast());
      mamba2_commit(ap, slots, -1, acc, fast());
    }
    Mamba2Step v = st.view(p);
    HostTensor y2 = twin_out(st.y);
    mamba2_replay_step(v, dp, fused, T == 1, fast());
    v.y = y2;
    mamba2_replay_step(v, ap, fused, T == 1, fast());
    expect_same_out(st.y, y2, "step " + std::to_string(step));
    tw.expect_same("step " + std::to_string(step));
    if (::testing::Test::HasFailure()) return;
    pending = T > 1;
    for (int64_t b = 0; b < B; ++b) acc.set(b, double(1 + int64_t(rng() % uint64_t(T))));
  }

  HostTensor m1(DType::f32, {B, s.H, s.P, s.N}), m2 = twin_out(m1);
  m1.fill_nan();
  mamba2_materialize(dp, slots, -1, m1, fast());
  mamba2_materialize(ap, slots, -1, m2, fast());
  expect_same_out(m1, m2, "materialize");
  mamba2_commit(dp, slots, -1, acc, fast());
  mamba2_commit(ap, slots, -1, acc, fast());
  mamba2_flush(dp, slots, -1, fast());
  mamba2_flush(ap, slots, -1, fast());
  tw.expect_same("commit / flush");
  const HostTensor src = index_tensor({S - 1}), dst = index_tensor({0}), back = index_tensor({S - 1}),
                   from = index_tensor({1}), rs = index_tensor({S - 2});
  for (const Mamba2Pool* q : {&dp, &ap}) {
    mamba2_copy_slot(*q, src, dst, -1, fast());
    mamba2_copy_slot(*q, from, back, -1, fast());
    mamba2_reset_slot(*q, rs, -1, fast());
  }
  tw.expect_same("copy / reset");

  Step st(s, B, 2, act, true);
  st.randomize(rng, p);
  st.set_slots(rows);
  Mamba2Step v = st.view(p);
  HostTensor y2 = twin_out(st.y);
  mamba2_decode(v, dp.state, fast());
  v.y = y2;
  mamba2_decode(v, ap.state, fast());
  expect_same_out(st.y, y2, "decode");
  tw.expect_same("decode");
  HostTensor idx(DType::i64, {B, 2});
  const int64_t iv[] = {S - 1, S - 2, -1, -1, 1, 0};  // rows on disjoint slots, row 1 a pad row
  for (int64_t i = 0; i < B * 2; ++i) idx.set(i, double(iv[i]));
  const HostTensor na = index_tensor({2, 1, 1});
  v = st.view(p);
  v.slot = Tensor{};
  st.y.fill_nan();
  y2.fill_nan();
  mamba2_snapshot_decode(v, dp.state, idx, na, fast());
  v.y = y2;
  mamba2_snapshot_decode(v, ap.state, idx, na, fast());
  expect_same_out(st.y, y2, "snapshot decode");
  tw.expect_same("snapshot decode");
}

TEST(ArenaPools, Mamba2FastBackend) {
  uint32_t seed = 41;
  for (const Pads& pad : PADS)
    for (DType st : {DType::f32, DType::bf16}) {
      SCOPED_TRACE(std::string("state ") + dtype_name(st) + " " + pad.str());
      mamba2_arena_run(st, DType::bf16, seed++, pad);
      if (::testing::Test::HasFailure()) return;
    }
}

TEST(ArenaPools, DualMamba2FastBackend) {
  uint32_t seed = 45;
  for (const Pads& pad : PADS)
    for (ReadFormat f : {ReadFormat::fp8_e4m3, ReadFormat::nvfp4, ReadFormat::bf16}) {
      SCOPED_TRACE(std::string("read copy ") + read_format_name(f) + " " + pad.str());
      mamba2_arena_run(DType::f32, DType::bf16, seed++, pad, f);
      if (::testing::Test::HasFailure()) return;
    }
}

// ---------------------------------------------------------------- conv1d

// Conv states of Mamba-2 H128·P64·N128 (dim = H·P + 2·G·N = 10240, W = 4).
void conv1d_arena_run(DType state, DType act, uint32_t seed, const Pads& pads) {
  const int64_t S = 4, W = 4, Tm = 5, dim = 10240, R = conv1d_state_rows(W, Tm), B = 3;
  std::mt19937 rng(seed);
  HostTensor cs(state, {S, R, dim}), pend(DType::i32, {S});
  cs.fill_normal(rng);
  const Twin tw(S, {{&cs, pads.ring_bytes(cs)}, {&pend, 0}});
  ASSERT_GE(tw.slot_stride_bytes() * uint64_t(S - 1), uint64_t(1) << 33);
  const Tensor acs = tw.of(cs.t()), apend = tw.of(pend.t());
  HostTensor weight(DType::f32, {dim, W}), bias(DType::f32, {dim});
  weight.fill_normal(rng, 0, 0.5);
  bias.fill_normal(rng, 0, 0.1);
  const HostTensor rows = index_tensor({S - 1, -1, S - 2});

  const std::vector<int64_t> cu = {0, 3, 3, 7};
  HostTensor px(act, {cu.back(), dim}), py(act, {cu.back(), dim});
  px.fill_normal(rng);
  py.fill_nan();
  HostTensor py2 = twin_out(py);
  const HostTensor cus = index_tensor(cu), init = index_tensor({1, 0, 0});
  Conv1dPrefill pf{px, weight, bias, true, cus, rows, -1, init, py};
  conv1d_prefill(pf, cs, pend, fast());
  pf.out = py2;
  conv1d_prefill(pf, acs, apend, fast());
  expect_same_out(py, py2, "conv1d prefill");
  tw.expect_same("conv1d prefill");

  HostTensor acc(DType::i32, {B});
  bool pending = false;
  for (int step = 0; step < 8; ++step) {
    const int64_t T = step < 2 ? 1 : Tm;
    HostTensor x(act, {B, T, dim}), out(act, {B, T, dim});
    x.fill_normal(rng);
    out.fill_nan();
    HostTensor out2 = twin_out(out);
    if (pending && step % 3 == 0) {  // a separate commit, then an update without counts
      conv1d_commit(cs, pend, rows, -1, acc, W, fast());
      conv1d_commit(acs, apend, rows, -1, acc, W, fast());
    }
    const Tensor na = pending && step % 3 != 0 ? acc.t() : Tensor{};
    Conv1dStep st{x, weight, bias, true, rows, -1, out};
    conv1d_update(st, cs, pend, na, fast());
    st.out = out2;
    conv1d_update(st, acs, apend, na, fast());
    expect_same_out(out, out2, "conv1d update " + std::to_string(step));
    tw.expect_same("conv1d update " + std::to_string(step));
    if (::testing::Test::HasFailure()) return;
    pending = true;
    for (int64_t b = 0; b < B; ++b) acc.set(b, double(1 + int64_t(rng() % uint64_t(T))));
  }
}

TEST(ArenaPools, Conv1dFastBackend) {
  uint32_t seed = 51;
  for (const Pads& pad : PADS)
    for (DType st : {DType::f32, DType::bf16}) {
      SCOPED_TRACE(std::string("state ") + dtype_name(st) + " " + pad.str());
      conv1d_arena_run(st, DType::bf16, seed++, pad);
      if (::testing::Test::HasFailure()) return;
    }
}

}  // namespace
}  // namespace replayssm::test
