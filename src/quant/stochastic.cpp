// Stochastic rounding into the read-copy formats (shared mode). The scales
// are those of the round-to-nearest pack (src/quant/README.md); only the
// codes differ: each value x/scale goes to its lower or upper representable
// neighbour lo <= y <= hi, the upper one with probability (y − lo)/(hi − lo),
// so E[x̂] = x wherever y lies inside the grid. The uniform variate is a hash
// of (seed, tile id, step, element index): deterministic and independent of
// threads and batching. Both host backends use this codec-based encoder.
#include <climits>
#include <cmath>
#include <cstring>
#include <string>

#include "core/check.h"
#include "core/dtype.h"
#include "core/dual_util.h"
#include "quant/backend.h"
#include "quant/codec.h"
#include "quant/stochastic.h"
#include "replayssm/dual.h"

namespace replayssm {
namespace {

uint64_t mix(uint64_t z) {  // splitmix64 finaliser
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in [0, 1) with 24 bits for element `elem` of the stream `base`
// (base = stream_of(seed, tile, step)).
uint64_t stream_of(uint64_t seed, uint64_t tile, uint64_t step) { return mix(seed ^ mix(tile ^ mix(step))); }
float uniform(uint64_t base, uint64_t elem) {
  return float(mix(base ^ (elem * 0xd1342543de82ef95ull)) >> 40) * 0x1p-24f;
}

// A magnitude codec: encode (RNE) / decode of non-negative values on a grid
// whose magnitude codes are ordered like their values; max_code the largest
// finite magnitude code.
template <class Enc, class Dec>
uint32_t round_stochastic(float y, Enc enc, Dec dec, uint32_t sign_bit, uint32_t max_code, float u) {
  const uint32_t rne = enc(y);
  if (!(std::fabs(y) <= 3.40282347e38f)) return rne;  // NaN / Inf keep their code
  const float m = std::fabs(y);
  const uint32_t cm = rne & ~sign_bit;
  const float vm = dec(cm);
  if (vm == m) return rne;
  uint32_t other;
  if (vm < m) {
    if (cm >= max_code) return rne;  // saturated
    other = cm + 1;
  } else {
    if (cm == 0) return rne;
    other = cm - 1;
  }
  const float vo = dec(other);
  const float p = (m - vm) / (vo - vm);  // in (0, 1]: chance of the other neighbour
  return u < p ? ((rne & sign_bit) | other) : rne;
}

}  // namespace

const char* precision_mode_name(PrecisionMode mode) {
  switch (mode) {
    case PrecisionMode::single: return "single";
    case PrecisionMode::dual: return "dual";
    case PrecisionMode::shared: return "shared";
  }
  return "?";
}

namespace dual {

void pack_tile_stochastic(const QuantLayout& L, const float* x, uint8_t* tile, uint64_t seed,
                          uint64_t tile_id, uint64_t step) {
  quant::cpu::pack_tile(L, x, L.K, tile);  // scales (and padding) of the RNE pack
  uint8_t* codes = tile + L.code_offset;
  const int64_t R = L.R, K = L.K;
  const uint64_t base = stream_of(seed, tile_id, step);
  auto u_at = [&](int64_t i) { return uniform(base, uint64_t(i)); };
  switch (L.format) {
    case ReadFormat::bf16:
    case ReadFormat::f16: {
      const bool bf = L.format == ReadFormat::bf16;
      auto enc = [&](float v) -> uint32_t { return bf ? f32_to_bf16(v) : f32_to_f16(v); };
      auto dec = [&](uint32_t c) { return bf ? bf16_to_f32(uint16_t(c)) : f16_to_f32(uint16_t(c)); };
      const uint32_t max_code = bf ? 0x7F7Fu : 0x7BFFu;
      uint16_t* c = reinterpret_cast<uint16_t*>(codes);
      for (int64_t i = 0; i < R * K; ++i)
        if (x[i] == x[i]) c[i] = uint16_t(round_stochastic(x[i], enc, dec, 0x8000u, max_code, u_at(i)));
      return;
    }
    case ReadFormat::fp8_e4m3: {
      const uint8_t* scales = tile + L.scale_offset;
      auto enc = [](float v) -> uint32_t { return quant::e4m3_encode(v); };
      auto dec = [](uint32_t c) { return quant::e4m3_decode(uint8_t(c)); };
      for (int64_t r = 0; r < R; ++r)
        for (int64_t k = 0; k < K; ++k) {
          const int e = int(scales[r * L.scale_row_bytes + k / FP8_BLOCK]) - quant::E8M0_BIAS;
          const float y = x[r * K + k] * quant::exp2i(-e);
          codes[r * K + k] = uint8_t(round_stochastic(y, enc, dec, 0x80u, quant::E4M3_MAX_CODE, u_at(r * K + k)));
        }
      return;
    }
    case ReadFormat::nvfp4: {
      const uint8_t* scales = tile + L.scale_offset;
      float t;
      std::memcpy(&t, tile + L.tensor_scale_offset, 4);
      auto enc = [](float v) -> uint32_t { return quant::e2m1_encode(v); };
      auto dec = [](uint32_t c) { return quant::e2m1_decode(uint8_t(c)); };
      for (int64_t r = 0; r < R; ++r)
        for (int64_t b = 0; b < L.scale_row_bytes; ++b) {
          const uint8_t s = scales[r * L.scale_row_bytes + b];
          if (s == quant::E4M3_NAN) continue;  // a poisoned block keeps codes 0
          const float d = quant::e4m3_decode(s) * t;
          const float rcp = d > 0.f ? 1.f / d : 0.f;
          uint8_t* cb = codes + r * L.code_row_bytes + b * (NVFP4_BLOCK / 2);
          for (int64_t i = 0; i < NVFP4_BLOCK; ++i) {
            const int64_t k = b * NVFP4_BLOCK + i;
            const uint8_t nib = uint8_t(round_stochastic(x[r * K + k] * rcp, enc, dec, 8u, 7u, u_at(r * K + k)));
            cb[i / 2] = i % 2 ? uint8_t((cb[i / 2] & 0x0F) | (nib << 4)) : uint8_t((cb[i / 2] & 0xF0) | nib);
          }
        }
      return;
    }
  }
}

}  // namespace dual

void quant_pack_stochastic(ReadFormat format, const Tensor& in, const Tensor& packed,
                           const Tensor& tile_ids, const QuantRounding& rounding, const Exec& exec) {
  const char* fn = "quant_pack_stochastic";
  const bool cuda = exec.backend == Backend::cuda;
  if (!cuda) dual::require_host(fn, exec, "stochastic rounding");
  // Host tensors on the host backends, device tensors on cuda.
  auto on_device = [&](const char* arg, const Tensor& t) {
    if (cuda) check::device(fn, arg, t, exec);
    else check::require(t.device == Device::cpu, fn, arg, "expected a host tensor");
  };
  check::present(fn, "in", in);
  check::require(in.ndim == 3, fn, "in", "expected shape [n, R, K], got " + in.shape_str());
  check::dtype(fn, "in", in, {DType::f32});
  on_device("in", in);
  check::inner_contiguous(fn, "in", in);
  const int64_t n = in.shape[0], R = in.shape[1], K = in.shape[2];
  check::require(format == ReadFormat::bf16 || format == ReadFormat::f16 ||
                     format == ReadFormat::fp8_e4m3 || format == ReadFormat::nvfp4,
                 fn, "format", "expected bf16 | f16 | fp8_e4m3 | nvfp4");
  const QuantLayout L = quant_layout(format, R, K);
  check::shape(fn, "packed", packed, {n, L.tile_bytes});
  check::dtype(fn, "packed", packed, {DType::u8});
  on_device("packed", packed);
  check::inner_contiguous(fn, "packed", packed);
  if (cuda) check::aligned(fn, "packed", packed, QUANT_TILE_ALIGN);
  if (tile_ids.defined()) {
    check::shape(fn, "tile_ids", tile_ids, {n});
    check::dtype(fn, "tile_ids", tile_ids, {DType::i64});
    if (cuda) check::device(fn, "tile_ids", tile_ids, exec);
  }
  if (!rounding.stochastic) {
    quant_pack(format, in, packed, exec);
    return;
  }
  if (cuda) {
    check::require(n <= INT32_MAX, fn, "in", "expected at most 2^31 - 1 tiles, got " + std::to_string(n));
    return quant::cuda::pack_stochastic(L, in, packed, tile_ids, rounding, exec);
  }
  std::vector<float> tile(static_cast<size_t>(R * K));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t r = 0; r < R; ++r)
      std::memcpy(tile.data() + r * K, static_cast<const float*>(in.data) + i * in.stride[0] + r * in.stride[1],
                  size_t(K) * 4);
    const uint64_t id = tile_ids.defined() ? uint64_t(check::index_at(tile_ids, i)) : uint64_t(i);
    dual::pack_tile_stochastic(L, tile.data(), static_cast<uint8_t*>(packed.data) + i * packed.stride[0],
                               rounding.seed, id, rounding.step);
  }
}

}  // namespace replayssm

#if !defined(REPLAYSSM_WITH_CUDA)
// Builds without the CUDA backend.
void replayssm::quant::cuda::pack_stochastic(const QuantLayout&, const Tensor&, const Tensor&,
                                             const Tensor&, const QuantRounding&, const Exec&) {
  throw Error("quant_pack_stochastic", "exec", "this build of replayssm has no CUDA backend");
}
#endif
