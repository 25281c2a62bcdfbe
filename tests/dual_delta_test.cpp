// Dual-precision and shared GDN/KDA pools (design §4, §5.5): outputs against
// the fp64 oracle per read format, format-independent checkpoints, the copy
// equal to quant_pack of the checkpoint, non-flush steps writing nothing,
// slot operations, errors, and shared mode against quantise-after-every-step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "delta_fixture.h"
#include "dual_test_util.h"
#include "replayssm/dual.h"

namespace replayssm::test::delta {
namespace {

using dual_test::copy_equals_pack;
using dual_test::out_tolerance;

struct DualPool : Pool {
  HostTensor read_copy, ring_v, ring_beta;
  ReadFormat format;
  DualPool(const Cfg& c, ReadFormat f) : Pool(c), format(f) {
    read_copy.reset(DType::u8, {c.S, c.HV, quant_layout(f, c.V, c.K).tile_bytes});
    ring_v.reset(c.act, {c.S, c.R(), c.HV, c.V});
    ring_beta.reset(DType::f32, {c.S, c.R(), c.HV});
  }
  DeltaPool dview() const {
    DeltaPool p = view();
    p.read_copy = read_copy;
    p.read_format = format;
    p.ring_v = ring_v;
    p.ring_beta = ring_beta;
    return p;
  }
  std::vector<uint8_t> copy_bytes(int64_t s) const { return dual_test::row_bytes(read_copy, s); }
};

Cfg small_cfg(DeltaFamily f) {
  Cfg c;
  c.fam = f;
  c.H = 2, c.HV = 4, c.K = 32, c.V = 8;
  c.L = 4, c.T_max = 3, c.S = 4;
  return c;
}

// One random speculative run on a dual pool. Checks every step's outputs
// against the fp64 oracle (when tol > 0), the copy invariant, and that rows
// that did not flush kept their checkpoint and copy bytes.
struct DualRun {
  std::vector<uint8_t> state, rings;
  double max_out_err = 0, max_state_err = 0;
  int flushes = 0;
};

DualRun run_dual(const Cfg& c, ReadFormat fmt, Backend backend, int steps, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Params params(c, rng);
  Oracle oracle(c, params);
  DualPool pool(c, fmt);
  const Exec ex = exec_of(backend, 1);
  const std::vector<int64_t> slots = {2, -1, 0};
  const int64_t B = 3, HVV = c.HV * c.V;
  HostTensor slot = index_tensor(slots);

  // Prefill: prompts of 3 and 5 tokens.
  std::vector<int64_t> cu = {0, 3, 3, 8};
  Inputs pin(c, {8});
  for (int64_t i = 0; i < 8; ++i) randomize_token(c, pin, i, rng);
  HostTensor cus = index_tensor(cu);
  DeltaPrefill pf;
  pf.q = pin.q, pf.k = pin.k, pf.v = pin.v, pf.g = pin.g, pf.beta = pin.beta, pf.o = pin.o;
  pf.A_log = params.A_log, pf.dt_bias = params.dt_bias, pf.gating = c.gating;
  pf.cu_seqlens = cus, pf.slot = slot;
  delta_prefill(c.fam, pf, pool.dview(), ex);
  std::vector<Oracle::State> S(3, oracle.zero());
  std::vector<double> o;
  for (int64_t b : {0, 2})
    for (int64_t i = cu[size_t(b)]; i < cu[size_t(b) + 1]; ++i) oracle.apply(S[size_t(b)], pin, i, o);
  for (int64_t s : {0, 2}) EXPECT_TRUE(copy_equals_pack(pool.read_copy, pool.state, s, fmt));

  DualRun res;
  Inputs prev;
  int64_t prevT = 0;
  for (int it = 0; it < steps; ++it) {
    const int64_t T = 1 + int64_t(rng() % uint64_t(c.T_max));
    Inputs in(c, {B, T});
    for (int64_t i = 0; i < B * T; ++i) randomize_token(c, in, i, rng);
    HostTensor acc(DType::i32, {B});
    const bool commit = prevT > 0;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t a = 1 + int64_t(rng() % uint64_t(std::max<int64_t>(prevT, 1)));
      acc.set(b, double(a));
      if (commit && slots[size_t(b)] >= 0)
        for (int64_t t = 0; t < a; ++t) oracle.apply(S[size_t(b)], prev, b * prevT + t, o);
    }
    std::vector<std::vector<uint8_t>> st0, cp0;
    std::vector<RingCursor> cur0;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t s = std::max<int64_t>(slots[size_t(b)], 0);
      st0.push_back(pool.state_bytes(s)), cp0.push_back(pool.copy_bytes(s)), cur0.push_back(pool.cur(s));
    }
    delta_replay_step(c.fam, step_view(c, params, in, slot), pool.dview(), commit ? acc.t() : Tensor{}, false, ex);
    for (int64_t b = 0; b < B; ++b) {
      const int64_t s = slots[size_t(b)];
      if (s < 0) {
        for (int64_t i = 0; i < T * HVV; ++i) EXPECT_EQ(in.o.get(b * T * HVV + i), 0.0);
        continue;
      }
      const int64_t count = cur0[size_t(b)].count + (commit ? int64_t(acc.get(b)) : 0);
      const bool flushed = count + T > c.L;
      res.flushes += flushed;
      if (!flushed) {
        EXPECT_EQ(pool.state_bytes(s), st0[size_t(b)]) << "non-flush step wrote the checkpoint";
        EXPECT_EQ(pool.copy_bytes(s), cp0[size_t(b)]) << "non-flush step wrote the copy";
      }
      EXPECT_TRUE(copy_equals_pack(pool.read_copy, pool.state, s, fmt));
      // Outputs of the window against the oracle on the accepted stream.
      Oracle::State tmp = S[size_t(b)];
      std::vector<double> want, got;
      for (int64_t t = 0; t < T; ++t) {
        oracle.apply(tmp, in, b * T + t, o);
        want.insert(want.end(), o.begin(), o.end());
        const auto g = token_out(in.o, b * T + t, HVV);
        got.insert(got.end(), g.begin(), g.end());
      }
      res.max_out_err = std::max(res.max_out_err, rel_err(got, want));
    }
    prev = std::move(in);
    prevT = T;
  }
  // Commit the last window and compare the materialised high-precision state.
  HostTensor acc(DType::i32, {B});
  for (int64_t b = 0; b < B; ++b) {
    acc.set(b, double(prevT));
    if (slots[size_t(b)] >= 0)
      for (int64_t t = 0; t < prevT; ++t) oracle.apply(S[size_t(b)], prev, b * prevT + t, o);
  }
  delta_commit(c.fam, pool.dview(), slot, -1, acc, ex);
  HostTensor out(DType::f64, {B, c.HV, c.V, c.K});
  delta_materialize(c.fam, pool.dview(), slot, -1, out, ex);
  for (int64_t b : {0, 2}) res.max_state_err = std::max(res.max_state_err, rel_err(slot_state(out, b), S[size_t(b)]));
  res.state = dual_test::all_bytes(pool.state);
  for (const HostTensor* t : {&pool.ring_k, &pool.ring_ks, &pool.ring_g, &pool.ring_v, &pool.ring_beta, &pool.cursor}) {
    const auto v = dual_test::all_bytes(*t);
    res.rings.insert(res.rings.end(), v.begin(), v.end());
  }
  return res;
}

