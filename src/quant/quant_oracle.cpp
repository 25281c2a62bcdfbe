// Oracle of the read-copy formats: see quant_oracle.h for how it differs from
// the fast paths. Slow by design; used by Backend::reference and the tests.
#include "quant/quant_oracle.h"

#include "quant/backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace replayssm::quant::oracle {
namespace {

constexpr double NaN = std::numeric_limits<double>::quiet_NaN();

uint32_t bits_of(float v) { uint32_t u; std::memcpy(&u, &v, 4); return u; }

// The code in [0, max_code] whose value is nearest to a >= 0, ties to the
// even code, a beyond value(max_code) → max_code. value() must increase
// strictly with the code on [0, max_code].
template <class Value>
uint32_t nearest_code(double a, uint32_t max_code, Value value) {
  if (a >= value(max_code)) return max_code;
  if (a <= value(0)) return 0;
  uint32_t lo = 0, hi = max_code;  // value(lo) < a < value(hi)
  while (hi - lo > 1) {
    const uint32_t mid = lo + (hi - lo) / 2;
    (value(mid) <= a ? lo : hi) = mid;
  }
  // Exact differences: a carries at most 24 significant bits and lies
  // within one binade of value(lo) > 0 (or value(lo) = 0).
  const double below = a - value(lo), above = value(hi) - a;
  if (below < above) return lo;
  if (above < below) return hi;
  return (lo % 2 == 0) ? lo : hi;
}

bool signbit_of(double v) { return std::signbit(v); }

}  // namespace

double e4m3_value(uint8_t c) {
  const int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
  if (e == 15 && m == 7) return NaN;
  const double mag = e == 0 ? std::ldexp(double(m), -9) : std::ldexp(double(8 + m), e - 10);
  return s ? -mag : mag;
}

double e2m1_value(uint8_t nib) {
  const int s = (nib >> 3) & 1, e = (nib >> 1) & 3, m = nib & 1;
  const double mag = e == 0 ? 0.5 * m : std::ldexp(double(2 + m), e - 2);
  return s ? -mag : mag;
}

double bf16_value(uint16_t c) {
  const int s = c >> 15, e = (c >> 7) & 0xFF, m = c & 0x7F;
  double mag;
  if (e == 0xFF) mag = m ? NaN : std::numeric_limits<double>::infinity();
  else if (e == 0) mag = std::ldexp(double(m), -133);
  else mag = std::ldexp(double(128 + m), e - 134);
  return s ? -mag : mag;
}

double f16_value(uint16_t c) {
  const int s = c >> 15, e = (c >> 10) & 0x1F, m = c & 0x3FF;
  double mag;
  if (e == 0x1F) mag = m ? NaN : std::numeric_limits<double>::infinity();
  else if (e == 0) mag = std::ldexp(double(m), -24);
  else mag = std::ldexp(double(1024 + m), e - 25);
  return s ? -mag : mag;
}

uint8_t e4m3_encode(double v) {
  if (std::isnan(v)) return 0x7F;
  const uint8_t sign = signbit_of(v) ? 0x80 : 0;
  if (std::isinf(v)) return uint8_t(sign | 0x7F);
  return uint8_t(sign | nearest_code(std::fabs(v), 0x7E, [](uint32_t c) { return e4m3_value(uint8_t(c)); }));
}

uint8_t e2m1_encode(double v) {
  const uint8_t sign = signbit_of(v) ? 8 : 0;
  return uint8_t(sign | nearest_code(std::fabs(v), 7, [](uint32_t c) { return e2m1_value(uint8_t(c)); }));
}

// IEEE rounding with an unbounded exponent: +Inf takes part as the value
// 2^(emax+1), so magnitudes from max + ulp/2 (a tie with an even Inf code) round to Inf.
uint16_t bf16_encode(float v) {
  const uint32_t u = bits_of(v);
  if (std::isnan(v)) return 0x7FC0;
  const uint16_t sign = uint16_t((u >> 16) & 0x8000);
  return uint16_t(sign | nearest_code(std::fabs(double(v)), 0x7F80, [](uint32_t c) {
                    return c == 0x7F80 ? std::ldexp(1.0, 128) : bf16_value(uint16_t(c));
                  }));
}

uint16_t f16_encode(float v) {
  const uint32_t u = bits_of(v);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000);
  if (std::isnan(v)) return 0x7E00;
  return uint16_t(sign | nearest_code(std::fabs(double(v)), 0x7C00, [](uint32_t c) {
                    return c == 0x7C00 ? 65536.0 : f16_value(uint16_t(c));
                  }));
}

int fp8_block_exp(double amax) {
  int k = -127;
  while (std::ldexp(amax, -k) > 448.0) ++k;
  return k;
}

