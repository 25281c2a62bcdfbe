// Host-side scalar conversions for the storage dtypes (round-to-nearest-even).
#pragma once
#include <cstdint>
#include <cstring>

#include "replayssm/types.h"

namespace replayssm {

inline float bits_to_f32(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
inline uint32_t f32_to_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

inline float bf16_to_f32(uint16_t h) { return bits_to_f32(uint32_t(h) << 16); }
inline uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_to_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

inline float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  if (exp == 0x1f) return bits_to_f32(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    if (man == 0) return bits_to_f32(sign);
    float f = float(man) * (1.0f / 16777216.0f);  // man · 2^-24
    return sign ? -f : f;
  }
  return bits_to_f32(sign | ((exp + 112u) << 23) | (man << 13));
}
inline uint16_t f32_to_f16(float f) {
  uint32_t u = f32_to_bits(f);
  uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u);  // NaN
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to inf
  if (a < 0x38800000u) {  // subnormal or zero in f16: value / 2^-24, RNE
    float v = bits_to_f32(a) * 16777216.0f;
    uint32_t r = uint32_t(v);
    float frac = v - float(r);
    if (frac > 0.5f || (frac == 0.5f && (r & 1u))) ++r;
    return uint16_t(sign | r);
  }
  uint32_t r = a + 0xfffu + ((a >> 13) & 1u);  // RNE at bit 13
  return uint16_t(sign | (((r >> 23) - 112u) << 10) | ((r >> 13) & 0x3ffu));
}

// Generic element load/store through a dtype tag (slow path; reference and setup).
inline double load_as_f64(const void* p, DType dt, int64_t i) {
  switch (dt) {
    case DType::f32: return static_cast<const float*>(p)[i];
    case DType::f64: return static_cast<const double*>(p)[i];
    case DType::f16: return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::bf16: return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case DType::i32: return static_cast<const int32_t*>(p)[i];
    case DType::i64: return double(static_cast<const int64_t*>(p)[i]);
    case DType::u8: return static_cast<const uint8_t*>(p)[i];
  }
  return 0;
}
inline void store_from_f64(void* p, DType dt, int64_t i, double v) {
  switch (dt) {
    case DType::f32: static_cast<float*>(p)[i] = float(v); break;
    case DType::f64: static_cast<double*>(p)[i] = v; break;
    case DType::f16: static_cast<uint16_t*>(p)[i] = f32_to_f16(float(v)); break;
    case DType::bf16: static_cast<uint16_t*>(p)[i] = f32_to_bf16(float(v)); break;
    case DType::i32: static_cast<int32_t*>(p)[i] = int32_t(v); break;
    case DType::i64: static_cast<int64_t*>(p)[i] = int64_t(v); break;
    case DType::u8: static_cast<uint8_t*>(p)[i] = uint8_t(v); break;
  }
}

// Typed scalar I/O for templated fast paths: T is float, uint16_t tagged by D.
template <DType D> struct Storage;
template <> struct Storage<DType::f32> {
  using type = float;
  static float load(float v) { return v; }
  static float store(float v) { return v; }
};
template <> struct Storage<DType::bf16> {
  using type = uint16_t;
  static float load(uint16_t v) { return bf16_to_f32(v); }
  static uint16_t store(float v) { return f32_to_bf16(v); }
};
template <> struct Storage<DType::f16> {
  using type = uint16_t;
  static float load(uint16_t v) { return f16_to_f32(v); }
  static uint16_t store(float v) { return f32_to_f16(v); }
};

}  // namespace replayssm
