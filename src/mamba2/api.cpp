// Public Mamba-2 entry points: validate every argument, then dispatch to the
// backend named by Exec. Nothing is written before validation completes; on
// the CPU backends that includes slot ranges, distinctness, cursors and
// accepted counts (the cuda backend reports those through device_status).
#include <string>
#include <vector>

#include "core/check.h"
#include "core/parallel.h"
#include "core/ring.h"
#include "core/slot_ops.h"
#include "core/workspace.h"
#include "mamba2/backend.h"
#include "mamba2/dual.h"
#include "mamba2/shared.h"
#include "replayssm/mamba2.h"

namespace replayssm {
namespace {

using check::ANY;
constexpr std::initializer_list<DType> FLOAT3 = {DType::f32, DType::f16, DType::bf16};

bool host_checks(const Exec& e) { return e.backend != Backend::cuda; }

// Present tensor: shape, dtype set, device, unit inner stride.
void tensor(const char* fn, const char* arg, const Tensor& t, std::initializer_list<int64_t> dims,
            std::initializer_list<DType> dtypes, const Exec& exec) {
  check::shape(fn, arg, t, dims);
  check::dtype(fn, arg, t, dtypes);
  check::device(fn, arg, t, exec);
  check::inner_contiguous(fn, arg, t);
}
void optional(const char* fn, const char* arg, const Tensor& t, std::initializer_list<int64_t> dims,
              std::initializer_list<DType> dtypes, const Exec& exec) {
  if (t.defined()) tensor(fn, arg, t, dims, dtypes, exec);
}

// Dimensions first..ndim-1 of t are positive.
void positive_dims(const char* fn, const char* arg, const Tensor& t, int first) {
  for (int i = first; i < t.ndim; ++i)
    if (t.shape[i] <= 0)
      check::fail(fn, arg, "expected positive dimensions after the first " +
                               std::to_string(first) + ", got shape " + t.shape_str());
}

void check_exec(const char* fn, const Exec& exec) {
  check::require(exec.backend == Backend::reference || exec.backend == Backend::cpu ||
                     exec.backend == Backend::cuda,
                 fn, "exec", "unknown backend");
}

// The per-head parameters shared by step and prefill.
void check_params(const char* fn, const Tensor& A, const Tensor& dt_bias, const Tensor& D,
                  int64_t H, const Exec& exec) {
  tensor(fn, "A", A, {H}, {DType::f32}, exec);
  optional(fn, "dt_bias", dt_bias, {H}, {DType::f32}, exec);
  optional(fn, "D", D, {H}, {DType::f32}, exec);
}

// Shapes and dtypes of a step; fills B, T, H, P, G, N.
void check_step(const char* fn, const Mamba2Step& s, const Exec& exec, mamba2::Dims& d) {
  check::shape(fn, "x", s.x, {ANY, ANY, ANY, ANY});
  check::dtype(fn, "x", s.x, FLOAT3);
  check::shape(fn, "Bm", s.Bm, {s.x.shape[0], s.x.shape[1], ANY, ANY});
  d.B = s.x.shape[0];
  d.T = s.x.shape[1];
  d.H = s.x.shape[2];
  d.P = s.x.shape[3];
  d.G = s.Bm.shape[2];
  d.N = s.Bm.shape[3];
  check::positive(fn, "x", d.T);
  positive_dims(fn, "x", s.x, 1);
  positive_dims(fn, "Bm", s.Bm, 2);
  check::require(d.H % d.G == 0, fn, "Bm",
                 "expected the group count G = " + std::to_string(d.G) +
                     " to divide the head count H = " + std::to_string(d.H));
  const DType act = s.x.dtype;
  tensor(fn, "x", s.x, {d.B, d.T, d.H, d.P}, FLOAT3, exec);
  tensor(fn, "dt", s.dt, {d.B, d.T, d.H}, {DType::f32, act}, exec);
  tensor(fn, "Bm", s.Bm, {d.B, d.T, d.G, d.N}, {act}, exec);
  tensor(fn, "Cm", s.Cm, {d.B, d.T, d.G, d.N}, {act}, exec);
  optional(fn, "z", s.z, {d.B, d.T, d.H, d.P}, {act}, exec);
  check_params(fn, s.A, s.dt_bias, s.D, d.H, exec);
  tensor(fn, "y", s.y, {d.B, d.T, d.H, d.P}, {act}, exec);
}

// A replay pool has all of ring_x, ring_dt, ring_B, cursor; a baseline pool none.
bool has_ring(const char* fn, const Mamba2Pool& pool) {
  const int n = int(pool.ring_x.defined()) + int(pool.ring_dt.defined()) +
                int(pool.ring_B.defined()) + int(pool.cursor.defined());
  check::require(n == 0 || n == 4, fn, "pool",
                 "expected either all of ring_x, ring_dt, ring_B, cursor (a replay pool) or none "
                 "(a baseline pool)");
  return n == 4;
}

// The state tensor of a pool with head shape H, P, N (ANY where unknown).
void check_state(const char* fn, const char* arg, const Tensor& state, int64_t H, int64_t P,
                 int64_t N, const Exec& exec) {
  tensor(fn, arg, state, {ANY, H, P, N}, FLOAT3, exec);
  positive_dims(fn, arg, state, 1);
  if (exec.backend == Backend::cuda) check::aligned(fn, arg, state, 16);
}

// Pool validation. `act` is the dtype records must have (absent: any float
// dtype, ring_B matching ring_x). G = ANY when not known from a step.
// Fills S, H, P, N, L, R and (from ring_B) G.
bool check_pool(const char* fn, const Mamba2Pool& pool, const Exec& exec, mamba2::Dims& d,
                bool need_ring, const DType* act) {
  check_state(fn, "state", pool.state, d.H ? d.H : ANY, d.P ? d.P : ANY, d.N ? d.N : ANY, exec);
  d.S = pool.state.shape[0];
  d.H = pool.state.shape[1];
  d.P = pool.state.shape[2];
  d.N = pool.state.shape[3];
  const bool ring = has_ring(fn, pool);
  if (need_ring && !ring)
    check::fail(fn, "pool", "expected a replay pool (ring_x, ring_dt, ring_B and cursor), got a "
                            "baseline pool with only 'state'");
  if (!ring) return false;
  check::shape(fn, "ring_x", pool.ring_x, {d.S, ANY, d.H, d.P});
  d.R = pool.ring_x.shape[1];
  if (act) {
    tensor(fn, "ring_x", pool.ring_x, {d.S, d.R, d.H, d.P}, {*act}, exec);
  } else {
    tensor(fn, "ring_x", pool.ring_x, {d.S, d.R, d.H, d.P}, FLOAT3, exec);
  }
  tensor(fn, "ring_dt", pool.ring_dt, {d.S, d.R, d.H}, {DType::f32}, exec);
  check::shape(fn, "ring_B", pool.ring_B, {d.S, d.R, d.G ? d.G : ANY, d.N});
  if (!d.G) {
    d.G = pool.ring_B.shape[2];
    check::require(d.G > 0 && d.H % d.G == 0, fn, "ring_B",
                   "expected the group count G = " + std::to_string(d.G) +
                       " to divide the head count H = " + std::to_string(d.H));
  }
  tensor(fn, "ring_B", pool.ring_B, {d.S, d.R, d.G, d.N}, {pool.ring_x.dtype}, exec);
  tensor(fn, "cursor", pool.cursor, {d.S, CURSOR_FIELDS}, {DType::i32}, exec);
  check::require(pool.L >= 1, fn, "L", "expected L >= 1, got " + std::to_string(pool.L));
  check::require(d.R > pool.L, fn, "ring_x",
                 "expected a ring of R >= L + 1 = " + std::to_string(pool.L + 1) +
                     " entries (ring too short), got R = " + std::to_string(d.R));
  d.L = pool.L;
  if (exec.backend == Backend::cuda) {
    check::aligned(fn, "ring_x", pool.ring_x, int64_t(dtype_size(pool.ring_x.dtype)));  // read element-wise
    check::aligned(fn, "ring_dt", pool.ring_dt, int64_t(dtype_size(pool.ring_dt.dtype)));  // read element-wise
    check::aligned(fn, "ring_B", pool.ring_B, int64_t(dtype_size(pool.ring_B.dtype)));  // read element-wise
  }
  return true;
}

RingCursor read_cursor(const Tensor& cursor, int64_t slot) {
  const auto* c = static_cast<const int32_t*>(cursor.data) + slot * cursor.stride[0];
  return RingCursor{c[0], c[1], c[2]};
}

// Cursor sanity of one slot (cpu backends).
RingCursor checked_cursor(const char* fn, const Tensor& cursor, int64_t slot, const mamba2::Dims& d) {
  RingCursor c = read_cursor(cursor, slot);
  const bool ok = c.start >= 0 && c.start < d.R && c.count >= 0 && c.count <= d.L &&
                  c.pending >= 0 && c.pending <= d.R;
  if (!ok)
    check::fail(fn, "cursor",
                "corrupt cursor of slot " + std::to_string(slot) + ": {start " +
                    std::to_string(c.start) + ", count " + std::to_string(c.count) + ", pending " +
                    std::to_string(c.pending) + "}, expected 0 <= start < R = " +
                    std::to_string(d.R) + ", 0 <= count <= L = " + std::to_string(d.L) +
                    ", 0 <= pending <= R");
  return c;
}

// Commit checks of row b (cpu backends): 1 <= accepted <= pending and the
// committed history stays within L.
RingCursor checked_commit(const char* fn, RingCursor c, int64_t slot, int64_t accepted,
                          const mamba2::Dims& d) {
  if (c.pending == 0)
    check::fail(fn, "num_accepted",
                "slot " + std::to_string(slot) +
                    " has no pending records to commit (pass num_accepted only for rows whose "
                    "previous step left pending records)");
  if (accepted < 1 || accepted > c.pending)
    check::fail(fn, "num_accepted",
                "expected an accepted count in [1, " + std::to_string(c.pending) + "] for slot " +
                    std::to_string(slot) + ", got " + std::to_string(accepted));
  if (c.count + accepted > d.L)
    check::fail(fn, "num_accepted",
                "ring overflow: slot " + std::to_string(slot) + " would hold " +
                    std::to_string(c.count + accepted) + " committed records, L = " +
                    std::to_string(d.L));
  ring_commit(c, int32_t(accepted));
  return c;
}

void check_num_accepted(const char* fn, const Tensor& t, int64_t n, const Exec& exec) {
  tensor(fn, "num_accepted", t, {n}, {DType::i32}, exec);
}
void check_slot(const char* fn, const char* arg, const Tensor& t, int64_t n, const Exec& exec) {
  check::index_vector(fn, arg, t, n);
  check::device(fn, arg, t, exec);
  check::inner_contiguous(fn, arg, t);
}
void check_slot_any(const char* fn, const char* arg, const Tensor& t, const Exec& exec) {
  check::shape(fn, arg, t, {ANY});
  check_slot(fn, arg, t, t.shape[0], exec);
}

int threads(const Exec& e) { return cpu_threads(e.num_threads); }

[[noreturn]] void unknown_backend(const char* fn) { check::fail(fn, "exec", "unknown backend"); }

}  // namespace

void mamba2_decode(const Mamba2Step& step, const Tensor& state, const Exec& exec) {
  const char* fn = "mamba2_decode";
  check_exec(fn, exec);
  mamba2::Dims d;
  check_step(fn, step, exec, d);
  check_state(fn, "state", state, d.H, d.P, d.N, exec);
  d.S = state.shape[0];
  check_slot(fn, "slot", step.slot, d.B, exec);
  if (host_checks(exec)) check::slots(fn, "slot", step.slot, step.pad_slot_id, d.S, true);
  switch (exec.backend) {
    case Backend::reference: return mamba2::reference::decode(step, state, d);
    case Backend::cpu:
      check_workspace(fn, exec, mamba2::cpu::workspace_plan(SsmOp::decode, d, threads(exec)));
      return mamba2::cpu::decode(step, state, d, exec);
    case Backend::cuda: return mamba2::cuda::decode(step, state, d, exec);
  }
  unknown_backend(fn);
}

void mamba2_snapshot_decode(const Mamba2Step& step, const Tensor& state,
                            const Tensor& state_indices, const Tensor& num_accepted,
                            const Exec& exec) {
  const char* fn = "mamba2_snapshot_decode";
  check_exec(fn, exec);
  mamba2::Dims d;
  check_step(fn, step, exec, d);
  check_state(fn, "state", state, d.H, d.P, d.N, exec);
  d.S = state.shape[0];
  tensor(fn, "state_indices", state_indices, {d.B, d.T}, {DType::i32, DType::i64}, exec);
  if (num_accepted.defined()) check_num_accepted(fn, num_accepted, d.B, exec);
  if (!host_checks(exec)) return mamba2::cuda::snapshot_decode(step, state, state_indices,
                                                               num_accepted, d, exec);
  // Every slot a non-pad row touches is in range and written by that row only.
  std::vector<char> used(size_t(d.S), 0);
  for (int64_t b = 0; b < d.B; ++b) {
    if (check::index_at(state_indices, b, 0) == step.pad_slot_id) continue;
    for (int64_t t = 0; t < d.T; ++t) {
      const int64_t s = check::index_at(state_indices, b, t);
      check::require(s >= 0 && s < d.S, fn, "state_indices",
                     "expected slot indices in [0, " + std::to_string(d.S) + "), got " +
                         std::to_string(s) + " at [" + std::to_string(b) + ", " +
                         std::to_string(t) + "]");
      check::require(!used[size_t(s)], fn, "state_indices",
                     "expected distinct slots, got slot " + std::to_string(s) + " twice");
      used[size_t(s)] = 1;
    }
    if (num_accepted.defined()) {
      const int64_t a = check::index_at(num_accepted, b);
      check::require(a >= 1 && a <= d.T, fn, "num_accepted",
                     "expected an accepted count in [1, " + std::to_string(d.T) + "] at row " +
                         std::to_string(b) + ", got " + std::to_string(a));
    }
  }
  if (exec.backend == Backend::reference)
    return mamba2::reference::snapshot_decode(step, state, state_indices, num_accepted, d);
  check_workspace(fn, exec, mamba2::cpu::workspace_plan(SsmOp::snapshot_decode, d, threads(exec)));
  return mamba2::cpu::snapshot_decode(step, state, state_indices, num_accepted, d, exec);
}

void mamba2_prefill(const Mamba2Prefill& p, const Mamba2Pool& pool, const Exec& exec) {
  if (mamba2::dual::host_dual(pool, exec)) return mamba2::dual::prefill(p, pool, exec);
  const char* fn = "mamba2_prefill";
  check_exec(fn, exec);
  check::shape(fn, "x", p.x, {ANY, ANY, ANY});
  check::dtype(fn, "x", p.x, FLOAT3);
  check::shape(fn, "Bm", p.Bm, {p.x.shape[0], ANY, ANY});
  mamba2::Dims d;
  d.tokens = p.x.shape[0];
  d.H = p.x.shape[1];
  d.P = p.x.shape[2];
  d.G = p.Bm.shape[1];
  d.N = p.Bm.shape[2];
  positive_dims(fn, "x", p.x, 1);
  positive_dims(fn, "Bm", p.Bm, 1);
  check::require(d.H % d.G == 0, fn, "Bm",
                 "expected the group count G = " + std::to_string(d.G) +
                     " to divide the head count H = " + std::to_string(d.H));
  const DType act = p.x.dtype;
  tensor(fn, "x", p.x, {d.tokens, d.H, d.P}, FLOAT3, exec);
  tensor(fn, "dt", p.dt, {d.tokens, d.H}, {DType::f32, act}, exec);
  tensor(fn, "Bm", p.Bm, {d.tokens, d.G, d.N}, {act}, exec);
  tensor(fn, "Cm", p.Cm, {d.tokens, d.G, d.N}, {act}, exec);
  optional(fn, "z", p.z, {d.tokens, d.H, d.P}, {act}, exec);
  check_params(fn, p.A, p.dt_bias, p.D, d.H, exec);
  tensor(fn, "y", p.y, {d.tokens, d.H, d.P}, {act}, exec);
  check::shape(fn, "cu_seqlens", p.cu_seqlens, {ANY});
  check::require(p.cu_seqlens.shape[0] >= 1, fn, "cu_seqlens", "expected shape [B + 1], got [0]");
  d.B = p.cu_seqlens.shape[0] - 1;
  tensor(fn, "cu_seqlens", p.cu_seqlens, {d.B + 1}, {DType::i32, DType::i64}, exec);
  check_slot(fn, "slot", p.slot, d.B, exec);
  optional(fn, "initial", p.initial, {d.B}, {DType::i32}, exec);
  const bool ring = check_pool(fn, pool, exec, d, false, &act);
  if (!host_checks(exec)) {
    if (mamba2::dual::requested(pool)) mamba2::dual::check_device_copy(fn, pool);
    return mamba2::cuda::prefill(p, pool, d, exec);
  }
  check::require(check::index_at(p.cu_seqlens, 0) == 0, fn, "cu_seqlens",
                 "expected cu_seqlens[0] = 0");
  for (int64_t b = 0; b < d.B; ++b)
    check::require(check::index_at(p.cu_seqlens, b + 1) >= check::index_at(p.cu_seqlens, b), fn,
                   "cu_seqlens", "expected non-decreasing offsets (at " + std::to_string(b + 1) + ")");
  check::require(check::index_at(p.cu_seqlens, d.B) == d.tokens, fn, "cu_seqlens",
                 "expected cu_seqlens[B] = tokens = " + std::to_string(d.tokens) + ", got " +
                     std::to_string(check::index_at(p.cu_seqlens, d.B)));
  check::slots(fn, "slot", p.slot, p.pad_slot_id, d.S, true);
  for (int64_t b = 0; b < d.B; ++b) {
    const int64_t s = check::index_at(p.slot, b);
    if (s == p.pad_slot_id) continue;
    if (p.initial.defined()) {
      const int64_t f = check::index_at(p.initial, b);
      check::require(f == 0 || f == 1, fn, "initial",
                     "expected 0 or 1, got " + std::to_string(f) + " at row " + std::to_string(b));
    }
    if (ring) checked_cursor(fn, pool.cursor, s, d);
  }
  if (exec.backend == Backend::reference) return mamba2::reference::prefill(p, pool, d);
  check_workspace(fn, exec, mamba2::cpu::workspace_plan(SsmOp::prefill, d, threads(exec)));
  return mamba2::cpu::prefill(p, pool, d, exec);
}

void mamba2_replay_step(const Mamba2Step& step, const Mamba2Pool& pool,
                        const Tensor& num_accepted, bool commit_all, const Exec& exec) {
  if (mamba2::dual::host_dual(pool, exec))
    return mamba2::dual::replay_step(step, pool, num_accepted, commit_all, exec);
  const char* fn = "mamba2_replay_step";
  check_exec(fn, exec);
  mamba2::Dims d;
  check_step(fn, step, exec, d);
  const DType act = step.x.dtype;
  check_pool(fn, pool, exec, d, true, &act);
  check::require(d.T <= d.L, fn, "L",
                 "expected T <= L, got T = " + std::to_string(d.T) + ", L = " + std::to_string(d.L));
  check::require(d.R >= d.L + d.T, fn, "ring_x",
                 "expected a ring of R >= L + T = " + std::to_string(d.L + d.T) +
                     " entries (ring too short), got R = " + std::to_string(d.R));
  check_slot(fn, "slot", step.slot, d.B, exec);
  if (num_accepted.defined()) check_num_accepted(fn, num_accepted, d.B, exec);
  if (!host_checks(exec)) {
    if (mamba2::dual::requested(pool)) mamba2::dual::check_device_copy(fn, pool);
    return mamba2::cuda::replay_step(step, pool, num_accepted, commit_all, d, exec);
  }
  check::slots(fn, "slot", step.slot, step.pad_slot_id, d.S, true);
  for (int64_t b = 0; b < d.B; ++b) {
    const int64_t s = check::index_at(step.slot, b);
    if (s == step.pad_slot_id) continue;
    RingCursor c = checked_cursor(fn, pool.cursor, s, d);
    if (num_accepted.defined()) {
      c = checked_commit(fn, c, s, check::index_at(num_accepted, b), d);
    } else if (c.pending != 0) {
      check::fail(fn, "num_accepted",
                  "slot " + std::to_string(s) + " has " + std::to_string(c.pending) +
                      " pending records; they must be committed (pass num_accepted or call "
                      "mamba2_commit) before the next step");
    }
  }
  if (exec.backend == Backend::reference)
    return mamba2::reference::replay_step(step, pool, num_accepted, commit_all, d);
  check_workspace(fn, exec, mamba2::cpu::workspace_plan(SsmOp::replay_step, d, threads(exec)));
  return mamba2::cpu::replay_step(step, pool, num_accepted, commit_all, d, exec);
}

void mamba2_commit(const Mamba2Pool& pool, const Tensor& slot, int64_t pad_slot_id,
                   const Tensor& num_accepted, const Exec& exec) {
  const char* fn = "mamba2_commit";
  check_exec(fn, exec);
  mamba2::Dims d;
  check_pool(fn, pool, exec, d, true, nullptr);
  check_slot_any(fn, "slot", slot, exec);
  d.B = slot.shape[0];
  check_num_accepted(fn, num_accepted, d.B, exec);
  if (!host_checks(exec)) return mamba2::cuda::commit(pool, slot, pad_slot_id, num_accepted, d, exec);
  check::slots(fn, "slot", slot, pad_slot_id, d.S, true);
  for (int64_t b = 0; b < d.B; ++b) {
    const int64_t s = check::index_at(slot, b);
    if (s == pad_slot_id) continue;
    checked_commit(fn, checked_cursor(fn, pool.cursor, s, d), s, check::index_at(num_accepted, b), d);
  }
  if (exec.backend == Backend::reference)
    return mamba2::reference::commit(pool, slot, pad_slot_id, num_accepted, d);
  check_workspace(fn, exec, mamba2::cpu::workspace_plan(SsmOp::commit, d, threads(exec)));
  return mamba2::cpu::commit(pool, slot, pad_slot_id, num_accepted, d, exec);
}

void mamba2_materialize(const Mamba2Pool& pool, const Tensor& slot, int64_t pad_slot_id,
                        const Tensor& out, const Exec& exec) {
  const char* fn = "mamba2_materialize";
  check_exec(fn, exec);
  mamba2::Dims d;
  const bool ring = check_pool(fn, pool, exec, d, false, nullptr);
  check_slot_any(fn, "slot", slot, exec);
  d.B = slot.shape[0];
  tensor(fn, "out", out, {d.B, d.H, d.P, d.N}, {DType::f32, DType::f16, DType::bf16, DType::f64},
         exec);
  if (ring) tensor(fn, "A", pool.A, {d.H}, {DType::f32}, exec);
  if (!host_checks(exec)) return mamba2::cuda::materialize(pool, slot, pad_slot_id, out, d, exec);
  // Reads only: duplicates are harmless.
  check::slots(fn, "slot", slot, pad_slot_id, d.S, false);
  if (ring)
    for (int64_t b = 0; b < d.B; ++b) {
      const int64_t s = check::index_at(slot, b);
      if (s != pad_slot_id) checked_cursor(fn, pool.cursor, s, d);
    }
  if (exec.backend == Backend::reference)
    return mamba2::reference::materialize(pool, slot, pad_slot_id, out, d);
  check_workspace(fn, exec, mamba2::cpu::workspace_plan(SsmOp::materialize, d, threads(exec)));
  return mamba2::cpu::materialize(pool, slot, pad_slot_id, out, d, exec);
}

void mamba2_flush(const Mamba2Pool& pool, const Tensor& slot, int64_t pad_slot_id,
                  const Exec& exec) {
  if (mamba2::dual::host_dual(pool, exec)) return mamba2::dual::flush(pool, slot, pad_slot_id, exec);
  const char* fn = "mamba2_flush";
  check_exec(fn, exec);
  mamba2::Dims d;
  check_pool(fn, pool, exec, d, true, nullptr);
  tensor(fn, "A", pool.A, {d.H}, {DType::f32}, exec);
  check_slot_any(fn, "slot", slot, exec);
  d.B = slot.shape[0];
  if (!host_checks(exec)) {
    if (mamba2::dual::requested(pool)) mamba2::dual::check_device_copy(fn, pool);
    return mamba2::cuda::flush(pool, slot, pad_slot_id, d, exec);
  }
  check::slots(fn, "slot", slot, pad_slot_id, d.S, true);
  for (int64_t b = 0; b < d.B; ++b) {
    const int64_t s = check::index_at(slot, b);
    if (s == pad_slot_id) continue;
    const RingCursor c = checked_cursor(fn, pool.cursor, s, d);
    check::require(c.pending == 0, fn, "slot",
                   "slot " + std::to_string(s) + " has " + std::to_string(c.pending) +
                       " pending records; commit them before flushing");
  }
  if (exec.backend == Backend::reference) return mamba2::reference::flush(pool, slot, pad_slot_id, d);
  check_workspace(fn, exec, mamba2::cpu::workspace_plan(SsmOp::flush, d, threads(exec)));
  return mamba2::cpu::flush(pool, slot, pad_slot_id, d, exec);
}

namespace {
// Every tensor of a pool that has a row per slot (the read copy of a dual
// pool too: copy and reset treat it as bytes; quant_pack of a zero tile is
// all zero bytes in every format, so a zeroed copy is the copy of a zeroed
// checkpoint).
std::vector<Tensor> pool_tensors(const Mamba2Pool& p) {
  std::vector<Tensor> v = {p.state, p.ring_x, p.ring_dt, p.ring_B, p.cursor};
  if (p.read_copy.defined()) v.push_back(p.read_copy);
  return v;
}
// The device slot operations exist only in CUDA builds.
void copy_cuda([[maybe_unused]] const char* fn, const Mamba2Pool& pool, const Tensor& src,
               const Tensor& dst, int64_t pad, const Exec& exec) {
#if defined(REPLAYSSM_WITH_CUDA)
  slot_ops::copy_cuda(pool_tensors(pool), src, dst, pad, exec);
#else
  (void)pool, (void)src, (void)dst, (void)pad, (void)exec;
  check::fail(fn, "exec", "this build of replayssm has no CUDA backend");
#endif
}
void zero_cuda([[maybe_unused]] const char* fn, const Mamba2Pool& pool, const Tensor& slot,
               int64_t pad, const Exec& exec) {
#if defined(REPLAYSSM_WITH_CUDA)
  slot_ops::zero_cuda(pool_tensors(pool), slot, pad, exec);
#else
  (void)pool, (void)slot, (void)pad, (void)exec;
  check::fail(fn, "exec", "this build of replayssm has no CUDA backend");
#endif
}
}  // namespace

void mamba2_copy_slot(const Mamba2Pool& pool, const Tensor& src, const Tensor& dst,
                      int64_t pad_slot_id, const Exec& exec) {
  if (mamba2::dual::host_dual(pool, exec)) return mamba2::dual::copy_slot(pool, src, dst, pad_slot_id, exec);
  const char* fn = "mamba2_copy_slot";
  check_exec(fn, exec);
  mamba2::Dims d;
  check_pool(fn, pool, exec, d, false, nullptr);
  check_slot_any(fn, "src", src, exec);
  check_slot(fn, "dst", dst, src.shape[0], exec);
  if (exec.backend == Backend::cuda) {
    if (mamba2::dual::requested(pool)) mamba2::dual::check_device_copy(fn, pool);
    return copy_cuda(fn, pool, src, dst, pad_slot_id, exec);
  }
  check::slots(fn, "src", src, pad_slot_id, d.S, false);
  check::slots(fn, "dst", dst, pad_slot_id, d.S, true);
  // A slot written as a destination must not also be read as a source (the
  // result would depend on the copy order).
  for (int64_t i = 0; i < dst.shape[0]; ++i) {
    const int64_t t = check::index_at(dst, i);
    if (t == pad_slot_id || check::index_at(src, i) == pad_slot_id) continue;
    for (int64_t j = 0; j < src.shape[0]; ++j)
      check::require(check::index_at(src, j) != t || j == i, fn, "dst",
                     "slot " + std::to_string(t) + " is both a copy destination and a source");
  }
  slot_ops::copy_cpu(pool_tensors(pool), src, dst, pad_slot_id);
}

void mamba2_reset_slot(const Mamba2Pool& pool, const Tensor& slot, int64_t pad_slot_id,
                       const Exec& exec) {
  if (mamba2::dual::host_dual(pool, exec)) return mamba2::dual::reset_slot(pool, slot, pad_slot_id, exec);
  const char* fn = "mamba2_reset_slot";
  check_exec(fn, exec);
  mamba2::Dims d;
  check_pool(fn, pool, exec, d, false, nullptr);
  check_slot_any(fn, "slot", slot, exec);
  if (exec.backend == Backend::cuda) {
    if (mamba2::dual::requested(pool)) mamba2::dual::check_device_copy(fn, pool);
    return zero_cuda(fn, pool, slot, pad_slot_id, exec);
  }
  check::slots(fn, "slot", slot, pad_slot_id, d.S, false);
  slot_ops::zero_cpu(pool_tensors(pool), slot, pad_slot_id);
}

// Sizing. A replay row holds one checkpoint, R = L + T_max records (x: H·P
// in the activation dtype, δ: H fp32, B: G·N in the activation dtype) and a
// cursor of three int32. A snapshot row (the speculative baseline) holds
// T_max = 1 + drafts full states.
int64_t mamba2_ring_length(int64_t L, int64_t T_max) {
  check::positive("mamba2_ring_length", "L", L);
  check::positive("mamba2_ring_length", "T_max", T_max);
  check::require(T_max <= L, "mamba2_ring_length", "T_max", "expected T_max <= L");
  return L + T_max;
}

namespace {
void check_shape_arg(const char* fn, const Mamba2Shape& s) {
  check::positive(fn, "H", s.H);
  check::positive(fn, "P", s.P);
  check::positive(fn, "N", s.N);
  check::positive(fn, "G", s.G);
  check::require(s.H % s.G == 0, fn, "G", "expected G to divide H");
}
void check_dtype_arg(const char* fn, const char* arg, DType dt) {
  check::require(dt == DType::f32 || dt == DType::f16 || dt == DType::bf16, fn, arg,
                 std::string("expected fp32 | fp16 | bf16, got ") + dtype_name(dt));
}
}  // namespace

int64_t mamba2_replay_bytes_per_row(const Mamba2Shape& s, DType state, DType act, int64_t L,
                                    int64_t T_max) {
  const char* fn = "mamba2_replay_bytes_per_row";
  check_shape_arg(fn, s);
  check_dtype_arg(fn, "state", state);
  check_dtype_arg(fn, "act", act);
  const int64_t R = mamba2_ring_length(L, T_max);
  const int64_t a = int64_t(dtype_size(act));
  return s.H * s.P * s.N * int64_t(dtype_size(state)) +
         R * (s.H * s.P * a + s.H * 4 + s.G * s.N * a) + CURSOR_FIELDS * 4;
}

size_t mamba2_workspace_bytes(SsmOp op, const Mamba2Shape& s, int64_t B, int64_t T, int64_t L,
                              const Exec& exec) {
  const char* fn = "mamba2_workspace_bytes";
  check_exec(fn, exec);
  check_shape_arg(fn, s);
  check::require(op >= SsmOp::decode && op <= SsmOp::reset_slot, fn, "op", "unknown operation");
  check::require(B >= 0, fn, "B", "expected B >= 0, got " + std::to_string(B));
  check::require(L >= 0, fn, "L", "expected L >= 0, got " + std::to_string(L));
  const bool steps = op == SsmOp::decode || op == SsmOp::snapshot_decode || op == SsmOp::replay_step;
  if (steps) check::positive(fn, "T", T);
  if (exec.backend != Backend::cpu) return 0;
  mamba2::Dims d;
  d.B = B;
  d.T = steps ? T : 0;
  d.H = s.H;
  d.P = s.P;
  d.N = s.N;
  d.G = s.G;
  d.L = L;
  return mamba2::cpu::workspace_plan(op, d, threads(exec)).bytes();
}

int64_t mamba2_snapshot_bytes_per_row(const Mamba2Shape& s, DType state, int64_t T_max) {
  const char* fn = "mamba2_snapshot_bytes_per_row";
  check_shape_arg(fn, s);
  check_dtype_arg(fn, "state", state);
  check::positive(fn, "T_max", T_max);
  return T_max * s.H * s.P * s.N * int64_t(dtype_size(state));
}

// Validation hook of the shared-quantised mode (mamba2/shared.h).
mamba2::Dims mamba2::check_decode_step(const char* fn, const Mamba2Step& step, const Exec& exec) {
  check_exec(fn, exec);
  Dims d;
  check_step(fn, step, exec, d);
  check_slot(fn, "slot", step.slot, d.B, exec);
  return d;
}

}  // namespace replayssm
