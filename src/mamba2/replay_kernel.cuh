// Replay step (design §2-3): T tokens per row against checkpoint + ring.
//
// Per row b (slot s) the block first replays the cursor logic (commit, plan;
// ring.h), then with n = records read (fold_count when the step flushes,
// hist_count otherwise) and window token t at index n + t:
//
//   non-flush: y_t = e^{Λ_t}(S_0 C_t) + Σ_{j ≤ n+t} δ_j e^{Λ_t − Λ_j}(B_j·C_t) x_j + D x_t
//              Λ counted from the checkpoint over records and window; S_0 is
//              read once and never written.
//   flush:     S_new = e^{Λ_n} S_0 + Σ_{j<n} δ_j e^{Λ_n − Λ_j} x_j B_jᵀ, written once
//              (rounded to the state dtype); then the formula above with S_new
//              and an empty history (Λ restarts at the new checkpoint).
//
// Exponents use suffix sums of δ (Σ_{j<i≤m} δ_i), never differences of long
// prefix sums, so weights keep fp32 relative accuracy.
//
// Phases (one block = group g, heads [h0, h0+nh), rows [p0, p0+np)). The
// stream of a non-flush step needs only C_t, so it does not wait for the
// records; every global load before it is either batched (all issued before
// any is used, kernel_common.cuh::batched) or asynchronous (cp.async):
//  1. with the slot read: the window's inputs, which need no slot: C_t, B_t
//     and δ_t (fp32), A and D per head (batched); x_t and z_t (raw, cp.async).
//  2. the cursor (cp.async) and the state loads of the first stages − 1
//     passes (cp.async into shared-memory stages, kernel_common.cuh::
//     issue_pass) in flight together; once the cursor has landed every
//     thread derives the plan (commit, flush rule; ring.h).
//  3. the n records (cp.async, group REC): x_j, B_j (raw), δ_j. Appends of
//     the step's records: ring_x (own heads and rows), ring_dt (own heads,
//     p-chunk 0), ring_B (the single block hc = pc = 0 of the group: one
//     writer per (slot, position, group)); positions append_start…+T−1 are
//     disjoint from the n positions read (R >= L+T).
//  4. (replay_coefficients) BC[t][j] = B_j·C_t once for the block (shared by
//     its nh heads); one warp per (head, t): dec = e^{Λ_t}, coef[t][j] =
//     δ_j e^{Λ_t−Λ_j} BC[t][j] (suffix sums of δ by a warp scan); flush: one
//     warp per head for the fold weights fw_j = δ_j e^{Λ_n−Λ_j}, fdec = e^{Λ_n};
//     hist[h][t][p] = Σ_j coef[t][j] x_j[p] + D x_t[p]. A flush runs it
//     before its first pass (the fold needs fw); otherwise it runs after pass
//     q_rec, with the next passes in flight.
//  5. stream the state rows, stages − 1 passes ahead; flush: fold
//     (fdec·S_0 + Σ_j fw_j x_j[p] B_j), round, write; part[t][r] = S·C_t.
//  6. y_t = dec·part + hist, gate, store (coalesced over p).
// Ring positions are start + i with one conditional subtraction (start < R,
// i < R); no integer division by R anywhere.
//
// Dual precision (Params::dual, design §4): the state streamed is the read
// copy and a row whose plan flushes was already folded and re-packed by
// mamba2_dual_pack_kernel, so it runs as a non-flush step with an empty
// history (n = 0 records from the new ring start, Λ restarting) and writes
// no state. QF selects the stream: QF_NONE the state dtype SD (a bf16 / f16
// copy is a plain [P, N] matrix inside its tile), QF_FP8 / QF_NVFP4 packed
// codes, decoded in registers with the block scales staged in shared memory
// during phase 2 (plain loads; bit-exact with quant_unpack).
#pragma once
#include <type_traits>

#include "mamba2/kernel_common.cuh"
#include "quant/quant.cuh"

