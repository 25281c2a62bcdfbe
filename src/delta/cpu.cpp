// Fast delta CPU backend (fp32 arithmetic): standard decode, snapshot
// decode, prefill, commit, materialise, flush. The replay step is in
// cpu_replay.cpp. Work is split over (row, value head); every state row
// [K] is read once, carried through all tokens in registers / L1 and written
// once (the recurrence is separable over the V rows of a head's state).
#include "core/parallel.h"
#include "delta/cpu_kernels.h"

namespace replayssm::delta::cpu {
namespace {

// Prepared tokens of one (row, value head): k̂, q̂, α (expanded to K), β, v.
struct Prepared {
  float *khat, *qhat, *alpha, *beta, *v;
};
Prepared prepare(const Inputs& in, const Dims& d, int64_t r, int64_t t0, int64_t n, int64_t h) {
  const int64_t K = d.K, V = d.V, GW = gate_width(d), kh = h / (d.HV / d.H);
  Prepared p{scratch(0, n * K), scratch(1, n * K), scratch(2, n * K), scratch(3, n), scratch(4, n * V)};
  float* kr = scratch(5, K);
  float* g = scratch(6, GW);
  float ks;
  for (int64_t t = 0; t < n; ++t) {
    prep_keys(in, K, r, t0 + t, kh, kr, p.khat + t * K, &ks, p.qhat + t * K);
    prep_value(in, d, r, t0 + t, h, g, p.beta + t, p.v + t * V);
    exp_vec(g, g, GW);
    expand(p.alpha + t * K, g, GW, K);
  }
  return p;
}

void zero_outputs(const Tensor& o, const Dims& d, int64_t r, int64_t t0, int64_t n, int64_t h) {
  for (int64_t t = t0; t < t0 + n; ++t) zero_vec(o, off(o, r, t, h), d.V);
}

// Writes out[t][·] (n × V floats) to o rows (r, t0 + t, h).
void store_outputs(const Tensor& o, const float* out, const Dims& d, int64_t r, int64_t t0,
                   int64_t n, int64_t h) {
  for (int64_t t = 0; t < n; ++t) store_vec(o, off(o, r, t0 + t, h), d.V, out + t * d.V);
}

// f32 fold of value head h of slot s (checkpoint ⊕ `n` records from start)
// into st [V*K]. Uses scratch slots 7..10.
template <DType SD>
void fold_into(const DeltaPool& pool, const Dims& d, int64_t s, int64_t h, int32_t start,
               int64_t n, float* st) {
  const int64_t K = d.K, V = d.V, GW = gate_width(d);
  for (int64_t v = 0; v < V; ++v) load_row<SD>(row_ptr<SD>(pool.state, s, h, v), st + v * K, K);
  if (n == 0) return;
  float* kh = scratch(7, n * K);
  float* g = scratch(8, n * GW);
  float* dd = scratch(9, n * V);
  float* Hk = scratch(10, n * K + K);
  float* En = Hk + n * K;
  load_records(pool, d, s, h, start, n, kh, g, dd);
  fold_factors(kh, g, n, GW, K, Hk, En);
  for (int64_t v = 0; v < V; ++v) fold_row(st + v * K, En, Hk, dd, n, v, K, V);
}

}  // namespace

void decode(const DeltaStep& step, const Tensor& state, const Dims& d, int threads) {
  const Inputs in = inputs_of(step);
  by_state_dtype(state.dtype, [&]<DType SD>() {
    parallel_for(d.B * d.HV, cpu_threads(threads), [&](int64_t task) {
      const int64_t b = task / d.HV, h = task % d.HV, K = d.K, V = d.V, T = d.T;
      const int64_t s = check::index_at(step.slot, b);
      if (s == step.pad_slot_id) return zero_outputs(step.o, d, b, 0, T, h);
      const Prepared p = prepare(in, d, b, 0, T, h);
      float* row = scratch(5, K);
      float* out = scratch(6, T * V);
      for (int64_t v = 0; v < V; ++v) {
        auto* ptr = row_ptr<SD>(state, s, h, v);
        load_row<SD>(ptr, row, K);
        for (int64_t t = 0; t < T; ++t)
          out[t * V + v] = row_token(row, p.alpha + t * K, p.khat + t * K, p.qhat + t * K,
                                     p.beta[t], p.v[t * V + v], K);
        store_row<SD>(ptr, row, K);
      }
      store_outputs(step.o, out, d, b, 0, T, h);
    });
  });
}

void snapshot_decode(const DeltaStep& step, const Tensor& state, const Tensor& idx,
                     const Tensor& num_accepted, const Dims& d, int threads) {
  const Inputs in = inputs_of(step);
  by_state_dtype(state.dtype, [&]<DType SD>() {
    parallel_for(d.B * d.HV, cpu_threads(threads), [&](int64_t task) {
      const int64_t b = task / d.HV, h = task % d.HV, K = d.K, V = d.V, T = d.T;
      if (check::index_at(idx, b, 0) == step.pad_slot_id) return zero_outputs(step.o, d, b, 0, T, h);
      const int64_t a = num_accepted.defined() ? check::index_at(num_accepted, b) : 1;
      const int64_t src = check::index_at(idx, b, a - 1);
      const Prepared p = prepare(in, d, b, 0, T, h);
      float* row = scratch(5, K);
      float* out = scratch(6, T * V);
      for (int64_t v = 0; v < V; ++v) {
        load_row<SD>(row_ptr<SD>(state, src, h, v), row, K);
        for (int64_t t = 0; t < T; ++t) {
          out[t * V + v] = row_token(row, p.alpha + t * K, p.khat + t * K, p.qhat + t * K,
                                     p.beta[t], p.v[t * V + v], K);
          const int64_t dst = check::index_at(idx, b, t);
          if (dst != step.pad_slot_id) store_row<SD>(row_ptr<SD>(state, dst, h, v), row, K);
        }
      }
      store_outputs(step.o, out, d, b, 0, T, h);
    });
  });
}

void prefill(const DeltaPrefill& pf, const DeltaPool& pool, const Dims& d, int threads) {
  const Inputs in = inputs_of(pf);
  constexpr int64_t CHUNK = 32;
  by_state_dtype(pool.state.dtype, [&]<DType SD>() {
    parallel_for(d.B * d.HV, cpu_threads(threads), [&](int64_t task) {
      const int64_t b = task / d.HV, h = task % d.HV, K = d.K, V = d.V;
      const int64_t t0 = check::index_at(pf.cu_seqlens, b);
      const int64_t n = check::index_at(pf.cu_seqlens, b + 1) - t0;
      const int64_t s = check::index_at(pf.slot, b);
      if (s == pf.pad_slot_id) return zero_outputs(in.o, d, 0, t0, n, h);
      const bool init = pf.initial.defined() && check::index_at(pf.initial, b) != 0;
      std::vector<float> st(size_t(V * K), 0.f);
      if (init) {
        const RingCursor c = has_rings(pool) ? read_cursor(pool.cursor, s) : RingCursor{0, 0, 0};
        fold_into<SD>(pool, d, s, h, c.start, c.count, st.data());
      }
      std::vector<float> out(size_t(CHUNK * V));
      for (int64_t c0 = 0; c0 < n; c0 += CHUNK) {
        const int64_t m = std::min(CHUNK, n - c0);
        const Prepared p = prepare(in, d, 0, t0 + c0, m, h);
        for (int64_t v = 0; v < V; ++v)
          for (int64_t t = 0; t < m; ++t)
            out[size_t(t * V + v)] = row_token(st.data() + v * K, p.alpha + t * K, p.khat + t * K,
                                               p.qhat + t * K, p.beta[t], p.v[t * V + v], K);
        store_outputs(in.o, out.data(), d, 0, t0 + c0, m, h);
      }
      for (int64_t v = 0; v < V; ++v) store_row<SD>(row_ptr<SD>(pool.state, s, h, v), st.data() + v * K, K);
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
            const Dims&, int) {
  commit_rows(pool, slot, pad, num_accepted);
}

void materialize(const DeltaPool& pool, const Tensor& slot, int64_t pad, const Tensor& out,
                 const Dims& d, int threads) {
  by_state_dtype(pool.state.dtype, [&]<DType SD>() {
    parallel_for(slot.shape[0] * d.HV, cpu_threads(threads), [&](int64_t task) {
      const int64_t b = task / d.HV, h = task % d.HV, K = d.K, V = d.V;
      const int64_t s = check::index_at(slot, b);
      if (s == pad) {
        for (int64_t v = 0; v < V; ++v) zero_vec(out, off(out, b, h, v), K);
        return;
      }
      const RingCursor c = has_rings(pool) ? read_cursor(pool.cursor, s) : RingCursor{0, 0, 0};
      std::vector<float> st(size_t(V * K));
      fold_into<SD>(pool, d, s, h, c.start, c.count, st.data());
      for (int64_t v = 0; v < V; ++v) store_vec(out, off(out, b, h, v), K, st.data() + v * K);
    });
  });
}

void flush(const DeltaPool& pool, const Tensor& slot, int64_t pad, const Dims& d, int threads) {
  by_state_dtype(pool.state.dtype, [&]<DType SD>() {
    parallel_for(slot.shape[0] * d.HV, cpu_threads(threads), [&](int64_t task) {
      const int64_t b = task / d.HV, h = task % d.HV, K = d.K, V = d.V;
      const int64_t s = check::index_at(slot, b);
      if (s == pad) return;
      const RingCursor c = read_cursor(pool.cursor, s);
      if (c.count == 0) return;
      std::vector<float> st(size_t(V * K));
      fold_into<SD>(pool, d, s, h, c.start, c.count, st.data());
      for (int64_t v = 0; v < V; ++v) store_row<SD>(row_ptr<SD>(pool.state, s, h, v), st.data() + v * K, K);
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
