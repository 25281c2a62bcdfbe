// Helpers of the GDN / KDA GPU tests: configurations, random inputs, replay
// pools on host and device (dense, or as views into a SlotArena), the
// reference and cuda Exec, and the replay / decode runs compared against
// the fp64 reference on host copies of the same bytes.
#pragma once
#include <algorithm>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gpu_util.h"
#include "replayssm/delta.h"

namespace replayssm::test::delta_gpu {

struct Shape {
  int64_t H, HV, K, V;
};
struct Cfg {
  DeltaFamily f;
  Shape s;
  DType state = DType::f32, act = DType::bf16, gdt = DType::f32, rd = DType::f32;
  bool raw = true;
};
inline DeltaShape dshape(const Cfg& c) { return DeltaShape{c.s.H, c.s.HV, c.s.K, c.s.V}; }

inline std::string name(const Cfg& c) {
  return std::string(c.f == DeltaFamily::kda ? "kda" : "gdn") + " H" + std::to_string(c.s.H) + " HV" +
         std::to_string(c.s.HV) + " K" + std::to_string(c.s.K) + " V" + std::to_string(c.s.V) + " state " +
         dtype_name(c.state) + " act " + dtype_name(c.act) + " g " + dtype_name(c.gdt) + " d " +
         dtype_name(c.rd) + (c.raw ? " raw" : " activated");
}
inline double tol(const Cfg& c) { return std::max({tolerance(c.state), tolerance(c.act), tolerance(c.rd)}); }
inline bool kda(const Cfg& c) { return c.f == DeltaFamily::kda; }

// One tensor on the host and, after upload(), on the device: its own
// allocation, or (after place()) a piece of a SlotArena.
struct Pair {
  HostTensor h;
  std::unique_ptr<DeviceTensor> d;
  const SlotArena* arena = nullptr;
  int piece = -1;
  Tensor av;  // the arena view
  void make(DType dt, const std::vector<int64_t>& shape) { h.reset(dt, shape); }
  // The device copy as a piece of `a` (h made, a not yet allocated), its
  // rows followed by row_pad bytes.
  void place(SlotArena& a, size_t row_pad = 0) {
    arena = &a;
    piece = a.add(h.t().dtype, std::vector<int64_t>(h.t().shape + 1, h.t().shape + h.t().ndim), row_pad);
  }
  void upload() {
    if (arena) {
      arena->upload(piece, h);
      av = arena->view(piece);
    } else {
      d = std::make_unique<DeviceTensor>(h);
    }
  }
  HostTensor fetch() const { return arena ? arena->download(piece) : d->to_host(); }
  const Tensor& ht() const { return h.t(); }
  const Tensor& dt() const { return arena ? av : d->t(); }
};

inline void expect_close(const HostTensor& got, const HostTensor& want, double t, const std::string& what) {
  const double e = rel_err(got.to_f64(), want.to_f64());
  EXPECT_LE(e, t) << what << ": relative error " << e;
}

template <class Rng>
double mixed_gate(Rng& rng) {  // log-decays near 0 (α ≈ 1) and far from it
  std::uniform_real_distribution<double> u(0, 1);
  return u(rng) < 0.5 ? -0.05 * u(rng) - 1e-3 : -0.3 - 2.7 * u(rng);
}

// Per-token inputs with leading dims `lead` ({B, T} or {tokens}).
struct Inputs {
  Pair q, k, v, g, beta, A_log, dt_bias, o;
  DeltaGating gating;