namespace replayssm::mamba2::kern {

// Physical ring position of logical index i (start < R, 0 <= i < R).
__device__ __forceinline__ int ring_wrap(int start, int i, int R) {
  const int s = start + i;
  return s >= R ? s - R : s;
}

// Warp-parallel suffix sums over j in [lo, hi] (hi − lo may exceed 32):
// calls f(j, s) with s = Σ_{j<i≤hi} d(i) for every j (each once, by one lane)
// and returns Σ_{lo≤i≤hi} d(i) to every lane. Every lane of the warp calls it.
template <class D, class F>
__device__ __forceinline__ float suffix_scan(D&& d, int lo, int hi, int lane, F&& f) {
  float carry = 0.f;
  for (int top = hi; top >= lo; top -= 32) {
    const int j = top - lane;  // lane 0 holds the highest index
    const float v = j >= lo ? d(j) : 0.f;
    float inc = v;  // Σ over lanes <= lane
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const float u = __shfl_up_sync(0xffffffffu, inc, o);
      if (lane >= o) inc += u;
    }
    if (j >= lo) f(j, carry + inc - v);
    carry += __shfl_sync(0xffffffffu, inc, 31);
  }
  return carry;
}

// Shared-memory arrays of the replay kernel (heuristics.h::replay_smem).
template <DType AD>
struct ReplayArrays {
  using at_t = typename Traits<AD>::type;
  int32_t* cur;
  float *Cs, *Bw, *Bf, *BC, *dh, *dwin, *Ah, *Dh, *coef, *dec, *fw, *fdec, *hist, *part;
  at_t *Bh, *xh, *xwin, *zs;
  int nps, nhp;
  __device__ ReplayArrays(char* base, const ReplaySmem& m) {
    auto f = [&](int64_t o) { return reinterpret_cast<float*>(base + o); };
    auto a = [&](int64_t o) { return reinterpret_cast<at_t*>(base + o); };
    cur = reinterpret_cast<int32_t*>(base + m.cur);
    Cs = f(m.Cs); Bw = f(m.Bw); Bf = f(m.Bf); BC = f(m.BC); dh = f(m.dh); dwin = f(m.dwin);
    Ah = f(m.Ah); Dh = f(m.Dh); coef = f(m.coef); dec = f(m.dec); fw = f(m.fw); fdec = f(m.fdec);
    hist = f(m.hist); part = f(m.part);
    Bh = a(m.Bh); xh = a(m.xh); xwin = a(m.xwin); zs = a(m.zs);
    nps = int(m.nps);
    nhp = int(m.nhp);
  }
};

// One pass of the replay stream over the lane's staged vectors stg[k·threads]:
// part[t][r] = S·C_t for the pass's rows. flush: first fold, round, write the
// checkpoint and continue with the stored value.
template <DType SD, DType AD, int VPL>
__device__ __forceinline__ void replay_pass(const Params& p, const BlockPos& bp, const Lane& l,
                                            typename Traits<SD>::type* S, bool flush, int n,
                                            const ReplayArrays<AD>& a, int q, const uint4* stg) {
  constexpr int VEC = VecOf<SD>::value;
  const int T = p.T, ns = p.ns, N = p.N;
  const int r = q * l.nrg + l.rg;
  const bool in = r < l.rows;
  const int hl = in ? r / l.np : 0, pp = in ? r - hl * l.np : 0;
  uint4 v[VPL];
#pragma unroll
  for (int k = 0; k < VPL; ++k) v[k] = stg[k * KERNEL_THREADS];
  if (flush && in) {
    const float fd = a.fdec[hl];
    float f[VPL][VEC];
#pragma unroll
    for (int k = 0; k < VPL; ++k) {
      widen<SD>(v[k], f[k]);
#pragma unroll
      for (int e = 0; e < VEC; ++e) f[k][e] *= fd;
    }
    const int xo = hl * a.nps + pp, xs = p.nh * a.nps;
#pragma unroll 2
    for (int j = 0; j < n; ++j) {
      const float w = a.fw[hl * p.L + j] * Traits<AD>::load(a.xh[j * xs + xo]);  // fw_j x_j[p]
#pragma unroll
      for (int k = 0; k < VPL; ++k) {
        const int vi = l.lr + k * l.lpr;
        if (vi < p.nv) fold_smem<VEC>(f[k], w, a.Bf + j * ns + vi * VEC);
      }
    }
    typename Traits<SD>::type* row = S + int64_t(bp.h0 + hl) * p.st_h + int64_t(bp.p0 + pp) * p.st_p;
#pragma unroll
    for (int k = 0; k < VPL; ++k) {
      const int vi = l.lr + k * l.lpr;
      if (vi >= p.nv) continue;
      v[k] = narrow<SD>(f[k]);  // outputs read the checkpoint as stored
      store_raw<SD>(row, vi * VEC, N, v[k], true);
    }
  }
  for (int t = 0; t < T; ++t) {
    float part = 0.f;
#pragma unroll
    for (int k = 0; k < VPL; ++k) {
      const int vi = l.lr + k * l.lpr;
      if (vi < p.nv) {
        float f[VEC];
        widen<SD>(v[k], f);
        part += dot_smem<VEC>(f, a.Cs + t * ns + vi * VEC);
      }
    }
    part = group_sum(part, l.lpr);  // every lane of the warp takes part
    if (in && l.lr == 0) a.part[(t * p.nh + hl) * p.np + pp] = part;
  }
}

