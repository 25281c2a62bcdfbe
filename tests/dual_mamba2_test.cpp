// Dual-precision and shared Mamba-2 pools (design §4, §5.5): outputs against
// the fp64 oracle per read format, format-independent checkpoints, the copy
// equal to quant_pack of the checkpoint, non-flush steps writing nothing,
// slot operations, errors, and shared mode against quantise-after-every-step.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "dual_test_util.h"
#include "mamba2_fixture.h"
#include "replayssm/dual.h"

namespace mamba2_test {
namespace {

using namespace replayssm;
using test::index_tensor;
using test::rel_err;
using test::dual_test::copy_equals_pack;
using test::dual_test::row_bytes;

const Shape SH{4, 8, 32, 2};
constexpr int64_t S_SLOTS = 4, L_CAP = 4, T_MAX = 3;

struct DualPool : Pool {
  HostTensor read_copy;
  ReadFormat format;
  DualPool(const Params& p, DType sd, ReadFormat f)
      : Pool(SH, S_SLOTS, L_CAP, T_MAX, sd, DType::f32, p), format(f) {
    read_copy.reset(DType::u8, {S_SLOTS, SH.H, quant_layout(f, SH.P, SH.N).tile_bytes});
  }
  Mamba2Pool dview() const {
    Mamba2Pool v = view();
    v.read_copy = read_copy;
    v.read_format = format;
    return v;
  }
};

struct DualRun {
  std::vector<uint8_t> state, rings;
  double max_out_err = 0, max_state_err = 0;
  int flushes = 0;
};

DualRun run_dual(ReadFormat fmt, Backend backend, DType sd, int steps, uint32_t seed) {
  std::mt19937 rng(seed);
  Params params(SH, rng);
  DualPool pool(params, sd, fmt);
  const Exec ex = exec_of(backend, 1);
  const std::vector<int64_t> slots = {2, -1, 0};
  const int64_t B = 3;
  // Prefill rows 0 and 2 with 3 and 5 tokens.
  Step pin(SH, 1, 8, DType::f32, false);
  pin.randomize(rng, params);
  std::vector<Oracle> S(3, Oracle(SH));
  for (int64_t t = 0; t < 3; ++t) S[0].apply(pin, 0, t, params, nullptr);
  for (int64_t t = 3; t < 8; ++t) S[2].apply(pin, 0, t, params, nullptr);
  HostTensor cus = index_tensor({0, 3, 3, 8}), pslot = index_tensor(slots);
  Mamba2Prefill pf;
  auto flat = [](const HostTensor& t, std::initializer_list<int64_t> sh) {
    Tensor v = t.t();
    Tensor r = Tensor::view(v.data, v.dtype, sh);
    return r;
  };
  pf.x = flat(pin.x, {8, SH.H, SH.P}), pf.dt = flat(pin.dt, {8, SH.H});
  pf.Bm = flat(pin.Bm, {8, SH.G, SH.N}), pf.Cm = flat(pin.Cm, {8, SH.G, SH.N});
  pf.y = flat(pin.y, {8, SH.H, SH.P});
  pf.A = params.A, pf.dt_bias = params.dt_bias, pf.D = params.D;
  pf.cu_seqlens = cus, pf.slot = pslot;
  mamba2_prefill(pf, pool.dview(), ex);
  for (int64_t s : {0, 2}) EXPECT_TRUE(copy_equals_pack(pool.read_copy, pool.state, s, fmt));

  DualRun res;
  std::unique_ptr<Step> prev;
  int64_t prevT = 0;
  for (int it = 0; it < steps; ++it) {
    const int64_t T = 1 + int64_t(rng() % uint32_t(T_MAX));
    auto st = std::make_unique<Step>(SH, B, T, DType::f32, false);
    st->randomize(rng, params);
    st->set_slots(slots);
    HostTensor acc(DType::i32, {B});
    const bool commit = prevT > 0;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t a = 1 + int64_t(rng() % uint32_t(std::max<int64_t>(prevT, 1)));
      acc.set(b, double(a));
      if (commit && slots[size_t(b)] >= 0) S[size_t(b)].commit(*prev, b, a, params);
    }
    std::vector<std::vector<uint8_t>> st0, cp0;
    std::vector<RingCursor> cur0;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t s = std::max<int64_t>(slots[size_t(b)], 0);
      st0.push_back(pool.state_bytes(s)), cp0.push_back(row_bytes(pool.read_copy, s)), cur0.push_back(pool.cur(s));
    }
    mamba2_replay_step(st->view(params), pool.dview(), commit ? acc.t() : Tensor{}, false, ex);
    for (int64_t b = 0; b < B; ++b) {
      const int64_t s = slots[size_t(b)];
      if (s < 0) {
        for (double v : st->row_y(b)) EXPECT_EQ(v, 0.0);
        continue;
      }
      const int64_t count = cur0[size_t(b)].count + (commit ? int64_t(acc.get(b)) : 0);
      const bool flushed = count + T > L_CAP;
      res.flushes += flushed;
      if (!flushed) {
        EXPECT_EQ(pool.state_bytes(s), st0[size_t(b)]) << "non-flush step wrote the checkpoint";
        EXPECT_EQ(row_bytes(pool.read_copy, s), cp0[size_t(b)]) << "non-flush step wrote the copy";
      }
      EXPECT_TRUE(copy_equals_pack(pool.read_copy, pool.state, s, fmt));
      res.max_out_err = std::max(res.max_out_err, rel_err(st->row_y(b), S[size_t(b)].window(*st, b, params)));
    }
    prev = std::move(st);
    prevT = T;
  }
  HostTensor acc(DType::i32, {B});
  for (int64_t b = 0; b < B; ++b) {
    acc.set(b, double(prevT));
    if (slots[size_t(b)] >= 0) S[size_t(b)].commit(*prev, b, prevT, params);
  }
  HostTensor slot = index_tensor(slots);
  mamba2_commit(pool.dview(), slot, -1, acc, ex);
  HostTensor out(DType::f64, {B, SH.H, SH.P, SH.N});
  mamba2_materialize(pool.dview(), slot, -1, out, ex);
  for (int64_t b : {0, 2}) res.max_state_err = std::max(res.max_state_err, rel_err(state_f64(out, b), S[size_t(b)].S));
  res.state = test::dual_test::all_bytes(pool.state);
  for (const HostTensor* t : {&pool.ring_x, &pool.ring_dt, &pool.ring_B, &pool.cursor}) {
    const auto v = test::dual_test::all_bytes(*t);
    res.rings.insert(res.rings.end(), v.begin(), v.end());
  }
  return res;
}

