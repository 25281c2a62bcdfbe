// Tile choices of the Mamba-2 CUDA kernels, with their reasons. Host-only,
// plain C++ (no CUDA headers).
//
// Every state kernel works on "rows": one state row is S[slot, h, p, 0:N]
// (N contiguous elements). A block owns heads [h0, h0 + nh) of ONE group g
// and head-dim rows [p0, p0 + np); it stages the group's per-token vectors
// (B, C, records of B) in shared memory once and streams its nh·np rows.
//
// Row geometry (row_geometry: fold, materialize, prefill; the hot kernels use
// hot_geometry, below). A lane moves 16 bytes per load (VEC = 4 fp32 or 8 fp16/bf16
// elements). A row of NV = ceil(N / VEC) vectors is handled by LPR lanes (the
// next power of two >= NV, at most 32), so one warp load instruction covers
// RPW = 32 / LPR rows: N = 128 fp32 is one 512-byte row per warp, N = 128
// bf16 two 256-byte rows per warp; both are fully coalesced. Rows longer
// than 32 vectors give each lane VPL = 2 vectors (N <= 256 fp32, <= 512
// fp16/bf16); longer rows are rejected.
//
// Block = 256 threads (8 warps). The hot kernels (decode, snapshot, replay)
// are memory-latency bound GEMV-like streams, so they are organised around
// bytes in flight:
//  - hot geometry (hot_geometry): a row is split over the fewest lanes that
//    give each lane at most HOT_VPL = 4 vectors (fp32 N = 128: 8 lanes x 4
//    vectors, 4 rows per warp instruction, each row group reading whole
//    128-byte segments; bf16 N = 128: 4 lanes x 4 vectors). Per-row work
//    (index math, the lane reduction, the output store) is then paid per
//    64 bytes instead of per 16; with 32 lanes per row the first version was
//    issue-bound (ncu: ~57 % SM throughput at 42 % of DRAM bandwidth);
//  - a lane holds one row (U = 1) of VPL 16-byte vectors per pass; the
//    passes are loaded with cp.async into shared-memory stages
//    (hot_stages, below), stages − 1 passes ahead of the one consumed, so no
//    registers are held by loads in flight (the register double buffer of
//    the first versions held 32 registers and capped the bytes in flight);
//  - the first passes are issued as soon as the row's slot is read, BEFORE
//    the prologue, so its loads overlap the state's first transfers;
//  - two resident blocks per SM for replay (__launch_bounds__(256, 2); 114-124
//    registers), three for decode (80, DECODE_BLOCKS_PER_SM), no spills;
//  - state accesses carry an L2 evict-first policy (cp.async.cg with a
//    cache hint, st.global.cs); non-flush replay steps never write the
//    checkpoint.
// Measured (perf_notes_mamba2.md, ncu): at batch 256 these kernels are bound
// by instruction issue and dependency latency at 25 % occupancy (7 cycles
// per issued instruction with 4 warps per scheduler, DRAM 43 %), not by
// bytes in flight: 1 block x 7 stages per SM was 1.6x slower than
// 2 blocks x 4 stages, 3 stages instead of 4 changed nothing.
//
// Heads per block (issue "B·C once per group"). The replay output needs
// B_j·C_m for every history record j and window token m; these depend only
// on the group, so a block owning nh heads of the group computes them once and
// shares them with its nh heads through shared memory. nh is chosen so a
// block streams about HOT_PASSES passes (fp32 N = 128: 8 heads = 512 rows;
// bf16: 16 heads = 1024 rows): long enough that the
// per-block prologue (cursor plan, staging, history terms; a chain of
// dependent global loads) is amortised over ~256 KiB of state and B·C is
// computed by at most hpg / nh = 1-2 blocks per (row, group), short enough
// that a batch-256 grid has thousands of blocks (~8-16 waves, small tail).
// (16 passes instead of 8: replay fp32 688 -> 634 us, decode 644 -> 628 us
// at batch 256 with the register-buffered kernels; with the staged stream,
// 32 replay passes measured 569 vs 540 us and 8 decode passes 627 vs 609 us,
// 32 decode passes no change; the decode kernel takes DECODE_PASSES = 8
// since 7086a2e, at three blocks per SM: below.) The duplicated B·C work is O((L+T)·T·N) per block against
// nh·np·N state elements (~1 % for L = 16, T = 1, nh = 8), and the B records it
// re-reads come from L2. (Thread-block clusters sharing B·C through
// distributed shared memory were considered: they would remove this small
// duplication but add a cluster barrier to every block's critical path.)
// At small batch the grid would leave SMs idle, so heads are split further
// (then P) until the grid has about four blocks per SM. A block never shrinks
// below one pass of its warps (rows_per_pass rows), so small batches still
// move full 16-byte vectors.
#pragma once
#include <algorithm>
#include <cstdint>

