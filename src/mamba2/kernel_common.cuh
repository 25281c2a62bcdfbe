// Shared device pieces of the Mamba-2 kernels: the launch parameter block,
// 16-byte state vector I/O, block position, per-row cursor validation.
//
// Shapes (design §1): state [S, H, P, N]; x, z, y [B, T, H, P]; dt [B, T, H];
// Bm, Cm [B, T, G, N]; ring_x [S, R, H, P]; ring_dt [S, R, H] f32;
// ring_B [S, R, G, N]; cursor [S, 3] i32. Inner strides are 1 (validated);
// every other stride is an int64 element count.
#pragma once
#include <cstdint>

#include "core/ring.h"
#include "cuda/common.cuh"
#include "mamba2/heuristics.h"

namespace replayssm::mamba2::kern {

using cuda_util::Traits;

enum class Mode : int { decode, snapshot, materialize, flush, step, commit, prefill };

// Shared-memory byte offsets of one block of the bulk-copy replay kernel
// (replay1_kernel.cuh::replay1_smem), computed once on the host.
struct Replay1Layout {
  int32_t stage, bar, Cs, Bw, BC, dh, dwin, Ah, Dh, coef, dec, fw, fdec, hist, Bh, xh, xwin, zs, red, bytes;
  int32_t Pp, nhp;  // P rounded up to 8, heads rounded up to 4 (16-byte chunks)
  int32_t ring_bulk;  // 1: the ring entries are fetched by bulk copies (launch.cu::replay1_ring_bulk)
  int32_t swb;        // bytes per sweep stage
};

// Everything a launch needs; passed by value (well under the 4 KiB limit).
struct Params {
  int64_t B = 0, S = 0, tokens = 0;
  int T = 0, H = 0, P = 0, N = 0, G = 0, L = 0, R = 0, hpg = 0;
  // tile and row geometry (heuristics.h)
  int nh = 0, np = 0, hchunks = 0, pchunks = 0;
  int nv = 0, lpr = 0, rpw = 0, ns = 0;
  int jmax = 0;    // staged records + tokens capacity (L + T)
  int stages = 0;  // async state stages of the hot kernels (heuristics.h::hot_stages)
  // Decode kernel, TAIL (big > 0): blocks from `big` on take rows [tb0, B)
  // in tiles (tnh, tnp; thchunks × tpchunks per group) no larger than (nh, np)
  // (block_pos_tail).
  int big = 0, tb0 = 0, tnh = 0, tnp = 0, thchunks = 0, tpchunks = 0;
  Mode mode = Mode::decode;
  // step / prefill inputs ([B, T, ...]; prefill uses b = 0 and t = token)
  const void* x = nullptr; int64_t x_b = 0, x_t = 0, x_h = 0;
  const void* dt = nullptr; DType dt_dtype = DType::f32; int64_t dt_b = 0, dt_t = 0;
  const void* Bm = nullptr; int64_t B_b = 0, B_t = 0, B_g = 0;
  const void* Cm = nullptr; int64_t C_b = 0, C_t = 0, C_g = 0;
  const void* z = nullptr; int64_t z_b = 0, z_t = 0, z_h = 0;
  void* y = nullptr; int64_t y_b = 0, y_t = 0, y_h = 0;
  const float* A = nullptr; int64_t A_s = 0;
  const float* dt_bias = nullptr; int64_t dtb_s = 0;
  const float* D = nullptr; int64_t D_s = 0;
  bool dt_softplus = true;
  // row addressing
  const void* slot = nullptr; DType slot_dtype = DType::i32; int64_t slot_s = 0;
  int64_t pad = -1;
  const void* acc = nullptr; DType acc_dtype = DType::i32; int64_t acc_s = 0;
  const void* sidx = nullptr; DType sidx_dtype = DType::i32; int64_t sidx_b = 0, sidx_t = 0;
  const void* cu = nullptr; DType cu_dtype = DType::i32; int64_t cu_s = 0;
  const int32_t* initial = nullptr; int64_t init_s = 0;
  bool commit_all = false;
  // Eager replay step (T = 1, decode_kernel.cuh EAGER): the row's committed
  // records and its token are folded into the checkpoint and the ring ends
  // empty; ctr: per-row arrival counters (cuda_util::row_counters), the
  // row's last block resets its cursor; null: the cursor kernel does.
  bool eager = false;
  unsigned* ctr = nullptr;
  // pool
  void* state = nullptr; int64_t st_s = 0, st_h = 0, st_p = 0;
  void* rx = nullptr; int64_t rx_s = 0, rx_r = 0, rx_h = 0;
  float* rdt = nullptr; int64_t rdt_s = 0, rdt_r = 0;
  void* rB = nullptr; int64_t rB_s = 0, rB_r = 0, rB_g = 0;
  int32_t* cursor = nullptr; int64_t cur_s = 0;
  // materialize output [n, H, P, N], any float dtype
  void* out = nullptr; DType out_dtype = DType::f32; int64_t out_s = 0, out_h = 0, out_p = 0;
  int32_t* status = nullptr;
  // Dual precision (replay step on a read copy, dual_kernels.cuh): the
  // checkpoint of a flushing row was already folded and re-packed, so the
  // step reads `state` (the read copy) with an empty history and writes no
  // state. Packed copies (fp8, nvfp4): state/st_* are bytes of the tile
  // codes [P, code row bytes]; the block scales u8 [P, q_srb] sit at byte
  // q_scale_off of the tile, the nvfp4 tile scale (fp32) at q_t_off.
  bool dual = false;
  int64_t q_scale_off = 0, q_srb = 0, q_t_off = 0;
  Replay1Layout r1{};  // replay1_kernel.cuh only
  // replay1_kernel.cuh: the block rec_pf after its own (grid order) has its
  // slot, cursor, token inputs and records prefetched into L2 (0: none;
  // heuristics.h replay1_prefetch_distance)
  int rec_pf = 0;
  // replay1_kernel.cuh, T = 1 on an fp32 state: when a block issues sweep k
  // into a stage it also prefetches sweep k + t1_l2pf into L2 (0: none;
  // heuristics.h replay1_sweep_prefetch)
  int t1_l2pf = 0;
  // replay1_kernel.cuh, T > 1: a flushing block folds its records on tensor
  // cores (m16n8k8 tf32, fold weights split hi + lo) instead of the FMA
  // stream (heuristics.h replay1_fold_tc)
  bool fold_tc = false;
};

// ---------------------------------------------------------------------------
// 16-byte vectors of the state dtype, widened to fp32. Elements at n >= N are
// read as zero and never written (rows need not be a whole number of vectors).

template <DType SD> struct VecOf { static constexpr int value = 16 / sizeof(typename Traits<SD>::type); };

template <DType SD>
__device__ __forceinline__ void load_row_vec(const typename Traits<SD>::type* row, int n0, int N,
                                             float (&v)[VecOf<SD>::value], bool streaming) {
  constexpr int VEC = VecOf<SD>::value;
  using st_t = typename Traits<SD>::type;
  if (n0 + VEC <= N) {
    const uint4* p = reinterpret_cast<const uint4*>(row + n0);
    uint4 r = streaming ? __ldcs(p) : *p;
    if constexpr (SD == DType::f32) {
      v[0] = __uint_as_float(r.x); v[1] = __uint_as_float(r.y);
      v[2] = __uint_as_float(r.z); v[3] = __uint_as_float(r.w);
    } else {
      const st_t* e = reinterpret_cast<const st_t*>(&r);
#pragma unroll
      for (int i = 0; i < VEC; ++i) v[i] = Traits<SD>::load(e[i]);
    }
  } else {
#pragma unroll
    for (int i = 0; i < VEC; ++i) v[i] = n0 + i < N ? Traits<SD>::load(row[n0 + i]) : 0.f;
  }
}

template <DType SD>
__device__ __forceinline__ void store_row_vec(typename Traits<SD>::type* row, int n0, int N,
                                              const float (&v)[VecOf<SD>::value]) {
  constexpr int VEC = VecOf<SD>::value;
  using st_t = typename Traits<SD>::type;
  if (n0 + VEC <= N) {
    uint4 r;
    if constexpr (SD == DType::f32) {
      r.x = __float_as_uint(v[0]); r.y = __float_as_uint(v[1]);
      r.z = __float_as_uint(v[2]); r.w = __float_as_uint(v[3]);
    } else {
      st_t* e = reinterpret_cast<st_t*>(&r);
#pragma unroll
      for (int i = 0; i < VEC; ++i) e[i] = Traits<SD>::store(v[i]);
    }
    *reinterpret_cast<uint4*>(row + n0) = r;
  } else {
#pragma unroll
    for (int i = 0; i < VEC; ++i)
      if (n0 + i < N) row[n0 + i] = Traits<SD>::store(v[i]);
  }
}

// ---------------------------------------------------------------------------
// Raw 16-byte vectors: the hot kernels hold a lane's state vectors as uint4
// (4 registers each, whatever the dtype) from the moment the load is issued,
// and widen them to fp32 only where they are used. Elements at n >= N read as
// zero bits and are never written.

template <DType SD>
__device__ __forceinline__ uint4 load_raw(const typename Traits<SD>::type* row, int n0, int N,
                                          bool streaming) {
  constexpr int VEC = VecOf<SD>::value;
  if (n0 + VEC <= N) {
    const uint4* q = reinterpret_cast<const uint4*>(row + n0);
    return streaming ? __ldcs(q) : *q;
  }
  uint32_t w[4] = {0u, 0u, 0u, 0u};
  if constexpr (SD == DType::f32) {
    const uint32_t* r = reinterpret_cast<const uint32_t*>(row);
#pragma unroll
    for (int i = 0; i < 4; ++i)
      if (n0 + i < N) w[i] = r[n0 + i];
  } else {
    const uint16_t* r = reinterpret_cast<const uint16_t*>(row);
#pragma unroll
    for (int i = 0; i < 8; ++i)
      if (n0 + i < N) w[i / 2] |= uint32_t(r[n0 + i]) << (16 * (i % 2));
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

template <DType SD>
__device__ __forceinline__ void store_raw(typename Traits<SD>::type* row, int n0, int N, uint4 r,
                                          bool streaming) {
  constexpr int VEC = VecOf<SD>::value;
  if (n0 + VEC <= N) {
    uint4* q = reinterpret_cast<uint4*>(row + n0);
    if (streaming) __stcs(q, r);
    else *q = r;
    return;
  }
  const uint32_t w[4] = {r.x, r.y, r.z, r.w};
  if constexpr (SD == DType::f32) {
    uint32_t* d = reinterpret_cast<uint32_t*>(row);
#pragma unroll
    for (int i = 0; i < 4; ++i)
      if (n0 + i < N) d[n0 + i] = w[i];
  } else {
    uint16_t* d = reinterpret_cast<uint16_t*>(row);
#pragma unroll
    for (int i = 0; i < 8; ++i)
      if (n0 + i < N) d[n0 + i] = uint16_t(w[i / 2] >> (16 * (i % 2)));
  }
}

__device__ __forceinline__ float half_bits_to_float(uint32_t h) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(h)));
}

