// Dual-precision GDN/KDA pools (design §4, docs/dual_precision.md).
//
// A step that does not flush computes its outputs from the unpacked read
// copy: the single-precision replay step runs on a compact scratch pool whose
// checkpoint is the copy decoded to fp32, so ring_d receives d̂_j (against the
// copy). The step also records v_j and β_j. A flush (fused in a step, or
// delta_flush) folds the records with fold_rows: every d_j is recomputed
// against the high-precision checkpoint, which therefore depends on the
// checkpoint and the raw inputs only. Every call validates, runs on scratch
// copies, and writes the caller's pool only once everything has succeeded.
#include "delta/dual.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"
#include "core/dual_util.h"
#include "core/ring.h"
#include "core/slot_ops.h"
#include "delta/backend.h"
#include "replayssm/dual.h"

namespace replayssm::delta::dual {
namespace {

namespace du = replayssm::dual;
using du::Scratch;

struct Shape {
  int64_t S, HV, V, K, H = 0, R = 0;
};

void host_tensor(const char* fn, const char* arg, const Tensor& t, const std::vector<int64_t>& dims,
                 std::initializer_list<DType> dtypes) {
  check::present(fn, arg, t);
  check::require(t.device == Device::cpu, fn, arg, "expected a host tensor");
  bool ok = t.ndim == int(dims.size());
  std::string want = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    want += (i ? ", " : "") + (dims[i] < 0 ? std::string("*") : std::to_string(dims[i]));
    if (ok && dims[i] >= 0 && t.shape[i] != dims[i]) ok = false;
  }
  if (!ok) check::fail(fn, arg, "expected shape " + want + "], got " + t.shape_str());
  check::dtype(fn, arg, t, dtypes);
  check::inner_contiguous(fn, arg, t);
}

// Validates the pool of a dual call (state, read copy, and with rings all
// ring tensors including ring_v and ring_beta).
Shape check_dual_pool(const char* fn, DeltaFamily f, const DeltaPool& pool, bool need_rings,
                      const Exec& exec, QuantLayout& layout) {
  du::require_host(fn, exec, "a dual-precision pool (pool.read_copy)");
  check::require(f == DeltaFamily::gdn || f == DeltaFamily::kda, fn, "family", "expected gdn or kda");
  const std::initializer_list<DType> FLOATS = {DType::f32, DType::f16, DType::bf16};
  check::present(fn, "pool.state", pool.state);
  check::require(pool.state.ndim == 4, fn, "pool.state", "expected shape [S, HV, V, K], got " + pool.state.shape_str());
  Shape s{pool.state.shape[0], pool.state.shape[1], pool.state.shape[2], pool.state.shape[3]};
  host_tensor(fn, "pool.state", pool.state, {s.S, s.HV, s.V, s.K}, FLOATS);
  check::present(fn, "pool.read_copy", pool.read_copy);
  layout = du::check_packed_pool(fn, "pool.read_copy", pool.read_copy, pool.read_format, s.S, s.HV, s.V, s.K);
  if (!need_rings && !pool.cursor.defined()) {
    check::require(!pool.ring_v.defined() && !pool.ring_beta.defined(), fn, "pool.ring_v",
                   "expected no ring_v / ring_beta on a pool without rings");
    return s;
  }
  check::present(fn, "pool.ring_k", pool.ring_k);
  check::require(pool.ring_k.ndim == 4, fn, "pool.ring_k", "expected shape [S, R, H, K], got " + pool.ring_k.shape_str());
  s.R = pool.ring_k.shape[1];
  s.H = pool.ring_k.shape[2];
  check::require(s.H >= 1 && s.HV % s.H == 0, fn, "pool.ring_k", "expected H to divide HV (" + std::to_string(s.HV) + ")");
  host_tensor(fn, "pool.ring_k", pool.ring_k, {s.S, s.R, s.H, s.K}, FLOATS);
  host_tensor(fn, "pool.ring_d", pool.ring_d, {s.S, s.R, s.HV, s.V}, FLOATS);
  host_tensor(fn, "pool.ring_ks", pool.ring_ks, {s.S, s.R, s.H}, {DType::f32});
  if (f == DeltaFamily::kda) host_tensor(fn, "pool.ring_g", pool.ring_g, {s.S, s.R, s.HV, s.K}, {DType::f32});
  else host_tensor(fn, "pool.ring_g", pool.ring_g, {s.S, s.R, s.HV}, {DType::f32});
  host_tensor(fn, "pool.ring_v", pool.ring_v, {s.S, s.R, s.HV, s.V}, FLOATS);
  host_tensor(fn, "pool.ring_beta", pool.ring_beta, {s.S, s.R, s.HV}, {DType::f32});
  host_tensor(fn, "pool.cursor", pool.cursor, {s.S, CURSOR_FIELDS}, {DType::i32});
  check::require(pool.L >= 1 && s.R >= pool.L + 1, fn, "pool.L",
                 "expected L >= 1 and ring length R >= L + 1, got L = " + std::to_string(pool.L) +
                     ", R = " + std::to_string(s.R));
  return s;
}

// A dual record ring on the device: shape dims, dtypes, unit inner stride,
// element-aligned (the kernels read it element-wise).
void device_ring(const char* fn, const char* arg, const Tensor& t, const std::vector<int64_t>& dims,
                 std::initializer_list<DType> dtypes) {
  check::present(fn, arg, t);
  check::require(t.device == Device::cuda, fn, arg, "expected a cuda tensor");
  bool ok = t.ndim == int(dims.size());
  for (size_t i = 0; ok && i < dims.size(); ++i) ok = dims[i] < 0 || t.shape[i] == dims[i];
  if (!ok) {
    std::string want = "[";
    for (size_t i = 0; i < dims.size(); ++i)
      want += (i ? ", " : "") + (dims[i] < 0 ? std::string("*") : std::to_string(dims[i]));
    check::fail(fn, arg, "expected shape " + want + "], got " + t.shape_str());
  }
  check::dtype(fn, arg, t, dtypes);
  check::inner_contiguous(fn, arg, t);
  check::aligned(fn, arg, t, int64_t(dtype_size(t.dtype)));
}

RingCursor cursor_at(const Tensor& cursor, int64_t row) {
  const int32_t* c = reinterpret_cast<const int32_t*>(du::element(cursor, {row, 0}));
  return RingCursor{c[0], c[cursor.stride[1]], c[2 * cursor.stride[1]]};
}
void set_cursor(const Tensor& cursor, int64_t row, RingCursor v) {
  int32_t* c = reinterpret_cast<int32_t*>(du::element(cursor, {row, 0}));
  c[0] = v.start, c[cursor.stride[1]] = v.count, c[2 * cursor.stride[1]] = v.pending;
}

RingCursor checked_cursor(const char* fn, const DeltaPool& pool, const Shape& sh, int64_t s) {
  const RingCursor c = cursor_at(pool.cursor, s);
  check::require(c.start >= 0 && c.start < sh.R && c.count >= 0 && c.pending >= 0 &&
                     int64_t(c.count) + c.pending <= pool.L,
                 fn, "pool.cursor", "corrupt cursor of slot " + std::to_string(s) + ": {" +
                     std::to_string(c.start) + ", " + std::to_string(c.count) + ", " +
                     std::to_string(c.pending) + "} (R = " + std::to_string(sh.R) + ", L = " +
                     std::to_string(pool.L) + ")");
  return c;
}

// Compact scratch copies of a pool's rings and cursors for rows idx.
struct ScratchRings {
  Scratch d, k, ks, g, v, beta, cursor;
  ScratchRings(const DeltaPool& p, const std::vector<int64_t>& idx)
      : d(du::gather(p.ring_d, idx)), k(du::gather(p.ring_k, idx)), ks(du::gather(p.ring_ks, idx)),
        g(du::gather(p.ring_g, idx)), v(du::gather(p.ring_v, idx)), beta(du::gather(p.ring_beta, idx)),
        cursor(du::gather(p.cursor, idx)) {}
  void attach(DeltaPool& p) const {
    p.ring_d = d, p.ring_k = k, p.ring_ks = ks, p.ring_g = g, p.ring_v = v, p.ring_beta = beta, p.cursor = cursor;
  }
  void scatter(const DeltaPool& p, int64_t b, int64_t s) const {
    for (const auto& [src, dst] : {std::pair<const Tensor&, const Tensor&>{d, p.ring_d}, {k, p.ring_k},
                                   {ks, p.ring_ks}, {g, p.ring_g}, {v, p.ring_v}, {beta, p.ring_beta},
                                   {cursor, p.cursor}})
      du::copy_row(src, b, dst, s);
  }
};

// The pool without its dual tensors (a single-precision view).
DeltaPool single_view(const DeltaPool& p) {
  DeltaPool q = p;
  q.read_copy = Tensor{};
  q.ring_v = Tensor{};
  q.ring_beta = Tensor{};
  return q;
}

// β of token (b, t, h) as recorded: sigmoid(b) when raw.
float beta_of(const DeltaStep& step, int64_t b, int64_t t, int64_t h, Backend backend) {
  const double x = load_as_f64(du::element(step.beta, {b, t, h}), step.beta.dtype, 0);
  if (!step.gating.raw_beta) return float(x);
  if (backend == Backend::reference) return float(1.0 / (1.0 + std::exp(-x)));
  return 1.f / (1.f + std::exp(-float(x)));
}

}  // namespace

