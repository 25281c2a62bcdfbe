// Fast CPU backend, baselines and slot operations: standard decode, snapshot
// decode, prefill, commit, materialize, flush. fp32 arithmetic, state in
// f32 | f16 | bf16, parallel over (row, head). The replay step lives in
// cpu_replay.cpp.
#include <algorithm>
#include <vector>

#include "core/parallel.h"
#include "mamba2/cpu_common.h"

namespace replayssm::mamba2::cpu {
namespace {

// A head's window inputs in fp32: x [T, P], B and C [T, N], δ and a [T].
struct Window {
  std::vector<float> x, B, C, delta, a;
};

template <DType AD>
void load_window(Window& w, const Mamba2Step& s, int64_t b, int64_t h, const HeadParams& hp,
                 const Dims& d) {
  const int64_t g = h / (d.H / d.G);
  w.x.resize(size_t(d.T * d.P));
  w.B.resize(size_t(d.T * d.N));
  w.C.resize(size_t(d.T * d.N));
  w.delta.resize(size_t(d.T));
  w.a.resize(size_t(d.T));
  for (int64_t t = 0; t < d.T; ++t) {
    to_f32<AD>(ptr<const Elem<AD>>(s.x, off3(s.x, b, t, h)), &w.x[size_t(t * d.P)], d.P);
    to_f32<AD>(ptr<const Elem<AD>>(s.Bm, off3(s.Bm, b, t, g)), &w.B[size_t(t * d.N)], d.N);
    to_f32<AD>(ptr<const Elem<AD>>(s.Cm, off3(s.Cm, b, t, g)), &w.C[size_t(t * d.N)], d.N);
    w.delta[size_t(t)] = activate_dt(scalar(s.dt, off3(s.dt, b, t, h)), hp, s.dt_softplus);
    w.a[size_t(t)] = std::exp(w.delta[size_t(t)] * hp.A);
  }
}

// y[b, t, h, :] ← gate(acc + D x) for t < T, acc [T, P].
template <DType AD>
void write_outputs(const Mamba2Step& s, int64_t b, int64_t h, const float* acc, const Window& w,
                   const HeadParams& hp, const Dims& d, std::vector<float>& zbuf) {
  zbuf.resize(size_t(d.P));
  std::vector<float> out(size_t(d.P));
  for (int64_t t = 0; t < d.T; ++t) {
    const float* xt = &w.x[size_t(t * d.P)];
    for (int64_t p = 0; p < d.P; ++p) out[size_t(p)] = acc[t * d.P + p] + hp.D * xt[p];
    if (s.z.defined()) {
      to_f32<AD>(ptr<const Elem<AD>>(s.z, off3(s.z, b, t, h)), zbuf.data(), d.P);
      for (int64_t p = 0; p < d.P; ++p) out[size_t(p)] = gate(out[size_t(p)], zbuf[size_t(p)]);
    }
    from_f32<AD>(out.data(), ptr<Elem<AD>>(s.y, off3(s.y, b, t, h)), d.P);
  }
}

template <DType AD> void zero_outputs(const Tensor& y, int64_t b, int64_t h, int64_t T, int64_t P) {
  for (int64_t t = 0; t < T; ++t) std::memset(ptr<Elem<AD>>(y, off3(y, b, t, h)), 0, size_t(P) * sizeof(Elem<AD>));
}

// Standard recurrence of row b, head h over the window, row by row of the
// state: reads slot `src`; after token t calls write(t, row, p) with the
// unrounded running row (snapshot) or only at the end (decode).
template <DType SD, DType AD, bool SNAPSHOT>
void run_head(const Mamba2Step& s, const Tensor& state, int64_t src, const Tensor& idx, int64_t b,
              int64_t h, const Dims& d) {
  const HeadParams hp = head_params(s.A, s.dt_bias, s.D, h);
  Window w;
  load_window<AD>(w, s, b, h, hp, d);
  std::vector<float> row(size_t(d.N)), acc(size_t(d.T * d.P)), zbuf;
  std::vector<Elem<SD>*> dst(size_t(d.T));
  for (int64_t t = 0; t < d.T; ++t) {
    const int64_t slot = SNAPSHOT ? check::index_at(idx, b, t) : src;
    dst[size_t(t)] = ptr<Elem<SD>>(state, off2(state, slot, h));
  }
  const Elem<SD>* base = ptr<const Elem<SD>>(state, off2(state, src, h));
  for (int64_t p = 0; p < d.P; ++p) {
    to_f32<SD>(base + p * state.stride[2], row.data(), d.N);
    for (int64_t t = 0; t < d.T; ++t) {
      const float* Bt = &w.B[size_t(t * d.N)];
      scale_axpy(row.data(), w.a[size_t(t)], w.delta[size_t(t)] * w.x[size_t(t * d.P + p)], Bt, d.N);
      acc[size_t(t * d.P + p)] = dot(row.data(), &w.C[size_t(t * d.N)], d.N);
      if (SNAPSHOT) from_f32<SD>(row.data(), dst[size_t(t)] + p * state.stride[2], d.N);
    }
    if (!SNAPSHOT) from_f32<SD>(row.data(), dst[0] + p * state.stride[2], d.N);
  }
  write_outputs<AD>(s, b, h, acc.data(), w, hp, d, zbuf);
}

}  // namespace

void decode(const Mamba2Step& s, const Tensor& state, const Dims& d, int threads) {
  dispatch(state.dtype, s.x.dtype, [&]<DType SD, DType AD>() {
    parallel_for(d.B * d.H, threads, [&](int64_t u) {
      const int64_t b = u / d.H, h = u % d.H;
      const int64_t slot = check::index_at(s.slot, b);
      if (slot == s.pad_slot_id) return zero_outputs<AD>(s.y, b, h, d.T, d.P);
      run_head<SD, AD, false>(s, state, slot, Tensor{}, b, h, d);
    });
  });
}

void snapshot_decode(const Mamba2Step& s, const Tensor& state, const Tensor& idx,
                     const Tensor& num_accepted, const Dims& d, int threads) {
  dispatch(state.dtype, s.x.dtype, [&]<DType SD, DType AD>() {
    parallel_for(d.B * d.H, threads, [&](int64_t u) {
      const int64_t b = u / d.H, h = u % d.H;
      if (check::index_at(idx, b, 0) == s.pad_slot_id) return zero_outputs<AD>(s.y, b, h, d.T, d.P);
      const int64_t a = num_accepted.defined() ? check::index_at(num_accepted, b) : 1;
      run_head<SD, AD, true>(s, state, check::index_at(idx, b, a - 1), idx, b, h, d);
    });
  });
}

void prefill(const Mamba2Prefill& p, const Mamba2Pool& pool, const Dims& d, int threads) {
  const bool ring = pool.cursor.defined();
  dispatch(pool.state.dtype, p.x.dtype, [&]<DType SD, DType AD>() {
    parallel_for(d.B * d.H, threads, [&](int64_t u) {
      const int64_t b = u / d.H, h = u % d.H, g = h / (d.H / d.G);
      const int64_t begin = check::index_at(p.cu_seqlens, b), end = check::index_at(p.cu_seqlens, b + 1);
      const int64_t slot = check::index_at(p.slot, b);
      if (slot == p.pad_slot_id) {
        for (int64_t i = begin; i < end; ++i)
          std::memset(ptr<Elem<AD>>(p.y, off2(p.y, i, h)), 0, size_t(d.P) * sizeof(Elem<AD>));
        return;
      }
      const HeadParams hp = head_params(p.A, p.dt_bias, p.D, h);
      // The whole head state in fp32 (tokens outer, rows inner).
      std::vector<float> S(size_t(d.P * d.N), 0.0f), x(size_t(d.P)), Bt(size_t(d.N)),
          Ct(size_t(d.N)), out(size_t(d.P)), z(size_t(d.P));
      Elem<SD>* st = ptr<Elem<SD>>(pool.state, off2(pool.state, slot, h));
      const int64_t rs = pool.state.stride[2];
      if (p.initial.defined() && check::index_at(p.initial, b) != 0) {
        Records r;
        FoldWeights f;
        if (ring) {
          const RingCursor c = read_cursor(pool.cursor, slot);
          gather<AD>(r, pool, slot, h, g, hp.A, c.start, c.count, d);
          fold_weights(r, f);
        }
        for (int64_t q = 0; q < d.P; ++q) {
          to_f32<SD>(st + q * rs, &S[size_t(q * d.N)], d.N);
          fold_row(&S[size_t(q * d.N)], r, f, q, d);
        }
      }
      for (int64_t i = begin; i < end; ++i) {
        to_f32<AD>(ptr<const Elem<AD>>(p.x, off2(p.x, i, h)), x.data(), d.P);
        to_f32<AD>(ptr<const Elem<AD>>(p.Bm, off2(p.Bm, i, g)), Bt.data(), d.N);
        to_f32<AD>(ptr<const Elem<AD>>(p.Cm, off2(p.Cm, i, g)), Ct.data(), d.N);
        const float delta = activate_dt(scalar(p.dt, off2(p.dt, i, h)), hp, p.dt_softplus);
        const float a = std::exp(delta * hp.A);
        for (int64_t q = 0; q < d.P; ++q) {
          float* row = &S[size_t(q * d.N)];
          scale_axpy(row, a, delta * x[size_t(q)], Bt.data(), d.N);
          out[size_t(q)] = dot(row, Ct.data(), d.N) + hp.D * x[size_t(q)];
        }
        if (p.z.defined()) {
          to_f32<AD>(ptr<const Elem<AD>>(p.z, off2(p.z, i, h)), z.data(), d.P);
          for (int64_t q = 0; q < d.P; ++q) out[size_t(q)] = gate(out[size_t(q)], z[size_t(q)]);
        }
        from_f32<AD>(out.data(), ptr<Elem<AD>>(p.y, off2(p.y, i, h)), d.P);
      }
      for (int64_t q = 0; q < d.P; ++q) from_f32<SD>(&S[size_t(q * d.N)], st + q * rs, d.N);
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
            const Dims& d, int) {
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
void fold_head(const Mamba2Pool& pool, int64_t slot, int64_t h, const Dims& d, Emit&& emit) {
  const bool ring = pool.cursor.defined();
  Records r;
  FoldWeights f;
  if (ring) {
    const RingCursor c = read_cursor(pool.cursor, slot);
    const float A = ptr<const float>(pool.A, 0)[h * pool.A.stride[0]];
    gather<AD>(r, pool, slot, h, h / (d.H / d.G), A, c.start, c.count, d);
    fold_weights(r, f);
  }
  std::vector<float> row(size_t(d.N));
  const Elem<SD>* st = ptr<const Elem<SD>>(pool.state, off2(pool.state, slot, h));
  for (int64_t p = 0; p < d.P; ++p) {
    to_f32<SD>(st + p * pool.state.stride[2], row.data(), d.N);
    fold_row(row.data(), r, f, p, d);
    emit(p, row.data());
  }
}

DType record_dtype(const Mamba2Pool& pool) {
  return pool.ring_x.defined() ? pool.ring_x.dtype : DType::f32;
}

}  // namespace

void materialize(const Mamba2Pool& pool, const Tensor& slot, int64_t pad, const Tensor& out,
                 const Dims& d, int threads) {
  dispatch(pool.state.dtype, record_dtype(pool), [&]<DType SD, DType AD>() {
    parallel_for(d.B * d.H, threads, [&](int64_t u) {
      const int64_t b = u / d.H, h = u % d.H, s = check::index_at(slot, b);
      if (s == pad) return;
      fold_head<SD, AD>(pool, s, h, d, [&](int64_t p, const float* row) {
        store_any(out, off3(out, b, h, p), row, d.N);
      });
    });
  });
}

void flush(const Mamba2Pool& pool, const Tensor& slot, int64_t pad, const Dims& d, int threads) {
  dispatch(pool.state.dtype, record_dtype(pool), [&]<DType SD, DType AD>() {
    parallel_for(d.B * d.H, threads, [&](int64_t u) {
      const int64_t b = u / d.H, h = u % d.H, s = check::index_at(slot, b);
      if (s == pad) return;
      Elem<SD>* st = ptr<Elem<SD>>(pool.state, off2(pool.state, s, h));
      fold_head<SD, AD>(pool, s, h, d, [&](int64_t p, const float* row) {
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