// Issue the async loads of pass q of a packed read copy (16-byte vectors of
// codes; S points at the slot's tiles, strides in bytes).
template <int VPL>
__device__ __forceinline__ void issue_pass_packed(const Params& p, const BlockPos& bp, const Lane& l,
                                                  const uint8_t* S, int q, int npass, uint4* stages,
                                                  int nstages, uint64_t pol) {
  if (q < npass) {
    const int r = q * l.nrg + l.rg;
    const bool in = r < l.rows;
    const int hl = in ? r / l.np : 0, pr = bp.p0 + (in ? r - hl * l.np : 0);
    const uint8_t* row = S + int64_t(bp.h0 + hl) * p.st_h + int64_t(pr) * p.st_p;
    const int st = q % nstages;
#pragma unroll
    for (int k = 0; k < VPL; ++k) {
      const int vi = l.lr + k * l.lpr;
      const int bytes = (in && vi < p.nv) ? 16 : 0;
      cp_async16(stage_slot<VPL>(stages, st, k), bytes ? row + vi * 16 : row, bytes, pol);
    }
  }
  cp_async_commit();
}

// One pass of a packed read copy: part[t][r] = Ŝ·C_t with Ŝ the decoded
// copy. qs: the block's block scales ([hl] runs of packed_scale_seg bytes,
// row pp at pp·srb), qt: nvfp4 tile scales [hl].
template <int QF, DType AD, int VPL>
__device__ __forceinline__ void replay_pass_packed(const Params& p, const Lane& l,
                                                   const ReplayArrays<AD>& a, int q, const uint4* stg,
                                                   const uint8_t* qs, const float* qt) {
  constexpr int VEC = QF == QF_FP8 ? 16 : 32;
  const int T = p.T, ns = p.ns, srb = int(p.q_srb);
  const int r = q * l.nrg + l.rg;
  const bool in = r < l.rows;
  const int hl = in ? r / l.np : 0, pp = in ? r - hl * l.np : 0;
  uint4 v[VPL];
#pragma unroll
  for (int k = 0; k < VPL; ++k) v[k] = stg[k * KERNEL_THREADS];
  const uint8_t* sc = qs + hl * packed_scale_seg(p.np, srb) + pp * srb;
  const float ts = QF == QF_NVFP4 ? qt[hl] : 0.f;
  for (int t = 0; t < T; ++t) {
    float part = 0.f;
#pragma unroll
    for (int k = 0; k < VPL; ++k) {
      const int vi = l.lr + k * l.lpr;
      if (vi < p.nv) {
        const float* c = a.Cs + t * ns + vi * VEC;
        if constexpr (QF == QF_FP8) {
          const uint32_t e = sc[vi / 2];  // one E8M0 byte per 32 values
          const uint32_t w[4] = {v[k].x, v[k].y, v[k].z, v[k].w};
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const float4 f = quant::dev::fp8_decode_word(w[j], e);
            const float4 cc = *reinterpret_cast<const float4*>(c + 4 * j);
            part = fmaf(f.x, cc.x, part);
            part = fmaf(f.y, cc.y, part);
            part = fmaf(f.z, cc.z, part);
            part = fmaf(f.w, cc.w, part);
          }
        } else {
          const uint32_t c0[2] = {v[k].x, v[k].y}, c1[2] = {v[k].z, v[k].w};
          float f[16];
          quant::dev::nvfp4_decode_block(c0, sc[2 * vi], ts, f);
          part += dot_smem<16>(f, c);
          quant::dev::nvfp4_decode_block(c1, sc[2 * vi + 1], ts, f);
          part += dot_smem<16>(f, c + 16);
        }
      }
    }
    part = group_sum(part, l.lpr);
    if (in && l.lr == 0) a.part[(t * p.nh + hl) * p.np + pp] = part;
  }
}

