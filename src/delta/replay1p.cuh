// Persistent T = 1 replay step with warp roles (docs/perf_notes_delta.md v20c,
// v21). The same math as replay1.cuh's bulk stream, one block per SM walking
// the items (row, key head) blockIdx.x, + gridDim.x, ...:
//   - a producer warp streams the items' state rows, in item order, into NST
//     stages of shared memory (a.lanes_copy: 16-byte cp.async by its 32
//     lanes; else one bulk copy per sweep), so the stream does not restart
//     between items: the next item's first sweeps are in flight while the
//     current one is reduced;
//   - eight consumer warps reduce each sweep (replay1.cuh phase 4) and
//     release its stage;
//   - NPG preparing groups of four warps each run an item's record chain
//     (slot, cursor, the records by bulk copies, the token, phases 2 and 3
//     of replay1.cuh) into one of NB = NPG + 1 result buffers, items n ≡ g
//     (mod NPG) for group g, so NPG chains are in flight while the stream
//     runs.
// Hand-offs are mbarriers: per stage `FULL` / `EMPTY`; per result buffer
// `slt` (the slot is known: the item's sweeps may be issued), `rdy` (the
// item is prepared), `fre` (the consumers are done with it). A flushing
// item's fold reads its group's records (d_j, c_j ⊙ k̂_j), so that group
// starts its next item once the flush is consumed. No wait closes a cycle:
// a group's item n waits for items n − NB and (after a flush) n − NPG, both
// consumed before the consumers reach n, and the producer waits for item n's
// slot only once every sweep before it is issued.
// Launched by delta_launch.cu (replay1p_plan: K = 128, whole heads, records
// readable by bulk copies, no read copy) from two items per SM on.
#pragma once
#include "delta/replay1.cuh"

