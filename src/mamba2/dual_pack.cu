// Dual precision (design §4): the read copy of a Mamba-2 pool is refreshed
// here. Every block first lists the rows to pack (up to PACK_WINDOW rows at a
// time, all blocks the same list in row order, with each row's slot and fold
// plan), then the blocks walk work items: a (row, head) tile, or for bf16 /
// f16 / fp8 (whose scales are local to a row) a chunk of its P rows. A step
// whose rows do not flush costs one read of the batch's slots and cursors per
// block.
//
//   fold = true (replay step): every block replays the row's cursor plan
//     (commit of num_accepted, flush rule; kernel_common.cuh::plan_from_cursor,
//     the helper the replay and cursor kernels use); only flushing rows are
//     listed. A flushing row folds its n committed records into the
//     checkpoint exactly as the single-precision replay kernel does
//       S_new = e^{Λ_n} S_0 + Σ_{j<n} δ_j e^{Λ_n − Λ_j} x_j B_jᵀ
//     (suffix_scan for the weights, the same fp32 operations in the same
//     order, rounded to the state dtype), writes S_new, and packs it into the
//     copy. Cursors are not moved: the replay kernel then sees the same plan,
//     treats the row as flushed (Params::dual) and the cursor kernel moves
//     the cursor.
//   fold = false (prefill, flush, after their own kernels): the copy of every
//     valid row is re-packed from the checkpoint as it is.
//
// Thread layout (PackGeom): a row of the tile is cut into chunks of 4
// values along N; LPR lanes (a power of two) take a row's chunks, so a warp
// holds 32 / LPR rows and the block RP = 8·32 / LPR rows per pass. Rows
// wider than 128 values are split into CB column blocks of 128 (virtual rows
// (p, cb), CB a power of two <= 8, so a thread keeps one column block). A
// thread holds up to RT_MAX virtual rows of an item in registers: its state
// loads are issued before the records are staged (the records' loads of a
// round all issued before any is used), the fold reads each B_j chunk once
// from shared memory for all its rows and the weights w_j[p] = fw_j·x_j[p] of
// its rows as float4s (laid out by thread row), and the values are encoded where they
// are: an FP8 block (32 values) is 8 lanes and an NVFP4 block (16) 4 lanes of
// one warp (shuffle reductions). NVFP4 needs the tile amax, so its item is
// the whole tile: a tile of more than RT_MAX rows per thread is folded and
// stored in passes, then re-read from the checkpoint it just wrote.
//
// The pack is bit-identical to quant_pack (src/quant/quant.cu, README rules)
// of the stored checkpoint: the same device codecs (quant.cuh) on the values
// the checkpoint holds, padding bytes zero. A non-flush row writes nothing.
// Bad slots and cursors are skipped silently here; the replay / cursor
// kernels report them.
#include <algorithm>
#include <atomic>
#include <string>

#include "core/check.h"
#include "cuda/runtime.h"
#include "mamba2/launchers.cuh"
#include "mamba2/replay_kernel.cuh"
#include "quant/backend.h"
#include "quant/quant.cuh"