// Exact widening of a raw vector to fp32.
template <DType SD>
__device__ __forceinline__ void widen(uint4 r, float (&v)[VecOf<SD>::value]) {
  const uint32_t w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (SD == DType::f32) {
      v[i] = __uint_as_float(w[i]);
    } else if constexpr (SD == DType::bf16) {
      v[2 * i] = __uint_as_float(w[i] << 16);
      v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    } else {
      v[2 * i] = half_bits_to_float(w[i] & 0xffffu);
      v[2 * i + 1] = half_bits_to_float(w[i] >> 16);
    }
  }
}

// Narrowing (round to nearest even) of fp32 values to a raw vector.
template <DType SD>
__device__ __forceinline__ uint4 narrow(const float (&v)[VecOf<SD>::value]) {
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (SD == DType::f32) {
      w[i] = __float_as_uint(v[i]);
    } else if constexpr (SD == DType::bf16) {
      w[i] = uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(v[2 * i]))) |
             (uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(v[2 * i + 1]))) << 16);
    } else {
      w[i] = uint32_t(__half_as_ushort(__float2half_rn(v[2 * i]))) |
             (uint32_t(__half_as_ushort(__float2half_rn(v[2 * i + 1]))) << 16);
    }
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// Round every element through the state dtype (the value a store would keep).
template <DType SD, int VEC>
__device__ __forceinline__ void round_to_state(float (&v)[VEC]) {
  if constexpr (SD != DType::f32) {
#pragma unroll
    for (int i = 0; i < VEC; ++i) v[i] = Traits<SD>::load(Traits<SD>::store(v[i]));
  }
}

