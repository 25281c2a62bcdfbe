#include "core/slot_ops.h"

#include <cstring>

#include "core/check.h"

namespace replayssm::slot_ops {
namespace {

// Visit every element offset (in elements) of one slot row of t.
template <class Fn>
void for_each_row_element(const Tensor& t, Fn&& fn) {
  int64_t idx[MAX_DIMS] = {};
  const int64_t total = t.numel() / (t.ndim ? t.shape[0] : 1);
  for (int64_t n = 0; n < total; ++n) {
    int64_t off = 0;
    for (int d = 1; d < t.ndim; ++d) off += idx[d] * t.stride[d];
    fn(off);
    for (int d = t.ndim - 1; d >= 1; --d) {
      if (++idx[d] < t.shape[d]) break;
      idx[d] = 0;
    }
  }
}

}  // namespace

void copy_cpu(const std::vector<Tensor>& pool, const Tensor& src, const Tensor& dst, int64_t pad) {
  for (const Tensor& t : pool) {
    if (!t.defined()) continue;
    const int64_t es = int64_t(dtype_size(t.dtype));
    auto* base = static_cast<char*>(t.data);
    for (int64_t i = 0; i < src.shape[0]; ++i) {
      int64_t s = check::index_at(src, i), d = check::index_at(dst, i);
      if (s == pad || d == pad || s == d) continue;
      char* from = base + s * t.stride[0] * es;
      char* to = base + d * t.stride[0] * es;
      for_each_row_element(t, [&](int64_t off) { std::memcpy(to + off * es, from + off * es, size_t(es)); });
    }
  }
}

void zero_cpu(const std::vector<Tensor>& pool, const Tensor& slot, int64_t pad) {
  for (const Tensor& t : pool) {
    if (!t.defined()) continue;
    const int64_t es = int64_t(dtype_size(t.dtype));
    auto* base = static_cast<char*>(t.data);
    for (int64_t i = 0; i < slot.shape[0]; ++i) {
      int64_t s = check::index_at(slot, i);
      if (s == pad) continue;
      char* row = base + s * t.stride[0] * es;
      for_each_row_element(t, [&](int64_t off) { std::memset(row + off * es, 0, size_t(es)); });
    }
  }
}

}  // namespace replayssm::slot_ops