namespace replayssm::mamba2::kern {
namespace {

// Rows of the batch whose packing decisions one block holds at a time.
constexpr int PACK_WINDOW = 512;
// Virtual rows per thread held in registers (4 values each).
constexpr int RT_MAX = 8;
// Resident blocks per SM the kernel is compiled for (register budget): at
// three (80 registers) the records' batched loads spill ~0.7 KB per thread;
// two (128) was 6 % faster per step (docs/perf_notes_mamba2.md, "the dual
// pack's loads and registers").
constexpr int PACK_BLOCKS_PER_SM = 2;

struct PackGeom {
  int lpr = 32, cb = 1;  // lanes per row, column blocks per row
  int rp = 8;            // virtual rows per block pass (KERNEL_WARPS · 32 / lpr)
  int vr = 0;            // virtual rows of a tile (P · cb)
  int rt = 0;            // virtual rows per thread for the whole tile (⌈vr / rp⌉)
  int nb = 0;            // staged B row length in floats (4 · lpr · cb >= N)
  int kr = 0;            // fold weights per (record, tile row of a pass): rt rounded up (float4 reads)
};

struct DualPackParams {
  Params m;
  DType rec = DType::f32;  // dtype of ring_x / ring_B
  uint8_t* copy = nullptr;
  int64_t cp_s = 0, cp_h = 0;  // bytes between slots / heads of the read copy
  ReadFormat format = ReadFormat::bf16;
  int64_t scale_off = 0, t_off = 0;
  quant::Gaps gaps;
  bool fold = false;
  bool vec_state = false;  // state rows aligned for 4-element vector access
  bool vec_rec = false;    // ring x / B rows aligned for 16-byte loads, B rows exactly nb wide
  PackGeom g;
};

PackGeom pack_geom(int P, int N) {
  PackGeom g;
  const int nq = (N + 3) / 4;
  if (nq <= 32) {
    g.lpr = 1;
    while (g.lpr < nq) g.lpr *= 2;
  } else {
    g.lpr = 32;
    while (32 * g.cb < nq) g.cb *= 2;
  }
  g.rp = KERNEL_WARPS * (32 / g.lpr);
  g.vr = P * g.cb;
  g.rt = (g.vr + g.rp - 1) / g.rp;
  g.nb = 4 * g.lpr * g.cb;
  // one pass: rt rounded up to float4s; several (NVFP4): RT_MAX per pass
  g.kr = g.rt > RT_MAX ? (g.rt + RT_MAX - 1) / RT_MAX * RT_MAX : (g.rt + 3) / 4 * 4;
  return g;
}

// Shared memory: the window's slots (int64) [PACK_WINDOW], staged B [L][nb],
// the fold weights w = fw·x by thread row [L][pstep][kr], staged x [L][P],
// fw [L], δ [L], reduction scratch [40] (red[32] = fold decay), the window's
// fold start and count [PACK_WINDOW] each, warp counts.
int64_t dual_pack_smem_bytes(const PackGeom& g, int64_t P, int64_t L) {
  const int64_t pstep = g.rp / g.cb;
  return 8 * PACK_WINDOW +
         4 * (L * g.nb + L * pstep * g.kr + L * P + 2 * L + 40 + 2 * PACK_WINDOW + KERNEL_WARPS);
}

// Rows of one window of the batch that this call packs, in row order (every
// block builds the same list): fold = true, the rows whose plan flushes;
// otherwise every row with a valid slot. Keeps each row's slot and fold
// plan (start, count).
__device__ int window_rows(const DualPackParams& d, int64_t w0, int64_t* lslot, int* lstart, int* lcount,
                           int* wcount) {
  const Params& p = d.m;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int64_t w1 = min(p.B, w0 + PACK_WINDOW);
  int count = 0;
  for (int64_t base = w0; base < w1; base += KERNEL_THREADS) {
    const int64_t b = base + tid;
    bool take = false;
    int64_t slot = 0;
    int start = 0, n = 0;
    if (b < w1) {
      slot = row_slot(p, b);
      int32_t bits = 0;
      if (check_slot(p, slot, &bits) == ROW_OK) {
        if (d.fold) {
          const int64_t acc = p.acc ? cuda_util::load_index(p.acc, p.acc_dtype, b * p.acc_s) : 0;
          StepPlan plan;
          take = plan_from_cursor(p, load_cursor(p, slot), acc, &plan, &bits) == ROW_OK && plan.flush;
          start = plan.fold_start;
          n = plan.fold_count;
        } else {
          take = true;
        }
      }
    }
    const unsigned m = __ballot_sync(0xffffffffu, take);
    if (lane == 0) wcount[warp] = __popc(m);
    __syncthreads();
    int off = count, total = count;
    for (int w = 0; w < KERNEL_WARPS; ++w) {
      off += w < warp ? wcount[w] : 0;
      total += wcount[w];
    }
    if (take) {
      const int i = off + __popc(m & ((1u << lane) - 1u));
      lslot[i] = slot;
      lstart[i] = start;
      lcount[i] = n;
    }
    __syncthreads();
    count = total;
  }
  return count;
}

// Largest finite |v| over the block (256 threads); every thread gets it.
__device__ float block_max(float v, float* red) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  v = red[0];
#pragma unroll
  for (int w = 1; w < KERNEL_WARPS; ++w) v = fmaxf(v, red[w]);
  return v;
}

// Maximum over aligned groups of `width` lanes (float, or the uint32 bits of
// non-negative floats).
template <class T>
__device__ __forceinline__ T group_max(T v, int width) {
  for (int o = width >> 1; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Four state elements n0 .. n0+3 of a row as raw bits (element e in bits
// 32e (f32) or 16e (16-bit) of the words), zero past N.
template <DType SD>
struct Quad {
  using st_t = typename Traits<SD>::type;
  static constexpr int W = int(sizeof(st_t));  // 32-bit words per 4 elements
  __device__ __forceinline__ static void load(const st_t* row, int n0, int N, bool vec, bool streaming,
                                              uint32_t (&w)[W]) {
    if (vec && n0 + 4 <= N) return load_vec(row + n0, streaming, w);
#pragma unroll
    for (int i = 0; i < W; ++i) w[i] = 0u;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if (n0 + e >= N) break;
      if constexpr (W == 4) w[e] = reinterpret_cast<const uint32_t*>(row)[n0 + e];
      else w[e / 2] |= uint32_t(reinterpret_cast<const uint16_t*>(row)[n0 + e]) << (16 * (e % 2));
    }
  }
  // vec && n0 + 4 <= N known (the item's rows of a thread with a full chunk)
  __device__ __forceinline__ static void load_vec(const st_t* at, bool streaming, uint32_t (&w)[W]) {
    if constexpr (W == 4) {
      const uint4 r = streaming ? __ldcs(reinterpret_cast<const uint4*>(at)) : *reinterpret_cast<const uint4*>(at);
      w[0] = r.x, w[1] = r.y, w[2] = r.z, w[3] = r.w;
    } else {
      const uint2 r = streaming ? __ldcs(reinterpret_cast<const uint2*>(at)) : *reinterpret_cast<const uint2*>(at);
      w[0] = r.x, w[1] = r.y;
    }
  }
  __device__ __forceinline__ static void widen(const uint32_t (&w)[W], float (&v)[4]) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      if constexpr (SD == DType::f32) v[e] = __uint_as_float(w[e]);
      else if constexpr (SD == DType::bf16) v[e] = __uint_as_float(e % 2 ? w[e / 2] & 0xffff0000u : w[e / 2] << 16);
      else v[e] = half_bits_to_float(e % 2 ? w[e / 2] >> 16 : w[e / 2] & 0xffffu);
    }
  }
  __device__ __forceinline__ static uint32_t bits(float v) {
    if constexpr (SD == DType::bf16) return __bfloat16_as_ushort(__float2bfloat16_rn(v));
    else return __half_as_ushort(__float2half_rn(v));
  }
  // v holds values already rounded to the state dtype.
  __device__ __forceinline__ static void store_vec(st_t* at, const float (&v)[4]) {
    if constexpr (W == 4) {
      __stcs(reinterpret_cast<uint4*>(at),
             make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]), __float_as_uint(v[2]), __float_as_uint(v[3])));
    } else {
      __stcs(reinterpret_cast<uint2*>(at), make_uint2(bits(v[0]) | (bits(v[1]) << 16), bits(v[2]) | (bits(v[3]) << 16)));
    }
  }
  __device__ __forceinline__ static void store(st_t* row, int n0, int N, bool vec, const float (&v)[4]) {
    if (vec && n0 + 4 <= N) return store_vec(row + n0, v);
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (n0 + e < N) row[n0 + e] = Traits<SD>::store(v[e]);
  }
};

