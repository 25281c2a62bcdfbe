// GPU test helpers: device copies of HostTensors; tests skip without a GPU.
#pragma once
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <vector>
#include <gtest/gtest.h>

#include "slot_arena.h"
#include "test_util.h"

namespace replayssm::test {

#define RSSM_SKIP_WITHOUT_GPU()                                              \
  do {                                                                       \
    if (!::replayssm::cuda_available()) GTEST_SKIP() << "no CUDA GPU present"; \
  } while (0)

#define RSSM_CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << cudaGetErrorString(expr)

// An environment variable (the launchers' overrides) set for the object's
// lifetime, then restored (or unset).
struct ScopedEnv {
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* v = std::getenv(name)) {
      had_ = true;
      old_ = v;
    }
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

// The GPU tests check the replay kernels (a step that does not flush leaves
// the checkpoint untouched, cursors, flush counts), so their T = 1 steps take
// them at every batch: REPLAYSSM_EAGER_ROWS=0 unless the caller set it. The
// eager steps that small batches take by default (core/eager.h) are tested by
// DeltaGpu.EagerSmallBatch and Mamba2Gpu.EagerSmallBatch, which set it.
inline const bool replay_kernels_at_every_batch = [] {
  setenv("REPLAYSSM_EAGER_ROWS", "0", 0);
  return true;
}();

// REPLAYSSM_R1P (delta_launch.cu, the persistent T = 1 step): 1 takes it
// wherever it fits, 2 likewise with the default's fallback, 0 never.
struct R1PMode : ScopedEnv {
  explicit R1PMode(const char* v) : ScopedEnv("REPLAYSSM_R1P", v) {}
};

// Runs the callable given (a lambda taking the device) with each visible GPU
// current in turn (device 0 first, so whatever a launch sets up per device
// has been set up on another one already), then restores the current
// device. Skips the test with a message on fewer than two GPUs.
#define RSSM_ON_EACH_DEVICE(...)                                                    \
  do {                                                                            \
    int n_dev_ = 0, cur_dev_ = 0;                                                 \
    RSSM_CUDA_OK(cudaGetDeviceCount(&n_dev_));                                    \
    if (n_dev_ < 2) GTEST_SKIP() << "needs two CUDA GPUs, found " << n_dev_;      \
    RSSM_CUDA_OK(cudaGetDevice(&cur_dev_));                                       \
    for (int dev_ = 0; dev_ < n_dev_ && !::testing::Test::HasFailure(); ++dev_) { \
      RSSM_CUDA_OK(cudaSetDevice(dev_));                                          \
      SCOPED_TRACE("device " + std::to_string(dev_));                             \
      (__VA_ARGS__)(dev_);                                                        \
    }                                                                             \
    RSSM_CUDA_OK(cudaSetDevice(cur_dev_));                                        \
  } while (0)

// One operation captured into a CUDA graph on a stream of its own
// (blocking: ordered with the tests' synchronous uploads) and replayed by
// launch(); the instance, the graph and the stream go with the object.
// exec(e) is e on that stream; capture(f) records what f() queues there.
class CapturedGraph {
 public:
  CapturedGraph() { EXPECT_EQ(cudaStreamCreate(&stream_), cudaSuccess); }
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;
  ~CapturedGraph() {
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
    if (stream_) cudaStreamDestroy(stream_);
  }
  cudaStream_t stream() const { return stream_; }
  Exec exec(Exec e) const {
    e.stream = stream_;
    return e;
  }
  template <class F>
  void capture(F&& record) {
    RSSM_CUDA_OK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    record();
    RSSM_CUDA_OK(cudaStreamEndCapture(stream_, &graph_));
    RSSM_CUDA_OK(cudaGraphInstantiate(&exec_, graph_, 0));
  }
  void launch() { RSSM_CUDA_OK(cudaGraphLaunch(exec_, stream_)); }
  // launch(), then wait for it.
  void replay() {
    launch();
    RSSM_CUDA_OK(cudaStreamSynchronize(stream_));
  }

 private:
  cudaStream_t stream_ = nullptr;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

// A long test split into GPU_TEST_PARTS value-parameterised parts, so that
// GoogleTest sharding (scripts/gpu_check.sh runs one shard per core) can
// spread it: part p runs the items i of the test's loop with i % parts == p,
// and every item keeps the seed it had in the unsplit loop.
inline constexpr int GPU_TEST_PARTS = 4;
class GpuTestPart : public ::testing::TestWithParam<int> {
 protected:
  bool mine(int item) const { return item % GPU_TEST_PARTS == GetParam(); }
};
#define RSSM_GPU_TEST_PARTS(suite) \
  INSTANTIATE_TEST_SUITE_P(Part, suite, ::testing::Range(0, ::replayssm::test::GPU_TEST_PARTS))

// A device tensor with the same shape, dtype and bytes as a HostTensor.
class DeviceTensor {
 public:
  DeviceTensor() = default;
  explicit DeviceTensor(const HostTensor& h) { upload(h); }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;
  ~DeviceTensor() { if (ptr_) cudaFree(ptr_); }