// Σ_i v[i]·s[i] with s a 16-byte aligned shared-memory vector.
template <int VEC>
__device__ __forceinline__ float dot_smem(const float (&v)[VEC], const float* s) {
  float acc = 0.f;
#pragma unroll
  for (int i = 0; i < VEC; i += 4) {
    const float4 c = *reinterpret_cast<const float4*>(s + i);
    acc = fmaf(v[i], c.x, acc);
    acc = fmaf(v[i + 1], c.y, acc);
    acc = fmaf(v[i + 2], c.z, acc);
    acc = fmaf(v[i + 3], c.w, acc);
  }
  return acc;
}

// v ← v + c·s rounded once (fmaf): one record of a flush's fold, the form
// every GPU fold of the family shares (replay kernels, dual pack, slot
// operations), so their checkpoints agree bit for bit.
template <int VEC>
__device__ __forceinline__ void fold_smem(float (&v)[VEC], float c, const float* s) {
#pragma unroll
  for (int i = 0; i < VEC; i += 4) {
    const float4 q = *reinterpret_cast<const float4*>(s + i);
    v[i] = fmaf(c, q.x, v[i]);
    v[i + 1] = fmaf(c, q.y, v[i + 1]);
    v[i + 2] = fmaf(c, q.z, v[i + 2]);
    v[i + 3] = fmaf(c, q.w, v[i + 3]);
  }
}