#include "core/device_class.h"
#include "core/eager.h"
#include "replayssm/types.h"

#if defined(__CUDACC__)
#define RSSM_M2_HD __host__ __device__ __forceinline__
#else
#define RSSM_M2_HD inline
#endif

namespace replayssm::mamba2 {

inline constexpr int KERNEL_THREADS = 256;
inline constexpr int KERNEL_WARPS = KERNEL_THREADS / 32;
inline constexpr int MAX_VPL = 2;
// Tokens staged per shared-memory chunk in prefill.
inline constexpr int PREFILL_CHUNK = 16;
// Passes of rows one hot-kernel block streams (upper bound on nh·np).
inline constexpr int HOT_PASSES = 16;
// Vectors per lane of the hot kernels (decode, snapshot, replay).
inline constexpr int HOT_VPL = 4;
// Shared memory a block may ask for before heads are split to keep two or
// more blocks resident per SM.
inline constexpr int64_t SMEM_SOFT_LIMIT = 64 * 1024;

struct RowGeometry {
  int vec;  // elements per 16-byte vector of the state dtype
  int nv;   // vectors per row, ceil(N / vec)
  int lpr;  // lanes per row (power of two, <= 32)
  int rpw;  // rows per warp per load instruction, 32 / lpr
  int vpl;  // vectors per lane, ceil(nv / lpr): 1 or 2
  int ns;   // shared-memory row stride (floats) of staged N-vectors, N rounded up to 8
};

inline RowGeometry row_geometry(int64_t N, DType state) {
  RowGeometry g{};
  g.vec = int(16 / dtype_size(state));
  g.nv = int((N + g.vec - 1) / g.vec);
  g.lpr = 1;
  while (g.lpr < g.nv && g.lpr < 32) g.lpr *= 2;
  g.rpw = 32 / g.lpr;
  g.vpl = (g.nv + g.lpr - 1) / g.lpr;
  g.ns = int((N + 7) / 8 * 8);
  return g;
}

// Geometry of the hot kernels: the fewest lanes per row (a power of two) that
// leave each lane at most HOT_VPL vectors.
inline RowGeometry hot_geometry(int64_t N, DType state) {
  RowGeometry g = row_geometry(N, state);
  g.lpr = 1;
  while (g.lpr * HOT_VPL < g.nv && g.lpr < 32) g.lpr *= 2;
  g.rpw = 32 / g.lpr;
  g.vpl = (g.nv + g.lpr - 1) / g.lpr;
  return g;
}

// Rows one block streams per pass: warps x rows per warp x rows in flight.
inline int rows_per_pass(const RowGeometry& g, int U) { return KERNEL_WARPS * g.rpw * U; }

struct Tile {
  int nh = 1, np = 1;            // heads and head-dim rows per block
  int hchunks = 1, pchunks = 1;  // blocks per group along heads and along P
  int64_t blocks = 0;            // rows x G x hchunks x pchunks
};

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// smem_bytes(nh, np) gives the block's dynamic shared memory for a tile.
// max_rows caps the rows (nh·np) of one block (heads are halved until it
// holds, never below one head).
template <class SmemFn>
Tile choose_tile(int64_t rows, int64_t H, int64_t G, int64_t P, int min_rows, int sms,
                 SmemFn&& smem_bytes, int64_t max_rows = INT64_MAX) {
  const int64_t hpg = H / G;
  Tile t;
  t.nh = int(hpg);
  t.np = int(P);
  while (t.nh > 1 && int64_t(t.nh) * t.np > max_rows) t.nh = int(ceil_div(t.nh, 2));
  auto blocks = [&](int nh, int np) { return rows * G * ceil_div(hpg, nh) * ceil_div(P, np); };
  const int64_t target = 4 * int64_t(std::max(sms, 1));
  while (t.nh > 1 && smem_bytes(t.nh, t.np) > SMEM_SOFT_LIMIT) t.nh = int(ceil_div(t.nh, 2));
  while (blocks(t.nh, t.np) < target) {
    if (t.nh > 1 && int64_t(t.nh / 2) * t.np >= min_rows) {
      t.nh = int(ceil_div(t.nh, 2));
    } else if (t.nh == 1 && t.np / 2 >= min_rows) {
      t.np = int(ceil_div(t.np, 2));
    } else {
      break;
    }
  }
  t.hchunks = int(ceil_div(hpg, t.nh));
  t.pchunks = int(ceil_div(P, t.np));
  t.blocks = blocks(t.nh, t.np);
  return t;
}

// Heads per block of the bulk-copy replay kernel (launch.cu::
// launch_replay1_kernel), from hb_max (the largest power of two dividing the
// group's hpg heads whose state fits the block's byte budget). T = 1: halved
// while the grid of B·G·hpg/hb blocks has fewer than four per SM, but below
// REPLAY1_RING_BULK_HEADS heads (whose ring the kernel fetches by bulk
// copies) only while it has fewer than one per SM. Measured at H128·P64·N128
// (docs/perf_notes_mamba2.md, "heads per block at small batches"; µs, the
// former target of eight blocks per SM → this rule; baselines in brackets):
// fp32 B = 3 15.9 → 12.8 [16.3], 4 17.4 → 14.2 [21.0], 8 30.4 → 24.3 [29.9],
// 16 55.3 → 40.4 [46.7], 32 73.4 → 67.0 [79.2], 64 110.9 → 111.5; bf16 B = 3
// 15.4 → 10.3 [11.7], 4 16.7 → 11.2 [12.0], 8 29.8 → 19.1 [22.0], 16 55.3 →
// 31.5 [31.7], 32 59.6 → 52.5 [51.3], 64 87.9 → 81.8 [89.3]; dual fp8 copies
// B = 16 61.3 → 40.8, nvfp4 84.4 → 39.5; batch 1 and 2 take the same tiles.
// T > 1 halves toward one block per SM (speculative blocks carry T tokens'
// preparation, so fewer, larger ones win further): T = 5, eight per SM → one
// (docs/perf_notes_delta.md, "speculative tiles at small batches by default",
// µs): fp32 B = 4 28.7 → 23.2, 8 52.1 → 34.8, 16 98.5 → 59.7, 32 136.6 →
// 101.7, 64 195.0 → 174.0; bf16 B = 16 107.8 → 56.6, 64 183.7 → 161.3; B = 1
// 12.9 either way; at B = 96 and 128 every target is within 0.2 % (the
// sweep in the same section).
// blocks_per_sm > 0 (REPLAYSSM_M2_R1_BPS, measurements) halves while the grid
// has fewer than that many per SM.
inline constexpr int REPLAY1_RING_BULK_HEADS = 4;
inline int replay1_heads_per_block(int64_t B, int64_t G, int hpg, int hb_max, int T, int sms,
                                   int blocks_per_sm = 0) {
  const int64_t per_sm = std::max(sms, 1);
  auto blocks = [&](int hb) { return B * G * (hpg / hb); };
  int hb = hb_max;
  if (T > 1 || blocks_per_sm > 0) {
    const int64_t target = (blocks_per_sm > 0 ? blocks_per_sm : 1) * per_sm;
    while (hb > 1 && blocks(hb) < target) hb /= 2;
    return hb;
  }
  while (hb > REPLAY1_RING_BULK_HEADS && blocks(hb) < 4 * per_sm) hb /= 2;
  while (hb > 1 && blocks(hb) < per_sm) hb /= 2;
  return hb;
}

// L2 prefetch of the block ahead (replay1_kernel.cuh, AheadRow): half a
// resident grid (two blocks per SM) ahead, as the delta kernels' records
// prefetch (delta/heuristics.h replay1_prefetch_distance), for T = 1 steps on
// fp32 checkpoints from batch 32 on. Measured on the H200 at H128·P64·N128,
// L = 16 (docs/perf_notes_mamba2.md, "L2 prefetch of the block ahead",
// two rounds, µs, none / SMs / 2·SMs ahead): fp32 B = 256 335.6 / 332.6 /
// 332.8, B = 64 112.3 / 112.1 / 112.4; bf16 B = 256 237.9 / 238.9 / 237.5;
// slower where the records are a smaller share of a block's chain or the
// step waits for another grid: T = 5 fp32 584.8 / 599.7 / 599.9, dual fp8
// 299.7 / 304.3 / 304.0, nvfp4 338.0 / 346.4 / 346.4. override >= 0
// (REPLAYSSM_M2_PF, measurements and tests) sets the distance in blocks for
// every step of this kernel.
inline int replay1_prefetch_distance(int64_t B, int T, bool dual, int state_size, int sms, int override_blocks = -1) {
  if (override_blocks >= 0) return override_blocks;
  return B >= 32 && T == 1 && !dual && state_size == 4 ? std::max(sms, 1) : 0;
}

// L2 prefetch of the sweep ahead in replay1_kernel.cuh's T = 1 stream on
// fp32 checkpoints (Params::t1_l2pf): when a block issues sweep k into a
// stage it also prefetches sweep k + 1, so more bytes are in flight than
// its two or three 32 KiB stages hold. Measured on an H100 (branch
// t40-t1pf, a compile-time switch; experiments/2026-12-05_t40 and _t41):
// H128 fp32 B = 256 −0.5 to −0.8 %, B = 64 +4.4 %, 16-bit states slower at
// both, so from min_blocks_per_sm blocks per SM on (B = 256 at H128: 31;
// B = 64: 7.8). On the H200 it is slower: H128 fp32 B = 256 318.1–318.6
// against 314.7–315.1 µs without it (experiments/2026-12-06_t47, two
// rounds), so only on devices that report a peak bandwidth below the
// H200's class (core/device_class.h: the H100's 3.35 TB/s, not the H200's
// 4.8).
// override >= 0 (REPLAYSSM_M2_T1_L2PF) sets the distance for every such
// step (measurements and tests).
inline int replay1_sweep_prefetch(int64_t blocks, int T, bool dual, int state_size, int sms, double peak_gbps,
                                  int override_distance = -1, int64_t min_blocks_per_sm = 16) {
  if (T != 1 || dual || state_size != 4) return 0;
  if (override_distance >= 0) return override_distance;
  if (h200_class(peak_gbps)) return 0;
  return blocks >= min_blocks_per_sm * std::max(sms, 1) ? 1 : 0;
}

// The fold of a flushing block in replay1_kernel.cuh (Params::fold_tc): on
// tensor cores (m16n8k8 tf32, the fold weights split hi + lo as the T > 1
// stream's own products split the state; fold_tile_tc) rather than as the
// FMA stream, ~16 records × 32 values per lane, that the dual pack, the
// eager steps and the slot operations keep. T > 1 folds on the registers
// of its sweeps; T = 1 folds each sweep in place in its stage before the
// stream reads it, for fp32 states only: with 16-bit states it measured
// slower than the FMA stream (H100, B = 256 / 512, 247.0 → 249.3 / 452.5 →
// 455.9 µs; t64, experiments/2026-12-07_t64), and their T = 1 instances do not
// compile it, so no override selects it there. Single-precision steps only
// (a dual step's flush is the pack's). T = 1, fp32 states (t64 call 2, two
// rounds, µs, main → tensor cores): B = 64 / 256 / 512 116.9–117.8 →
// 115.2–115.4, 411.2–412.3 → 409.8, 799.8–800.0 → 797.1–797.6. T > 1
// measured on an H100 at H128·P64·N128, L = 16 (docs/perf_notes_mamba2.md,
// "the T > 1 fold on tensor cores", µs, FMA stream →
// tensor cores, same call): bf16 states T = 5 B = 64 / 256 / 512 139.9 →
// 128.6, 470.9–471.3 → 445.5–445.7, 915.6 → 867.6; T = 8 B = 256 713.8–714.5
// → 690.1–690.5; fp32 T = 5 B = 64 / 256 165.2 → 159.8, 555.4–557.0 →
// 549.4–549.6; fp32 T = 8 B = 256 / 512 even (651.3–652.2, 1264.3 / 1266.7).
// override >= 0 (REPLAYSSM_M2_FOLD_TC, measurements and tests): 0 the FMA
// stream, otherwise tensor cores (where the instance has them).
inline bool replay1_fold_tc(int T, bool dual, int state_size, int override_mode = -1) {
  if (T < 1 || dual || (T == 1 && state_size != 4)) return false;
  return override_mode != 0;
}

// Prefill holds each row's running state in registers for the whole prompt:
// one row per row group (U = 1), so a block owns exactly one pass of rows.
inline Tile prefill_tile(int64_t rows, int64_t H, int64_t G, int64_t P, const RowGeometry& g) {
  Tile t;
  t.nh = 1;
  t.np = int(std::min<int64_t>(P, rows_per_pass(g, 1)));
  t.hchunks = int(H / G);
  t.pchunks = int(ceil_div(P, t.np));
  t.blocks = rows * G * t.hchunks * t.pchunks;
  return t;
}

// Asynchronous state stages of the hot kernels (kernel_common.cuh::issue_pass):
// one stage holds one pass, HOT_VPL 16-byte vectors per lane (16 KiB). A
// block keeps up to `stages` passes in flight (cp.async into shared memory,
// no registers held), so bytes in flight no longer trade against registers:
// 4 stages x 2 blocks = 128 KiB per SM, twice what the register double
// buffer held. The count is the largest in [2, MAX_HOT_STAGES] that still
// lets `blocks` blocks share an SM with the kernel's other shared memory.
inline constexpr int MAX_HOT_STAGES = 4;
// Resident blocks per SM the hot kernels are built for (__launch_bounds__).
inline constexpr int HOT_BLOCKS_PER_SM = 2;
// The decode kernel (baseline and snapshot baseline): three blocks per SM
// (80 registers, no spills) of DECODE_PASSES passes (fp32 N = 128, P = 64:
// four heads, 128 KiB of state). Measured in one run against two blocks of
// HOT_PASSES (2 / 3 blocks per SM × 16 / 8 passes, B = 64 / 256 / 512, µs;
// docs/perf_notes_mamba2.md, "the decode kernel at three blocks per SM of
// eight passes", two rounds): fp32 H128 156.5 / 152.7 / 160.5 / 152.0, 596.2 /
// 583.7 / 592.4 / 583.9, 1177.4 / 1158.0 / 1171.3 / 1159.4; H64 B = 256 306.3
// / 301.0 / 305.4 / 298.3; bf16 H128 B = 256 333.9 / 329.6 / 332.3 / 326.6,
// H96 311.8 / 314.3 / 311.1 / 306.3. (Three blocks had measured slower for
// bf16 at an earlier kernel, 373 against 346 µs; four passes are slower
// everywhere, H128 fp32 B = 256 638 µs; five or six stages instead of four
// change nothing.)
inline constexpr int DECODE_BLOCKS_PER_SM = 3;
inline constexpr int DECODE_PASSES = 8;
// The decode kernel's last DECODE_TAIL_ROWS rows in tiles of
// DECODE_TAIL_PASSES passes at the end of the grid (decode_kernel.cuh TAIL).
// Against none, fp32, two rounds
// (docs/perf_notes_mamba2.md, "the decode kernel's tail tiles landed", µs):
// B = 64 H128 153.4 → 150.3, H64 81.6 → 78.7, H96·P80 145.0 → 144.1 (8 rows:
// 142.5); B = 256 H128 587.9 → 585.6, H64 300.9 → 296.7.
inline constexpr int DECODE_TAIL_ROWS = 16;
inline constexpr int DECODE_TAIL_PASSES = 4;
inline constexpr int64_t STAGE_BYTES = int64_t(HOT_VPL) * KERNEL_THREADS * 16;
// max_stages (measurements: REPLAYSSM_M2_DEC_STAGES for the decode kernel)
// in [2, 8]: cp_async_wait takes up to 7 groups in flight.
inline int hot_stages(int64_t rest_bytes, int64_t smem_per_sm, int blocks, int max_stages = MAX_HOT_STAGES) {
  int s = std::clamp(max_stages, 2, 8);
  // 1 KiB per block is reserved by the runtime
  while (s > 2 && blocks * (s * STAGE_BYTES + rest_bytes + 1024) > smem_per_sm) --s;
  return s;
}

// Replay kernel shared memory after the stages, in bytes (every array starts
// 16-byte aligned). Raw arrays keep the activation dtype (records of x and B,
// the window's x and z) with a padded row stride nps (16-byte multiple).
struct ReplaySmem {
  int64_t nps;  // padded row stride of the raw [.., np] arrays (elements)
  int64_t nhp;  // nh rounded up to 4 (row stride of dh)
  int64_t cur;  // int32[4] the row's cursor
  int64_t Cs, Bw, Bf, BC, dh, dwin, Ah, Dh, coef, dec, fw, fdec, hist, part;  // fp32
  int64_t Bh, xh, xwin, zs;                                                    // raw
  int64_t bytes;
};
RSSM_M2_HD int64_t align16(int64_t b) { return (b + 15) / 16 * 16; }
RSSM_M2_HD ReplaySmem replay_smem(int64_t T, int64_t L, int64_t ns, int64_t nh, int64_t np,
                                  int64_t act_size) {
  const int64_t J = L + T;  // records (at most L) plus window tokens
  const int64_t ch = 16 / act_size;
  ReplaySmem m{};
  m.nps = (np + ch - 1) / ch * ch;
  m.nhp = (nh + 3) / 4 * 4;
  int64_t o = 0;
  auto take = [&](int64_t bytes) { const int64_t at = o; o += align16(bytes); return at; };
  m.cur = take(16);
  m.Cs = take(4 * T * ns);        // [T][ns]   C_t
  m.Bw = take(4 * T * ns);        // [T][ns]   B of the window tokens
  m.Bf = take(4 * L * ns);        // [L][ns]   B of the records, widened (flush)
  m.BC = take(4 * T * J);         // [T][J]    B_j·C_t
  m.dh = take(4 * L * m.nhp);     // [L][nhp]  δ of the records
  m.dwin = take(4 * nh * T);      // [nh][T]   δ of the window
  m.Ah = take(4 * nh);            // [nh]
  m.Dh = take(4 * nh);            // [nh]
  m.coef = take(4 * nh * T * J);  // [nh][T][J]
  m.dec = take(4 * nh * T);       // [nh][T]
  m.fw = take(4 * nh * L);        // [nh][L]   fold weights
  m.fdec = take(4 * nh);          // [nh]
  m.hist = take(4 * nh * T * np); // [nh][T][np]
  m.part = take(4 * T * nh * np); // [T][nh][np]  S·C_t of the streamed rows
  m.Bh = take(act_size * L * ns);            // [L][ns]       B of the records
  m.xh = take(act_size * L * nh * m.nps);    // [L][nh][nps]  x of the records
  m.xwin = take(act_size * T * nh * m.nps);  // [T][nh][nps]  x of the window
  m.zs = take(act_size * T * nh * m.nps);    // [T][nh][nps]  z of the window
  m.bytes = o;
  return m;
}
// Packed read-copy streams of the dual replay step (fp8: 16 codes per
// 16-byte vector, nvfp4: 32). Same rule as hot_geometry: the fewest lanes per
// row (a power of two) that leave each lane at most HOT_VPL vectors. N must
// be a multiple of the vector's elements (validated).
inline constexpr int QF_NONE = 0, QF_FP8 = 1, QF_NVFP4 = 2;
RSSM_M2_HD int packed_vec(int qf) { return qf == QF_FP8 ? 16 : 32; }
inline RowGeometry packed_hot_geometry(int64_t N, int qf) {
  RowGeometry g{};
  g.vec = packed_vec(qf);
  g.nv = int((N + g.vec - 1) / g.vec);
  g.lpr = 1;
  while (g.lpr * HOT_VPL < g.nv && g.lpr < 32) g.lpr *= 2;
  g.rpw = 32 / g.lpr;
  g.vpl = (g.nv + g.lpr - 1) / g.lpr;
  g.ns = int((N + 7) / 8 * 8);
  return g;
}
// Shared memory of a packed stream after replay_smem: the block's block-scale
// bytes ([nh] runs of np·srb bytes, each 16-byte aligned) and the nh tile
// scales (nvfp4).
RSSM_M2_HD int64_t packed_scale_seg(int64_t np, int64_t srb) { return align16(np * srb); }
RSSM_M2_HD int64_t packed_scale_smem(int64_t nh, int64_t np, int64_t srb) {
  return nh * packed_scale_seg(np, srb) + align16(4 * nh);
}

// T = 1 replay steps of at most EAGER_MAX_ROWS rows and EAGER_MAX_BYTES of
// state are eager (core/eager.h; launch.cu replay_step): at batch 1 (H128
// fp32) 7.2 µs against the replay kernel's 8.3 and the baseline's 6.9; above
// 4 MiB of state the replay kernel is below the baseline (H128 fp32 B = 2
// 10.1 against 11.7, H256 fp32 B = 1 9.8 against 11.6) and the eager step
// is not (perf_notes_mamba2.md, "eager T = 1 steps at batch 1–2"). 16-bit
// states go to 6 MiB: H128 bf16 B = 3 (6 MiB) eager 8.7 µs against the
// replay kernel's 10.2 and the baseline's 8.45 on an H100, where fp32 B = 2
// (8 MiB) eager took 13.1 against 10.2 (experiments/2026-12-05_t41/README.md).
inline constexpr int64_t EAGER_MAX_ROWS = 3;
inline constexpr int64_t EAGER_MAX_BYTES = int64_t(4) << 20;
inline constexpr int64_t EAGER_MAX_BYTES_16 = int64_t(6) << 20;
inline constexpr int64_t eager_max_bytes(int64_t state_elem_bytes) {
  return state_elem_bytes < 4 ? EAGER_MAX_BYTES_16 : EAGER_MAX_BYTES;
}
// Whether a T = 1 replay step of B rows of row_elems state elements of
// elem_bytes each is eager by these limits (launch.cu replay_step, the
// bench's row labels).
inline bool eager_by_rule(int64_t B, int64_t row_elems, int64_t elem_bytes) {
  return eager_step(B, row_elems * elem_bytes, EAGER_MAX_ROWS, eager_max_bytes(elem_bytes));
}

RSSM_M2_HD int64_t decode_smem_floats(int64_t T, int64_t ns, int64_t nh, int64_t np) {
  return 4 * T + 2 * ns * T + 2 * nh * T + nh + 2 * nh * T * np;
}
inline int64_t fold_smem_floats(int64_t L, int64_t ns, int64_t nh) {
  return ns * L + nh * (L + 1);
}
// An eager step's decode block (decode_kernel.cuh EAGER): after the token's
// arrays, 16-byte aligned, the row's cursor (4 ints) and then the fold's
// arrays; the block reserves the alignment's 3 floats at most.
RSSM_M2_HD int64_t eager_cursor_off(int64_t T, int64_t ns, int64_t nh, int64_t np) {
  return (decode_smem_floats(T, ns, nh, np) + 3) & ~int64_t(3);
}
inline int64_t eager_decode_smem_floats(int64_t T, int64_t ns, int64_t nh, int64_t np, int64_t L) {
  return decode_smem_floats(T, ns, nh, np) + 3 + 4 + fold_smem_floats(L, ns, nh);
}
inline int64_t prefill_smem_floats(int64_t L, int64_t ns, int64_t nh) {
  return ns * (L + 2 * PREFILL_CHUNK) + nh * (L + 1) + nh * 2 * PREFILL_CHUNK;
}

}  // namespace replayssm::mamba2
