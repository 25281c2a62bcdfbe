// Validating entry points of the causal conv1d (include/replayssm/conv1d.h).
// Everything visible to the host is checked before any backend writes.
#include <string>

#include "conv1d/backend.h"
#include "core/check.h"
#include "core/parallel.h"
#include "core/workspace.h"

namespace replayssm {
namespace {

using check::ANY;

constexpr std::initializer_list<DType> FLOATS = {DType::f32, DType::f16, DType::bf16};

// weight [dim, W] and optional bias [dim], each f32 or the activation dtype.
int64_t check_weights(const char* fn, const Tensor& weight, const Tensor& bias, int64_t dim,
                      DType act) {
  check::shape(fn, "weight", weight, {dim, ANY});
  check::dtype(fn, "weight", weight, {DType::f32, act});
  check::inner_contiguous(fn, "weight", weight);
  const int64_t W = weight.shape[1];
  check::require(W >= 2, fn, "weight", "expected a kernel width W >= 2, got " + std::to_string(W));
  if (bias.defined()) {
    check::shape(fn, "bias", bias, {dim});
    check::dtype(fn, "bias", bias, {DType::f32, act});
  }
  return W;
}

// conv_state [S, R, dim] with R >= W (T_max >= 1), conv_pending [S] i32.
void check_state(const char* fn, const Tensor& conv_state, const Tensor& conv_pending,
                 conv1d::Dims& d) {
  check::shape(fn, "conv_state", conv_state, {ANY, ANY, d.dim});
  check::dtype(fn, "conv_state", conv_state, FLOATS);
  check::inner_contiguous(fn, "conv_state", conv_state);
  d.S = conv_state.shape[0];
  d.R = conv_state.shape[1];
  check::require(d.R >= d.W, fn, "conv_state",
                 "expected at least W = " + std::to_string(d.W) +
                     " rows (W - 1 history rows plus T_max >= 1), got " + std::to_string(d.R));
  check::shape(fn, "conv_pending", conv_pending, {d.S});
  check::dtype(fn, "conv_pending", conv_pending, {DType::i32});
}

void check_devices(const char* fn, const Exec& exec,
                   std::initializer_list<std::pair<const char*, const Tensor*>> tensors) {
  for (const auto& [name, t] : tensors) check::device(fn, name, *t, exec);
}

// Pending counts of the rows' slots lie in [0, T_max]; when num_accepted is
// given (always for commit), every non-pad row has pending > 0 and an
// accepted count in [1, pending] (host-visible tensors only).
void check_cursors_host(const char* fn, const Tensor& slot, int64_t pad,
                        const Tensor& conv_pending, const Tensor& num_accepted,
                        const conv1d::Dims& d) {
  for (int64_t b = 0; b < d.B; ++b) {
    const int64_t s = check::index_at(slot, b);
    if (s == pad) continue;
    const int64_t p = check::index_at(conv_pending, s);
    check::require(p >= 0 && p <= d.T_max(), fn, "conv_pending",
                   "expected pending counts in [0, T_max = " + std::to_string(d.T_max()) +
                       "], got " + std::to_string(p) + " at slot " + std::to_string(s));
    if (!num_accepted.defined()) continue;
    if (p == 0)
      check::fail(fn, "num_accepted",
                  "slot " + std::to_string(s) +
                      " has no pending records to commit (pass num_accepted only for rows whose "
                      "previous step left pending records)");
    const int64_t a = check::index_at(num_accepted, b);
    check::require(a >= 1 && a <= p, fn, "num_accepted",
                   "expected accepted counts in [1, pending = " + std::to_string(p) + "], got " +
                       std::to_string(a) + " at row " + std::to_string(b));
  }
}

}  // namespace

int64_t conv1d_state_rows(int64_t W, int64_t T_max) {
  check::require(W >= 2, "conv1d_state_rows", "W", "expected W >= 2, got " + std::to_string(W));
  check::positive("conv1d_state_rows", "T_max", T_max);
  return W - 1 + T_max;
}

size_t conv1d_workspace_bytes(Conv1dOp op, int64_t B, int64_t T, int64_t dim, int64_t W,
                              const Exec& exec) {
  static constexpr const char* FN = "conv1d_workspace_bytes";
  check::require(op == Conv1dOp::update || op == Conv1dOp::prefill || op == Conv1dOp::commit, FN,
                 "op", "unknown operation");
  check::require(B >= 0, FN, "B", "expected B >= 0, got " + std::to_string(B));
  if (op == Conv1dOp::update) check::positive(FN, "T", T);
  check::positive(FN, "dim", dim);
  check::require(W >= 2, FN, "W", "expected W >= 2, got " + std::to_string(W));
  check::require(exec.backend == Backend::reference || exec.backend == Backend::cpu ||
                     exec.backend == Backend::cuda,
                 FN, "exec", "unknown backend");
  if (exec.backend != Backend::cpu) return 0;
  conv1d::Dims d;
  d.B = B;
  d.T = op == Conv1dOp::update ? T : 0;
  d.dim = dim;
  d.W = W;
  return conv1d::cpu::workspace_plan(op, d, cpu_threads(exec.num_threads)).bytes();
}

void conv1d_update(const Conv1dStep& step, const Tensor& conv_state, const Tensor& conv_pending,
                   const Tensor& num_accepted, const Exec& exec) {
  static constexpr const char* FN = "conv1d_update";
  conv1d::Dims d;
  check::shape(FN, "x", step.x, {ANY, ANY, ANY});
  check::dtype(FN, "x", step.x, FLOATS);
  check::inner_contiguous(FN, "x", step.x);
  d.B = step.x.shape[0];
  d.T = step.x.shape[1];
  d.dim = step.x.shape[2];
  check::positive(FN, "x", d.T);
  check::positive(FN, "x", d.dim);
  d.W = check_weights(FN, step.weight, step.bias, d.dim, step.x.dtype);
  check::index_vector(FN, "slot", step.slot, d.B);
  check::shape(FN, "out", step.out, {d.B, d.T, d.dim});
  check::same_dtype(FN, "out", step.out, "x", step.x.dtype);
  check::inner_contiguous(FN, "out", step.out);
  check_state(FN, conv_state, conv_pending, d);
  check::require(d.T <= d.T_max(), FN, "x",
                 "expected T <= T_max = " + std::to_string(d.T_max()) + " (conv_state rows " +
                     std::to_string(d.R) + " - (W - 1)), got T = " + std::to_string(d.T));
  if (num_accepted.defined()) {
    check::shape(FN, "num_accepted", num_accepted, {d.B});
    check::dtype(FN, "num_accepted", num_accepted, {DType::i32});
  }
  check_devices(FN, exec, {{"x", &step.x}, {"weight", &step.weight}, {"bias", &step.bias},
                           {"slot", &step.slot}, {"out", &step.out}, {"conv_state", &conv_state},
                           {"conv_pending", &conv_pending}, {"num_accepted", &num_accepted}});
  if (exec.backend == Backend::cuda) {
    check::require(d.W <= conv1d::CUDA_MAX_W, FN, "weight",
                   "expected W <= " + std::to_string(conv1d::CUDA_MAX_W) +
                       " on the cuda backend, got " + std::to_string(d.W));
    if (d.B == 0) return;
    conv1d::cuda::update(step, conv_state, conv_pending, num_accepted, d, exec);
    return;
  }
  check::slots(FN, "slot", step.slot, step.pad_slot_id, d.S, true);
  check_cursors_host(FN, step.slot, step.pad_slot_id, conv_pending, num_accepted, d);
  if (exec.backend == Backend::cpu)
    check_workspace(FN, exec, conv1d::cpu::workspace_plan(Conv1dOp::update, d, cpu_threads(exec.num_threads)));
  if (d.B == 0) return;
  if (exec.backend == Backend::reference)
    conv1d::reference::update(step, conv_state, conv_pending, num_accepted, d);
  else
    conv1d::cpu::update(step, conv_state, conv_pending, num_accepted, d, exec);
}

void conv1d_commit(const Tensor& conv_state, const Tensor& conv_pending, const Tensor& slot,
                   int64_t pad_slot_id, const Tensor& num_accepted, int64_t W, const Exec& exec) {
  static constexpr const char* FN = "conv1d_commit";
  conv1d::Dims d;
  check::require(W >= 2, FN, "W", "expected a kernel width W >= 2, got " + std::to_string(W));
  d.W = W;
  d.dim = ANY;
  check_state(FN, conv_state, conv_pending, d);
  d.dim = conv_state.shape[2];
  check::index_vector(FN, "slot", slot, ANY);
  d.B = slot.shape[0];
  check::shape(FN, "num_accepted", num_accepted, {d.B});
  check::dtype(FN, "num_accepted", num_accepted, {DType::i32});
  check_devices(FN, exec, {{"conv_state", &conv_state}, {"conv_pending", &conv_pending},
                           {"slot", &slot}, {"num_accepted", &num_accepted}});
  if (exec.backend == Backend::cuda) {
    if (d.B == 0) return;
    conv1d::cuda::commit(conv_state, conv_pending, slot, pad_slot_id, num_accepted, d, exec);
    return;
  }
  check::slots(FN, "slot", slot, pad_slot_id, d.S, true);
  check_cursors_host(FN, slot, pad_slot_id, conv_pending, num_accepted, d);
  if (exec.backend == Backend::cpu)
    check_workspace(FN, exec, conv1d::cpu::workspace_plan(Conv1dOp::commit, d, cpu_threads(exec.num_threads)));
  if (d.B == 0) return;
  if (exec.backend == Backend::reference)
    conv1d::reference::commit(conv_state, conv_pending, slot, pad_slot_id, num_accepted, d);
  else
    conv1d::cpu::commit(conv_state, conv_pending, slot, pad_slot_id, num_accepted, d, exec);
}

void conv1d_prefill(const Conv1dPrefill& p, const Tensor& conv_state, const Tensor& conv_pending,
                    const Exec& exec) {
  static constexpr const char* FN = "conv1d_prefill";
  conv1d::Dims d;
  check::shape(FN, "x", p.x, {ANY, ANY});
  check::dtype(FN, "x", p.x, FLOATS);
  check::inner_contiguous(FN, "x", p.x);
  d.tokens = p.x.shape[0];
  d.dim = p.x.shape[1];
  check::positive(FN, "x", d.dim);
  d.W = check_weights(FN, p.weight, p.bias, d.dim, p.x.dtype);
  check::index_vector(FN, "slot", p.slot, ANY);
  d.B = p.slot.shape[0];
  check::index_vector(FN, "cu_seqlens", p.cu_seqlens, d.B + 1);
  if (p.initial.defined()) {
    check::shape(FN, "initial", p.initial, {d.B});
    check::dtype(FN, "initial", p.initial, {DType::i32});
  }
  check::shape(FN, "out", p.out, {d.tokens, d.dim});
  check::same_dtype(FN, "out", p.out, "x", p.x.dtype);
  check::inner_contiguous(FN, "out", p.out);
  check_state(FN, conv_state, conv_pending, d);
  check_devices(FN, exec, {{"x", &p.x}, {"weight", &p.weight}, {"bias", &p.bias},
                           {"cu_seqlens", &p.cu_seqlens}, {"slot", &p.slot},
                           {"initial", &p.initial}, {"out", &p.out},
                           {"conv_state", &conv_state}, {"conv_pending", &conv_pending}});
  if (exec.backend == Backend::cuda) {
    check::require(d.W <= conv1d::CUDA_MAX_W, FN, "weight",
                   "expected W <= " + std::to_string(conv1d::CUDA_MAX_W) +
                       " on the cuda backend, got " + std::to_string(d.W));
    if (d.B == 0) return;
    conv1d::cuda::prefill(p, conv_state, conv_pending, d, exec);
    return;
  }
  // Host-visible row layout: cu_seqlens[0] = 0, non-decreasing, ending at tokens.
  int64_t prev = check::index_at(p.cu_seqlens, 0);
  check::require(prev == 0, FN, "cu_seqlens", "expected cu_seqlens[0] = 0, got " + std::to_string(prev));
  for (int64_t b = 1; b <= d.B; ++b) {
    const int64_t c = check::index_at(p.cu_seqlens, b);
    check::require(c >= prev, FN, "cu_seqlens",
                   "expected non-decreasing offsets, got " + std::to_string(c) + " after " +
                       std::to_string(prev) + " at index " + std::to_string(b));
    prev = c;
  }
  check::require(prev == d.tokens, FN, "cu_seqlens",
                 "expected cu_seqlens[B] = tokens = " + std::to_string(d.tokens) + ", got " +
                     std::to_string(prev));
  check::slots(FN, "slot", p.slot, p.pad_slot_id, d.S, true);
  if (p.initial.defined()) {
    for (int64_t b = 0; b < d.B; ++b) {
      const int64_t v = check::index_at(p.initial, b);
      check::require(v == 0 || v == 1, FN, "initial",
                     "expected 0 or 1, got " + std::to_string(v) + " at row " + std::to_string(b));
    }
  }
  if (exec.backend == Backend::cpu)
    check_workspace(FN, exec, conv1d::cpu::workspace_plan(Conv1dOp::prefill, d, cpu_threads(exec.num_threads)));
  if (d.B == 0) return;
  if (exec.backend == Backend::reference)
    conv1d::reference::prefill(p, conv_state, conv_pending, d);
  else
    conv1d::cpu::prefill(p, conv_state, conv_pending, d, exec);
}

}  // namespace replayssm
