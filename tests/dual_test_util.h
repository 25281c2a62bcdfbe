// Helpers of the dual-precision tests: byte views and the copy invariant.
#pragma once
#include <cstring>
#include <vector>

#include "replayssm/quant.h"
#include "test_util.h"

namespace replayssm::test::dual_test {

// Output tolerance (relative error per step window vs the fp64 oracle) of a
// dual pool by read format: the copy's relative rounding (bf16 2^-9, f16
// 2^-12, fp8 E4M3 2^-4 with power-of-two block scales, nvfp4 E2M1 up to 2^-2
// of the block maximum) reaches the outputs through S_0·q only, and once per
// window through d̂. Measured maxima on the test shapes (GDN/KDA, Mamba-2):
// bf16 2.6e-3, f16 4e-4, fp8 4.2e-2, nvfp4 1.6e-1.
inline double out_tolerance(ReadFormat f) {
  switch (f) {
    case ReadFormat::bf16: return 2e-2;
    case ReadFormat::f16: return 3e-3;
    case ReadFormat::fp8_e4m3: return 1e-1;
    case ReadFormat::nvfp4: return 3e-1;
  }
  return 0;
}

inline std::vector<uint8_t> row_bytes(const HostTensor& t, int64_t s) {
  const size_t n = t.bytes() / size_t(t.t().shape[0]);
  const auto* p = static_cast<const uint8_t*>(t.data()) + size_t(s) * n;
  return {p, p + n};
}
inline std::vector<uint8_t> all_bytes(const HostTensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.data());
  return {p, p + t.bytes()};
}

// read_copy[s] == quant_pack(format, state[s]) (state [S, heads, R, K]).
inline bool copy_equals_pack(const HostTensor& copy, const HostTensor& state, int64_t s, ReadFormat f) {
  const int64_t heads = state.t().shape[1], R = state.t().shape[2], K = state.t().shape[3];
  HostTensor x(DType::f32, {heads, R, K});
  const int64_t n = heads * R * K;
  for (int64_t i = 0; i < n; ++i) x.set(i, state.get(s * n + i));
  const int64_t tile = quant_layout(f, R, K).tile_bytes;
  HostTensor packed(DType::u8, {heads, tile});
  Exec e;  // the fast codec (bit-identical to the oracle, tested in quant_test)
  e.backend = Backend::cpu;
  e.num_threads = 1;
  quant_pack(f, x, packed, e);
  return all_bytes(packed) == row_bytes(copy, s);
}

}  // namespace replayssm::test::dual_test