namespace replayssm::delta::cuda_impl {

inline constexpr int R1P_CONSUMERS = REPLAY1_THREADS;  // the bulk stream's eight warps (r1b_sweep_rows)
inline constexpr int R1P_GROUP = 128;                   // threads of a preparing group
inline constexpr int R1P_MAX_STAGES = 8;
__host__ __device__ constexpr int r1p_groups(bool kda) { return kda ? 3 : 2; }
// consumers, preparing groups, then the producer warp
__host__ __device__ constexpr int r1p_threads(bool kda) { return R1P_CONSUMERS + r1p_groups(kda) * R1P_GROUP + 32; }

// What a group publishes of item n in info[n % NB].
struct R1PItem {
  int64_t s;     // the state row (nsw > 0)
  int64_t apos;  // ring position of the token's record
  int b, kh;
  int nsw;    // sweeps issued for it (0: pad row or bad slot)
  int flags;  // R1P_LIVE: reduce its sweeps (else drain them); R1P_FLUSH
  int n_old;  // records folded (flush)
  int grp;    // the group whose scratch holds its records
  float kq;   // k̂·q̂
  int pad_;
};
inline constexpr int R1P_LIVE = 1, R1P_FLUSH = 2;

// Shared memory in floats: stages, mbarriers, item infos, NB result buffers,
// NPG group scratches (offsets inside a buffer / scratch relative to it).
struct R1PLayout {
  int64_t stg, bar, info, res, res_sz, grp, grp_sz, total;
  int64_t uk, uq, e0v, vs, hq, eu, e0, beta;                  // result buffer
  int64_t kv, qv, kr, gs, dtr, kraw, dk, dq, co, ksc, misc;   // group scratch
};
__host__ __device__ inline R1PLayout r1p_layout(bool kda, int K, int L, int nh, int rb, int dsz, int ksz,
                                                int64_t sweep_bytes, int nst) {
  const int npg = r1p_groups(kda), nb = npg + 1;
  R1PLayout l{};
  int64_t o = 0;
  l.stg = o; o += int64_t(nst) * sweep_bytes / 4;
  l.bar = o; o += align4(2 * (2 * R1P_MAX_STAGES + 3 * nb + npg));
  l.info = o; o += align4(nb * int64_t(sizeof(R1PItem) / 4));
  int64_t r = 0;
  l.uk = r; r += align4(K);
  l.uq = r; r += align4(K);
  l.e0v = r; r += kda ? align4(K) : 0;
  l.vs = r; r += align4(rb);
  l.hq = r; r += align4(rb);
  l.eu = r; r += align4(nh);
  l.e0 = r; r += align4(nh);
  l.beta = r; r += align4(nh);
  l.res_sz = r;
  l.res = o; o += nb * r;
  int64_t x = 0;
  const int64_t L1 = int64_t(L) + 1;
  l.kv = x; x += align4(L1 * K);
  l.qv = x; x += align4(K);
  l.kr = x; x += align4(K);
  l.gs = x; x += align4(L1 * (kda ? K : nh));
  l.dtr = x; x += align4((int64_t(L) * rb * dsz + 3) / 4);
  l.kraw = x; x += align4((int64_t(L) * K * ksz + 3) / 4);
  l.dk = x; x += align4(L);
  l.dq = x; x += align4(L);
  l.co = x; x += kda ? 0 : align4(int64_t(nh) * L);
  l.ksc = x; x += align4(L);
  l.misc = x; x += 4;
  l.grp_sz = x;
  l.grp = o; o += npg * x;
  l.total = o;
  return l;
}

// Per-item timelines (a.timing: 16 stamps of %globaltimer per item, the
// launcher's R1P_TIMING dump; scripts/r1p_timeline.py): stamps 0–6 by the
// preparing group, 8–10 by the consumers, 11 the SM.
__device__ __forceinline__ void r1p_stamp(const ReplayArgs& a, int64_t it, int i) {
  if (!a.timing) return;
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
  a.timing[it * 16 + i] = t;
}

// a.nh value heads (GDN: G, KDA: 1) of V rows per item, a.rows × H items,
// a.nst stages, a.rec_pf: a group prefetches into L2 the records of the
// block's item rec_pf after the one it just prepared (0: none).
template <DType SD, bool KDA>
__global__ void __launch_bounds__(r1p_threads(KDA), 1) delta_replay1p_kernel(ReplayArgs a) {
  using TS = typename Traits<SD>::type;
  constexpr int NPG = r1p_groups(KDA), NB = NPG + 1;
  constexpr int K = R1B_K, ROWB = R1B_K * int(sizeof(TS));
  constexpr int SW = r1b_sweep_rows(KDA, int(sizeof(TS)));
  extern __shared__ float4 smem4[];
  float* sm = reinterpret_cast<float*>(smem4);
  const TokenArgs& in = a.in;
  const Rings& rg = a.rings;
  const int V = in.V, L = rg.L, R = rg.R, H = in.H, nh = a.nh, RB = nh * V;
  const int NSW = (RB + SW - 1) / SW, NST = a.nst;
  const int dsz = rg.d_dt == DType::f32 ? 4 : 2, ksz = rg.k_dt == DType::f32 ? 4 : 2;
  constexpr int64_t SWB = int64_t(SW) * ROWB;
  const R1PLayout lay = r1p_layout(KDA, K, L, nh, RB, dsz, ksz, SWB, NST);
  const int64_t nitems = int64_t(a.rows) * H;
  const int64_t mine = (nitems - blockIdx.x + gridDim.x - 1) / gridDim.x;  // items of this block
  uint64_t* const FULL = reinterpret_cast<uint64_t*>(sm + lay.bar);
  uint64_t* const SLT = FULL + R1P_MAX_STAGES;
  uint64_t* const RDY = SLT + NB;
  uint64_t* const FRE = RDY + NB;
  uint64_t* const RECB = FRE + NB;
  uint64_t* const EMPTY = RECB + NPG;  // [R1P_MAX_STAGES] a stage read by the consumers
  R1PItem* const info = reinterpret_cast<R1PItem*>(sm + lay.info);
  const int tid = threadIdx.x, lane32 = tid & 31;
  if (tid == 0) {
    // FULL: the producer's arrival (bulk: one, with the bytes; per-lane
    // copies: each lane's, when its copies land)
    for (int i = 0; i < R1P_MAX_STAGES; ++i) cuda_util::mbar_init(FULL + i, a.lanes_copy ? 32 : 1);
    for (int i = R1P_MAX_STAGES; i < 2 * R1P_MAX_STAGES + 3 * NB + NPG; ++i) cuda_util::mbar_init(FULL + i, 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (tid >= R1P_CONSUMERS + NPG * R1P_GROUP) {
    // ---- the producer warp: the items' sweeps in order, into the stages
    // the consumers have read (it waits for an item's slot only once all
    // sweeps before it are issued, so it never waits on a later item) ----
    const TS* const state = static_cast<const TS*>(a.st.p);
    const uint64_t pol = cuda_util::l2_policy_evict_first();
    char* const stg = reinterpret_cast<char*>(sm + lay.stg);
    int64_t issued = 0;
    for (int64_t n = 0; n < mine; ++n) {
      const int buf = int(n % NB);
      cuda_util::mbar_wait(SLT + buf, uint32_t(n / NB) & 1u);
      const int nsw = info[buf].nsw;
      const TS* const base = state + info[buf].s * a.st.s0 + int64_t(info[buf].kh) * in.G * a.st.s1;
      for (int k = 0; k < nsw; ++k, ++issued) {
        const int st = int(issued % NST);
        if (issued >= NST) cuda_util::mbar_wait(EMPTY + st, uint32_t(issued / NST - 1) & 1u);
        const int r0 = k * SW, nr = min(SW, RB - r0);
        const char* src = reinterpret_cast<const char*>(base + int64_t(r0) * R1B_K);
        char* const dst = stg + st * SWB;
        if (a.lanes_copy) {  // 16-byte copies by the 32 lanes, each lane's completion one arrival
          for (int c = lane32; c < nr * ROWB / 16; c += 32) cp_async16(dst + 16 * c, src + 16 * c);
          asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(cuda_util::smem_u32(FULL + st))
                       : "memory");
        } else if (lane32 == 0) {
          asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
          cuda_util::mbar_arrive_expect_tx(FULL + st, uint32_t(nr) * ROWB);
          cuda_util::bulk_g2s(dst, src, uint32_t(nr) * ROWB, FULL + st, pol);
        }
      }
    }
    return;
  }
  if (tid >= R1P_CONSUMERS) {
    // ---- a preparing group ----
    const int g = (tid - R1P_CONSUMERS) / R1P_GROUP, gt = (tid - R1P_CONSUMERS) - g * R1P_GROUP, gw = gt >> 5;
    constexpr int GW = R1P_GROUP / 32;
    float* const X = sm + lay.grp + g * lay.grp_sz;
    float* const KV = X + lay.kv;  // [L+1][K] k̂_j (KDA: c_j ⊙ k̂_j), then k̂ of the token
    float* const QV = X + lay.qv;
    float* const KR = X + lay.kr;  // raw k of the token
    float* const GS = X + lay.gs;  // GDN [nh][L+1], KDA [L+1][K] gates
    char* const DTR = reinterpret_cast<char*>(X + lay.dtr);    // [L][RB] d records as stored
    char* const KRAW = reinterpret_cast<char*>(X + lay.kraw);  // [L][K] key records as stored
    float* const DK = X + lay.dk;
    float* const DQ = X + lay.dq;
    float* const CO = X + lay.co;  // GDN [nh][L] c_j
    float* const KSC = X + lay.ksc;
    float* const MISC = X + lay.misc;
    auto gsync = [&] { cuda_util::named_sync(2 + g, R1P_GROUP); };
    auto dval = [&](int j, int r) {
      return dsz == 4 ? reinterpret_cast<const float*>(DTR)[j * RB + r]
                      : widen_bits(reinterpret_cast<const uint16_t*>(DTR)[j * RB + r], rg.d_dt);
    };
    uint32_t rph = 0;
    bool prev_flush = false;
    for (int64_t n = g; n < mine; n += NPG) {
      const int buf = int(n % NB);
      float* const Z = sm + lay.res + buf * lay.res_sz;
      float* const VS = Z + lay.vs;  // v, then β (v − h_k)
      float* const HQ = Z + lay.hq;
      float* const BETA = Z + lay.beta;
      float* const EU = Z + lay.eu;
      float* const E0 = Z + lay.e0;
      const int64_t it = blockIdx.x + n * gridDim.x;
      if (gt == 0) r1p_stamp(a, it, 0);
      if (prev_flush) cuda_util::mbar_wait(FRE + (n - NPG) % NB, uint32_t((n - NPG) / NB) & 1u);
      if (n >= NB) cuda_util::mbar_wait(FRE + buf, uint32_t((n - NB) / NB) & 1u);
      if (gt == 0) r1p_stamp(a, it, 1);
      const int b = int(it / H), kh = int(it - int64_t(b) * H), hv0 = kh * in.G;
      const int64_t s = idx_at(a.slot, b);
      const bool live = s != a.pad && s >= 0 && s < a.S;
      if (gt == 0) {
        info[buf].s = s;
        info[buf].nsw = live ? NSW : 0;
        info[buf].b = b;
        info[buf].kh = kh;
        info[buf].grp = g;
        cuda_util::mbar_arrive(SLT + buf);
        r1p_stamp(a, it, 2);
      }
      int flags = 0, n_old = 0;
      int64_t apos = 0;
      if (s == a.pad) {
        for (int x = gt; x < RB; x += R1P_GROUP) {
          const int h = div_small(x, V);
          out_at(in.o, b, 0, hv0 + h, x - h * V, 0.f);
        }
      } else if (!live) {
        if (gt == 0 && kh == 0) cuda_util::report(a.status, STATUS_BAD_SLOT);
      } else {
        RingCursor c = cursor_at(rg, s);
        int bad = cursor_ok(rg, c) ? 0 : STATUS_RING_OVERFLOW;
        if (!bad) {
          if (a.acc.p) {
            if (!ring_commit(c, int32_t(idx_at(a.acc, b)))) bad = STATUS_BAD_ACCEPTED;
          } else if (c.pending != 0) {
            bad = STATUS_UNCOMMITTED;
          }
        }
        if (bad) {
          if (gt == 0 && kh == 0) cuda_util::report(a.status, bad);
        } else {
          const StepPlan p = ring_plan_step(c, 1, L, R);
          const bool flush = p.flush;
          n_old = flush ? p.fold_count : p.hist_count;
          const int old_start = flush ? p.fold_start : p.hist_start;
          apos = p.append_start;
          flags = R1P_LIVE | (flush ? R1P_FLUSH : 0);
          if (gt == 0) r1p_stamp(a, it, 3);
          auto pos_of = [&](int j) { return int64_t(ring_pos_near(old_start, j, R)); };
          // Phase 1: the records by bulk copies (one thread), their key
          // scales and GDN gates by loads, the token's v; then the token.
          if (gt == 0 && n_old > 0) {
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            const uint32_t db = uint32_t(RB * dsz), kb = uint32_t(K * ksz), gb = KDA ? uint32_t(K * 4) : 0u;
            cuda_util::mbar_arrive_expect_tx(RECB + g, uint32_t(n_old) * (db + kb + gb));
            for (int j = 0; j < n_old; ++j) {
              const int64_t pos = pos_of(j);
              cuda_util::bulk_g2s(DTR + j * db,
                                  static_cast<const char*>(rg.d) + (s * rg.d0 + pos * rg.d1 + int64_t(hv0) * rg.d2) * dsz,
                                  db, RECB + g);
              cuda_util::bulk_g2s(KRAW + j * kb,
                                  static_cast<const char*>(rg.k) + (s * rg.k0 + pos * rg.k1 + int64_t(kh) * rg.k2) * ksz,
                                  kb, RECB + g);
              if constexpr (KDA)
                cuda_util::bulk_g2s(GS + j * K, rg.g + s * rg.g0 + pos * rg.g1 + int64_t(hv0) * rg.g2, gb, RECB + g);
            }
          }
          float ksr = 0.f, og = 0.f;
          if (gt < n_old) ksr = rg.ks[s * rg.ks0 + pos_of(gt) * rg.ks1 + int64_t(kh) * rg.ks2];
          if (!KDA && gt < nh * n_old) {
            const int h = div_small(gt, n_old);
            og = rg.g[s * rg.g0 + pos_of(gt - h * n_old) * rg.g1 + int64_t(hv0 + h) * rg.g2];
          }
          constexpr int UV = 4;
          uint32_t vr[UV];
#pragma unroll
          for (int u = 0; u < UV; ++u) {
            const int rr = gt + u * R1P_GROUP;
            if (rr < RB) {
              const int h = div_small(rr, V);
              vr[u] = act_bits(in.v, b, 0, hv0 + h, rr - h * V);
            }
          }
          if (gw == 0) {  // q̂, k̂ (and the key record)
            float ks, kq;
            warp_prep_qk(in, b, 0, kh, KV + int64_t(n_old) * K, QV, ks, kq, KR);
            if (lane32 == 0) MISC[0] = kq;
            __syncwarp();
            const int64_t ko = s * rg.k0 + apos * rg.k1 + int64_t(kh) * rg.k2;
            for (int i = lane32; i < K; i += 32) store_any(rg.k, rg.k_dt, ko + i, KR[i]);
            if (lane32 == 0) rg.ks[s * rg.ks0 + apos * rg.ks1 + int64_t(kh) * rg.ks2] = ks;
          } else {  // the token's gates and β (and their records)
            const int me = gt - 32, nt = R1P_GROUP - 32;
            const uint32_t bb = me < nh ? act_bits(in.beta, b, 0, hv0 + me) : 0u;
            if (!KDA) {
              for (int x = me; x < nh; x += nt) {
                const float gv = gate_at(in, false, b, 0, hv0 + x, 0);
                rg.g[s * rg.g0 + apos * rg.g1 + int64_t(hv0 + x) * rg.g2] = gv;
                GS[x * (L + 1) + n_old] = gv;
              }
            } else {
              for (int k = me; k < K; k += nt) {
                const float gv = gate_at(in, true, b, 0, hv0, k);
                rg.g[s * rg.g0 + apos * rg.g1 + int64_t(hv0) * rg.g2 + k] = gv;
                GS[n_old * K + k] = gv;
              }
            }
            for (int x = me; x < nh; x += nt) BETA[x] = x == me ? beta_of(in, bb) : beta_at(in, b, 0, hv0 + x);
          }
          if (gt < n_old) KSC[gt] = ksr;
          if (!KDA) {
            if (gt < nh * n_old) {
              const int h = div_small(gt, n_old);
              GS[h * (L + 1) + gt - h * n_old] = og;
            }
            for (int x = gt + R1P_GROUP; x < nh * n_old; x += R1P_GROUP)
              GS[(x / n_old) * (L + 1) + x % n_old] = rg.g[s * rg.g0 + pos_of(x % n_old) * rg.g1 + int64_t(hv0 + x / n_old) * rg.g2];
          }
#pragma unroll
          for (int u = 0; u < UV; ++u) {
            const int rr = gt + u * R1P_GROUP;
            if (rr < RB) VS[rr] = widen_bits(vr[u], in.v.dt);
          }
          for (int rr = gt + UV * R1P_GROUP; rr < RB; rr += R1P_GROUP) VS[rr] = act_at(in.v, b, 0, hv0 + rr / V, rr % V);
          if (n_old > 0) {
            cuda_util::mbar_wait(RECB + g, rph);
            rph ^= 1u;
          }
          gsync();
          if (gt == 0) r1p_stamp(a, it, 4);
          // keys as k̂_j = k_j · ks_j, four channels per thread and step
          for (int x = gt; x < n_old * (K / 4); x += R1P_GROUP) {
            const int j = x / (K / 4), c4 = (x - j * (K / 4)) * 4;
            uint4 u;
            if (ksz == 4) {
              u = *reinterpret_cast<const uint4*>(KRAW + (j * K + c4) * 4);
            } else {
              const uint2 h = *reinterpret_cast<const uint2*>(KRAW + (j * K + c4) * 2);
              u = make_uint4(h.x, h.y, 0u, 0u);
            }
            const float4 k = widen4(u, rg.k_dt);
            const float ks = KSC[j];
            store4(KV + j * K + c4, make_float4(k.x * ks, k.y * ks, k.z * ks, k.w * ks));
          }
          gsync();
          // Phase 2 (replay1.cuh): decays c_j, and the key products.
          auto key_products = [&]() {
            if (flush) return;
            const float* kt = KV + int64_t(n_old) * K;
            for (int j = gw; j < n_old; j += GW) {
              float dk = 0.f, dq = 0.f;
              for (int i = lane32; i < K; i += 32) {
                const float kj = KV[j * K + i];
                dk += kj * kt[i];
                dq += kj * QV[i];
              }
              dk = warp_sum(dk);
              dq = warp_sum(dq);
              if (lane32 == 0) {
                DK[j] = dk;
                DQ[j] = dq;
              }
            }
          };
          if (!KDA) {
            for (int hl = gw; hl < nh; hl += GW) {
              const float* gg = GS + hl * (L + 1);
              const float tok = flush ? 0.f : gg[n_old];
              if (n_old < 32) {
                float y = lane32 + 1 < n_old ? gg[lane32 + 1] : lane32 + 1 == n_old ? tok : 0.f;
#pragma unroll
                for (int o = 1; o < 32; o <<= 1) {
                  const float t = __shfl_down_sync(FULL_MASK, y, o);
                  if (lane32 + o < 32) y += t;
                }
                if (lane32 < n_old) CO[hl * L + lane32] = expf(y);
                const float all = __shfl_sync(FULL_MASK, y, 0) + (n_old > 0 ? gg[0] : 0.f);
                if (lane32 == 0) {
                  E0[hl] = flush ? expf(all) : 0.f;
                  EU[hl] = flush ? expf(gg[n_old]) : expf(n_old > 0 ? all : tok);
                }
              } else if (lane32 == 0) {
                float suf = tok;
                for (int j = n_old - 1; j >= 0; --j) {
                  CO[hl * L + j] = expf(suf);
                  suf += gg[j];
                }
                E0[hl] = flush ? expf(suf) : 0.f;
                EU[hl] = flush ? expf(gg[n_old]) : expf(suf);
              }
            }
            for (int i = gt; i < K; i += R1P_GROUP) {
              Z[lay.uk + i] = KV[n_old * K + i];
              Z[lay.uq + i] = QV[i];
            }
            key_products();
          } else {
            for (int k = gt; k < K; k += R1P_GROUP) {
              float suf = flush ? 0.f : GS[n_old * K + k];
              for (int j = n_old - 1; j >= 0; --j) {
                KV[j * K + k] *= expf(suf);
                suf += GS[j * K + k];
              }
              const float e = expf(suf), eu = flush ? expf(GS[n_old * K + k]) : e;
              Z[lay.e0v + k] = flush ? e : 0.f;
              Z[lay.uk + k] = eu * KV[n_old * K + k];
              Z[lay.uq + k] = eu * QV[k];
            }
            gsync();
            key_products();
          }
          gsync();
          if (gt == 0) r1p_stamp(a, it, 5);
          // Phase 3: per row the history terms (a flush: none; its fold
          // weights d_j c_j, formed here from fp32 records, by the consumers
          // from 16-bit ones).
          for (int r0 = gt; r0 < RB; r0 += 2 * R1P_GROUP) {
            const int r1 = r0 + R1P_GROUP;
            const bool two = r1 < RB;
            const int h0 = div_small(r0, V), h1 = two ? div_small(r1, V) : h0;
            float hk0 = 0.f, hq0 = 0.f, hk1 = 0.f, hq1 = 0.f;
            if (flush && !KDA && dsz == 4) {  // the fold weights d_j c_j in place (as replay1.cuh)
              float* const DT = reinterpret_cast<float*>(DTR);
              for (int j = 0; j < n_old; ++j) {
                DT[j * RB + r0] *= CO[h0 * L + j];
                if (two) DT[j * RB + r1] *= CO[h1 * L + j];
              }
            }
            if (!flush) {
#pragma unroll 4
              for (int j = 0; j < n_old; ++j) {
                const float dk = DK[j], dq = DQ[j];
                const float w0 = KDA ? dval(j, r0) : dval(j, r0) * CO[h0 * L + j];
                const float w1 = !two ? 0.f : KDA ? dval(j, r1) : dval(j, r1) * CO[h1 * L + j];
                hk0 += w0 * dk;
                hq0 += w0 * dq;
                hk1 += w1 * dk;
                hq1 += w1 * dq;
              }
            }
            VS[r0] = BETA[h0] * (VS[r0] - hk0);
            HQ[r0] = hq0;
            if (two) {
              VS[r1] = BETA[h1] * (VS[r1] - hk1);
              HQ[r1] = hq1;
            }
          }
        }
      }
      gsync();  // the item's buffer and scratch written
      if (gt == 0) {
        info[buf].flags = flags;
        info[buf].n_old = n_old;
        info[buf].apos = apos;
        info[buf].kq = flags ? MISC[0] : 0.f;
        cuda_util::mbar_arrive(RDY + buf);
        r1p_stamp(a, it, 6);
        if (a.timing) {
          unsigned sm;
          asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
          a.timing[it * 16 + 11] = sm | (unsigned long long)(flags) << 32;
        }
      }
      prev_flush = flags & R1P_FLUSH;
      if (a.rec_pf > 0 && gw == GW - 1) {  // L2 prefetch of a later item's records
        const int64_t ia = blockIdx.x + (n + a.rec_pf) * gridDim.x;
        if (ia < nitems) {
          const int bn = int(ia / H);
          prefetch_block_records<KDA>(a, 1, bn, int(ia - int64_t(bn) * H), 0, lane32);
        }
      }
    }
    return;
  }

  // ---- the consumers ----
  const int warp = tid >> 5;
  constexpr int E = 16 / int(sizeof(TS)), LPB = R1B_K / E, RPL = 32 / LPB;
  constexpr int RQ = r1b_rq(KDA), BR = RQ * RPL, LB = ROWB / LPB;
  constexpr int FG = KDA ? 2 : 4;  // rows per load group (a flush folds them together)
  static_assert(RQ % FG == 0, "whole row groups");
  const int lr = lane32 & (LPB - 1), sub = lane32 / LPB;
  uint4* const STG = reinterpret_cast<uint4*>(sm + lay.stg);
  TS* const state = static_cast<TS*>(a.st.p);
  auto csync = [] { cuda_util::named_sync(1, R1P_CONSUMERS); };
  int64_t gk = 0;  // sweeps consumed
  for (int64_t n = 0; n < mine; ++n) {
    const int buf = int(n % NB);
    cuda_util::mbar_wait(RDY + buf, uint32_t(n / NB) & 1u);
    const int64_t itc = blockIdx.x + n * gridDim.x;
    if (tid == 0) r1p_stamp(a, itc, 8);
    const R1PItem item = info[buf];
    const float* const Z = sm + lay.res + buf * lay.res_sz;
    const bool live = item.flags & R1P_LIVE, flush = item.flags & R1P_FLUSH;
    const int hv0 = item.kh * in.G, n_old = item.n_old;
    const float* const X = sm + lay.grp + item.grp * lay.grp_sz;  // the group's records (a flush)
    const float* const KV = X + lay.kv;
    const char* const DTR = reinterpret_cast<const char*>(X + lay.dtr);
    const float* const CO = X + lay.co;
    float ukr[E], uqr[E], e0r[E];
#pragma unroll
    for (int e = 0; e < E; ++e) {
      ukr[e] = Z[lay.uk + lr * E + e];
      uqr[e] = Z[lay.uq + lr * E + e];
      e0r[e] = KDA && flush ? Z[lay.e0v + lr * E + e] : 0.f;
    }
    TS* const BASE = state + item.s * a.st.s0 + int64_t(hv0) * a.st.s1;
    const int64_t d_base = item.s * rg.d0 + item.apos * rg.d1;
    const int64_t o_base = int64_t(item.b) * in.o.sb;
    for (int k = 0; k < item.nsw; ++k, ++gk) {
      const int st = int(gk % NST);
      cuda_util::mbar_wait(FULL + st, uint32_t(gk / NST) & 1u);
      if (tid == 0 && k == 0) r1p_stamp(a, itc, 9);
      const int r0 = k * SW + warp * BR;
      float ak[RQ], aq[RQ];
      if (live) {
        const char* const sk = reinterpret_cast<const char*>(STG) + st * SWB + (warp * BR + sub) * ROWB + lr * LB;
#pragma unroll
        for (int u0 = 0; u0 < RQ; u0 += FG) {
          float f[FG][E];
#pragma unroll
          for (int i = 0; i < FG; ++i) {
            const int r = r0 + (u0 + i) * RPL + sub;
            const uint4 w = r < RB ? *reinterpret_cast<const uint4*>(sk + (u0 + i) * RPL * ROWB) : make_uint4(0u, 0u, 0u, 0u);
            const TS* x = reinterpret_cast<const TS*>(&w);
#pragma unroll
            for (int e = 0; e < E; ++e) f[i][e] = Traits<SD>::load(x[e]);
          }
          if (flush) {  // S_h = e^{Λ_h} ⊙ S_0 + Σ_j (d_j c_j) k̂_jᵀ (KDA: c_j in KV)
            int rc[FG], hc[FG];
#pragma unroll
            for (int i = 0; i < FG; ++i) {
              rc[i] = min(r0 + (u0 + i) * RPL + sub, RB - 1);
              hc[i] = div_small(rc[i], V);
              const float e0 = KDA ? 1.f : Z[lay.e0 + hc[i]];
#pragma unroll
              for (int e = 0; e < E; ++e) f[i][e] *= KDA ? e0r[e] : e0;
            }
            // fp32 records hold the weights d_j c_j (the group scaled them,
            // GDN); 16-bit ones are widened and scaled here. Two records
            // per step keep their shared-memory loads in flight together.
            auto fold = [&](auto f32_c) {
              constexpr bool F32 = decltype(f32_c)::value;
#pragma unroll 2
              for (int j = 0; j < n_old; ++j) {
                float w[FG];
#pragma unroll
                for (int i = 0; i < FG; ++i) {
                  if constexpr (F32) {
                    w[i] = reinterpret_cast<const float*>(DTR)[j * RB + rc[i]];
                  } else {
                    const float d = widen_bits(reinterpret_cast<const uint16_t*>(DTR)[j * RB + rc[i]], rg.d_dt);
                    w[i] = KDA ? d : d * CO[hc[i] * L + j];
                  }
                }
                const float* kv = KV + j * K + lr * E;
#pragma unroll
                for (int e = 0; e < E; e += 4) {
                  const float4 k4 = *reinterpret_cast<const float4*>(kv + e);
#pragma unroll
                  for (int i = 0; i < FG; ++i) {
                    f[i][e] += w[i] * k4.x; f[i][e + 1] += w[i] * k4.y; f[i][e + 2] += w[i] * k4.z; f[i][e + 3] += w[i] * k4.w;
                  }
                }
              }
            };
            if (dsz == 4) fold(std::true_type{});
            else fold(std::false_type{});
#pragma unroll
            for (int i = 0; i < FG; ++i) {
              const int r = r0 + (u0 + i) * RPL + sub;
              uint4 out;
              TS* x = reinterpret_cast<TS*>(&out);
#pragma unroll
              for (int e = 0; e < E; ++e) {
                x[e] = Traits<SD>::store(f[i][e]);
                f[i][e] = Traits<SD>::load(x[e]);  // the outputs read the checkpoint as stored
              }
              if (r < RB) __stcs(reinterpret_cast<uint4*>(BASE + int64_t(r) * R1B_K + lr * E), out);
            }
          }
#pragma unroll
          for (int i = 0; i < FG; ++i) {
            float pk = 0.f, pq = 0.f;
#pragma unroll
            for (int e = 0; e < E; ++e) {
              pk = fmaf(f[i][e], ukr[e], pk);
              pq = fmaf(f[i][e], uqr[e], pq);
            }
            ak[u0 + i] = pk;
            aq[u0 + i] = pq;
          }
        }
      }
      csync();  // the stage read: refill it
      if (tid == 0) cuda_util::mbar_arrive(EMPTY + st);
      if (live) {
        cuda_util::transpose_sum<RQ, LPB>(ak, lr);
        cuda_util::transpose_sum<RQ, LPB>(aq, lr);
        if ((lr & (LPB / RQ - 1)) == 0) {
          const int r = r0 + (lr / (LPB / RQ)) * RPL + sub;
          if (r < RB) {
            const int hl = div_small(r, V), vl = r - hl * V;
            const int64_t hv = hv0 + hl;
            const float e = KDA ? 1.f : Z[lay.eu + hl];
            const float aqv = e * aq[0] + Z[lay.hq + r];
            const float dr = round_to(rg.d_dt, Z[lay.vs + r] - Z[lay.beta + hl] * e * ak[0]);
            store_any(rg.d, rg.d_dt, d_base + hv * rg.d2 + vl, dr);
            store_any(in.o.p, in.o.dt, o_base + hv * in.o.sh + vl, aqv + item.kq * dr);
          }
        }
      }
    }
    csync();  // the item's buffer and records read
    if (tid == 0) {
      r1p_stamp(a, itc, 10);
      cuda_util::mbar_arrive(FRE + buf);
    }
  }
}

}  // namespace replayssm::delta::cuda_impl
