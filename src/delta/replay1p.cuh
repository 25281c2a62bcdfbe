// Persistent T = 1 replay step in two kernels (docs/perf_notes_delta.md, "the
// persistent T = 1 kernel with warp roles" and "the persistent step in two
// kernels: a warp-per-item preparation, a stream that claims items"). The same
// math as replay1.cuh's bulk stream, split where its time goes: the per-item
// record chain (slot → cursor → records → history terms, one loaded DRAM round
// trip after another) and the state stream.
//
// 1. delta_prep1_kernel: one warp per item (row, key head), many resident
//    warps per SM so that most of the batch's chains are in flight at once:
//    slot, cursor and plan; the records prefetched into L2; the token (q̂,
//    k̂, gates, β; its key and gate records appended); the record keys and
//    the key products, the decays, and per row the history terms
//    (replay1.cuh phases 1–3, the d records read straight from the ring).
//    It writes per item a payload in the layout of the stream's result
//    buffer (plus, for a flushing item, the fold's c_j and keys) and then a
//    header (R1PItem) at the next place of the claim order, `ready` last.
// 2. delta_replay1p_kernel, its programmatic dependent (its blocks start
//    as the preparation's last wave leaves SMs free): one block per SM,
//    - a loader warp claims chunks of a.chunk places of the claim order
//      (one by default, delta_launch.cu replay1p_plan), waits for each
//      header's `ready` and copies the item's payload (a flushing item:
//      also its d records from the ring) into one of NB result buffers;
//    - a producer warp streams the items' state rows, in claim order, into
//      NST stages (a.lanes_copy: 16-byte cp.async by its 32 lanes; else one
//      bulk copy per sweep), so the stream does not restart between items;
//    - eight consumer warps (sixteen for an fp32 KDA state: r1p_warps)
//      reduce each sweep (replay1.cuh phase 4; a flushing item folds,
//      stores and reads its new checkpoint) and write the token's d
//      record and output.
//    Hand-offs are mbarriers: per stage FULL / EMPTY; per result buffer SLT
//    (its header is known: the producer may issue the item's sweeps), RDY
//    (its payload landed), FRE (the consumers are done with it). Items are
//    claimed dynamically, so blocks whose items flush take fewer items.
// Launched by delta_launch.cu (replay1p_plan: K = 128, whole key heads,
// records readable by bulk copies, L <= 32). A dual pool's step reads its
// read copy (DUAL instances): the preparation is then the dual fold's
// programmatic dependent and an item whose row flushes waits for the fold's
// grid; no item flushes in the stream (docs/perf_notes_delta.md, "dual T = 1
// steps on the persistent step").
#pragma once
#include "delta/replay1.cuh"

