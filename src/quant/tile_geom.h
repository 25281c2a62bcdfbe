// Geometry of one packed tile as kernels use it (plain C++: kernel
// parameter blocks carry it by value). tile_geom() derives it from
// quant_layout and the padding gaps (quant/backend.h).
#pragma once
#include <cstdint>

#include "replayssm/quant.h"

namespace replayssm::quant {

struct TileGeom {
  ReadFormat format = ReadFormat::bf16;
  int64_t R = 0, K = 0;
  int64_t scale_offset = -1, scale_row_bytes = 0, tensor_scale_offset = -1, tile_bytes = 0;
  int64_t gap_begin[3] = {0, 0, 0}, gap_end[3] = {0, 0, 0};  // padding bytes, written as zeros
};

}  // namespace replayssm::quant