  template <class Rng>
  Inputs(const Cfg& c, const std::vector<int64_t>& lead, Rng& rng) {
    auto with = [&](std::initializer_list<int64_t> tail) {
      std::vector<int64_t> s(lead);
      s.insert(s.end(), tail);
      return s;
    };
    const Shape& s = c.s;
    q.make(c.act, with({s.H, s.K}));
    k.make(c.act, with({s.H, s.K}));
    v.make(c.act, with({s.HV, s.V}));
    g.make(c.gdt, kda(c) ? with({s.HV, s.K}) : with({s.HV}));
    beta.make(c.gdt, with({s.HV}));
    o.make(c.act, with({s.HV, s.V}));
    v.h.fill_normal(rng, 0, 1);
    gating.raw_gate = gating.raw_beta = gating.l2norm_qk = c.raw;
    if (c.raw) {
      q.h.fill_normal(rng, 0, 1);
      k.h.fill_normal(rng, 0, 1);
      g.h.fill_normal(rng, 0, 1.5);
      beta.h.fill_normal(rng, 0, 1.5);
      A_log.make(DType::f32, {s.HV});
      A_log.h.fill_uniform(rng, -2, 1);
      dt_bias.make(DType::f32, kda(c) ? std::vector<int64_t>{s.HV, s.K} : std::vector<int64_t>{s.HV});
      dt_bias.h.fill_normal(rng, 0, 0.5);
      A_log.upload();
      dt_bias.upload();
    } else {  // already activated: unit keys, gates and β as given
      gating.q_scale = 0.7f;
      std::normal_distribution<double> nd(0, 1);
      const int64_t rows = k.h.numel() / s.K;
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<double> x(static_cast<size_t>(s.K));
        double n2 = 0;
        for (auto& e : x) { e = nd(rng); n2 += e * e; }
        for (int64_t i = 0; i < s.K; ++i) {
          k.h.set(r * s.K + i, x[size_t(i)] / std::sqrt(n2));
          q.h.set(r * s.K + i, nd(rng) / std::sqrt(double(s.K)));
        }
      }
      for (int64_t i = 0; i < g.h.numel(); ++i) g.h.set(i, mixed_gate(rng));
      beta.h.fill_uniform(rng, 0.05, 1.0);
    }
    o.h.fill_nan();
    for (Pair* p : {&q, &k, &v, &g, &beta, &o}) p->upload();
  }
  void poison() {
    o.h.fill_nan();
    o.d->upload(o.h);
  }
  DeltaStep step(bool dev, const Pair& slot, int64_t pad) const {
    auto t = [&](const Pair& p) { return p.h.t().defined() ? (dev ? p.dt() : p.ht()) : Tensor{}; };
    DeltaStep st;
    st.q = t(q); st.k = t(k); st.v = t(v); st.g = t(g); st.beta = t(beta);
    st.A_log = t(A_log); st.dt_bias = t(dt_bias); st.o = t(o);
    st.gating = gating;
    st.slot = t(slot);
    st.pad_slot_id = pad;
    return st;
  }
  // Varlen prefill arguments (inputs of leading dim {tokens}); `init` may be empty.
  DeltaPrefill prefill(bool dev, const Pair& cu_seqlens, const Pair& slot, const Pair& init) const {
    auto t = [&](const Pair& p) { return p.h.t().defined() ? (dev ? p.dt() : p.ht()) : Tensor{}; };
    DeltaPrefill p;
    p.q = t(q); p.k = t(k); p.v = t(v); p.g = t(g); p.beta = t(beta);
    p.A_log = t(A_log); p.dt_bias = t(dt_bias); p.o = t(o);
    p.gating = gating;
    p.cu_seqlens = t(cu_seqlens);
    p.slot = t(slot);
    p.pad_slot_id = -1;
    p.initial = t(init);
    return p;
  }
};

// Replay pool (or a baseline pool with only the state). in_arena: every
// device tensor a piece of one SlotArena (slot-major, the last slots past
// 2^31 elements) instead of its own dense allocation: the checkpoint's rows
// followed by row_pad bytes, the rings' and cursors' by ring_pad elements.
struct Pool {
  Pair state, rd, rk, rks, rg, cur;
  int64_t L = 0;
  bool rings = false;
  std::unique_ptr<SlotArena> arena;