namespace replayssm::delta::cuda_impl {

// Consumer warps of the stream: 16 for an fp32 KDA state (64-row sweeps, a
// 128-row key head in two), 8 (the bulk stream's, r1b_sweep_rows) for every
// other instance. 16 warps: KDA fp32 B = 256 266 → 239 µs; GDN's 16-bit
// states spill there and lose 16 %, the read copies lose 17–29 % (a packed
// sweep is one 128-row value head, eight warps' rows); 12 warps leave a key
// head's last sweep part empty (docs/perf_notes_delta.md, "sixteen consumer
// warps for fp32 KDA in the persistent step"). copy: a dual pool's read copy
// (any format).
__host__ __device__ constexpr int r1p_warps(bool kda, int state_size, bool copy) {
  return kda && state_size == 4 && !copy ? 16 : 8;
}
__host__ __device__ constexpr int r1p_threads(int warps) { return warps * 32 + 64; }  // + the loader and producer warps
inline constexpr int R1P_MAX_STAGES = 8;
inline constexpr int R1P_MAX_CHUNK = 8;   // items per claim
inline constexpr int P1_WARPS = 4;        // warps (items) per preparation block
inline constexpr int P1_MIN_BLOCKS = 6;   // resident per SM (80 registers; 8 at 64 was slower:
                                          // perf_notes_delta.md, "the persistent step in two kernels")

// An item's header: written by the preparation kernel, copied by the loader.
struct R1PItem {
  int64_t s;     // the state row (nsw > 0)
  int64_t apos;  // ring position of the token's record
  int b, kh;
  int nsw;    // sweeps to stream (0: pad row or rejected row; −1 in a buffer: no more items)
  int flags;  // R1P_LIVE: reduce its sweeps; R1P_FLUSH
  int n_old;  // records folded (flush) or in the history
  int ost;    // ring position of the first of them
  float kq;   // k̂·q̂
  int ready;  // set last (release) by the preparing warp; the loader polls it (acquire)
};
inline constexpr int R1P_LIVE = 1, R1P_FLUSH = 2;
static_assert(sizeof(R1PItem) % 16 == 0, "headers are copied in 16-byte units");

// An item's result buffer and scratch payload (R1PRes, layouts.h).
__host__ __device__ inline R1PRes r1p_res(bool kda, int K, int L, int nh, int rb) {
  R1PRes l{};
  int64_t r = 0;
  l.uk = r; r += align4(K);
  l.uq = r; r += align4(K);
  l.e0v = r; r += kda ? align4(K) : 0;
  l.vs = r; r += align4(rb);
  l.hq = r; r += align4(rb);
  l.eu = r; r += align4(nh);
  l.e0 = r; r += align4(nh);
  l.beta = r; r += align4(nh);
  l.sz = r;
  l.co = r; r += kda ? 0 : align4(int64_t(nh) * L);
  l.kv = r; r += int64_t(L) * K;
  l.pay = r;
  return l;
}

// Device scratch of one step (delta_launch.cu, replay1p_scratch): the
// stream's claim counter (u64) and the preparation's list counter (u32),
// then nitems headers in the order the preparing warps finish (all zeroed
// by the launcher before each step: a header is ready once its `ready` is
// set), then nitems payloads (item b·H + kh at that index).
__host__ __device__ inline int64_t r1p_hdr_offset() { return 64; }  // bytes
__host__ __device__ inline int64_t r1p_pay_offset(int64_t nitems) {
  return (r1p_hdr_offset() + nitems * int64_t(sizeof(R1PItem)) + 255) & ~int64_t(255);
}
__host__ __device__ inline int64_t r1p_scratch_bytes(int64_t nitems, const R1PRes& r) {
  return r1p_pay_offset(nitems) + nitems * r.pay * 4;
}

// The stream kernel's shared memory in floats: stages, mbarriers, headers,
// NB result buffers, the flush area (the fold's decays and keys as in the
// payload, then the raw d records [L][RB] as stored; none for a dual pool's
// copy, whose rows the dual fold flushes).
struct R1PLayout {
  int64_t stg, bar, info, res, fl, dtr, total;
};
__host__ __device__ inline R1PLayout r1p_layout(const R1PRes& r, int L, int rb, int dsz, int64_t sweep_bytes,
                                                int nst, int nb, bool flush_area = true) {
  R1PLayout l{};
  int64_t o = 0;
  l.stg = o; o += int64_t(nst) * sweep_bytes / 4;
  l.bar = o; o += align4(2 * (2 * R1P_MAX_STAGES + 3 * nb));
  l.info = o; o += nb * int64_t(sizeof(R1PItem) / 4);
  l.res = o; o += nb * r.sz;
  l.fl = o; o += flush_area ? r.pay - r.sz : 0;
  l.dtr = o; o += flush_area ? align4((int64_t(L) * rb * dsz + 3) / 4) : 0;
  l.total = o;
  return l;
}

// Per-item timelines (a.timing: 16 stamps of %globaltimer per item, the
// launcher's R1P_TIMING dump; scripts/r1p_timeline.py): 0 the loader claims
// it, 1 its header is known, 2 its copies are issued; 8–10 the consumers
// (start, first sweep landed, done); 11 the SM and flags; 12–15 its
// preparing warp: start, end, the token prepared, the keys and decays done.
__device__ __forceinline__ void r1p_stamp(const ReplayArgs& a, int64_t it, int i) {
  if (!a.timing) return;
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
  a.timing[it * 16 + i] = t;
}

// ---- 1. the preparation kernel ----

// Per-warp shared memory in floats (P1Layout, layouts.h).
__host__ __device__ inline P1Layout p1_layout(bool kda, int K, int L, int nh) {
  P1Layout l{};
  int64_t o = 0;
  l.kt = o; o += align4(K);  // k̂ of the token
  l.qv = o; o += align4(K);  // q̂
  l.kr = o; o += align4(K);  // raw k (its record)
  l.gs = o; o += kda ? 0 : align4(int64_t(nh) * (L + 1));  // GDN gates [nh][L+1], the token's last
  l.co = o; o += kda ? 0 : align4(int64_t(nh) * L);        // GDN c_j [nh][L]
  l.dk = o; o += align4(L);
  l.dq = o; o += align4(L);
  l.total = o;
  return l;
}

// One warp per item (row b, key head kh), items b·H + kh. Header and payload
// into a.scr (r1p_hdr_offset / r1p_pay_offset; payload stride a.scr_ps
// floats); a.nsw: the sweeps of a live item.
// DUAL: a dual pool's step (a.dual; an instance of its own, so that the
// plain step's machine code is not touched by it).
template <bool KDA, bool DUAL = false>
__global__ void __launch_bounds__(P1_WARPS * 32, P1_MIN_BLOCKS) delta_prep1_kernel(ReplayArgs a) {
  extern __shared__ float4 smem4[];
  const TokenArgs& in = a.in;
  const Rings& rg = a.rings;
  const int K = in.K, V = in.V, L = rg.L, R = rg.R, H = in.H, nh = a.nh, RB = nh * V;
  const int dsz = rg.d_dt == DType::f32 ? 4 : 2;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  char* const scr = static_cast<char*>(a.scr);
  unsigned* const done = reinterpret_cast<unsigned*>(scr + 8);  // headers published (zeroed)
  // the stream kernel's blocks may start (they poll each header's `ready` before reading its payload)
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  const int64_t nitems = int64_t(a.rows) * H;
  const int64_t it = int64_t(blockIdx.x) * P1_WARPS + warp;
  if (it >= nitems) return;
  // p1_layout and r1p_res, on the host (delta_replay1p.cu launch_prep1)
  const P1Layout& pl = a.p1;
  const R1PRes& rl = a.p1res;
  float* const W = at_aligned(reinterpret_cast<float*>(smem4), warp * pl.total);
  float* const KT = at_aligned(W, pl.kt);
  float* const QV = at_aligned(W, pl.qv);
  float* const KR = at_aligned(W, pl.kr);
  float* const GS = at_aligned(W, pl.gs);
  float* const CO = at_aligned(W, pl.co);
  float* const DK = at_aligned(W, pl.dk);
  float* const DQ = at_aligned(W, pl.dq);
  float* const P = reinterpret_cast<float*>(scr + r1p_pay_offset(nitems)) + it * a.scr_ps;
  R1PItem* const hdr = reinterpret_cast<R1PItem*>(scr + r1p_hdr_offset());
  if (lane == 0) r1p_stamp(a, it, 12);
  const int b = int(it / H), kh = int(it - int64_t(b) * H), hv0 = kh * in.G;
  const int64_t s = idx_at(a.slot, b);
  // The token (it does not depend on the slot): the gates' and β's loads,
  // then q̂, k̂ (its key record), issued with the slot's load so that the
  // chain slot → cursor → records does not wait for them.
  GateRaw gr[4];
  uint32_t bb = 0u;
  if (!KDA) {
    if (lane < nh) gr[0] = gate_raw(in, false, b, 0, hv0 + lane, 0);
  } else {
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (lane + 32 * e < K) gr[e] = gate_raw(in, true, b, 0, hv0, lane + 32 * e);
  }
  if (lane < nh) bb = act_bits(in.beta, b, 0, hv0 + lane);
  float ks, kq;
  warp_prep_qk(in, b, 0, kh, KT, QV, ks, kq, KR);
  R1PItem h{};
  h.s = s;
  h.b = b;
  h.kh = kh;
  auto publish = [&] {  // the header at the next place of the claim order, `ready` last
    __syncwarp();
    if (lane == 0) {
      R1PItem* const at = hdr + atomicAdd(done, 1u);
      *at = h;  // h.ready == 0
      __threadfence();  // the payload, the records and the header before `ready`
      asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(&at->ready), "r"(1u) : "memory");
      r1p_stamp(a, it, 13);
    }
  };
  if (s == a.pad) {
    for (int x = lane; x < RB; x += 32) {
      const int hh = div_small(x, V);
      out_at(in.o, b, 0, hv0 + hh, x - hh * V, 0.f);
    }
    publish();
    return;
  }
  if (s < 0 || s >= a.S) {
    if (lane == 0 && kh == 0) cuda_util::report(a.status, STATUS_BAD_SLOT);
    publish();
    return;
  }
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
    if (lane == 0 && kh == 0) cuda_util::report(a.status, bad);
    publish();
    return;
  }
  StepPlan p = ring_plan_step(c, 1, L, R);
  if constexpr (DUAL) {
    // Dual pools (as replay1.cuh): the dual fold, this launch's programmatic
    // prerequisite, folds a flushing row and repacks its copy; its item waits
    // for that grid before anything of it is published, and the token then
    // reads the fresh copy with no history. Other rows' copies and the
    // records this step reads or appends are not the fold's.
    if (p.flush) asm volatile("griddepcontrol.wait;" ::: "memory");
    p.flush = false;
  }
  const bool flush = p.flush;
  const int n_old = flush ? p.fold_count : p.hist_count;
  const int ost = flush ? p.fold_start : p.hist_start;
  const int64_t apos = p.append_start;
  auto pos_of = [&](int j) { return int64_t(ring_pos_near(ost, j, R)); };
  {  // the records into L2 while the token is prepared (lane j: record j)
    const int64_t ke = rg.k_dt == DType::f32 ? 4 : 2;
    for (int j = lane; j < n_old; j += 32) {
      const int64_t pos = pos_of(j);
      cuda_util::prefetch_l2(static_cast<const char*>(rg.d) + (s * rg.d0 + pos * rg.d1 + int64_t(hv0) * rg.d2) * dsz,
                             uint32_t(RB * dsz));
      cuda_util::prefetch_l2(static_cast<const char*>(rg.k) + (s * rg.k0 + pos * rg.k1 + int64_t(kh) * rg.k2) * ke,
                             uint32_t(K * ke));
      cuda_util::prefetch_l2(rg.ks + s * rg.ks0 + pos * rg.ks1 + int64_t(kh) * rg.ks2, 4u);
      cuda_util::prefetch_l2(rg.g + s * rg.g0 + pos * rg.g1 + int64_t(hv0) * rg.g2, uint32_t((KDA ? K : nh) * 4));
    }
  }
  // GDN: the old records' gates (their loads issued before the token's records are stored).
  float og[4];
  if (!KDA) {
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int x = lane + 32 * u;
      if (x < nh * n_old) {
        const int hh = div_small(x, n_old);
        og[u] = rg.g[s * rg.g0 + pos_of(x - hh * n_old) * rg.g1 + int64_t(hv0 + hh) * rg.g2];
      }
    }
  }
  {
    const int64_t ko = s * rg.k0 + apos * rg.k1 + int64_t(kh) * rg.k2;
    for (int i = lane; i < K; i += 32) store_any(rg.k, rg.k_dt, ko + i, KR[i]);
    if (lane == 0) rg.ks[s * rg.ks0 + apos * rg.ks1 + int64_t(kh) * rg.ks2] = ks;
  }
  float gtok[4] = {0.f, 0.f, 0.f, 0.f};  // KDA: the token's gates of channels lane + 32e
  if (!KDA) {
    if (lane < nh) {
      const float gv = gate_of(in, gr[0]);
      rg.g[s * rg.g0 + apos * rg.g1 + int64_t(hv0 + lane) * rg.g2] = gv;
      GS[lane * (L + 1) + n_old] = gv;
    }
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int x = lane + 32 * u;
      if (x < nh * n_old) {
        const int hh = div_small(x, n_old);
        GS[hh * (L + 1) + x - hh * n_old] = og[u];
      }
    }
  } else {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int k = lane + 32 * e;
      if (k < K) {
        gtok[e] = gate_of(in, gr[e]);
        rg.g[s * rg.g0 + apos * rg.g1 + int64_t(hv0) * rg.g2 + k] = gtok[e];
      }
    }
  }
  if (lane < nh) {
    const float be = beta_of(in, bb);
    P[rl.beta + lane] = be;
    if constexpr (DUAL)  // (dual records: β_j and v_j for the fold's recomputed d_j)
      static_cast<float*>(a.ring_beta.p)[s * a.ring_beta.s0 + apos * a.ring_beta.s1 + int64_t(hv0 + lane) * a.ring_beta.s2] = be;
  }
  __syncwarp();
  // Record keys k̂_j = k_j · ks_j (KDA: then c_j ⊙ k̂_j, c_j the suffix
  // products of the gates after j), their products with k̂ and q̂ (history
  // only), and (flush) the fold's keys into the payload. Lane owns channels
  // lane + 32e, as warp_prep_qk: the sums run in replay1.cuh's order.
  if (lane == 0) r1p_stamp(a, it, 14);
  const float* const ksr = rg.ks + s * rg.ks0 + int64_t(kh) * rg.ks2;
  float* const PKV = P + rl.kv;
  float suf[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) suf[e] = flush ? 0.f : gtok[e];
  constexpr int KB = KDA ? 2 : 4;  // records per batch of loads
  for (int j0 = 0; j0 < n_old; j0 += KB) {
    uint32_t kb[KB][4], gb[KB][4];
    float ksj[KB];
#pragma unroll
    for (int u = 0; u < KB; ++u) {
      const int jj = j0 + u;
      if (jj >= n_old) break;
      const int j = KDA ? n_old - 1 - jj : jj;  // KDA: descending (suffix products)
      const int64_t pos = pos_of(j);
      const int64_t ko = s * rg.k0 + pos * rg.k1 + int64_t(kh) * rg.k2;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int k = lane + 32 * e;
        kb[u][e] = k < K ? load_bits(rg.k, rg.k_dt, ko + k) : 0u;
        if constexpr (KDA)
          gb[u][e] = k < K ? __float_as_uint(rg.g[s * rg.g0 + pos * rg.g1 + int64_t(hv0) * rg.g2 + k]) : 0u;
      }
      ksj[u] = ksr[pos * rg.ks1];
    }
