// replayssm public vocabulary: dtypes, tensor views, errors, execution context.
// Free of CUDA and torch headers.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>

namespace replayssm {

enum class DType : int8_t { f32, f16, bf16, f64, i32, i64, u8 };
const char* dtype_name(DType dtype);
size_t dtype_size(DType dtype);
bool is_float(DType dtype);  // f32, f16, bf16, f64

enum class Device : int8_t { cpu, cuda };

inline constexpr int MAX_DIMS = 6;

// A non-owning strided view. Strides count elements, not bytes; every
// address computation uses int64. A tensor with data == nullptr is "absent"
// (optional arguments).
struct Tensor {
  void* data = nullptr;
  DType dtype = DType::f32;
  Device device = Device::cpu;
  int ndim = 0;
  int64_t shape[MAX_DIMS] = {};
  int64_t stride[MAX_DIMS] = {};
  // cuda: the device holding data when the caller states it (the Python
  // binding does, from DLPack); a call then rejects it unless it is the
  // current device. -1: not stated (the current device is assumed).
  int device_index = -1;

  bool defined() const { return data != nullptr; }
  int64_t numel() const;
  bool is_contiguous() const;
  std::string shape_str() const;  // "[4, 1, 128, 64]"

  // Row-major contiguous view over caller memory.
  static Tensor view(void* data, DType dtype, std::initializer_list<int64_t> shape,
                     Device device = Device::cpu);
  // Strided view over caller memory (e.g. one layer of a layer-major pool).
  static Tensor strided(void* data, DType dtype, std::initializer_list<int64_t> shape,
                        std::initializer_list<int64_t> stride, Device device = Device::cpu);
};

// Every rejected call throws this. what() reads
// "<function>: argument '<arg>': expected <...>, got <...>".
class Error : public std::invalid_argument {
 public:
  Error(std::string function, std::string argument, std::string message);
  const std::string& function() const { return function_; }
  const std::string& argument() const { return argument_; }

 private:
  std::string function_, argument_;
};

enum class Backend : int8_t {
  reference,  // CPU oracle: plain loops, fp64 accumulation
  cpu,        // fast CPU backend: fp32 arithmetic, multithreaded
  cuda,       // GPU backend (tensors must be on the device)
};
const char* backend_name(Backend backend);
bool cuda_available();  // built with CUDA and a usable device present

// Caller-provided scratch memory of one call (host memory, cpu backend).
// data must be aligned to WORKSPACE_ALIGN bytes and hold at least the bytes
// the family's *_workspace_bytes function reports for the call's shapes and
// Exec (backend, num_threads). The library uses it only during the call;
// its contents before and after are unspecified (nothing is read from it
// that the call did not write first). data == nullptr means "none": the
// cpu backend then allocates its scratch itself (a per-calling-thread
// buffer that grows to the largest call and is kept for the thread's life)
// — the convenience path. A workspace that is given but too small or
// misaligned is an error naming the argument 'workspace'; there is no
// silent fallback.
inline constexpr size_t WORKSPACE_ALIGN = 64;
struct Workspace {
  void* data = nullptr;
  size_t bytes = 0;
};

// Operations of the state-space families (mamba2_*, delta_*), for the
// workspace size functions.
enum class SsmOp : int8_t {
  decode,
  snapshot_decode,
  prefill,
  replay_step,
  commit,
  materialize,
  flush,
  copy_slot,
  reset_slot,
};

// How a call executes. stream is a cudaStream_t (nullptr = default stream).
// device_status, when set, is an int32 in device memory that kernels OR
// error bits into (StatusBit) for errors only the device can see (slot out
// of range, accepted count outside [1, pending]); the offending row is then
// skipped. check_device_status() synchronises, reads and clears it, and
// throws when a bit is set. The CPU backends validate everything up front.
// workspace: see Workspace (cpu backend: host memory; cuda backend: device
// memory, used only by the persistent T = 1 delta replay step, see
// delta_workspace_bytes; the reference backend needs none and ignores it).
struct Exec {
  Backend backend = Backend::cpu;
  void* stream = nullptr;
  int num_threads = 0;  // cpu backend: 0 = hardware concurrency
  int32_t* device_status = nullptr;
  Workspace workspace;
};

enum StatusBit : int32_t {
  STATUS_BAD_SLOT = 1,
  STATUS_BAD_ACCEPTED = 2,
  STATUS_RING_OVERFLOW = 4,
  STATUS_UNCOMMITTED = 8,
};
void check_device_status(const Exec& exec, const char* function);

}  // namespace replayssm
