// Slot operations (materialise, flush, copy, reset) and varlen prefill for
// GDN and KDA on both CPU backends.
#include <gtest/gtest.h>

#include "delta_fixture.h"

namespace replayssm::test::delta {
namespace {

// Drives slot 1 through prefill + a few replay steps (all committed); returns
// the oracle state.
Oracle::State drive(const Cfg& c, const Params& params, Pool& pool, Backend be, std::mt19937_64& rng,
                    int steps, int64_t s = 1) {
  Oracle oracle(c, params);
  Oracle::State S = oracle.zero();
  std::vector<double> o;
  HostTensor slot = index_tensor({s});
  pool.set_cur(s, RingCursor{int32_t(rng() % uint64_t(c.R())), 0, 0});
  for (int step = 0; step < steps; ++step) {
    const int64_t T = 1 + int64_t(rng() % uint64_t(c.T_max));
    Inputs in(c, {1, T});
    for (int64_t t = 0; t < T; ++t) randomize_token(c, in, t, rng);
    delta_replay_step(c.fam, step_view(c, params, in, slot), pool.view(), Tensor{}, true, exec_of(be));
    for (int64_t t = 0; t < T; ++t) oracle.apply(S, in, t, o);
  }
  return S;
}

void slot_ops(DeltaFamily fam, Backend be) {
  Cfg c;
  c.fam = fam;
  c.L = 8;
  c.T_max = 4;
  std::mt19937_64 rng(3);
  Params params(c, rng);
  Pool pool(c);
  const Exec ex = exec_of(be);
  const Oracle::State S = drive(c, params, pool, be, rng, 7);
  ASSERT_GT(pool.cur(1).count, 0);
  // Materialised state equals the standard state; pad rows give zero.
  HostTensor out(DType::f64, {2, c.HV, c.V, c.K});
  out.fill_nan();
  delta_materialize(fam, pool.view(), index_tensor({1, -1}), -1, out, ex);
  const int64_t n = c.HV * c.V * c.K;
  EXPECT_LE(rel_err(slot_state(out, 0), S), tolerance(DType::f32));
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(out.get(n + i), 0.0);
  // Copied slot continues identically (bit for bit).
  delta_copy_slot(fam, pool.view(), index_tensor({1}), index_tensor({4}), -1, ex);
  EXPECT_TRUE(pool.slot_bytes(1) == pool.slot_bytes(4));
  for (int step = 0; step < 5; ++step) {
    Inputs in(c, {2, 3});
    for (int64_t t = 0; t < 3; ++t) {
      randomize_token(c, in, t, rng);
      for (HostTensor* x : {&in.q, &in.k, &in.v, &in.g, &in.beta}) {
        const int64_t m = x->numel() / 6;
        for (int64_t i = 0; i < m; ++i) x->set((3 + t) * m + i, x->get(t * m + i));
      }
    }
    delta_replay_step(fam, step_view(c, params, in, index_tensor({1, 4})), pool.view(), Tensor{}, true, ex);
    const int64_t m = 3 * c.HV * c.V;
    for (int64_t i = 0; i < m; ++i) ASSERT_EQ(in.o.get(i), in.o.get(m + i));
  }
  // Flush then materialise: unchanged; the ring is empty afterwards.
  HostTensor before(DType::f64, {1, c.HV, c.V, c.K}), after(DType::f64, {1, c.HV, c.V, c.K});
  delta_materialize(fam, pool.view(), index_tensor({1}), -1, before, ex);
  delta_flush(fam, pool.view(), index_tensor({1}), -1, ex);
  EXPECT_EQ(pool.cur(1).count, 0);
  delta_materialize(fam, pool.view(), index_tensor({1}), -1, after, ex);
  EXPECT_LE(rel_err(after.to_f64(), before.to_f64()), 1e-6);
  // Reset carries nothing: the slot then behaves like a fresh zero state.
  delta_reset_slot(fam, pool.view(), index_tensor({4}), -1, ex);
  for (uint8_t byte : pool.slot_bytes(4)) ASSERT_EQ(byte, 0);
  Pool fresh(c);
  Inputs a(c, {1, 2});
  for (int64_t t = 0; t < 2; ++t) randomize_token(c, a, t, rng);
  Inputs b = Inputs(c, {1, 2});
  for (auto [dst, src] : {std::pair{&b.q, &a.q}, {&b.k, &a.k}, {&b.v, &a.v}, {&b.g, &a.g}, {&b.beta, &a.beta}}) dst->copy_from(*src);
  delta_replay_step(fam, step_view(c, params, a, index_tensor({4})), pool.view(), Tensor{}, true, ex);
  delta_replay_step(fam, step_view(c, params, b, index_tensor({4})), fresh.view(), Tensor{}, true, ex);
  EXPECT_TRUE(a.o.bytes_equal(b.o));
}
TEST(GdnSlot, MaterializeCopyFlushReset) {
  slot_ops(DeltaFamily::gdn, Backend::reference);
  slot_ops(DeltaFamily::gdn, Backend::cpu);
}
TEST(KdaSlot, MaterializeCopyFlushReset) {
  slot_ops(DeltaFamily::kda, Backend::reference);
  slot_ops(DeltaFamily::kda, Backend::cpu);
}

// Varlen prefill: different lengths, a zero-length prompt, a pad row and the
// `initial` flag (continue from the materialised state) equal the recurrence.
void prefill_varlen(DeltaFamily fam, Backend be, bool rings) {
  Cfg c;
  c.fam = fam;
  c.L = 8;
  c.T_max = 4;
  std::mt19937_64 rng(9);
  Params params(c, rng);
  Oracle oracle(c, params);
  Pool pool(c, rings);
  const Exec ex = exec_of(be);
  // Slot 2 has history: replay steps on a replay pool, a decode on a baseline one.
  Oracle::State S2;
  if (rings) {
    S2 = drive(c, params, pool, be, rng, 5, 2);
  } else {
    S2 = oracle.zero();
    Inputs in(c, {1, 3});
    for (int64_t t = 0; t < 3; ++t) randomize_token(c, in, t, rng);
    delta_decode(fam, step_view(c, params, in, index_tensor({2})), pool.state, ex);
    std::vector<double> o;
    for (int64_t t = 0; t < 3; ++t) oracle.apply(S2, in, t, o);
  }
  const std::vector<int64_t> len = {5, 0, 3, 7, 2};
  const std::vector<int64_t> slots = {0, 3, 2, 5, -1};
  const std::vector<int64_t> init = {0, 0, 1, 0, 0};
  std::vector<int64_t> cu{0};
  for (int64_t l : len) cu.push_back(cu.back() + l);
  Inputs in(c, {cu.back()});
  for (int64_t i = 0; i < cu.back(); ++i) randomize_token(c, in, i, rng);
  DeltaPrefill pf;
  pf.q = in.q; pf.k = in.k; pf.v = in.v; pf.g = in.g; pf.beta = in.beta; pf.o = in.o;
  pf.A_log = params.A_log;
  if (params.dt_bias.t().defined()) pf.dt_bias = params.dt_bias;
  pf.gating = c.gating;
  HostTensor cus = index_tensor(cu), sl = index_tensor(slots), it = index_tensor(init);
  pf.cu_seqlens = cus; pf.slot = sl; pf.initial = it;
  delta_prefill(fam, pf, pool.view(), ex);
  const int64_t HVV = c.HV * c.V;
  std::vector<double> o;
  for (size_t b = 0; b < len.size(); ++b) {
    Oracle::State S = init[b] ? S2 : oracle.zero();
    for (int64_t i = cu[b]; i < cu[b + 1]; ++i) {
      const auto got = token_out(in.o, i, HVV);
      if (slots[b] < 0) {
        for (double x : got) EXPECT_EQ(x, 0.0);
        continue;
      }
      oracle.apply(S, in, i, o);
      EXPECT_LE(rel_err(got, o), tolerance(DType::f32)) << "prompt " << b;
    }
    if (slots[b] < 0) continue;
    if (len[b] == 0 && !init[b]) {
      for (double x : slot_state(pool.state, slots[b])) EXPECT_EQ(x, 0.0);
    } else {
      EXPECT_LE(rel_err(slot_state(pool.state, slots[b]), S), tolerance(DType::f32)) << "prompt " << b;
    }
    if (rings) {
      EXPECT_EQ(pool.cur(slots[b]).count, 0);
      EXPECT_EQ(pool.cur(slots[b]).pending, 0);
    }
  }
}
TEST(GdnPrefill, VarlenMatchesRecurrence) {
  for (Backend be : {Backend::reference, Backend::cpu})
    for (bool rings : {true, false}) prefill_varlen(DeltaFamily::gdn, be, rings);
}
TEST(KdaPrefill, VarlenMatchesRecurrence) {
  for (Backend be : {Backend::reference, Backend::cpu})
    for (bool rings : {true, false}) prefill_varlen(DeltaFamily::kda, be, rings);
}

TEST(DeltaSizing, BytesPerRow) {
  const DeltaShape s{16, 64, 128, 128};
  EXPECT_EQ(delta_ring_length(16, 5), 21);
  const int64_t state = 64 * 128 * 128 * 4;
  const int64_t rec_gdn = 64 * 128 * 4 + 16 * 128 * 2 + 16 * 4 + 64 * 4;
  EXPECT_EQ(delta_replay_bytes_per_row(DeltaFamily::gdn, s, DType::f32, DType::bf16, DType::f32, 16, 5),
            state + 21 * rec_gdn + 12);
  const int64_t rec_kda = 64 * 128 * 4 + 16 * 128 * 2 + 16 * 4 + 64 * 128 * 4;
  EXPECT_EQ(delta_replay_bytes_per_row(DeltaFamily::kda, s, DType::f32, DType::bf16, DType::f32, 16, 5),
            state + 21 * rec_kda + 12);
  EXPECT_EQ(delta_snapshot_bytes_per_row(s, DType::bf16, 5), 5 * 64 * 128 * 128 * 2);
  EXPECT_THROW(delta_ring_length(4, 5), Error);
}

}  // namespace
}  // namespace replayssm::test::delta
