// Read-copy formats (src/quant): scalar codecs against the oracle over every
// code, ties, saturation, zeros, tiny scales, NaN/Inf policy; whole tiles of
// the fast CPU path against the oracle bit for bit; error bounds; validation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "quant/backend.h"
#include "quant/codec.h"
#include "quant/quant_oracle.h"
#include "quant_test_util.h"
#include "replayssm/quant.h"
#include "test_util.h"

namespace replayssm::test {
namespace {

namespace q = replayssm::quant;
namespace qo = replayssm::quant::oracle;

constexpr float NaNf = std::numeric_limits<float>::quiet_NaN();
constexpr float Inf = std::numeric_limits<float>::infinity();
const ReadFormat FORMATS[] = {ReadFormat::bf16, ReadFormat::f16, ReadFormat::fp8_e4m3, ReadFormat::nvfp4};

uint32_t bits(float v) { uint32_t u; std::memcpy(&u, &v, 4); return u; }

// Packs / unpacks contiguous fp32 tiles through the public API.
std::vector<uint8_t> pack(ReadFormat f, const std::vector<float>& x, int64_t n, int64_t R, int64_t K,
                          Backend be) {
  const QuantLayout L = quant_layout(f, R, K);
  HostTensor packed(DType::u8, {n, L.tile_bytes});
  std::memset(packed.data(), 0xAB, packed.bytes());
  Tensor in = Tensor::view(const_cast<float*>(x.data()), DType::f32, {n, R, K});
  Exec e;
  e.backend = be;
  quant_pack(f, in, packed, e);
  const uint8_t* p = packed.as<uint8_t>();
  return std::vector<uint8_t>(p, p + packed.bytes());
}
std::vector<float> unpack(ReadFormat f, const std::vector<uint8_t>& bytes, int64_t n, int64_t R,
                          int64_t K, Backend be) {
  const QuantLayout L = quant_layout(f, R, K);
  HostTensor packed(DType::u8, {n, L.tile_bytes});
  std::memcpy(packed.data(), bytes.data(), bytes.size());
  std::vector<float> y(size_t(n * R * K), -12345.f);
  Exec e;
  e.backend = be;
  quant_unpack(f, packed, Tensor::view(y.data(), DType::f32, {n, R, K}), e);
  return y;
}

// ---- scalar codecs: every code -------------------------------------------

TEST(QuantCodec, E4M3EveryCodeDecodesAndRoundTrips) {
  for (int c = 0; c < 256; ++c) {
    const float fast = q::e4m3_decode(uint8_t(c));
    const double ref = qo::e4m3_value(uint8_t(c));
    if ((c & 0x7F) == 0x7F) {
      EXPECT_TRUE(std::isnan(fast) && std::isnan(ref)) << c;
      continue;
    }
    EXPECT_EQ(double(fast), ref) << c;
    EXPECT_EQ(std::signbit(fast), c >= 0x80) << c;
    EXPECT_EQ(q::e4m3_encode(fast), c) << c;
    EXPECT_EQ(qo::e4m3_encode(ref), c) << c;
  }
  EXPECT_EQ(q::e4m3_decode(0x7E), 448.f);
  EXPECT_EQ(q::e4m3_decode(0x01), 0x1p-9f);
  EXPECT_EQ(q::e4m3_decode(0x08), 0x1p-6f);
}

TEST(QuantCodec, E2M1EveryCodeDecodesAndRoundTrips) {
  const float MAG[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
  for (int c = 0; c < 16; ++c) {
    const float fast = q::e2m1_decode(uint8_t(c));
    EXPECT_EQ(double(fast), qo::e2m1_value(uint8_t(c))) << c;
    EXPECT_EQ(std::fabs(fast), MAG[c & 7]) << c;
    EXPECT_EQ(std::signbit(fast), c >= 8) << c;
    EXPECT_EQ(q::e2m1_encode(fast), c) << c;
    EXPECT_EQ(qo::e2m1_encode(fast), c) << c;
  }
}

TEST(QuantCodec, Bf16F16EveryCodeMatchesOracle) {
  for (uint32_t c = 0; c < 65536; ++c) {
    const float b = bf16_to_f32(uint16_t(c)), h = f16_to_f32(uint16_t(c));
    const double rb = qo::bf16_value(uint16_t(c)), rh = qo::f16_value(uint16_t(c));
    if (std::isnan(rb)) {
      EXPECT_TRUE(std::isnan(b));
    } else {
      ASSERT_EQ(double(b), rb) << c;
      ASSERT_EQ(qo::bf16_encode(b), c) << c;
    }
    if (std::isnan(rh)) {
      EXPECT_TRUE(std::isnan(h));
    } else {
      ASSERT_EQ(double(h), rh) << c;
      ASSERT_EQ(qo::f16_encode(h), c) << c;
    }
  }
}

// ---- ties, saturation, zeros --------------------------------------------

TEST(QuantCodec, E4M3TiesGoToEvenAndNeighboursToNearest) {
  for (int c = 0; c < 0x7E; ++c) {
    const float lo = q::e4m3_decode(uint8_t(c)), hi = q::e4m3_decode(uint8_t(c + 1));
    const float mid = (lo + hi) / 2;  // exact: 5 significant bits
    const int even = (c % 2 == 0) ? c : c + 1;
    for (float sgn : {1.f, -1.f}) {
      const int s = sgn < 0 ? 0x80 : 0;
      EXPECT_EQ(q::e4m3_encode(sgn * mid), even | s) << c;
      EXPECT_EQ(q::e4m3_encode(sgn * next_down(mid)), c | s) << c;
      EXPECT_EQ(q::e4m3_encode(sgn * next_up(mid)), (c + 1) | s) << c;
      EXPECT_EQ(qo::e4m3_encode(sgn * mid), even | s) << c;
    }
  }
  EXPECT_EQ(q::e4m3_decode(q::e4m3_encode(0.3f)), 0.3125f);
  EXPECT_EQ(q::e4m3_decode(q::e4m3_encode(74.67f)), 72.f);
}

TEST(QuantCodec, E2M1TiesGoToEven) {
  const float in[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.f};
  const float out[] = {0.f, 1.f, 1.f, 2.f, 2.f, 4.f, 4.f};
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(q::e2m1_decode(q::e2m1_encode(in[i])), out[i]) << in[i];
    EXPECT_EQ(q::e2m1_decode(q::e2m1_encode(-in[i])), -out[i]) << in[i];
    EXPECT_EQ(qo::e2m1_encode(in[i]), q::e2m1_encode(in[i])) << in[i];
    EXPECT_LT(q::e2m1_decode(q::e2m1_encode(next_down(in[i]))), in[i]);
    EXPECT_GT(q::e2m1_decode(q::e2m1_encode(next_up(in[i]))), in[i]);
  }
}

TEST(QuantCodec, SaturationAndSpecials) {
  for (float v : {448.f, 449.f, 464.f, next_up(464.f), 480.f, 1e9f, 3.4e38f}) {
    EXPECT_EQ(q::e4m3_encode(v), 0x7E) << v;
    EXPECT_EQ(q::e4m3_encode(-v), 0xFE) << v;
    EXPECT_EQ(qo::e4m3_encode(v), 0x7E) << v;
  }
  for (float v : {6.f, 6.5f, 7.f, 100.f, 3.4e38f, Inf}) {
    EXPECT_EQ(q::e2m1_encode(v), 7) << v;
    EXPECT_EQ(q::e2m1_encode(-v), 15) << v;
    EXPECT_EQ(qo::e2m1_encode(v), 7) << v;
  }
  // E4M3 has no Inf: NaN → 0x7F, ±Inf → 0x7F | sign (both decode to NaN).
  EXPECT_EQ(q::e4m3_encode(NaNf), 0x7F);
  EXPECT_EQ(q::e4m3_encode(-NaNf), 0x7F);
  EXPECT_EQ(q::e4m3_encode(Inf), 0x7F);
  EXPECT_EQ(q::e4m3_encode(-Inf), 0xFF);
  EXPECT_EQ(qo::e4m3_encode(-Inf), 0xFF);
  EXPECT_EQ(qo::e4m3_encode(NaNf), 0x7F);
  // Zeros keep their sign; values below half the smallest subnormal → ±0.
  EXPECT_EQ(q::e4m3_encode(0.f), 0x00);
  EXPECT_EQ(q::e4m3_encode(-0.f), 0x80);
  EXPECT_EQ(q::e4m3_encode(-1e-30f), 0x80);
  EXPECT_EQ(q::e4m3_encode(0x1p-10f), 0x00);                  // tie → even (0)
  EXPECT_EQ(q::e4m3_encode(next_up(0x1p-10f)), 0x01);
  EXPECT_EQ(q::e4m3_encode(-1e-45f), 0x80);                   // fp32 subnormal
  EXPECT_TRUE(std::signbit(q::e4m3_decode(0x80)));
  EXPECT_EQ(q::e2m1_encode(-0.f), 8);
  EXPECT_TRUE(std::signbit(q::e2m1_decode(8)));
  // bf16 / f16: IEEE overflow, canonical NaN through the tile path (below).
  EXPECT_EQ(qo::f16_encode(65519.f), 0x7BFF);
  EXPECT_EQ(qo::f16_encode(65520.f), 0x7C00);
  EXPECT_EQ(f32_to_f16(65520.f), 0x7C00);
  EXPECT_EQ(qo::bf16_encode(3.4e38f), f32_to_bf16(3.4e38f));
}

TEST(QuantCodec, Fp8BlockExponent) {
  EXPECT_EQ(q::fp8_block_exp(0.f), -127);
  EXPECT_EQ(q::fp8_block_exp(448.f), 0);
  EXPECT_EQ(q::fp8_block_exp(next_up(448.f)), 1);
  EXPECT_EQ(q::fp8_block_exp(1.f), -8);
  EXPECT_EQ(q::fp8_block_exp(3.4e38f), 120);
  EXPECT_EQ(q::fp8_block_exp(1e-40f), -127);
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = rng() & 0x7fffffffu;
    if (u >= 0x7f800000u) continue;
    float a;
    std::memcpy(&a, &u, 4);
    ASSERT_EQ(q::fp8_block_exp(a), qo::fp8_block_exp(a)) << a;
  }
}

// Every fp32 value in [0, 8) by its bit pattern (E4M3 exhaustively around
// its whole grid's scale-free part; E2M1 completely): fast == oracle.
TEST(QuantCodec, ExhaustiveFp32SweepMatchesOracle) {
  for (uint32_t u = 0; u < 0x41000000u; u += 997) {
    float v;
    std::memcpy(&v, &u, 4);
    ASSERT_EQ(q::e2m1_encode(v), qo::e2m1_encode(v)) << v;
    ASSERT_EQ(q::e4m3_encode(v * 64.f), qo::e4m3_encode(double(v) * 64)) << v;
    ASSERT_EQ(q::e4m3_encode(-v), qo::e4m3_encode(-double(v))) << v;
  }
}

// ---- layouts ---------------------------------------------------------------

TEST(QuantLayoutTest, ModelShapeSizes) {
  const QuantLayout f8 = quant_layout(ReadFormat::fp8_e4m3, 128, 128);
  EXPECT_EQ(f8.scale_offset, 128 * 128);
  EXPECT_EQ(f8.tile_bytes, 128 * 128 + 128 * 4);
  const QuantLayout f4 = quant_layout(ReadFormat::nvfp4, 128, 128);
  EXPECT_EQ(f4.code_row_bytes, 64);
  EXPECT_EQ(f4.scale_offset, 8192);
  EXPECT_EQ(f4.tensor_scale_offset, 8192 + 1024);
  EXPECT_EQ(f4.tile_bytes, 8192 + 1024 + 16);
  EXPECT_NEAR(f4.bytes_per_element(), 0.5635, 1e-3);
  EXPECT_EQ(quant_layout(ReadFormat::bf16, 80, 128).tile_bytes, 80 * 128 * 2);
  EXPECT_EQ(quant_layout(ReadFormat::f16, 3, 5).tile_bytes, 32);
  EXPECT_THROW(quant_layout(ReadFormat::fp8_e4m3, 4, 48), Error);
  EXPECT_THROW(quant_layout(ReadFormat::nvfp4, 4, 24), Error);
  EXPECT_THROW(quant_layout(ReadFormat::nvfp4, 0, 32), Error);
  EXPECT_THROW(quant_layout(ReadFormat(9), 4, 32), Error);
}

// ---- whole tiles: fast == oracle, bit for bit ------------------------------

TEST(QuantTiles, FastEqualsOracleOnEveryGenerator) {
  const int64_t R = 24, K = 128, n = 64;  // 196,608 values per generator and format
  uint64_t seed = 1;
  int64_t total = 0;
  for (ReadFormat f : FORMATS)
    for (QuantGen g : all_quant_gens()) {
      const std::vector<float> x = quant_tiles(g, n, R, K, seed++);
      const auto fast = pack(f, x, n, R, K, Backend::cpu);
      const auto ref = pack(f, x, n, R, K, Backend::reference);
      ASSERT_EQ(fast.size(), ref.size());
      for (size_t i = 0; i < fast.size(); ++i)
        ASSERT_EQ(int(fast[i]), int(ref[i]))
            << read_format_name(f) << " " << quant_gen_name(g) << " byte " << i;
      const auto yf = unpack(f, fast, n, R, K, Backend::cpu);
      const auto yr = unpack(f, fast, n, R, K, Backend::reference);
      const int64_t bad = first_float_mismatch(yf.data(), yr.data(), int64_t(yf.size()));
      ASSERT_EQ(bad, -1) << read_format_name(f) << " " << quant_gen_name(g) << " value " << bad
                         << ": " << yf[size_t(std::max<int64_t>(bad, 0))] << " vs "
                         << yr[size_t(std::max<int64_t>(bad, 0))];
      total += int64_t(x.size());
    }
  EXPECT_GE(total, 5'000'000);
}

TEST(QuantTiles, ExactValuesRoundTrip) {
  std::mt19937 rng(3);
  const int64_t R = 8, K = 64;
  // FP8: E4M3 values times 2^k with one 448·2^k per block decode exactly.
  std::vector<float> x(size_t(R * K));
  for (int64_t b = 0; b < R * K / 32; ++b) {
    const int k = int(rng() % 200) - 100;
    for (int i = 0; i < 32; ++i) {
      uint8_t c = uint8_t(rng() % 256);
      if ((c & 0x7F) == 0x7F) c = 0;
      x[size_t(b * 32 + i)] = std::ldexp(q::e4m3_decode(c), k);
    }
    x[size_t(b * 32 + rng() % 32)] = std::ldexp(448.f, k);
  }
  auto y = unpack(ReadFormat::fp8_e4m3, pack(ReadFormat::fp8_e4m3, x, 1, R, K, Backend::cpu), 1, R, K, Backend::cpu);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(bits(y[i]), bits(x[i])) << i;
  // NVFP4: e·s·2^j with t = 2^j (tile amax 2688·2^j) and a ±6 in every block.
  const int j = -20;
  for (int64_t b = 0; b < R * K / 16; ++b) {
    const uint8_t sc = b == 0 ? uint8_t(0x7E) : uint8_t(1 + rng() % 0x7D);  // block 0 holds 6·448
    const float s = q::e4m3_decode(sc);
    for (int i = 0; i < 16; ++i) x[size_t(b * 16 + i)] = std::ldexp(q::e2m1_decode(uint8_t(rng() % 16)) * s, j);
    x[size_t(b * 16 + rng() % 16)] = std::ldexp(-6.f * s, j);
  }
  x[5] = std::ldexp(2688.f, j);  // tile amax 2688·2^j → t = 2^j
  y = unpack(ReadFormat::nvfp4, pack(ReadFormat::nvfp4, x, 1, R, K, Backend::cpu), 1, R, K, Backend::cpu);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(bits(y[i]), bits(x[i])) << i << " " << x[i];
}

TEST(QuantTiles, ZeroTilesAndTinyScalesGiveNoNaN) {
  const int64_t R = 2, K = 64;
  std::vector<float> x(size_t(R * K), 0.f);
  for (size_t i = 0; i < x.size(); i += 3) x[i] = -0.f;
  for (ReadFormat f : FORMATS) {
    const auto y = unpack(f, pack(f, x, 1, R, K, Backend::cpu), 1, R, K, Backend::cpu);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(bits(y[i]), bits(x[i])) << read_format_name(f) << i;
  }
  const QuantLayout L4 = quant_layout(ReadFormat::nvfp4, R, K);
  auto p = pack(ReadFormat::nvfp4, x, 1, R, K, Backend::cpu);
  float t;
  std::memcpy(&t, p.data() + L4.tensor_scale_offset, 4);
  EXPECT_EQ(t, 0.f);

  // NVFP4 tile amax 1: block 0 normal, block 1 (a_b = 1e-5) a subnormal E4M3
  // scale, block 2 (a_b = 1e-7) a scale that rounds to 0 → zeros, no NaN.
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  for (auto& v : x) v = 0.3f * nd(rng);
  x[0] = 1.f;
  for (int i = 16; i < 32; ++i) x[size_t(i)] = 1e-5f * (i % 2 ? 1.f : -0.5f);
  for (int i = 32; i < 48; ++i) x[size_t(i)] = 1e-7f;
  p = pack(ReadFormat::nvfp4, x, 1, R, K, Backend::cpu);
  EXPECT_EQ(p, pack(ReadFormat::nvfp4, x, 1, R, K, Backend::reference));
  const uint8_t s1 = p[size_t(L4.scale_offset + 1)], s2 = p[size_t(L4.scale_offset + 2)];
  EXPECT_TRUE(s1 > 0 && s1 < 0x08) << int(s1);  // E4M3 subnormal
  EXPECT_EQ(s2, 0);
  auto y = unpack(ReadFormat::nvfp4, p, 1, R, K, Backend::cpu);
  for (size_t i = 0; i < y.size(); ++i) ASSERT_TRUE(std::isfinite(y[i])) << i;
  for (int i = 32; i < 48; ++i) EXPECT_EQ(y[size_t(i)], 0.f);
  for (int i = 16; i < 32; ++i) EXPECT_NEAR(y[size_t(i)], x[size_t(i)], 0.35e-5) << i;

  // Tile amax below 2^-100 → stored as zeros; just above → quantized normally.
  for (auto& v : x) v = 1e-31f * nd(rng);
  y = unpack(ReadFormat::nvfp4, pack(ReadFormat::nvfp4, x, 1, R, K, Backend::cpu), 1, R, K, Backend::cpu);
  for (float v : y) ASSERT_EQ(v, 0.f);
  for (auto& v : x) v = 1e-28f * nd(rng);
  y = unpack(ReadFormat::nvfp4, pack(ReadFormat::nvfp4, x, 1, R, K, Backend::cpu), 1, R, K, Backend::cpu);
  EXPECT_LT(rel_err(std::vector<double>(y.begin(), y.end()), std::vector<double>(x.begin(), x.end())), 0.15);

  // FP8 blocks of fp32 subnormals (k = −127) stay finite and accurate.
  for (auto& v : x) v = 1e-40f * nd(rng);
  y = unpack(ReadFormat::fp8_e4m3, pack(ReadFormat::fp8_e4m3, x, 1, R, K, Backend::cpu), 1, R, K, Backend::cpu);
  EXPECT_EQ(pack(ReadFormat::fp8_e4m3, x, 1, R, K, Backend::cpu), pack(ReadFormat::fp8_e4m3, x, 1, R, K, Backend::reference));
  for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], x[i], 0.07 * std::fabs(x[i]) + 6e-42) << i;  // E4M3 subnormal step 2^-136
}

