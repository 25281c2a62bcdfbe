// The high-precision fold of a dual GDN/KDA pool (design §4) and the repack
// of its read copy, one block per (group of hpb value heads, row b).
//
// For each committed record j of the row, in order (the sequential form of
// the triangular system of §3), per state row v (lane group, row in
// registers, fp32):
//   u_j = α_j ⊙ k̂_j   (GDN: α_j = e^{g_j} broadcast; k̂_j = k_j·ks_j)
//   d_j = β_j (v_j[v] − S_{j−1}[v]·u_j), rounded to ring_d's dtype
//   S_j[v] = S_{j−1}[v] ⊙ α_j + d_j k̂_j
// using ring_k, ring_ks, ring_g, ring_v, ring_beta only: the d̂ of ring_d
// (computed against the copy) are never read, so the checkpoint depends on
// the checkpoint and the raw inputs only. The rows are stored rounded to the
// state dtype; after a block barrier the block re-reads its tile from the
// checkpoint and packs it into the copy (quant/tile_pack.cuh), so the copy
// equals quant_pack of the stored checkpoint byte for byte.
#pragma once
#include "delta/kernel_common.cuh"
#include "quant/tile_pack.cuh"

namespace replayssm::delta::cuda_impl {

inline constexpr int DUAL_THREADS = 256;

// Shared memory of the fold (floats): KH, U [L][K] (+ KDA A [L][K]), β [L],
// GDN α [L], the records' v [L][V].
__host__ __device__ inline int64_t dual_fold_floats(bool kda, int K, int V, int L) {
  return align4(int64_t(L) * K) * (kda ? 3 : 2) + 2 * align4(L) + align4(int64_t(L) * V);
}

__device__ __forceinline__ void dual_store_out(void* p, DType dt, int64_t i, float x) {
  if (dt == DType::f64) static_cast<double*>(p)[i] = double(x);
  else store_any(p, dt, i, x);
}

// What a fold block does for row b (every op): the slot, the ring span
// and whether the block runs at all. Pad rows of a materialize get zeros
// here; bad slots and cursors are reported (except DUAL_STEP rows: the step
// kernel reports them, same checks).
// Ops after which the block repacks the head's copy from the checkpoint.
__device__ __forceinline__ bool dual_fold_packs(int op) {
  return op == DUAL_STEP || op == DUAL_FLUSH || op == DUAL_PACK;
}
// Per-block timelines of a fold launch (a.timing: 16 %globaltimer stamps
// per block, the launcher's FOLD_TIMING dump; scripts/fold_timeline.py):
// 0 start, 1 plan known, 2 + i head i of the block done (i < 8); the
// first head's records loaded (10), its weights and M made (11), warp 0's
// tile folded (12) and packed (13); 14 end, 15 SM | (folds ? 1 : 0) << 32;
// with at most 4 heads per block also warp 0's products and solve of the
// first head done (6) and the second head's records (7), weights (8) and
// warp 0's products and solve (9) (dual_fold_phase). Thread 0 only.
__device__ __forceinline__ void dual_fold_stamp(const DualArgs& a, int i, unsigned long long v = 0) {
  if (!a.timing || threadIdx.x != 0) return;
  if (i != 15) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(v)::"memory");
  a.timing[(int64_t(blockIdx.y) * gridDim.x + blockIdx.x) * 16 + i] = v;
}
// Phase p of the block's head h (0 records, 1 weights, 2 warp 0's products
// and solve, 3 its tile folded, 4 packed): the slots above.
__device__ __forceinline__ void dual_fold_phase(const DualArgs& a, int h, int p) {
  constexpr int first[5] = {10, 11, 6, 12, 13}, second[5] = {7, 8, 9, -1, -1};
  const int i = h == 0 ? first[p] : h == 1 ? second[p] : -1;
  if (i >= 0 && (a.hpb <= 4 || (i >= 10 && i <= 13))) dual_fold_stamp(a, i);
}
__device__ __forceinline__ unsigned long long dual_fold_smid() {
  unsigned r;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(r));
  return r;
}

