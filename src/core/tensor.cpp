#include <string>
#include <unordered_set>

#include "core/check.h"
#include "replayssm/types.h"

namespace replayssm {

const char* dtype_name(DType d) {
  switch (d) {
    case DType::f32: return "fp32";
    case DType::f16: return "fp16";
    case DType::bf16: return "bf16";
    case DType::f64: return "fp64";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
    case DType::u8: return "uint8";
  }
  return "?";
}

size_t dtype_size(DType d) {
  switch (d) {
    case DType::f32: case DType::i32: return 4;
    case DType::f16: case DType::bf16: return 2;
    case DType::f64: case DType::i64: return 8;
    case DType::u8: return 1;
  }
  return 0;
}

bool is_float(DType d) {
  return d == DType::f32 || d == DType::f16 || d == DType::bf16 || d == DType::f64;
}

const char* backend_name(Backend b) {
  switch (b) {
    case Backend::reference: return "reference";
    case Backend::cpu: return "cpu";
    case Backend::cuda: return "cuda";
  }
  return "?";
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= shape[i];
  return n;
}

bool Tensor::is_contiguous() const {
  int64_t expect = 1;
  for (int i = ndim - 1; i >= 0; --i) {
    if (shape[i] != 1 && stride[i] != expect) return false;
    expect *= shape[i];
  }
  return true;
}

// Error messages are built with std::to_string, not iostreams: iostream
// locale state is not safe to touch from an extension module whose process
// loaded another C++ runtime (seen under torch).
std::string Tensor::shape_str() const {
  std::string s = "[";
  for (int i = 0; i < ndim; ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Tensor Tensor::view(void* data, DType dtype, std::initializer_list<int64_t> shape, Device device) {
  Tensor t;
  t.data = data;
  t.dtype = dtype;
  t.device = device;
  t.ndim = int(shape.size());
  if (t.ndim > MAX_DIMS) throw Error("Tensor::view", "shape", "at most 6 dimensions");
  int i = 0;
  for (int64_t s : shape) t.shape[i++] = s;
  int64_t st = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    t.stride[d] = st;
    st *= t.shape[d];
  }
  return t;
}

Tensor Tensor::strided(void* data, DType dtype, std::initializer_list<int64_t> shape,
                       std::initializer_list<int64_t> stride, Device device) {
  if (shape.size() != stride.size())
    throw Error("Tensor::strided", "stride", "one stride per dimension");
  Tensor t = view(data, dtype, shape, device);
  int i = 0;
  for (int64_t s : stride) t.stride[i++] = s;
  return t;
}

Error::Error(std::string function, std::string argument, std::string message)
    : std::invalid_argument(function + ": argument '" + argument + "': " + message),
      function_(std::move(function)),
      argument_(std::move(argument)) {}

namespace check {

void fail(const char* fn, const char* arg, const std::string& msg) { throw Error(fn, arg, msg); }

std::string dims_str(std::initializer_list<int64_t> dims) {
  std::string s = "[";
  int i = 0;
  for (int64_t d : dims) {
    s += i++ ? ", " : "";
    s += d == ANY ? std::string("*") : std::to_string(d);
  }
  return s + "]";
}

void present(const char* fn, const char* arg, const Tensor& t) {
  if (!t.defined()) fail(fn, arg, "expected a tensor, got none");
}

void shape(const char* fn, const char* arg, const Tensor& t, std::initializer_list<int64_t> dims) {
  present(fn, arg, t);
  bool ok = t.ndim == int(dims.size());
  int i = 0;
  for (int64_t d : dims) {
    if (!ok) break;
    if (d != ANY && t.shape[i] != d) ok = false;
    if (t.shape[i] < 0) ok = false;
    ++i;
  }
  if (!ok) fail(fn, arg, "expected shape " + dims_str(dims) + ", got " + t.shape_str());
}

void dtype(const char* fn, const char* arg, const Tensor& t, std::initializer_list<DType> allowed) {
  for (DType d : allowed)
    if (t.dtype == d) return;
  std::string list;
  for (DType d : allowed) list += (list.empty() ? "" : " | ") + std::string(dtype_name(d));
  fail(fn, arg, "expected dtype " + list + ", got " + dtype_name(t.dtype));
}

void same_dtype(const char* fn, const char* arg, const Tensor& t, const char* other_arg, DType other) {
  if (t.dtype != other)
    fail(fn, arg, std::string("expected dtype ") + dtype_name(other) + " (the dtype of '" +
                      other_arg + "'), got " + dtype_name(t.dtype));
}

void inner_contiguous(const char* fn, const char* arg, const Tensor& t) {
  if (t.ndim > 0 && t.shape[t.ndim - 1] > 1 && t.stride[t.ndim - 1] != 1)
    fail(fn, arg, "expected a unit stride in the last dimension, got stride " +
                      std::to_string(t.stride[t.ndim - 1]));
}

void contiguous(const char* fn, const char* arg, const Tensor& t) {
  if (!t.is_contiguous()) fail(fn, arg, "expected a contiguous tensor of shape " + t.shape_str());
}

void aligned(const char* fn, const char* arg, const Tensor& t, int64_t bytes) {
  auto addr = reinterpret_cast<uintptr_t>(t.data);
  if (addr % uintptr_t(bytes) != 0)
    fail(fn, arg, "expected a data pointer aligned to " + std::to_string(bytes) + " bytes");
  int64_t es = int64_t(dtype_size(t.dtype));
  for (int i = 0; i < t.ndim; ++i)
    if (t.shape[i] > 1 && t.stride[i] != 1 && (t.stride[i] * es) % bytes != 0)
      fail(fn, arg, "expected stride " + std::to_string(i) + " (" + std::to_string(t.stride[i]) +
                        " elements) to be a multiple of " + std::to_string(bytes) + " bytes");
}

void device(const char* fn, const char* arg, const Tensor& t, const Exec& exec) {
  Device want = exec.backend == Backend::cuda ? Device::cuda : Device::cpu;
  if (t.defined() && t.device != want)
    fail(fn, arg, std::string("expected a ") + (want == Device::cuda ? "cuda" : "cpu") +
                      " tensor for the " + backend_name(exec.backend) + " backend");
  if (t.defined() && want == Device::cuda && t.device_index >= 0) device_index(fn, arg, t, current_cuda_device());
}

void device_index(const char* fn, const char* arg, const Tensor& t, int current) {
  if (current >= 0 && t.device_index >= 0 && t.device_index != current)
    fail(fn, arg, "expected a tensor on the current CUDA device cuda:" + std::to_string(current) +
                      ", got one on cuda:" + std::to_string(t.device_index) +
                      " (make its device current first: cudaSetDevice, torch.cuda.device)");
}

void index_vector(const char* fn, const char* arg, const Tensor& t, int64_t n) {
  shape(fn, arg, t, {n});
  dtype(fn, arg, t, {DType::i32, DType::i64});
}

void positive(const char* fn, const char* arg, int64_t v) {
  if (v <= 0) fail(fn, arg, "expected a positive value, got " + std::to_string(v));
}

void require(bool ok, const char* fn, const char* arg, const std::string& msg) {
  if (!ok) fail(fn, arg, msg);
}

int64_t index_at(const Tensor& t, int64_t i) {
  const int64_t off = i * t.stride[0];
  return t.dtype == DType::i64 ? static_cast<const int64_t*>(t.data)[off]
                               : static_cast<const int32_t*>(t.data)[off];
}

int64_t index_at(const Tensor& t, int64_t i, int64_t j) {
  const int64_t off = i * t.stride[0] + j * t.stride[1];
  return t.dtype == DType::i64 ? static_cast<const int64_t*>(t.data)[off]
                               : static_cast<const int32_t*>(t.data)[off];
}

void slots(const char* fn, const char* arg, const Tensor& slot, int64_t pad, int64_t S,
           bool distinct) {
  std::unordered_set<int64_t> seen;
  for (int64_t b = 0; b < slot.shape[0]; ++b) {
    int64_t s = index_at(slot, b);
    if (s == pad) continue;
    if (s < 0 || s >= S)
      fail(fn, arg, "expected slot indices in [0, " + std::to_string(S) + ") or the pad id " +
                        std::to_string(pad) + ", got " + std::to_string(s) + " at row " +
                        std::to_string(b));
    if (distinct && !seen.insert(s).second)
      fail(fn, arg, "expected distinct slots, got slot " + std::to_string(s) + " twice");
  }
}

}  // namespace check

#if !defined(REPLAYSSM_WITH_CUDA)
int check::current_cuda_device() { return -1; }
bool cuda_available() { return false; }
void check_device_status(const Exec&, const char* function) {
  throw Error(function, "exec", "this build of replayssm has no CUDA backend");
}
#endif

}  // namespace replayssm
