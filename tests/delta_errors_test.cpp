// Bad inputs: every call throws replayssm::Error naming the argument, and
// nothing is written (pool tensors and outputs compared byte for byte).
#include <gtest/gtest.h>

#include <functional>

#include "delta_fixture.h"

namespace replayssm::test::delta {
namespace {

struct Setup {
  Cfg c;
  std::mt19937_64 rng{21};
  Params params;
  Pool pool;
  Inputs in;
  HostTensor slot, na, kda_g, bf16_k, bad_o, i64_cursor;
  static constexpr int64_t B = 2, T = 4;

  explicit Setup(DeltaFamily fam) : c(make(fam)), params(c, rng), pool(c), in(c, {B, T}) {
    slot = index_tensor({1, 3});
    for (int64_t i = 0; i < B * T; ++i) randomize_token(c, in, i, rng);
    // A first step leaves T pending records on both rows.
    delta_replay_step(c.fam, step(), pool.view(), Tensor{}, false, exec_of(Backend::cpu));
    na = index_tensor({2, 4});
    in.o.fill_nan();
    kda_g.reset(DType::f32, {B, T, c.HV, c.K});
    bf16_k.reset(DType::bf16, {B, T, c.H, c.K});
    bad_o.reset(DType::bf16, {B, T, c.HV, c.V});
    i64_cursor.reset(DType::i64, {c.S, 3});
  }
  static Cfg make(DeltaFamily fam) {
    Cfg c;
    c.fam = fam;
    c.L = 8;
    c.T_max = 4;
    return c;
  }
  DeltaStep step() const { return step_view(c, params, in, slot); }

