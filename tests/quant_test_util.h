// Input generators for the read-copy format tests (CPU and GPU): tiles
// [n, R, K] of fp32 values that stress rounding, scales and specials.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "quant/quant_oracle.h"
#include "replayssm/quant.h"

namespace replayssm::test {

enum class QuantGen {
  normal,      // N(0, 1)
  heavy,       // N(0, 1) / U(0.02, 1)^2: heavy tails, as real states have
  row_scaled,  // N(0, 1) times 10^U(-8, 8) per 16-value block
  wide,        // ±2^U(-140, 127): the whole fp32 range, subnormals included
  fp8_ties,    // E4M3 midpoints (and their fp32 neighbours) under a pinned block exponent
  nvfp4_ties,  // E2M1 midpoints under pinned power-of-two block scales, t = 1
  specials,    // normal values with NaN, ±Inf, ±0, subnormals and fp32 extremes mixed in
};

inline const std::vector<QuantGen>& all_quant_gens() {
  static const std::vector<QuantGen> g = {QuantGen::normal,   QuantGen::heavy,
                                          QuantGen::row_scaled, QuantGen::wide,
                                          QuantGen::fp8_ties, QuantGen::nvfp4_ties,
                                          QuantGen::specials};
  return g;
}

inline float next_up(float v) { return std::nextafter(v, std::numeric_limits<float>::infinity()); }
inline float next_down(float v) { return std::nextafter(v, -std::numeric_limits<float>::infinity()); }

// Fills n tiles [R, K] (contiguous). K must be a multiple of 32 for the tie
// generators (one pinned element per 32-value block).
inline std::vector<float> quant_tiles(QuantGen gen, int64_t n, int64_t R, int64_t K, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd;
  std::uniform_real_distribution<float> ud(0.f, 1.f);
  auto sign = [&] { return (rng() & 1) ? -1.f : 1.f; };
  std::vector<float> x(size_t(n * R * K));
  const float inf = std::numeric_limits<float>::infinity();
  switch (gen) {
    case QuantGen::normal:
      for (auto& v : x) v = nd(rng);
      break;
    case QuantGen::heavy:
      for (auto& v : x) {
        const float u = 0.02f + 0.98f * ud(rng);
        v = nd(rng) / (u * u);
      }
      break;
    case QuantGen::row_scaled:
      for (size_t b = 0; b < x.size(); b += 16) {
        const float s = std::pow(10.f, -8.f + 16.f * ud(rng));
        for (size_t i = b; i < b + 16 && i < x.size(); ++i) x[i] = nd(rng) * s;
      }
      break;
    case QuantGen::wide:
      for (auto& v : x) v = sign() * std::ldexp(1.f + ud(rng), int(rng() % 268) - 140);
      break;
    case QuantGen::fp8_ties:
      for (size_t b = 0; b < x.size(); b += 32) {
        const int k = int(rng() % 60) - 30;
        for (size_t i = b; i < b + 32; ++i) {
          const uint8_t c = uint8_t(rng() % 0x7E);  // c and c + 1 both finite
          float mid = float((quant::oracle::e4m3_value(c) + quant::oracle::e4m3_value(uint8_t(c + 1))) / 2);
          const int wiggle = int(rng() % 4);  // exact tie, one ulp either side, or a code itself
          if (wiggle == 1) mid = next_up(mid);
          if (wiggle == 2) mid = next_down(mid);
          if (wiggle == 3) mid = float(quant::oracle::e4m3_value(c));
          x[i] = sign() * std::ldexp(mid, k);
        }
        x[b + rng() % 32] = sign() * std::ldexp(448.f, k);  // pins the block exponent to k
      }
      break;
    case QuantGen::nvfp4_ties: {
      static const float MID[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.f, 0.5f, 3.f, 6.f};
      for (size_t b = 0; b < x.size(); b += 16) {
        const float s = std::ldexp(1.f, int(rng() % 18) - 9);  // E4M3 power of two
        for (size_t i = b; i < b + 16; ++i) {
          float v = MID[rng() % 10] * s;
          const int wiggle = int(rng() % 3);
          if (wiggle == 1) v = next_up(v);
          if (wiggle == 2) v = next_down(v);
          x[i] = sign() * v;
        }
        x[b + rng() % 16] = sign() * 6.f * s;  // pins the block scale to s
      }
      for (int64_t t = 0; t < n; ++t) x[size_t(t * R * K)] = 2688.f;  // pins t = 1
      break;
    }
    case QuantGen::specials: {
      const float S[] = {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                         inf, -inf, 0.f, -0.f, 1e-45f, -1e-40f, 1.17e-38f, 3.4e38f, -3.3e38f, 65504.f,
                         65520.f, 448.f, 464.f, 6.f};
      for (auto& v : x) v = (rng() % 64 == 0) ? S[rng() % 16] : nd(rng);
      break;
    }
  }
  return x;
}

inline const char* quant_gen_name(QuantGen g) {
  switch (g) {
    case QuantGen::normal: return "normal";
    case QuantGen::heavy: return "heavy";
    case QuantGen::row_scaled: return "row_scaled";
    case QuantGen::wide: return "wide";
    case QuantGen::fp8_ties: return "fp8_ties";
    case QuantGen::nvfp4_ties: return "nvfp4_ties";
    case QuantGen::specials: return "specials";
  }
  return "?";
}

// Bitwise float equality where any NaN equals any NaN (decoded NaN payloads
// are unspecified). Returns the first mismatching index or −1.
inline int64_t first_float_mismatch(const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (std::memcmp(&a[i], &b[i], 4) != 0) return i;
  }
  return -1;
}

}  // namespace replayssm::test
