// Read-copy formats: layouts, validating entry points and the fast CPU
// encode/decode (bit tricks of codec.h). Definitions: src/quant/README.md.
#include <climits>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"
#include "core/parallel.h"
#include "quant/backend.h"
#include "quant/codec.h"

namespace replayssm {
namespace {

using check::ANY;

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

bool valid_format(ReadFormat f) {
  return f == ReadFormat::bf16 || f == ReadFormat::f16 || f == ReadFormat::fp8_e4m3 ||
         f == ReadFormat::nvfp4;
}

QuantLayout make_layout(const char* fn, const char* arg, ReadFormat format, int64_t R, int64_t K) {
  check::require(valid_format(format), fn, "format",
                 "expected one of bf16, f16, fp8_e4m3, nvfp4, got value " +
                     std::to_string(int(format)));
  check::require(R >= 1 && K >= 1, fn, arg,
                 "expected a tile [R, K] with R, K >= 1, got [" + std::to_string(R) + ", " +
                     std::to_string(K) + "]");
  QuantLayout L;
  L.format = format;
  L.R = R;
  L.K = K;
  switch (format) {
    case ReadFormat::bf16:
    case ReadFormat::f16:
      L.code_row_bytes = 2 * K;
      L.tile_bytes = round_up(R * L.code_row_bytes, QUANT_TILE_ALIGN);
      return L;
    case ReadFormat::fp8_e4m3: L.block = FP8_BLOCK; L.code_row_bytes = K; break;
    case ReadFormat::nvfp4: L.block = NVFP4_BLOCK; L.code_row_bytes = K / 2; break;
  }
  check::require(K % L.block == 0, fn, arg,
                 std::string("expected K a multiple of ") + std::to_string(L.block) + " for " +
                     read_format_name(format) + ", got K = " + std::to_string(K));
  L.scale_row_bytes = K / L.block;
  L.scale_offset = round_up(R * L.code_row_bytes, QUANT_TILE_ALIGN);
  int64_t end = L.scale_offset + R * L.scale_row_bytes;
  if (format == ReadFormat::nvfp4) {
    L.tensor_scale_offset = round_up(end, QUANT_TILE_ALIGN);
    end = L.tensor_scale_offset + 4;
  }
  L.tile_bytes = round_up(end, QUANT_TILE_ALIGN);
  return L;
}

// packed [n, tile_bytes] u8, unit inner stride, 16-byte aligned rows.
void check_packed(const char* fn, const Tensor& packed, int64_t n, const QuantLayout& L,
                  const Exec& exec) {
  check::shape(fn, "packed", packed, {n, L.tile_bytes});
  check::dtype(fn, "packed", packed, {DType::u8});
  check::inner_contiguous(fn, "packed", packed);
  check::aligned(fn, "packed", packed, QUANT_TILE_ALIGN);
  check::device(fn, "packed", packed, exec);
}

const float* e4m3_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(256);
    for (int c = 0; c < 256; ++c) t[size_t(c)] = quant::e4m3_decode(uint8_t(c));
    return t;
  }();
  return table.data();
}

// A finite float's magnitude, or −1 for NaN and ±Inf.
inline float finite_abs(float v) {
  const float a = std::fabs(v);
  return a <= 3.40282347e38f ? a : -1.f;
}

}  // namespace

const char* read_format_name(ReadFormat format) {
  switch (format) {
    case ReadFormat::bf16: return "bf16";
    case ReadFormat::f16: return "f16";
    case ReadFormat::fp8_e4m3: return "fp8";
    case ReadFormat::nvfp4: return "nvfp4";
  }
  return "?";
}

QuantLayout quant_layout(ReadFormat format, int64_t R, int64_t K) {
  return make_layout("quant_layout", "K", format, R, K);
}

