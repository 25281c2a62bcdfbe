// Minimal parallel-for over an index range for the fast CPU backend.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace replayssm {

inline int cpu_threads(int requested) {
  if (requested > 0) return requested;
  unsigned hw = std::thread::hardware_concurrency();
  return hw ? int(hw) : 1;
}

// Calls fn(worker, i) for i in [0, n), work-stealing in chunks of `grain`,
// on at most `threads` threads; worker in [0, threads) names the thread (the
// calling thread is worker 0), so fn can use per-worker scratch.
// Exceptions must not escape fn.
template <class Fn>
void parallel_for_workers(int64_t n, int threads, Fn&& fn, int64_t grain = 1) {
  threads = int(std::min<int64_t>(threads, (n + grain - 1) / std::max<int64_t>(grain, 1)));
  if (threads <= 1) {
    for (int64_t i = 0; i < n; ++i) fn(0, i);
    return;
  }
  std::atomic<int64_t> next{0};
  auto worker = [&](int w) {
    for (;;) {
      int64_t b = next.fetch_add(grain);
      if (b >= n) break;
      int64_t e = std::min(n, b + grain);
      for (int64_t i = b; i < e; ++i) fn(w, i);
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(size_t(threads - 1));
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker, t);
  worker(0);
  for (auto& th : pool) th.join();
}

// Calls fn(i) for i in [0, n) (parallel_for_workers without the worker id).
template <class Fn>
void parallel_for(int64_t n, int threads, Fn&& fn, int64_t grain = 1) {
  parallel_for_workers(n, threads, [&](int, int64_t i) { fn(i); }, grain);
}

}  // namespace replayssm
