// Shared CUDA runtime helpers: device presence, device-side status words,
// error translation, and the check that the current GPU is covered by the
// build's architectures.
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

#include "core/check.h"
#include "cuda/common.cuh"

#ifndef REPLAYSSM_CUDA_ARCHS
#define REPLAYSSM_CUDA_ARCHS "unknown"
#endif

namespace replayssm {

#if defined(REPLAYSSM_WITH_CUDA)

bool cuda_available() {
  static const bool available = [] {
    int n = 0;
    const cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();  // no driver / no device: not sticky, clear it
      return false;
    }
    return n > 0;
  }();
  return available;
}

namespace {

std::string status_names(int32_t bits) {
  static constexpr struct {
    int32_t bit;
    const char* name;
  } NAMES[] = {
      {STATUS_BAD_SLOT, "STATUS_BAD_SLOT (slot index out of range)"},
      {STATUS_BAD_ACCEPTED, "STATUS_BAD_ACCEPTED (accepted count outside [1, pending])"},
      {STATUS_RING_OVERFLOW, "STATUS_RING_OVERFLOW (ring too short for the step)"},
      {STATUS_UNCOMMITTED, "STATUS_UNCOMMITTED (pending records without an accepted count)"},
  };
  std::string out;
  int32_t known = 0;
  for (const auto& n : NAMES) {
    known |= n.bit;
    if (bits & n.bit) out += (out.empty() ? "" : " | ") + std::string(n.name);
  }
  if (bits & ~known) out += (out.empty() ? "" : " | ") + std::string("unknown bits ") +
                            std::to_string(bits & ~known);
  return out;
}

}  // namespace

void check_device_status(const Exec& exec, const char* fn) {
  // A CPU execution context without a status word has nothing on the device.
  if (exec.device_status == nullptr && exec.backend != Backend::cuda) return;
  const cudaStream_t stream = cuda_util::stream_of(exec);
  cuda_util::check(cudaStreamSynchronize(stream), fn, "exec");
  if (exec.device_status == nullptr) return;
  int32_t bits = 0;
  cuda_util::check(cudaMemcpyAsync(&bits, exec.device_status, sizeof(bits),
                                   cudaMemcpyDeviceToHost, stream),
                   fn, "device_status");
  cuda_util::check(cudaStreamSynchronize(stream), fn, "device_status");
  if (bits == 0) return;
  cuda_util::check(cudaMemsetAsync(exec.device_status, 0, sizeof(int32_t), stream), fn,
                   "device_status");
  cuda_util::check(cudaStreamSynchronize(stream), fn, "device_status");
  throw Error(fn, "device_status",
              "the device skipped rows and reported " + status_names(bits));
}

namespace cuda_util {

void check(cudaError_t err, const char* fn, const char* what) {
  if (err == cudaSuccess) return;
  (void)cudaGetLastError();  // clear a non-sticky error so later calls start clean
  throw Error(fn, what, std::string("CUDA error ") + cudaGetErrorName(err) + ": " +
                            cudaGetErrorString(err));
}

namespace {

// A kernel that exists only so its attributes can be queried: the query
// fails when the binary has no image (SASS or compatible PTX) for the device.
__global__ void probe_kernel() {}

}  // namespace

int env_int(const char* name, int dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : dflt;
}

unsigned* row_counters(const char* fn, long long rows, void* stream) {
  if (env_int("REPLAYSSM_EAGER_CTR", 1) == 0) return nullptr;
  struct Buf {
    unsigned* p = nullptr;
    long long n = 0;
  };
  static std::mutex mu;
  static std::map<std::pair<int, void*>, Buf> bufs;
  int dev = 0;
  check(cudaGetDevice(&dev), fn, "row counters");
  std::lock_guard<std::mutex> lock(mu);
  Buf& b = bufs[{dev, stream}];
  if (b.n < rows) {
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    (void)cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &cs);
    if (cs != cudaStreamCaptureStatusNone) return nullptr;
    const long long n = rows > 64 ? rows : 64;
    void* p = nullptr;
    check(cudaMalloc(&p, size_t(n) * sizeof(unsigned)), fn, "row counters");
    check(cudaMemset(p, 0, size_t(n) * sizeof(unsigned)), fn, "row counters");
    b = Buf{static_cast<unsigned*>(p), n};  // the previous buffer stays allocated (captured graphs)
  }
  return b.p;
}

}  // namespace cuda_util

int check::current_cuda_device() {
  int dev = -1;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return dev;
}