namespace quant::cpu {

void pack_tile(const QuantLayout& L, const float* x, int64_t ld, uint8_t* tile) {
  const int64_t R = L.R, K = L.K;
  zero_padding(L, tile);
  uint8_t* codes = tile + L.code_offset;
  switch (L.format) {
    case ReadFormat::bf16:
    case ReadFormat::f16: {
      const bool bf = L.format == ReadFormat::bf16;
      for (int64_t r = 0; r < R; ++r) {
        uint16_t* c = reinterpret_cast<uint16_t*>(codes) + r * K;
        for (int64_t k = 0; k < K; ++k) {
          const float v = x[r * ld + k];
          // NaN → the canonical quiet NaN, whatever its sign and payload.
          c[k] = v != v ? (bf ? uint16_t(0x7FC0) : uint16_t(0x7E00)) : bf ? f32_to_bf16(v) : f32_to_f16(v);
        }
      }
      return;
    }
    case ReadFormat::fp8_e4m3: {
      uint8_t* scales = tile + L.scale_offset;
      for (int64_t r = 0; r < R; ++r)
        for (int64_t b = 0; b < L.scale_row_bytes; ++b) {
          const float* xb = x + r * ld + b * FP8_BLOCK;
          float amax = 0.f;
          for (int i = 0; i < FP8_BLOCK; ++i) amax = std::max(amax, finite_abs(xb[i]));
          const int k = fp8_block_exp(amax);
          scales[r * L.scale_row_bytes + b] = uint8_t(k + E8M0_BIAS);
          const float m = exp2i(-k);  // exact: x·2^-k only shifts the exponent
          uint8_t* cb = codes + r * K + b * FP8_BLOCK;
          for (int i = 0; i < FP8_BLOCK; ++i) cb[i] = e4m3_encode(xb[i] * m);
        }
      return;
    }
    case ReadFormat::nvfp4: {
      float amax = 0.f;
      for (int64_t r = 0; r < R; ++r)
        for (int64_t k = 0; k < K; ++k) amax = std::max(amax, finite_abs(x[r * ld + k]));
      const float t = nvfp4_tensor_scale(amax), six_t = 6.f * t;
      std::memcpy(tile + L.tensor_scale_offset, &t, 4);
      uint8_t* scales = tile + L.scale_offset;
      for (int64_t r = 0; r < R; ++r)
        for (int64_t b = 0; b < L.scale_row_bytes; ++b) {
          const float* xb = x + r * ld + b * NVFP4_BLOCK;
          uint8_t* cb = codes + r * L.code_row_bytes + b * (NVFP4_BLOCK / 2);
          float ab = 0.f;
          bool finite = true;
          for (int i = 0; i < NVFP4_BLOCK; ++i) {
            const float a = finite_abs(xb[i]);
            finite = finite && a >= 0.f;
            ab = std::max(ab, a);
          }
          if (!finite) {  // a NaN or Inf poisons its block: scale NaN, codes 0
            scales[r * L.scale_row_bytes + b] = E4M3_NAN;
            std::memset(cb, 0, NVFP4_BLOCK / 2);
            continue;
          }
          const uint8_t s = t > 0.f ? e4m3_encode(ab / six_t) : uint8_t(0);
          scales[r * L.scale_row_bytes + b] = s;
          const float d = e4m3_decode(s) * t;
          const float rcp = d > 0.f ? 1.f / d : 0.f;
          for (int i = 0; i < NVFP4_BLOCK; i += 2)
            cb[i / 2] = uint8_t(e2m1_encode(xb[i] * rcp) | (e2m1_encode(xb[i + 1] * rcp) << 4));
        }
      return;
    }
  }
}

void unpack_row(const QuantLayout& L, const uint8_t* tile, int64_t r, float* y) {
  const int64_t K = L.K;
  const uint8_t* codes = tile + L.code_offset + r * L.code_row_bytes;
  switch (L.format) {
    case ReadFormat::bf16:
    case ReadFormat::f16: {
      const uint16_t* c = reinterpret_cast<const uint16_t*>(codes);
      if (L.format == ReadFormat::bf16)
        for (int64_t k = 0; k < K; ++k) y[k] = bf16_to_f32(c[k]);
      else
        for (int64_t k = 0; k < K; ++k) y[k] = f16_to_f32(c[k]);
      return;
    }
    case ReadFormat::fp8_e4m3: {
      const float* table = e4m3_table();
      const uint8_t* scales = tile + L.scale_offset + r * L.scale_row_bytes;
      for (int64_t b = 0; b < L.scale_row_bytes; ++b) {
        const float m = exp2i(int(scales[b]) - E8M0_BIAS);
        for (int i = 0; i < FP8_BLOCK; ++i) y[b * FP8_BLOCK + i] = table[codes[b * FP8_BLOCK + i]] * m;
      }
      return;
    }
    case ReadFormat::nvfp4: {
      const float* table = e4m3_table();
      const uint8_t* scales = tile + L.scale_offset + r * L.scale_row_bytes;
      float t;
      std::memcpy(&t, tile + L.tensor_scale_offset, 4);
      for (int64_t b = 0; b < L.scale_row_bytes; ++b) {
        const float s = table[scales[b]];
        for (int i = 0; i < NVFP4_BLOCK / 2; ++i) {
          const uint8_t byte = codes[b * (NVFP4_BLOCK / 2) + i];
          // e·s is exact in fp32 (at most 6 significant bits); ·t rounds once.
          y[b * NVFP4_BLOCK + 2 * i] = e2m1_decode(byte & 0xF) * s * t;
          y[b * NVFP4_BLOCK + 2 * i + 1] = e2m1_decode(byte >> 4) * s * t;
        }
      }
      return;
    }
  }
}

void unpack_tile(const QuantLayout& L, const uint8_t* tile, float* y, int64_t ld) {
  for (int64_t r = 0; r < L.R; ++r) unpack_row(L, tile, r, y + r * ld);
}

}  // namespace quant::cpu

