// Fast delta CPU backend (fp32 arithmetic): standard decode, snapshot
// decode, prefill, commit, materialise, flush. The replay step is in
// cpu_replay.cpp. Work is split over (row, value head); every state row
// [K] is read once, carried through all tokens in registers / L1 and written
// once (the recurrence is separable over the V rows of a head's state).
// Scratch comes from the call's workspace (carve_* describe each slab).
#include "core/parallel.h"
#include "delta/cpu_kernels.h"

namespace replayssm::delta::cpu {
namespace {

// Prepared tokens of one (row, value head), up to n_max tokens: k̂, q̂, α
// (expanded to K), β, v, and per-token scratch (raw k, gate, dt_bias).
struct Prepared {
  float *khat, *qhat, *alpha, *beta, *v, *kr, *g, *bias;
};
Prepared carve_tokens(Carver& c, const Dims& d, int64_t n_max) {
  const int64_t K = d.K, GW = gate_width(d);
  Prepared p;
  p.khat = c.take<float>(n_max * K);
  p.qhat = c.take<float>(n_max * K);
  p.alpha = c.take<float>(n_max * K);
  p.beta = c.take<float>(n_max);
  p.v = c.take<float>(n_max * d.V);
  p.kr = c.take<float>(K);
  p.g = c.take<float>(GW);
  p.bias = c.take<float>(GW);
  return p;
}
void prepare(const Prepared& p, const Inputs& in, const Dims& d, int64_t r, int64_t t0, int64_t n,
             int64_t h) {
  const int64_t K = d.K, V = d.V, GW = gate_width(d), kh = h / (d.HV / d.H);
  float ks;
  for (int64_t t = 0; t < n; ++t) {
    prep_keys(in, K, r, t0 + t, kh, p.kr, p.khat + t * K, &ks, p.qhat + t * K);
    prep_value(in, d, r, t0 + t, h, p.g, p.beta + t, p.v + t * V, p.bias);
    exp_vec(p.g, p.g, GW);
    expand(p.alpha + t * K, p.g, GW, K);
  }
}

// Scratch of a fold of up to L records of one value head: k̂ [L, K],
// g [L, GW], d [L, V], Hk [L, K] followed by En [K], E [L, GW].
struct FoldScratch {
  float *kh, *g, *dd, *Hk, *E;
};
FoldScratch carve_fold(Carver& c, const Dims& d) {
  const int64_t L = d.L, K = d.K, GW = gate_width(d);
  FoldScratch f;
  f.kh = c.take<float>(L * K);
  f.g = c.take<float>(L * GW);
  f.dd = c.take<float>(L * d.V);
  f.Hk = c.take<float>(L * K + K);
  f.E = c.take<float>(L * GW);
  return f;
}

void zero_outputs(const Tensor& o, const Dims& d, int64_t r, int64_t t0, int64_t n, int64_t h) {
  for (int64_t t = t0; t < t0 + n; ++t) zero_vec(o, off(o, r, t, h), d.V);
}

// Writes out[t][·] (n × V floats) to o rows (r, t0 + t, h).
void store_outputs(const Tensor& o, const float* out, const Dims& d, int64_t r, int64_t t0,
                   int64_t n, int64_t h) {
  for (int64_t t = 0; t < n; ++t) store_vec(o, off(o, r, t0 + t, h), d.V, out + t * d.V);
}

// f32 fold of value head h of slot s (checkpoint ⊕ `n` <= L records from
// start) into st [V*K].
template <DType SD>
void fold_into(const FoldScratch& f, const DeltaPool& pool, const Dims& d, int64_t s, int64_t h,
               int32_t start, int64_t n, float* st) {
  const int64_t K = d.K, V = d.V, GW = gate_width(d);
  for (int64_t v = 0; v < V; ++v) load_row<SD>(row_ptr<SD>(pool.state, s, h, v), st + v * K, K);
  if (n == 0) return;
  float* En = f.Hk + n * K;
  load_records(pool, d, s, h, start, n, f.kh, f.g, f.dd);
  fold_factors(f.kh, f.g, n, GW, K, f.Hk, En, f.E);
  for (int64_t v = 0; v < V; ++v) fold_row(st + v * K, En, f.Hk, f.dd, n, v, K, V);
}

constexpr int64_t PREFILL_CHUNK = 32;  // prompt tokens prepared at a time

// Per-thread scratch of each operation.
struct StepScratch {  // decode, snapshot decode
  Prepared p;
  float *row, *out;  // [K], [T, V]
};
StepScratch carve_step(Carver& c, const Dims& d) {
  StepScratch w;
  w.p = carve_tokens(c, d, d.T);
  w.row = c.take<float>(d.K);
  w.out = c.take<float>(d.T * d.V);
  return w;
}
struct PrefillScratch {
  Prepared p;
  FoldScratch f;
  float *st, *out;  // [V, K], [CHUNK, V]
};
PrefillScratch carve_prefill(Carver& c, const Dims& d) {
  PrefillScratch w;
  w.p = carve_tokens(c, d, PREFILL_CHUNK);
  w.f = carve_fold(c, d);
  w.st = c.take<float>(d.V * d.K);
  w.out = c.take<float>(PREFILL_CHUNK * d.V);
  return w;
}
struct StateScratch {  // materialize, flush
  FoldScratch f;
  float* st;  // [V, K]
};
StateScratch carve_state(Carver& c, const Dims& d) {
  StateScratch w;
  w.f = carve_fold(c, d);
  w.st = c.take<float>(d.V * d.K);
  return w;
}

template <class Carve> size_t measure(Carve&& carve, const Dims& d) {
  Carver c;
  carve(c, d);
  return c.used();
}

}  // namespace

WorkspacePlan workspace_plan(SsmOp op, const Dims& d, int threads) {
  WorkspacePlan plan;
  plan.threads = threads;
  switch (op) {
    case SsmOp::decode:
    case SsmOp::snapshot_decode: plan.per_thread = measure(carve_step, d); break;
    case SsmOp::prefill: plan.per_thread = measure(carve_prefill, d); break;
    case SsmOp::replay_step: return replay_workspace(d, threads);
    case SsmOp::materialize:
    case SsmOp::flush: plan.per_thread = measure(carve_state, d); break;
    default: break;  // commit, copy_slot, reset_slot: no scratch
  }
  return plan;
}

void decode(const DeltaStep& step, const Tensor& state, const Dims& d, const Exec& exec) {
  const Inputs in = inputs_of(step);
  const int threads = cpu_threads(exec.num_threads);
  const CallScratch cs(exec, workspace_plan(SsmOp::decode, d, threads));
  by_state_dtype(state.dtype, [&]<DType SD>() {
    parallel_for_workers(d.B * d.HV, threads, [&](int worker, int64_t task) {
      const int64_t b = task / d.HV, h = task % d.HV, K = d.K, V = d.V, T = d.T;
      const int64_t s = check::index_at(step.slot, b);
      if (s == step.pad_slot_id) return zero_outputs(step.o, d, b, 0, T, h);
      Carver c = cs.slab(worker);
      const StepScratch w = carve_step(c, d);
      const Prepared& p = w.p;
      prepare(p, in, d, b, 0, T, h);
      for (int64_t v = 0; v < V; ++v) {
        auto* ptr = row_ptr<SD>(state, s, h, v);
        load_row<SD>(ptr, w.row, K);
        for (int64_t t = 0; t < T; ++t)
          w.out[t * V + v] = row_token(w.row, p.alpha + t * K, p.khat + t * K, p.qhat + t * K,
                                       p.beta[t], p.v[t * V + v], K);
        store_row<SD>(ptr, w.row, K);
      }
      store_outputs(step.o, w.out, d, b, 0, T, h);
    });
  });
}

void snapshot_decode(const DeltaStep& step, const Tensor& state, const Tensor& idx,
                     const Tensor& num_accepted, const Dims& d, const Exec& exec) {
  const Inputs in = inputs_of(step);
  const int threads = cpu_threads(exec.num_threads);
  const CallScratch cs(exec, workspace_plan(SsmOp::snapshot_decode, d, threads));
  by_state_dtype(state.dtype, [&]<DType SD>() {
    parallel_for_workers(d.B * d.HV, threads, [&](int worker, int64_t task) {
      const int64_t b = task / d.HV, h = task % d.HV, K = d.K, V = d.V, T = d.T;
      if (check::index_at(idx, b, 0) == step.pad_slot_id) return zero_outputs(step.o, d, b, 0, T, h);
      const int64_t a = num_accepted.defined() ? check::index_at(num_accepted, b) : 1;
      const int64_t src = check::index_at(idx, b, a - 1);
      Carver c = cs.slab(worker);
      const StepScratch w = carve_step(c, d);
      const Prepared& p = w.p;
      prepare(p, in, d, b, 0, T, h);
      for (int64_t v = 0; v < V; ++v) {
        load_row<SD>(row_ptr<SD>(state, src, h, v), w.row, K);
        for (int64_t t = 0; t < T; ++t) {
          w.out[t * V + v] = row_token(w.row, p.alpha + t * K, p.khat + t * K, p.qhat + t * K,
                                       p.beta[t], p.v[t * V + v], K);
          const int64_t dst = check::index_at(idx, b, t);
          if (dst != step.pad_slot_id) store_row<SD>(row_ptr<SD>(state, dst, h, v), w.row, K);
        }
      }
      store_outputs(step.o, w.out, d, b, 0, T, h);
    });
  });
}

void prefill(const DeltaPrefill& pf, const DeltaPool& pool, const Dims& d, const Exec& exec) {
  const Inputs in = inputs_of(pf);
  const int threads = cpu_threads(exec.num_threads);
  const CallScratch cs(exec, workspace_plan(SsmOp::prefill, d, threads));
  by_state_dtype(pool.state.dtype, [&]<DType SD>() {
    parallel_for_workers(d.B * d.HV, threads, [&](int worker, int64_t task) {
      const int64_t b = task / d.HV, h = task % d.HV, K = d.K, V = d.V;
      const int64_t t0 = check::index_at(pf.cu_seqlens, b);
      const int64_t n = check::index_at(pf.cu_seqlens, b + 1) - t0;
      const int64_t s = check::index_at(pf.slot, b);
      if (s == pf.pad_slot_id) return zero_outputs(in.o, d, 0, t0, n, h);
      const bool init = pf.initial.defined() && check::index_at(pf.initial, b) != 0;
      Carver c = cs.slab(worker);
      const PrefillScratch w = carve_prefill(c, d);
      float* st = w.st;
      std::fill(st, st + V * K, 0.f);
      if (init) {
        const RingCursor cur = has_rings(pool) ? read_cursor(pool.cursor, s) : RingCursor{0, 0, 0};
        fold_into<SD>(w.f, pool, d, s, h, cur.start, cur.count, st);
      }
      const Prepared& p = w.p;
      for (int64_t c0 = 0; c0 < n; c0 += PREFILL_CHUNK) {
        const int64_t m = std::min(PREFILL_CHUNK, n - c0);
        prepare(p, in, d, 0, t0 + c0, m, h);
        for (int64_t v = 0; v < V; ++v)
          for (int64_t t = 0; t < m; ++t)
            w.out[t * V + v] = row_token(st + v * K, p.alpha + t * K, p.khat + t * K,
                                         p.qhat + t * K, p.beta[t], p.v[t * V + v], K);
        store_outputs(in.o, w.out, d, 0, t0 + c0, m, h);
      }
      for (int64_t v = 0; v < V; ++v) store_row<SD>(row_ptr<SD>(pool.state, s, h, v), st + v * K, K);
    });
  });
  if (pool.cursor.defined())
    for (int64_t b = 0; b < d.B; ++b) {
      const int64_t s = check::index_at(pf.slot, b);
      if (s == pf.pad_slot_id) continue;
      write_cursor(pool.cursor, s, RingCursor{read_cursor(pool.cursor, s).start, 0, 0});
    }
}

void commit(const DeltaPool& pool, const Tensor& slot, int64_t pad, const Tensor& num_accepted,
            const Dims&, const Exec&) {
  commit_rows(pool, slot, pad, num_accepted);
}

void materialize(const DeltaPool& pool, const Tensor& slot, int64_t pad, const Tensor& out,
                 const Dims& d, const Exec& exec) {
  const int threads = cpu_threads(exec.num_threads);
  const CallScratch cs(exec, workspace_plan(SsmOp::materialize, d, threads));
  by_state_dtype(pool.state.dtype, [&]<DType SD>() {
    parallel_for_workers(slot.shape[0] * d.HV, threads, [&](int worker, int64_t task) {
      const int64_t b = task / d.HV, h = task % d.HV, K = d.K, V = d.V;
      const int64_t s = check::index_at(slot, b);
      if (s == pad) {
        for (int64_t v = 0; v < V; ++v) zero_vec(out, off(out, b, h, v), K);
        return;
      }
      const RingCursor cur = has_rings(pool) ? read_cursor(pool.cursor, s) : RingCursor{0, 0, 0};
      Carver c = cs.slab(worker);
      const StateScratch w = carve_state(c, d);
      fold_into<SD>(w.f, pool, d, s, h, cur.start, cur.count, w.st);
      for (int64_t v = 0; v < V; ++v) store_vec(out, off(out, b, h, v), K, w.st + v * K);
    });
  });
}

void flush(const DeltaPool& pool, const Tensor& slot, int64_t pad, const Dims& d, const Exec& exec) {
  const int threads = cpu_threads(exec.num_threads);
  const CallScratch cs(exec, workspace_plan(SsmOp::flush, d, threads));
  by_state_dtype(pool.state.dtype, [&]<DType SD>() {
    parallel_for_workers(slot.shape[0] * d.HV, threads, [&](int worker, int64_t task) {
      const int64_t b = task / d.HV, h = task % d.HV, K = d.K, V = d.V;
      const int64_t s = check::index_at(slot, b);
      if (s == pad) return;
      const RingCursor cur = read_cursor(pool.cursor, s);
      if (cur.count == 0) return;
      Carver c = cs.slab(worker);
      const StateScratch w = carve_state(c, d);
      fold_into<SD>(w.f, pool, d, s, h, cur.start, cur.count, w.st);
      for (int64_t v = 0; v < V; ++v) store_row<SD>(row_ptr<SD>(pool.state, s, h, v), w.st + v * K, K);
    });
  });
  for (int64_t b = 0; b < slot.shape[0]; ++b) {
    const int64_t s = check::index_at(slot, b);
    if (s == pad) continue;
    RingCursor c = read_cursor(pool.cursor, s);
    c.start = ring_pos(c.start, c.count, int32_t(d.R));
    c.count = 0;
    write_cursor(pool.cursor, s, c);
  }
}

}  // namespace replayssm::delta::cpu