class DualDelta : public ::testing::TestWithParam<std::tuple<DeltaFamily, Backend, ReadFormat>> {};

TEST_P(DualDelta, OutputsMatchOracleWithinFormatTolerance) {
  const auto [fam, backend, fmt] = GetParam();
  const Cfg c = small_cfg(fam);
  const DualRun r = run_dual(c, fmt, backend, 40, 7);
  EXPECT_GT(r.flushes, 5);
  EXPECT_LT(r.max_out_err, out_tolerance(fmt)) << read_format_name(fmt);
  RecordProperty("max_out_err", std::to_string(r.max_out_err));
  RecordProperty("max_state_err", std::to_string(r.max_state_err));
  EXPECT_LT(r.max_state_err, 1e-4) << "high-precision checkpoint vs the fp64 recurrence";
}

INSTANTIATE_TEST_SUITE_P(
    All, DualDelta,
    ::testing::Combine(::testing::Values(DeltaFamily::gdn, DeltaFamily::kda),
                       ::testing::Values(Backend::reference, Backend::cpu),
                       ::testing::Values(ReadFormat::bf16, ReadFormat::f16, ReadFormat::fp8_e4m3, ReadFormat::nvfp4)),
    [](const auto& i) {
      return std::string(fam_name(std::get<0>(i.param))) + "_" + backend_name(std::get<1>(i.param)) + "_" +
             read_format_name(std::get<2>(i.param));
    });

