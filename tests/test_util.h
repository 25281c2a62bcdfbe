// Test helpers: owning host tensors, random fills, comparisons.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "replayssm/types.h"

namespace replayssm::test {

// An owning, contiguous host tensor (64-byte aligned).
class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(DType dtype, std::initializer_list<int64_t> shape) { reset(dtype, std::vector<int64_t>(shape)); }
  HostTensor(DType dtype, const std::vector<int64_t>& shape) { reset(dtype, shape); }

  void reset(DType dtype, const std::vector<int64_t>& shape) {
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
    bytes_ = bytes;
  }

  const Tensor& t() const { return t_; }
  Tensor& t() { return t_; }
  operator const Tensor&() const { return t_; }
  int64_t numel() const { return t_.numel(); }
  size_t bytes() const { return bytes_; }
  void* data() const { return t_.data; }
  template <class T> T* as() const { return static_cast<T*>(t_.data); }

  double get(int64_t i) const { return load_as_f64(t_.data, t_.dtype, i); }
  void set(int64_t i, double v) { store_from_f64(t_.data, t_.dtype, i, v); }
  std::vector<double> to_f64() const {
    std::vector<double> v(static_cast<size_t>(numel()));
    for (int64_t i = 0; i < numel(); ++i) v[size_t(i)] = get(i);
    return v;
  }
  void fill(double v) { for (int64_t i = 0; i < numel(); ++i) set(i, v); }
  void fill_nan() { fill(std::numeric_limits<double>::quiet_NaN()); }
  template <class Rng> void fill_uniform(Rng& rng, double lo, double hi) {
    std::uniform_real_distribution<double> u(lo, hi);
    for (int64_t i = 0; i < numel(); ++i) set(i, u(rng));
  }
  template <class Rng> void fill_normal(Rng& rng, double mean = 0, double sd = 1) {
    std::normal_distribution<double> nd(mean, sd);
    for (int64_t i = 0; i < numel(); ++i) set(i, nd(rng));
  }
  // Byte-exact copy of another tensor of the same size.
  void copy_from(const HostTensor& o) { std::memcpy(t_.data, o.t_.data, bytes_); }
  bool bytes_equal(const HostTensor& o) const {
    return bytes_ == o.bytes_ && std::memcmp(t_.data, o.t_.data, bytes_) == 0;
  }

 private:
  struct Del { void operator()(uint8_t* p) const { ::operator delete[](p, std::align_val_t(64)); } };
  std::unique_ptr<uint8_t, Del> mem_;
  Tensor t_;
  size_t bytes_ = 0;
};

// Index vector helper.
inline HostTensor index_tensor(const std::vector<int64_t>& v, DType dt = DType::i32) {
  HostTensor t(dt, {int64_t(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.set(int64_t(i), double(v[i]));
  return t;
}

// Relative error ‖a − b‖ / max(‖b‖, tiny); NaN anywhere gives +inf.
inline double rel_err(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return std::numeric_limits<double>::infinity();
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
}
inline double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return std::numeric_limits<double>::infinity();
    m = std::max(m, std::fabs(a[i] - b[i]));
  }
  return m;
}

// One table of tolerances (relative error of outputs / states, vs the fp64
// reference). Keyed by the dtype that limits precision (state or activation).
// Loosening an entry needs a reason in the commit message.
inline double tolerance(DType limiting) {
  switch (limiting) {
    case DType::f64: return 1e-12;
    case DType::f32: return 2e-5;
    case DType::f16: return 4e-3;
    case DType::bf16: return 3e-2;
    default: return 0;
  }
}

}  // namespace replayssm::test