struct FoldPlan {
  int64_t s = 0;
  int start = 0, count = 0;
};
__device__ inline bool dual_fold_plan(const DualArgs& a, int b, int hv_lo, int hv_hi, FoldPlan& p) {
  const Rings& rg = a.rings;
  const int tid = threadIdx.x, nthr = blockDim.x;
  const bool reporter = tid == 0 && blockIdx.x == 0;
  const bool mat = a.op == DUAL_MATERIALIZE;
  const bool reports = a.op != DUAL_STEP;
  const int K = a.K, V = a.V;
  p.s = idx_at(a.slot, b);
  if (p.s == a.pad) {
    if (mat)
      for (int hv = hv_lo; hv < hv_hi; ++hv)
        for (int64_t x = tid; x < int64_t(V) * K; x += nthr)
          dual_store_out(a.out, a.out_dt, int64_t(b) * a.o0 + int64_t(hv) * a.o1 + (x / K) * a.o2 + x % K, 0.f);
    return false;
  }
  if (p.s < 0 || p.s >= a.S) {
    if (reporter && reports) cuda_util::report(a.status, STATUS_BAD_SLOT);
    return false;
  }
  if (rg.cur) {
    RingCursor c = cursor_at(rg, p.s);
    if (!cursor_ok(rg, c)) {
      if (reporter && reports) cuda_util::report(a.status, STATUS_RING_OVERFLOW);
      return false;
    }
    switch (a.op) {
      case DUAL_STEP:
        if (a.acc.p) {
          if (!ring_commit(c, int32_t(idx_at(a.acc, b)))) return false;
        } else if (c.pending != 0) {
          return false;
        }
        if (!ring_plan_step(c, a.T, rg.L, rg.R).flush) return false;
        break;
      case DUAL_FLUSH:
        if (c.pending != 0) {
          if (reporter) cuda_util::report(a.status, STATUS_UNCOMMITTED);
          return false;
        }
        break;
      case DUAL_INIT:
        if (!a.init.p || idx_at(a.init, b) == 0) return false;
        break;
      default: break;
    }
    p.start = c.start;
    p.count = a.op == DUAL_PACK ? 0 : c.count;
  } else if (a.op == DUAL_STEP || a.op == DUAL_INIT) {
    return false;
  }
  return true;
}