// Design §5.5: the checkpoint does not depend on the copy's format.
TEST(DualDeltaInvariant, CheckpointBitIdenticalAcrossFormats) {
  for (DeltaFamily fam : {DeltaFamily::gdn, DeltaFamily::kda})
    for (Backend backend : {Backend::reference, Backend::cpu})
      for (DType sd : {DType::f32, DType::bf16}) {
        if (sd == DType::bf16 && backend == Backend::reference) continue;  // dtype paths are shared
        Cfg c = small_cfg(fam);
        c.state = sd;
        const DualRun base = run_dual(c, ReadFormat::bf16, backend, 50, 11);
        EXPECT_GT(base.flushes, 20);
        for (ReadFormat f : {ReadFormat::f16, ReadFormat::fp8_e4m3, ReadFormat::nvfp4}) {
          const DualRun r = run_dual(c, f, backend, 50, 11);
          EXPECT_EQ(r.state, base.state) << fam_name(fam) << " " << backend_name(backend) << " "
                                         << read_format_name(f) << " state " << dtype_name(sd);
          EXPECT_EQ(r.rings, base.rings);
        }
      }
}

// Slot operations keep the copy equal to quant_pack of the checkpoint.
TEST(DualDeltaSlots, FlushCopyResetMaterialize) {
  for (Backend backend : {Backend::reference, Backend::cpu}) {
    const Cfg c = small_cfg(DeltaFamily::kda);
    const ReadFormat fmt = ReadFormat::nvfp4;
    std::mt19937_64 rng(3);
    Params params(c, rng);
    DualPool pool(c, fmt);
    const Exec ex = exec_of(backend, 1);
    HostTensor slot = index_tensor({1, 3});
    // Two committed steps without a flush, then flush, copy, reset.
    for (int i = 0; i < 2; ++i) {
      Inputs in(c, {2, 1});
      for (int64_t j = 0; j < 2; ++j) randomize_token(c, in, j, rng);
      delta_replay_step(c.fam, step_view(c, params, in, slot), pool.dview(), Tensor{}, true, ex);
    }
    EXPECT_EQ(pool.cur(1).count, 2);
    HostTensor before(DType::f32, {2, c.HV, c.V, c.K});
    delta_materialize(c.fam, pool.dview(), slot, -1, before, ex);
    // Prefill with `initial` continues from the high-precision state: the
    // same as a prefill of a baseline pool holding the materialised state.
    {
      DualPool twin(c, fmt);
      twin.copy_from(pool);
      twin.read_copy.copy_from(pool.read_copy), twin.ring_v.copy_from(pool.ring_v), twin.ring_beta.copy_from(pool.ring_beta);
      Inputs pin(c, {3});
      for (int64_t j = 0; j < 3; ++j) randomize_token(c, pin, j, rng);
      HostTensor cus = index_tensor({0, 3}), one = index_tensor({1}), init = index_tensor({1});
      DeltaPrefill pf;
      pf.q = pin.q, pf.k = pin.k, pf.v = pin.v, pf.g = pin.g, pf.beta = pin.beta, pf.o = pin.o;
      pf.A_log = params.A_log, pf.dt_bias = params.dt_bias, pf.gating = c.gating;
      pf.cu_seqlens = cus, pf.slot = one, pf.initial = init;
      delta_prefill(c.fam, pf, twin.dview(), ex);
      EXPECT_EQ(twin.cur(1).count, 0);
      EXPECT_TRUE(copy_equals_pack(twin.read_copy, twin.state, 1, fmt));
      HostTensor base(DType::f32, {1, c.HV, c.V, c.K});
      std::memcpy(base.data(), before.data(), base.bytes());  // materialised state of slot 1
      Inputs pin2(c, {3});
      pin2.q.copy_from(pin.q), pin2.k.copy_from(pin.k), pin2.v.copy_from(pin.v), pin2.g.copy_from(pin.g), pin2.beta.copy_from(pin.beta);
      HostTensor zero = index_tensor({0});
      pf.q = pin2.q, pf.k = pin2.k, pf.v = pin2.v, pf.g = pin2.g, pf.beta = pin2.beta, pf.o = pin2.o, pf.slot = zero;
      DeltaPool bp;
      bp.state = base;
      delta_prefill(c.fam, pf, bp, ex);
      EXPECT_EQ(slot_state(twin.state, 1), slot_state(base, 0));
      EXPECT_EQ(pin.o.to_f64(), pin2.o.to_f64());
    }
    delta_flush(c.fam, pool.dview(), slot, -1, ex);
    EXPECT_EQ(pool.cur(1).count, 0);
    for (int64_t b = 0; b < 2; ++b) {
      const int64_t s = b == 0 ? 1 : 3;
      EXPECT_TRUE(copy_equals_pack(pool.read_copy, pool.state, s, fmt));
      // flush writes exactly what materialise returned (both f32).
      EXPECT_EQ(slot_state(pool.state, s), slot_state(before, b));
    }
    HostTensor src = index_tensor({1}), dst = index_tensor({2});
    delta_copy_slot(c.fam, pool.dview(), src, dst, -1, ex);
    EXPECT_EQ(pool.copy_bytes(2), pool.copy_bytes(1));
    EXPECT_EQ(dual_test::row_bytes(pool.ring_v, 2), dual_test::row_bytes(pool.ring_v, 1));
    delta_reset_slot(c.fam, pool.dview(), dst, -1, ex);
    EXPECT_TRUE(copy_equals_pack(pool.read_copy, pool.state, 2, fmt));
    for (double v : slot_state(pool.state, 2)) EXPECT_EQ(v, 0.0);
  }
}