// v ← a·v + c·s with s a 16-byte aligned shared-memory vector.
template <int VEC>
__device__ __forceinline__ void axpby_smem(float (&v)[VEC], float a, float c, const float* s) {
#pragma unroll
  for (int i = 0; i < VEC; i += 4) {
    const float4 q = *reinterpret_cast<const float4*>(s + i);
    v[i] = fmaf(a, v[i], c * q.x);
    v[i + 1] = fmaf(a, v[i + 1], c * q.y);
    v[i + 2] = fmaf(a, v[i + 2], c * q.z);
    v[i + 3] = fmaf(a, v[i + 3], c * q.w);
  }
}

// Sum over the LPR lanes of a row group (LPR a power of two; every lane of
// the warp must call this).
__device__ __forceinline__ float group_sum(float v, int lpr) {
  for (int o = lpr >> 1; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <DType AD>
__device__ __forceinline__ float ld_act(const void* p, int64_t i) {
  return Traits<AD>::load(static_cast<const typename Traits<AD>::type*>(p)[i]);
}
template <DType AD>
__device__ __forceinline__ void st_act(void* p, int64_t i, float v) {
  static_cast<typename Traits<AD>::type*>(p)[i] = Traits<AD>::store(v);
}
// Bit-exact copy of one element (records keep inputs as they arrived).
template <DType AD>
__device__ __forceinline__ void copy_act(void* dst, int64_t di, const void* src, int64_t si) {
  using at_t = typename Traits<AD>::type;
  static_cast<at_t*>(dst)[di] = static_cast<const at_t*>(src)[si];
}

__device__ __forceinline__ float silu_gate(float y, float z) { return y * z * cuda_util::sigmoid(z); }

// δ of (b, t, h): softplus(dt + dt_bias) or dt + dt_bias.
__device__ __forceinline__ float delta_of(const Params& p, int64_t b, int64_t t, int h) {
  float v = cuda_util::load_any(p.dt, p.dt_dtype, b * p.dt_b + t * p.dt_t + h);
  if (p.dt_bias) v += p.dt_bias[h * p.dtb_s];
  return p.dt_softplus ? cuda_util::softplus(v) : v;
}
__device__ __forceinline__ float A_of(const Params& p, int h) { return p.A[h * p.A_s]; }
__device__ __forceinline__ float D_of(const Params& p, int h) { return p.D ? p.D[h * p.D_s] : 0.f; }

// ---------------------------------------------------------------------------
// Block position: blockIdx.x = ((row · G + g) · hchunks + hc) · pchunks + pc.
struct BlockPos {
  int64_t row;
  int g, hc, pc;
  int h0, nh;  // heads [h0, h0 + nh) of group g
  int p0, np;  // head-dim rows [p0, p0 + np)
};

// (32-bit unsigned divisions: blockIdx.x < 2^31 and the factors are
// positive ints; 64-bit ones are calls of a division routine.)
// The decode kernel's TAIL grid: the first p.big blocks as block_pos, the
// rest over rows [p.tb0, B) in the smaller tiles.
__device__ __forceinline__ BlockPos block_pos_tail(const Params& p) {
  unsigned i = blockIdx.x;
  int nh = p.nh, np = p.np, hch = p.hchunks, pch = p.pchunks;
  int64_t r0 = 0;
  if (i >= unsigned(p.big)) {
    i -= unsigned(p.big);
    nh = p.tnh;
    np = p.tnp;
    hch = p.thchunks;
    pch = p.tpchunks;
    r0 = p.tb0;
  }
  BlockPos bp;
  bp.pc = int(i % unsigned(pch)); i /= unsigned(pch);
  bp.hc = int(i % unsigned(hch)); i /= unsigned(hch);
  bp.g = int(i % unsigned(p.G));
  bp.row = r0 + int64_t(i / unsigned(p.G));
  bp.h0 = bp.g * p.hpg + bp.hc * nh;
  bp.nh = min(nh, p.hpg - bp.hc * nh);
  bp.p0 = bp.pc * np;
  bp.np = min(np, p.P - bp.p0);
  return bp;
}
__device__ __forceinline__ BlockPos block_pos(const Params& p) {
  unsigned i = blockIdx.x;
  BlockPos bp;
  bp.pc = int(i % unsigned(p.pchunks)); i /= unsigned(p.pchunks);
  bp.hc = int(i % unsigned(p.hchunks)); i /= unsigned(p.hchunks);
  bp.g = int(i % unsigned(p.G));
  bp.row = int64_t(i / unsigned(p.G));
  bp.h0 = bp.g * p.hpg + bp.hc * p.nh;
  bp.nh = min(p.nh, p.hpg - bp.hc * p.nh);
  bp.p0 = bp.pc * p.np;
  bp.np = min(p.np, p.P - bp.p0);
  return bp;
}
// The one block of a row that reports device status (avoids B·G·… atomics).
__device__ __forceinline__ bool reporter(const BlockPos& bp) {
  return bp.g == 0 && bp.hc == 0 && bp.pc == 0 && threadIdx.x == 0;
}

// A lane's place in the streaming loops of the hot kernels: the block's rows
// r = 0 .. nh·np−1 (head h0 + r / np, head-dim row p0 + r % np) are taken in
// passes of nrg·U rows; in pass q, lane group rg holds rows
// q·nrg·U + u·nrg + rg (u < U) and lane lr of the group holds vectors
// lr + k·lpr (k < VPL) of each.
struct Lane {
  int lr, lpr, rg, nrg, rows, np;
};
__device__ __forceinline__ Lane lane_of(const Params& p, const BlockPos& bp) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  Lane l;
  l.lpr = p.lpr;
  l.lr = lane & (p.lpr - 1);
  l.nrg = KERNEL_WARPS * p.rpw;
  l.rg = warp * p.rpw + lane / p.lpr;
  l.rows = bp.nh * bp.np;
  l.np = bp.np;
  return l;
}

// Issue every 16-byte load of pass q (zero for rows / vectors outside).
template <DType SD, int VPL, int U>
__device__ __forceinline__ void load_pass(const Params& p, const BlockPos& bp, const Lane& l,
                                          const typename Traits<SD>::type* S, int q, bool streaming,
                                          uint4 (&v)[U][VPL]) {
  constexpr int VEC = VecOf<SD>::value;
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int r = (q * U + u) * l.nrg + l.rg;
    const bool in = r < l.rows;
    const int hl = in ? r / l.np : 0, pr = bp.p0 + (in ? r % l.np : 0);
    const typename Traits<SD>::type* row = S + int64_t(bp.h0 + hl) * p.st_h + int64_t(pr) * p.st_p;
#pragma unroll
    for (int k = 0; k < VPL; ++k) {
      const int vi = l.lr + k * l.lpr;
      v[u][k] = (in && vi < p.nv) ? load_raw<SD>(row, vi * VEC, p.N, streaming) : make_uint4(0u, 0u, 0u, 0u);
    }
  }
}