  template <class Rng>
  Pool(const Cfg& c, int64_t S, int64_t L_, int64_t T_max, Rng& rng, bool with_rings = true, bool in_arena = false,
       size_t row_pad = 0, int64_t ring_pad = 0)
      : L(L_), rings(with_rings) {
    const Shape& s = c.s;
    state.make(c.state, {S, s.HV, s.V, s.K});
    state.h.fill_normal(rng, 0, 0.5);
    if (rings) {
      const int64_t R = L + T_max;
      rd.make(c.rd, {S, R, s.HV, s.V});
      rk.make(c.act, {S, R, s.H, s.K});
      rks.make(DType::f32, {S, R, s.H});
      rg.make(DType::f32, kda(c) ? std::vector<int64_t>{S, R, s.HV, s.K} : std::vector<int64_t>{S, R, s.HV});
      cur.make(DType::i32, {S, 3});
      rd.h.fill_normal(rng, 0, 1);  // stale contents: never read
      rk.h.fill_normal(rng, 0, 1);
      rks.h.fill_uniform(rng, 0.1, 1);
      rg.h.fill_uniform(rng, -1, 0);
      std::uniform_int_distribution<int64_t> start(0, R - 1);
      for (int64_t i = 0; i < S; ++i) cur.h.set(i * 3, double(start(rng)));  // random ring starts
    }
    if (in_arena) {
      arena = std::make_unique<SlotArena>(S, cuda_arena_memory());
      for (Pair* p : pairs())
        p->place(*arena, p == &state ? row_pad : size_t(ring_pad) * dtype_size(p->h.t().dtype));
      arena->allocate();
    }
    for (Pair* p : pairs()) p->upload();
  }
  std::vector<Pair*> pairs() {
    if (!rings) return {&state};
    return {&state, &rd, &rk, &rks, &rg, &cur};
  }
  DeltaPool view(bool dev) const {
    auto t = [&](const Pair& p) { return p.h.t().defined() ? (dev ? p.dt() : p.ht()) : Tensor{}; };
    DeltaPool p;
    p.state = t(state);
    if (rings) { p.ring_d = t(rd); p.ring_k = t(rk); p.ring_ks = t(rks); p.ring_g = t(rg); p.cursor = t(cur); }
    p.L = L;
    return p;
  }
  void expect_equal(const Cfg& c, const std::string& what, bool state_too = true, double tol_scale = 1) const {
    if (state_too) expect_close(state.fetch(), state.h, tol_scale * tol(c), what + " state");
    if (arena) arena->expect_guards(what);
    if (!rings) return;
    expect_close(rd.fetch(), rd.h, tol_scale * tol(c), what + " ring_d");
    EXPECT_TRUE(rk.fetch().bytes_equal(rk.h)) << what << " ring_k";
    expect_close(rks.fetch(), rks.h, 1e-5, what + " ring_ks");
    expect_close(rg.fetch(), rg.h, 1e-5, what + " ring_g");
    EXPECT_TRUE(cur.fetch().bytes_equal(cur.h)) << what << " cursor";
  }
};

inline Exec ref_exec() { Exec e; e.backend = Backend::reference; return e; }
inline Exec cuda_exec(int32_t* status = nullptr) {
  Exec e;
  e.backend = Backend::cuda;
  e.device_status = status;
  return e;
}
inline void sync() { ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess); }

// B distinct slots out of S with row `pad_row` (if >= 0) set to the pad id.
template <class Rng>
Pair make_slots(int64_t B, int64_t S, int64_t pad_row, int64_t pad, Rng& rng) {
  std::vector<int64_t> all(static_cast<size_t>(S));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(size_t(B));
  if (pad_row >= 0 && pad_row < B) all[size_t(pad_row)] = pad;
  Pair p;
  p.h = index_tensor(all);
  p.upload();
  return p;
}

// One baseline decode of B rows on S slots (row 1 a pad row), T tokens:
// outputs and the whole pool against the reference.
inline void decode_run(const Cfg& c, int64_t B, int64_t S, int64_t T, std::mt19937& rng) {
  Inputs in(c, {B, T}, rng);
  Pool pool(c, S, 0, 0, rng, false);
  Pair slot = make_slots(B, S, 1, -1, rng);
  delta_decode(c.f, in.step(false, slot, -1), pool.state.ht(), ref_exec());
  delta_decode(c.f, in.step(true, slot, -1), pool.state.dt(), cuda_exec());
  sync();
  expect_close(in.o.fetch(), in.o.h, tol(c), "o");
  pool.expect_equal(c, "decode");
}

// `steps` replay steps of T tokens on `pool` (T = 1: commit_all; T > 1:
// random acceptances committed by the next step), compared after every step;
// the pool after every step or after the last.
// max_err, when given, receives the largest relative output error of the run.
// otol > 0: the output tolerance instead of tol(c).
inline void replay_steps(const Cfg& c, Pool& pool, const Pair& slot, int64_t T, int steps, std::mt19937& rng,
                         bool check_pool_each_step, double* max_err = nullptr, const Exec& oracle = ref_exec(),
                         double otol = 0) {
  const int64_t B = slot.h.numel();
  bool pending = false;
  for (int step = 0; step < steps; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    Inputs in(c, {B, T}, rng);
    Pair acc;
    if (T > 1 && pending) {
      acc.make(DType::i32, {B});
      for (int64_t b = 0; b < B; ++b) acc.h.set(b, double(1 + int64_t(rng() % T)));
      acc.upload();
    }
    const bool commit_all = T == 1;
    delta_replay_step(c.f, in.step(false, slot, -1), pool.view(false), acc.h.t().defined() ? acc.ht() : Tensor{},
                      commit_all, oracle);
    delta_replay_step(c.f, in.step(true, slot, -1), pool.view(true), acc.h.t().defined() ? acc.dt() : Tensor{},
                      commit_all, cuda_exec());
    sync();
    pending = !commit_all;
    const HostTensor o = in.o.fetch();
    expect_close(o, in.o.h, otol > 0 ? otol : tol(c), "o");
    if (max_err) *max_err = std::max(*max_err, rel_err(o.to_f64(), in.o.h.to_f64()));
    if (check_pool_each_step || step == steps - 1) pool.expect_equal(c, "replay");
    if (::testing::Test::HasFailure()) return;
  }
}