TEST(QuantTiles, NonFinitePolicy) {
  const int64_t R = 1, K = 64;
  std::mt19937 rng(11);
  std::normal_distribution<float> nd;
  std::vector<float> x(static_cast<size_t>(K)), clean;
  for (auto& v : x) v = nd(rng);
  x[3] = NaNf, x[5] = Inf, x[7] = -Inf;  // all in FP8 block 0 and NVFP4 block 0
  clean = x;
  clean[3] = clean[5] = clean[7] = 0.f;

  // FP8: NaN → 0x7F, ±Inf → 0x7F | sign; the block scale and the other codes
  // are those of the finite values.
  auto p = pack(ReadFormat::fp8_e4m3, x, 1, R, K, Backend::cpu);
  auto pc = pack(ReadFormat::fp8_e4m3, clean, 1, R, K, Backend::cpu);
  EXPECT_EQ(p[3], 0x7F);
  EXPECT_EQ(p[5], 0x7F);
  EXPECT_EQ(p[7], 0xFF);
  p[3] = pc[3], p[5] = pc[5], p[7] = pc[7];
  EXPECT_EQ(p, pc);

  // NVFP4: a non-finite value poisons its 16-value block (scale 0x7F = NaN,
  // codes 0, all 16 decode to NaN); other blocks are those of the finite tile.
  const QuantLayout L = quant_layout(ReadFormat::nvfp4, R, K);
  p = pack(ReadFormat::nvfp4, x, 1, R, K, Backend::cpu);
  pc = pack(ReadFormat::nvfp4, clean, 1, R, K, Backend::cpu);
  EXPECT_EQ(p[size_t(L.scale_offset)], 0x7F);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(p[size_t(i)], 0);
  auto y = unpack(ReadFormat::nvfp4, p, 1, R, K, Backend::cpu);
  const auto yc = unpack(ReadFormat::nvfp4, pc, 1, R, K, Backend::cpu);
  for (int i = 0; i < 16; ++i) EXPECT_TRUE(std::isnan(y[size_t(i)])) << i;
  for (int i = 16; i < K; ++i) EXPECT_EQ(y[size_t(i)], yc[size_t(i)]) << i;

  // bf16 / f16: IEEE casts, NaN canonical.
  for (ReadFormat f : {ReadFormat::bf16, ReadFormat::f16}) {
    x[9] = -NaNf;
    x[10] = 1e6f;
    p = pack(f, x, 1, R, K, Backend::cpu);
    EXPECT_EQ(p, pack(f, x, 1, R, K, Backend::reference));
    uint16_t c[11];
    std::memcpy(c, p.data(), sizeof(c));
    EXPECT_EQ(c[3], f == ReadFormat::bf16 ? 0x7FC0 : 0x7E00);
    EXPECT_EQ(c[9], f == ReadFormat::bf16 ? 0x7FC0 : 0x7E00);
    EXPECT_EQ(c[7], f == ReadFormat::bf16 ? 0xFF80 : 0xFC00);
    EXPECT_EQ(c[10], f == ReadFormat::bf16 ? f32_to_bf16(1e6f) : 0x7C00);
  }
}