// Phase 4 of the replay kernel (records staged): B·C, decays, coefficients,
// fold weights (flush), history terms. Every thread calls it.
template <DType AD>
__device__ __forceinline__ void replay_coefficients(const Params& p, const BlockPos& bp, bool flush,
                                                    int n, const ReplayArrays<AD>& a) {
  const int T = p.T, L = p.L, J = p.jmax, ns = p.ns, N = p.N, nh = bp.nh, np = bp.np;
  const int NH = p.nh, nps = a.nps, jb = flush ? n : 0;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  __syncthreads();  // records of every lane have landed
  if (flush)  // fp32 B of the records for the fold (zero past N)
    for (int i = tid; i < n * ns; i += KERNEL_THREADS) {
      const int nn = i % ns;
      a.Bf[i] = nn < N ? Traits<AD>::load(a.Bh[i]) : 0.f;
    }
  // B_j·C_t for jb <= j <= n + t, one warp per pair
  {
    const int span = n + T - jb;  // j index range per t (upper bound)
    for (int i = warp; i < T * span; i += KERNEL_WARPS) {
      const int t = i / span, j = jb + i % span;
      if (j > n + t) continue;  // warp-uniform
      float acc = 0.f;
      if (j < n) {
        for (int nn = lane; nn < N; nn += 32) acc = fmaf(Traits<AD>::load(a.Bh[j * ns + nn]), a.Cs[t * ns + nn], acc);
      } else {
        for (int nn = lane; nn < N; nn += 32) acc = fmaf(a.Bw[(j - n) * ns + nn], a.Cs[t * ns + nn], acc);
      }
      acc = cuda_util::warp_sum(acc);
      if (lane == 0) a.BC[t * J + j] = acc;
    }
  }
  __syncthreads();
  // decays and coefficients per (head, t); fold weights per head
  for (int i = warp; i < nh * T + (flush ? nh : 0); i += KERNEL_WARPS) {
    const int hl = i < nh * T ? i / T : i - nh * T;
    const float A = a.Ah[hl];
    auto d = [&](int j) { return j < n ? a.dh[j * a.nhp + hl] : a.dwin[hl * T + j - n]; };
    if (i < nh * T) {
      const int t = i - hl * T;
      float* c = a.coef + (hl * T + t) * J;
      const float* bc = a.BC + t * J;
      // s = Σ_{j < i <= n+t} δ_i
      const float tot = suffix_scan(d, jb, n + t, lane, [&](int j, float s) {
        c[j] = d(j) * expf(A * s) * bc[j];
      });
      if (lane == 0) a.dec[hl * T + t] = expf(A * tot);
    } else {
      float* w = a.fw + hl * L;
      // s = Σ_{j < i < n} δ_i
      const float tot = suffix_scan(d, 0, n - 1, lane, [&](int j, float s) { w[j] = d(j) * expf(A * s); });
      if (lane == 0) a.fdec[hl] = expf(A * tot);
    }
  }
  __syncthreads();
  // history and skip terms per (head, t, p)
  for (int i = tid; i < nh * T * np; i += KERNEL_THREADS) {
    const int hl = i / (T * np), tp = i - hl * (T * np), t = tp / np, pp = tp - t * np;
    const float* c = a.coef + (hl * T + t) * J;
    const typename Traits<AD>::type* xj = a.xh + hl * nps + pp;
    const typename Traits<AD>::type* xt = a.xwin + hl * nps + pp;
    float acc = a.Dh[hl] * Traits<AD>::load(xt[t * NH * nps]);
#pragma unroll 4
    for (int j = jb; j < n; ++j) acc = fmaf(c[j], Traits<AD>::load(xj[j * NH * nps]), acc);
    for (int j = n; j <= n + t; ++j) acc = fmaf(c[j], Traits<AD>::load(xt[(j - n) * NH * nps]), acc);
    a.hist[(hl * T + t) * p.np + pp] = acc;
  }
  __syncthreads();
}