QuantLayout check_device_pool(const char* fn, DeltaFamily f, const DeltaPool& pool, bool need_rings,
                              const Exec& exec) {
  check::require(f == DeltaFamily::gdn || f == DeltaFamily::kda, fn, "family", "expected gdn or kda");
  check::require(exec.backend == Backend::cuda, fn, "exec", "expected the cuda backend");
  check::present(fn, "pool.state", pool.state);
  check::require(pool.state.ndim == 4, fn, "pool.state", "expected shape [S, HV, V, K], got " + pool.state.shape_str());
  const int64_t S = pool.state.shape[0], HV = pool.state.shape[1], V = pool.state.shape[2], K = pool.state.shape[3];
  check::present(fn, "pool.read_copy", pool.read_copy);
  const QuantLayout lay =
      du::check_packed_pool(fn, "pool.read_copy", pool.read_copy, pool.read_format, S, HV, V, K, &exec);
  const int64_t vec = 16 / int64_t(dtype_size(pool.state.dtype));
  check::require(K <= 512 && K % vec == 0, fn, "pool.state",
                 "the cuda backend needs K <= 512 and a multiple of " + std::to_string(vec) + ", got " +
                     std::to_string(K));
  if (pool.read_format == ReadFormat::bf16 || pool.read_format == ReadFormat::f16)
    check::require(K % 8 == 0, fn, "pool.read_format",
                   "the cuda backend reads bf16 / f16 copies in 16-byte rows: K must be a multiple of 8, got " +
                       std::to_string(K));
  if (!need_rings && !pool.cursor.defined()) {
    check::require(!pool.ring_v.defined() && !pool.ring_beta.defined(), fn, "pool.ring_v",
                   "expected no ring_v / ring_beta on a pool without rings");
    return lay;
  }
  // R from ring_d (the single-precision checks name a missing ring_d).
  const int64_t R = pool.ring_d.defined() && pool.ring_d.ndim == 4 ? pool.ring_d.shape[1] : -1;
  device_ring(fn, "pool.ring_v", pool.ring_v, {S, R, HV, V}, {DType::f32, DType::f16, DType::bf16});
  device_ring(fn, "pool.ring_beta", pool.ring_beta, {S, R, HV}, {DType::f32});
  return lay;
}