void quant_pack(ReadFormat format, const Tensor& in, const Tensor& packed, const Exec& exec) {
  const char* fn = "quant_pack";
  check::shape(fn, "in", in, {ANY, ANY, ANY});
  check::dtype(fn, "in", in, {DType::f32, DType::f16, DType::bf16});
  check::inner_contiguous(fn, "in", in);
  check::device(fn, "in", in, exec);
  const QuantLayout L = make_layout(fn, "in", format, in.shape[1], in.shape[2]);
  const int64_t n = in.shape[0];
  check_packed(fn, packed, n, L, exec);
  check::require(n <= INT32_MAX, fn, "in", "expected at most 2^31 - 1 tiles, got " + std::to_string(n));
  if (exec.backend == Backend::cuda) return quant::cuda::pack(L, in, packed, exec);

  const bool ref = exec.backend == Backend::reference;
  auto tile_fn = [&](int64_t i) {
    uint8_t* tile = static_cast<uint8_t*>(packed.data) + i * packed.stride[0];
    const char* base = static_cast<const char*>(in.data) +
                       i * in.stride[0] * int64_t(dtype_size(in.dtype));
    const float* x = reinterpret_cast<const float*>(base);
    int64_t ld = in.stride[1];
    std::vector<float> tmp;
    if (in.dtype != DType::f32) {  // bf16 / f16 widen exactly to fp32
      tmp.resize(size_t(L.R * L.K));
      for (int64_t r = 0; r < L.R; ++r)
        for (int64_t k = 0; k < L.K; ++k)
          tmp[size_t(r * L.K + k)] = float(load_as_f64(base, in.dtype, r * in.stride[1] + k));
      x = tmp.data();
      ld = L.K;
    }
    if (ref)
      quant::oracle::pack_tile(L, x, ld, tile);
    else
      quant::cpu::pack_tile(L, x, ld, tile);
  };
  if (ref)
    for (int64_t i = 0; i < n; ++i) tile_fn(i);
  else
    parallel_for(n, cpu_threads(exec.num_threads), tile_fn);
}

void quant_unpack(ReadFormat format, const Tensor& packed, const Tensor& out, const Exec& exec) {
  const char* fn = "quant_unpack";
  check::shape(fn, "out", out, {ANY, ANY, ANY});
  check::dtype(fn, "out", out, {DType::f32});
  check::inner_contiguous(fn, "out", out);
  check::device(fn, "out", out, exec);
  const QuantLayout L = make_layout(fn, "out", format, out.shape[1], out.shape[2]);
  const int64_t n = out.shape[0];
  check_packed(fn, packed, n, L, exec);
  check::require(n <= INT32_MAX, fn, "out", "expected at most 2^31 - 1 tiles, got " + std::to_string(n));
  if (exec.backend == Backend::cuda) return quant::cuda::unpack(L, packed, out, exec);

  const bool ref = exec.backend == Backend::reference;
  auto tile_fn = [&](int64_t i) {
    const uint8_t* tile = static_cast<const uint8_t*>(packed.data) + i * packed.stride[0];
    float* y = static_cast<float*>(out.data) + i * out.stride[0];
    if (ref)
      quant::oracle::unpack_tile(L, tile, y, out.stride[1]);
    else
      quant::cpu::unpack_tile(L, tile, y, out.stride[1]);
  };
  if (ref)
    for (int64_t i = 0; i < n; ++i) tile_fn(i);
  else
    parallel_for(n, cpu_threads(exec.num_threads), tile_fn);
}

}  // namespace replayssm