TEST(QuantTiles, InputDtypesAndStridesAndPadding) {
  const int64_t n = 3, R = 5, K = 32, ld = 40;
  std::mt19937 rng(13);
  std::normal_distribution<float> nd;
  for (ReadFormat f : FORMATS) {
    const QuantLayout L = quant_layout(f, R, K);
    // bf16 / f16 inputs equal fp32 inputs holding the same values.
    for (DType dt : {DType::bf16, DType::f16}) {
      HostTensor in(dt, {n, R, K});
      for (int64_t i = 0; i < in.numel(); ++i) in.set(i, 3.0 * nd(rng));
      std::vector<float> x(size_t(in.numel()));
      for (int64_t i = 0; i < in.numel(); ++i) x[size_t(i)] = float(in.get(i));
      HostTensor packed(DType::u8, {n, L.tile_bytes});
      quant_pack(f, in, packed, Exec{});
      const uint8_t* p = packed.as<uint8_t>();
      EXPECT_EQ(std::vector<uint8_t>(p, p + packed.bytes()), pack(f, x, n, R, K, Backend::cpu));
    }
    // Strided input rows and packed rows; padding bytes are written as zeros.
    std::vector<float> big(size_t(n * R * ld)), x(size_t(n * R * K));
    for (int64_t t = 0; t < n; ++t)
      for (int64_t r = 0; r < R; ++r)
        for (int64_t k = 0; k < ld; ++k) {
          const float v = nd(rng);
          big[size_t((t * R + r) * ld + k)] = v;
          if (k < K) x[size_t((t * R + r) * K + k)] = v;
        }
    const int64_t row = L.tile_bytes + 32;
    HostTensor packed(DType::u8, {n, row});
    std::memset(packed.data(), 0xCD, packed.bytes());
    Tensor pv = Tensor::strided(packed.data(), DType::u8, {n, L.tile_bytes}, {row, 1});
    Tensor in = Tensor::strided(big.data(), DType::f32, {n, R, K}, {R * ld, ld, 1});
    quant_pack(f, in, pv, Exec{});
    const auto ref = pack(f, x, n, R, K, Backend::reference);
    for (int64_t t = 0; t < n; ++t) {
      const uint8_t* p = packed.as<uint8_t>() + t * row;
      for (int64_t b = 0; b < L.tile_bytes; ++b)
        ASSERT_EQ(int(p[b]), int(ref[size_t(t * L.tile_bytes + b)])) << read_format_name(f) << b;
      for (int64_t b = L.tile_bytes; b < row; ++b) ASSERT_EQ(p[b], 0xCD);  // untouched
      const quant::Gaps g = quant::padding_gaps(L);
      for (int i = 0; i < 3; ++i)
        for (int64_t b = g.begin[i]; b < g.end[i]; ++b) ASSERT_EQ(p[b], 0) << b;
    }
  }
}