template <DType SD, bool KDA>
__global__ void __launch_bounds__(DUAL_THREADS, 2) delta_dual_fold_kernel(DualArgs a) {
  using RW = Row<SD>;
  using TS = typename RW::TS;
  extern __shared__ float4 smem4[];
  float* sm = reinterpret_cast<float*>(smem4);
  const Rings& rg = a.rings;
  const int K = a.K, V = a.V, lpr = a.lpr;
  const int b = blockIdx.y;
  const int hv_lo = blockIdx.x * a.hpb, hv_hi = min(a.HV, hv_lo + a.hpb);
  const int tid = threadIdx.x, nthr = blockDim.x;
  const int grp = tid / lpr, lane = tid % lpr, rpp = nthr / lpr;
  const bool mat = a.op == DUAL_MATERIALIZE;
  FoldPlan fp;
  if (!dual_fold_plan(a, b, hv_lo, hv_hi, fp)) return;
  // Every block has read its cursor: the T = 1 dual replay (a programmatic
  // dependent, delta_launch.cu) may start; its flushing rows wait for this grid.
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  const int64_t s = fp.s;
  const int start = fp.start, count = fp.count;
  const bool pack = dual_fold_packs(a.op);
  const int L = rg.cur ? rg.L : 0;
  float* KH = sm;
  float* U = KH + align4(int64_t(L) * K);
  float* AV = U + align4(int64_t(L) * K);  // KDA
  float* BT = sm + align4(int64_t(L) * K) * (KDA ? 3 : 2);
  float* AL = BT + align4(L);  // GDN
  float* VJ = AL + align4(L);  // [L][V]: v of the records, so the row loop reads no global memory

  for (int hv = hv_lo; hv < hv_hi; ++hv) {  // uniform over the block
    const int kh = hv / a.G;
    TS* const tile = static_cast<TS*>(a.st.p) + s * a.st.s0 + int64_t(hv) * a.st.s1;
    if (count > 0 || mat) {
      for (int x = tid; x < count * K; x += nthr) {
        const int j = x / K, i = x % K;
        const int64_t pos = ring_pos(start, j, rg.R);
        const float kk = load_any(rg.k, rg.k_dt, s * rg.k0 + pos * rg.k1 + int64_t(kh) * rg.k2 + i) *
                         rg.ks[s * rg.ks0 + pos * rg.ks1 + int64_t(kh) * rg.ks2];
        const float g = KDA ? rg.g[s * rg.g0 + pos * rg.g1 + int64_t(hv) * rg.g2 + i]
                            : rg.g[s * rg.g0 + pos * rg.g1 + int64_t(hv) * rg.g2];
        const float al = expf(g);
        KH[x] = kk;
        U[x] = al * kk;
        if (KDA) AV[x] = al;
      }
      for (int j = tid; j < count; j += nthr) {
        const int64_t pos = ring_pos(start, j, rg.R);
        BT[j] = static_cast<const float*>(a.ring_beta.p)[s * a.ring_beta.s0 + pos * a.ring_beta.s1 +
                                                         int64_t(hv) * a.ring_beta.s2];
        if (!KDA) AL[j] = expf(rg.g[s * rg.g0 + pos * rg.g1 + int64_t(hv) * rg.g2]);
      }
      for (int x = tid; x < count * V; x += nthr) {
        const int j = x / V, v = x % V;
        const int64_t pos = ring_pos(start, j, rg.R);
        VJ[x] = load_any(a.ring_v.p, a.ring_v.dt, s * a.ring_v.s0 + pos * a.ring_v.s1 + int64_t(hv) * a.ring_v.s2 + v);
      }
      __syncthreads();
      for (int base = 0; base < V; base += rpp) {  // uniform: group sums need whole warps
        const int v = base + grp;
        const bool valid = v < V;
        TS* const rowp = tile + int64_t(valid ? v : 0) * a.st.s2;
        RW row;
        if (valid) row.load(rowp, lane, lpr, K);
        else row.zero();
        for (int j = 0; j < count; ++j) {
          const float sk = group_sum(row.dot(U + int64_t(j) * K, lane, lpr, K), lpr);
          const float vj = valid ? VJ[j * V + v] : 0.f;
          const float d = round_to(rg.d_dt, BT[j] * (vj - sk));
          if (KDA) row.scale(AV + int64_t(j) * K, lane, lpr, K);
          else row.scale(AL[j]);
          row.axpy(d, KH + int64_t(j) * K, lane, lpr, K);
        }
        if (!valid) continue;
        if (mat) {
#pragma unroll
          for (int j = 0; j < RW::NCH; ++j)
#pragma unroll
            for (int e = 0; e < RW::VEC; ++e) {
              const int k = (j * lpr + lane) * RW::VEC + e;
              if (k < K)
                dual_store_out(a.out, a.out_dt, int64_t(b) * a.o0 + int64_t(hv) * a.o1 + int64_t(v) * a.o2 + k,
                               row.s[j][e]);
            }
        } else {
          row.store(rowp, lane, lpr, K);
        }
      }
    }
    __syncthreads();  // the head's checkpoint rows are visible to the block; records free
    if (pack)
      quant::dev::pack_tile_block_any<SD>(tile, a.st.s2, a.copy.p + s * a.copy.s0 + int64_t(hv) * a.copy.s1,
                                          a.geom);
  }
}

}  // namespace replayssm::delta::cuda_impl