void replay_step(DeltaFamily f, const DeltaStep& step, const DeltaPool& pool,
                 const Tensor& num_accepted, bool commit_all, const Exec& exec) {
  const char* fn = "delta_replay_step";
  QuantLayout lay;
  const Shape sh = check_dual_pool(fn, f, pool, true, exec, lay);
  check::present(fn, "v", step.v);
  check::require(step.v.ndim == 4 && step.v.shape[2] == sh.HV && step.v.shape[3] == sh.V, fn, "v",
                 "expected shape [B, T, " + std::to_string(sh.HV) + ", " + std::to_string(sh.V) +
                     "], got " + step.v.shape_str());
  check::require(step.v.device == Device::cpu, fn, "v", "expected a host tensor");
  check::same_dtype(fn, "pool.ring_v", pool.ring_v, "v", step.v.dtype);
  const int64_t B = step.v.shape[0], T = step.v.shape[1];
  const std::vector<int64_t> idx = du::checked_slots(fn, "slot", step.slot, step.pad_slot_id, sh.S, B);
  if (num_accepted.defined()) {
    check::index_vector(fn, "num_accepted", num_accepted, B);
    check::require(num_accepted.device == Device::cpu, fn, "num_accepted", "expected a host tensor");
  }

  ScratchRings rings(pool, idx);
  DeltaPool scratch;
  rings.attach(scratch);
  scratch.L = pool.L;
  std::vector<std::pair<int64_t, int64_t>> flushing;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t s = idx[size_t(b)];
    if (s < 0) continue;
    RingCursor c = checked_cursor(fn, pool, sh, s);
    if (num_accepted.defined()) {
      const int64_t a = check::index_at(num_accepted, b);
      check::require(c.pending > 0, fn, "num_accepted", "row " + std::to_string(b) + " (slot " +
                     std::to_string(s) + ") has no pending records to commit");
      check::require(a >= 1 && a <= c.pending, fn, "num_accepted", "expected accepted counts in [1, " +
                     std::to_string(c.pending) + "], got " + std::to_string(a) + " at row " + std::to_string(b));
      ring_commit(c, int32_t(a));
      set_cursor(rings.cursor, b, c);
    } else {
      check::require(c.pending == 0, fn, "num_accepted", "row " + std::to_string(b) + " (slot " +
                     std::to_string(s) + ") has " + std::to_string(c.pending) +
                     " uncommitted records; pass num_accepted or call delta_commit");
    }
    if (c.count + T > pool.L) flushing.emplace_back(b, b);
  }

  // High-precision fold of the flushing rows on gathered checkpoints.
  Scratch hp(pool.state.dtype, du::with_lead(pool.state, B));
  Scratch copy(DType::u8, {B, sh.HV, lay.tile_bytes});
  Scratch read(DType::f32, {B, sh.HV, sh.V, sh.K});
  std::vector<char> flushed(static_cast<size_t>(B), 0);
  if (!flushing.empty()) {
    for (const auto& [b, o] : flushing) du::copy_row(pool.state, idx[size_t(b)], hp, b), flushed[size_t(b)] = 1;
    scratch.state = hp;
    fold_rows(exec.backend, f, scratch, flushing, hp, exec.num_threads);
    for (const auto& [b, o] : flushing) {
      RingCursor c = cursor_at(rings.cursor, b);
      set_cursor(rings.cursor, b, RingCursor{ring_pos(c.start, c.count, int32_t(sh.R)), 0, 0});
    }
  }
  for (int64_t b = 0; b < B; ++b) {
    if (idx[size_t(b)] < 0) continue;
    if (flushed[size_t(b)]) {
      du::pack_rows(exec.backend, lay, hp, b, copy, b);
      du::unpack_rows(exec.backend, lay, copy, b, read, b);
    } else {
      du::unpack_rows(exec.backend, lay, pool.read_copy, idx[size_t(b)], read, b);
    }
  }

  // Outputs and d̂ against the copy: the single-precision step on the scratch.
  std::vector<RingCursor> before(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) before[size_t(b)] = cursor_at(rings.cursor, b);
  DeltaPool sp = single_view(scratch);
  sp.state = read;
  const Scratch slots = du::compact_slots(idx);
  DeltaStep s2 = step;
  s2.slot = slots;
  s2.pad_slot_id = -1;
  delta_replay_step(f, s2, sp, Tensor{}, commit_all, exec);

  // The records of v and β, then commit everything to the caller's pool.
  for (int64_t b = 0; b < B; ++b) {
    const int64_t s = idx[size_t(b)];
    if (s < 0) continue;
    const RingCursor c = before[size_t(b)];
    for (int64_t t = 0; t < T; ++t) {
      const int64_t pos = ring_pos(c.start, c.count + int32_t(t), int32_t(sh.R));
      for (int64_t h = 0; h < sh.HV; ++h) {
        std::memcpy(du::element(rings.v, {b, pos, h}), du::element(step.v, {b, t, h}),
                    size_t(sh.V) * dtype_size(step.v.dtype));
        *reinterpret_cast<float*>(du::element(rings.beta, {b, pos, h})) = beta_of(step, b, t, h, exec.backend);
      }
    }
    rings.scatter(pool, b, s);
    if (flushed[size_t(b)]) {
      du::copy_row(hp, b, pool.state, s);
      du::copy_row(copy, b, pool.read_copy, s);
    }
  }
}

