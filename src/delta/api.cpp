// Public delta entry points: validate every argument, then dispatch to the
// reference / cpu / cuda backend (src/delta/backend.h) with filled Dims.
// Nothing is written before every check has passed.
#include <cmath>
#include <string>
#include <utility>
#include <vector>
#include <unordered_set>

#include "core/check.h"
#include "core/ring.h"
#include "core/slot_ops.h"
#include "core/workspace.h"
#include "core/parallel.h"
#include "delta/backend.h"
#include "delta/dual.h"
#include "delta/shared.h"

namespace replayssm {
namespace {

using check::ANY;
constexpr std::initializer_list<DType> FLOATS = {DType::f32, DType::f16, DType::bf16};

void check_family(const char* fn, DeltaFamily f) {
  check::require(f == DeltaFamily::gdn || f == DeltaFamily::kda, fn, "family", "expected gdn or kda");
}

void check_backend(const char* fn, const Exec& exec) {
  check::require(exec.backend == Backend::reference || exec.backend == Backend::cpu ||
                     exec.backend == Backend::cuda,
                 fn, "exec", "expected backend reference | cpu | cuda");
}

bool host_checks(const Exec& exec) { return exec.backend != Backend::cuda; }

// A tensor that must be present: device and unit inner stride.
void common(const char* fn, const char* arg, const Tensor& t, const Exec& exec) {
  check::present(fn, arg, t);
  check::device(fn, arg, t, exec);
  check::inner_contiguous(fn, arg, t);
}

void check_gating(const char* fn, const DeltaGating& g) {
  check::require(std::isfinite(g.q_scale), fn, "gating.q_scale", "expected a finite value");
}

// Per-token inputs, shared by steps ([B, T, ...]) and prefills ([tokens, ...]):
// `lead` holds the leading dims (B, T or tokens).
struct InputSpec {
  Tensor q, k, v, g, beta, A_log, dt_bias, o;
  DeltaGating gating;
};

void check_inputs(const char* fn, DeltaFamily f, const InputSpec& in,
                  std::initializer_list<int64_t> lead, delta::Dims& d, const Exec& exec) {
  const int nl = int(lead.size());
  common(fn, "q", in.q, exec);
  check::require(in.q.ndim == nl + 2, fn, "q", "expected " + std::to_string(nl + 2) +
                 " dimensions [.., H, K], got " + in.q.shape_str());
  check::dtype(fn, "q", in.q, FLOATS);
  d.H = in.q.shape[nl];
  d.K = in.q.shape[nl + 1];
  check::positive(fn, "q (H)", d.H);
  check::positive(fn, "q (K)", d.K);
  common(fn, "v", in.v, exec);
  check::require(in.v.ndim == nl + 2, fn, "v", "expected " + std::to_string(nl + 2) +
                 " dimensions [.., HV, V], got " + in.v.shape_str());
  d.HV = in.v.shape[nl];
  d.V = in.v.shape[nl + 1];
  check::positive(fn, "v (HV)", d.HV);
  check::positive(fn, "v (V)", d.V);
  check::require(d.HV % d.H == 0, fn, "v", "expected HV (" + std::to_string(d.HV) +
                 ") to be a multiple of H (" + std::to_string(d.H) + ")");
  auto with = [&](std::initializer_list<int64_t> tail) {
    std::vector<int64_t> v(lead);
    v.insert(v.end(), tail);
    return v;
  };
  auto shape = [&](const char* arg, const Tensor& t, const std::vector<int64_t>& dims) {
    check::present(fn, arg, t);
    std::string want = "[";
    bool ok = t.ndim == int(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) {
      want += (i ? ", " : "") + std::to_string(dims[i]);
      if (ok && t.shape[i] != dims[i]) ok = false;
    }
    want += "]";
    if (!ok) check::fail(fn, arg, "expected shape " + want + ", got " + t.shape_str());
  };
  const DType act = in.q.dtype;
  shape("q", in.q, with({d.H, d.K}));
  common(fn, "k", in.k, exec);
  shape("k", in.k, with({d.H, d.K}));
  check::same_dtype(fn, "k", in.k, "q", act);
  shape("v", in.v, with({d.HV, d.V}));
  check::same_dtype(fn, "v", in.v, "q", act);
  common(fn, "g", in.g, exec);
  shape("g", in.g, f == DeltaFamily::kda ? with({d.HV, d.K}) : with({d.HV}));
  check::dtype(fn, "g", in.g, {DType::f32, act});
  common(fn, "beta", in.beta, exec);
  shape("beta", in.beta, with({d.HV}));
  check::dtype(fn, "beta", in.beta, {DType::f32, act});
  if (in.gating.raw_gate) {
    common(fn, "A_log", in.A_log, exec);
    check::shape(fn, "A_log", in.A_log, {d.HV});
    check::dtype(fn, "A_log", in.A_log, {DType::f32});
  }
  if (in.dt_bias.defined()) {
    check::require(in.gating.raw_gate, fn, "dt_bias", "expected no dt_bias when gating.raw_gate is false");
    common(fn, "dt_bias", in.dt_bias, exec);
    if (f == DeltaFamily::kda) check::shape(fn, "dt_bias", in.dt_bias, {d.HV, d.K});
    else check::shape(fn, "dt_bias", in.dt_bias, {d.HV});
    check::dtype(fn, "dt_bias", in.dt_bias, {DType::f32});
  }
  common(fn, "o", in.o, exec);
  shape("o", in.o, with({d.HV, d.V}));
  check::same_dtype(fn, "o", in.o, "v", act);
  check_gating(fn, in.gating);
}

InputSpec spec_of(const DeltaStep& s) {
  return InputSpec{s.q, s.k, s.v, s.g, s.beta, s.A_log, s.dt_bias, s.o, s.gating};
}
InputSpec spec_of(const DeltaPrefill& p) {
  return InputSpec{p.q, p.k, p.v, p.g, p.beta, p.A_log, p.dt_bias, p.o, p.gating};
}

void check_step(const char* fn, DeltaFamily f, const DeltaStep& step, delta::Dims& d,
                const Exec& exec) {
  check_family(fn, f);
  check_backend(fn, exec);
  d.family = f;
  check::present(fn, "q", step.q);
  check::require(step.q.ndim == 4, fn, "q", "expected shape [B, T, H, K], got " + step.q.shape_str());
  d.B = step.q.shape[0];
  d.T = step.q.shape[1];
  check::positive(fn, "q (T)", d.T);
  check_inputs(fn, f, spec_of(step), {d.B, d.T}, d, exec);
}

void check_state(const char* fn, const char* arg, const Tensor& st, delta::Dims& d,
                 const Exec& exec) {
  common(fn, arg, st, exec);
  check::shape(fn, arg, st, {ANY, d.HV, d.V, d.K});
  check::dtype(fn, arg, st, FLOATS);
  if (exec.backend == Backend::cuda) check::aligned(fn, arg, st, 16);
  d.S = st.shape[0];
}

// Replay pool tensors (when rings are present, all must be; a baseline pool
// holds only `state`). `act` is the dtype of k (ANY-like when unknown: f32).
void check_pool(const char* fn, DeltaFamily f, const DeltaPool& pool, bool need_rings,
                bool know_h, delta::Dims& d, const Exec& exec, const DType* act) {
  check_state(fn, "pool.state", pool.state, d, exec);
  const bool any = pool.ring_d.defined() || pool.ring_k.defined() || pool.ring_ks.defined() ||
                   pool.ring_g.defined() || pool.cursor.defined();
  if (!need_rings && !any) return;
  const int64_t S = d.S;
  common(fn, "pool.ring_d", pool.ring_d, exec);
  check::require(pool.ring_d.ndim == 4, fn, "pool.ring_d",
                 "expected shape [S, R, HV, V], got " + pool.ring_d.shape_str());
  d.R = pool.ring_d.shape[1];
  const int64_t R = d.R;
  check::shape(fn, "pool.ring_d", pool.ring_d, {S, R, d.HV, d.V});
  check::dtype(fn, "pool.ring_d", pool.ring_d, FLOATS);
  common(fn, "pool.ring_k", pool.ring_k, exec);
  if (!know_h) {
    check::require(pool.ring_k.ndim == 4, fn, "pool.ring_k",
                   "expected shape [S, R, H, K], got " + pool.ring_k.shape_str());
    d.H = pool.ring_k.shape[2];
    check::positive(fn, "pool.ring_k (H)", d.H);
    check::require(d.HV % d.H == 0, fn, "pool.ring_k", "expected H to divide HV (" + std::to_string(d.HV) + ")");
  }
  check::shape(fn, "pool.ring_k", pool.ring_k, {S, R, d.H, d.K});
  if (act) check::same_dtype(fn, "pool.ring_k", pool.ring_k, "k", *act);
  else check::dtype(fn, "pool.ring_k", pool.ring_k, FLOATS);
  common(fn, "pool.ring_ks", pool.ring_ks, exec);
  check::shape(fn, "pool.ring_ks", pool.ring_ks, {S, R, d.H});
  check::dtype(fn, "pool.ring_ks", pool.ring_ks, {DType::f32});
  common(fn, "pool.ring_g", pool.ring_g, exec);
  if (f == DeltaFamily::kda) check::shape(fn, "pool.ring_g", pool.ring_g, {S, R, d.HV, d.K});
  else check::shape(fn, "pool.ring_g", pool.ring_g, {S, R, d.HV});
  check::dtype(fn, "pool.ring_g", pool.ring_g, {DType::f32});
  common(fn, "pool.cursor", pool.cursor, exec);
  check::shape(fn, "pool.cursor", pool.cursor, {S, CURSOR_FIELDS});
  check::dtype(fn, "pool.cursor", pool.cursor, {DType::i32});
  if (exec.backend == Backend::cuda) {
    check::aligned(fn, "pool.ring_d", pool.ring_d, int64_t(dtype_size(pool.ring_d.dtype)));  // read element-wise
    check::aligned(fn, "pool.ring_k", pool.ring_k, int64_t(dtype_size(pool.ring_k.dtype)));  // read element-wise
    check::aligned(fn, "pool.ring_ks", pool.ring_ks, int64_t(dtype_size(pool.ring_ks.dtype)));  // read element-wise
    check::aligned(fn, "pool.ring_g", pool.ring_g, int64_t(dtype_size(pool.ring_g.dtype)));  // read element-wise
  }
  check::require(pool.L >= 1, fn, "pool.L", "expected L >= 1, got " + std::to_string(pool.L));
  check::require(R >= pool.L + 1, fn, "pool.ring_d", "expected ring length R >= L + 1 = " +
                 std::to_string(pool.L + 1) + ", got " + std::to_string(R));
  d.L = pool.L;
}

// Cursor of slot s must satisfy 0 <= start < R, count, pending >= 0, count + pending <= L.
RingCursor checked_cursor(const char* fn, const DeltaPool& pool, const delta::Dims& d, int64_t s) {
  const RingCursor c{int32_t(check::index_at(pool.cursor, s, 0)), int32_t(check::index_at(pool.cursor, s, 1)),
                     int32_t(check::index_at(pool.cursor, s, 2))};
  const bool ok = c.start >= 0 && c.start < d.R && c.count >= 0 && c.pending >= 0 &&
                  int64_t(c.count) + c.pending <= d.L;
  check::require(ok, fn, "pool.cursor", "corrupt cursor of slot " + std::to_string(s) + ": {" +
                 std::to_string(c.start) + ", " + std::to_string(c.count) + ", " + std::to_string(c.pending) +
                 "} (R = " + std::to_string(d.R) + ", L = " + std::to_string(d.L) + ")");
  return c;
}

// Host checks of slots, cursors and accepted counts (cpu / reference backends).
// With `accepted` the pending records are committed (1 <= a <= pending);
// without it and `need_committed`, pending must be 0.
void check_rows(const char* fn, const DeltaPool& pool, const delta::Dims& d, const Tensor& slot,
                const char* slot_arg, int64_t pad, const Tensor& accepted, bool need_committed) {
  check::slots(fn, slot_arg, slot, pad, d.S, true);
  if (!pool.cursor.defined()) return;
  for (int64_t b = 0; b < slot.shape[0]; ++b) {
    const int64_t s = check::index_at(slot, b);
    if (s == pad) continue;
    const RingCursor c = checked_cursor(fn, pool, d, s);
    if (accepted.defined()) {
      const int64_t a = check::index_at(accepted, b);
      check::require(c.pending > 0, fn, "num_accepted", "row " + std::to_string(b) + " (slot " +
                     std::to_string(s) + ") has no pending records to commit");
      check::require(a >= 1 && a <= c.pending, fn, "num_accepted",
                     "expected accepted counts in [1, " + std::to_string(c.pending) + "], got " +
                         std::to_string(a) + " at row " + std::to_string(b));
    } else if (need_committed) {
      check::require(c.pending == 0, fn, "num_accepted", "row " + std::to_string(b) + " (slot " +
                     std::to_string(s) + ") has " + std::to_string(c.pending) +
                     " uncommitted records; pass num_accepted or call delta_commit");
    }
  }
}

// The caller's workspace fits `op` on dims d (cpu backend; others ignore it).
void check_cpu_workspace(const char* fn, SsmOp op, const delta::Dims& d, const Exec& exec) {
  if (exec.backend == Backend::cpu)
    check_workspace(fn, exec, delta::cpu::workspace_plan(op, d, cpu_threads(exec.num_threads)));
}

void check_index(const char* fn, const char* arg, const Tensor& t, int64_t n, const Exec& exec) {
  check::index_vector(fn, arg, t, n);
  check::device(fn, arg, t, exec);
}

#if !defined(REPLAYSSM_WITH_CUDA)
[[noreturn]] void no_cuda(const char* fn) {
  throw Error(fn, "exec", "this build of replayssm has no CUDA backend");
}
#endif

std::vector<Tensor> pool_tensors(const DeltaPool& p) {
  return {p.state, p.ring_d, p.ring_k, p.ring_ks, p.ring_g, p.cursor};
}

}  // namespace

using delta::Dims;

void delta_decode(DeltaFamily f, const DeltaStep& step, const Tensor& state, const Exec& exec) {
  const char* fn = "delta_decode";
  Dims d;
  check_step(fn, f, step, d, exec);
  check_state(fn, "state", state, d, exec);
  check_index(fn, "slot", step.slot, d.B, exec);
  if (host_checks(exec)) check::slots(fn, "slot", step.slot, step.pad_slot_id, d.S, true);
  check_cpu_workspace(fn, SsmOp::decode, d, exec);
  if (d.B == 0) return;
  switch (exec.backend) {
    case Backend::reference: delta::reference::decode(step, state, d); break;
    case Backend::cpu: delta::cpu::decode(step, state, d, exec); break;
    case Backend::cuda: delta::cuda::decode(step, state, d, exec); break;
  }
}

void delta_snapshot_decode(DeltaFamily f, const DeltaStep& step, const Tensor& state,
                           const Tensor& state_indices, const Tensor& num_accepted,
                           const Exec& exec) {
  const char* fn = "delta_snapshot_decode";
  Dims d;
  check_step(fn, f, step, d, exec);
  check_state(fn, "state", state, d, exec);
  check::shape(fn, "state_indices", state_indices, {d.B, d.T});
  check::dtype(fn, "state_indices", state_indices, {DType::i32, DType::i64});
  check::device(fn, "state_indices", state_indices, exec);
  if (num_accepted.defined()) check_index(fn, "num_accepted", num_accepted, d.B, exec);
  if (host_checks(exec)) {
    std::unordered_set<int64_t> seen;
    for (int64_t b = 0; b < d.B; ++b) {
      if (check::index_at(state_indices, b, 0) == step.pad_slot_id) continue;
      const int64_t a = num_accepted.defined() ? check::index_at(num_accepted, b) : 1;
      check::require(a >= 1 && a <= d.T, fn, "num_accepted", "expected accepted counts in [1, " +
                     std::to_string(d.T) + "], got " + std::to_string(a) + " at row " + std::to_string(b));
      check::require(check::index_at(state_indices, b, a - 1) != step.pad_slot_id, fn, "state_indices",
                     "row " + std::to_string(b) + " reads a pad entry");
      for (int64_t t = 0; t < d.T; ++t) {
        const int64_t s = check::index_at(state_indices, b, t);
        if (s == step.pad_slot_id) continue;
        check::require(s >= 0 && s < d.S, fn, "state_indices", "expected slot indices in [0, " +
                       std::to_string(d.S) + ") or the pad id, got " + std::to_string(s));
        check::require(seen.insert(s).second, fn, "state_indices",
                       "expected distinct slots, got slot " + std::to_string(s) + " twice");
      }
    }
  }
  check_cpu_workspace(fn, SsmOp::snapshot_decode, d, exec);
  if (d.B == 0) return;
  switch (exec.backend) {
    case Backend::reference: delta::reference::snapshot_decode(step, state, state_indices, num_accepted, d); break;
    case Backend::cpu: delta::cpu::snapshot_decode(step, state, state_indices, num_accepted, d, exec); break;
    case Backend::cuda: delta::cuda::snapshot_decode(step, state, state_indices, num_accepted, d, exec); break;
  }
}

void delta_prefill(DeltaFamily f, const DeltaPrefill& p, const DeltaPool& pool, const Exec& exec) {
  const bool dual = delta::dual::requested(pool);
  if (dual && exec.backend != Backend::cuda) return delta::dual::prefill(f, p, pool, exec);
  const char* fn = "delta_prefill";
  check_family(fn, f);
  check_backend(fn, exec);
  const QuantLayout copy = dual ? delta::dual::check_device_pool(fn, f, pool, false, exec) : QuantLayout{};
  Dims d;
  d.family = f;
  check::present(fn, "q", p.q);
  check::require(p.q.ndim == 3, fn, "q", "expected shape [tokens, H, K], got " + p.q.shape_str());
  d.tokens = p.q.shape[0];
  check_inputs(fn, f, spec_of(p), {d.tokens}, d, exec);
  check::present(fn, "cu_seqlens", p.cu_seqlens);
  check::require(p.cu_seqlens.ndim == 1 && p.cu_seqlens.shape[0] >= 1, fn, "cu_seqlens",
                 "expected shape [B + 1], got " + p.cu_seqlens.shape_str());
  d.B = p.cu_seqlens.shape[0] - 1;
  check_index(fn, "cu_seqlens", p.cu_seqlens, d.B + 1, exec);
  check_index(fn, "slot", p.slot, d.B, exec);
  if (p.initial.defined()) check_index(fn, "initial", p.initial, d.B, exec);
  const DType act = p.k.dtype;
  check_pool(fn, f, pool, false, true, d, exec, &act);
  if (host_checks(exec)) {
    check::require(check::index_at(p.cu_seqlens, 0) == 0, fn, "cu_seqlens", "expected cu_seqlens[0] = 0");
    for (int64_t b = 0; b < d.B; ++b)
      check::require(check::index_at(p.cu_seqlens, b + 1) >= check::index_at(p.cu_seqlens, b), fn,
                     "cu_seqlens", "expected non-decreasing offsets");
    check::require(check::index_at(p.cu_seqlens, d.B) == d.tokens, fn, "cu_seqlens",
                   "expected cu_seqlens[B] = tokens (" + std::to_string(d.tokens) + "), got " +
                       std::to_string(check::index_at(p.cu_seqlens, d.B)));
    check_rows(fn, pool, d, p.slot, "slot", p.pad_slot_id, Tensor{}, false);
  }
  check_cpu_workspace(fn, SsmOp::prefill, d, exec);
  if (d.B == 0) return;
  switch (exec.backend) {
    case Backend::reference: delta::reference::prefill(p, pool, d); break;
    case Backend::cpu: delta::cpu::prefill(p, pool, d, exec); break;
    case Backend::cuda:
      if (dual) delta::cuda::dual_prefill(p, pool, copy, d, exec);
      else delta::cuda::prefill(p, pool, d, exec);
      break;
  }
}

void delta_replay_step(DeltaFamily f, const DeltaStep& step, const DeltaPool& pool,
                       const Tensor& num_accepted, bool commit_all, const Exec& exec) {
  const bool dual = delta::dual::requested(pool);
  if (dual && exec.backend != Backend::cuda)
    return delta::dual::replay_step(f, step, pool, num_accepted, commit_all, exec);
  const char* fn = "delta_replay_step";
  Dims d;
  check_step(fn, f, step, d, exec);
  const DType act = step.k.dtype;
  check_pool(fn, f, pool, true, true, d, exec, &act);
  const QuantLayout copy = dual ? delta::dual::check_device_pool(fn, f, pool, true, exec) : QuantLayout{};
  if (dual) check::same_dtype(fn, "pool.ring_v", pool.ring_v, "v", step.v.dtype);
  check::require(d.T <= d.L, fn, "q", "expected T (" + std::to_string(d.T) + ") <= L (" +
                 std::to_string(d.L) + ")");
  check::require(d.R >= d.L + d.T, fn, "pool.ring_d", "expected ring length R >= L + T = " +
                 std::to_string(d.L + d.T) + ", got " + std::to_string(d.R));
  check_index(fn, "slot", step.slot, d.B, exec);
  if (num_accepted.defined()) check_index(fn, "num_accepted", num_accepted, d.B, exec);
  if (host_checks(exec)) check_rows(fn, pool, d, step.slot, "slot", step.pad_slot_id, num_accepted, true);
  check_cpu_workspace(fn, SsmOp::replay_step, d, exec);
  if (d.B == 0) return;
  switch (exec.backend) {
    case Backend::reference: delta::reference::replay_step(step, pool, num_accepted, commit_all, d); break;
    case Backend::cpu: delta::cpu::replay_step(step, pool, num_accepted, commit_all, d, exec); break;
    case Backend::cuda:
      if (dual) delta::cuda::dual_replay_step(step, pool, copy, num_accepted, commit_all, d, exec);
      else delta::cuda::replay_step(step, pool, num_accepted, commit_all, d, exec);
      break;
  }
}

// Pool-only operations: dims from the pool itself.
static void check_pool_op(const char* fn, DeltaFamily f, const DeltaPool& pool, bool need_rings,
                          Dims& d, const Exec& exec) {
  check_family(fn, f);
  check_backend(fn, exec);
  d.family = f;
  common(fn, "pool.state", pool.state, exec);
  check::require(pool.state.ndim == 4, fn, "pool.state",
                 "expected shape [S, HV, V, K], got " + pool.state.shape_str());
  d.HV = pool.state.shape[1];
  d.V = pool.state.shape[2];
  d.K = pool.state.shape[3];
  d.H = d.HV;
  check_pool(fn, f, pool, need_rings, false, d, exec, nullptr);
}

void delta_commit(DeltaFamily f, const DeltaPool& pool, const Tensor& slot, int64_t pad_slot_id,
                  const Tensor& num_accepted, const Exec& exec) {
  const char* fn = "delta_commit";
  Dims d;
  check_pool_op(fn, f, pool, true, d, exec);
  check::present(fn, "slot", slot);
  check::require(slot.ndim == 1, fn, "slot", "expected shape [n], got " + slot.shape_str());
  check_index(fn, "slot", slot, slot.shape[0], exec);
  check::present(fn, "num_accepted", num_accepted);
  check_index(fn, "num_accepted", num_accepted, slot.shape[0], exec);
  if (host_checks(exec)) check_rows(fn, pool, d, slot, "slot", pad_slot_id, num_accepted, false);
  d.B = slot.shape[0];
  check_cpu_workspace(fn, SsmOp::commit, d, exec);
  if (d.B == 0) return;
  switch (exec.backend) {
    case Backend::reference: delta::reference::commit(pool, slot, pad_slot_id, num_accepted, d); break;
    case Backend::cpu: delta::cpu::commit(pool, slot, pad_slot_id, num_accepted, d, exec); break;
    case Backend::cuda: delta::cuda::commit(pool, slot, pad_slot_id, num_accepted, d, exec); break;
  }
}

void delta_materialize(DeltaFamily f, const DeltaPool& pool, const Tensor& slot,
                       int64_t pad_slot_id, const Tensor& out, const Exec& exec) {
  const bool dual = delta::dual::requested(pool);
  if (dual && exec.backend != Backend::cuda) return delta::dual::materialize(f, pool, slot, pad_slot_id, out, exec);
  const char* fn = "delta_materialize";
  Dims d;
  check_pool_op(fn, f, pool, false, d, exec);
  const QuantLayout copy = dual ? delta::dual::check_device_pool(fn, f, pool, false, exec) : QuantLayout{};
  check::present(fn, "slot", slot);
  check::require(slot.ndim == 1, fn, "slot", "expected shape [n], got " + slot.shape_str());
  check_index(fn, "slot", slot, slot.shape[0], exec);
  d.B = slot.shape[0];
  common(fn, "out", out, exec);
  check::shape(fn, "out", out, {d.B, d.HV, d.V, d.K});
  check::dtype(fn, "out", out, {DType::f32, DType::f16, DType::bf16, DType::f64});
  if (host_checks(exec)) {
    check::slots(fn, "slot", slot, pad_slot_id, d.S, false);
    if (pool.cursor.defined())
      for (int64_t b = 0; b < d.B; ++b)
        if (check::index_at(slot, b) != pad_slot_id) checked_cursor(fn, pool, d, check::index_at(slot, b));
  }
  check_cpu_workspace(fn, SsmOp::materialize, d, exec);
  if (d.B == 0) return;
  switch (exec.backend) {
    case Backend::reference: delta::reference::materialize(pool, slot, pad_slot_id, out, d); break;
    case Backend::cpu: delta::cpu::materialize(pool, slot, pad_slot_id, out, d, exec); break;
    case Backend::cuda:
      if (dual) delta::cuda::dual_materialize(pool, copy, slot, pad_slot_id, out, d, exec);
      else delta::cuda::materialize(pool, slot, pad_slot_id, out, d, exec);
      break;
  }
}

void delta_flush(DeltaFamily f, const DeltaPool& pool, const Tensor& slot, int64_t pad_slot_id,
                 const Exec& exec) {
  const bool dual = delta::dual::requested(pool);
  if (dual && exec.backend != Backend::cuda) return delta::dual::flush(f, pool, slot, pad_slot_id, exec);
  const char* fn = "delta_flush";
  Dims d;
  check_pool_op(fn, f, pool, true, d, exec);
  const QuantLayout copy = dual ? delta::dual::check_device_pool(fn, f, pool, true, exec) : QuantLayout{};
  check::present(fn, "slot", slot);
  check::require(slot.ndim == 1, fn, "slot", "expected shape [n], got " + slot.shape_str());
  check_index(fn, "slot", slot, slot.shape[0], exec);
  d.B = slot.shape[0];
  if (host_checks(exec)) check_rows(fn, pool, d, slot, "slot", pad_slot_id, Tensor{}, true);
  check_cpu_workspace(fn, SsmOp::flush, d, exec);
  if (d.B == 0) return;
  switch (exec.backend) {
    case Backend::reference: delta::reference::flush(pool, slot, pad_slot_id, d); break;
    case Backend::cpu: delta::cpu::flush(pool, slot, pad_slot_id, d, exec); break;
    case Backend::cuda:
      if (dual) delta::cuda::dual_flush(pool, copy, slot, pad_slot_id, d, exec);
      else delta::cuda::flush(pool, slot, pad_slot_id, d, exec);
      break;
  }
}

void delta_copy_slot(DeltaFamily f, const DeltaPool& pool, const Tensor& src, const Tensor& dst,
                     int64_t pad_slot_id, const Exec& exec) {
  if (delta::dual::requested(pool)) return delta::dual::copy_slot(f, pool, src, dst, pad_slot_id, exec);
  const char* fn = "delta_copy_slot";
  Dims d;
  check_pool_op(fn, f, pool, false, d, exec);
  check::present(fn, "src", src);
  check::require(src.ndim == 1, fn, "src", "expected shape [n], got " + src.shape_str());
  check_index(fn, "src", src, src.shape[0], exec);
  check_index(fn, "dst", dst, src.shape[0], exec);
  if (host_checks(exec)) {
    check::slots(fn, "src", src, pad_slot_id, d.S, false);
    check::slots(fn, "dst", dst, pad_slot_id, d.S, true);
    std::unordered_set<int64_t> sources;
    for (int64_t i = 0; i < src.shape[0]; ++i) {
      const int64_t s = check::index_at(src, i), t = check::index_at(dst, i);
      if (s != pad_slot_id && t != pad_slot_id && s != t) sources.insert(s);
    }
    for (int64_t i = 0; i < dst.shape[0]; ++i) {
      const int64_t s = check::index_at(src, i), t = check::index_at(dst, i);
      check::require(s == t || t == pad_slot_id || s == pad_slot_id || !sources.count(t), fn, "dst",
                     "slot " + std::to_string(t) + " is both a copy source and a destination");
    }
  }
  if (src.shape[0] == 0) return;
  if (exec.backend == Backend::cuda) {
#if defined(REPLAYSSM_WITH_CUDA)
    slot_ops::copy_cuda(pool_tensors(pool), src, dst, pad_slot_id, exec);
#else
    no_cuda(fn);
#endif
  } else {
    slot_ops::copy_cpu(pool_tensors(pool), src, dst, pad_slot_id);
  }
}

void delta_reset_slot(DeltaFamily f, const DeltaPool& pool, const Tensor& slot,
                      int64_t pad_slot_id, const Exec& exec) {
  if (delta::dual::requested(pool)) return delta::dual::reset_slot(f, pool, slot, pad_slot_id, exec);
  const char* fn = "delta_reset_slot";
  Dims d;
  check_pool_op(fn, f, pool, false, d, exec);
  check::present(fn, "slot", slot);
  check::require(slot.ndim == 1, fn, "slot", "expected shape [n], got " + slot.shape_str());
  check_index(fn, "slot", slot, slot.shape[0], exec);
  if (host_checks(exec)) check::slots(fn, "slot", slot, pad_slot_id, d.S, false);
  if (slot.shape[0] == 0) return;
  if (exec.backend == Backend::cuda) {
#if defined(REPLAYSSM_WITH_CUDA)
    slot_ops::zero_cuda(pool_tensors(pool), slot, pad_slot_id, exec);
#else
    no_cuda(fn);
#endif
  } else {
    slot_ops::zero_cpu(pool_tensors(pool), slot, pad_slot_id);
  }
}

int64_t delta_ring_length(int64_t L, int64_t T_max) {
  check::positive("delta_ring_length", "L", L);
  check::positive("delta_ring_length", "T_max", T_max);
  check::require(T_max <= L, "delta_ring_length", "T_max", "expected T_max <= L");
  return L + T_max;
}

static void check_shape_arg(const char* fn, const DeltaShape& s) {
  check::positive(fn, "shape.H", s.H);
  check::positive(fn, "shape.HV", s.HV);
  check::positive(fn, "shape.K", s.K);
  check::positive(fn, "shape.V", s.V);
  check::require(s.HV % s.H == 0, fn, "shape.HV", "expected a multiple of H");
}

int64_t delta_replay_bytes_per_row(DeltaFamily f, const DeltaShape& s, DType state, DType act,
                                   DType d_dtype, int64_t L, int64_t T_max) {
  const char* fn = "delta_replay_bytes_per_row";
  check_family(fn, f);
  check_shape_arg(fn, s);
  for (auto [arg, dt] : {std::pair{"state", state}, {"act", act}, {"d_dtype", d_dtype}})
    check::require(dt == DType::f32 || dt == DType::f16 || dt == DType::bf16, fn, arg,
                   "expected fp32 | fp16 | bf16");
  const int64_t R = delta_ring_length(L, T_max);
  const int64_t gate = (f == DeltaFamily::kda ? s.HV * s.K : s.HV) * 4;
  const int64_t record = s.HV * s.V * int64_t(dtype_size(d_dtype)) + s.H * s.K * int64_t(dtype_size(act)) +
                         s.H * 4 + gate;
  return s.HV * s.V * s.K * int64_t(dtype_size(state)) + R * record + CURSOR_FIELDS * 4;
}

size_t delta_workspace_bytes(DeltaFamily f, SsmOp op, const DeltaShape& s, int64_t B, int64_t T,
                             int64_t L, const Exec& exec) {
  const char* fn = "delta_workspace_bytes";
  check_family(fn, f);
  check_backend(fn, exec);
  check_shape_arg(fn, s);
  check::require(op >= SsmOp::decode && op <= SsmOp::reset_slot, fn, "op", "unknown operation");
  check::require(B >= 0, fn, "B", "expected B >= 0, got " + std::to_string(B));
  check::require(L >= 0, fn, "L", "expected L >= 0, got " + std::to_string(L));
  const bool steps = op == SsmOp::decode || op == SsmOp::snapshot_decode || op == SsmOp::replay_step;
  if (steps) check::positive(fn, "T", T);
  if (exec.backend == Backend::reference) return 0;
  Dims d;
  d.family = f;
  d.B = B;
  d.T = steps ? T : 0;
  d.H = s.H;
  d.HV = s.HV;
  d.K = s.K;
  d.V = s.V;
  d.L = L;
  if (exec.backend == Backend::cuda) return delta::cuda::workspace_bytes(op, d);
  return delta::cpu::workspace_plan(op, d, cpu_threads(exec.num_threads)).bytes();
}

int64_t delta_snapshot_bytes_per_row(const DeltaShape& s, DType state, int64_t T_max) {
  const char* fn = "delta_snapshot_bytes_per_row";
  check_shape_arg(fn, s);
  check::positive(fn, "T_max", T_max);
  check::require(state == DType::f32 || state == DType::f16 || state == DType::bf16, fn, "state",
                 "expected fp32 | fp16 | bf16");
  return T_max * s.HV * s.V * s.K * int64_t(dtype_size(state));
}

// Validation hook of the shared-quantised mode (delta/shared.h).
delta::Dims delta::check_decode_step(const char* fn, DeltaFamily f, const DeltaStep& step,
                                     const Exec& exec) {
  Dims d;
  check_step(fn, f, step, d, exec);
  check_index(fn, "slot", step.slot, d.B, exec);
  return d;
}

}  // namespace replayssm