// ---------------------------------------------------------------------------
// Asynchronous state stream (hot kernels). A lane's 16-byte vectors of pass q
// go to its own shared-memory slots of stage q % stages with cp.async (no
// registers held while in flight); the same lane reads them back, so a stage
// needs no barrier, only cp.async.wait_group. Stage layout [stage][k][tid]
// (uint4), conflict-free 16-byte accesses.

__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t pol;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  return pol;
}
// 16-byte async copy; bytes < 16 zero-fills the rest (bytes = 0: all zero).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int bytes, uint64_t pol) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;" ::"r"(d), "l"(src),
               "r"(bytes), "l"(pol)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// Wait until at most n of this lane's committed groups are pending (n <= 7).
__device__ __forceinline__ void cp_async_wait(int n) {
  switch (n) {
    case 0: asm volatile("cp.async.wait_group 0;" ::: "memory"); break;
    case 1: asm volatile("cp.async.wait_group 1;" ::: "memory"); break;
    case 2: asm volatile("cp.async.wait_group 2;" ::: "memory"); break;
    case 3: asm volatile("cp.async.wait_group 3;" ::: "memory"); break;
    case 4: asm volatile("cp.async.wait_group 4;" ::: "memory"); break;
    case 5: asm volatile("cp.async.wait_group 5;" ::: "memory"); break;
    case 6: asm volatile("cp.async.wait_group 6;" ::: "memory"); break;
    default: asm volatile("cp.async.wait_group 7;" ::: "memory"); break;
  }
}

