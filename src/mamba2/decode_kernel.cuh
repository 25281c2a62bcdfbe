// Standard decode (the baseline) and the snapshot speculative baseline.
//
// Per head h, row p (N-vector S[p, :]), tokens t = 0..T-1 in fp32 registers:
//   S ← a_t S + (δ_t x_t[p]) B_t,  a_t = e^{δ_t A}
//   y_t[p] = S·C_t + D x_t[p]   (y ← y·silu(z) with z)
// decode:   S is read from and written back (rounded once) to the row's slot.
// snapshot: S starts from slot state_indices[b, a_b − 1] and the state after
//           token t is stored (rounded) into slot state_indices[b, t]; the
//           running fp32 state continues unrounded.
// A block owns group g, heads [h0, h0+nh), rows [p0, p0+np). The state loads
// of its first stages − 1 passes are issued (cp.async into shared-memory
// stages, kernel_common.cuh::issue_pass) as soon as the source slot is known;
// B_t, C_t (fp32), a_t, δ_t, D per head and x, z of its rows are staged in
// shared memory in one round trip (kernel_common.cuh::batched) while they are
// in flight. The stream keeps stages − 1 passes ahead; every state access is
// a streaming (evict-first) 16-byte access.
//
// EAGER (T = 1 replay step at small batches, launch.cu): the same
// read-update-write on a replay pool's checkpoint, each row folded first with
// the slot's committed records (after a fused commit; slot_kernels.cuh
// stage_fold / fold_row; none in the steady state), so the token's record is
// not appended and the ring ends empty: rows whose cursor changes count their
// blocks in p.ctr and the last one resets it (else the cursor kernel does).
#pragma once
#include <type_traits>

#include "mamba2/kernel_common.cuh"
#include "mamba2/slot_kernels.cuh"