void prefill(DeltaFamily f, const DeltaPrefill& pf, const DeltaPool& pool, const Exec& exec) {
  const char* fn = "delta_prefill";
  QuantLayout lay;
  const Shape sh = check_dual_pool(fn, f, pool, false, exec, lay);
  check::present(fn, "cu_seqlens", pf.cu_seqlens);
  check::require(pf.cu_seqlens.ndim == 1 && pf.cu_seqlens.shape[0] >= 1, fn, "cu_seqlens",
                 "expected shape [B + 1], got " + pf.cu_seqlens.shape_str());
  const int64_t B = pf.cu_seqlens.shape[0] - 1;
  const std::vector<int64_t> idx = du::checked_slots(fn, "slot", pf.slot, pf.pad_slot_id, sh.S, B);
  if (pf.initial.defined()) {
    check::index_vector(fn, "initial", pf.initial, B);
    check::require(pf.initial.device == Device::cpu, fn, "initial", "expected a host tensor");
  }
  // Rows continuing from their current state start from the high-precision fold.
  Scratch hp(pool.state.dtype, du::with_lead(pool.state, B));
  std::vector<std::pair<int64_t, int64_t>> init;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t s = idx[size_t(b)];
    if (s < 0 || !pf.initial.defined() || check::index_at(pf.initial, b) == 0) continue;
    if (pool.cursor.defined()) {
      checked_cursor(fn, pool, sh, s);
      init.emplace_back(s, b);
    } else {
      du::copy_row(pool.state, s, hp, b);
    }
  }
  if (!init.empty()) fold_rows(exec.backend, f, pool, init, hp, exec.num_threads);
  DeltaPool scratch;
  scratch.state = hp;
  scratch.L = pool.L;
  DeltaPrefill p2 = pf;
  const Scratch slots = du::compact_slots(idx);
  p2.slot = slots;
  p2.pad_slot_id = -1;
  delta_prefill(f, p2, scratch, exec);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t s = idx[size_t(b)];
    if (s < 0) continue;
    du::copy_row(hp, b, pool.state, s);
    du::pack_rows(exec.backend, lay, pool.state, s, pool.read_copy, s);
    if (pool.cursor.defined()) set_cursor(pool.cursor, s, RingCursor{cursor_at(pool.cursor, s).start, 0, 0});
  }
}