// ---- accuracy ---------------------------------------------------------------

TEST(QuantAccuracy, ErrorWithinFormatBounds) {
  const int64_t n = 16, R = 128, K = 128;
  for (QuantGen g : {QuantGen::normal, QuantGen::heavy}) {
    const std::vector<float> x = quant_tiles(g, n, R, K, 99);
    const std::vector<double> xd(x.begin(), x.end());
    struct Case { ReadFormat f; double frob; double elem_rel; };
    // Per element: |x̂ − x| <= elem_rel·max(|x|, floor) where floor is the
    // block's subnormal step; Frobenius bound from one-shot measurements.
    for (Case c : {Case{ReadFormat::bf16, 0.0025, 0x1p-8}, Case{ReadFormat::f16, 0.0003, 0x1p-11},
                   Case{ReadFormat::fp8_e4m3, 0.035, 0x1p-4}, Case{ReadFormat::nvfp4, 0.11, 0.25}}) {
      const auto bytes = pack(c.f, x, n, R, K, Backend::cpu);
      const auto y = unpack(c.f, bytes, n, R, K, Backend::cpu);
      const QuantLayout L = quant_layout(c.f, R, K);
      for (int64_t i = 0; i < int64_t(x.size()); ++i) {
        double floor = 0;
        const int64_t t = i / (R * K), r = (i / K) % R, k = i % K;
        const uint8_t* tile = bytes.data() + t * L.tile_bytes;
        if (c.f == ReadFormat::f16) floor = 0x1p-14;  // f16 subnormal step 2^-24
        if (c.f == ReadFormat::fp8_e4m3)
          floor = std::ldexp(1.0, int(tile[L.scale_offset + r * L.scale_row_bytes + k / 32]) - 127 - 6);
        if (c.f == ReadFormat::nvfp4) {
          float ts;
          std::memcpy(&ts, tile + L.tensor_scale_offset, 4);
          floor = double(q::e4m3_decode(tile[L.scale_offset + r * L.scale_row_bytes + k / 16])) * ts;
        }
        const double err = std::fabs(double(y[size_t(i)]) - xd[size_t(i)]);
        ASSERT_LE(err, c.elem_rel * std::max(std::fabs(xd[size_t(i)]), floor) * (1 + 1e-6))
            << read_format_name(c.f) << " " << quant_gen_name(g) << " i " << i << " x " << x[size_t(i)];
      }
      const double e = rel_err(std::vector<double>(y.begin(), y.end()), xd);
      std::printf("  %-6s %-6s relative Frobenius error %.4f\n", read_format_name(c.f), quant_gen_name(g), e);
      EXPECT_LT(e, c.frob) << read_format_name(c.f) << " " << quant_gen_name(g);
    }
  }
}

