// Scratch memory of the fast CPU backend, carved from the caller's
// Exec::workspace (or, when none is given, from a buffer the library keeps
// per calling thread).
//
// Layout of one call: [shared | slab 0 | slab 1 | ... | slab threads−1].
// `shared` holds per-call tables (row plans, transposed weights); slab w is
// the scratch of worker w of parallel_for_workers. Every piece starts on a
// WORKSPACE_ALIGN boundary. A backend describes its layout once, as a
// function of a Carver; the same function run on a measuring Carver (no
// base) gives the size the public *_workspace_bytes functions report, so the
// size and the carving cannot disagree.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "replayssm/types.h"

namespace replayssm {

inline size_t workspace_round(size_t n) {
  return (n + WORKSPACE_ALIGN - 1) / WORKSPACE_ALIGN * WORKSPACE_ALIGN;
}

// Bump allocator over caller memory; with base == nullptr it only measures.
class Carver {
 public:
  explicit Carver(void* base = nullptr) : base_(static_cast<char*>(base)) {}
  // n elements of E (n <= 0: an empty piece), aligned to WORKSPACE_ALIGN.
  template <class E> E* take(int64_t n) {
    const size_t at = used_;
    used_ += workspace_round(size_t(n > 0 ? n : 0) * sizeof(E));
    return base_ ? reinterpret_cast<E*>(base_ + at) : nullptr;
  }
  size_t used() const { return used_; }

 private:
  char* base_;
  size_t used_ = 0;
};

// Bytes of one call: the shared part plus one slab per configured thread.
struct WorkspacePlan {
  size_t shared = 0;
  size_t per_thread = 0;
  int threads = 1;
  size_t bytes() const { return shared + size_t(threads) * per_thread; }
};

// w.data aligned to WORKSPACE_ALIGN and w.bytes >= bytes, else
// Error(fn, "workspace", ...) whose message names `sizing` (what reports the
// size). Both backends' workspace checks.
void check_workspace_memory(const char* fn, const Workspace& w, size_t bytes, const std::string& sizing);
// Validates exec.workspace against `plan` (cpu backend only; the other
// backends ignore it): when given, check_workspace_memory.
void check_workspace(const char* fn, const Exec& exec, const WorkspacePlan& plan);

// The memory of one validated cpu call: exec.workspace when given, else the
// calling thread's internal buffer grown to plan.bytes().
class CallScratch {
 public:
  CallScratch(const Exec& exec, const WorkspacePlan& plan);
  Carver shared() const { return Carver(base_); }
  Carver slab(int worker) const {
    return Carver(base_ + plan_.shared + size_t(worker) * plan_.per_thread);
  }

 private:
  char* base_;
  WorkspacePlan plan_;
};

}  // namespace replayssm