namespace cuda_util {

int current_device(const char* fn) {
  int dev = 0;
  check(cudaGetDevice(&dev), fn, "cudaGetDevice");
  return dev;
}

namespace {
struct DeviceAttrs {
  std::once_flag once;
  int sms = 0, smem_optin = 0, smem_per_sm = 0;
  double gbps = 0.0;
  std::atomic<bool> supported{false};  // require_supported_device passed on it
};
constexpr int ATTR_DEVICES = 64;
DeviceAttrs device_attrs[ATTR_DEVICES];

// A device's attributes (0 where the driver does not report one).
void query_attrs(int dev, DeviceAttrs& a) {
  int sms = 0, khz = 0, bits = 0, optin = 0, per_sm = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess) a.sms = sms;
  if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) == cudaSuccess)
    a.smem_optin = optin;
  if (cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev) == cudaSuccess)
    a.smem_per_sm = per_sm;
  if (cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, dev) == cudaSuccess &&
      cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth, dev) == cudaSuccess)
    a.gbps = 2.0 * double(khz) * 1e3 * double(bits) / 8.0 / 1e9;
  (void)cudaGetLastError();  // an attribute the driver does not report is not sticky
}
// Device dev's attributes, queried on its first use; null beyond the table.
const DeviceAttrs* attrs_of(int dev) {
  if (dev < 0 || dev >= ATTR_DEVICES) return nullptr;
  DeviceAttrs& a = device_attrs[dev];
  std::call_once(a.once, [&] { query_attrs(dev, a); });
  return &a;
}
// The current device's; null when the runtime cannot name it.
const DeviceAttrs* current_attrs() { return attrs_of(check::current_cuda_device()); }
}  // namespace

int device_sm_count(int fallback) {
  const DeviceAttrs* a = current_attrs();
  return a && a->sms > 0 ? a->sms : fallback;
}

double device_peak_gbps() {
  const DeviceAttrs* a = current_attrs();
  return a ? a->gbps : 0.0;
}

DeviceLimits device_limits(const char* fn) {
  const int dev = current_device(fn);
  DeviceAttrs beyond;  // beyond the table: asked each time
  const DeviceAttrs* a = attrs_of(dev);
  if (!a) {
    query_attrs(dev, beyond);
    a = &beyond;
  }
  const DeviceLimits l{a->sms, a->smem_optin, a->smem_per_sm};
  check::require(l.sms > 0 && l.smem_optin > 0 && l.smem_per_sm > 0, fn, "device attribute",
                 "the driver did not report the device's multiprocessors and shared memory");
  return l;
}

void SmemLimit::ensure(const void* kernel, std::size_t smem, const char* fn, bool carveout) {
  if (smem <= 48 * 1024) return;
  const int dev = current_device(fn);
  std::atomic<std::size_t>* r = dev >= 0 && dev < MAX_DEVICES ? &raised_[dev] : nullptr;
  if (r && smem <= r->load(std::memory_order_acquire)) return;
  // under the lock, so a smaller raise cannot land after a larger one
  std::lock_guard<std::mutex> lock(mu_);
  if (r && smem <= r->load(std::memory_order_relaxed)) return;
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)), fn,
        "shared memory size");
  if (carveout)
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                               int(cudaSharedmemCarveoutMaxShared)),
          fn, "shared memory carveout");
  if (r) r->store(smem, std::memory_order_release);
}

void require_supported_device(const char* fn) {
  int dev = 0;
  check(cudaGetDevice(&dev), fn, "device");
  // devices past the table are probed at every call
  std::atomic<bool>* const known = dev >= 0 && dev < ATTR_DEVICES ? &device_attrs[dev].supported : nullptr;
  if (known && known->load(std::memory_order_acquire)) return;
  int major = 0, minor = 0;
  check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev), fn, "device");
  check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev), fn, "device");
  cudaFuncAttributes attr{};
  const cudaError_t err = cudaFuncGetAttributes(&attr, probe_kernel);
  bool supported = true;
  if (err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidDeviceFunction ||
      err == cudaErrorUnsupportedPtxVersion) {
    (void)cudaGetLastError();
    supported = false;
  } else {
    check(err, fn, "device");
  }
  if (supported) {
    if (known) known->store(true, std::memory_order_release);
    return;
  }
  const std::string sm = std::to_string(major) + std::to_string(minor);
  // Architecture-specific features (sm_90a, sm_100a, ...) exist from sm_90 on.
  const std::string suggest = major >= 9 ? sm + "a" : sm;
  throw Error(fn, "device",
              std::string("this build of replayssm targets ") + REPLAYSSM_CUDA_ARCHS +
                  "; the current GPU is sm_" + sm + "; rebuild with -DREPLAYSSM_CUDA_ARCHS=" +
                  suggest);
}

}  // namespace cuda_util

#endif  // REPLAYSSM_WITH_CUDA

}  // namespace replayssm