// ---- validation ---------------------------------------------------------------

TEST(QuantErrors, RejectsBadArgumentsWithoutWriting) {
  const int64_t n = 2, R = 4, K = 32;
  HostTensor in(DType::f32, {n, R, K});
  const QuantLayout L = quant_layout(ReadFormat::fp8_e4m3, R, K);
  HostTensor packed(DType::u8, {n, L.tile_bytes + 16});
  std::memset(packed.data(), 0x5A, packed.bytes());
  const Exec cpu{};
  auto untouched = [&] {
    for (size_t i = 0; i < packed.bytes(); ++i)
      if (packed.as<uint8_t>()[i] != 0x5A) return false;
    return true;
  };
  auto expect_arg = [&](auto&& fn, const char* arg) {
    try {
      fn();
      ADD_FAILURE() << "no error for " << arg;
    } catch (const Error& e) {
      EXPECT_EQ(e.argument(), arg) << e.what();
    }
    EXPECT_TRUE(untouched()) << arg;
  };
  Tensor good = Tensor::view(packed.data(), DType::u8, {n, L.tile_bytes});
  expect_arg([&] { quant_pack(ReadFormat::fp8_e4m3, in, packed, cpu); }, "packed");  // wrong width
  Tensor mis = Tensor::strided(packed.as<uint8_t>() + 1, DType::u8, {n, L.tile_bytes}, {L.tile_bytes + 16, 1});
  expect_arg([&] { quant_pack(ReadFormat::fp8_e4m3, in, mis, cpu); }, "packed");  // misaligned
  HostTensor in48(DType::f32, {n, R, 48});
  expect_arg([&] { quant_pack(ReadFormat::fp8_e4m3, in48, good, cpu); }, "in");  // K % 32
  HostTensor in_i32(DType::i32, {n, R, K});
  expect_arg([&] { quant_pack(ReadFormat::fp8_e4m3, in_i32, good, cpu); }, "in");
  expect_arg([&] { quant_pack(ReadFormat(7), in, good, cpu); }, "format");
  HostTensor out16(DType::f16, {n, R, K});
  expect_arg([&] { quant_unpack(ReadFormat::fp8_e4m3, good, out16, cpu); }, "out");
  HostTensor out3(DType::f32, {n + 1, R, K});
  expect_arg([&] { quant_unpack(ReadFormat::fp8_e4m3, good, out3, cpu); }, "packed");
  Exec gpu;
  gpu.backend = Backend::cuda;
  expect_arg([&] { quant_pack(ReadFormat::fp8_e4m3, in, good, gpu); }, "in");  // host tensor
}

}  // namespace
}  // namespace replayssm::test