#pragma unroll
    for (int u = 0; u < KB; ++u) {
      const int jj = j0 + u;
      if (jj >= n_old) break;
      const int j = KDA ? n_old - 1 - jj : jj;
      float dk = 0.f, dq = 0.f;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int k = lane + 32 * e;
        if (k < K) {
          float kv = widen_bits(kb[u][e], rg.k_dt) * ksj[u];
          if constexpr (KDA) {
            kv *= expf(suf[e]);
            suf[e] += __uint_as_float(gb[u][e]);
          }
          if (flush) PKV[int64_t(j) * K + k] = kv;
          dk += kv * KT[k];
          dq += kv * QV[k];
        }
      }
      if (!flush) {
        dk = warp_sum(dk);
        dq = warp_sum(dq);
        if (lane == 0) {
          DK[j] = dk;
          DQ[j] = dq;
        }
      }
    }
  }
  if constexpr (KDA) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int k = lane + 32 * e;
      if (k < K) {
        const float ev = expf(suf[e]), eu = flush ? expf(gtok[e]) : ev;
        P[rl.e0v + k] = flush ? ev : 0.f;
        P[rl.uk + k] = eu * KT[k];
        P[rl.uq + k] = eu * QV[k];
      }
    }
  } else {
    // GDN decays (replay1.cuh phase 2): c_j = e^{Λ_m − Λ_j} by a warp scan.
    for (int hl = 0; hl < nh; ++hl) {
      const float* gg = GS + hl * (L + 1);
      const float tok = flush ? 0.f : gg[n_old];
      const float all = gdn_suffix_decays(gg, tok, n_old, CO + hl * L, lane);
      if (lane == 0) {
        P[rl.e0 + hl] = flush ? expf(all) : 0.f;
        P[rl.eu + hl] = flush ? expf(gg[n_old]) : expf(n_old > 0 ? all : tok);
      }
    }
    for (int i = lane; i < K; i += 32) {
      P[rl.uk + i] = KT[i];
      P[rl.uq + i] = QV[i];
    }
    __syncwarp();
    if (flush)
      for (int x = lane; x < nh * L; x += 32) P[rl.co + x] = CO[x];
  }
  __syncwarp();
  // Phase 3: per row the history terms h_k, h_q (a flush: none), then
  // β (v − h_k) and h_q; four consecutive rows per lane and value head,
  // records in order (batches of four loads in flight).
  const float* const BT = P + rl.beta;
  if (lane == 0) r1p_stamp(a, it, 15);
  for (int hl = 0; hl < nh; ++hl) {
    const float beta = BT[hl];
    const char* const dh = static_cast<const char*>(rg.d) + (s * rg.d0 + int64_t(hv0 + hl) * rg.d2) * dsz;
    for (int v0 = 4 * lane; v0 < V; v0 += 128) {
      float hk[4] = {0.f, 0.f, 0.f, 0.f}, hq[4] = {0.f, 0.f, 0.f, 0.f};
      uint32_t vb[4];
#pragma unroll
      for (int t = 0; t < 4; ++t) vb[t] = act_bits(in.v, b, 0, hv0 + hl, v0 + t);
      if constexpr (DUAL)  // v_j as it arrived
#pragma unroll
        for (int t = 0; t < 4; ++t)
          store_any(a.ring_v.p, a.ring_v.dt,
                    s * a.ring_v.s0 + apos * a.ring_v.s1 + int64_t(hv0 + hl) * a.ring_v.s2 + v0 + t,
                    widen_bits(vb[t], in.v.dt));
      auto acc = [&](uint4 db, int j) {
        const float4 d = widen4(db, rg.d_dt);
        const float dkj = DK[j], dqj = DQ[j], cj = KDA ? 1.f : CO[hl * L + j];
        const float w[4] = {KDA ? d.x : d.x * cj, KDA ? d.y : d.y * cj, KDA ? d.z : d.z * cj, KDA ? d.w : d.w * cj};
#pragma unroll
        for (int t = 0; t < 4; ++t) {
          hk[t] += w[t] * dkj;
          hq[t] += w[t] * dqj;
        }
      };
      if (!flush) {
        int j = 0;
        for (; j + 4 <= n_old; j += 4) {
          uint4 db[4];
#pragma unroll
          for (int u = 0; u < 4; ++u) db[u] = load4_bits(dh, rg.d_dt, pos_of(j + u) * rg.d1 + v0);
#pragma unroll
          for (int u = 0; u < 4; ++u) acc(db[u], j + u);
        }
        for (; j < n_old; ++j) acc(load4_bits(dh, rg.d_dt, pos_of(j) * rg.d1 + v0), j);
      }
      float4 vs, hq4;
      float* const vsp = &vs.x;
      float* const hqp = &hq4.x;
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        vsp[t] = beta * (widen_bits(vb[t], in.v.dt) - hk[t]);
        hqp[t] = hq[t];
      }
      store4(P + rl.vs + hl * V + v0, vs);
      store4(P + rl.hq + hl * V + v0, hq4);
    }
  }
  h.apos = apos;
  h.nsw = a.nsw;
  h.flags = R1P_LIVE | (flush ? R1P_FLUSH : 0);
  h.n_old = n_old;
  h.ost = ost;
  h.kq = kq;
  publish();
}

