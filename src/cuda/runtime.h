// Host-only declarations of the shared CUDA runtime helpers (src/cuda/runtime.cu).
// Includable from plain C++ translation units (tests, host launchers); device
// vocabulary lives in common.cuh, which includes this header.
#pragma once
#include <atomic>
#include <cstddef>
#include <mutex>

namespace replayssm::cuda_util {

// Throws replayssm::Error(fn, "device", ...) when this binary holds no kernel
// image for the current device (a GPU outside REPLAYSSM_CUDA_ARCHS), naming
// the build's architectures, the GPU's sm_XY and the CMake option to rebuild
// with. The answer is cached per device; call it at the top of every CUDA
// launcher, before any argument is written.
void require_supported_device(const char* fn);

// An integer from the environment variable `name` (launch-choice overrides
// for tests and measurements), else dflt.
int env_int(const char* name, int dflt);

// Per-row arrival counters of the eager replay steps (delta decode1.cuh,
// mamba2 decode_kernel.cuh): at least `rows` unsigned words of device memory,
// zero between launches (every launch returns the ones it used to zero), one
// buffer per (device, stream), zeroed when allocated. Null while `stream` is
// capturing and the buffer would have to grow (callers then reset cursors
// with their cursor kernels), or with REPLAYSSM_EAGER_CTR=0 (measurements).
// A graph keeps the buffer of its capture stream: two launches that use one
// buffer must not run concurrently.
unsigned* row_counters(const char* fn, long long rows, void* stream);

// The current device (cudaGetDevice); throws replayssm::Error naming fn when
// the runtime cannot say.
int current_device(const char* fn);

// Multiprocessors and peak memory bandwidth (GB/s: memory clock × bus width,
// double data rate) of the current device, queried once per device (a
// process may drive several GPUs): `fallback` / 0 when the driver does not
// say.
int device_sm_count(int fallback);
double device_peak_gbps();
// Multiprocessors and shared memory (bytes: the opt-in limit of a block, the
// total of an SM) of the current device, from the same query once per
// device; throws replayssm::Error naming fn when the driver does not say.
struct DeviceLimits {
  int sms = 0, smem_optin = 0, smem_per_sm = 0;
};
DeviceLimits device_limits(const char* fn);

// One kernel's dynamic shared-memory limit, raised where a launch needs more
// than the default 48 KiB. cudaFuncSetAttribute applies to the current
// device only, so the limit reached is kept per device: a launch on a
// second GPU raises it there too. Not a stream operation (safe under graph
// capture). One object per kernel instance (a function-local static at its
// launch site); thread-safe. `carveout`: also prefer the whole carveout for
// shared memory (several resident blocks of a large-shared-memory kernel).
class SmemLimit {
 public:
  void ensure(const void* kernel, std::size_t smem, const char* fn, bool carveout = false);

 private:
  static constexpr int MAX_DEVICES = 64;  // beyond: raised at every launch
  std::mutex mu_;
  std::atomic<std::size_t> raised_[MAX_DEVICES] = {};
};

}  // namespace replayssm::cuda_util