  void upload(const HostTensor& h) {
    if (!ptr_ || bytes_ != h.bytes()) {
      if (ptr_) cudaFree(ptr_);
      bytes_ = h.bytes();
      if (cudaMalloc(&ptr_, bytes_ ? bytes_ : 1) != cudaSuccess) throw std::runtime_error("cudaMalloc");
    }
    cudaMemcpy(ptr_, h.data(), bytes_, cudaMemcpyHostToDevice);
    t_ = h.t();
    t_.data = ptr_;
    t_.device = Device::cuda;
  }
  // Copies device bytes into h (same size).
  void download(HostTensor& h) const { cudaMemcpy(h.data(), ptr_, bytes_, cudaMemcpyDeviceToHost); }
  HostTensor to_host() const {
    HostTensor h(t_.dtype, std::vector<int64_t>(t_.shape, t_.shape + t_.ndim));
    download(h);
    return h;
  }
  const Tensor& t() const { return t_; }
  operator const Tensor&() const { return t_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  Tensor t_;
};

// Slot `slot` of a pool tensor whose leading dimension is the slot
// (contiguous), from the device and from a host copy, as flat tensors.
inline HostTensor slot_slice(const Tensor& t, int64_t slot, bool on_device) {
  int64_t per = 1;
  for (int i = 1; i < t.ndim; ++i) per *= t.shape[i];
  HostTensor h(t.dtype, {per});
  const size_t bytes = h.bytes();
  const auto* src = static_cast<const uint8_t*>(t.data) + size_t(slot) * bytes;
  if (on_device) cudaMemcpy(h.data(), src, bytes, cudaMemcpyDeviceToHost);
  else std::memcpy(h.data(), src, bytes);
  return h;
}

// Device arenas held at once by all test processes of the machine (the
// shards scripts/gpu_check.sh runs side by side): each holds ~8 GiB, so at
// most ARENA_SLOTS of them (~50 GiB of the H200's 141), one flock()ed file in
// /tmp each; a reserve waits for a free one.
inline constexpr int ARENA_SLOTS = 6;
struct ArenaLocks {
  std::mutex m;
  std::map<void*, int> fd_of;  // arena → its lock file
  static ArenaLocks& get() {
    static ArenaLocks l;
    return l;
  }
  static int acquire() {
    for (;;) {
      for (int i = 0; i < ARENA_SLOTS; ++i) {
        const std::string path = "/tmp/replayssm_gpu_arena_" + std::to_string(i) + ".lock";
        const int fd = open(path.c_str(), O_CREAT | O_RDWR, 0666);
        if (fd < 0) return -1;  // no lock available: go ahead unlimited
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) return fd;
        close(fd);
      }
      usleep(50 * 1000);
    }
  }
};

// A SlotArena's bytes in device memory (one of ARENA_SLOTS at a time).
inline ArenaMemory cuda_arena_memory() {
  ArenaMemory m;
  m.device = Device::cuda;
  m.reserve = [](size_t n) -> void* {
    const int fd = ArenaLocks::acquire();
    void* p = nullptr;
    if (cudaMalloc(&p, n) != cudaSuccess) p = nullptr;
    if (!p) {
      if (fd >= 0) close(fd);
      return nullptr;
    }
    ArenaLocks& l = ArenaLocks::get();
    std::lock_guard<std::mutex> g(l.m);
    l.fd_of[p] = fd;
    return p;
  };
  m.release = [](void* p, size_t) {
    cudaFree(p);
    ArenaLocks& l = ArenaLocks::get();
    std::lock_guard<std::mutex> g(l.m);
    const auto it = l.fd_of.find(p);
    if (it == l.fd_of.end()) return;
    if (it->second >= 0) close(it->second);  // closing the file releases its lock
    l.fd_of.erase(it);
  };
  m.fill = [](void* a, int byte, size_t n) { cudaMemset(a, byte, n); };
  m.write2d = [](void* a, size_t pitch, const void* h, size_t width, size_t rows) {
    cudaMemcpy2D(a, pitch, h, width, width, rows, cudaMemcpyHostToDevice);
  };
  m.read2d = [](void* h, const void* a, size_t pitch, size_t width, size_t rows) {
    cudaMemcpy2D(h, width, a, pitch, width, rows, cudaMemcpyDeviceToHost);
  };
  return m;
}

// B distinct slots of S >= B in a random order, row 1 a pad row (-1).
inline std::vector<int64_t> shuffled_slots(int64_t B, int64_t S, std::mt19937& rng) {
  std::vector<int64_t> all(static_cast<size_t>(S));
  std::iota(all.begin(), all.end(), int64_t(0));
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(static_cast<size_t>(B));
  if (B > 1) all[1] = -1;
  return all;
}

}  // namespace replayssm::test
