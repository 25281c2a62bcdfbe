// conv1d_commit on the CPU backends: commit then one update equals the split
// calls (pending rows with num_accepted, fresh rows without) byte for byte,
// across dtypes, strided layer pools and pad rows; bad commits are rejected
// naming the argument and write nothing.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>

#include "conv1d_test_util.h"

namespace replayssm::test {
namespace {

// conv_state / conv_pending of L layers in one allocation ([S, L, R, dim] and
// [S, L]); the views are the last layer (L = 2: slot strides of two layers,
// pending stride 2, the other layer a sentinel that must keep its bytes).
struct LayerPool {
  HostTensor state_mem, pending_mem;
  Tensor state, pending;
  LayerPool(const ConvConfig& c, int64_t L)
      : state_mem(c.state_dtype, {c.S, L, c.R(), c.dim}), pending_mem(DType::i32, {c.S, L}) {
    const int64_t slot_elems = L * c.R() * c.dim;
    state = Tensor::strided(state_mem.as<char>() + (L - 1) * c.R() * c.dim * int64_t(dtype_size(c.state_dtype)),
                            c.state_dtype, {c.S, c.R(), c.dim}, {slot_elems, c.dim, 1});
    pending = Tensor::strided(pending_mem.as<int32_t>() + (L - 1), DType::i32, {c.S}, {L});
  }
  void set_pending(int64_t s, int32_t p) { static_cast<int32_t*>(pending.data)[s * pending.stride[0]] = p; }
  int32_t get_pending(int64_t s) const { return static_cast<int32_t*>(pending.data)[s * pending.stride[0]]; }
  void copy_from(const LayerPool& o) {
    state_mem.copy_from(o.state_mem);
    pending_mem.copy_from(o.pending_mem);
  }
  bool bytes_equal(const LayerPool& o) const {
    return state_mem.bytes_equal(o.state_mem) && pending_mem.bytes_equal(o.pending_mem);
  }
};

// A batch that mixes rows with pending drafts (accepted count in [1, p]),
// fresh rows (p = 0) and a pad row: commit the pending rows (fresh rows as
// pad there) and then run one update of every row without num_accepted. The
// outputs, all state bytes (rows [0, W − 1 + T) written by the update, rows
// past it written by neither path) and the pending counts equal those of the
// split calls: an update of the pending rows with num_accepted, then one of
// the fresh rows without. The commit itself is byte-identical on both
// backends.
TEST(Conv1d, CommitThenOneUpdateEqualsSplitCalls) {
  struct Case {
    ConvConfig c;
    int64_t layers;
    DType slot_dtype;
  };
  const Case cases[] = {
      {{7, 37, 4, 5}, 1, DType::i32},
      {{6, 130, 3, 8, DType::bf16, DType::bf16, DType::bf16}, 2, DType::i64},
      {{8, 65, 5, 4, DType::f16, DType::f16, DType::f32}, 2, DType::i32},
      {{5, 64, 2, 3, DType::f32, DType::bf16, DType::f32}, 1, DType::i64},
  };
  uint64_t seed = 51;
  for (const Case& k : cases) {
    const ConvConfig& c = k.c;
    for (int rep = 0; rep < 3; ++rep, ++seed) {
      std::mt19937_64 rng(seed);
      const ConvWeights w(c, rng);
      LayerPool init(c, k.layers);
      init.state_mem.fill_uniform(rng, -1, 1);  // stale rows and the other layer included
      for (int64_t i = 0; i < init.pending_mem.numel(); ++i) init.pending_mem.set(i, double(int64_t(rng() % 9)));
      const MixedBatch m =
          mixed_batch(rng, c.S, c.T_max, [&](int64_t s, int64_t p) { init.set_pending(s, int32_t(p)); });
      const int64_t B = m.B(), T = m.T;
      HostTensor x(c.x_dtype, {B, T, c.dim});
      x.fill_uniform(rng, -2, 2);
      const HostTensor slot_t = index_tensor(m.slots, k.slot_dtype),
                       pend_t = index_tensor(m.pending, k.slot_dtype),
                       fresh_t = index_tensor(m.fresh, k.slot_dtype), acc_t = index_tensor(m.accepted);
      std::optional<LayerPool> committed_ref;
      for (Backend be : {Backend::reference, Backend::cpu}) {
        const Exec ex{be, nullptr, 3};
        const std::string where = std::string(backend_name(be)) + " seed " + std::to_string(seed);
        // Split calls.
        LayerPool split(c, k.layers);
        split.copy_from(init);
        HostTensor out_p(c.x_dtype, {B, T, c.dim}), out_f(c.x_dtype, {B, T, c.dim}),
            want(c.x_dtype, {B, T, c.dim});
        out_p.fill_nan();
        out_f.fill_nan();
        conv1d_update(make_conv_step(c, x, w, pend_t, out_p), split.state, split.pending, acc_t, ex);
        conv1d_update(make_conv_step(c, x, w, fresh_t, out_f), split.state, split.pending, {}, ex);
        const size_t row = size_t(T * c.dim) * dtype_size(c.x_dtype);
        for (int64_t b = 0; b < B; ++b)
          std::memcpy(want.as<char>() + size_t(b) * row,
                      (m.fresh[size_t(b)] >= 0 ? out_f : out_p).as<char>() + size_t(b) * row, row);
        // Commit, then one update.
        LayerPool one(c, k.layers);
        one.copy_from(init);
        conv1d_commit(one.state, one.pending, pend_t, -1, acc_t, c.W, ex);
        for (int64_t s = 0; s < c.S; ++s) ASSERT_EQ(one.get_pending(s), 0) << where << " slot " << s;
        if (committed_ref) {
          EXPECT_TRUE(one.bytes_equal(*committed_ref)) << where << ": commit differs across backends";
        } else {
          committed_ref.emplace(c, k.layers);
          committed_ref->copy_from(one);
        }
        HostTensor out(c.x_dtype, {B, T, c.dim});
        out.fill_nan();
        conv1d_update(make_conv_step(c, x, w, slot_t, out), one.state, one.pending, {}, ex);
        EXPECT_TRUE(out.bytes_equal(want)) << where;
        EXPECT_TRUE(one.bytes_equal(split)) << where;
        for (int64_t s = 0; s < c.S; ++s) ASSERT_EQ(one.get_pending(s), T) << where;
      }
    }
  }
}

// Each bad commit throws an Error naming the argument and writes nothing.
TEST(Conv1d, BadCommitsChangeNothing) {
  ConvConfig c{4, 24, 4, 5};
  std::mt19937_64 rng(53);
  ConvPool pool(c);
  pool.state.fill_uniform(rng, -1, 1);
  for (int64_t s = 0; s < c.S; ++s) pool.pending.set(s, double(std::vector<int64_t>{3, 0, 5, 2}[size_t(s)]));
  const HostTensor slot = index_tensor({0, 2}), acc = index_tensor({2, 5});
  const HostTensor slot_far = index_tensor({0, 4}), slot_neg = index_tensor({-2, 2}),
                   slot_dup = index_tensor({2, 2}), slot_fresh = index_tensor({0, 1}),
                   slot_f32(DType::f32, {2}), slot_2d(DType::i32, {2, 1});
  const HostTensor acc0 = index_tensor({0, 5}), acc_big = index_tensor({2, 6}),
                   acc_neg = index_tensor({-1, 5}), acc_i64 = index_tensor({2, 5}, DType::i64),
                   acc_short = index_tensor({2});
  HostTensor pend_i64(DType::i64, {c.S}), pend_bad(DType::i32, {c.S}),
      state_f64(DType::f64, {c.S, c.R(), c.dim}), small_state(c.state_dtype, {c.S, c.W - 1, c.dim});
  pend_bad.copy_from(pool.pending);
  pend_bad.set(2, double(c.T_max + 1));  // corrupt: above T_max

  struct Case {
    const char* arg;
    std::function<void(Tensor& st, Tensor& pe, Tensor& sl, Tensor& na, int64_t& W, Exec& ex)> mutate;
  };
  const std::vector<Case> cases = {
      {"conv_state", [&](auto& st, auto&, auto&, auto&, auto&, auto&) { st = state_f64.t(); }},
      {"conv_state", [&](auto& st, auto&, auto&, auto&, auto&, auto&) { st = small_state.t(); }},
      {"conv_state", [&](auto& st, auto&, auto&, auto&, auto&, auto&) { st.ndim = 2; }},
      {"conv_state", [&](auto& st, auto&, auto&, auto&, auto&, auto&) { st.stride[2] = 2; st.shape[2] = c.dim / 2; }},
      {"conv_state", [&](auto&, auto&, auto&, auto&, auto& W, auto&) { W = c.R() + 1; }},
      {"conv_state", [&](auto& st, auto&, auto&, auto&, auto&, auto&) { st.device = Device::cuda; }},
      {"conv_state", [&](auto&, auto&, auto&, auto&, auto&, auto& ex) { ex.backend = Backend::cuda; }},
      {"conv_pending", [&](auto&, auto& pe, auto&, auto&, auto&, auto&) { pe = pend_i64.t(); }},
      {"conv_pending", [&](auto&, auto& pe, auto&, auto&, auto&, auto&) { pe.shape[0] = c.S - 1; }},
      {"conv_pending", [&](auto&, auto& pe, auto&, auto&, auto&, auto&) { pe = pend_bad.t(); }},
      {"conv_pending", [&](auto&, auto&, auto&, auto&, auto& W, auto&) { W = 5; }},  // T_max 4 < pending 5
      {"W", [&](auto&, auto&, auto&, auto&, auto& W, auto&) { W = 1; }},
      {"W", [&](auto&, auto&, auto&, auto&, auto& W, auto&) { W = 0; }},
      {"slot", [&](auto&, auto&, auto& sl, auto&, auto&, auto&) { sl = slot_far.t(); }},
      {"slot", [&](auto&, auto&, auto& sl, auto&, auto&, auto&) { sl = slot_neg.t(); }},
      {"slot", [&](auto&, auto&, auto& sl, auto&, auto&, auto&) { sl = slot_dup.t(); }},
      {"slot", [&](auto&, auto&, auto& sl, auto&, auto&, auto&) { sl = slot_f32.t(); }},
      {"slot", [&](auto&, auto&, auto& sl, auto&, auto&, auto&) { sl = slot_2d.t(); }},
      {"num_accepted", [&](auto&, auto&, auto&, auto& na, auto&, auto&) { na = acc0.t(); }},
      {"num_accepted", [&](auto&, auto&, auto&, auto& na, auto&, auto&) { na = acc_neg.t(); }},
      {"num_accepted", [&](auto&, auto&, auto&, auto& na, auto&, auto&) { na = acc_big.t(); }},
      {"num_accepted", [&](auto&, auto&, auto& sl, auto&, auto&, auto&) { sl = slot_fresh.t(); }},
      {"num_accepted", [&](auto&, auto&, auto&, auto& na, auto&, auto&) { na = acc_i64.t(); }},
      {"num_accepted", [&](auto&, auto&, auto&, auto& na, auto&, auto&) { na = acc_short.t(); }},
      {"num_accepted", [&](auto&, auto&, auto&, auto& na, auto&, auto&) { na = Tensor{}; }},
  };
  for (Backend be : {Backend::reference, Backend::cpu}) {
    for (size_t i = 0; i < cases.size(); ++i) {
      ConvPool before(c);
      before.state.copy_from(pool.state);
      before.pending.copy_from(pool.pending);
      Tensor st = pool.state.t(), pe = pool.pending.t(), sl = slot.t(), na = acc.t();
      int64_t W = c.W;
      Exec ex{be};
      cases[i].mutate(st, pe, sl, na, W, ex);
      try {
        conv1d_commit(st, pe, sl, -1, na, W, ex);
        ADD_FAILURE() << "case " << i << " did not throw";
      } catch (const Error& e) {
        EXPECT_EQ(e.argument(), cases[i].arg) << "case " << i << ": " << e.what();
        EXPECT_EQ(e.function(), "conv1d_commit");
      }
      EXPECT_TRUE(pool.state.bytes_equal(before.state)) << "case " << i;
      EXPECT_TRUE(pool.pending.bytes_equal(before.pending)) << "case " << i;
    }
  }
  // The fresh-row error uses the SSM pools' wording; the valid call goes through.
  try {
    conv1d_commit(pool.state, pool.pending, slot_fresh, -1, acc, c.W, Exec{});
    ADD_FAILURE() << "accepted count on a fresh row was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("slot 1 has no pending records to commit"), std::string::npos)
        << e.what();
  }
  ConvPool want(c);
  want.state.copy_from(pool.state);
  for (int64_t r = 0; r < c.W - 1; ++r)  // slot 0 from row 2, slot 2 from row 5
    for (int64_t k = 0; k < c.dim; ++k) {
      want.state.set(r * c.dim + k, pool.state.get((2 + r) * c.dim + k));
      want.state.set((2 * c.R() + r) * c.dim + k, pool.state.get((2 * c.R() + 5 + r) * c.dim + k));
    }
  conv1d_commit(pool.state, pool.pending, slot, -1, acc, c.W, Exec{});
  EXPECT_TRUE(pool.state.bytes_equal(want.state));
  EXPECT_EQ(pool.pending.get(0), 0.0);
  EXPECT_EQ(pool.pending.get(1), 0.0);
  EXPECT_EQ(pool.pending.get(2), 0.0);
  EXPECT_EQ(pool.pending.get(3), 2.0);
}

}  // namespace
}  // namespace replayssm::test
