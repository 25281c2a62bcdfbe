// Workspace validation and the internal buffer of the convenience path.
#include "core/workspace.h"

#include <memory>
#include <string>

#include "core/check.h"

namespace replayssm {

void check_workspace_memory(const char* fn, const Workspace& w, size_t bytes, const std::string& sizing) {
  const auto addr = reinterpret_cast<uintptr_t>(w.data);
  check::require(addr % WORKSPACE_ALIGN == 0, fn, "workspace",
                 "expected data aligned to " + std::to_string(WORKSPACE_ALIGN) +
                     " bytes, got an address " + std::to_string(addr % WORKSPACE_ALIGN) +
                     " bytes past a boundary");
  check::require(w.bytes >= bytes, fn, "workspace",
                 "expected at least " + std::to_string(bytes) + " bytes (" + sizing + "), got " +
                     std::to_string(w.bytes));
}

void check_workspace(const char* fn, const Exec& exec, const WorkspacePlan& plan) {
  if (exec.backend != Backend::cpu || exec.workspace.data == nullptr) return;
  check_workspace_memory(fn, exec.workspace, plan.bytes(),
                         "the family's *_workspace_bytes for this call and num_threads = " +
                             std::to_string(plan.threads));
}

namespace {
// Grow-only buffer of the calling thread, aligned to WORKSPACE_ALIGN.
char* internal_buffer(size_t bytes) {
  struct Buffer {
    std::unique_ptr<char[]> mem;
    size_t cap = 0;
  };
  thread_local Buffer buf;
  if (buf.cap < bytes) {
    buf.mem.reset(new char[bytes + WORKSPACE_ALIGN]);
    buf.cap = bytes;
  }
  const auto addr = reinterpret_cast<uintptr_t>(buf.mem.get());
  return buf.mem.get() + (WORKSPACE_ALIGN - addr % WORKSPACE_ALIGN) % WORKSPACE_ALIGN;
}
}  // namespace

CallScratch::CallScratch(const Exec& exec, const WorkspacePlan& plan) : plan_(plan) {
  if (exec.workspace.data != nullptr)
    base_ = static_cast<char*>(exec.workspace.data);
  else
    base_ = plan.bytes() ? internal_buffer(plan.bytes()) : nullptr;
}

}  // namespace replayssm