void materialize(DeltaFamily f, const DeltaPool& pool, const Tensor& slot, int64_t pad,
                 const Tensor& out, const Exec& exec) {
  const char* fn = "delta_materialize";
  QuantLayout lay;
  const Shape sh = check_dual_pool(fn, f, pool, false, exec, lay);
  check::present(fn, "slot", slot);
  check::require(slot.ndim == 1, fn, "slot", "expected shape [n], got " + slot.shape_str());
  const int64_t n = slot.shape[0];
  check::index_vector(fn, "slot", slot, n);
  check::slots(fn, "slot", slot, pad, sh.S, false);
  host_tensor(fn, "out", out, {n, sh.HV, sh.V, sh.K}, {DType::f32, DType::f16, DType::bf16, DType::f64});
  std::vector<std::pair<int64_t, int64_t>> rows;
  std::vector<int64_t> pads;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t s = check::index_at(slot, i);
    if (s == pad) {
      pads.push_back(i);
      continue;
    }
    if (pool.cursor.defined()) checked_cursor(fn, pool, sh, s);
    rows.emplace_back(s, i);
  }
  {  // pad entries read as zero states (as on every backend's single-precision path)
    const std::vector<float> zero(static_cast<size_t>(sh.V * sh.K), 0.f);
    for (int64_t i : pads)
      for (int64_t h = 0; h < sh.HV; ++h) du::store_tile(out, i, h, zero.data());
  }
  if (pool.cursor.defined()) {
    fold_rows(exec.backend, f, pool, rows, out, exec.num_threads);
  } else {
    std::vector<float> tile(static_cast<size_t>(sh.V * sh.K));
    for (const auto& [s, i] : rows)
      for (int64_t h = 0; h < sh.HV; ++h) du::load_tile_f32(pool.state, s, h, tile.data()), du::store_tile(out, i, h, tile.data());
  }
}