// ---- 2. the persistent stream kernel ----

// Whether a consumer warp releases a stage as soon as its rows are in
// registers (one EMPTY arrival per warp) rather than after the consumers'
// barrier at the end of the sweep: all but nvfp4 copies on CUDA cores, which
// measured no faster so (perf_notes_delta.md v42); on tensor cores (R1P_TC
// below) every copy's warps do.
template <int QF>
inline constexpr bool R1P_EARLY_RELEASE = QF != QF_NVFP4;
// the GDN packed copies' sweeps on tensor cores (at V = 128): fp8
// (perf_notes_delta.md v46) and nvfp4 (v59). KDA's (one value head per item)
// measured even with them on an H100 (v59), so its sweeps stay on CUDA cores.
template <bool KDA, int QF>
inline constexpr bool R1P_TC = !KDA && (QF == QF_FP8 || QF == QF_NVFP4);

// DUAL: a dual pool's read copy (no item flushes here: the dual fold did;
// no flush area), QF != QF_NONE an fp8 / nvfp4 one (SD unused): sweep k of
// an item is its value head hv0 + k, i.e. the V <= 128 rows' codes, their
// block scales and (nvfp4) the tile's tensor scale, as replay1.cuh's packed
// stream (QB), reduced as there (a lane's 16 values of a row).
template <DType SD, bool KDA, int QF = QF_NONE, bool DUAL = (QF != QF_NONE)>
__global__ void __launch_bounds__(r1p_threads(r1p_warps(KDA, int(sizeof(typename Traits<SD>::type)), DUAL)), 1)
    delta_replay1p_kernel(ReplayArgs a) {
  static_assert(DUAL || QF == QF_NONE, "a packed copy is a dual pool's");
  constexpr bool QB = QF != QF_NONE;
  using TS = std::conditional_t<QB, uint8_t, typename Traits<SD>::type>;
  constexpr int CW = r1p_warps(KDA, int(sizeof(typename Traits<SD>::type)), DUAL), NC = CW * 32;  // consumers
  constexpr int K = R1B_K, ROWB = QF == QF_NVFP4 ? R1B_K / 2 : R1B_K * int(sizeof(TS));
  extern __shared__ float4 smem4[];
  float* sm = reinterpret_cast<float*>(smem4);
  const TokenArgs& in = a.in;
  const Rings& rg = a.rings;
  const int V = in.V, L = rg.L, H = in.H, nh = a.nh, RB = nh * V;
  const int NST = a.nst, NB = a.nb, C = a.chunk;
  const int dsz = rg.d_dt == DType::f32 ? 4 : 2;
  const int SW = QB ? V : r1b_sweep_rows(KDA, int(sizeof(TS)), CW);
  const int srb = int(a.qg.scale_row_bytes);
  const int64_t SWB = QB ? r1q_sweep_bytes(QF == QF_NVFP4, V, srb) : int64_t(SW) * ROWB;
  const R1PRes rl = r1p_res(KDA, K, L, nh, RB);
  const R1PLayout lay = r1p_layout(rl, L, RB, dsz, SWB, NST, NB, !DUAL);
  const int64_t nitems = int64_t(a.rows) * H;
  uint64_t* const FULL = reinterpret_cast<uint64_t*>(sm + lay.bar);
  uint64_t* const EMPTY = FULL + R1P_MAX_STAGES;  // a stage read by the consumers
  uint64_t* const SLT = EMPTY + R1P_MAX_STAGES;
  uint64_t* const RDY = SLT + NB;
  uint64_t* const FRE = RDY + NB;
  R1PItem* const info = reinterpret_cast<R1PItem*>(sm + lay.info);
  const int tid = threadIdx.x, lane32 = tid & 31;
  // TC: the sweeps on tensor cores (a value head is the eight warps' 16-row tiles)
  const bool tc = R1P_TC<KDA, QF> && V == 128;
  if (tid == 0) {
    // FULL: the producer's arrival (bulk: one, with the bytes; per-lane
    // copies: each lane's, when its copies land)
    for (int i = 0; i < R1P_MAX_STAGES; ++i) cuda_util::mbar_init(FULL + i, a.lanes_copy ? 32 : 1);
    // EMPTY: one arrival per consumer warp once its rows are in registers
    // (EARLY or TC, below), else one after the consumers' barrier; the rest: one
    const bool early = R1P_EARLY_RELEASE<QF> || tc;
    for (int i = R1P_MAX_STAGES; i < 2 * R1P_MAX_STAGES + 3 * NB; ++i)
      cuda_util::mbar_init(FULL + i, early && i < 2 * R1P_MAX_STAGES ? CW : 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (tid >= NC + 32) {
    // ---- the producer warp: the items' sweeps in claim order, into the
    // stages the consumers have read ----
    const TS* const state = static_cast<const TS*>(a.st.p);
    const uint64_t pol = cuda_util::l2_policy_evict_first();
    char* const stg = reinterpret_cast<char*>(sm + lay.stg);
    // the item's buffer and the sweep's stage with their mbarrier phases,
    // advanced without dividing (issued: the sweeps issued)
    cuda_util::StageCursor ic, sc;
    int64_t issued = 0;
    for (;; ic.next(NB)) {
      const int buf = ic.slot;
      cuda_util::mbar_wait(SLT + buf, ic.phase);
      const int nsw = info[buf].nsw;
      if (nsw < 0) break;
      const TS* const base = state + info[buf].s * a.st.s0 + int64_t(info[buf].kh) * in.G * a.st.s1;
      for (int k = 0; k < nsw; ++k, ++issued, sc.next(NST)) {
        const int st = sc.slot;  // its previous use is the phase before
        if (issued >= NST) cuda_util::mbar_wait(EMPTY + st, sc.phase ^ 1u);
        const int r0 = k * SW, nr = min(SW, RB - r0);
        const char* src = reinterpret_cast<const char*>(base + int64_t(r0) * R1B_K);
        char* const dst = stg + st * SWB;
        if constexpr (QB) {  // value head hv0 + k: codes, block scales, (nvfp4) tensor scale
          if (lane32 == 0) {
            const uint8_t* const tile = base + int64_t(k) * a.st.s1;
            const uint32_t cb = uint32_t(V * ROWB), sb = uint32_t(V * srb);
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            cuda_util::mbar_arrive_expect_tx(FULL + st, uint32_t(SWB));
            cuda_util::bulk_g2s(dst, tile, cb, FULL + st, pol);
            cuda_util::bulk_g2s(dst + cb, tile + a.qg.scale_offset, sb, FULL + st, pol);
            if (QF == QF_NVFP4) cuda_util::bulk_g2s(dst + cb + sb, tile + a.qg.tensor_scale_offset, 16u, FULL + st, pol);
          }
        } else if (a.lanes_copy) {  // 16-byte copies by the 32 lanes, each lane's completion one arrival
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
  if (tid >= NC) {
    // ---- the loader warp: claims chunks of items in the order their
    // headers are published, waits for each header's `ready` (the
    // preparation kernel may still run: the stream starts on the items
    // prepared first) and copies its payload ----
    const char* const scr = static_cast<const char*>(a.scr);
    unsigned long long* const ctr = reinterpret_cast<unsigned long long*>(a.scr);
    const R1PItem* const hdr = reinterpret_cast<const R1PItem*>(scr + r1p_hdr_offset());
    const float* const pay = reinterpret_cast<const float*>(scr + r1p_pay_offset(nitems));
    float* const FL = sm + lay.fl;
    char* const DTR = reinterpret_cast<char*>(sm + lay.dtr);
    const uint64_t keep = cuda_util::l2_policy_evict_normal();
    // item n: the c-th of its chunk, in buffer ic.slot (advanced without
    // dividing); the last flushing item's number, buffer and phase
    int64_t base = 0, last_flush = -1;
    int c = 0, lf_buf = 0;
    uint32_t lf_phase = 0;
    cuda_util::StageCursor ic;
    for (int64_t n = 0;; ++n, c = c + 1 == C ? 0 : c + 1, ic.next(NB)) {
      if (c == 0) {
        unsigned long long x = 0;
        if (lane32 == 0) x = atomicAdd(ctr, (unsigned long long)C);
        base = int64_t(__shfl_sync(FULL_MASK, x, 0));
      }
      const int buf = ic.slot;  // its previous use is the phase before
      if (n >= NB) cuda_util::mbar_wait(FRE + buf, ic.phase ^ 1u);
      if (base + c >= nitems) {  // no more items: the producer and the consumers stop here
        if (lane32 == 0) {
          info[buf].nsw = -1;
          cuda_util::mbar_arrive(SLT + buf);
          cuda_util::mbar_arrive(RDY + buf);
        }
        break;
      }
      if (lane32 == 0) {
        const R1PItem* const hp = hdr + base + c;
        for (;;) {
          unsigned r;
          asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(r) : "l"(&hp->ready) : "memory");
          if (r) break;
          __nanosleep(64);
        }
        asm volatile("fence.proxy.async.global;" ::: "memory");  // the payload, read by bulk copies
        const R1PItem h = *hp;
        const int64_t it = int64_t(h.b) * H + h.kh;  // its payload
        r1p_stamp(a, it, 0);
        info[buf] = h;
        cuda_util::mbar_arrive(SLT + buf);
        r1p_stamp(a, it, 1);
        if (!(h.flags & R1P_LIVE)) {
          cuda_util::mbar_arrive(RDY + buf);
        } else {
          const bool flush = h.flags & R1P_FLUSH;
          // the flush area is free once the previous flushing item is consumed
          if (flush && last_flush >= 0 && last_flush > n - NB)
            cuda_util::mbar_wait(FRE + lf_buf, lf_phase);
          const float* const src = pay + it * a.scr_ps;
          const uint32_t rb = uint32_t(rl.sz * 4), fb = flush ? uint32_t((rl.kv - rl.sz + int64_t(h.n_old) * K) * 4) : 0u;
          const uint32_t db = uint32_t(RB * dsz);
          asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
          cuda_util::mbar_arrive_expect_tx(RDY + buf, rb + fb + (flush ? uint32_t(h.n_old) * db : 0u));
          cuda_util::bulk_g2s(sm + lay.res + buf * rl.sz, src, rb, RDY + buf, keep);
          if (flush) {
            last_flush = n;
            lf_buf = buf;
            lf_phase = ic.phase;
            if (fb) cuda_util::bulk_g2s(FL, src + rl.sz, fb, RDY + buf, keep);
            for (int j = 0; j < h.n_old; ++j) {
              const int64_t pos = ring_pos_near(h.ost, j, rg.R);
              cuda_util::bulk_g2s(DTR + j * db,
                                  static_cast<const char*>(rg.d) +
                                      (h.s * rg.d0 + pos * rg.d1 + int64_t(h.kh) * in.G * rg.d2) * dsz,
                                  db, RDY + buf, keep);
            }
          }
        }
        r1p_stamp(a, it, 2);
      }
      __syncwarp();
    }
    // every item's preparation is published, so this returns at once; it
    // makes this grid's completion (which the cursor kernel waits for)
    // imply the preparation kernel's
    asm volatile("griddepcontrol.wait;" ::: "memory");
    return;
  }

  // ---- the consumers ----
  const int warp = tid >> 5;
  constexpr int E = QB ? 16 : 16 / int(sizeof(TS)), LPB = R1B_K / E, RPL = 32 / LPB;
  constexpr int RQ = QB ? R1Q_RQ : r1b_rq(KDA), BR = RQ * RPL, LB = ROWB / LPB;
  constexpr int FG = QB ? 1 : KDA ? 2 : 4;  // rows per load group (a flush folds them together)
  static_assert(!QB || R1Q_MAX_ROWS == CW * BR, "packed copy: a sweep of up to 128 rows");
  static_assert(RQ % FG == 0, "whole row groups");
  const int lr = lane32 & (LPB - 1), sub = lane32 / LPB;
  uint4* const STG = reinterpret_cast<uint4*>(sm + lay.stg);
  TS* const state = static_cast<TS*>(a.st.p);
  const float* const FL = sm + lay.fl;  // a flushing item's decays and keys
  const float* const CO = FL + (rl.co - rl.sz);
  const float* const KV = FL + (rl.kv - rl.sz);
  const char* const DTR = reinterpret_cast<const char*>(sm + lay.dtr);
  auto csync = [] { cuda_util::named_sync(1, NC); };
  // the item's buffer and the sweep's stage with their mbarrier phases,
  // advanced without dividing
  cuda_util::StageCursor ic, sc;
  for (;; ic.next(NB)) {
    const int buf = ic.slot;
    cuda_util::mbar_wait(RDY + buf, ic.phase);
    const R1PItem item = info[buf];
    if (item.nsw < 0) break;
    const int64_t itc = int64_t(item.b) * H + item.kh;
    if (tid == 0) r1p_stamp(a, itc, 8);
    const float* const Z = sm + lay.res + buf * rl.sz;
    const bool live = item.flags & R1P_LIVE, flush = !DUAL && (item.flags & R1P_FLUSH);
    const int hv0 = item.kh * in.G, n_old = item.n_old;
    // TC (a packed copy, V = 128): the sweeps on tensor cores,
    // fp8_tc_operands (replay1.cuh; perf_notes_delta.md v46); else a lane's E
    // values of a row on CUDA cores.
    [[maybe_unused]] Fp8TcB bo;
    if constexpr (R1P_TC<KDA, QF>)
      if (tc) fp8_tc_operands<QF == QF_NVFP4>(Z + rl.uq, Z + rl.uk, live, lane32, bo);
    float ukr[E], uqr[E], e0r[E];
#pragma unroll
    for (int e = 0; e < E; ++e) {
      ukr[e] = live && !tc ? Z[rl.uk + lr * E + e] : 0.f;
      uqr[e] = live && !tc ? Z[rl.uq + lr * E + e] : 0.f;
      e0r[e] = KDA && flush ? Z[rl.e0v + lr * E + e] : 0.f;
    }
    TS* const BASE = state + item.s * a.st.s0 + int64_t(hv0) * a.st.s1;
    if (!KDA && flush && dsz == 4) {  // the fold's weights d_j c_j in place (as replay1.cuh)
      float* const DT = reinterpret_cast<float*>(sm + lay.dtr);
      for (int x = tid; x < n_old * RB; x += NC) {
        const int j = div_small(x, RB), r = x - j * RB;
        DT[x] *= CO[div_small(r, V) * L + j];
      }
      csync();
    }
    const int64_t d_base = item.s * rg.d0 + item.apos * rg.d1;
    const int64_t o_base = int64_t(item.b) * in.o.sb;
    for (int k = 0; k < item.nsw; ++k, sc.next(NST)) {
      const int st = sc.slot;
      cuda_util::mbar_wait(FULL + st, sc.phase);
      if (tid == 0 && k == 0) r1p_stamp(a, itc, 9);
      if constexpr (R1P_TC<KDA, QF>) {
        if (tc) {  // value head hv0 + k: warp w's rows 16w + g, 16w + g + 8
          const int g = lane32 >> 2, t = lane32 & 3, ra = 16 * warp + g;
          float aq, ak;
          if constexpr (QF == QF_FP8) {
            Fp8TcRows x;
            fp8_tc_load(reinterpret_cast<const char*>(STG) + st * SWB, ra, ra + 8, V, srb, t, x);
            __syncwarp();  // the warp's rows are in registers: its EMPTY arrival (EARLY)
            if (lane32 == 0) cuda_util::mbar_arrive(EMPTY + st);
            float dh[4] = {0.f, 0.f, 0.f, 0.f}, dl[4] = {0.f, 0.f, 0.f, 0.f};
            fp8_tc_mma(x, bo, dh, dl);
            fp8_tc_sums(dh, dl, x, bo, t, aq, ak);
          } else {
            Nv4TcRows x;
            nv4_tc_load(reinterpret_cast<const char*>(STG) + st * SWB, ra, ra + 8, V, srb, t, x);
            __syncwarp();  // the warp's rows are in registers: its EMPTY arrival
            if (lane32 == 0) cuda_util::mbar_arrive(EMPTY + st);
            float dh[2][4] = {}, dl[2][4] = {};
            nv4_tc_mma(x, bo, dh, dl);
            nv4_tc_sums(dh, dl, x, bo, t, aq, ak);
          }
          if (!(t & 1)) {  // t = 0: row ra, t = 2: row ra + 8 (as r1b_finish_rows)
            const int vl = ra + 4 * t, r = k * V + vl;
            const int64_t hv = hv0 + k;
            const float e = Z[rl.eu + k];
            const float aqv = e * aq + Z[rl.hq + r];
            const float dr = round_to(rg.d_dt, Z[rl.vs + r] - Z[rl.beta + k] * e * ak);
            store_any(rg.d, rg.d_dt, d_base + hv * rg.d2 + vl, dr);
            store_any(in.o.p, in.o.dt, o_base + hv * in.o.sh + vl, aqv + item.kq * dr);
          }
          continue;
        }
      }
      const int r0 = k * SW + warp * BR;
      const int rlim = QB ? (k + 1) * SW : RB;  // rows r < rlim are the sweep's
      float ak[RQ], aq[RQ];
      const char* const sg = reinterpret_cast<const char*>(STG) + st * SWB;
      const char* const sk = sg + (warp * BR + sub) * ROWB + lr * LB;
      [[maybe_unused]] const char* const sscale = sg + SW * ROWB;  // QB: the block scales of the sweep's rows
      // EARLY: the warp's rows of the sweep (an fp8 copy: with their scale
      // bytes) into registers first, then the warp's EMPTY arrival, no
      // consumer barrier: the producer refills the stage while the warps
      // compute (perf_notes_delta.md v42)
      constexpr bool EARLY = R1P_EARLY_RELEASE<QF>;
      static_assert(EARLY || QF == QF_NVFP4, "the fp8 and plain paths below decode the rows EARLY loaded (rw, rsb)");
      [[maybe_unused]] uint4 rw[EARLY ? RQ : 1];
      [[maybe_unused]] uint32_t rsb[EARLY && QB ? RQ : 1];
      if constexpr (EARLY) {
#pragma unroll
        for (int u = 0; u < RQ; ++u) {
          const int r = r0 + u * RPL + sub;
          const bool rv = r < rlim;
          rw[u] = rv ? *reinterpret_cast<const uint4*>(sk + u * RPL * ROWB) : make_uint4(0u, 0u, 0u, 0u);
          if constexpr (QF == QF_FP8) rsb[u] = rv ? uint8_t(sscale[(r - k * SW) * srb + (lr >> 1)]) : 127u;
        }
        __syncwarp();
        if (lane32 == 0) cuda_util::mbar_arrive(EMPTY + st);
      }
#pragma unroll
      for (int u0 = 0; u0 < RQ; u0 += FG) {
        float f[FG][E];
        float qs[FG];  // QF_FP8: the rows' block scales 2^(e − 127), applied to the sums (exact)
#pragma unroll
        for (int i = 0; i < FG; ++i) {
          [[maybe_unused]] const int r = r0 + (u0 + i) * RPL + sub;
          [[maybe_unused]] const bool rv = r < rlim;
          qs[i] = 1.f;
          if constexpr (QF == QF_FP8) {
            const uint4 w = rw[u0 + i];  // (EARLY)
            const uint32_t eb = rsb[u0 + i];
            qs[i] = quant::dev::exp2i(int(eb) - 127);
            quant::dev::fp8x16_decode_unscaled(w, f[i]);
          } else if constexpr (QF == QF_NVFP4) {  // (y · s) · t per value
            const uint2 w = rv ? *reinterpret_cast<const uint2*>(sk + (u0 + i) * RPL * ROWB) : make_uint2(0u, 0u);
            const float sf = rv ? quant::dev::e4m3_decode(uint8_t(sscale[(r - k * SW) * srb + lr])) : 0.f;
            quant::dev::nvfp4x16_decode(w, sf, *reinterpret_cast<const float*>(sscale + SW * srb), f[i]);
          } else {
            const uint4 w = rw[u0 + i];  // (EARLY)
            const TS* x = reinterpret_cast<const TS*>(&w);
#pragma unroll
            for (int e = 0; e < E; ++e) f[i][e] = Traits<SD>::load(x[e]);
          }
        }
        if constexpr (!DUAL) if (flush) {  // S_h = e^{Λ_h} ⊙ S_0 + Σ_j (d_j c_j) k̂_jᵀ (KDA: c_j in KV)
          int rc[FG], hc[FG];
#pragma unroll
          for (int i = 0; i < FG; ++i) {
            rc[i] = min(r0 + (u0 + i) * RPL + sub, RB - 1);
            hc[i] = div_small(rc[i], V);
            const float e0 = KDA ? 1.f : Z[rl.e0 + hc[i]];
#pragma unroll
            for (int e = 0; e < E; ++e) f[i][e] *= KDA ? e0r[e] : e0;
          }
          // GDN fp32 records hold the weights d_j c_j (scaled in place at
          // the item's start); 16-bit ones are widened and scaled here. Two
          // records per step keep their shared-memory loads in flight together.
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
              r1b_fold_record(f, w, KV + j * K + lr * E);
            }
          };
          if (dsz == 4) fold(std::true_type{});
          else fold(std::false_type{});
          r1b_store_rows<SD>(f, BASE, r0, u0, RPL, sub, RB, lr * E);
        }
        r1b_row_dots(f, ukr, uqr, qs, ak + u0, aq + u0);
      }
      if constexpr (!EARLY) {
        csync();  // the stage read: refill it
        if (tid == 0) cuda_util::mbar_arrive(EMPTY + st);
      }
      r1b_finish_rows<KDA, LPB>(ak, aq, lr, r0, RPL, sub, rlim, V, hv0, Z + rl.eu, Z + rl.beta, Z + rl.vs, Z + rl.hq,
                           item.kq, rg, in, d_base, o_base);
    }
    csync();  // the item's buffer and the flush area read
    if (tid == 0) {
      r1p_stamp(a, itc, 10);
      if (a.timing) {
        unsigned smid;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
        a.timing[itc * 16 + 11] = smid | (unsigned long long)(item.flags) << 32;
      }
      cuda_util::mbar_arrive(FRE + buf);
    }
  }
}

}  // namespace replayssm::delta::cuda_impl