template <DType SD, DType AD, int VPL, int QF = QF_NONE>
// Two resident blocks per SM; the state stream lives in shared memory stages,
// so registers hold no loads in flight.
__global__ void __launch_bounds__(KERNEL_THREADS, 2)
mamba2_replay_kernel(const Params p) {
  using st_t = std::conditional_t<QF == QF_NONE, typename Traits<SD>::type, uint8_t>;
  using at_t = typename Traits<AD>::type;
  constexpr int CH = 16 / int(sizeof(at_t));  // activation elements per 16-byte chunk
  extern __shared__ float4 smem4[];
  uint4* stages = reinterpret_cast<uint4*>(smem4);
  const ReplaySmem m = replay_smem(p.T, p.L, p.ns, p.nh, p.np, sizeof(at_t));
  const ReplayArrays<AD> a(reinterpret_cast<char*>(smem4) + int64_t(p.stages) * STAGE_BYTES, m);
  // packed streams: block scales and tile scales after the replay arrays
  [[maybe_unused]] uint8_t* qs = reinterpret_cast<uint8_t*>(smem4) + int64_t(p.stages) * STAGE_BYTES + m.bytes;
  [[maybe_unused]] float* qt = reinterpret_cast<float*>(qs + int64_t(p.nh) * packed_scale_seg(p.np, p.q_srb));

  const BlockPos bp = block_pos(p);
  const int64_t b = bp.row;
  const Lane l = lane_of(p, bp);
  const int npass = (l.rows + l.nrg - 1) / l.nrg;
  const int T = p.T, ns = p.ns, N = p.N, R = p.R, nh = bp.nh, np = bp.np;
  const int NH = p.nh, nps = a.nps, nstages = p.stages;
  const int tid = threadIdx.x;
  const uint64_t pol = evict_first_policy();
  const int pch = (np + CH - 1) / CH;  // chunks per [np] segment

  // ---- 1. window inputs (no slot needed), in flight with the slot read
  int64_t slot = row_slot(p, b);
  const int64_t acc = p.acc ? cuda_util::load_index(p.acc, p.acc_dtype, b * p.acc_s) : 0;
  {
    const at_t* x = static_cast<const at_t*>(p.x);
    const at_t* z = static_cast<const at_t*>(p.z);
    const int segs = T * nh;  // segment (t, hl)
    for (int i = tid; i < segs * pch * (p.z ? 2 : 1); i += KERNEL_THREADS) {
      const bool isz = i >= segs * pch;
      const int c = isz ? i - segs * pch : i;
      const int sg = c / pch, c0 = (c - sg * pch) * CH, t = sg / nh, hl = sg - t * nh;
      const int64_t src = b * (isz ? p.z_b : p.x_b) + t * (isz ? p.z_t : p.x_t) +
                          int64_t(bp.h0 + hl) * (isz ? p.z_h : p.x_h) + bp.p0 + c0;
      at_t* dst = (isz ? a.zs : a.xwin) + (t * NH + hl) * nps + c0;
      cp_chunk<at_t>(dst, (isz ? z : x) + src, min(CH, np - c0), pol);
    }
    cp_async_commit();  // group W
    const int nC = T * ns, nD = nh * T;
    batched<4, AD>(p, 2 * nC + nD + 2 * nh,
        [&](int i) -> RawItem {
          if (i < 2 * nC) {
            const bool isB = i >= nC;
            const int c = isB ? i - nC : i, t = c / ns, nn = c - t * ns;
            if (nn >= N) return RawItem{};
            return isB ? raw_act<AD>(p.Bm, b * p.B_b + t * p.B_t + bp.g * p.B_g + nn)
                       : raw_act<AD>(p.Cm, b * p.C_b + t * p.C_t + bp.g * p.C_g + nn);
          }
          i -= 2 * nC;
          if (i < nD) { const int hl = i / T; return raw_delta(p, b, i - hl * T, bp.h0 + hl); }
          i -= nD;
          return i < nh ? raw_f32(p.A, (bp.h0 + i) * p.A_s) : p.D ? raw_f32(p.D, (bp.h0 + i - nh) * p.D_s) : RawItem{};
        },
        [&](int i, float v) {
          if (i < 2 * nC) { (i < nC ? a.Cs : a.Bw - nC)[i] = v; return; }
          i -= 2 * nC;
          if (i < nD) { a.dwin[i] = v; return; }  // [hl][t]
          i -= nD;
          (i < nh ? a.Ah : a.Dh - nh)[i] = v;
        });
  }

  // ---- 2. cursor (async, group CUR) and the first stages − 1 passes
  int32_t bits = 0;
  if (check_slot(p, slot, &bits) != ROW_OK) {
    cp_async_wait(0);
    zero_outputs<AD>(p, bp, b, 0, T);  // the cursor kernel reports the status
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    return;
  }
  st_t* S = static_cast<st_t*>(p.state) + slot * p.st_s;
  if (tid < CURSOR_FIELDS) cp_async4(a.cur + tid, p.cursor + slot * p.cur_s + tid);
  cp_async_commit();
  auto issue = [&](int q) {
    if constexpr (QF == QF_NONE) issue_pass<SD, VPL>(p, bp, l, S, q, npass, stages, nstages, pol);
    else issue_pass_packed<VPL>(p, bp, l, S, q, npass, stages, nstages, pol);
  };
  for (int q = 0; q < nstages - 1; ++q) issue(q);
  if constexpr (QF != QF_NONE) {
    // Block scales of the block's rows and the nvfp4 tile scales, by plain
    // loads while the first passes fly. (Staged with cp.async, ptxas 13.0
    // emitted the copy as LDGSTS [R+UR0], desc[UR1] and the kernel stopped
    // with cudaErrorIllegalInstruction on the H200.)
    const int seg = np * int(p.q_srb), sseg = int(packed_scale_seg(p.np, p.q_srb)), cps = (seg + 15) / 16;
    for (int i = tid; i < nh * cps; i += KERNEL_THREADS) {
      const int hl = i / cps, c0 = (i - hl * cps) * 16, cnt = min(16, seg - c0);
      const uint8_t* src = S + int64_t(bp.h0 + hl) * p.st_h + p.q_scale_off + int64_t(bp.p0) * p.q_srb + c0;
      uint4 v;
      if (cnt == 16 && (reinterpret_cast<uintptr_t>(src) & 15) == 0) {
        v = *reinterpret_cast<const uint4*>(src);
      } else {
        uint32_t w[4] = {0u, 0u, 0u, 0u};
        for (int j = 0; j < cnt; ++j) w[j / 4] |= uint32_t(src[j]) << (8 * (j % 4));
        v = make_uint4(w[0], w[1], w[2], w[3]);
      }
      *reinterpret_cast<uint4*>(qs + hl * sseg + c0) = v;
    }
    if constexpr (QF == QF_NVFP4)
      for (int hl = tid; hl < nh; hl += KERNEL_THREADS)
        qt[hl] = *reinterpret_cast<const float*>(S + int64_t(bp.h0 + hl) * p.st_h + p.q_t_off);
  }
  cp_async_wait(nstages - 1);  // W and CUR (the passes may still fly)
  __syncthreads();

  StepPlan plan;
  const int rs = plan_from_cursor(p, RingCursor{a.cur[0], a.cur[1], a.cur[2]}, acc, &plan, &bits);
  // Every block has read the row's cursor: the cursor kernel (launched as a
  // programmatic dependent) may be scheduled; it still waits for this grid
  // to complete before it writes (griddepcontrol.wait).
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  if (rs != ROW_OK) {
    cp_async_wait(0);
    zero_outputs<AD>(p, bp, b, 0, T);
    return;
  }
  // dual: a flushing row's new checkpoint and copy are already written; its
  // history is empty (hist_count = 0 from the new start)
  const bool flush = QF == QF_NONE && plan.flush && !p.dual;
  const int n = flush ? plan.fold_count : plan.hist_count;
  const int rec_start = flush ? plan.fold_start : plan.hist_start;

  // ---- 3. records (async, group REC): x_j, B_j (raw), δ_j
  {
    const at_t* rx = static_cast<const at_t*>(p.rx);
    const at_t* rB = static_cast<const at_t*>(p.rB);
    const int nX = n * nh * pch, bch = (ns + CH - 1) / CH, nB = n * bch, dch = (nh + 3) / 4;
    const int total = nX + nB + n * dch;
    for (int i = tid; i < total; i += KERNEL_THREADS) {
      if (i < nX) {
        const int sg = i / pch, c0 = (i - sg * pch) * CH, j = sg / nh, hl = sg - j * nh;
        cp_chunk<at_t>(a.xh + (j * NH + hl) * nps + c0,
                       rx + slot * p.rx_s + int64_t(ring_wrap(rec_start, j, R)) * p.rx_r +
                           int64_t(bp.h0 + hl) * p.rx_h + bp.p0 + c0,
                       min(CH, np - c0), pol);
      } else if (i - nX < nB) {
        const int k = i - nX, j = k / bch, c0 = (k - j * bch) * CH;
        cp_chunk<at_t>(a.Bh + j * ns + c0,
                       rB + slot * p.rB_s + int64_t(ring_wrap(rec_start, j, R)) * p.rB_r +
                           int64_t(bp.g) * p.rB_g + c0,
                       max(0, min(CH, N - c0)), pol);
      } else {
        const int k = i - nX - nB, j = k / dch, h4 = (k - j * dch) * 4;
        cp_chunk<float>(a.dh + j * a.nhp + h4,
                        p.rdt + slot * p.rdt_s + int64_t(ring_wrap(rec_start, j, R)) * p.rdt_r + bp.h0 + h4,
                        min(4, nh - h4), pol);
      }
    }
    cp_async_commit();
  }

  // appends (fire and forget; nothing in this launch reads them)
  if (bp.hc == 0 && bp.pc == 0) {
    for (int i = tid; i < T * N; i += KERNEL_THREADS) {
      const int t = i / N, nn = i - t * N;
      st_act<AD>(p.rB, slot * p.rB_s + ring_wrap(plan.append_start, t, R) * p.rB_r + bp.g * p.rB_g + nn,
                 a.Bw[t * ns + nn]);
    }
  }
  if (bp.pc == 0) {
    for (int i = tid; i < T * nh; i += KERNEL_THREADS) {
      const int t = i / nh, hl = i - t * nh;
      p.rdt[slot * p.rdt_s + ring_wrap(plan.append_start, t, R) * p.rdt_r + bp.h0 + hl] = a.dwin[hl * T + t];
    }
  }
  for (int i = tid; i < T * nh * np; i += KERNEL_THREADS) {
    const int t = i / (nh * np), r = i - t * (nh * np), hl = r / np, pp = r - hl * np;
    static_cast<at_t*>(p.rx)[slot * p.rx_s + ring_wrap(plan.append_start, t, R) * p.rx_r +
                             int64_t(bp.h0 + hl) * p.rx_h + bp.p0 + pp] = a.xwin[(t * NH + hl) * nps + pp];
  }

  // ---- 4-5. a flush needs the fold weights before its first pass; otherwise
  // the stream (S_0·C_t needs only C) runs on while the records land, and
  // the coefficients are computed after pass q_rec.
  const int q_rec = flush ? -1 : min(nstages - 1, npass - 1);
  if (flush) {
    cp_async_wait(0);
    replay_coefficients<AD>(p, bp, flush, n, a);
  }
  for (int q = 0; q < npass; ++q) {
    issue(q + nstages - 1);
    cp_async_wait(q <= nstages - 2 ? nstages : nstages - 1);  // pass q has landed (REC may be between)
    if constexpr (QF == QF_NONE)
      replay_pass<SD, AD, VPL>(p, bp, l, S, flush, n, a, q, stage_slot<VPL>(stages, q % nstages, 0));
    else
      replay_pass_packed<QF, AD, VPL>(p, l, a, q, stage_slot<VPL>(stages, q % nstages, 0), qs, qt);
    if (q == q_rec) {
      cp_async_wait(q_rec + 1);  // REC (the q_rec + 1 later passes may still fly)
      replay_coefficients<AD>(p, bp, flush, n, a);
    }
  }
  __syncthreads();

  // ---- 6. outputs y_t = dec·(S C_t) + hist (coalesced over p)
  for (int i = tid; i < T * nh * np; i += KERNEL_THREADS) {
    const int t = i / (nh * np), r = i - t * (nh * np), hl = r / np, pp = r - hl * np;
    float yv = fmaf(a.part[(t * NH + hl) * p.np + pp], a.dec[hl * T + t], a.hist[(hl * T + t) * p.np + pp]);
    if (p.z) yv = silu_gate(yv, Traits<AD>::load(a.zs[(t * NH + hl) * nps + pp]));
    st_act<AD>(p.y, b * p.y_b + t * p.y_t + int64_t(bp.h0 + hl) * p.y_h + bp.p0 + pp, yv);
  }
}

}  // namespace replayssm::mamba2::kern
