// Helpers of the Mamba-2 GPU tests: shapes and dtype sets, per-layer
// parameters, step inputs and replay pools on host and device (dense, or as
// views into a SlotArena), and the replay run compared against the fp64
// reference on host copies of the same bytes.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gpu_util.h"
#include "replayssm/mamba2.h"

namespace replayssm::test::mamba2_gpu {

struct Shape {
  int64_t H, P, N, G;
};
// Model shapes (design §6) and an odd one (P = 80 with N = 64, 2 heads per group).
const Shape MODEL_SHAPES[] = {{96, 80, 128, 8}, {64, 64, 128, 8}, {128, 64, 128, 8}, {256, 64, 128, 8}};
const Shape ODD = {6, 80, 64, 3};

struct Dtypes {
  DType state, act, dt;
};
const Dtypes DTYPE_SET[] = {
    {DType::f32, DType::bf16, DType::f32}, {DType::f32, DType::f32, DType::f32},
    {DType::bf16, DType::bf16, DType::bf16}, {DType::bf16, DType::f32, DType::f32},
    {DType::f16, DType::bf16, DType::f32}, {DType::f16, DType::f32, DType::f32},
    {DType::f32, DType::f16, DType::f16}, {DType::f16, DType::f16, DType::f32}};

inline int rank(DType d) { return d == DType::bf16 ? 3 : d == DType::f16 ? 2 : 1; }
inline double tol(DType state, DType act) { return tolerance(rank(state) >= rank(act) ? state : act); }
inline std::string name(const Dtypes& d) {
  return std::string("state ") + dtype_name(d.state) + " act " + dtype_name(d.act);
}

inline HostTensor download(const DeviceTensor& d) { return d.to_host(); }
inline double err(const HostTensor& gpu, const HostTensor& ref) { return rel_err(gpu.to_f64(), ref.to_f64()); }

// Per-layer parameters: A (decays near 1 and far from it), dt_bias, D.
struct Layer {
  HostTensor A, dt_bias, D;
  Layer(std::mt19937& rng, int64_t H) : A(DType::f32, {H}), dt_bias(DType::f32, {H}), D(DType::f32, {H}) {
    std::uniform_real_distribution<double> u(0, 1);
    for (int64_t h = 0; h < H; ++h) {
      A.set(h, -std::exp(std::log(0.05) + u(rng) * std::log(8.0 / 0.05)));
      dt_bias.set(h, u(rng) - 0.5);
      D.set(h, 0.5 + u(rng));
    }
  }
};

// Inputs of one step (host) and their device copies.
struct Step {
  HostTensor x, dt, Bm, Cm, z, A, dt_bias, D, slot, y;
  bool has_z = true;
  int64_t pad = -1;
  DeviceTensor dx, ddt, dB, dC, dz, dA, dbias, dD, dslot, dy;