// Stage slot of vector k of this lane.
template <int VPL>
__device__ __forceinline__ uint4* stage_slot(uint4* stages, int stage, int k) {
  return stages + (stage * VPL + k) * KERNEL_THREADS + threadIdx.x;
}

// Issue (and commit as one group) the async loads of pass q into its stage.
// Rows / vectors outside the block are zero-filled.
template <DType SD, int VPL>
__device__ __forceinline__ void issue_pass(const Params& p, const BlockPos& bp, const Lane& l,
                                           const typename Traits<SD>::type* S, int q, int npass,
                                           uint4* stages, int nstages, uint64_t pol) {
  if (q < npass) {
    constexpr int VEC = VecOf<SD>::value;
    constexpr int ES = int(sizeof(typename Traits<SD>::type));
    const int r = q * l.nrg + l.rg;
    const bool in = r < l.rows;
    const int hl = in ? r / l.np : 0, pr = bp.p0 + (in ? r - hl * l.np : 0);
    const typename Traits<SD>::type* row = S + int64_t(bp.h0 + hl) * p.st_h + int64_t(pr) * p.st_p;
    const int st = q % nstages;
#pragma unroll
    for (int k = 0; k < VPL; ++k) {
      const int vi = l.lr + k * l.lpr, n0 = vi * VEC;
      const int bytes = (in && vi < p.nv) ? min(VEC, p.N - n0) * ES : 0;
      cp_async16(stage_slot<VPL>(stages, st, k), bytes ? row + n0 : row, bytes, pol);
    }
  }
  cp_async_commit();  // always one group per pass, so wait counts stay uniform
}

