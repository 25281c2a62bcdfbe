// Fast CPU backend, baselines and slot operations: standard decode, snapshot
// decode, prefill, commit, materialize, flush. fp32 arithmetic, state in
// f32 | f16 | bf16, parallel over (row, head). The replay step lives in
// cpu_replay.cpp. Scratch comes from the call's workspace (carve_* below
// describe each operation's slab).
#include <algorithm>

#include "core/parallel.h"
#include "mamba2/cpu_common.h"

namespace replayssm::mamba2::cpu {
namespace {

// Scratch of one (row, head) of decode / snapshot decode: the window inputs
// in fp32 (x [T, P], B and C [T, N], δ and a [T]), the running state row [N],
// outputs [T, P] before the epilogue, an output row and a z row [P], and the
// T destination rows of the state.
struct HeadScratch {
  float *x, *B, *C, *delta, *a, *row, *acc, *out, *z;
  void** dst;
};
HeadScratch carve_head(Carver& c, const Dims& d) {
  HeadScratch w;
  w.x = c.take<float>(d.T * d.P);
  w.B = c.take<float>(d.T * d.N);
  w.C = c.take<float>(d.T * d.N);
  w.delta = c.take<float>(d.T);
  w.a = c.take<float>(d.T);
  w.row = c.take<float>(d.N);
  w.acc = c.take<float>(d.T * d.P);
  w.out = c.take<float>(d.P);
  w.z = c.take<float>(d.P);
  w.dst = c.take<void*>(d.T);
  return w;
}

template <DType AD>
void load_window(HeadScratch& w, const Mamba2Step& s, int64_t b, int64_t h, const HeadParams& hp,
                 const Dims& d) {
  const int64_t g = h / (d.H / d.G);
  for (int64_t t = 0; t < d.T; ++t) {
    to_f32<AD>(ptr<const Elem<AD>>(s.x, off3(s.x, b, t, h)), &w.x[t * d.P], d.P);
    to_f32<AD>(ptr<const Elem<AD>>(s.Bm, off3(s.Bm, b, t, g)), &w.B[t * d.N], d.N);
    to_f32<AD>(ptr<const Elem<AD>>(s.Cm, off3(s.Cm, b, t, g)), &w.C[t * d.N], d.N);
    w.delta[t] = activate_dt(scalar(s.dt, off3(s.dt, b, t, h)), hp, s.dt_softplus);
    w.a[t] = std::exp(w.delta[t] * hp.A);
  }
}

// y[b, t, h, :] ← gate(acc + D x) for t < T, acc [T, P].
template <DType AD>
void write_outputs(const Mamba2Step& s, int64_t b, int64_t h, const HeadScratch& w,
                   const HeadParams& hp, const Dims& d) {
  for (int64_t t = 0; t < d.T; ++t) {
    const float* xt = &w.x[t * d.P];
    for (int64_t p = 0; p < d.P; ++p) w.out[p] = w.acc[t * d.P + p] + hp.D * xt[p];
    if (s.z.defined()) {
      to_f32<AD>(ptr<const Elem<AD>>(s.z, off3(s.z, b, t, h)), w.z, d.P);
      for (int64_t p = 0; p < d.P; ++p) w.out[p] = gate(w.out[p], w.z[p]);
    }
    from_f32<AD>(w.out, ptr<Elem<AD>>(s.y, off3(s.y, b, t, h)), d.P);
  }
}

template <DType AD> void zero_outputs(const Tensor& y, int64_t b, int64_t h, int64_t T, int64_t P) {
  for (int64_t t = 0; t < T; ++t) std::memset(ptr<Elem<AD>>(y, off3(y, b, t, h)), 0, size_t(P) * sizeof(Elem<AD>));
}

// Standard recurrence of row b, head h over the window, row by row of the
// state: reads slot `src`; after token t calls write(t, row, p) with the
// unrounded running row (snapshot) or only at the end (decode).
template <DType SD, DType AD, bool SNAPSHOT>
void run_head(HeadScratch& w, const Mamba2Step& s, const Tensor& state, int64_t src,
              const Tensor& idx, int64_t b, int64_t h, const Dims& d) {
  const HeadParams hp = head_params(s.A, s.dt_bias, s.D, h);
  load_window<AD>(w, s, b, h, hp, d);
  Elem<SD>** dst = reinterpret_cast<Elem<SD>**>(w.dst);
  for (int64_t t = 0; t < d.T; ++t) {
    const int64_t slot = SNAPSHOT ? check::index_at(idx, b, t) : src;
    dst[t] = ptr<Elem<SD>>(state, off2(state, slot, h));
  }
  const Elem<SD>* base = ptr<const Elem<SD>>(state, off2(state, src, h));
  for (int64_t p = 0; p < d.P; ++p) {
    to_f32<SD>(base + p * state.stride[2], w.row, d.N);
    for (int64_t t = 0; t < d.T; ++t) {
      const float* Bt = &w.B[t * d.N];
      scale_axpy(w.row, w.a[t], w.delta[t] * w.x[t * d.P + p], Bt, d.N);
      w.acc[t * d.P + p] = dot(w.row, &w.C[t * d.N], d.N);
      if (SNAPSHOT) from_f32<SD>(w.row, dst[t] + p * state.stride[2], d.N);
    }
    if (!SNAPSHOT) from_f32<SD>(w.row, dst[0] + p * state.stride[2], d.N);
  }
  write_outputs<AD>(s, b, h, w, hp, d);
}

// Scratch of one (prompt, head) of prefill: the whole head state [P, N] in
// fp32, token rows x [P], B and C [N], out and z [P], and the records of the
// row's committed history (initial = 1 on a replay pool, at most L).
struct PrefillScratch {
  float *S, *x, *Bt, *Ct, *out, *z;
  Records r;
};
PrefillScratch carve_prefill(Carver& c, const Dims& d) {
  PrefillScratch w;
  w.S = c.take<float>(d.P * d.N);
  w.x = c.take<float>(d.P);
  w.Bt = c.take<float>(d.N);
  w.Ct = c.take<float>(d.N);
  w.out = c.take<float>(d.P);
  w.z = c.take<float>(d.P);
  w.r = carve_records(c, d.L, d);
  return w;
}

// Scratch of one (slot, head) of materialize / flush: up to L records and a state row.
struct FoldScratch {
  Records r;
  float* row;
};
FoldScratch carve_fold(Carver& c, const Dims& d) {
  FoldScratch w;
  w.r = carve_records(c, d.L, d);
  w.row = c.take<float>(d.N);
  return w;
}

template <class Carve> size_t measure(Carve&& carve, const Dims& d) {
  Carver c;
  carve(c, d);
  return c.used();
}

int threads_of(const Exec& e) { return cpu_threads(e.num_threads); }

}  // namespace

WorkspacePlan workspace_plan(SsmOp op, const Dims& d, int threads) {
  WorkspacePlan plan;
  plan.threads = threads;
  switch (op) {
    case SsmOp::decode:
    case SsmOp::snapshot_decode: plan.per_thread = measure(carve_head, d); break;
    case SsmOp::prefill: plan.per_thread = measure(carve_prefill, d); break;
    case SsmOp::replay_step: return replay_workspace(d, threads);
    case SsmOp::materialize:
    case SsmOp::flush: plan.per_thread = measure(carve_fold, d); break;
    default: break;  // commit, copy_slot, reset_slot: no scratch
  }
  return plan;
}

void decode(const Mamba2Step& s, const Tensor& state, const Dims& d, const Exec& exec) {
  const int threads = threads_of(exec);
  const CallScratch cs(exec, workspace_plan(SsmOp::decode, d, threads));
  dispatch(state.dtype, s.x.dtype, [&]<DType SD, DType AD>() {
    parallel_for_workers(d.B * d.H, threads, [&](int worker, int64_t u) {
      const int64_t b = u / d.H, h = u % d.H;
      const int64_t slot = check::index_at(s.slot, b);
      if (slot == s.pad_slot_id) return zero_outputs<AD>(s.y, b, h, d.T, d.P);
      Carver c = cs.slab(worker);
      HeadScratch w = carve_head(c, d);
      run_head<SD, AD, false>(w, s, state, slot, Tensor{}, b, h, d);
    });
  });
}

void snapshot_decode(const Mamba2Step& s, const Tensor& state, const Tensor& idx,
                     const Tensor& num_accepted, const Dims& d, const Exec& exec) {
  const int threads = threads_of(exec);
  const CallScratch cs(exec, workspace_plan(SsmOp::snapshot_decode, d, threads));
  dispatch(state.dtype, s.x.dtype, [&]<DType SD, DType AD>() {
    parallel_for_workers(d.B * d.H, threads, [&](int worker, int64_t u) {
      const int64_t b = u / d.H, h = u % d.H;
      if (check::index_at(idx, b, 0) == s.pad_slot_id) return zero_outputs<AD>(s.y, b, h, d.T, d.P);
      const int64_t a = num_accepted.defined() ? check::index_at(num_accepted, b) : 1;
      Carver c = cs.slab(worker);
      HeadScratch w = carve_head(c, d);
      run_head<SD, AD, true>(w, s, state, check::index_at(idx, b, a - 1), idx, b, h, d);
    });
  });
}

void prefill(const Mamba2Prefill& p, const Mamba2Pool& pool, const Dims& d, const Exec& exec) {
  const bool ring = pool.cursor.defined();
  const int threads = threads_of(exec);
  const CallScratch cs(exec, workspace_plan(SsmOp::prefill, d, threads));
  dispatch(pool.state.dtype, p.x.dtype, [&]<DType SD, DType AD>() {
    parallel_for_workers(d.B * d.H, threads, [&](int worker, int64_t u) {
      const int64_t b = u / d.H, h = u % d.H, g = h / (d.H / d.G);
      const int64_t begin = check::index_at(p.cu_seqlens, b), end = check::index_at(p.cu_seqlens, b + 1);
      const int64_t slot = check::index_at(p.slot, b);
      if (slot == p.pad_slot_id) {
        for (int64_t i = begin; i < end; ++i)
          std::memset(ptr<Elem<AD>>(p.y, off2(p.y, i, h)), 0, size_t(d.P) * sizeof(Elem<AD>));
        return;
      }
      const HeadParams hp = head_params(p.A, p.dt_bias, p.D, h);
      Carver c = cs.slab(worker);
      PrefillScratch w = carve_prefill(c, d);
      // The whole head state in fp32 (tokens outer, rows inner).
      float* S = w.S;
      std::fill(S, S + d.P * d.N, 0.0f);
      Elem<SD>* st = ptr<Elem<SD>>(pool.state, off2(pool.state, slot, h));
      const int64_t rs = pool.state.stride[2];
      if (p.initial.defined() && check::index_at(p.initial, b) != 0) {
        Records& r = w.r;
        r.n = 0;
        if (ring) {
          const RingCursor cur = read_cursor(pool.cursor, slot);
          gather<AD>(r, pool, slot, h, g, hp.A, cur.start, cur.count, d);
          fold_weights(r);
        }
        for (int64_t q = 0; q < d.P; ++q) {
          to_f32<SD>(st + q * rs, &S[q * d.N], d.N);
          fold_row(&S[q * d.N], r, q, d);
        }
      }
      for (int64_t i = begin; i < end; ++i) {
        to_f32<AD>(ptr<const Elem<AD>>(p.x, off2(p.x, i, h)), w.x, d.P);
        to_f32<AD>(ptr<const Elem<AD>>(p.Bm, off2(p.Bm, i, g)), w.Bt, d.N);
        to_f32<AD>(ptr<const Elem<AD>>(p.Cm, off2(p.Cm, i, g)), w.Ct, d.N);
        const float delta = activate_dt(scalar(p.dt, off2(p.dt, i, h)), hp, p.dt_softplus);
        const float a = std::exp(delta * hp.A);
        for (int64_t q = 0; q < d.P; ++q) {
          float* row = &S[q * d.N];
          scale_axpy(row, a, delta * w.x[q], w.Bt, d.N);
          w.out[q] = dot(row, w.Ct, d.N) + hp.D * w.x[q];
        }
        if (p.z.defined()) {
          to_f32<AD>(ptr<const Elem<AD>>(p.z, off2(p.z, i, h)), w.z, d.P);
          for (int64_t q = 0; q < d.P; ++q) w.out[q] = gate(w.out[q], w.z[q]);
        }
        from_f32<AD>(w.out, ptr<Elem<AD>>(p.y, off2(p.y, i, h)), d.P);
      }
      for (int64_t q = 0; q < d.P; ++q) from_f32<SD>(&S[q * d.N], st + q * rs, d.N);
    });
  });
  if (ring)
    for (int64_t b = 0; b < d.B; ++b) {
      const int64_t slot = check::index_at(p.slot, b);
      if (slot == p.pad_slot_id) continue;
      write_cursor(pool.cursor, slot, RingCursor{read_cursor(pool.cursor, slot).start, 0, 0});
    }
}

void commit(const Mamba2Pool& pool, const Tensor& slot, int64_t pad, const Tensor& num_accepted,
            const Dims& d, const Exec&) {
  for (int64_t b = 0; b < d.B; ++b) {
    const int64_t s = check::index_at(slot, b);
    if (s == pad) continue;
    RingCursor c = read_cursor(pool.cursor, s);
    ring_commit(c, int32_t(check::index_at(num_accepted, b)));
    write_cursor(pool.cursor, s, c);
  }
}

namespace {

// Writes an fp32 row into `out` (any float dtype), one dtype switch per row.
void store_any(const Tensor& out, int64_t off, const float* row, int64_t n) {
  switch (out.dtype) {
    case DType::f32: return from_f32<DType::f32>(row, ptr<float>(out, off), n);
    case DType::f16: return from_f32<DType::f16>(row, ptr<uint16_t>(out, off), n);
    case DType::bf16: return from_f32<DType::bf16>(row, ptr<uint16_t>(out, off), n);
    case DType::f64:
      for (int64_t i = 0; i < n; ++i) ptr<double>(out, off)[i] = row[i];
      return;
    default: check::fail("mamba2_materialize", "out", "unsupported dtype");
  }
}

// Folds the committed records of (slot, h) row by row; emit(p, row) receives
// each folded fp32 row.
template <DType SD, DType AD, class Emit>
void fold_head(FoldScratch& w, const Mamba2Pool& pool, int64_t slot, int64_t h, const Dims& d,
               Emit&& emit) {
  Records& r = w.r;
  r.n = 0;
  if (pool.cursor.defined()) {
    const RingCursor c = read_cursor(pool.cursor, slot);
    const float A = ptr<const float>(pool.A, 0)[h * pool.A.stride[0]];
    gather<AD>(r, pool, slot, h, h / (d.H / d.G), A, c.start, c.count, d);
    fold_weights(r);
  }
  const Elem<SD>* st = ptr<const Elem<SD>>(pool.state, off2(pool.state, slot, h));
  for (int64_t p = 0; p < d.P; ++p) {
    to_f32<SD>(st + p * pool.state.stride[2], w.row, d.N);
    fold_row(w.row, r, p, d);
    emit(p, w.row);
  }
}

DType record_dtype(const Mamba2Pool& pool) {
  return pool.ring_x.defined() ? pool.ring_x.dtype : DType::f32;
}

}  // namespace

void materialize(const Mamba2Pool& pool, const Tensor& slot, int64_t pad, const Tensor& out,
                 const Dims& d, const Exec& exec) {
  const int threads = threads_of(exec);
  const CallScratch cs(exec, workspace_plan(SsmOp::materialize, d, threads));
  dispatch(pool.state.dtype, record_dtype(pool), [&]<DType SD, DType AD>() {
    parallel_for_workers(d.B * d.H, threads, [&](int worker, int64_t u) {
      const int64_t b = u / d.H, h = u % d.H, s = check::index_at(slot, b);
      if (s == pad) return;
      Carver c = cs.slab(worker);
      FoldScratch w = carve_fold(c, d);
      fold_head<SD, AD>(w, pool, s, h, d, [&](int64_t p, const float* row) {
        store_any(out, off3(out, b, h, p), row, d.N);
      });
    });
  });
}

void flush(const Mamba2Pool& pool, const Tensor& slot, int64_t pad, const Dims& d, const Exec& exec) {
  const int threads = threads_of(exec);
  const CallScratch cs(exec, workspace_plan(SsmOp::flush, d, threads));
  dispatch(pool.state.dtype, record_dtype(pool), [&]<DType SD, DType AD>() {
    parallel_for_workers(d.B * d.H, threads, [&](int worker, int64_t u) {
      const int64_t b = u / d.H, h = u % d.H, s = check::index_at(slot, b);
      if (s == pad) return;
      Elem<SD>* st = ptr<Elem<SD>>(pool.state, off2(pool.state, s, h));
      Carver c = cs.slab(worker);
      FoldScratch w = carve_fold(c, d);
      fold_head<SD, AD>(w, pool, s, h, d, [&](int64_t p, const float* row) {
        from_f32<SD>(row, st + p * pool.state.stride[2], d.N);
      });
    });
  });
  for (int64_t b = 0; b < d.B; ++b) {
    const int64_t s = check::index_at(slot, b);
    if (s == pad) continue;
    const RingCursor c = read_cursor(pool.cursor, s);
    write_cursor(pool.cursor, s, RingCursor{ring_pos(c.start, c.count, int32_t(d.R)), 0, 0});
  }
}

}  // namespace replayssm::mamba2::cpu
