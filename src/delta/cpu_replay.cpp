// Fast CPU replay step (fp32), design/replay.md §2-3 in the output-only form.
// One task per (row, key head) serves its HV/H value heads, so the key-head
// products (k̂_j·u for GDN, window keys, ring_k / ring_ks appends) are made
// once. Per value head h, window tokens t = 0..T−1, u ∈ {k̂_t, q̂_t}:
//   P_u = S_0 (e^{Λ_t} ⊙ u)                               one pass over S_0
//   a_u = P_u + Σ_{j<c} ((E_j ⊙ k̂_j)·(e^{Λ_t−Λ_c} ⊙ u)) d_j     committed history
//             + Σ_{t'<t} ((e^{Λ_t−Λ_t'} ⊙ k̂_t')·u) d_t'          earlier window tokens
//   d_t = β_t (v_t − a_k), rounded to ring_d's dtype;  o_t = a_q + (k̂_t·q̂_t) d_t
// with E_j = e^{Λ_c−Λ_j}. A flushing step first folds its committed records
// row by row (S_w = S_0 Diag(e^{Λ_c}) + Σ_j d_j (E_j ⊙ k̂_j)ᵀ), writes the row
// of the new checkpoint, and uses the stored row for P_u in the same pass
// (history empty afterwards). A non-flushing step never writes the checkpoint.
#include "core/parallel.h"
#include "delta/cpu_kernels.h"