// One item of a batch of loads, as loaded (its value is taken after the
// whole batch is in flight: widening a 16-bit input in the branch that loads
// it made the lane wait for each load in turn).
struct RawItem {
  enum Kind : uint32_t { F32 = 0, ACT = 1, DELTA = 2 };
  uint32_t bits = 0u, aux = 0u;  // DELTA: dt as loaded, dt_bias (fp32 bits)
  uint32_t kind = F32;
};
template <DType AD>
__device__ __forceinline__ RawItem raw_act(const void* p, int64_t i) {
  RawItem r;
  r.bits = cuda_util::load_bits(p, AD, i);
  r.kind = RawItem::ACT;
  return r;
}
__device__ __forceinline__ RawItem raw_f32(const float* p, int64_t i) {
  RawItem r;
  r.bits = __float_as_uint(p[i]);
  return r;
}
// delta_of as raw loads, then raw_value.
__device__ __forceinline__ RawItem raw_delta(const Params& p, int64_t b, int64_t t, int h) {
  RawItem r;
  r.bits = cuda_util::load_bits(p.dt, p.dt_dtype, b * p.dt_b + t * p.dt_t + h);
  r.aux = p.dt_bias ? __float_as_uint(p.dt_bias[h * p.dtb_s]) : 0u;
  r.kind = RawItem::DELTA;
  return r;
}
template <DType AD>
__device__ __forceinline__ float raw_value(const Params& p, const RawItem& r) {
  if (r.kind == RawItem::ACT) return cuda_util::widen_bits(r.bits, AD);
  if (r.kind == RawItem::F32) return __uint_as_float(r.bits);
  float v = cuda_util::widen_bits(r.bits, p.dt_dtype);  // as delta_of
  if (p.dt_bias) v += __uint_as_float(r.aux);
  return p.dt_softplus ? cuda_util::softplus(v) : v;
}

// Stage batched loads: every lane issues up to K independent loads before it
// stores any (one round trip per K·KERNEL_THREADS items). ld(i) -> RawItem
// (raw_act / raw_f32 / raw_delta, or RawItem{} for a zero), st(i, value).
template <int K, DType AD, class Ld, class St>
__device__ __forceinline__ void batched(const Params& p, int count, Ld&& ld, St&& st) {
  for (int base = threadIdx.x; base < count; base += K * KERNEL_THREADS) {
    RawItem v[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int i = base + k * KERNEL_THREADS;
      if (i < count) v[k] = ld(i);
    }
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int i = base + k * KERNEL_THREADS;
      if (i < count) st(i, raw_value<AD>(p, v[k]));
    }
  }
}

// 16 bytes of elements src[0 .. cnt) (cnt <= 16 / sizeof(E)), zero padded:
// one vector load when aligned and whole, element loads otherwise.
template <class E>
__device__ __forceinline__ uint4 ld_chunk(const E* src, int cnt) {
  constexpr int CH = 16 / int(sizeof(E));
  if (cnt == CH && (reinterpret_cast<uintptr_t>(src) & 15) == 0) return *reinterpret_cast<const uint4*>(src);
  uint32_t w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
  for (int i = 0; i < CH; ++i) {
    if (i >= cnt) break;
    uint32_t u;
    if constexpr (sizeof(E) == 4) u = *reinterpret_cast<const uint32_t*>(src + i);
    else u = *reinterpret_cast<const uint16_t*>(src + i);
    w[i * int(sizeof(E)) / 4] |= u << (8 * ((i * int(sizeof(E))) % 4));
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}
// Async copy of cnt elements (cnt <= 16 / sizeof(E)) to a 16-byte aligned
// shared-memory chunk: cp.async when aligned and whole, element copies otherwise.
template <class E>
__device__ __forceinline__ void cp_chunk(E* dst, const E* src, int cnt, uint64_t pol) {
  constexpr int CH = 16 / int(sizeof(E));
  if (cnt == CH && (reinterpret_cast<uintptr_t>(src) & 15) == 0) {
    cp_async16(dst, src, 16, pol);
  } else {
    for (int i = 0; i < CH; ++i) dst[i] = i < cnt ? src[i] : E(0.f);
  }
}
// 4-byte async copy (cp.async.ca; 4-byte aligned source).
__device__ __forceinline__ void cp_async4(void* dst, const void* src) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(d), "l"(src) : "memory");
}