class DualMamba2 : public ::testing::TestWithParam<std::tuple<Backend, ReadFormat>> {};

TEST_P(DualMamba2, OutputsMatchOracleWithinFormatTolerance) {
  const auto [backend, fmt] = GetParam();
  const DualRun r = run_dual(fmt, backend, DType::f32, 40, 7);
  EXPECT_GT(r.flushes, 5);
  EXPECT_LT(r.max_out_err, test::dual_test::out_tolerance(fmt)) << read_format_name(fmt);
  EXPECT_LT(r.max_state_err, 1e-5);
  RecordProperty("max_out_err", std::to_string(r.max_out_err));
}

INSTANTIATE_TEST_SUITE_P(All, DualMamba2,
                         ::testing::Combine(::testing::Values(Backend::reference, Backend::cpu),
                                            ::testing::Values(ReadFormat::bf16, ReadFormat::f16,
                                                              ReadFormat::fp8_e4m3, ReadFormat::nvfp4)),
                         [](const auto& i) {
                           return std::string(backend_name(std::get<0>(i.param))) + "_" +
                                  read_format_name(std::get<1>(i.param));
                         });

TEST(DualMamba2Invariant, CheckpointBitIdenticalAcrossFormats) {
  for (Backend backend : {Backend::reference, Backend::cpu})
    for (DType sd : {DType::f32, DType::f16}) {
      const DualRun base = run_dual(ReadFormat::bf16, backend, sd, 50, 11);
      EXPECT_GT(base.flushes, 20);
      for (ReadFormat f : {ReadFormat::f16, ReadFormat::fp8_e4m3, ReadFormat::nvfp4}) {
        const DualRun r = run_dual(f, backend, sd, 50, 11);
        EXPECT_EQ(r.state, base.state) << backend_name(backend) << " " << read_format_name(f);
        EXPECT_EQ(r.rings, base.rings);
      }
    }
}