namespace replayssm::mamba2::kern {

// Eager fold of a row before its token: n records from ring position start
// (stage_fold's arrays).
struct EagerFold {
  int n = 0, start = 0;
  const float* Bs = nullptr;
  const float* fw = nullptr;
  const float* fdec = nullptr;
};

template <DType SD, DType AD, int VPL, bool FOLD>
__device__ __forceinline__ void decode_pass(const Params& p, const BlockPos& bp, const Lane& l,
                                            typename Traits<SD>::type* base_state, int64_t src,
                                            int64_t b, bool snap, const int64_t* dsts,
                                            const float* Bs, const float* Cs, const float* Ah,
                                            const float* dl, const float* Dh, const float* xs,
                                            const float* zs, int q, const uint4* stg, const EagerFold& ef) {
  constexpr int VEC = VecOf<SD>::value;
  const int T = p.T, ns = p.ns, N = p.N;
  const int r = q * l.nrg + l.rg;
  const bool in = r < l.rows;
  const int hl = in ? r / l.np : 0, pp = in ? r - hl * l.np : 0;
  const int h = bp.h0 + hl, pr = bp.p0 + pp;
  const int64_t roff = int64_t(h) * p.st_h + int64_t(pr) * p.st_p;
  float f[VPL][VEC];
#pragma unroll
  for (int k = 0; k < VPL; ++k) widen<SD>(stg[k * KERNEL_THREADS], f[k]);
  if (FOLD && in)
    fold_row<AD, VPL, VEC>(p, src, ef.start, ef.n, hl, h, pr, l.lr, ef.Bs, ef.fw, ef.fdec, f);
  for (int t = 0; t < T; ++t) {
    const int o = (hl * T + t) * p.np + pp;
    const float xv = xs[o];
    const float d = dl[hl * T + t], a = expf(d * Ah[hl]), dx = d * xv;  // a_t = e^{δ_t A}
    float part = 0.f;
#pragma unroll
    for (int k = 0; k < VPL; ++k) {
      const int vi = l.lr + k * l.lpr;
      if (vi >= p.nv) continue;
      axpby_smem<VEC>(f[k], a, dx, Bs + t * ns + vi * VEC);
      part += dot_smem<VEC>(f[k], Cs + t * ns + vi * VEC);
      if (snap && in) store_raw<SD>(base_state + dsts[t] * p.st_s + roff, vi * VEC, N, narrow<SD>(f[k]), true);
    }
    part = group_sum(part, l.lpr);  // every lane of the warp takes part
    if (in && l.lr == 0) {
      float yv = fmaf(Dh[hl], xv, part);
      if (p.z) yv = silu_gate(yv, zs[o]);
      st_act<AD>(p.y, b * p.y_b + t * p.y_t + int64_t(h) * p.y_h + pr, yv);
    }
  }
  if (!snap && in) {
#pragma unroll
    for (int k = 0; k < VPL; ++k) {
      const int vi = l.lr + k * l.lpr;
      if (vi < p.nv) store_raw<SD>(base_state + src * p.st_s + roff, vi * VEC, N, narrow<SD>(f[k]), true);
    }
  }
}

// The state stream lives in shared-memory stages (no registers held by loads
// in flight). TAIL (p.big > 0, the baseline decode; launch.cu): the grid's
// last blocks take the last rows in smaller tiles (block_pos_tail), so the
// blocks that start last finish sooner.
template <DType SD, DType AD, int VPL, bool EAGER = false, bool TAIL = false>
__global__ void __launch_bounds__(KERNEL_THREADS, DECODE_BLOCKS_PER_SM)
mamba2_decode_kernel(const Params p) {
  using st_t = typename Traits<SD>::type;
  extern __shared__ float4 smem4[];
  uint4* stages = reinterpret_cast<uint4*>(smem4);
  float* sm = reinterpret_cast<float*>(smem4) + int64_t(p.stages) * STAGE_BYTES / 4;

  const BlockPos bp = TAIL ? block_pos_tail(p) : block_pos(p);
  const int64_t b = bp.row;
  const bool snap = p.mode == Mode::snapshot;
  const int T = p.T, ns = p.ns, N = p.N, nh = bp.nh, np = bp.np, nstages = p.stages;
  const Lane l = lane_of(p, bp);
  const int npass = (l.rows + l.nrg - 1) / l.nrg;
  const uint64_t pol = evict_first_policy();

  // Source slot of the row and validation of every slot it touches.
  int32_t bits = 0;
  int st = ROW_OK;
  int64_t src = 0;
  if (!snap) {
    src = row_slot(p, b);
    st = check_slot(p, src, &bits);
  } else if (cuda_util::load_index(p.sidx, p.sidx_dtype, b * p.sidx_b) == p.pad) {
    st = ROW_PAD;
  } else {
    for (int t = 0; t < T; ++t) {
      const int64_t s = cuda_util::load_index(p.sidx, p.sidx_dtype, b * p.sidx_b + t * p.sidx_t);
      if (s < 0 || s >= p.S) { bits |= STATUS_BAD_SLOT; st = ROW_BAD; }
    }
    const int64_t a = p.acc ? cuda_util::load_index(p.acc, p.acc_dtype, b * p.acc_s) : 1;
    if (a < 1 || a > T) { bits |= STATUS_BAD_ACCEPTED; st = ROW_BAD; }
    if (st == ROW_OK)
      src = cuda_util::load_index(p.sidx, p.sidx_dtype, b * p.sidx_b + (a - 1) * p.sidx_t);
  }
  if (st != ROW_OK) {
    if (bits && reporter(bp)) cuda_util::report(p.status, bits);
    zero_outputs<AD>(p, bp, b, 0, T);
    return;
  }
  st_t* base_state = static_cast<st_t*>(p.state);
  st_t* S = base_state + src * p.st_s;
  // Eager: the row's cursor is the first async copy (group 0, committed by
  // every thread so the wait counts stay uniform), ahead of the state's
  // passes, so a cold cursor does not queue behind them; planned after the
  // token's barrier below. Its 4 ints lie after zs, the fold's arrays after
  // them (heuristics.h eager_cursor_off).
  const int64_t eager_off = eager_cursor_off(T, ns, p.nh, p.np);
  int32_t* CUR = reinterpret_cast<int32_t*>(sm + eager_off);
  int64_t acc = 0;
  if (EAGER) {
    if (threadIdx.x == 0)
      for (int i = 0; i < 3; ++i) cp_async4(CUR + i, p.cursor + src * p.cur_s + i);
    cp_async_commit();
    if (p.acc) acc = cuda_util::load_index(p.acc, p.acc_dtype, b * p.acc_s);
  }
  for (int q = 0; q < nstages - 1; ++q) issue_pass<SD, VPL>(p, bp, l, S, q, npass, stages, nstages, pol);

  // Shared memory carve-up (heuristics.h::decode_smem_floats).
  int64_t* dsts = reinterpret_cast<int64_t*>(sm);  // [T] snapshot destinations (4T floats)
  float* Bs = sm + 4 * T;                           // [T][ns]
  float* Cs = Bs + T * ns;                          // [T][ns]
  float* Ah = Cs + T * ns;                          // [nh]     A (room for [nh][T])
  float* dl = Ah + p.nh * T;                        // [nh][T]  δ_t
  float* Dh = dl + p.nh * T;                        // [nh]
  float* xs = Dh + p.nh;                            // [nh][T][np]
  float* zs = xs + p.nh * T * p.np;                 // [nh][T][np]
  const int tid = threadIdx.x;
  if (snap)
    for (int t = tid; t < T; t += KERNEL_THREADS)
      dsts[t] = cuda_util::load_index(p.sidx, p.sidx_dtype, b * p.sidx_b + t * p.sidx_t);
  // one round trip: B, C | δ per (head, t) | D, A per head | x, z per (head, t, p)
  const int nBC = 2 * T * ns, nD = nh * T, nX = nh * T * np, nZ = p.z ? nX : 0;
  batched<8, AD>(p, nBC + nD + 2 * nh + nX + nZ,
      [&](int i) -> RawItem {
        if (i < nBC) {
          const bool isC = i >= T * ns;
          const int c = isC ? i - T * ns : i, t = c / ns, nn = c - t * ns;
          if (nn >= N) return RawItem{};
          return isC ? raw_act<AD>(p.Cm, b * p.C_b + t * p.C_t + bp.g * p.C_g + nn)
                     : raw_act<AD>(p.Bm, b * p.B_b + t * p.B_t + bp.g * p.B_g + nn);
        }
        i -= nBC;
        if (i < nD) { const int hl = i / T; return raw_delta(p, b, i - hl * T, bp.h0 + hl); }
        i -= nD;
        if (i < 2 * nh) return i < nh ? (p.D ? raw_f32(p.D, (bp.h0 + i) * p.D_s) : RawItem{}) : raw_f32(p.A, (bp.h0 + i - nh) * p.A_s);
        i -= 2 * nh;
        const bool isz = i >= nX;
        const int c = isz ? i - nX : i, hl = c / (T * np), tp = c - hl * (T * np), t = tp / np,
                  pp = tp - t * np;
        const int64_t h = bp.h0 + hl, pr = bp.p0 + pp;
        return isz ? raw_act<AD>(p.z, b * p.z_b + t * p.z_t + h * p.z_h + pr)
                   : raw_act<AD>(p.x, b * p.x_b + t * p.x_t + h * p.x_h + pr);
      },
      [&](int i, float v) {
        if (i < nBC) { Bs[i] = v; return; }  // Bs and Cs are adjacent
        i -= nBC;
        if (i < nD) { dl[i] = v; return; }
        i -= nD;
        if (i < 2 * nh) { (i < nh ? Dh : Ah - nh)[i] = v; return; }
        i -= 2 * nh;
        const bool isz = i >= nX;
        const int c = isz ? i - nX : i, hl = c / (T * np), tp = c - hl * (T * np), t = tp / np,
                  pp = tp - t * np;
        (isz ? zs : xs)[(hl * T + t) * p.np + pp] = v;
      });
  if (EAGER) cp_async_wait(nstages - 1);  // the cursor's group (thread 0's copies)
  __syncthreads();
  // Eager: the plan (errors as the replay kernels report them); the records
  // to fold are the committed ones, the flush's when the ring is full. Rows
  // whose cursor changes: the row's last block resets it (every block read
  // it before counting itself; the row's blocks are block_pos's pchunks ×
  // hchunks × G of a 1-D grid).
  EagerFold ef;
  if (EAGER) {
    const RingCursor cur{CUR[0], CUR[1], CUR[2]};
    StepPlan plan{};
    if (plan_from_cursor(p, cur, acc, &plan, &bits) != ROW_OK) {
      cp_async_wait(0);  // no copy outlives the block
      if (bits && reporter(bp)) cuda_util::report(p.status, bits);
      zero_outputs<AD>(p, bp, b, 0, T);
      return;
    }
    ef.n = plan.flush ? plan.fold_count : plan.hist_count;
    ef.start = plan.flush ? plan.fold_start : plan.hist_start;
    if (p.ctr && ef.n > 0 && threadIdx.x == 0 &&
        cuda_util::last_row_arrival(p.ctr + b, unsigned(p.pchunks * p.hchunks * p.G)))
      store_cursor(p, src, RingCursor{ring_pos(ef.start, ef.n, p.R), 0, 0});
  }
  if (EAGER && ef.n > 0) {  // fold arrays after the cursor (heuristics.h eager_cursor_off)
    float* fB = sm + eager_off + 4;
    float* fw = fB + int64_t(p.L) * ns;
    float* fdec = fw + int64_t(p.nh) * p.L;
    stage_fold<AD>(p, bp, src, ef.start, ef.n, fB, fw, fdec);  // (syncs)
    ef.Bs = fB;
    ef.fw = fw;
    ef.fdec = fdec;
  }

  // An eager step's rows with records to fold take their own instance of the
  // passes, so the steady state's are the baseline's.
  auto passes = [&](auto fold) {
    for (int q = 0; q < npass; ++q) {
      issue_pass<SD, VPL>(p, bp, l, S, q + nstages - 1, npass, stages, nstages, pol);
      cp_async_wait(nstages - 1);  // pass q has landed
      decode_pass<SD, AD, VPL, decltype(fold)::value>(p, bp, l, base_state, src, b, snap, dsts, Bs, Cs, Ah, dl,
                                                      Dh, xs, zs, q, stage_slot<VPL>(stages, q % nstages, 0), ef);
    }
  };
  if constexpr (EAGER) {
    if (ef.n > 0) return passes(std::true_type{});
  }
  passes(std::false_type{});
}

}  // namespace replayssm::mamba2::kern
