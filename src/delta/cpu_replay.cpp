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

template <DType SD>
void replay_task(const DeltaStep& step, const Inputs& in, const DeltaPool& pool, const Dims& d,
                 const RowPlan& rp, int64_t b, int64_t kh) {
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
  float* kw = scratch(0, T * K);   // k̂_t
  float* qw = scratch(1, T * K);   // q̂_t
  float* kr = scratch(2, K);
  for (int64_t t = 0; t < T; ++t) {
    float ks;
    prep_keys(in, K, b, t, kh, kr, kw + t * K, &ks, qw + t * K);
    const int64_t pos = ring_pos(p.append_start, int32_t(t), R);
    copy_raw(pool.ring_k, off(pool.ring_k, s, pos, kh), step.k, off(step.k, b, t, kh), K);
    store_vec(pool.ring_ks, off(pool.ring_ks, s, pos, kh), 1, &ks);
  }
  // Record keys k̂_j (shared by the value heads).
  float* kj = scratch(3, n * K + 1);
  float* gj = scratch(4, n * GW + 1);
  float* dj = scratch(5, n * V + 1);
  if (n) load_records(pool, d, s, kh * G, rstart, n, kj, gj, nullptr);
  // GDN: gate-free products shared across value heads: history KK[j][2t+{0,1}]
  // = k̂_j·{k̂_t, q̂_t}; window WK[t'][t] = k̂_t'·k̂_t, WQ[t'][t] = k̂_t'·q̂_t.
  float* KK = scratch(6, n * 2 * T + 1);
  float* WK = scratch(7, T * T);
  float* WQ = scratch(8, T * T);
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

  float* gw = scratch(9, T * GW);         // window log-decays
  float* cum = scratch(10, T * GW);       // Σ_{i<=t} g_i (window, per channel)
  float* beta = scratch(2, T);            // (kr no longer needed)
  float* vw = scratch(12, T * V);
  float* Hk = scratch(13, n * K + K);
  float* U = scratch(14, 2 * T * K);
  float* P = scratch(15, 2 * T * V);
  float* row = scratch(16, K);
  float* dwin = scratch(17, T * V);
  float* ew = scratch(18, T * K);         // e^{Λ_t − Λ_c} (window part), expanded to K
  float* tmp = scratch(19, K);
  float* out = scratch(20, T * V);
  float* E = scratch(21, n * GW + 1);
  float* ewk = scratch(22, 2 * T * K);    // KDA: ew_t ⊙ k̂_t, ew_t ⊙ q̂_t
  float* Ec = Hk + n * K;                 // e^{Λ_c} (expanded to K)

  for (int64_t h = kh * G; h < (kh + 1) * G; ++h) {
    for (int64_t t = 0; t < T; ++t) {
      prep_value(in, d, b, t, h, gw + t * GW, beta + t, vw + t * V);
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

void replay_step(const DeltaStep& step, const DeltaPool& pool, const Tensor& num_accepted,
                 bool commit_all, const Dims& d, int threads) {
  const Inputs in = inputs_of(step);
  std::vector<RowPlan> plans(size_t(d.B));
  for (int64_t b = 0; b < d.B; ++b) {
    RowPlan& rp = plans[size_t(b)];
    rp.slot = check::index_at(step.slot, b);
    if (rp.slot == step.pad_slot_id) continue;
    RingCursor c = read_cursor(pool.cursor, rp.slot);
    if (num_accepted.defined()) ring_commit(c, int32_t(check::index_at(num_accepted, b)));
    rp.plan = ring_plan_step(c, int32_t(d.T), int32_t(d.L), int32_t(d.R));
  }
  by_state_dtype(pool.state.dtype, [&]<DType SD>() {
    parallel_for(d.B * d.H, cpu_threads(threads), [&](int64_t task) {
      const int64_t b = task / d.H, kh = task % d.H;
      const RowPlan& rp = plans[size_t(b)];
      if (rp.slot == step.pad_slot_id) {
        for (int64_t h = kh * (d.HV / d.H); h < (kh + 1) * (d.HV / d.H); ++h)
          for (int64_t t = 0; t < d.T; ++t) zero_vec(step.o, off(step.o, b, t, h), d.V);
        return;
      }
      replay_task<SD>(step, in, pool, d, rp, b, kh);
    });
  });
  for (int64_t b = 0; b < d.B; ++b) {
    const RowPlan& rp = plans[size_t(b)];
    if (rp.slot == step.pad_slot_id) continue;
    RingCursor next = rp.plan.next;
    if (commit_all) ring_commit(next, int32_t(d.T));
    write_cursor(pool.cursor, rp.slot, next);
  }
}

}  // namespace replayssm::delta::cpu