// Stage the n records of (slot, head h) the item needs as fp32, the loads of
// a round all in flight before any is used (each loads unconditionally, from
// the record's first element when its index is past the end, so no load
// waits behind a branch): B_j [n][nb] (zero past N), x_j[p0 + pp] [n][np],
// and δ_j [n] (warp 0 stores them and syncs; the scan is warp 0's). Record j
// sits at ring position start + j (mod R, with start < R and j < n <= L <= R:
// one conditional subtraction).
template <DType RD>
__device__ void stage_records(const Params& p, int64_t slot, int h, int start, int n, int p0, int np, int nb,
                              float* Bs, float* xs, float* ds) {
  constexpr int KB = 8, KX = 4;  // B and x loads per thread and round
  using rt_t = typename Traits<RD>::type;
  const rt_t* rB = static_cast<const rt_t*>(p.rB) + slot * p.rB_s + int64_t(h / p.hpg) * p.rB_g;
  const rt_t* rx = static_cast<const rt_t*>(p.rx) + slot * p.rx_s + int64_t(h) * p.rx_h + p0;
  const float* rdt = p.rdt + slot * p.rdt_s + h;
  const int N = p.N, nB = n * nb, nX = n * np, sh = __ffs(nb) - 1;  // nb is a power of two
  const int tid = threadIdx.x;
  auto pos = [&](int j) {
    const int q = start + j;
    return int64_t(q >= p.R ? q - p.R : q);
  };
  const bool dt0 = tid < 32 && tid < n;
  const float dv = dt0 ? rdt[pos(tid) * p.rdt_r] : 0.f;
  for (int b0 = 0, x0 = 0; b0 < nB || x0 < nX; b0 += KB * KERNEL_THREADS, x0 += KX * KERNEL_THREADS) {
    rt_t bv[KB], xv[KX];
#pragma unroll
    for (int k = 0; k < KB; ++k) {
      const int i = b0 + k * KERNEL_THREADS + tid, j = i >> sh, c = i & (nb - 1);
      bv[k] = rB[i < nB && c < N ? pos(j) * p.rB_r + c : 0];
    }
#pragma unroll
    for (int k = 0; k < KX; ++k) {
      const int i = x0 + k * KERNEL_THREADS + tid, j = cuda_util::div_small(i, np);
      xv[k] = rx[i < nX ? pos(j) * p.rx_r + (i - j * np) : 0];
    }
#pragma unroll
    for (int k = 0; k < KB; ++k) {
      const int i = b0 + k * KERNEL_THREADS + tid;
      if (i < nB) Bs[i] = (i & (nb - 1)) < N ? Traits<RD>::load(bv[k]) : 0.f;
    }
#pragma unroll
    for (int k = 0; k < KX; ++k) {
      const int i = x0 + k * KERNEL_THREADS + tid;
      if (i < nX) xs[i] = Traits<RD>::load(xv[k]);
    }
  }
  if (tid < 32) {
    if (dt0) ds[tid] = dv;
    for (int j = 32 + tid; j < n; j += 32) ds[j] = rdt[pos(j) * p.rdt_r];
    __syncwarp();
  }
}

// Warp 0, the item's δ_j in ds[0, n): fw_j = δ_j e^{A Σ_{j<i<n} δ_i} into fw,
// fdec = e^{A Σ_{i<n} δ_i} into red[32] (lane 0).
__device__ __forceinline__ void fold_weights(const Params& p, int h, int n, int lane, const float* ds, float* fw,
                                             float* red) {
  const float A = A_of(p, h);
  auto dl = [&](int j) { return ds[j]; };
  const float tot = suffix_scan(dl, 0, n - 1, lane, [&](int j, float s) { fw[j] = dl(j) * expf(A * s); });
  if (lane == 0) red[32] = expf(A * tot);
}