namespace replayssm::delta::cpu {
namespace {

// Prefetches elements [o, o + n) of t into L1.
inline void prefetch(const Tensor& t, int64_t o, int64_t n) {
  const int64_t es = int64_t(dtype_size(t.dtype));
  const char* p = static_cast<const char*>(t.data) + o * es;
  for (int64_t c = 0; c < n * es; c += 64) _mm_prefetch(p + c, _MM_HINT_T0);
}

struct RowPlan {
  int64_t slot;
  StepPlan plan;
};

// Scratch of one (row, key head) task, for up to L records read and T window
// tokens (GW = gate width, 1 for GDN, K for KDA).
struct TaskScratch {
  float *kw, *qw, *kr, *kj, *gj, *dj, *KK, *WK, *WQ, *gw, *cum, *beta, *vw, *Hk, *U, *P, *row,
      *dwin, *ew, *tmp, *out, *E, *ewk, *bias;
};
TaskScratch carve_task(Carver& c, const Dims& d) {
  const int64_t K = d.K, V = d.V, T = d.T, L = d.L, GW = gate_width(d);
  TaskScratch w;
  w.kw = c.take<float>(T * K);        // k̂_t
  w.qw = c.take<float>(T * K);        // q̂_t
  w.kr = c.take<float>(K);            // raw k
  w.kj = c.take<float>(L * K);        // record keys k̂_j
  w.gj = c.take<float>(L * GW);       // record log-decays
  w.dj = c.take<float>(L * V);        // record d_j
  w.KK = c.take<float>(L * 2 * T);    // GDN history products
  w.WK = c.take<float>(T * T);        // GDN window products
  w.WQ = c.take<float>(T * T);
  w.gw = c.take<float>(T * GW);       // window log-decays
  w.cum = c.take<float>(T * GW);      // Σ_{i<=t} g_i
  w.beta = c.take<float>(T);
  w.vw = c.take<float>(T * V);
  w.Hk = c.take<float>(L * K + K);    // E_j ⊙ k̂_j, then e^{Λ_c}
  w.U = c.take<float>(2 * T * K);     // GEMV vectors
  w.P = c.take<float>(2 * T * V);     // GEMV results
  w.row = c.take<float>(K);
  w.dwin = c.take<float>(T * V);      // window d_t
  w.ew = c.take<float>(T * K);        // e^{Λ_t − Λ_c}
  w.tmp = c.take<float>(K);
  w.out = c.take<float>(T * V);
  w.E = c.take<float>(L * GW);        // E_j
  w.ewk = c.take<float>(2 * T * K);   // KDA: ew_t ⊙ k̂_t, ew_t ⊙ q̂_t
  w.bias = c.take<float>(GW);         // dt_bias of a value head
  return w;
}

template <DType SD>
void replay_task(const TaskScratch& ws, const DeltaStep& step, const Inputs& in,
                 const DeltaPool& pool, const Dims& d, const RowPlan& rp, int64_t b, int64_t kh) {
  const int64_t K = d.K, V = d.V, T = d.T, GW = gate_width(d), G = d.HV / d.H;
  const int32_t R = int32_t(d.R);
  const int64_t s = rp.slot;
  const StepPlan& p = rp.plan;
  const bool kda = d.family == DeltaFamily::kda;
  // Records read: the folded ones when flushing, else the committed history.
  const int64_t n = p.flush ? p.fold_count : p.hist_count;
  const int32_t rstart = p.flush ? p.fold_start : p.hist_start;

  // Start the scattered record reads (one row per record and head) and the
  // first state rows early, so their latency overlaps the window preparation.
  for (int64_t j = 0; j < n; ++j) {
    const int64_t pos = ring_pos(rstart, int32_t(j), R);
    prefetch(pool.ring_k, off(pool.ring_k, s, pos, kh), K);
    for (int64_t h = kh * G; h < (kh + 1) * G; ++h) {
      prefetch(pool.ring_g, kda ? off(pool.ring_g, s, pos, h, 0) : off(pool.ring_g, s, pos, h), GW);
      prefetch(pool.ring_d, off(pool.ring_d, s, pos, h), V);
    }
  }
  prefetch(pool.state, off(pool.state, s, kh * G, 0), 4 * K);
  // Key-head window inputs and appends.
  float* kw = ws.kw;
  float* qw = ws.qw;
  float* kr = ws.kr;
  for (int64_t t = 0; t < T; ++t) {
    float ks;
    prep_keys(in, K, b, t, kh, kr, kw + t * K, &ks, qw + t * K);
    const int64_t pos = ring_pos(p.append_start, int32_t(t), R);
    copy_raw(pool.ring_k, off(pool.ring_k, s, pos, kh), step.k, off(step.k, b, t, kh), K);
    store_vec(pool.ring_ks, off(pool.ring_ks, s, pos, kh), 1, &ks);
  }
  // Record keys k̂_j (shared by the value heads).
  float* kj = ws.kj;
  float* gj = ws.gj;
  float* dj = ws.dj;
  if (n) load_records(pool, d, s, kh * G, rstart, n, kj, gj, nullptr);
  // GDN: gate-free products shared across value heads: history KK[j][2t+{0,1}]
  // = k̂_j·{k̂_t, q̂_t}; window WK[t'][t] = k̂_t'·k̂_t, WQ[t'][t] = k̂_t'·q̂_t.
  float* KK = ws.KK;
  float* WK = ws.WK;
  float* WQ = ws.WQ;
  if (!kda) {
    if (!p.flush)
      for (int64_t j = 0; j < n; ++j)
        for (int64_t t = 0; t < T; ++t) {
          KK[j * 2 * T + 2 * t] = dot(kj + j * K, kw + t * K, K);
          KK[j * 2 * T + 2 * t + 1] = dot(kj + j * K, qw + t * K, K);
        }
    for (int64_t t = 0; t < T; ++t)
      for (int64_t u = 0; u <= t; ++u) {
        WK[u * T + t] = dot(kw + u * K, kw + t * K, K);
        WQ[u * T + t] = dot(kw + u * K, qw + t * K, K);
      }
  }

  float *gw = ws.gw, *cum = ws.cum, *beta = ws.beta, *vw = ws.vw, *Hk = ws.Hk, *U = ws.U,
        *P = ws.P, *row = ws.row, *dwin = ws.dwin, *ew = ws.ew, *tmp = ws.tmp, *out = ws.out,
        *E = ws.E, *ewk = ws.ewk;
  float* Ec = Hk + n * K;                 // e^{Λ_c} (expanded to K)

  for (int64_t h = kh * G; h < (kh + 1) * G; ++h) {
    for (int64_t t = 0; t < T; ++t) {
      prep_value(in, d, b, t, h, gw + t * GW, beta + t, vw + t * V, ws.bias);
      const int64_t pos = ring_pos(p.append_start, int32_t(t), R);
      if (kda) store_vec(pool.ring_g, off(pool.ring_g, s, pos, h, 0), K, gw + t * GW);
      else store_vec(pool.ring_g, off(pool.ring_g, s, pos, h), 1, gw + t * GW);
      for (int64_t i = 0; i < GW; ++i) cum[t * GW + i] = (t ? cum[(t - 1) * GW + i] : 0.f) + gw[t * GW + i];
      exp_vec(tmp, cum + t * GW, GW);
      expand(ew + t * K, tmp, GW, K);
    }
    // Record factors: E_j = e^{Λ_c−Λ_j}, Hk_j = E_j ⊙ k̂_j, Ec = e^{Λ_c}.
    if (n) {
      load_records(pool, d, s, h, rstart, n, nullptr, gj, dj);
      suffix_decays(gj, n, GW, E, tmp);
      expand(Ec, tmp, GW, K);
      if (kda) mul(Hk, E, kj, n * K);
      else
        for (int64_t j = 0; j < n; ++j)
          for (int64_t i = 0; i < K; ++i) Hk[j * K + i] = E[j] * kj[j * K + i];
    } else {
      std::fill(Ec, Ec + K, 1.f);
    }
    // GEMV vectors U_{2t} = scale_t ⊙ k̂_t, U_{2t+1} = scale_t ⊙ q̂_t with
    // scale_t = e^{Λ_t} relative to the checkpoint the pass reads.
    for (int64_t t = 0; t < T; ++t) {
      const float* sc = ew + t * K;
      if (!p.flush) { mul(tmp, ew + t * K, Ec, K); sc = tmp; }
      mul(U + 2 * t * K, sc, kw + t * K, K);
      mul(U + (2 * t + 1) * K, sc, qw + t * K, K);
    }
    // One pass over the checkpoint rows (fp32 state is read in place); rows
    // v + 4 are prefetched (a head's V rows are contiguous in the pool).
    for (int64_t v = 0; v < V; ++v) {
      auto* ptr = row_ptr<SD>(pool.state, s, h, v);
      if (v + 4 < V) {
        const char* pf = reinterpret_cast<const char*>(row_ptr<SD>(pool.state, s, h, v + 4));
        for (int64_t c = 0; c < K * int64_t(sizeof(*ptr)); c += 64) _mm_prefetch(pf + c, _MM_HINT_T0);
      }
      const float* r = row;
      if constexpr (SD == DType::f32) {
        if (p.flush && n) fold_row(ptr, Ec, Hk, dj, n, v, K, V);
        r = ptr;
      } else {
        load_row<SD>(ptr, row, K);
        if (p.flush && n) {
          fold_row(row, Ec, Hk, dj, n, v, K, V);
          store_row<SD>(ptr, row, K);
          load_row<SD>(ptr, row, K);  // continue from the stored checkpoint
        }
      }
      for (int64_t u = 0; u < 2 * T; u += 2) dot2(r, U + u * K, U + (u + 1) * K, K, P + u * V + v, P + (u + 1) * V + v);
    }
    // Committed history (non-flushing steps).
    if (!p.flush) {
      if (kda)
        for (int64_t t = 0; t < T; ++t) {
          mul(ewk + 2 * t * K, ew + t * K, kw + t * K, K);
          mul(ewk + (2 * t + 1) * K, ew + t * K, qw + t * K, K);
        }
      for (int64_t j = 0; j < n; ++j) {
        const float* dvec = dj + j * V;
        for (int64_t t = 0; t < T; ++t) {
          float wk, wq;
          if (kda) {
            dot2(Hk + j * K, ewk + 2 * t * K, ewk + (2 * t + 1) * K, K, &wk, &wq);
          } else {
            const float dec = ew[t * K] * E[j];
            wk = dec * KK[j * 2 * T + 2 * t];
            wq = dec * KK[j * 2 * T + 2 * t + 1];
          }
          axpy(P + 2 * t * V, wk, dvec, V);
          axpy(P + (2 * t + 1) * V, wq, dvec, V);
        }
      }
    }
    // Window tokens in order.
    for (int64_t t = 0; t < T; ++t) {
      float* ak = P + 2 * t * V;
      float* aq = P + (2 * t + 1) * V;
      for (int64_t u = 0; u < t; ++u) {
        float wk, wq;
        if (kda) {
          for (int64_t i = 0; i < K; ++i) tmp[i] = cum[t * K + i] - cum[u * K + i];
          exp_vec(tmp, tmp, K);
          for (int64_t i = 0; i < K; ++i) tmp[i] *= kw[u * K + i];
          dot2(tmp, kw + t * K, qw + t * K, K, &wk, &wq);
        } else {
          const float dec = fast_exp(cum[t] - cum[u]);
          wk = dec * WK[u * T + t];
          wq = dec * WQ[u * T + t];
        }
        axpy(ak, wk, dwin + u * V, V);
        axpy(aq, wq, dwin + u * V, V);
      }
      const int64_t pos = ring_pos(p.append_start, int32_t(t), R);
      float* dt = dwin + t * V;
      for (int64_t v = 0; v < V; ++v) dt[v] = beta[t] * (vw[t * V + v] - ak[v]);
      store_vec(pool.ring_d, off(pool.ring_d, s, pos, h), V, dt);
      load_vec(pool.ring_d, off(pool.ring_d, s, pos, h), V, dt);  // later reads see the stored value
      const float kq = kda ? dot(kw + t * K, qw + t * K, K) : WQ[t * T + t];
      for (int64_t v = 0; v < V; ++v) out[t * V + v] = aq[v] + kq * dt[v];
    }
    for (int64_t t = 0; t < T; ++t) store_vec(step.o, off(step.o, b, t, h), V, out + t * V);
  }
}

}  // namespace

WorkspacePlan replay_workspace(const Dims& d, int threads) {
  WorkspacePlan plan;
  plan.threads = threads;
  Carver shared, slab;
  shared.take<RowPlan>(d.B);
  carve_task(slab, d);
  plan.shared = shared.used();
  plan.per_thread = slab.used();
  return plan;
}

void replay_step(const DeltaStep& step, const DeltaPool& pool, const Tensor& num_accepted,
                 bool commit_all, const Dims& d, const Exec& exec) {
  const Inputs in = inputs_of(step);
  const int threads = cpu_threads(exec.num_threads);
  const CallScratch cs(exec, replay_workspace(d, threads));
  Carver shared = cs.shared();
  RowPlan* plans = shared.take<RowPlan>(d.B);
  for (int64_t b = 0; b < d.B; ++b) {
    RowPlan& rp = plans[b];
    rp.slot = check::index_at(step.slot, b);
    if (rp.slot == step.pad_slot_id) continue;
    RingCursor c = read_cursor(pool.cursor, rp.slot);
    if (num_accepted.defined()) ring_commit(c, int32_t(check::index_at(num_accepted, b)));
    rp.plan = ring_plan_step(c, int32_t(d.T), int32_t(d.L), int32_t(d.R));
  }
  by_state_dtype(pool.state.dtype, [&]<DType SD>() {
    parallel_for_workers(d.B * d.H, threads, [&](int worker, int64_t task) {
      const int64_t b = task / d.H, kh = task % d.H;
      const RowPlan& rp = plans[b];
      if (rp.slot == step.pad_slot_id) {
        for (int64_t h = kh * (d.HV / d.H); h < (kh + 1) * (d.HV / d.H); ++h)
          for (int64_t t = 0; t < d.T; ++t) zero_vec(step.o, off(step.o, b, t, h), d.V);
        return;
      }
      Carver c = cs.slab(worker);
      const TaskScratch ws = carve_task(c, d);
      replay_task<SD>(ws, step, in, pool, d, rp, b, kh);
    });
  });
  for (int64_t b = 0; b < d.B; ++b) {
    const RowPlan& rp = plans[b];
    if (rp.slot == step.pad_slot_id) continue;
    RingCursor next = rp.plan.next;
    if (commit_all) ring_commit(next, int32_t(d.T));
    write_cursor(pool.cursor, rp.slot, next);
  }
}

}  // namespace replayssm::delta::cpu
