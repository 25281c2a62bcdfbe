// Fast CPU replay step (design §2-3): T tokens per row against checkpoint +
// ring, output-only form. Work unit = (row, group, block of the group's
// heads): the B_j·C_m products are computed once per unit and shared by its
// heads. Per head the checkpoint is read once; a non-flush step never writes
// it; a flushing step folds, writes the new checkpoint and computes the
// outputs in the same pass over the state rows.
#include <algorithm>

#include "core/parallel.h"
#include "mamba2/cpu_common.h"

namespace replayssm::mamba2::cpu {
namespace {

struct RowPlan {
  bool pad;
  int64_t slot;
  StepPlan plan;
};

// Scratch of one unit, for up to M_max = L + T records read (history +
// window): B of the records [M_max, N], C of the window [T, N], B·C [T, M_max],
// per head δ, a [M_max], x [M_max, P], coefficients [T, M_max], decays [T],
// outputs [T, P], a state row [N], out and z rows [P], and up to L records
// folded by a flushing step.
struct UnitScratch {
  float *Bg, *Cg, *BC, *delta, *a, *X, *coef, *decay0, *acc, *row, *out, *z;
  Records fold;
};
UnitScratch carve_unit(Carver& c, const Dims& d) {
  const int64_t M = d.L + d.T, T = d.T;
  UnitScratch w;
  w.Bg = c.take<float>(M * d.N);
  w.Cg = c.take<float>(T * d.N);
  w.BC = c.take<float>(T * M);
  w.delta = c.take<float>(M);
  w.a = c.take<float>(M);
  w.X = c.take<float>(M * d.P);
  w.coef = c.take<float>(T * M);
  w.decay0 = c.take<float>(T);
  w.acc = c.take<float>(T * d.P);
  w.row = c.take<float>(d.N);
  w.out = c.take<float>(d.P);
  w.z = c.take<float>(d.P);
  w.fold = carve_records(c, d.L, d);
  return w;
}

template <DType SD, DType AD>
void replay_unit(UnitScratch& ws, const Mamba2Step& s, const Mamba2Pool& pool, const RowPlan& rp,
                 int64_t b, int64_t g, int64_t h0, int64_t h1, bool append_B, const Dims& d) {
  const int64_t T = d.T, P = d.P, N = d.N, slot = rp.slot;
  const int32_t R = int32_t(d.R);
  const StepPlan& pl = rp.plan;
  if (rp.pad) {
    for (int64_t h = h0; h < h1; ++h)
      for (int64_t t = 0; t < T; ++t)
        std::memset(ptr<Elem<AD>>(s.y, off3(s.y, b, t, h)), 0, size_t(P) * sizeof(Elem<AD>));
    return;
  }
  const int32_t hist = pl.hist_count;
  const int32_t M = hist + int32_t(T);  // records the outputs read (history + window)

  // Group inputs: B of history and window [M, N], C of the window [T, N].
  float *Bg = ws.Bg, *Cg = ws.Cg, *BC = ws.BC, *delta = ws.delta, *a = ws.a, *X = ws.X,
        *coef = ws.coef, *decay0 = ws.decay0, *acc = ws.acc, *row = ws.row, *out = ws.out, *z = ws.z;
  for (int32_t j = 0; j < hist; ++j) {
    const int64_t pos = ring_pos(pl.hist_start, j, R);
    to_f32<AD>(ptr<const Elem<AD>>(pool.ring_B, off3(pool.ring_B, slot, pos, g)), &Bg[size_t(j * N)], N);
  }
  for (int64_t t = 0; t < T; ++t) {
    const Elem<AD>* bt = ptr<const Elem<AD>>(s.Bm, off3(s.Bm, b, t, g));
    to_f32<AD>(bt, &Bg[size_t((hist + t) * N)], N);
    to_f32<AD>(ptr<const Elem<AD>>(s.Cm, off3(s.Cm, b, t, g)), &Cg[size_t(t * N)], N);
    if (append_B) {
      const int64_t pos = ring_pos(pl.append_start, int32_t(t), R);
      std::memcpy(ptr<Elem<AD>>(pool.ring_B, off3(pool.ring_B, slot, pos, g)), bt, size_t(N) * sizeof(Elem<AD>));
    }
  }
  // BC[t, j] = B_j · C_t for j <= hist + t (later records are not read, so a
  // rejected draft's values never meet an earlier token's output).
  for (int64_t t = 0; t < T; ++t)
    for (int32_t j = 0; j <= hist + int32_t(t); ++j)
      BC[size_t(t * M + j)] = dot(&Bg[size_t(j * N)], &Cg[size_t(t * N)], N);

  Records& fold_recs = ws.fold;
  for (int64_t h = h0; h < h1; ++h) {
    const HeadParams hp = head_params(s.A, s.dt_bias, s.D, h);
    // Records of the head: history from the ring, window from the inputs
    // (appended to the ring here).
    for (int32_t j = 0; j < hist; ++j) {
      const int64_t pos = ring_pos(pl.hist_start, j, R);
      delta[size_t(j)] = ptr<const float>(pool.ring_dt, off3(pool.ring_dt, slot, pos, h))[0];
      to_f32<AD>(ptr<const Elem<AD>>(pool.ring_x, off3(pool.ring_x, slot, pos, h)), &X[size_t(j * P)], P);
    }
    for (int64_t t = 0; t < T; ++t) {
      const int64_t j = hist + t, pos = ring_pos(pl.append_start, int32_t(t), R);
      const float dl = activate_dt(scalar(s.dt, off3(s.dt, b, t, h)), hp, s.dt_softplus);
      delta[size_t(j)] = dl;
      ptr<float>(pool.ring_dt, off3(pool.ring_dt, slot, pos, h))[0] = dl;
      const Elem<AD>* xt = ptr<const Elem<AD>>(s.x, off3(s.x, b, t, h));
      to_f32<AD>(xt, &X[size_t(j * P)], P);
      std::memcpy(ptr<Elem<AD>>(pool.ring_x, off3(pool.ring_x, slot, pos, h)), xt, size_t(P) * sizeof(Elem<AD>));
    }
    for (int32_t j = 0; j < M; ++j) a[size_t(j)] = std::exp(delta[size_t(j)] * hp.A);

    // Output coefficients. Token t is record m = hist + t:
    //   y_m = decay0_t (S_0 C_t) + Σ_{j≤m} coef[t, j] x_j + D x_m,
    //   coef[t, j] = δ_j Π_{j<i≤m} a_i (B_j·C_t),  decay0_t = Π_{i≤m} a_i.
    for (int64_t t = 0; t < T; ++t) {
      const int32_t m = hist + int32_t(t);
      float w = 1.0f;
      for (int32_t j = m; j >= 0; --j) {
        coef[size_t(t * M + j)] = delta[size_t(j)] * w * BC[size_t(t * M + j)];
        w *= a[size_t(j)];
      }
      decay0[size_t(t)] = w;
      float* at = &acc[size_t(t * P)];
      std::fill(at, at + P, 0.0f);
      for (int32_t j = 0; j <= m; ++j) axpy(at, coef[size_t(t * M + j)], &X[size_t(j * P)], P);
    }

    // One pass over the checkpoint rows: fold (flush only), then S_0 C_t.
    if (pl.flush) {
      gather<AD>(fold_recs, pool, slot, h, g, hp.A, pl.fold_start, pl.fold_count, d);
      fold_weights(fold_recs);
    }
    Elem<SD>* st = ptr<Elem<SD>>(pool.state, off2(pool.state, slot, h));
    const int64_t rs = pool.state.stride[2];
    for (int64_t p = 0; p < P; ++p) {
      const float* r = row;
      if constexpr (SD == DType::f32) {
        if (!pl.flush) r = st + p * rs;  // read in place
        else std::memcpy(row, st + p * rs, size_t(N) * sizeof(float));
      } else {
        to_f32<SD>(st + p * rs, row, N);
      }
      if (pl.flush) {
        fold_row(row, fold_recs, p, d);
        from_f32<SD>(row, st + p * rs, N);
        round_trip<SD>(row, N);  // outputs read the checkpoint as stored
      }
      for (int64_t t = 0; t < T; ++t) acc[size_t(t * P + p)] += decay0[size_t(t)] * dot(r, &Cg[size_t(t * N)], N);
    }

    for (int64_t t = 0; t < T; ++t) {
      const float* xt = &X[size_t((hist + t) * P)];
      for (int64_t p = 0; p < P; ++p) out[size_t(p)] = acc[size_t(t * P + p)] + hp.D * xt[p];
      if (s.z.defined()) {
        to_f32<AD>(ptr<const Elem<AD>>(s.z, off3(s.z, b, t, h)), z, P);
        for (int64_t p = 0; p < P; ++p) out[size_t(p)] = gate(out[size_t(p)], z[size_t(p)]);
      }
      from_f32<AD>(out, ptr<Elem<AD>>(s.y, off3(s.y, b, t, h)), P);
    }
  }
}

}  // namespace

WorkspacePlan replay_workspace(const Dims& d, int threads) {
  WorkspacePlan plan;
  plan.threads = threads;
  Carver shared, slab;
  shared.take<RowPlan>(d.B);
  carve_unit(slab, d);
  plan.shared = shared.used();
  plan.per_thread = slab.used();
  return plan;
}

void replay_step(const Mamba2Step& s, const Mamba2Pool& pool, const Tensor& num_accepted,
                 bool commit_all, const Dims& d, const Exec& exec) {
  const int threads = cpu_threads(exec.num_threads);
  const CallScratch cs(exec, replay_workspace(d, threads));
  // Plans first (commit, then flush rule); cursors are written after all
  // units ran, so every unit sees the cursors of the call's start.
  Carver shared = cs.shared();
  RowPlan* rows = shared.take<RowPlan>(d.B);
  for (int64_t b = 0; b < d.B; ++b) {
    RowPlan& rp = rows[b];
    rp.slot = check::index_at(s.slot, b);
    rp.pad = rp.slot == s.pad_slot_id;
    if (rp.pad) continue;
    RingCursor c = read_cursor(pool.cursor, rp.slot);
    if (num_accepted.defined()) ring_commit(c, int32_t(check::index_at(num_accepted, b)));
    rp.plan = ring_plan_step(c, int32_t(d.T), int32_t(d.L), int32_t(d.R));
  }
  // Split a group's heads into blocks only when (row, group) units are too
  // few to occupy the threads; every block recomputes the group's B·C.
  const int64_t heads = d.H / d.G;
  const int64_t want = std::max<int64_t>(1, (2 * int64_t(threads) + d.B * d.G - 1) / std::max<int64_t>(1, d.B * d.G));
  const int64_t blocks = std::min(heads, want);
  const int64_t per = (heads + blocks - 1) / blocks;
  dispatch(pool.state.dtype, s.x.dtype, [&]<DType SD, DType AD>() {
    parallel_for_workers(d.B * d.G * blocks, threads, [&](int worker, int64_t u) {
      const int64_t b = u / (d.G * blocks), g = (u / blocks) % d.G, k = u % blocks;
      const int64_t h0 = g * heads + k * per, h1 = std::min(g * heads + heads, h0 + per);
      if (h0 >= h1) return;
      Carver c = cs.slab(worker);
      UnitScratch w = carve_unit(c, d);
      replay_unit<SD, AD>(w, s, pool, rows[b], b, g, h0, h1, k == 0, d);
    });
  });
  for (int64_t b = 0; b < d.B; ++b) {
    const RowPlan& rp = rows[b];
    if (rp.pad) continue;
    RingCursor next = rp.plan.next;
    if (commit_all) ring_commit(next, next.pending);
    write_cursor(pool.cursor, rp.slot, next);
  }
}

}  // namespace replayssm::mamba2::cpu
