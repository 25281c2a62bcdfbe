// Every bad input gives an Error naming the argument and changes nothing.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "mamba2_fixture.h"

using namespace mamba2_test;
using replayssm::Backend;
namespace rs = replayssm;

namespace {

const Shape SH{4, 8, 16, 2};

struct Bed {
  std::mt19937 rng{3};
  Params prm{SH, rng};
  Pool pool{SH, 3, 4, 2, DType::f32, DType::bf16, prm};
  Step st{SH, 2, 2, DType::bf16, true};
  HostTensor acc = rs::test::index_tensor({1, 2});
  HostTensor wide{DType::bf16, {2, 2, SH.H, 2 * SH.P}};  // for strided views
  HostTensor out{DType::f32, {2, SH.H, SH.P, SH.N}};
  Bed() {
    pool.state.fill_normal(rng);
    pool.ring_x.fill_normal(rng);
    pool.ring_B.fill_normal(rng);
    pool.ring_dt.fill_uniform(rng, 0.1, 1);
    for (int64_t s = 0; s < 3; ++s) pool.set_cur(s, {int32_t(s + 1), 1, 2});
    st.randomize(rng, prm);
    st.set_slots({0, 1});
    out.fill_nan();
  }
};

// The call throws Error naming `arg`, and no pool, output or input byte changed.
void expect_error(Bed& s, const char* arg, const std::function<void()>& call) {
  Pool before(SH, 3, 4, 2, DType::f32, DType::bf16, s.prm);
  before.copy_from(s.pool);
  HostTensor y(s.st.y.t().dtype, {2, 2, SH.H, SH.P}), out(DType::f32, {2, SH.H, SH.P, SH.N});
  y.copy_from(s.st.y), out.copy_from(s.out);
  try {
    call();
    ADD_FAILURE() << "expected an Error naming '" << arg << "'";
  } catch (const rs::Error& e) {
    EXPECT_EQ(e.argument(), arg) << e.what();
  }
  EXPECT_TRUE(s.pool.bytes_equal(before)) << "pool changed by a rejected call (" << arg << ")";
  EXPECT_TRUE(s.st.y.bytes_equal(y)) << "output changed by a rejected call (" << arg << ")";
  EXPECT_TRUE(s.out.bytes_equal(out)) << "out changed by a rejected call (" << arg << ")";
}

TEST(Mamba2Errors, ReplayStep) {
  for (Backend be : {Backend::reference, Backend::cpu}) {
    Bed s;
    const rs::Exec ex = exec_of(be);
    auto step = [&](auto mutate_step, auto mutate_pool, rs::Tensor acc, bool all = false) {
      return [&s, ex, mutate_step, mutate_pool, acc, all] {
        rs::Mamba2Step v = s.st.view(s.prm);
        rs::Mamba2Pool p = s.pool.view();
        mutate_step(v);
        mutate_pool(p);
        rs::mamba2_replay_step(v, p, acc, all, ex);
      };
    };
    auto none = [](auto&) {};
    const rs::Tensor acc = s.acc;
    // The valid call succeeds (on a copy of the setup).
    {
      Bed ok;
      rs::mamba2_replay_step(ok.st.view(ok.prm), ok.pool.view(), ok.acc, false, ex);
    }
    expect_error(s, "x", step([](rs::Mamba2Step& v) { v.x.ndim = 3; }, none, acc));
    expect_error(s, "Cm", step([](rs::Mamba2Step& v) { v.Cm.shape[3] = 8; }, none, acc));
    expect_error(s, "dt", step([](rs::Mamba2Step& v) { v.dt.dtype = DType::i32; }, none, acc));
    expect_error(s, "Bm", step([](rs::Mamba2Step& v) { v.Bm.dtype = DType::f16; }, none, acc));
    expect_error(s, "z", step([](rs::Mamba2Step& v) { v.z.dtype = DType::f32; }, none, acc));
    expect_error(s, "A", step([](rs::Mamba2Step& v) { v.A.dtype = DType::f16; }, none, acc));
    expect_error(s, "D", step([](rs::Mamba2Step& v) { v.D.shape[0] = 3; }, none, acc));
    expect_error(s, "y", step([](rs::Mamba2Step& v) { v.y.dtype = DType::f32; }, none, acc));
    expect_error(s, "x", step([&](rs::Mamba2Step& v) {
      v.x = rs::Tensor::strided(s.wide.data(), DType::bf16, {2, 2, SH.H, SH.P},
                                {2 * SH.H * 2 * SH.P, SH.H * 2 * SH.P, 2 * SH.P, 2});
    }, none, acc));
    expect_error(s, "Bm", step([&](rs::Mamba2Step& v) { v.Bm.shape[2] = 3; v.Cm.shape[2] = 3; }, none, acc));
    expect_error(s, "state", step(none, [](rs::Mamba2Pool& p) { p.state.dtype = DType::f64; }, acc));
    expect_error(s, "state", step(none, [](rs::Mamba2Pool& p) { p.state.shape[1] = 2; }, acc));
    expect_error(s, "ring_x", step(none, [](rs::Mamba2Pool& p) { p.ring_x.dtype = DType::f32; }, acc));
    expect_error(s, "ring_dt", step(none, [](rs::Mamba2Pool& p) { p.ring_dt.dtype = DType::bf16; }, acc));
    expect_error(s, "ring_B", step(none, [](rs::Mamba2Pool& p) { p.ring_B.shape[3] = 4; }, acc));
    expect_error(s, "cursor", step(none, [](rs::Mamba2Pool& p) { p.cursor.dtype = DType::i64; }, acc));
    expect_error(s, "pool", step(none, [](rs::Mamba2Pool& p) { p.ring_B = rs::Tensor{}; }, acc));
    expect_error(s, "L", step(none, [](rs::Mamba2Pool& p) { p.L = 1; }, acc));
    expect_error(s, "L", step(none, [](rs::Mamba2Pool& p) { p.L = 0; }, acc));
    expect_error(s, "ring_x", step(none, [](rs::Mamba2Pool& p) { p.L = 5; }, acc));  // R = 6 < L + T
    HostTensor bad_slot = rs::test::index_tensor({0, 3}), dup = rs::test::index_tensor({1, 1});
    expect_error(s, "slot", step([&](rs::Mamba2Step& v) { v.slot = bad_slot; }, none, acc));
    expect_error(s, "slot", step([&](rs::Mamba2Step& v) { v.slot = dup; }, none, acc));
    HostTensor a0 = rs::test::index_tensor({0, 1}), a3 = rs::test::index_tensor({1, 3}),
               a64 = rs::test::index_tensor({1, 1}, DType::i64);
    expect_error(s, "num_accepted", step(none, none, a0));
    expect_error(s, "num_accepted", step(none, none, a3));
    expect_error(s, "num_accepted", step(none, none, a64));
    expect_error(s, "num_accepted", step(none, none, rs::Tensor{}));  // pending, uncommitted
    // Corrupt cursor; a commit that would overflow L; commit with nothing pending.
    s.pool.set_cur(1, {9, 1, 2});
    expect_error(s, "cursor", step(none, none, acc));
    s.pool.set_cur(1, {2, 4, 2});
    expect_error(s, "num_accepted", step(none, none, acc));
    s.pool.set_cur(1, {2, 1, 0});
    expect_error(s, "num_accepted", step(none, none, acc));
    s.pool.set_cur(1, {2, 1, 2});
    // cuda backend with host tensors.
    expect_error(s, "x", [&] {
      rs::mamba2_replay_step(s.st.view(s.prm), s.pool.view(), acc, false, exec_of(Backend::cuda));
    });
  }
}

TEST(Mamba2Errors, OtherEntryPoints) {
  Bed s;
  const rs::Exec ex = exec_of(Backend::cpu);
  HostTensor sl = rs::test::index_tensor({0, 1}), dup = rs::test::index_tensor({0, 0}),
             far = rs::test::index_tensor({0, 7}), acc3 = rs::test::index_tensor({1, 3});
  expect_error(s, "slot", [&] { rs::mamba2_commit(s.pool.view(), dup, -1, s.acc, ex); });
  expect_error(s, "num_accepted", [&] { rs::mamba2_commit(s.pool.view(), sl, -1, acc3, ex); });
  expect_error(s, "slot", [&] { rs::mamba2_flush(s.pool.view(), sl, -1, ex); });  // pending
  expect_error(s, "A", [&] {
    rs::Mamba2Pool p = s.pool.view();
    p.A = rs::Tensor{};
    rs::mamba2_flush(p, sl, -1, ex);
  });
  expect_error(s, "out", [&] {
    rs::Tensor o = s.out;
    o.shape[2] = 4;
    rs::mamba2_materialize(s.pool.view(), sl, -1, o, ex);
  });
  expect_error(s, "slot", [&] { rs::mamba2_materialize(s.pool.view(), far, -1, s.out, ex); });
  expect_error(s, "slot", [&] { rs::mamba2_reset_slot(s.pool.view(), far, -1, ex); });
  expect_error(s, "dst", [&] { rs::mamba2_copy_slot(s.pool.view(), sl, dup, -1, ex); });
  expect_error(s, "dst", [&] {
    rs::mamba2_copy_slot(s.pool.view(), sl, rs::test::index_tensor({1, 2}), -1, ex);
  });
  expect_error(s, "state", [&] {
    rs::Tensor st = s.pool.state;
    st.shape[3] = 8;
    rs::mamba2_decode(s.st.view(s.prm), st, ex);
  });
  HostTensor idx(DType::i32, {2, 2});
  for (int i = 0; i < 4; ++i) idx.set(i, i == 3 ? 5 : i % 3);
  expect_error(s, "state_indices", [&] {
    rs::mamba2_snapshot_decode(s.st.view(s.prm), s.pool.state, idx, rs::Tensor{}, ex);
  });
  idx.set(3, 2);
  expect_error(s, "state_indices", [&] {  // slot 2 used twice
    rs::mamba2_snapshot_decode(s.st.view(s.prm), s.pool.state, idx, rs::Tensor{}, ex);
  });
  idx.set(2, -1), idx.set(3, -1);  // row 1 is a pad row; row 0 accepts 3 > T
  HostTensor na = rs::test::index_tensor({3, 1});
  expect_error(s, "num_accepted", [&] {
    rs::mamba2_snapshot_decode(s.st.view(s.prm), s.pool.state, idx, na, ex);
  });
  // Prefill: decreasing offsets, total mismatch.
  Step prompt(SH, 1, 6, DType::bf16, false);
  prompt.randomize(s.rng, s.prm);
  rs::Mamba2Prefill p;
  p.x = rs::Tensor::view(prompt.x.data(), DType::bf16, {6, SH.H, SH.P});
  p.dt = rs::Tensor::view(prompt.dt.data(), DType::f32, {6, SH.H});
  p.Bm = rs::Tensor::view(prompt.Bm.data(), DType::bf16, {6, SH.G, SH.N});
  p.Cm = rs::Tensor::view(prompt.Cm.data(), DType::bf16, {6, SH.G, SH.N});
  p.y = rs::Tensor::view(prompt.y.data(), DType::bf16, {6, SH.H, SH.P});
  p.A = s.prm.A;
  HostTensor cu_bad = rs::test::index_tensor({0, 4, 2}), cu_short = rs::test::index_tensor({0, 2, 5});
  p.slot = sl;
  p.cu_seqlens = cu_bad;
  expect_error(s, "cu_seqlens", [&] { rs::mamba2_prefill(p, s.pool.view(), ex); });
  p.cu_seqlens = cu_short;
  expect_error(s, "cu_seqlens", [&] { rs::mamba2_prefill(p, s.pool.view(), ex); });
}

}  // namespace