// Speculative windows (T > 1) with separate and fused commits are covered by
// run_dual; here: bad inputs are rejected with the argument named and leave
// every byte of the pool unchanged.
TEST(DualDeltaErrors, RejectedCallsNameArgumentAndWriteNothing) {
  const Cfg c = small_cfg(DeltaFamily::gdn);
  std::mt19937_64 rng(5);
  Params params(c, rng);
  DualPool pool(c, ReadFormat::fp8_e4m3);
  for (auto* t : {&pool.state, &pool.ring_d, &pool.read_copy, &pool.ring_v})
    for (size_t i = 0; i < t->bytes(); ++i) static_cast<uint8_t*>(t->data())[i] = uint8_t(rng() & 0x3f);
  for (int64_t s = 0; s < c.S; ++s) pool.set_cur(s, RingCursor{1, 3, 0});
  HostTensor slot = index_tensor({0, 2});
  Inputs in(c, {2, 2});
  for (int64_t j = 0; j < 4; ++j) randomize_token(c, in, j, rng);
  const auto snapshot = [&] {
    std::vector<uint8_t> v;
    for (const HostTensor* t : {&pool.state, &pool.read_copy, &pool.ring_d, &pool.ring_v, &pool.ring_beta, &pool.cursor}) {
      const auto b = dual_test::all_bytes(*t);
      v.insert(v.end(), b.begin(), b.end());
    }
    return v;
  };
  const auto bytes0 = snapshot();
  const Exec ex = exec_of(Backend::cpu, 1);
  auto expect_error = [&](const char* arg, auto&& fn) {
    try {
      fn();
      ADD_FAILURE() << "no error for " << arg;
    } catch (const Error& e) {
      EXPECT_EQ(e.argument(), arg) << e.what();
    }
    EXPECT_EQ(snapshot(), bytes0) << arg;
  };
  auto step = [&](DeltaPool p, Exec e = exec_of(Backend::cpu, 1)) {
    delta_replay_step(c.fam, step_view(c, params, in, slot), p, Tensor{}, true, e);
  };
  {  // a copy sized for another format
    HostTensor wrong(DType::u8, {c.S, c.HV, quant_layout(ReadFormat::bf16, c.V, c.K).tile_bytes});
    DeltaPool p = pool.dview();
    p.read_copy = wrong;
    expect_error("pool.read_copy", [&] { step(p); });
  }
  {  // format mismatch: the tile is an fp8 tile, the format says nvfp4
    DeltaPool p = pool.dview();
    p.read_format = ReadFormat::nvfp4;
    expect_error("pool.read_copy", [&] { step(p); });
  }
  {  // wrong dtype
    HostTensor wrong(DType::f32, {c.S, c.HV, quant_layout(ReadFormat::fp8_e4m3, c.V, c.K).tile_bytes});
    DeltaPool p = pool.dview();
    p.read_copy = wrong;
    expect_error("pool.read_copy", [&] { step(p); });
  }
  {  // wrong head count
    HostTensor wrong(DType::u8, {c.S, c.HV - 1, quant_layout(ReadFormat::fp8_e4m3, c.V, c.K).tile_bytes});
    DeltaPool p = pool.dview();
    p.read_copy = wrong;
    expect_error("pool.read_copy", [&] { step(p); });
  }
  {  // dual records missing
    DeltaPool p = pool.dview();
    p.ring_beta = Tensor{};
    expect_error("pool.ring_beta", [&] { step(p); });
  }
  {  // a bad input caught by the single-precision validation after the fold
    Inputs bad(c, {2, 2});
    for (int64_t j = 0; j < 4; ++j) randomize_token(c, bad, j, rng);
    bad.o.reset(c.act, {2, 2, c.HV, c.V + 1});
    expect_error("o", [&] {
      delta_replay_step(c.fam, step_view(c, params, bad, slot), pool.dview(), Tensor{}, true, ex);
    });
  }
  {  // accepted count out of range
    for (int64_t s = 0; s < c.S; ++s) pool.set_cur(s, RingCursor{1, 3, 1});
    const auto b1 = snapshot();
    HostTensor acc = index_tensor({1, 2});
    try {
      delta_replay_step(c.fam, step_view(c, params, in, slot), pool.dview(), acc, true, ex);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.argument(), "num_accepted");
    }
    EXPECT_EQ(snapshot(), b1);
    for (int64_t s = 0; s < c.S; ++s) pool.set_cur(s, RingCursor{1, 3, 0});
  }
  {  // the cuda backend runs dual pools on device tensors only
    Exec e;
    e.backend = Backend::cuda;
    expect_error("q", [&] { step(pool.dview(), e); });
  }
}