TEST(DualMamba2Slots, FlushCopyResetKeepCopy) {
  std::mt19937 rng(3);
  Params params(SH, rng);
  for (Backend backend : {Backend::reference, Backend::cpu}) {
    DualPool pool(params, DType::f32, ReadFormat::fp8_e4m3);
    const Exec ex = exec_of(backend, 1);
    HostTensor slot = index_tensor({1, 3});
    for (int i = 0; i < 2; ++i) {
      Step st(SH, 2, 1, DType::f32, false);
      st.randomize(rng, params);
      st.set_slots({1, 3});
      mamba2_replay_step(st.view(params), pool.dview(), Tensor{}, true, ex);
    }
    EXPECT_EQ(pool.cur(1).count, 2);
    mamba2_flush(pool.dview(), slot, -1, ex);
    EXPECT_EQ(pool.cur(1).count, 0);
    for (int64_t s : {1, 3}) EXPECT_TRUE(copy_equals_pack(pool.read_copy, pool.state, s, pool.format));
    HostTensor src = index_tensor({1}), dst = index_tensor({2});
    mamba2_copy_slot(pool.dview(), src, dst, -1, ex);
    EXPECT_EQ(row_bytes(pool.read_copy, 2), row_bytes(pool.read_copy, 1));
    mamba2_reset_slot(pool.dview(), src, -1, ex);
    EXPECT_TRUE(copy_equals_pack(pool.read_copy, pool.state, 1, pool.format));
    for (double v : state_f64(pool.state, 1)) EXPECT_EQ(v, 0.0);
  }
}

TEST(DualMamba2Errors, RejectedCallsNameArgumentAndWriteNothing) {
  std::mt19937 rng(5);
  Params params(SH, rng);
  DualPool pool(params, DType::f32, ReadFormat::nvfp4);
  for (HostTensor* t : {&pool.state, &pool.read_copy, &pool.ring_x})
    for (size_t i = 0; i < t->bytes(); ++i) static_cast<uint8_t*>(t->data())[i] = uint8_t(rng() & 0x3f);
  for (int64_t s = 0; s < S_SLOTS; ++s) pool.set_cur(s, RingCursor{1, 3, 0});
  Step st(SH, 2, 2, DType::f32, false);
  st.randomize(rng, params);
  st.set_slots({0, 2});
  const auto snapshot = [&] {
    std::vector<uint8_t> v = pool.slot_bytes(0);
    for (int64_t s = 1; s < S_SLOTS; ++s) {
      const auto b = pool.slot_bytes(s);
      v.insert(v.end(), b.begin(), b.end());
    }
    const auto c = test::dual_test::all_bytes(pool.read_copy);
    v.insert(v.end(), c.begin(), c.end());
    return v;
  };
  const auto bytes0 = snapshot();
  auto expect_error = [&](const char* arg, const Mamba2Step& step, const Mamba2Pool& p, Exec e) {
    try {
      mamba2_replay_step(step, p, Tensor{}, true, e);
      ADD_FAILURE() << "no error for " << arg;
    } catch (const Error& err) {
      EXPECT_EQ(err.argument(), arg) << err.what();
    }
    EXPECT_EQ(snapshot(), bytes0) << arg;
  };
  const Exec ex = exec_of(Backend::cpu, 1);
  HostTensor other(DType::u8, {S_SLOTS, SH.H, quant_layout(ReadFormat::bf16, SH.P, SH.N).tile_bytes});
  Mamba2Pool p = pool.dview();
  p.read_copy = other;
  expect_error("pool.read_copy", st.view(params), p, ex);  // sized for another format
  p = pool.dview();
  p.read_format = ReadFormat::fp8_e4m3;
  expect_error("pool.read_copy", st.view(params), p, ex);  // format mismatch
  HostTensor f32(DType::f32, {S_SLOTS, SH.H, quant_layout(ReadFormat::nvfp4, SH.P, SH.N).tile_bytes});
  p = pool.dview();
  p.read_copy = f32;
  expect_error("pool.read_copy", st.view(params), p, ex);  // dtype
  Mamba2Step bad = st.view(params);
  HostTensor y(DType::f32, {2, 2, SH.H, SH.P + 1});
  bad.y = y;
  expect_error("y", bad, pool.dview(), ex);  // caught after the fused fold, nothing written
  Exec cuda;  // dual pools run on the cuda backend too; host tensors are rejected there
  cuda.backend = Backend::cuda;
  expect_error("x", st.view(params), pool.dview(), cuda);
}