// replay_steps on a fresh pool of S slots and B random ones of them (row 1 a
// pad row when B > 2).
inline void replay_run(const Cfg& c, int64_t B, int64_t S, int64_t L, int64_t T, int steps, uint32_t seed,
                       bool check_pool_each_step, double* max_err = nullptr, const Exec& oracle = ref_exec(),
                       double otol = 0) {
  std::mt19937 rng(seed);
  Pool pool(c, S, L, T, rng);
  Pair slot = make_slots(B, S, B > 2 ? 1 : -1, -1, rng);
  replay_steps(c, pool, slot, T, steps, rng, check_pool_each_step, max_err, oracle, otol);
}

// The snapshot decode of 3 rows of 4 tokens on a state pool of 14 slots
// (row 1 a pad row, row 2 skipping its last snapshot), outputs and every
// state against the reference. in_arena: the pool in a SlotArena, the
// snapshots on its last slots.
inline void snapshot_run(const Cfg& c, std::mt19937& rng, bool in_arena = false) {
  const int64_t B = 3, T = 4, S = B * T + 2;
  Inputs in(c, {B, T}, rng);
  Pool pool(c, S, 0, 0, rng, false, in_arena);
  std::vector<int64_t> ids(static_cast<size_t>(S));
  std::iota(ids.begin(), ids.end(), 0);
  if (in_arena) std::reverse(ids.begin(), ids.end());
  else std::shuffle(ids.begin(), ids.end(), rng);
  Pair idx, acc;
  idx.make(DType::i64, {B, T});
  acc.make(DType::i32, {B});
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) idx.h.set(b * T + t, double(ids[size_t(b * T + t)]));
    acc.h.set(b, double(1 + int64_t(rng() % T)));
  }
  idx.h.set(1 * T + 0, -1);  // row 1 is a pad row
  idx.h.set(2 * T + 3, -1);  // row 2 skips its last snapshot
  acc.h.set(2, 2);
  idx.upload();
  acc.upload();
  Pair none;
  delta_snapshot_decode(c.f, in.step(false, none, -1), pool.state.ht(), idx.ht(), acc.ht(), ref_exec());
  delta_snapshot_decode(c.f, in.step(true, none, -1), pool.state.dt(), idx.dt(), acc.dt(), cuda_exec());
  sync();
  expect_close(in.o.fetch(), in.o.h, tol(c), "o");
  pool.expect_equal(c, "snapshot");
}

// The last n slots of S, the farthest from an arena's start first.
inline Pair last_slots(int64_t n, int64_t S) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(S - 1 - i);
  Pair p;
  p.h = index_tensor(v);
  p.upload();
  return p;
}

// Prefill on a pool of 6 slots whose rows hold committed records: from the
// state and from zero, an empty prompt, a pad row; outputs and the pool
// against the reference. in_arena: the pool in a SlotArena, the rows on its
// last slots.
inline void prefill_run(const Cfg& c, std::mt19937& rng, bool in_arena = false) {
  const int64_t S = 6, L = 8;
  Pool pool(c, S, L, 2, rng, true, in_arena);
  // Give the slots committed records first.
  Pair slot4 = in_arena ? last_slots(4, S) : make_slots(4, S, -1, -1, rng);
  for (int i = 0; i < 5; ++i) {
    Inputs st(c, {4, 1}, rng);
    delta_replay_step(c.f, st.step(false, slot4, -1), pool.view(false), Tensor{}, true, ref_exec());
    delta_replay_step(c.f, st.step(true, slot4, -1), pool.view(true), Tensor{}, true, cuda_exec());
  }
  const std::vector<int64_t> cu = {0, 5, 5, 17, 20};  // an empty prompt, a pad row
  Inputs in(c, {cu.back()}, rng);
  Pair cus, slot, init;
  cus.h = index_tensor(cu);
  cus.upload();
  slot.h = index_tensor({int64_t(slot4.h.get(0)), int64_t(slot4.h.get(1)), -1,
                         int64_t(slot4.h.get(3))});
  slot.upload();
  init.h = index_tensor({1, 0, 0, 1});
  init.upload();
  delta_prefill(c.f, in.prefill(false, cus, slot, init), pool.view(false), ref_exec());
  delta_prefill(c.f, in.prefill(true, cus, slot, init), pool.view(true), cuda_exec());
  sync();
  expect_close(in.o.fetch(), in.o.h, tol(c), "o");
  pool.expect_equal(c, "prefill");
}

