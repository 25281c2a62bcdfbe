// Host helpers of the dual-precision and shared modes (see dual_util.h).
#include "core/dual_util.h"

#include <cstring>

#include "core/check.h"
#include "core/dtype.h"
#include "quant/backend.h"

namespace replayssm::dual {

void Scratch::reset(DType dtype, const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  const size_t bytes = size_t(n) * dtype_size(dtype);
  mem_.reset(static_cast<uint8_t*>(::operator new[](bytes + 64, std::align_val_t(64))));
  std::memset(mem_.get(), 0, bytes + 64);
  t_ = Tensor{};
  t_.data = mem_.get();
  t_.dtype = dtype;
  t_.ndim = int(shape.size());
  int64_t st = 1;
  for (int d = t_.ndim - 1; d >= 0; --d) {
    t_.shape[d] = shape[size_t(d)];
    t_.stride[d] = st;
    st *= shape[size_t(d)];
  }
}

std::vector<int64_t> with_lead(const Tensor& t, int64_t n) {
  std::vector<int64_t> s(t.shape, t.shape + t.ndim);
  s[0] = n;
  return s;
}

uint8_t* element(const Tensor& t, std::initializer_list<int64_t> idx) {
  int64_t off = 0;
  int i = 0;
  for (int64_t v : idx) off += v * t.stride[i++];
  return static_cast<uint8_t*>(t.data) + off * int64_t(dtype_size(t.dtype));
}

void copy_row(const Tensor& src, int64_t s, const Tensor& dst, int64_t d) {
  const int64_t es = int64_t(dtype_size(src.dtype));
  const int nd = src.ndim;
  const int64_t inner = nd > 1 ? src.shape[nd - 1] : 1;
  int64_t outer = 1;
  for (int i = 1; i < nd - 1; ++i) outer *= src.shape[i];
  const auto* sb = static_cast<const uint8_t*>(src.data) + s * src.stride[0] * es;
  auto* db = static_cast<uint8_t*>(dst.data) + d * dst.stride[0] * es;
  for (int64_t o = 0; o < outer; ++o) {
    int64_t rem = o, so = 0, dof = 0;
    for (int i = nd - 2; i >= 1; --i) {
      const int64_t j = rem % src.shape[i];
      rem /= src.shape[i];
      so += j * src.stride[i];
      dof += j * dst.stride[i];
    }
    std::memcpy(db + dof * es, sb + so * es, size_t(inner * es));
  }
}

Scratch gather(const Tensor& t, const std::vector<int64_t>& idx) {
  Scratch out(t.dtype, with_lead(t, int64_t(idx.size())));
  for (size_t b = 0; b < idx.size(); ++b)
    if (idx[b] >= 0) copy_row(t, idx[b], out, int64_t(b));
  return out;
}

std::vector<int64_t> checked_slots(const char* fn, const char* arg, const Tensor& slot,
                                   int64_t pad, int64_t S, int64_t n) {
  check::index_vector(fn, arg, slot, n);
  check::require(slot.device == Device::cpu, fn, arg, "expected a host tensor");
  check::slots(fn, arg, slot, pad, S, true);
  std::vector<int64_t> idx(static_cast<size_t>(n));
  for (int64_t b = 0; b < n; ++b) {
    const int64_t s = check::index_at(slot, b);
    idx[size_t(b)] = s == pad ? -1 : s;
  }
  return idx;
}

Scratch compact_slots(const std::vector<int64_t>& idx) {
  Scratch t(DType::i64, {int64_t(idx.size())});
  for (size_t b = 0; b < idx.size(); ++b) t.as<int64_t>()[b] = idx[b] < 0 ? -1 : int64_t(b);
  return t;
}

void require_host(const char* fn, const Exec& exec, const char* what) {
  check::require(exec.backend != Backend::cuda, fn, "exec",
                 std::string(what) + " is not implemented on the cuda backend (use reference or cpu)");
  check::require(exec.backend == Backend::reference || exec.backend == Backend::cpu, fn, "exec",
                 "expected backend reference | cpu");
}

QuantLayout check_packed_pool(const char* fn, const char* arg, const Tensor& t, ReadFormat format,
                              int64_t S, int64_t heads, int64_t R, int64_t K, const Exec* exec) {
  const std::string fmt_arg = std::string(arg) == "packed_state" ? "format" : "pool.read_format";
  check::require(format == ReadFormat::bf16 || format == ReadFormat::f16 ||
                     format == ReadFormat::fp8_e4m3 || format == ReadFormat::nvfp4,
                 fn, fmt_arg.c_str(), "expected bf16 | f16 | fp8_e4m3 | nvfp4, got value " +
                     std::to_string(int(format)));
  const int64_t block = format == ReadFormat::fp8_e4m3 ? FP8_BLOCK : format == ReadFormat::nvfp4 ? NVFP4_BLOCK : 1;
  check::require(K % block == 0, fn, fmt_arg.c_str(),
                 std::string(read_format_name(format)) + " needs the contracted dimension (" +
                     std::to_string(K) + ") to be a multiple of " + std::to_string(block));
  const QuantLayout L = quant_layout(format, R, K);
  check::present(fn, arg, t);
  if (exec) check::device(fn, arg, t, *exec);
  else check::require(t.device == Device::cpu, fn, arg, "expected a host tensor");
  check::dtype(fn, arg, t, {DType::u8});
  check::require(t.ndim == 3 && t.shape[0] == S && t.shape[1] == heads, fn, arg,
                 "expected shape " + check::dims_str({S, heads, L.tile_bytes}) + " (u8 tiles of " +
                     read_format_name(format) + " [" + std::to_string(R) + ", " + std::to_string(K) +
                     "]), got " + t.shape_str());
  check::require(t.shape[2] == L.tile_bytes, fn, arg,
                 "expected " + std::to_string(L.tile_bytes) + " bytes per tile for " +
                     read_format_name(format) + " [" + std::to_string(R) + ", " + std::to_string(K) +
                     "] (format mismatch?), got " + std::to_string(t.shape[2]));
  check::inner_contiguous(fn, arg, t);
  check::aligned(fn, arg, t, QUANT_TILE_ALIGN);
  return L;
}

void pack_tile(Backend b, const QuantLayout& L, const float* x, uint8_t* tile) {
  if (b == Backend::reference) quant::oracle::pack_tile(L, x, L.K, tile);
  else quant::cpu::pack_tile(L, x, L.K, tile);
}

void unpack_tile(Backend b, const QuantLayout& L, const uint8_t* tile, float* y) {
  if (b == Backend::reference) quant::oracle::unpack_tile(L, tile, y, L.K);
  else quant::cpu::unpack_tile(L, tile, y, L.K);
}

void load_tile_f32(const Tensor& src, int64_t s, int64_t h, float* y) {
  const int64_t R = src.shape[2], K = src.shape[3];
  for (int64_t r = 0; r < R; ++r) {
    const uint8_t* p = element(src, {s, h, r});
    switch (src.dtype) {
      case DType::f32: std::memcpy(y + r * K, p, size_t(K) * 4); break;
      case DType::bf16:
        for (int64_t k = 0; k < K; ++k) y[r * K + k] = bf16_to_f32(reinterpret_cast<const uint16_t*>(p)[k]);
        break;
      case DType::f16:
        for (int64_t k = 0; k < K; ++k) y[r * K + k] = f16_to_f32(reinterpret_cast<const uint16_t*>(p)[k]);
        break;
      default:
        for (int64_t k = 0; k < K; ++k) y[r * K + k] = float(load_as_f64(p, src.dtype, k));
    }
  }
}

void store_tile(const Tensor& dst, int64_t s, int64_t h, const float* y) {
  const int64_t R = dst.shape[2], K = dst.shape[3];
  for (int64_t r = 0; r < R; ++r) {
    uint8_t* p = element(dst, {s, h, r});
    if (dst.dtype == DType::f32) std::memcpy(p, y + r * K, size_t(K) * 4);
    else
      for (int64_t k = 0; k < K; ++k) store_from_f64(p, dst.dtype, k, double(y[r * K + k]));
  }
}

void pack_rows(Backend b, const QuantLayout& L, const Tensor& state, int64_t s_state,
               const Tensor& copy, int64_t s_copy) {
  std::vector<float> tile(static_cast<size_t>(L.R * L.K));
  for (int64_t h = 0; h < state.shape[1]; ++h) {
    load_tile_f32(state, s_state, h, tile.data());
    pack_tile(b, L, tile.data(), element(copy, {s_copy, h}));
  }
}

void unpack_rows(Backend b, const QuantLayout& L, const Tensor& copy, int64_t s_copy,
                 const Tensor& out, int64_t s_out) {
  std::vector<float> tile(static_cast<size_t>(L.R * L.K));
  for (int64_t h = 0; h < copy.shape[1]; ++h) {
    unpack_tile(b, L, element(copy, {s_copy, h}), tile.data());
    store_tile(out, s_out, h, tile.data());
  }
}

}  // namespace replayssm::dual