void pack_tile(const QuantLayout& L, const float* x, int64_t ld, uint8_t* tile) {
  const int64_t R = L.R, K = L.K;
  zero_padding(L, tile);
  uint8_t* codes = tile + L.code_offset;
  uint8_t* scales = tile + (L.scale_offset >= 0 ? L.scale_offset : 0);
  for (int64_t r = 0; r < R; ++r) {
    const float* xr = x + r * ld;
    if (L.format == ReadFormat::bf16 || L.format == ReadFormat::f16) {
      for (int64_t k = 0; k < K; ++k) {
        const uint16_t c = L.format == ReadFormat::bf16 ? bf16_encode(xr[k]) : f16_encode(xr[k]);
        std::memcpy(codes + (r * K + k) * 2, &c, 2);
      }
    } else if (L.format == ReadFormat::fp8_e4m3) {
      for (int64_t b = 0; b < K / FP8_BLOCK; ++b) {
        double amax = 0;
        for (int64_t k = b * FP8_BLOCK; k < (b + 1) * FP8_BLOCK; ++k)
          if (std::isfinite(xr[k])) amax = std::max(amax, std::fabs(double(xr[k])));
        const int e = fp8_block_exp(amax);
        scales[r * L.scale_row_bytes + b] = uint8_t(e + 127);
        // Encodes the exact scaled value x·2^-e (the fast paths round it to
        // fp32 first; that rounding only happens below E4M3's zero threshold).
        for (int64_t k = b * FP8_BLOCK; k < (b + 1) * FP8_BLOCK; ++k)
          codes[r * K + k] = e4m3_encode(std::ldexp(double(xr[k]), -e));
      }
    }
  }
  if (L.format != ReadFormat::nvfp4) return;

  double amax = 0;
  for (int64_t r = 0; r < R; ++r)
    for (int64_t k = 0; k < K; ++k)
      if (std::isfinite(x[r * ld + k])) amax = std::max(amax, std::fabs(double(x[r * ld + k])));
  const float t = amax < std::ldexp(1.0, -100) ? 0.f : float(amax / 2688.0);
  const float six_t = float(6.0 * t);
  std::memcpy(tile + L.tensor_scale_offset, &t, 4);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t b = 0; b < K / NVFP4_BLOCK; ++b) {
      const float* xb = x + r * ld + b * NVFP4_BLOCK;
      uint8_t* cb = codes + r * (K / 2) + b * (NVFP4_BLOCK / 2);
      uint8_t& s = scales[r * L.scale_row_bytes + b];
      bool finite = true;
      double ab = 0;
      for (int i = 0; i < NVFP4_BLOCK; ++i) {
        finite = finite && std::isfinite(xb[i]);
        if (std::isfinite(xb[i])) ab = std::max(ab, std::fabs(double(xb[i])));
      }
      if (!finite) {
        s = 0x7F;
        for (int i = 0; i < NVFP4_BLOCK / 2; ++i) cb[i] = 0;
        continue;
      }
      s = t == 0.f ? 0 : e4m3_encode(double(float(ab / double(six_t))));
      const float d = float(e4m3_value(s) * double(t));
      const float rcp = d > 0.f ? float(1.0 / double(d)) : 0.f;
      for (int i = 0; i < NVFP4_BLOCK / 2; ++i) {
        const uint8_t lo = e2m1_encode(double(float(double(xb[2 * i]) * rcp)));
        const uint8_t hi = e2m1_encode(double(float(double(xb[2 * i + 1]) * rcp)));
        cb[i] = uint8_t(lo + 16 * hi);
      }
    }
}

void unpack_tile(const QuantLayout& L, const uint8_t* tile, float* y, int64_t ld) {
  const int64_t R = L.R, K = L.K;
  const uint8_t* codes = tile + L.code_offset;
  float t = 0;
  if (L.format == ReadFormat::nvfp4) std::memcpy(&t, tile + L.tensor_scale_offset, 4);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t k = 0; k < K; ++k) {
      double v = 0;
      switch (L.format) {
        case ReadFormat::bf16:
        case ReadFormat::f16: {
          uint16_t c;
          std::memcpy(&c, codes + (r * K + k) * 2, 2);
          v = L.format == ReadFormat::bf16 ? bf16_value(c) : f16_value(c);
          break;
        }
        case ReadFormat::fp8_e4m3: {
          const int e = int(tile[L.scale_offset + r * L.scale_row_bytes + k / FP8_BLOCK]) - 127;
          v = std::ldexp(e4m3_value(codes[r * K + k]), e);
          break;
        }
        case ReadFormat::nvfp4: {
          const uint8_t byte = codes[r * (K / 2) + k / 2];
          const uint8_t nib = k % 2 ? uint8_t(byte >> 4) : uint8_t(byte & 15);
          const double s = e4m3_value(tile[L.scale_offset + r * L.scale_row_bytes + k / NVFP4_BLOCK]);
          v = e2m1_value(nib) * s * double(t);  // exact in double; one rounding below
          break;
        }
      }
      y[r * ld + k] = float(v);
    }
}

}  // namespace replayssm::quant::oracle