// Slot operations on a pool of 6 slots: materialize (a pending window
// ignored, f32 / f64 / bf16 out, a pad entry), commit, flush, copy, reset,
// then a step on the slots; every result against the reference. in_arena:
// the pool in a SlotArena, the rows (and the copies' sources) on its last
// slots.
inline void slot_ops_run(const Cfg& c, std::mt19937& rng, bool in_arena = false) {
  const int64_t S = 6, L = 8, T = 3, B = 4;
  Pool pool(c, S, L, T, rng, true, in_arena);
  Pair slot = in_arena ? last_slots(B, S) : make_slots(B, S, -1, -1, rng);
  for (int i = 0; i < 2; ++i) {  // committed records plus a pending window
    Inputs st(c, {B, T}, rng);
    delta_replay_step(c.f, st.step(false, slot, -1), pool.view(false), Tensor{}, i == 0, ref_exec());
    delta_replay_step(c.f, st.step(true, slot, -1), pool.view(true), Tensor{}, i == 0, cuda_exec());
  }
  // materialize (pending ignored), f32 and f64 out, with a pad entry
  Pair ms = in_arena ? last_slots(3, S) : make_slots(3, S, -1, -1, rng);
  ms.h.set(1, -1);
  ms.upload();
  for (DType odt : {DType::f32, DType::f64, DType::bf16}) {
    Pair out;
    out.make(odt, {3, c.s.HV, c.s.V, c.s.K});
    out.h.fill_nan();
    out.upload();
    delta_materialize(c.f, pool.view(false), ms.ht(), -1, out.ht(), ref_exec());
    delta_materialize(c.f, pool.view(true), ms.dt(), -1, out.dt(), cuda_exec());
    sync();
    expect_close(out.fetch(), out.h, std::max(tol(c), tolerance(odt)), std::string("materialize ") + dtype_name(odt));
  }
  // commit with random counts, then flush
  Pair acc;
  acc.make(DType::i64, {B});
  for (int64_t b = 0; b < B; ++b) acc.h.set(b, double(1 + int64_t(rng() % T)));
  acc.upload();
  delta_commit(c.f, pool.view(false), slot.ht(), -1, acc.ht(), ref_exec());
  delta_commit(c.f, pool.view(true), slot.dt(), -1, acc.dt(), cuda_exec());
  sync();
  pool.expect_equal(c, "commit");
  delta_flush(c.f, pool.view(false), slot.ht(), -1, ref_exec());
  delta_flush(c.f, pool.view(true), slot.dt(), -1, cuda_exec());
  sync();
  pool.expect_equal(c, "flush");
  // copy and reset
  Pair src = in_arena ? last_slots(2, S) : make_slots(2, S, -1, -1, rng), dst;
  std::vector<int64_t> rest;
  for (int64_t s = 0; s < S; ++s)
    if (s != int64_t(src.h.get(0)) && s != int64_t(src.h.get(1))) rest.push_back(s);
  dst.h = index_tensor({rest[0], rest[1]});
  dst.upload();
  delta_copy_slot(c.f, pool.view(false), src.ht(), dst.ht(), -1, ref_exec());
  delta_copy_slot(c.f, pool.view(true), src.dt(), dst.dt(), -1, cuda_exec());
  delta_reset_slot(c.f, pool.view(false), src.ht(), -1, ref_exec());
  delta_reset_slot(c.f, pool.view(true), src.dt(), -1, cuda_exec());
  sync();
  pool.expect_equal(c, "copy/reset");
  // one more step on all slots after the slot operations
  Pair all = in_arena ? last_slots(B, S) : make_slots(B, S, -1, -1, rng);
  Inputs st(c, {B, 1}, rng);
  delta_replay_step(c.f, st.step(false, all, -1), pool.view(false), Tensor{}, true, ref_exec());
  delta_replay_step(c.f, st.step(true, all, -1), pool.view(true), Tensor{}, true, cuda_exec());
  sync();
  expect_close(st.o.fetch(), st.o.h, tol(c), "o after slot ops");
  pool.expect_equal(c, "after slot ops");
}

}  // namespace replayssm::test::delta_gpu