// stage_records, the fold weights' scan and the weights' pass in one, for
// records whose rows take 16-byte loads (DualPackParams::vec_rec: B rows
// of exactly nb = N values; the item's x rows p0 .. p0 + np a whole number
// of vectors). Every thread issues its vectors' loads, then warp 0 loads the
// δ_j and scans them (fw_j, fdec in red[32]) while they are in flight; after
// one barrier B_j goes to Bs as fp32 and each x value straight to its fold
// weight w = fw_j·x_j[r] at wt[j][pr][k] (r = pr + k·pstep), the product
// stage_records + the weights' pass form. Weights of thread rows past the
// item are not written (their rows are never stored). Ends with a barrier.
template <DType RD>
__device__ void stage_fused(const Params& p, int64_t slot, int h, int start, int n, int p0, int np, int nb,
                            int kr, int psh, float* Bs, float* wt, float* ds, float* fw, float* red) {
  using rt_t = typename Traits<RD>::type;
  constexpr int V = 16 / int(sizeof(rt_t));  // values per vector
  constexpr int KV = 2;                      // B and x vectors per thread and round
  const rt_t* rB = static_cast<const rt_t*>(p.rB) + slot * p.rB_s + int64_t(h / p.hpg) * p.rB_g;
  const rt_t* rx = static_cast<const rt_t*>(p.rx) + slot * p.rx_s + int64_t(h) * p.rx_h + p0;
  const float* rdt = p.rdt + slot * p.rdt_s + h;
  const int tid = threadIdx.x, lane = tid & 31;
  const int bsh = __ffs(nb / V) - 1, xv = np / V;  // B vectors per record (a power of two), x vectors
  const int nBv = n << bsh, nXv = n * xv, nv = max(nBv, nXv);
  const int pmask = (1 << psh) - 1;
  auto pos = [&](int j) {
    const int q = start + j;
    return int64_t(q >= p.R ? q - p.R : q);
  };
  uint4 bv[KV], xw[KV];
  auto issue = [&](int b0) {
#pragma unroll
    for (int k = 0; k < KV; ++k) {
      const int i = b0 + k * KERNEL_THREADS + tid, j = i >> bsh;
      bv[k] = *reinterpret_cast<const uint4*>(rB + (i < nBv ? pos(j) * p.rB_r + (i - (j << bsh)) * V : 0));
    }
#pragma unroll
    for (int k = 0; k < KV; ++k) {
      const int i = b0 + k * KERNEL_THREADS + tid, j = i < nXv ? cuda_util::div_small(i, xv) : 0;
      xw[k] = *reinterpret_cast<const uint4*>(rx + (i < nXv ? pos(j) * p.rx_r + (i - j * xv) * V : 0));
    }
  };
  // a vector's V values as fp32: V / 4 groups of four, as Quad widens state words
  auto widen = [](const uint4& u, float (&f)[V]) {
    using RQ = Quad<RD>;
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int q = 0; q < V / 4; ++q) {
      uint32_t qw[RQ::W];
      float qv[4];
#pragma unroll
      for (int k = 0; k < RQ::W; ++k) qw[k] = w[q * RQ::W + k];
      RQ::widen(qw, qv);
#pragma unroll
      for (int e = 0; e < 4; ++e) f[4 * q + e] = qv[e];
    }
  };
  auto consume = [&](int b0) {
#pragma unroll
    for (int k = 0; k < KV; ++k) {
      const int i = b0 + k * KERNEL_THREADS + tid;
      if (i < nBv) {
        float f[V];
        widen(bv[k], f);
        float4* dst = reinterpret_cast<float4*>(Bs + i * V);  // [j][nb], nb = N
#pragma unroll
        for (int q = 0; q < V / 4; ++q) dst[q] = make_float4(f[4 * q], f[4 * q + 1], f[4 * q + 2], f[4 * q + 3]);
      }
    }
#pragma unroll
    for (int k = 0; k < KV; ++k) {
      const int i = b0 + k * KERNEL_THREADS + tid;
      if (i < nXv) {
        const int j = cuda_util::div_small(i, xv), r0 = (i - j * xv) * V;
        const float c = fw[j];
        float f[V];
        widen(xw[k], f);
        float* wj = wt + int64_t(j) * ((pmask + 1) * kr);
#pragma unroll
        for (int e = 0; e < V; ++e) {
          const int r = r0 + e;
          wj[(r & pmask) * kr + (r >> psh)] = c * f[e];
        }
      }
    }
  };
  issue(0);
  if (tid < 32) {  // δ_j, then the fold weights and fdec
    for (int j = lane; j < n; j += 32) ds[j] = rdt[pos(j) * p.rdt_r];
    __syncwarp();
    fold_weights(p, h, n, lane, ds, fw, red);
  }
  __syncthreads();
  consume(0);
  for (int b0 = KV * KERNEL_THREADS; b0 < nv; b0 += KV * KERNEL_THREADS) {
    issue(b0);
    consume(b0);
  }
  __syncthreads();
}

