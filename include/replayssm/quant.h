// Read-copy number formats of the dual-precision mode (design §4): a state
// tile [R, K] (one (slot, head) matrix, K contiguous, the axis the read GEMV
// contracts over) packed into a self-contained run of bytes.
//
//   bf16, f16   codes u16 [R, K]; plain round-to-nearest-even casts.
//   fp8_e4m3    codes u8 [R, K] (E4M3, "fn": no Inf, NaN = S.1111.111) and one
//               E8M0 (power-of-two) scale per FP8_BLOCK = 32 consecutive
//               values along K: x̂ = e4m3(code) · 2^k.
//   nvfp4       codes u8 [R, K/2] (E2M1; value 2i in the low nibble of byte i,
//               value 2i+1 in the high nibble), one E4M3 scale s_b per
//               NVFP4_BLOCK = 16 values along K, and one fp32 scale t per
//               tile: x̂ = e2m1(code) · s_b · t.
//
// Rounding is to nearest, ties to even, saturating to the largest finite
// value. src/quant/README.md states the scale rules, the NaN/Inf policy and
// why these blocks were chosen; every rule there holds bit for bit on the
// cpu, reference and cuda backends.
#pragma once
#include <cstdint>

#include "replayssm/types.h"

namespace replayssm {

enum class ReadFormat : int8_t { bf16, f16, fp8_e4m3, nvfp4 };
const char* read_format_name(ReadFormat format);  // "bf16", "f16", "fp8", "nvfp4"

inline constexpr int64_t FP8_BLOCK = 32;    // E4M3 values per E8M0 scale, along K
inline constexpr int64_t NVFP4_BLOCK = 16;  // E2M1 values per E4M3 scale, along K
inline constexpr int64_t QUANT_TILE_ALIGN = 16;  // tile_bytes and every region offset divide by it

// Byte layout of one packed tile [R, K]. Regions start at the given byte
// offsets inside the tile; absent regions have offset −1 and 0 bytes.
struct QuantLayout {
  ReadFormat format = ReadFormat::bf16;
  int64_t R = 0, K = 0;
  int64_t block = 0;              // values per block scale along K (0: none)
  int64_t code_offset = 0;        // codes, row-major [R, code_row_bytes]
  int64_t code_row_bytes = 0;     // 2K (bf16, f16), K (fp8), K/2 (nvfp4)
  int64_t scale_offset = -1;      // block scales u8 [R, K / block]
  int64_t scale_row_bytes = 0;    // K / block
  int64_t tensor_scale_offset = -1;  // nvfp4: fp32 t
  int64_t tile_bytes = 0;         // whole tile, a multiple of QUANT_TILE_ALIGN
  // Read copy bytes per state element (tile_bytes / (R·K)).
  double bytes_per_element() const { return double(tile_bytes) / double(R * K); }
};

// Layout of a [R, K] tile. K must be a multiple of the format's block
// (32 for fp8_e4m3, 16 for nvfp4); throws Error otherwise.
QuantLayout quant_layout(ReadFormat format, int64_t R, int64_t K);

// Packs n tiles. in [n, R, K] f32 | f16 | bf16 with unit inner stride;
// packed [n, tile_bytes] u8 with unit inner stride, data and row stride
// multiples of QUANT_TILE_ALIGN bytes. Backend::reference runs the
// independent oracle (src/quant/quant_oracle.cpp), cpu the fast CPU path,
// cuda the device kernel; all three write identical bytes.
void quant_pack(ReadFormat format, const Tensor& in, const Tensor& packed, const Exec& exec);

// Unpacks n tiles into out [n, R, K] f32 (unit inner stride). Decoded values
// are identical on every backend (NaN payloads aside).
void quant_unpack(ReadFormat format, const Tensor& packed, const Tensor& out, const Exec& exec);

}  // namespace replayssm