  // Expects fn to throw Error naming `arg` and to leave every byte unchanged.
  void expect_rejected(const char* what, const std::string& arg, const std::function<void()>& fn) {
    std::vector<HostTensor> copies;
    for (auto* t : pool.all()) {
      copies.emplace_back(t->t().dtype, std::vector<int64_t>(t->t().shape, t->t().shape + t->t().ndim));
      copies.back().copy_from(*t);
    }
    HostTensor o(in.o.t().dtype, std::vector<int64_t>(in.o.t().shape, in.o.t().shape + 4));
    o.copy_from(in.o);
    try {
      fn();
      ADD_FAILURE() << what << ": no error thrown";
    } catch (const Error& e) {
      EXPECT_EQ(e.argument(), arg) << what << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find(arg), std::string::npos);
    }
    for (size_t i = 0; i < copies.size(); ++i) EXPECT_TRUE(copies[i].bytes_equal(*pool.all()[i])) << what;
    EXPECT_TRUE(o.bytes_equal(in.o)) << what;
  }
};

void bad_inputs(DeltaFamily fam) {
  Setup s(fam);
  const Exec cpu = exec_of(Backend::cpu), ref = exec_of(Backend::reference);
  const Cfg& c = s.c;
  auto replay = [&](DeltaStep st, DeltaPool p, Tensor na, const Exec& ex) {
    return [=, &s] { delta_replay_step(s.c.fam, st, p, na, false, ex); };
  };
  for (const Exec& ex : {cpu, ref}) {
    const DeltaPool P = s.pool.view();
    const Tensor NA = s.na;
    { DeltaStep st = s.step(); st.k.shape[2] = c.H + 1; s.expect_rejected("k shape", "k", replay(st, P, NA, ex)); }
    { DeltaStep st = s.step(); st.k = s.bf16_k; s.expect_rejected("k dtype", "k", replay(st, P, NA, ex)); }
    { DeltaStep st = s.step(); st.q.stride[3] = 2; s.expect_rejected("q stride", "q", replay(st, P, NA, ex)); }
    { DeltaStep st = s.step(); st.o = s.bad_o; s.expect_rejected("o dtype", "o", replay(st, P, NA, ex)); }
    HostTensor far = index_tensor({1, 99}), dup = index_tensor({3, 3});
    { DeltaStep st = s.step(); st.slot = far; s.expect_rejected("slot range", "slot", replay(st, P, NA, ex)); }
    { DeltaStep st = s.step(); st.slot = dup; s.expect_rejected("duplicate slots", "slot", replay(st, P, NA, ex)); }
    HostTensor zero = index_tensor({0, 1}), over = index_tensor({1, 5});
    s.expect_rejected("accepted 0", "num_accepted", replay(s.step(), P, zero, ex));
    s.expect_rejected("accepted > T", "num_accepted", replay(s.step(), P, over, ex));
    s.expect_rejected("uncommitted pending", "num_accepted", replay(s.step(), P, Tensor{}, ex));
    { DeltaPool p = P; p.L = 2; s.expect_rejected("T > L", "q", replay(s.step(), p, NA, ex)); }
    { DeltaPool p = P; p.L = c.R() - 2; s.expect_rejected("ring too short", "pool.ring_d", replay(s.step(), p, NA, ex)); }
    { DeltaPool p = P; p.cursor = s.i64_cursor; s.expect_rejected("cursor dtype", "pool.cursor", replay(s.step(), p, NA, ex)); }
    { DeltaPool p = P; p.ring_ks.dtype = DType::bf16; s.expect_rejected("ring_ks dtype", "pool.ring_ks", replay(s.step(), p, NA, ex)); }
    { DeltaPool p = P; p.ring_k = s.bf16_k; s.expect_rejected("ring_k shape", "pool.ring_k", replay(s.step(), p, NA, ex)); }
    { DeltaStep st = s.step(); st.A_log = Tensor{}; s.expect_rejected("missing A_log", "A_log", replay(st, P, NA, ex)); }
    { DeltaStep st = s.step(); st.gating.raw_gate = false; st.dt_bias = s.params.dt_bias; s.expect_rejected("dt_bias without raw gate", "dt_bias", replay(st, P, NA, ex)); }
    { DeltaStep st = s.step(); st.v.shape[2] = 3; st.o.shape[2] = 3; s.expect_rejected("HV % H", "v", replay(st, P, NA, ex)); }
    if (fam == DeltaFamily::gdn) {
      DeltaStep st = s.step(); st.g = s.kda_g;
      s.expect_rejected("KDA gate given to GDN", "g", replay(st, P, NA, ex));
    } else {
      DeltaStep st = s.step(); st.g = s.in.beta;
      s.expect_rejected("GDN gate given to KDA", "g", replay(st, P, NA, ex));
    }
    {
      RingCursor keep = s.pool.cur(3);
      s.pool.set_cur(3, RingCursor{int32_t(c.R()), 0, 4});
      s.expect_rejected("corrupt cursor", "pool.cursor", replay(s.step(), P, NA, ex));
      s.pool.set_cur(3, keep);
    }
    // Other entry points.
    s.expect_rejected("commit accepted > pending", "num_accepted",
                      [&] { delta_commit(fam, P, s.slot, -1, over, ex); });
    s.expect_rejected("flush with pending", "num_accepted", [&] { delta_flush(fam, P, s.slot, -1, ex); });
    HostTensor out(DType::f32, {2, c.HV, c.V, c.K + 1});
    s.expect_rejected("materialize out shape", "out", [&] { delta_materialize(fam, P, s.slot, -1, out, ex); });
    s.expect_rejected("copy duplicate dst", "dst", [&] {
      delta_copy_slot(fam, P, index_tensor({0, 2}), index_tensor({4, 4}), -1, ex);
    });
    s.expect_rejected("reset out of range", "slot", [&] { delta_reset_slot(fam, P, index_tensor({-3}), -1, ex); });
    HostTensor i32_state(DType::i32, {c.S, c.HV, c.V, c.K});
    s.expect_rejected("decode state dtype", "state", [&] { delta_decode(fam, s.step(), i32_state, ex); });
    HostTensor idx(DType::i32, {2, 4});
    for (int i = 0; i < 8; ++i) idx.set(i, i % 4);
    s.expect_rejected("snapshot duplicate slots", "state_indices",
                      [&] { delta_snapshot_decode(fam, s.step(), s.pool.state, idx, Tensor{}, ex); });
    Inputs pin(c, {6});
    HostTensor cus = index_tensor({0, 2, 5});
    DeltaPrefill pf;
    pf.q = pin.q; pf.k = pin.k; pf.v = pin.v; pf.g = pin.g; pf.beta = pin.beta; pf.o = pin.o;
    pf.A_log = s.params.A_log; pf.gating = c.gating; pf.cu_seqlens = cus; pf.slot = s.slot;
    s.expect_rejected("prefill cu_seqlens", "cu_seqlens", [&] { delta_prefill(fam, pf, P, ex); });
  }
  // The cuda backend with cpu tensors.
  s.expect_rejected("cuda backend, cpu tensors", "q", [&] {
    delta_replay_step(fam, s.step(), s.pool.view(), s.na, false, exec_of(Backend::cuda));
  });
  // After all rejections the valid call still works.
  delta_replay_step(fam, s.step(), s.pool.view(), s.na, false, cpu);
}

TEST(GdnErrors, BadInputsRejectedWithoutWrites) { bad_inputs(DeltaFamily::gdn); }
TEST(KdaErrors, BadInputsRejectedWithoutWrites) { bad_inputs(DeltaFamily::kda); }

}  // namespace
}  // namespace replayssm::test::delta
