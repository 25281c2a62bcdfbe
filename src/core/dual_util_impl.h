// Template bodies of dual_util.h.
#pragma once
#include "core/dual_util.h"

namespace replayssm::dual {

template <class Decode>
void shared_decode(const char* /*fn*/, const Tensor& packed, const QuantLayout& L,
                   const std::vector<int64_t>& idx, const QuantRounding& rounding,
                   const Exec& exec, Decode&& decode) {
  const int64_t B = int64_t(idx.size()), heads = packed.shape[1];
  Scratch state(DType::f32, {B, heads, L.R, L.K});
  for (int64_t b = 0; b < B; ++b)
    if (idx[size_t(b)] >= 0) unpack_rows(exec.backend, L, packed, idx[size_t(b)], state, b);
  const Scratch slots = compact_slots(idx);
  decode(state.t(), slots.t());
  for (int64_t b = 0; b < B; ++b) {
    const int64_t s = idx[size_t(b)];
    if (s < 0) continue;
    for (int64_t h = 0; h < heads; ++h) {
      const float* x = state.as<float>() + (b * heads + h) * L.R * L.K;
      uint8_t* tile = element(packed, {s, h});
      if (rounding.stochastic)
        pack_tile_stochastic(L, x, tile, rounding.seed, uint64_t(s * heads + h), rounding.step);
      else
        pack_tile(exec.backend, L, x, tile);
    }
  }
}

}  // namespace replayssm::dual