  Step(std::mt19937& rng, int64_t B, int64_t T, const Shape& s, const Dtypes& dt_,
       const std::vector<int64_t>& slots, bool with_z, const Layer& layer)
      : x(dt_.act, {B, T, s.H, s.P}), dt(dt_.dt, {B, T, s.H}), Bm(dt_.act, {B, T, s.G, s.N}),
        Cm(dt_.act, {B, T, s.G, s.N}), z(dt_.act, {B, T, s.H, s.P}), A(DType::f32, {s.H}),
        dt_bias(DType::f32, {s.H}), D(DType::f32, {s.H}), y(dt_.act, {B, T, s.H, s.P}),
        has_z(with_z) {
    x.fill_normal(rng);
    dt.fill_uniform(rng, -4.0, 1.0);  // δ from ~0.02 to ~1.5 after bias and softplus
    Bm.fill_normal(rng, 0, 0.3);
    Cm.fill_normal(rng, 0, 0.3);
    z.fill_normal(rng);
    A.copy_from(layer.A);
    dt_bias.copy_from(layer.dt_bias);
    D.copy_from(layer.D);
    slot = index_tensor(slots);
    upload();
  }
  void upload() {
    dx.upload(x); ddt.upload(dt); dB.upload(Bm); dC.upload(Cm); dz.upload(z);
    dA.upload(A); dbias.upload(dt_bias); dD.upload(D); dslot.upload(slot);
    poison();
  }
  // NaN in both outputs before a call.
  void poison() {
    y.fill_nan();
    dy.upload(y);
  }
  Mamba2Step host() const {
    return Mamba2Step{x, dt, Bm, Cm, has_z ? z.t() : Tensor{}, A, dt_bias, D, true, slot, pad, y.t()};
  }
  Mamba2Step dev() const {
    return Mamba2Step{dx, ddt, dB, dC, has_z ? dz.t() : Tensor{}, dA, dbias, dD, true, dslot, pad, dy.t()};
  }
};

// A replay pool on host and device with identical bytes. in_arena: the
// device tensors are pieces of one SlotArena (slot-major, the last slots
// past 2^31 elements; the checkpoint's rows followed by row_pad bytes, the
// rings' and cursors' by ring_pad elements) instead of the dense dstate …
// dcursor.
struct Pool {
  Layer layer;
  HostTensor state, rx, rdt, rB, cursor;
  DeviceTensor dstate, drx, drdt, drB, dcursor, dA;
  int64_t L;
  std::unique_ptr<SlotArena> arena;
  Tensor av[5];  // arena views of state, rx, rdt, rB, cursor
  Pool(std::mt19937& rng, int64_t S, const Shape& s, const Dtypes& d, int64_t L_, int64_t T_max, bool in_arena = false,
       size_t row_pad = 0, int64_t ring_pad = 0)
      : layer(rng, s.H), state(d.state, {S, s.H, s.P, s.N}), rx(d.act, {S, L_ + T_max, s.H, s.P}),
        rdt(DType::f32, {S, L_ + T_max, s.H}), rB(d.act, {S, L_ + T_max, s.G, s.N}),
        cursor(DType::i32, {S, 3}), L(L_) {
    state.fill_uniform(rng, -1, 1);
    std::uniform_int_distribution<int> start(0, int(L_ + T_max - 1));
    for (int64_t i = 0; i < S; ++i) cursor.set(i * 3, start(rng));  // random ring start, empty ring
    if (in_arena) {
      arena = std::make_unique<SlotArena>(S, cuda_arena_memory());
      for (const HostTensor* h : hosts())
        arena->add(h->t().dtype, std::vector<int64_t>(h->t().shape + 1, h->t().shape + h->t().ndim),
                   h == &state ? row_pad : size_t(ring_pad) * dtype_size(h->t().dtype));
      arena->allocate();
    }
    upload();
  }
  std::vector<const HostTensor*> hosts() const { return {&state, &rx, &rdt, &rB, &cursor}; }
  void upload() {
    if (arena) {
      for (int i = 0; i < 5; ++i) {
        arena->upload(i, *hosts()[size_t(i)]);
        av[i] = arena->view(i);
      }
    } else {
      dstate.upload(state); drx.upload(rx); drdt.upload(rdt); drB.upload(rB); dcursor.upload(cursor);
    }
    dA.upload(layer.A);
  }
  Mamba2Pool host() const { return Mamba2Pool{state, rx, rdt, rB, cursor, L, layer.A}; }
  Mamba2Pool dev() const {
    if (arena) return Mamba2Pool{av[0], av[1], av[2], av[3], av[4], L, dA};
    return Mamba2Pool{dstate, drx, drdt, drB, dcursor, L, dA};
  }
  const Tensor& dev_state() const { return arena ? av[0] : dstate.t(); }
  // Device tensor i of hosts() on the host.
  HostTensor fetch(int i) const {
    if (arena) return arena->download(i);
    const DeviceTensor* d[] = {&dstate, &drx, &drdt, &drB, &dcursor};
    return d[i]->to_host();
  }
  // Checkpoint, cursors, records (x, B exact; δ within fp32 tolerance).
  void expect_match(double t, const std::string& what) const {
    EXPECT_LE(err(fetch(0), state), t) << what << ": checkpoint";
    EXPECT_TRUE(fetch(4).bytes_equal(cursor)) << what << ": cursor";
    EXPECT_TRUE(fetch(1).bytes_equal(rx)) << what << ": ring_x";
    EXPECT_TRUE(fetch(3).bytes_equal(rB)) << what << ": ring_B";
    EXPECT_LE(err(fetch(2), rdt), 1e-5) << what << ": ring_dt";
    if (arena) arena->expect_guards(what);
  }
};

inline Exec ref_exec() { return Exec{Backend::reference, nullptr, 0, nullptr}; }

// [1, tokens, ...] viewed as [tokens, ...] (prefill inputs built as one row).
inline Tensor flat(Tensor v) {
  for (int i = 1; i < v.ndim; ++i) {
    v.shape[i - 1] = i == 1 ? v.shape[0] * v.shape[1] : v.shape[i];
    v.stride[i - 1] = v.stride[i];
  }
  v.ndim -= 1;
  return v;
}

class DeviceStatus {
 public:
  DeviceStatus() { HostTensor h(DType::i32, {1}); d_.upload(h); }
  Exec exec() const { return Exec{Backend::cuda, nullptr, 0, static_cast<int32_t*>(d_.t().data)}; }
  int32_t read() const { return int32_t(d_.to_host().get(0)); }
 private:
  DeviceTensor d_;
};

inline void expect_pad_zero(const HostTensor& y, int64_t row, int64_t per_row, const std::string& what) {
  for (int64_t i = row * per_row; i < (row + 1) * per_row; ++i)
    if (y.get(i) != 0.0) { ADD_FAILURE() << what << ": pad row output not zero at " << i; return; }
}

// `steps` replay steps of T tokens of the rows `rows` (row 1 a pad row) on
// `pool`, as replay_run describes; returns the largest output error seen.
inline double replay_steps(std::mt19937& rng, Pool& pool, const std::vector<int64_t>& rows, const Shape& s,
                           const Dtypes& d, int steps, const std::string& what, int64_t T = 1,
                           const Exec& oracle = ref_exec()) {
  // the fast CPU backend is within tol of fp64, as the GPU is
  const double t = (oracle.backend == Backend::reference ? 1 : 2) * tol(d.state, d.act);
  const int64_t B = int64_t(rows.size());
  HostTensor acc(DType::i32, {B});
  std::uniform_int_distribution<int> a(1, int(T));
  double worst = 0;
  for (int step = 0; step < steps; ++step) {
    Step st(rng, B, T, s, d, rows, step % 2 == 0, pool.layer);
    for (int64_t b = 0; b < B; ++b) acc.set(b, a(rng));
    const DeviceTensor dacc(acc);
    const bool pass = T > 1 && step > 0;
    mamba2_replay_step(st.host(), pool.host(), pass ? acc.t() : Tensor{}, T == 1, oracle);
    DeviceStatus ds;
    mamba2_replay_step(st.dev(), pool.dev(), pass ? dacc.t() : Tensor{}, T == 1, ds.exec());
    EXPECT_EQ(ds.read(), 0) << what << " step " << step;
    const HostTensor y = download(st.dy);
    const double e = err(y, st.y);
    worst = std::max(worst, e);
    EXPECT_LE(e, t) << what << " T=" << T << " replay step " << step;
    expect_pad_zero(y, 1, T * s.H * s.P, what);
    if (::testing::Test::HasFailure()) return worst;
  }
  pool.expect_match(t, what + " replay");
  return worst;
}

// T = 1 replay steps with commit_all at batch 3 (slots {2, pad, 1}), L = 4 (a
// flush every fourth step): outputs and the pad row every step, the whole
// pool at the end, against the fp64 reference.
// With B > 3 rows: B + 1 slots (B + 1 prime to 7), row b on slot 7b mod (B + 1),
// row 1 a pad row: the batch sizes at which the launchers pick their
// production tiles (multi-head blocks), not the small-grid fallbacks.
// T > 1: speculative windows of T tokens, L = 8, each row accepting a random
// count of the previous window (num_accepted, committed by the step), so the
// rows flush at different steps. Returns the largest output error seen.
inline double replay_run(std::mt19937& rng, const Shape& s, const Dtypes& d, int steps, const std::string& what,
                         int64_t B = 3, int64_t T = 1, const Exec& oracle = ref_exec()) {
  std::vector<int64_t> rows = {2, -1, 1};
  if (B > 3) {
    rows.clear();
    for (int64_t b = 0; b < B; ++b) rows.push_back(b == 1 ? -1 : b * 7 % (B + 1));
  }
  Pool pool(rng, std::max<int64_t>(4, B + 1), s, d, T == 1 ? 4 : 8, T);
  return replay_steps(rng, pool, rows, s, d, steps, what, T, oracle);
}

// Slots of a test's layout on a pool of S: s itself, or S − 1 − s when the
// pool is in an arena (its far slots).
inline std::vector<int64_t> layout_slots(std::vector<int64_t> v, int64_t S, bool in_arena) {
  if (in_arena)
    for (int64_t& x : v)
      if (x >= 0) x = S - 1 - x;
  return v;
}

// The snapshot decode of 3 rows of 4 tokens on a pool of 9 slots (row 1 a
// pad row), outputs and every state against the reference. in_arena: the
// pool in a SlotArena, its slots mirrored (layout_slots).
inline void snapshot_run(std::mt19937& rng, const Shape& s, const Dtypes& d, bool in_arena = false) {
  const int64_t T = 4, S = 9;
  Pool pool(rng, S, s, d, 4, 1, in_arena);
  HostTensor idx = index_tensor(layout_slots({0, 1, 2, 3, -1, 5, 5, 5, 4, 5, 6, 7}, S, in_arena));
  idx.t().ndim = 2; idx.t().shape[0] = 3; idx.t().shape[1] = T; idx.t().stride[0] = T; idx.t().stride[1] = 1;
  const DeviceTensor didx(idx);
  HostTensor acc = index_tensor({3, 1, 2});
  const DeviceTensor dacc(acc);
  Step st(rng, 3, T, s, d, {0, 0, 0}, true, pool.layer);
  mamba2_snapshot_decode(st.host(), pool.state, idx, acc, ref_exec());
  DeviceStatus ds;
  mamba2_snapshot_decode(st.dev(), pool.dev_state(), didx, dacc, ds.exec());
  EXPECT_EQ(ds.read(), 0);
  const double t = tol(d.state, d.act);
  const HostTensor y = download(st.dy);
  EXPECT_LE(err(y, st.y), t) << name(d);
  expect_pad_zero(y, 1, T * s.H * s.P, "snapshot");
  EXPECT_LE(err(pool.fetch(0), pool.state), t) << name(d) << " snapshot states";
  if (pool.arena) pool.arena->expect_guards("snapshot");
}

// Varlen prefill on a pool of 5 slots holding committed records: from zero,
// from the current state, a pad row and an empty prompt; outputs and the
// pool against the reference. in_arena: the pool in a SlotArena, its slots
// mirrored (layout_slots).
inline void prefill_run(std::mt19937& rng, const Shape& s, const Dtypes& d, bool in_arena = false) {
  const int64_t S = 5;
  const double t = tol(d.state, d.act);
  Pool pool(rng, S, s, d, 8, 1, in_arena);
  for (int step = 0; step < 5; ++step) {  // committed records on four slots
    Step st(rng, 4, 1, s, d, layout_slots({0, 1, 2, 3}, S, in_arena), false, pool.layer);
    mamba2_replay_step(st.host(), pool.host(), Tensor{}, true, ref_exec());
    mamba2_replay_step(st.dev(), pool.dev(), Tensor{}, true, Exec{Backend::cuda});
  }
  const std::vector<int64_t> cu = {0, 37, 37, 42, 61};
  const int64_t tokens = cu.back();
  Step st(rng, 1, tokens, s, d, {0}, true, pool.layer);  // [1, tokens, ...] viewed as [tokens, ...]
  HostTensor cuh = index_tensor(cu), slots = index_tensor(layout_slots({3, 0, -1, 1}, S, in_arena)),
             init = index_tensor({0, 1, 1, 1});
  const DeviceTensor dcu(cuh), dslots(slots), dinit(init);
  Mamba2Prefill hp{flat(st.x), flat(st.dt), flat(st.Bm), flat(st.Cm), flat(st.z), st.A, st.dt_bias, st.D, true, cuh, slots, -1, init, flat(st.y)};
  Mamba2Prefill dp{flat(st.dx), flat(st.ddt), flat(st.dB), flat(st.dC), flat(st.dz), st.dA, st.dbias, st.dD, true, dcu, dslots, -1, dinit, flat(st.dy)};
  mamba2_prefill(hp, pool.host(), ref_exec());
  DeviceStatus ds;
  mamba2_prefill(dp, pool.dev(), ds.exec());
  EXPECT_EQ(ds.read(), 0);
  const HostTensor y = download(st.dy);
  EXPECT_LE(err(y, st.y), t) << name(d) << " prefill outputs";
  for (int64_t i = 37 * s.H * s.P; i < 42 * s.H * s.P; ++i)
    if (y.get(i) != 0.0) { ADD_FAILURE() << "pad prompt output not zero"; break; }
  pool.expect_match(t, "prefill " + name(d));
}

// Slot operations on a pool of 6 slots: materialize (f32 / f64 / bf16 out, a
// pad entry), flush, copy, reset, then steps on the copied and reset slots;
// every result against the reference. in_arena: the pool in a SlotArena,
// its slots mirrored (layout_slots).
inline void slot_ops_run(std::mt19937& rng, const Shape& s, const Dtypes& d, bool in_arena = false) {
  const int64_t S = 6;
  auto at = [&](std::vector<int64_t> v) { return layout_slots(std::move(v), S, in_arena); };
  const double t = tol(d.state, d.act);
  Pool pool(rng, S, s, d, 8, 2, in_arena);
  for (int step = 0; step < 6; ++step) {
    Step st(rng, 3, 1, s, d, at({0, 2, 5}), false, pool.layer);
    mamba2_replay_step(st.host(), pool.host(), Tensor{}, true, ref_exec());
    mamba2_replay_step(st.dev(), pool.dev(), Tensor{}, true, Exec{Backend::cuda});
  }
  HostTensor slots = index_tensor(at({5, -1, 2, 0}));
  const DeviceTensor dslots(slots);
  for (DType od : {DType::f32, DType::f64, DType::bf16}) {
    HostTensor out(od, {4, s.H, s.P, s.N});
    out.fill(0.0);
    DeviceTensor dout(out);
    mamba2_materialize(pool.host(), slots, -1, out, ref_exec());
    mamba2_materialize(pool.dev(), dslots, -1, dout, Exec{Backend::cuda});
    EXPECT_LE(err(download(dout), out), tol(d.state, od == DType::f64 ? DType::f32 : od)) << "materialize";
  }
  HostTensor fl = index_tensor(at({2, -1}));
  const DeviceTensor dfl(fl);
  mamba2_flush(pool.host(), fl, -1, ref_exec());
  mamba2_flush(pool.dev(), dfl, -1, Exec{Backend::cuda});
  pool.expect_match(t, "flush");
  HostTensor src = index_tensor(at({0, 5})), dst = index_tensor(at({1, 3}));
  const DeviceTensor dsrc(src), ddst(dst);
  mamba2_copy_slot(pool.host(), src, dst, -1, Exec{Backend::cpu});
  mamba2_copy_slot(pool.dev(), dsrc, ddst, -1, Exec{Backend::cuda});
  pool.expect_match(t, "copy");
  HostTensor rs = index_tensor(at({5}));
  const DeviceTensor drs(rs);
  mamba2_reset_slot(pool.host(), rs, -1, Exec{Backend::cpu});
  mamba2_reset_slot(pool.dev(), drs, -1, Exec{Backend::cuda});
  pool.expect_match(t, "reset");
  // The copied and reset slots keep stepping correctly.
  for (int step = 0; step < 10; ++step) {
    Step st(rng, 3, 1, s, d, at({1, 3, 5}), false, pool.layer);
    mamba2_replay_step(st.host(), pool.host(), Tensor{}, true, ref_exec());
    mamba2_replay_step(st.dev(), pool.dev(), Tensor{}, true, Exec{Backend::cuda});
    EXPECT_LE(err(download(st.dy), st.y), t) << "after slot ops, step " << step;
  }
  pool.expect_match(t, "after slot ops");
}

}  // namespace replayssm::test::mamba2_gpu