// Shared mode equals decode on the unpacked state followed by quant_pack.
TEST(SharedDelta, EqualsQuantiseAfterEveryStep) {
  for (DeltaFamily fam : {DeltaFamily::gdn, DeltaFamily::kda})
    for (Backend backend : {Backend::reference, Backend::cpu})
      for (ReadFormat fmt : {ReadFormat::bf16, ReadFormat::fp8_e4m3, ReadFormat::nvfp4}) {
        const Cfg c = small_cfg(fam);
        std::mt19937_64 rng(9);
        Params params(c, rng);
        const Exec ex = exec_of(backend, 1);
        const int64_t tile = quant_layout(fmt, c.V, c.K).tile_bytes;
        HostTensor packed(DType::u8, {c.S, c.HV, tile});
        HostTensor manual(DType::u8, {c.S, c.HV, tile});
        HostTensor st(DType::f32, {c.S, c.HV, c.V, c.K});
        HostTensor slot = index_tensor({3, -1, 1});
        for (int it = 0; it < 12; ++it) {
          Inputs in(c, {3, 2});
          for (int64_t j = 0; j < 6; ++j) randomize_token(c, in, j, rng);
          Inputs in2(c, {3, 2});
          for (auto [d, o] : {std::pair{&in2.q, &in.q}, {&in2.k, &in.k}, {&in2.v, &in.v}, {&in2.g, &in.g}, {&in2.beta, &in.beta}}) d->copy_from(*o);
          delta_decode_shared(fam, step_view(c, params, in, slot), packed, fmt, QuantRounding{}, ex);
          // By hand: unpack, decode, pack.
          Tensor mflat = Tensor::view(manual.data(), DType::u8, {c.S * c.HV, tile});
          Tensor sflat = Tensor::view(st.data(), DType::f32, {c.S * c.HV, c.V, c.K});
          quant_unpack(fmt, mflat, sflat, ex);
          delta_decode(fam, step_view(c, params, in2, slot), st, ex);
          quant_pack(fmt, sflat, mflat, ex);
          ASSERT_TRUE(packed.bytes_equal(manual)) << fam_name(fam) << " " << read_format_name(fmt) << " step " << it;
          EXPECT_EQ(in.o.to_f64(), in2.o.to_f64());
        }
        // Stochastic rounding: reproducible, and different from RNE.
        HostTensor a(DType::u8, {c.S, c.HV, tile}), b(DType::u8, {c.S, c.HV, tile});
        a.copy_from(packed), b.copy_from(packed);
        Inputs in(c, {3, 1});
        for (int64_t j = 0; j < 3; ++j) randomize_token(c, in, j, rng);
        QuantRounding sr{true, 42, 7};
        delta_decode_shared(fam, step_view(c, params, in, slot), a, fmt, sr, ex);
        delta_decode_shared(fam, step_view(c, params, in, slot), b, fmt, sr, ex);
        EXPECT_TRUE(a.bytes_equal(b));
        delta_decode_shared(fam, step_view(c, params, in, slot), packed, fmt, QuantRounding{}, ex);
        EXPECT_FALSE(a.bytes_equal(packed));
      }
}