void flush(DeltaFamily f, const DeltaPool& pool, const Tensor& slot, int64_t pad, const Exec& exec) {
  const char* fn = "delta_flush";
  QuantLayout lay;
  const Shape sh = check_dual_pool(fn, f, pool, true, exec, lay);
  check::present(fn, "slot", slot);
  check::require(slot.ndim == 1, fn, "slot", "expected shape [n], got " + slot.shape_str());
  const std::vector<int64_t> idx = du::checked_slots(fn, "slot", slot, pad, sh.S, slot.shape[0]);
  std::vector<std::pair<int64_t, int64_t>> rows;
  for (size_t i = 0; i < idx.size(); ++i) {
    if (idx[i] < 0) continue;
    const RingCursor c = checked_cursor(fn, pool, sh, idx[i]);
    check::require(c.pending == 0, fn, "num_accepted", "slot " + std::to_string(idx[i]) + " has " +
                   std::to_string(c.pending) + " uncommitted records; call delta_commit first");
    rows.emplace_back(idx[i], idx[i]);
  }
  fold_rows(exec.backend, f, pool, rows, pool.state, exec.num_threads);  // in place, per (slot, head)
  for (const auto& [s, o] : rows) {
    const RingCursor c = cursor_at(pool.cursor, s);
    set_cursor(pool.cursor, s, RingCursor{ring_pos(c.start, c.count, int32_t(sh.R)), 0, 0});
    du::pack_rows(exec.backend, lay, pool.state, s, pool.read_copy, s);
  }
}

void copy_slot(DeltaFamily f, const DeltaPool& pool, const Tensor& src, const Tensor& dst,
               int64_t pad, const Exec& exec) {
  const char* fn = "delta_copy_slot";
  QuantLayout lay;
  if (exec.backend == Backend::cuda) check_device_pool(fn, f, pool, false, exec);
  else check_dual_pool(fn, f, pool, false, exec, lay);
  delta_copy_slot(f, single_view(pool), src, dst, pad, exec);  // validates, copies state and rings
  if (exec.backend == Backend::cuda) {
#if defined(REPLAYSSM_WITH_CUDA)
    slot_ops::copy_cuda({pool.read_copy, pool.ring_v, pool.ring_beta}, src, dst, pad, exec);
#endif
    return;
  }
  slot_ops::copy_cpu({pool.read_copy, pool.ring_v, pool.ring_beta}, src, dst, pad);
}

void reset_slot(DeltaFamily f, const DeltaPool& pool, const Tensor& slot, int64_t pad,
                const Exec& exec) {
  const char* fn = "delta_reset_slot";
  QuantLayout lay;
  if (exec.backend == Backend::cuda) {
    lay = check_device_pool(fn, f, pool, false, exec);
    delta_reset_slot(f, single_view(pool), slot, pad, exec);  // validates, zeroes state, rings, cursors
    if (slot.shape[0] == 0) return;
    Dims d;
    d.family = f;
    d.S = pool.state.shape[0], d.HV = pool.state.shape[1], d.V = pool.state.shape[2], d.K = pool.state.shape[3];
    d.H = d.HV;
    d.B = slot.shape[0];
#if defined(REPLAYSSM_WITH_CUDA)
    if (pool.ring_v.defined()) slot_ops::zero_cuda({pool.ring_v, pool.ring_beta}, slot, pad, exec);
#endif
    DeltaPool p = pool;  // the copy of a zero checkpoint (the fold kernel reads no ring)
    p.ring_d = p.ring_k = p.ring_ks = p.ring_g = p.cursor = p.ring_v = p.ring_beta = Tensor{};
    cuda::dual_pack(p, lay, slot, pad, d, exec);
    return;
  }
  check_dual_pool(fn, f, pool, false, exec, lay);
  delta_reset_slot(f, single_view(pool), slot, pad, exec);
  slot_ops::zero_cpu({pool.ring_v, pool.ring_beta}, slot, pad);
  for (int64_t i = 0; i < slot.shape[0]; ++i) {
    const int64_t s = check::index_at(slot, i);
    if (s != pad) du::pack_rows(exec.backend, lay, pool.state, s, pool.read_copy, s);
  }
}

}  // namespace replayssm::delta::dual