// v[i] ← fd·v[i] + Σ_j w_j[i]·B_j[c] for the thread's rows i < rt (FULL:
// rt = RT_MAX), with the single-precision replay kernel's operations
// (replay_pass: f *= fdec, then f = fmaf(w, B, f) for j = 0 .. n−1; fold_smem).
// w4: the thread's weights of record 0 (float4s, rows i in order; zero for
// rows past the item, which are never stored), wj4 float4s between records.
template <bool FULL>
__device__ __forceinline__ void fold_rows(float (&v)[RT_MAX][4], int rt, int n, float fd, const float4* B4,
                                          int nb4, const float4* w4, int wj4) {
#pragma unroll
  for (int i = 0; i < RT_MAX; ++i) {
    if (!FULL && i >= rt) continue;
#pragma unroll
    for (int e = 0; e < 4; ++e) v[i][e] *= fd;
  }
#pragma unroll 2
  for (int j = 0; j < n; ++j) {
    const float4 b = B4[j * nb4];
    float wr[RT_MAX];
#pragma unroll
    for (int q = 0; q < RT_MAX / 4; ++q) {
      if (!FULL && 4 * q >= rt) continue;
      const float4 w = w4[j * wj4 + q];
      wr[4 * q] = w.x, wr[4 * q + 1] = w.y, wr[4 * q + 2] = w.z, wr[4 * q + 3] = w.w;
    }
#pragma unroll
    for (int i = 0; i < RT_MAX; ++i) {
      if (!FULL && i >= rt) continue;
      const float c = wr[i];
      v[i][0] = fmaf(c, b.x, v[i][0]);
      v[i][1] = fmaf(c, b.y, v[i][1]);
      v[i][2] = fmaf(c, b.z, v[i][2]);
      v[i][3] = fmaf(c, b.w, v[i][3]);
    }
  }
}