// The cuda backend runs shared mode on device tensors (tests/gpu/shared_gpu_test.cpp):
// host tensors are rejected before anything is written.
TEST(SharedDelta, CudaNeedsDeviceTensors) {
  const Cfg c = small_cfg(DeltaFamily::gdn);
  std::mt19937_64 rng(1);
  Params params(c, rng);
  Inputs in(c, {1, 1});
  HostTensor slot = index_tensor({0});
  HostTensor packed(DType::u8, {c.S, c.HV, quant_layout(ReadFormat::bf16, c.V, c.K).tile_bytes});
  Exec e;
  e.backend = Backend::cuda;
  try {
    delta_decode_shared(c.fam, step_view(c, params, in, slot), packed, ReadFormat::bf16, QuantRounding{}, e);
    ADD_FAILURE();
  } catch (const Error& err) {
    EXPECT_EQ(err.argument(), "packed_state");
    EXPECT_NE(std::string(err.what()).find("cuda"), std::string::npos);
  }
  for (int64_t i = 0; i < int64_t(packed.bytes()); ++i) ASSERT_EQ(packed.as<uint8_t>()[i], 0);
}

TEST(DualSizing, BytesPerRowPerMode) {
  const DeltaShape s{16, 32, 128, 128};
  const int64_t single = delta_replay_bytes_per_row(DeltaFamily::gdn, s, DType::f32, DType::bf16, DType::f32, 16, 4);
  EXPECT_EQ(delta_state_bytes_per_row(PrecisionMode::single, DeltaFamily::gdn, s, DType::f32, ReadFormat::nvfp4,
                                      DType::bf16, DType::f32, 16, 4), single);
  const int64_t tile = quant_layout(ReadFormat::nvfp4, 128, 128).tile_bytes;
  EXPECT_EQ(tile, 128 * 64 + 128 * 8 + 16);
  EXPECT_EQ(delta_state_bytes_per_row(PrecisionMode::shared, DeltaFamily::gdn, s, DType::f32, ReadFormat::nvfp4,
                                      DType::bf16, DType::f32, 16, 4), 32 * tile);
  EXPECT_EQ(delta_state_bytes_per_row(PrecisionMode::dual, DeltaFamily::gdn, s, DType::f32, ReadFormat::nvfp4,
                                      DType::bf16, DType::f32, 16, 4),
            single + 32 * tile + 20 * 32 * (128 * 2 + 4));
}

}  // namespace
}  // namespace replayssm::test::delta