TEST(SharedMamba2, EqualsQuantiseAfterEveryStep) {
  for (Backend backend : {Backend::reference, Backend::cpu})
    for (ReadFormat fmt : {ReadFormat::bf16, ReadFormat::fp8_e4m3, ReadFormat::nvfp4}) {
      std::mt19937 rng(9);
      Params params(SH, rng);
      const Exec ex = exec_of(backend, 1);
      const int64_t tile = quant_layout(fmt, SH.P, SH.N).tile_bytes;
      HostTensor packed(DType::u8, {S_SLOTS, SH.H, tile}), manual(DType::u8, {S_SLOTS, SH.H, tile});
      HostTensor state(DType::f32, {S_SLOTS, SH.H, SH.P, SH.N});
      Tensor mflat = Tensor::view(manual.data(), DType::u8, {S_SLOTS * SH.H, tile});
      Tensor sflat = Tensor::view(state.data(), DType::f32, {S_SLOTS * SH.H, SH.P, SH.N});
      for (int it = 0; it < 12; ++it) {
        Step st(SH, 3, 2, DType::f32, false);
        st.randomize(rng, params);
        st.set_slots({3, -1, 1});
        Step st2(SH, 3, 2, DType::f32, false);
        st2.copy_from_all(st);
        mamba2_decode_shared(st.view(params), packed, fmt, QuantRounding{}, ex);
        quant_unpack(fmt, mflat, sflat, ex);
        mamba2_decode(st2.view(params), state, ex);
        quant_pack(fmt, sflat, mflat, ex);
        ASSERT_TRUE(packed.bytes_equal(manual)) << read_format_name(fmt) << " step " << it;
        EXPECT_EQ(st.y.to_f64(), st2.y.to_f64());
      }
    }
}

// Stochastic rounding: reproducible, unbiased on average, scales of RNE.
TEST(StochasticRounding, ReproducibleAndUnbiased) {
  for (ReadFormat fmt : {ReadFormat::bf16, ReadFormat::f16, ReadFormat::fp8_e4m3, ReadFormat::nvfp4}) {
    const int64_t R = 2, K = 32;
    HostTensor x(DType::f32, {1, R, K});
    std::mt19937 rng(1);
    x.fill_normal(rng);
    const QuantLayout L = quant_layout(fmt, R, K);
    HostTensor a(DType::u8, {1, L.tile_bytes}), b(DType::u8, {1, L.tile_bytes}), rne(DType::u8, {1, L.tile_bytes});
    HostTensor y(DType::f32, {1, R, K});
    const Exec ex = exec_of(Backend::cpu, 1);
    quant_pack(fmt, x, rne, ex);
    std::vector<double> mean(size_t(R * K), 0.0);
    const int n = 400;
    for (int s = 0; s < n; ++s) {
      quant_pack_stochastic(fmt, x, a, Tensor{}, QuantRounding{true, 5, uint64_t(s)}, ex);
      quant_pack_stochastic(fmt, x, b, Tensor{}, QuantRounding{true, 5, uint64_t(s)}, ex);
      ASSERT_TRUE(a.bytes_equal(b));
      if (L.scale_offset >= 0)  // the scales are those of round-to-nearest
        for (int64_t i = L.scale_offset; i < L.tile_bytes; ++i)
          ASSERT_EQ(a.as<uint8_t>()[i], rne.as<uint8_t>()[i]);
      quant_unpack(fmt, a, y, ex);
      for (int64_t i = 0; i < R * K; ++i) mean[size_t(i)] += y.get(i) / n;
    }
    quant_unpack(fmt, rne, y, ex);
    const auto xs = x.to_f64();
    // The mean of SR is closer to x than round-to-nearest is (on average).
    EXPECT_LT(rel_err(mean, xs), 0.5 * rel_err(y.to_f64(), xs)) << read_format_name(fmt);
  }
}

TEST(DualSizing, Mamba2BytesPerRowPerMode) {
  const Mamba2Shape s{128, 64, 128, 8};
  const int64_t single = mamba2_replay_bytes_per_row(s, DType::f32, DType::bf16, 16, 4);
  const int64_t tile = mamba2_tile_bytes(ReadFormat::fp8_e4m3, s);
  EXPECT_EQ(tile, 64 * 128 + 64 * 4);
  EXPECT_EQ(mamba2_state_bytes_per_row(PrecisionMode::dual, s, DType::f32, ReadFormat::fp8_e4m3, DType::bf16, 16, 4),
            single + 128 * tile);
  EXPECT_EQ(mamba2_state_bytes_per_row(PrecisionMode::shared, s, DType::f32, ReadFormat::fp8_e4m3, DType::bf16, 16, 4),
            128 * tile);
}

}  // namespace
}  // namespace mamba2_test
