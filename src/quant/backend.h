// Internal interface between the validating entry points (quant.cpp) and the
// quantizer backends (the reference backend is quant_oracle.h). Arguments
// reaching these functions are validated.
//
// Tile-level host functions take fp32 tiles [R, K] with row stride ld
// (elements) and one packed tile of layout.tile_bytes bytes. Other host code
// (CPU dual-precision reads) may call them directly.
#pragma once
#include <cstdint>

#include "quant/quant_oracle.h"
#include "quant/tile_geom.h"
#include "replayssm/quant.h"

namespace replayssm::quant {

// The byte ranges [begin, end) of a tile that hold no data (alignment
// padding between regions and at the end). Every pack writes zeros there, so
// a packed tile's bytes are fully determined by its input.
struct Gaps {
  int64_t begin[3] = {0, 0, 0}, end[3] = {0, 0, 0};
};
inline Gaps padding_gaps(const QuantLayout& L) {
  Gaps g;
  const int64_t code_end = L.code_offset + L.R * L.code_row_bytes;
  if (L.scale_offset < 0) {
    g.begin[0] = code_end, g.end[0] = L.tile_bytes;
    return g;
  }
  const int64_t scale_end = L.scale_offset + L.R * L.scale_row_bytes;
  g.begin[0] = code_end, g.end[0] = L.scale_offset;
  if (L.tensor_scale_offset < 0) {
    g.begin[1] = scale_end, g.end[1] = L.tile_bytes;
    return g;
  }
  g.begin[1] = scale_end, g.end[1] = L.tensor_scale_offset;
  g.begin[2] = L.tensor_scale_offset + 4, g.end[2] = L.tile_bytes;
  return g;
}
inline TileGeom tile_geom(const QuantLayout& L) {
  TileGeom t;
  t.format = L.format;
  t.R = L.R, t.K = L.K;
  t.scale_offset = L.scale_offset, t.scale_row_bytes = L.scale_row_bytes;
  t.tensor_scale_offset = L.tensor_scale_offset, t.tile_bytes = L.tile_bytes;
  const Gaps g = padding_gaps(L);
  for (int i = 0; i < 3; ++i) t.gap_begin[i] = g.begin[i], t.gap_end[i] = g.end[i];
  return t;
}
inline void zero_padding(const QuantLayout& L, uint8_t* tile) {
  const Gaps g = padding_gaps(L);
  for (int i = 0; i < 3; ++i)
    for (int64_t b = g.begin[i]; b < g.end[i]; ++b) tile[b] = 0;
}

namespace cpu {
void pack_tile(const QuantLayout& L, const float* x, int64_t ld, uint8_t* tile);
void unpack_tile(const QuantLayout& L, const uint8_t* tile, float* y, int64_t ld);
// Decodes row r of a packed tile into y[0, K).
void unpack_row(const QuantLayout& L, const uint8_t* tile, int64_t r, float* y);
}  // namespace cpu

namespace cuda {
// in [n, R, K] (device), packed [n, tile_bytes] u8, out [n, R, K] f32.
void pack(const QuantLayout& L, const Tensor& in, const Tensor& packed, const Exec& exec);
void unpack(const QuantLayout& L, const Tensor& packed, const Tensor& out, const Exec& exec);
}  // namespace cuda

}  // namespace replayssm::quant