// MULTI: an NVFP4 tile of more than RT_MAX rows per thread (several passes).
template <DType SD, bool MULTI>
__global__ void __launch_bounds__(KERNEL_THREADS, PACK_BLOCKS_PER_SM) mamba2_dual_pack_kernel(const DualPackParams d) {
  using st_t = typename Traits<SD>::type;
  using Q = Quad<SD>;
  const Params& p = d.m;
  const PackGeom& g = d.g;
  extern __shared__ float4 smem4[];
  const int P = p.P, N = p.N, L = d.fold ? p.L : 0, H = p.H;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  int64_t* lslot = reinterpret_cast<int64_t*>(smem4);                      // [PACK_WINDOW]
  float* Bs = reinterpret_cast<float*>(lslot + PACK_WINDOW);              // [L][nb]
  const int wj = g.rp / g.cb * g.kr;  // fold weights per record
  float* wt = Bs + L * g.nb;                                              // [L][pstep][kr]
  float* ws = wt + L * wj;                                                // [L][P]
  float* fw = ws + L * P;                                                 // [L]
  float* ds = fw + L;                                                     // [L]
  float* red = ds + L;                                                    // [40]
  int* lstart = reinterpret_cast<int*>(red + 40);                         // [PACK_WINDOW]
  int* lcount = lstart + PACK_WINDOW;                                     // [PACK_WINDOW]
  int* wcount = lcount + PACK_WINDOW;                                     // [KERNEL_WARPS]
  // this thread's place: virtual row tr of each block pass, chunk column c
  const int lr = lane & (g.lpr - 1);
  const int tr = warp * (32 / g.lpr) + lane / g.lpr;
  const int c = (tr & (g.cb - 1)) * g.lpr + lr, n0 = 4 * c;
  const bool colok = n0 < N;
  const int prow = tr / g.cb, pstep = g.rp / g.cb;  // tile row of virtual row tr, rows per pass
  const int psh = __ffs(pstep) - 1;                  // pstep is a power of two
  const bool vq = d.vec_state && n0 + 4 <= N;        // the thread's chunks take vector loads and stores
  const int vr_n = d.rec == DType::f32 ? 4 : 8;      // record values per 16-byte vector
  const bool nvfp4 = d.format == ReadFormat::nvfp4;
  for (int64_t w0 = 0; w0 < p.B; w0 += PACK_WINDOW) {
    const int count = window_rows(d, w0, lslot, lstart, lcount, wcount);
    // Every cursor of the batch read: the step's replay kernel (a
    // programmatic dependent, launch.cu::dual_replay_step) may start.
    if (w0 + PACK_WINDOW >= p.B) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    if (count == 0) continue;
    // items per tile: NVFP4 one (the tile scale); otherwise enough chunks of
    // <= RT_MAX rows per thread to give every block an item where possible
    int nch = 1, rt = g.rt;
    if (!nvfp4) {
      const int64_t tiles = int64_t(count) * H;
      const int64_t spread = (int64_t(gridDim.x) + tiles - 1) / tiles;
      const int want = spread < g.rt ? int(spread) : g.rt;
      nch = max((g.rt + RT_MAX - 1) / RT_MAX, want);
      rt = (g.rt + nch - 1) / nch;
      nch = (g.rt + rt - 1) / rt;
    }
    const int nsp = (rt + RT_MAX - 1) / RT_MAX;  // register passes of an item (> 1: NVFP4 only)
    const int rts = nsp > 1 ? RT_MAX : rt;       // rows per thread of a pass (the last may hold fewer)
    // 32-bit unsigned divisions (64-bit ones are calls of a division
    // routine): count <= PACK_WINDOW rows, so the window's items fit
    const unsigned per_row = unsigned(H) * unsigned(nch), nitems = unsigned(count) * per_row;
    for (unsigned item = blockIdx.x; item < nitems; item += gridDim.x) {
      const int li = int(item / per_row);
      const int rem = int(item - unsigned(li) * per_row);
      const int h = int(unsigned(rem) / unsigned(nch)), ch = rem - h * nch;
      const int64_t slot = lslot[li];
      const int n = d.fold ? lcount[li] : 0, start = lstart[li];
      const int v0 = ch * rt * g.rp, v1 = min(g.vr, v0 + rt * g.rp);  // virtual rows of the item
      const int p0 = v0 / g.cb, np = (v1 - v0 + g.cb - 1) / g.cb;     // tile rows of the item
      st_t* Sh = static_cast<st_t*>(p.state) + slot * p.st_s + int64_t(h) * p.st_h;
      uint8_t* tile = d.copy + slot * d.cp_s + int64_t(h) * d.cp_h;
      // rows of pass s: virtual rows v0 + tr + (s·rts + i)·rp, i < rts
      // pass s: the thread's rows i < nok are item rows r0 + i·pstep (k = kb + i)
      int r0 = 0, nok = 0, kb = 0;
      auto place = [&](int s) {
        kb = s * rts;
        const int left = v1 - v0 - tr - kb * g.rp;
        r0 = prow + kb * pstep;
        nok = colok && left > 0 ? min(min(rts, rt - kb), (left + g.rp - 1) / g.rp) : 0;
      };
      const int64_t rstride = int64_t(pstep) * p.st_p;  // elements between a thread's rows
      auto row = [&](int i) { return Sh + int64_t(p0 + r0) * p.st_p + i * rstride; };
      auto item_row = [&](int i) { return int64_t(p0 + r0 + i * pstep); };  // tile row
      uint32_t raw[RT_MAX][Q::W];
      auto load = [&](bool streaming) {
        if (vq) {  // the rows by one pointer, no per-row checks
          const st_t* at = row(0) + n0;
#pragma unroll
          for (int i = 0; i < RT_MAX; ++i) {
            if (i < nok) {
              Q::load_vec(at, streaming, raw[i]);
            } else {
#pragma unroll
              for (int k = 0; k < Q::W; ++k) raw[i][k] = 0u;
            }
            at += rstride;
          }
          return;
        }
#pragma unroll
        for (int i = 0; i < RT_MAX; ++i) {
          if (i < nok) {
            Q::load(row(i), n0, N, d.vec_state, streaming, raw[i]);
          } else {
#pragma unroll
            for (int k = 0; k < Q::W; ++k) raw[i][k] = 0u;
          }
        }
      };
      place(0);
      load(true);  // in flight while the records are staged
      if (n > 0 && d.vec_rec && p0 % vr_n == 0 && np % vr_n == 0) {
        switch (d.rec) {
          case DType::f32: stage_fused<DType::f32>(p, slot, h, start, n, p0, np, g.nb, g.kr, psh, Bs, wt, ds, fw, red); break;
          case DType::f16: stage_fused<DType::f16>(p, slot, h, start, n, p0, np, g.nb, g.kr, psh, Bs, wt, ds, fw, red); break;
          default: stage_fused<DType::bf16>(p, slot, h, start, n, p0, np, g.nb, g.kr, psh, Bs, wt, ds, fw, red); break;
        }
      } else if (n > 0) {
        switch (d.rec) {
          case DType::f32: stage_records<DType::f32>(p, slot, h, start, n, p0, np, g.nb, Bs, ws, ds); break;
          case DType::f16: stage_records<DType::f16>(p, slot, h, start, n, p0, np, g.nb, Bs, ws, ds); break;
          default: stage_records<DType::bf16>(p, slot, h, start, n, p0, np, g.nb, Bs, ws, ds); break;
        }
        if (warp == 0) fold_weights(p, h, n, lane, ds, fw, red);
        __syncthreads();
        // w = fw_j x_j[r] at [j][pr][k] for the item row r = pr + k·pstep of
        // thread row k (zero past the item's rows)
        for (int i = tid; i < n * wj; i += KERNEL_THREADS) {
          const int j = cuda_util::div_small(i, wj), e = i - j * wj;
          const int pr = cuda_util::div_small(e, g.kr), k = e - pr * g.kr, r = pr + k * pstep;
          wt[i] = k < rt && r < np ? fw[j] * ws[j * np + r] : 0.f;
        }
        __syncthreads();
      }
      const float fd = n > 0 ? red[32] : 1.f;
      float v[RT_MAX][4];
      // values of the pass in v: the checkpoint, folded and stored (fold)
      auto fold_pass = [&]() {
#pragma unroll
        for (int i = 0; i < RT_MAX; ++i) Q::widen(raw[i], v[i]);
        if (n == 0) return;
        const float4* B4 = reinterpret_cast<const float4*>(Bs) + c;
        const float4* w4 = reinterpret_cast<const float4*>(wt + prow * g.kr + kb);
        if (rts == RT_MAX) fold_rows<true>(v, rts, n, fd, B4, g.nb / 4, w4, wj / 4);
        else fold_rows<false>(v, rts, n, fd, B4, g.nb / 4, w4, wj / 4);
        if (vq) {
          st_t* at = row(0) + n0;
#pragma unroll
          for (int i = 0; i < RT_MAX; ++i, at += rstride) {
            if (i >= nok) continue;
            round_to_state<SD, 4>(v[i]);
            Q::store_vec(at, v[i]);
          }
          return;
        }
#pragma unroll
        for (int i = 0; i < RT_MAX; ++i) {
          if (i >= nok) continue;
          round_to_state<SD, 4>(v[i]);
          Q::store(row(i), n0, N, d.vec_state, v[i]);
        }
      };
      auto pass_amax = [&](float amax) {
#pragma unroll
        for (int i = 0; i < RT_MAX; ++i) {
          if (i >= nok) continue;
#pragma unroll
          for (int e = 0; e < 4; ++e) amax = fmaxf(amax, quant::dev::finite_abs(v[i][e]));
        }
        return amax;
      };
      // NVFP4 blocks of 16 values (4 lanes) of the pass with tile scale t
      auto nvfp4_pass = [&](float t) {
#pragma unroll
        for (int i = 0; i < RT_MAX; ++i) {
          if (i >= rts) break;  // block-uniform (the shuffles need every lane)
          // the block's largest |v| as bits; bits >= 0x7f800000: a NaN or Inf
          const uint32_t um = group_max(quant::dev::abs_bits_max<4>(v[i]), 4);
          uint8_t sc = 0x7F;  // a NaN or Inf poisons its block: scale NaN, codes 0
          uint32_t w = 0u;
          if (um < 0x7f800000u) {
            float rcp;
            sc = quant::dev::nvfp4_block_scale(__uint_as_float(um), t, rcp);
#pragma unroll
            for (int e = 0; e < 4; ++e) w |= quant::dev::e2m1_encode(__fmul_rn(v[i][e], rcp)) << (4 * e);
          }
          if (i < nok) {
            const int64_t pr = item_row(i);
            *reinterpret_cast<uint16_t*>(tile + pr * (N / 2) + n0 / 2) = uint16_t(w);
            if ((c & 3) == 0) tile[d.scale_off + pr * (N / 16) + n0 / 16] = sc;
          }
        }
      };
      auto nvfp4_scale = [&](float amax) {
        const float t = quant::dev::nvfp4_tensor_scale(block_max(amax, red));
        if (tid == 0) *reinterpret_cast<float*>(tile + d.t_off) = t;
        return t;
      };
      if constexpr (!MULTI) {  // nsp == 1
        fold_pass();
        if (nvfp4) {
          nvfp4_pass(nvfp4_scale(pass_amax(0.f)));
        } else {
          // bf16 / f16 / fp8 rows, encoded where they are
          const bool fp8 = d.format == ReadFormat::fp8_e4m3;
          // an fp8 row's codes and scale bytes of the thread's first row, and the steps between its rows
          uint8_t* cq = tile + int64_t(p0 + r0) * N + n0;
          uint8_t* sq = tile + d.scale_off + int64_t(p0 + r0) * (N / 32) + n0 / 32;
          const int64_t cstep = int64_t(pstep) * N, sstep = int64_t(pstep) * (N / 32);
#pragma unroll
          for (int i = 0; i < RT_MAX; ++i, cq += cstep, sq += sstep) {
            if (i >= rts) break;  // block-uniform (the fp8 shuffles need every lane)
            if (fp8) {
              // the largest |v| as bits (non-negative floats order as integers);
              // a NaN or Inf among the four (bits >= 0x7f800000) takes the slow path
              const uint32_t um = quant::dev::abs_bits_max<4>(v[i]);
              const bool fin = um < 0x7f800000u;
              float a = __uint_as_float(um);
              if (!fin) {
                a = 0.f;
#pragma unroll
                for (int e = 0; e < 4; ++e) a = fmaxf(a, quant::dev::finite_abs(v[i][e]));
              }
              const int kx = quant::dev::fp8_block_exp(group_max(a, 8));
              const float m = quant::dev::fp8_block_mul(kx);
              const float s0 = __fmul_rn(v[i][0], m), s1 = __fmul_rn(v[i][1], m);
              const float s2 = __fmul_rn(v[i][2], m), s3 = __fmul_rn(v[i][3], m);
              uint32_t w;
              if (fin) {  // finite: the same codes without the NaN / Inf fix-ups
                w = quant::dev::e4m3x2_encode_finite(s0, s1) | (quant::dev::e4m3x2_encode_finite(s2, s3) << 16);
              } else {
                w = quant::dev::e4m3x2_encode(s0, s1) | (quant::dev::e4m3x2_encode(s2, s3) << 16);
              }
              if (i < nok) {
                *reinterpret_cast<uint32_t*>(cq) = w;
                if ((c & 7) == 0) *sq = uint8_t(kx + 127);
              }
            } else if (i < nok) {
              const bool bf = d.format == ReadFormat::bf16;
              uint16_t q[4];
#pragma unroll
              for (int e = 0; e < 4; ++e)
                q[e] = bf ? quant::dev::bf16_encode(v[i][e]) : quant::dev::f16_encode(v[i][e]);
              uint16_t* codes = reinterpret_cast<uint16_t*>(tile) + item_row(i) * N;
              if (N % 4 == 0) {
                *reinterpret_cast<uint2*>(codes + n0) =
                    make_uint2(uint32_t(q[0]) | (uint32_t(q[1]) << 16), uint32_t(q[2]) | (uint32_t(q[3]) << 16));
              } else {
#pragma unroll
                for (int e = 0; e < 4; ++e)
                  if (n0 + e < N) codes[n0 + e] = q[e];
              }
            }
          }
        }
      } else {  // NVFP4 tile of several passes: fold and store, then re-read (own stores)
        float amax = 0.f;
        for (int s = 0; s < nsp; ++s) {
          if (s > 0) {
            place(s);
            load(false);
          }
          fold_pass();
          amax = pass_amax(amax);
        }
        const float t = nvfp4_scale(amax);
        for (int s = 0; s < nsp; ++s) {
          place(s);
          load(false);
#pragma unroll
          for (int i = 0; i < RT_MAX; ++i) Q::widen(raw[i], v[i]);
          nvfp4_pass(t);
        }
      }
      if (ch == 0) {
#pragma unroll
        for (int k = 0; k < 3; ++k)
          for (int64_t b = d.gaps.begin[k] + tid; b < d.gaps.end[k]; b += KERNEL_THREADS) tile[b] = 0;
      }
      __syncthreads();  // staged records and red are reused by the next item
    }
  }
}

