// Dual-precision Mamba-2 pools and the shared-quantised decode (design §4,
// docs/dual_precision.md).
//
// Mamba-2 records (x_j, δ_j, B_j) do not depend on the state, so a dual pool
// keeps the single-precision records; only the reads change: a step that
// does not flush computes its outputs from the unpacked read copy instead of
// the checkpoint. Every call runs the validated single-precision entry points
// on a compact scratch pool (rows of the batch, the read copy unpacked to
// fp32 as its checkpoint) and writes the caller's pool only once they have
// all succeeded.
#include "mamba2/dual.h"

#include <string>
#include <vector>

#include "core/check.h"
#include "core/dual_util.h"
#include "core/ring.h"
#include "core/slot_ops.h"
#include "replayssm/dual.h"

namespace replayssm {
namespace {

using dual::Scratch;

struct Shape4 {
  int64_t S, H, P, N;
};

Shape4 check_dual_pool(const char* fn, const Mamba2Pool& pool, bool need_rings, const Exec& exec,
                       QuantLayout& layout) {
  dual::require_host(fn, exec, "a dual-precision pool (pool.read_copy)");
  check::present(fn, "pool.state", pool.state);
  check::require(pool.state.ndim == 4, fn, "pool.state",
                 "expected shape [S, H, P, N], got " + pool.state.shape_str());
  check::require(pool.state.device == Device::cpu, fn, "pool.state", "expected a host tensor");
  check::dtype(fn, "pool.state", pool.state, {DType::f32, DType::f16, DType::bf16});
  check::inner_contiguous(fn, "pool.state", pool.state);
  const Shape4 s{pool.state.shape[0], pool.state.shape[1], pool.state.shape[2], pool.state.shape[3]};
  layout = dual::check_packed_pool(fn, "pool.read_copy", pool.read_copy, pool.read_format, s.S, s.H,
                                   s.P, s.N);
  if (need_rings || pool.cursor.defined()) {
    for (auto [arg, t] : {std::pair{"pool.ring_x", pool.ring_x}, {"pool.ring_dt", pool.ring_dt},
                          {"pool.ring_B", pool.ring_B}, {"pool.cursor", pool.cursor}}) {
      check::present(fn, arg, t);
      check::require(t.device == Device::cpu, fn, arg, "expected a host tensor");
      check::require(t.ndim >= 2 && t.shape[0] == s.S, fn, arg,
                     "expected " + std::to_string(s.S) + " slots (leading dimension), got " + t.shape_str());
      check::inner_contiguous(fn, arg, t);
    }
    check::shape(fn, "pool.cursor", pool.cursor, {s.S, CURSOR_FIELDS});
    check::dtype(fn, "pool.cursor", pool.cursor, {DType::i32});
  }
  return s;
}

RingCursor cursor_at(const Tensor& cursor, int64_t row) {
  const int32_t* c = reinterpret_cast<const int32_t*>(dual::element(cursor, {row, 0}));
  return RingCursor{c[0], c[cursor.stride[1]], c[2 * cursor.stride[1]]};
}
void set_cursor(const Tensor& cursor, int64_t row, RingCursor v) {
  int32_t* c = reinterpret_cast<int32_t*>(dual::element(cursor, {row, 0}));
  c[0] = v.start, c[cursor.stride[1]] = v.count, c[2 * cursor.stride[1]] = v.pending;
}

}  // namespace

namespace mamba2::dual {

void check_device_copy(const char* fn, const Mamba2Pool& pool) {
  check::require(pool.read_copy.device == Device::cuda, fn, "pool.read_copy",
                 "expected a cuda tensor for the cuda backend");
  // The layout checks of the host path, on a view labelled as host memory
  // (the data is not touched).
  Tensor layout_view = pool.read_copy;
  layout_view.device = Device::cpu;
  const Tensor& st = pool.state;
  replayssm::dual::check_packed_pool(fn, "pool.read_copy", layout_view, pool.read_format, st.shape[0],
                                     st.shape[1], st.shape[2], st.shape[3]);
}

void replay_step(const Mamba2Step& step, const Mamba2Pool& pool, const Tensor& num_accepted,
                 bool commit_all, const Exec& exec) {
  const char* fn = "mamba2_replay_step";
  QuantLayout lay;
  const Shape4 sh = check_dual_pool(fn, pool, true, exec, lay);
  check::present(fn, "x", step.x);
  check::require(step.x.ndim == 4, fn, "x", "expected shape [B, T, H, P], got " + step.x.shape_str());
  check::present(fn, "A", step.A);
  const int64_t B = step.x.shape[0], T = step.x.shape[1];
  const std::vector<int64_t> idx = replayssm::dual::checked_slots(fn, "slot", step.slot, step.pad_slot_id, sh.S, B);
  if (num_accepted.defined()) {
    check::index_vector(fn, "num_accepted", num_accepted, B);
    check::require(num_accepted.device == Device::cpu, fn, "num_accepted", "expected a host tensor");
  }

  // Scratch pool: the batch's rings and cursors; committed here, so the
  // scratch step sees committed rows only.
  Scratch ring_x = replayssm::dual::gather(pool.ring_x, idx), ring_dt = replayssm::dual::gather(pool.ring_dt, idx),
          ring_B = replayssm::dual::gather(pool.ring_B, idx), cursor = replayssm::dual::gather(pool.cursor, idx);
  const int64_t R = pool.ring_x.shape[1];
  std::vector<int64_t> flushing(size_t(B), -1);
  bool any_flush = false;
  for (int64_t b = 0; b < B; ++b) {
    if (idx[size_t(b)] < 0) continue;
    RingCursor c = cursor_at(cursor, b);
    check::require(c.start >= 0 && c.start < R && c.count >= 0 && c.pending >= 0 && c.count <= pool.L &&
                       c.count + c.pending <= R,
                   fn, "pool.cursor", "corrupt cursor of slot " + std::to_string(idx[size_t(b)]));
    if (num_accepted.defined()) {
      const int64_t a = check::index_at(num_accepted, b);
      check::require(c.pending > 0, fn, "num_accepted", "slot " + std::to_string(idx[size_t(b)]) +
                     " has no pending records to commit");
      check::require(a >= 1 && a <= c.pending && c.count + a <= pool.L, fn, "num_accepted",
                     "expected an accepted count in [1, " + std::to_string(c.pending) + "] for slot " +
                         std::to_string(idx[size_t(b)]) + ", got " + std::to_string(a));
      ring_commit(c, int32_t(a));
      set_cursor(cursor, b, c);
    } else {
      check::require(c.pending == 0, fn, "num_accepted", "slot " + std::to_string(idx[size_t(b)]) +
                     " has " + std::to_string(c.pending) + " uncommitted records; pass num_accepted or call mamba2_commit");
    }
    if (c.count + T > pool.L) flushing[size_t(b)] = b, any_flush = true;
  }
  const Scratch slots = replayssm::dual::compact_slots(idx);

  // High-precision fold of the flushing rows (the single-precision flush of
  // the scratch pool, on the gathered checkpoints).
  Scratch hp(pool.state.dtype, replayssm::dual::with_lead(pool.state, B));
  Mamba2Pool scratch;
  scratch.state = hp;
  scratch.ring_x = ring_x, scratch.ring_dt = ring_dt, scratch.ring_B = ring_B, scratch.cursor = cursor;
  scratch.L = pool.L;
  scratch.A = step.A;
  if (any_flush) {
    for (int64_t b = 0; b < B; ++b)
      if (flushing[size_t(b)] >= 0) replayssm::dual::copy_row(pool.state, idx[size_t(b)], hp, b);
    Scratch fl(DType::i64, {B});
    for (int64_t b = 0; b < B; ++b) fl.as<int64_t>()[b] = flushing[size_t(b)];
    mamba2_flush(scratch, fl, -1, exec);
  }

  // The read state: the fresh copy of flushed rows, the stored copy otherwise.
  Scratch read(DType::f32, {B, sh.H, sh.P, sh.N});
  Scratch copy(DType::u8, {B, sh.H, lay.tile_bytes});
  for (int64_t b = 0; b < B; ++b) {
    if (idx[size_t(b)] < 0) continue;
    if (flushing[size_t(b)] >= 0) {
      replayssm::dual::pack_rows(exec.backend, lay, hp, b, copy, b);
      replayssm::dual::unpack_rows(exec.backend, lay, copy, b, read, b);
    } else {
      replayssm::dual::unpack_rows(exec.backend, lay, pool.read_copy, idx[size_t(b)], read, b);
    }
  }
  scratch.state = read;
  Mamba2Step s2 = step;
  s2.slot = slots;
  s2.pad_slot_id = -1;
  mamba2_replay_step(s2, scratch, Tensor{}, commit_all, exec);

  // Commit to the caller's pool.
  for (int64_t b = 0; b < B; ++b) {
    const int64_t s = idx[size_t(b)];
    if (s < 0) continue;
    for (const auto& [src, dst] : {std::pair<const Tensor&, const Tensor&>{ring_x, pool.ring_x},
                                   {ring_dt, pool.ring_dt}, {ring_B, pool.ring_B}, {cursor, pool.cursor}})
      replayssm::dual::copy_row(src, b, dst, s);
    if (flushing[size_t(b)] >= 0) {
      replayssm::dual::copy_row(hp, b, pool.state, s);
      replayssm::dual::copy_row(copy, b, pool.read_copy, s);
    }
  }
}

void prefill(const Mamba2Prefill& pf, const Mamba2Pool& pool, const Exec& exec) {
  const char* fn = "mamba2_prefill";
  QuantLayout lay;
  check_dual_pool(fn, pool, false, exec, lay);
  const int64_t S = pool.state.shape[0];
  check::present(fn, "cu_seqlens", pf.cu_seqlens);
  check::require(pf.cu_seqlens.ndim == 1 && pf.cu_seqlens.shape[0] >= 1, fn, "cu_seqlens",
                 "expected shape [B + 1], got " + pf.cu_seqlens.shape_str());
  const int64_t B = pf.cu_seqlens.shape[0] - 1;
  const std::vector<int64_t> idx = replayssm::dual::checked_slots(fn, "slot", pf.slot, pf.pad_slot_id, S, B);
  if (pf.initial.defined()) {
    check::index_vector(fn, "initial", pf.initial, B);
    check::require(pf.initial.device == Device::cpu, fn, "initial", "expected a host tensor");
  }
  // Rows that continue from their current state start from the
  // high-precision fold (checkpoint ⊕ committed records).
  Scratch hp(pool.state.dtype, replayssm::dual::with_lead(pool.state, B));
  Scratch init_slots(DType::i64, {B});
  bool any_init = false;
  for (int64_t b = 0; b < B; ++b) {
    const bool init = idx[size_t(b)] >= 0 && pf.initial.defined() && check::index_at(pf.initial, b) != 0;
    init_slots.as<int64_t>()[b] = init ? idx[size_t(b)] : -1;
    any_init = any_init || init;
  }
  if (any_init) {
    Mamba2Pool hp_pool = pool;
    hp_pool.read_copy = Tensor{};
    mamba2_materialize(hp_pool, init_slots, -1, hp, exec);
  }
  Mamba2Pool scratch;
  scratch.state = hp;
  scratch.L = pool.L;
  Mamba2Prefill p2 = pf;
  const Scratch slots = replayssm::dual::compact_slots(idx);
  p2.slot = slots;
  p2.pad_slot_id = -1;
  mamba2_prefill(p2, scratch, exec);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t s = idx[size_t(b)];
    if (s < 0) continue;
    replayssm::dual::copy_row(hp, b, pool.state, s);
    replayssm::dual::pack_rows(exec.backend, lay, pool.state, s, pool.read_copy, s);
    if (pool.cursor.defined()) set_cursor(pool.cursor, s, RingCursor{cursor_at(pool.cursor, s).start, 0, 0});
  }
}

void flush(const Mamba2Pool& pool, const Tensor& slot, int64_t pad, const Exec& exec) {
  const char* fn = "mamba2_flush";
  QuantLayout lay;
  check_dual_pool(fn, pool, true, exec, lay);
  Mamba2Pool hp_pool = pool;
  hp_pool.read_copy = Tensor{};
  mamba2_flush(hp_pool, slot, pad, exec);  // validates everything, then folds
  for (int64_t i = 0; i < slot.shape[0]; ++i) {
    const int64_t s = check::index_at(slot, i);
    if (s != pad) replayssm::dual::pack_rows(exec.backend, lay, pool.state, s, pool.read_copy, s);
  }
}

void copy_slot(const Mamba2Pool& pool, const Tensor& src, const Tensor& dst, int64_t pad,
               const Exec& exec) {
  const char* fn = "mamba2_copy_slot";
  QuantLayout lay;
  check_dual_pool(fn, pool, false, exec, lay);
  Mamba2Pool hp_pool = pool;
  hp_pool.read_copy = Tensor{};
  mamba2_copy_slot(hp_pool, src, dst, pad, exec);
  slot_ops::copy_cpu({pool.read_copy}, src, dst, pad);
}

void reset_slot(const Mamba2Pool& pool, const Tensor& slot, int64_t pad, const Exec& exec) {
  const char* fn = "mamba2_reset_slot";
  QuantLayout lay;
  check_dual_pool(fn, pool, false, exec, lay);
  Mamba2Pool hp_pool = pool;
  hp_pool.read_copy = Tensor{};
  mamba2_reset_slot(hp_pool, slot, pad, exec);
  for (int64_t i = 0; i < slot.shape[0]; ++i) {
    const int64_t s = check::index_at(slot, i);
    if (s != pad) replayssm::dual::pack_rows(exec.backend, lay, pool.state, s, pool.read_copy, s);
  }
}

}  // namespace mamba2::dual
}  // namespace replayssm