// ---------------------------------------------------------------------------
// Cursor validation (the device side of api.cpp's host checks).

enum RowState : int { ROW_OK = 0, ROW_PAD = 1, ROW_BAD = 2 };

__device__ __forceinline__ int64_t row_slot(const Params& p, int64_t b) {
  return cuda_util::load_index(p.slot, p.slot_dtype, b * p.slot_s);
}
__device__ __forceinline__ RingCursor load_cursor(const Params& p, int64_t slot) {
  const int32_t* c = p.cursor + slot * p.cur_s;
  return RingCursor{c[0], c[1], c[2]};
}
__device__ __forceinline__ void store_cursor(const Params& p, int64_t slot, RingCursor c) {
  int32_t* d = p.cursor + slot * p.cur_s;
  d[0] = c.start;
  d[1] = c.count;
  d[2] = c.pending;
}
__device__ __forceinline__ bool cursor_sane(const Params& p, RingCursor c) {
  return c.start >= 0 && c.start < p.R && c.count >= 0 && c.count <= p.L && c.pending >= 0 &&
         c.pending <= p.R;
}

// Slot of row b: pad, in range, or bad (sets *bits).
__device__ __forceinline__ int check_slot(const Params& p, int64_t slot, int32_t* bits) {
  if (slot == p.pad) return ROW_PAD;
  if (slot < 0 || slot >= p.S) { *bits |= STATUS_BAD_SLOT; return ROW_BAD; }
  return ROW_OK;
}

// Replay step of row b: commit (num_accepted), then plan (ring.h). Every
// block of the row and the cursor kernel run this on the same pre-step
// cursor, so they agree; only the cursor kernel writes the cursor.
// The plan part of step_row_plan, from the row's cursor c and (with
// num_accepted) its accepted count a.
__device__ __forceinline__ int plan_from_cursor(const Params& p, RingCursor c, int64_t a, StepPlan* plan,
                                                int32_t* bits) {
  if (!cursor_sane(p, c)) { *bits |= STATUS_RING_OVERFLOW; return ROW_BAD; }
  if (p.acc) {
    if (c.pending == 0 || a < 1 || a > c.pending) { *bits |= STATUS_BAD_ACCEPTED; return ROW_BAD; }
    if (c.count + a > p.L) { *bits |= STATUS_RING_OVERFLOW; return ROW_BAD; }
    ring_commit(c, int32_t(a));
  } else if (c.pending != 0) {
    *bits |= STATUS_UNCOMMITTED;
    return ROW_BAD;
  }
  *plan = ring_plan_step(c, p.T, p.L, p.R);
  return ROW_OK;
}
__device__ __forceinline__ int step_row_plan(const Params& p, int64_t b, int64_t* slot_out,
                                             StepPlan* plan, int32_t* bits) {
  const int64_t slot = row_slot(p, b);
  *slot_out = slot;
  const int s = check_slot(p, slot, bits);
  if (s != ROW_OK) return s;
  const RingCursor c = load_cursor(p, slot);
  const int64_t a = p.acc ? cuda_util::load_index(p.acc, p.acc_dtype, b * p.acc_s) : 0;
  return plan_from_cursor(p, c, a, plan, bits);
}

// Zero y[row, t, h, p] over the block's heads and rows (pad / skipped rows).
template <DType AD>
__device__ void zero_outputs(const Params& p, const BlockPos& bp, int64_t b, int64_t t0,
                             int64_t t1) {
  const int64_t per_t = int64_t(bp.nh) * bp.np;
  for (int64_t i = threadIdx.x; i < (t1 - t0) * per_t; i += blockDim.x) {
    const int64_t t = t0 + i / per_t;
    const int r = int(i % per_t);
    const int h = bp.h0 + r / bp.np, pp = bp.p0 + r % bp.np;
    st_act<AD>(p.y, b * p.y_b + t * p.y_t + int64_t(h) * p.y_h + pp, 0.f);
  }
}

}  // namespace replayssm::mamba2::kern