template <DType SD, bool MULTI>
void run_pack(const DualPackParams& d, unsigned grid, size_t smem, cudaStream_t stream, const char* fn) {
  cuda_util::launch_smem<mamba2_dual_pack_kernel<SD, MULTI>>(dim3(grid), dim3(KERNEL_THREADS), smem, stream, false,
                                                            fn, d);
  cuda_util::check_launch(fn);
}
template <DType SD>
void run_pack(const DualPackParams& d, unsigned grid, size_t smem, cudaStream_t stream, const char* fn) {
  if (d.format == ReadFormat::nvfp4 && d.g.rt > RT_MAX) return run_pack<SD, true>(d, grid, smem, stream, fn);
  run_pack<SD, false>(d, grid, smem, stream, fn);
}

}  // namespace

void launch_dual_pack(const char* fn, const Params& p, const Tensor& read_copy, ReadFormat format,
                      DType state, DType rec, bool fold, int sms, int smem_optin, int smem_per_sm,
                      cudaStream_t stream) {
  if (p.B == 0) return;
  const QuantLayout lay = quant_layout(format, p.P, p.N);
  DualPackParams d;
  d.m = p;
  d.rec = rec;
  d.copy = static_cast<uint8_t*>(read_copy.data);
  d.cp_s = read_copy.stride[0];
  d.cp_h = read_copy.stride[1];
  d.format = format;
  d.scale_off = lay.scale_offset;
  d.t_off = lay.tensor_scale_offset;
  d.gaps = quant::padding_gaps(lay);
  d.fold = fold;
  d.g = pack_geom(p.P, p.N);
  check::require(d.g.cb <= 8, fn, "pool.state",
                 "the dual-precision pack handles d_state N up to 1024, got N = " + std::to_string(p.N));
  const int64_t es = int64_t(dtype_size(state)), qb = 4 * es;  // bytes of 4 state elements
  d.vec_state = reinterpret_cast<uintptr_t>(p.state) % qb == 0 && (p.st_s * es) % qb == 0 &&
                (p.st_h * es) % qb == 0 && (p.st_p * es) % qb == 0;
  {  // 16-byte record loads (stage_fused)
    const int64_t rs = int64_t(dtype_size(rec)), v = 16 / rs;
    auto al = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
    d.vec_rec = fold && d.g.nb == p.N && p.N % v == 0 && al(p.rB) && al(p.rx) && p.rB_s % v == 0 &&
                p.rB_g % v == 0 && p.rB_r % v == 0 && p.rx_s % v == 0 && p.rx_h % v == 0 && p.rx_r % v == 0;
  }
  const int64_t smem = dual_pack_smem_bytes(d.g, p.P, fold ? p.L : 0);
  check::require(smem <= smem_optin, fn, "pool.read_copy",
                 "the dual-precision pack stages the records of a tile (" + std::to_string(smem) +
                     " bytes of shared memory), the device offers " + std::to_string(smem_optin));
  // One wave of resident blocks; they walk the items of the rows that pack.
  // (REPLAYSSM_M2_PACK_BPS caps the blocks per SM, for measurements: at 1
  // the step's replay blocks share the SMs with the pack)
  const int cap = std::clamp(cuda_util::env_int("REPLAYSSM_M2_PACK_BPS", PACK_BLOCKS_PER_SM), 1, PACK_BLOCKS_PER_SM);
  const int per_sm = int(std::clamp<int64_t>(smem_per_sm / (smem + 1024), 1, cap));
  const unsigned grid = unsigned(std::clamp<int64_t>(p.B * p.H * d.g.rt, 1, int64_t(per_sm) * sms));
  switch (state) {
    case DType::f32: return run_pack<DType::f32>(d, grid, size_t(smem), stream, fn);
    case DType::f16: return run_pack<DType::f16>(d, grid, size_t(smem), stream, fn);
    case DType::bf16: return run_pack<DType::bf16>(d, grid, size_t(smem), stream, fn);
    default: check::fail(fn, "state", std::string("unsupported state dtype ") + dtype_name(state));
  }
}

}  // namespace replayssm::mamba2::kern
