// Tile choices of the delta CUDA kernels, with their reasons (constants shared
// by the launchers and the kernels' launch bounds).
#pragma once
#include <algorithm>
#include <cstdint>

#include "core/device_class.h"
#include "replayssm/delta.h"

namespace replayssm::delta::cuda_impl {

// A lane holds 16 elements of a state row (four 16-byte vectors of fp32, two
// of bf16/fp16): enough bytes in flight per thread to stream the state near
// copy bandwidth at ~1,000 resident threads per SM, and few enough registers
// (16 state + 16 prefetch) to keep that occupancy. So a row of K elements
// takes LPR = next_pow2(K / 16) lanes; K = 128 → 8 lanes, three shuffles per
// reduction.
inline constexpr int LANE_ELEMS = 16;
inline constexpr int MAX_K = 32 * LANE_ELEMS;
inline int lanes_per_row(int64_t K) {
  int l = 1;
  while (int64_t(l) * LANE_ELEMS < K) l <<= 1;
  return l;
}

// Baseline recurrence (decode, snapshot, prefill): a memory-latency bound
// pass over the state. Each thread holds the lane shares of REC_ROWS rows
// (2 × 16 elements: eight 16-byte loads of fp32), all issued right after the
// slot is known and before the per-token preparation (q̂, k̂, gates, β, v
// staged in shared memory), which runs while they are in flight. 256-thread
// blocks capped at 80 registers (3 resident blocks: 96 KiB of fp32 state in
// flight per SM; at 64 registers ptxas spills the rows). At K = 128 a block
// covers 64 rows of one value head (two blocks per head).
inline constexpr int REC_THREADS = 256;
inline constexpr int REC_ROWS = 2;
inline constexpr int REC_MIN_BLOCKS = 3;
// Tokens prepared per shared-memory chunk (q̂, k̂, gates, v): bounds shared
// memory for long prompts; decode windows (T <= 8) take one chunk.
inline constexpr int REC_TOKEN_CHUNK = 8;

// Rows of V covered by one block of the recurrence kernel.
inline int rows_per_block(int threads, int rows_per_thread, int lpr) { return threads / lpr * rows_per_thread; }

// Baseline decode of one token (decode1.cuh): the block's rows stream
// through 64 KiB of cp.async stages (fp32: 128 rows = one value head at
// K = V = 128 in flight; bf16: 256 rows), issued as soon as the slot is
// known; a block covers decode1_stage_rounds stage loads of rows (value heads
// of one key head share the q̂/k̂ preparation); three resident blocks per SM.
// Small batches split V until the grid has two blocks per SM.
// The baseline decode's last DECODE1_TAIL_ROWS rows run in smaller tiles at
// the end of its 1-D grid (decode1.cuh TAIL), so the last wave drains
// sooner. Against none, fp32 states, two rounds
// (docs/perf_notes_delta.md, "KDA preparation, constant-K bulk and tail tiles
// landed", µs): B = 64 GDN HV32 77.8 → 75.5, HV64 144.9 → 143.3, KDA 81.8 →
// 79.7; B = 256 GDN HV64 558.9 → 555.9, KDA equal. 8 rows: KDA B = 64 82.3; 32
// rows: no better.
inline constexpr int DECODE1_TAIL_ROWS = 16;
inline constexpr int DECODE1_THREADS = 256;
inline constexpr int DECODE1_MIN_BLOCKS = 3;
// Rows per block in units of the stages (1: every row in flight at once, the
// block idle between its burst of loads and its burst of stores; 2: the
// stages are refilled once, so a block streams twice as long per preparation;
// 4: GDN's G = 3 and 4 value heads and four KDA heads per fp32 block). fp32
// states take 2 (two value heads per block at K = V = 128), 16-bit states 4.
// Measured in one run, rounds 1 / 2 / 4, B = 64 / 256 / 512, µs
// (docs/perf_notes_delta.md, "the baseline decode's blocks", two rounds):
// fp32 KDA 86.7 / 81.7 / 82.6, 309.6 / 287.1 / 298.6, 602.5 / 565.4 / 579.6;
// GDN HV64 145.7 / 144.4 / 152.9, 551.6 / 555.4 / 564.0, 1091.7 / 1103.9 /
// 1115.7; GDN HV32 and HV48 within 1.7 % of their best at 2; bf16 KDA at 2
// 263.4 against 231.1 at 4 (B = 256), GDN bf16 equal at 2 and 4, 10–13 %
// slower at 1. (At ec18d76's kernel 4 had beaten 2 for GDN fp32 too, 576
// against 593 µs, perf_notes_delta.md, "KDA decode blocks over consecutive
// heads".)
inline constexpr int decode1_stage_rounds(int state_size) { return state_size == 4 ? 2 : 4; }
// KDA without GQA (G = 1): a block's heads are consecutive key heads
// (kpb = nh), each with its own q̂, k̂ (so a block streams its stage rounds
// of rows per preparation, as GDN's blocks of one key head's value heads).
struct DecodeTile {
  int nh;   // value heads per block (a divisor of G; G = 1: of H)
  int vt;   // rows of V per head per block (a multiple of the lane groups)
  int kpb;  // key heads per block (nh when G = 1, else 1)
};
// nch: the state's bytes per element; rounds: decode1_stage_rounds(nch)
// (REPLAYSSM_D1_ROUNDS for measurements).
inline DecodeTile decode1_tile(int64_t B, int64_t H, int64_t G, int64_t V, int lpr, int nch, int sm_count,
                               bool kda, int rounds) {
  const int rpp = DECODE1_THREADS / lpr, cap = std::max(rounds, 1) * (16 / nch) * rpp;
  const int64_t span = G > 1 ? G : kda ? H : 1;  // heads a block may cover
  DecodeTile t{1, int(V), 1};
  if (V > cap) {
    t.vt = cap;
  } else {
    int n = int(span);
    while (n > 1 && (span % n || n * V > cap)) --n;
    t.nh = n;
  }
  auto fix = [&] { t.kpb = G > 1 ? 1 : t.nh; };
  fix();
  const int64_t target = 2 * int64_t(std::max(sm_count, 1));
  while (B * H * G / t.nh * ((V + t.vt - 1) / t.vt) < target) {
    if (t.nh > 1) {
      int n = t.nh - 1;
      while (span % n) --n;
      t.nh = n;
      fix();
    } else if (t.vt > rpp) {
      t.vt = std::max(rpp, ((t.vt + 1) / 2 + rpp - 1) / rpp * rpp);
    } else {
      break;
    }
  }
  return t;
}

// T = 1 replay steps of at most EAGER_MAX_ROWS rows and EAGER_MAX_BYTES of
// state are eager (core/eager.h; delta_launch.cu run_eager). At batch 1 the
// replay kernel's chain (slot → cursor → records → token → stream) takes
// 10.2 µs against the baseline's 6.4, the eager step 6.3 (GDN HV64 fp32);
// up to 3 rows the eager step is below the replay step in every measured
// shape but one tie (GDN HV64 fp32 B = 2: 10.64 against 10.63; B = 3 10.6
// against 13.1), at 4 it is not (KDA bf16: replay 10.9, eager 12.0;
// perf_notes_delta.md, "eager T = 1 steps at batch 1–3, on by default" and
// "the eager instance's registers").
inline constexpr int64_t EAGER_MAX_ROWS = 3;
inline constexpr int64_t EAGER_MAX_BYTES = int64_t(12) << 20;

// Replay step: 256 threads, each lane group walks rows of its block with the
// next row prefetched into registers while the current one is reduced.
inline constexpr int REPLAY_THREADS = 256;
// Enough blocks for several waves over the SMs (H200: 132), so that a block
// preparing its records overlaps with others streaming the checkpoint.
inline constexpr int REPLAY_MIN_BLOCKS_PER_SM = 4;
// Shared memory budget of one replay block (the d tile dominates: (L+T)·rows·4 B).
inline constexpr int64_t REPLAY_SMEM_CAP = 120 * 1024;

// Replay step of one token (replay1.cuh): the checkpoint rows stream through
// 64 KiB of cp.async stages per block (P rows per thread in flight, stream.cuh),
// so the bytes in flight do not cost registers. Two resident blocks per SM
// (128 KiB in flight) need at most ~112 KiB of shared memory per block; at
// K = V = 128, L = 16 a GDN block of a whole key head (4 value heads, 512
// rows: 32 KiB of d records) just fits.
inline constexpr int REPLAY1_THREADS = 256;
inline constexpr int REPLAY1_MIN_BLOCKS = 2;
inline constexpr int64_t REPLAY1_SMEM_CAP = 112 * 1024;
// The T = 1 tile (replay_tile) splits until the grid has replay1_tile_bps
// blocks per SM: REPLAY_MIN_BLOCKS_PER_SM, or one while the step streams
// less than REPLAY1_FEW_BYTES_PER_SM per SM (state or read copy). A block's
// chain (slot, cursor, d / key records, decays) costs the same for 32 rows
// as for 512, so at small batches fewer, larger blocks win. Measured
// (docs/perf_notes_delta.md, "small-batch tiles by default", L = 16, µs, four
// per SM → one; baselines in brackets): GDN HV64 fp32 B = 2 / 4 / 8 / 16
// 16.8 → 10.6 [10.8] / 30.1 → 14.2 [16.2] / 32.8 → 20.9 [26.8] / 44.9 →
// 36.4 [44.9]; bf16 B = 4 / 8 / 16 / 32 33.1 → 12.2 / 34.7 → 18.8 / 38.4 →
// 29.5 / 56.8 → 48.3; KDA fp32 B = 4 / 8 / 16 17.0 → 12.4 / 25.8 → 16.3 /
// 33.3 → 27.6 (B = 3 11.1 → 11.6); dual fp8 copies GDN B = 4 / 8 / 16 / 32
// 37.0 → 19.9 / 41.3 → 27.1 / 49.5 → 39.5 / 70.9 → 64.0, KDA 23.6 → 17.5 /
// 34.4 → 21.3 / 38.6 → 31.3; batch 1 and B ≥ 48 take the same tiles either
// way. GDN fp32 at B = 24 (96 MiB) keeps four: one measured 51.2 against
// 48.1 (a threshold of 768 KiB, in the same section).
// REPLAYSSM_R1_TILE_BPS=n sets n instead (tests, measurements).
inline constexpr int64_t REPLAY1_FEW_BYTES_PER_SM = 512 * 1024;
inline int replay1_tile_bps(int64_t stream_bytes, int sm_count) {
  return stream_bytes < REPLAY1_FEW_BYTES_PER_SM * std::max(sm_count, 1) ? 1 : REPLAY_MIN_BLOCKS_PER_SM;
}

// Speculative (T > 1) tiles take replay1_tile_bps too. T = 5, four per SM →
// one (docs/perf_notes_delta.md, "speculative tiles at small batches by
// default", µs; snapshot baselines in brackets): GDN HV64 fp32 B = 4 62.6 →
// 25.4 [42.3], 8 69.8 → 36.9 [70.1], 16 86.2 → 61.9 [134.6]; bf16 B = 4 59.1 →
// 23.0 [49.6], 16 77.4 → 54.4 [141.1]; KDA fp32 B = 4 72.5 → 24.2 [24.4], 8
// 78.3 → 29.9 [48.3], 16 86.7 → 56.0 [76.1]. Left: GDN fp32 B = 32 (128 MiB)
// keeps four though one was faster (112.0 against 123.1, the sweep in the same
// section), as one is slower at B = 24 (100.1 against 95.7), and GDN bf16
// B = 24 takes one (87.8 against 85.6). On packed read copies (fp8 / nvfp4,
// decoded in registers by the staged kernel) one block per SM wins only while
// the step decodes fewer than SPEC_PACKED_FEW_ELEMS_PER_SM elements per SM.
// T = 5, four per SM → one (docs/perf_notes_delta.md, "speculative tiles at
// small batches by default", µs): GDN HV64 fp8 B = 4 (31 Ki elements per SM)
// 73.7 → 63.1, B = 8 (62 Ki) 109.7 → 108.4, nvfp4 B = 8 118.1 → 114.4; KDA fp8
// B = 4 (16 Ki) 61.2 → 53.6, B = 8 (31 Ki) 95.3 → 81.4, B = 16 (62 Ki) 137.6 →
// 142.4, nvfp4 B = 16 147.9 → 152.8; GDN fp8 B = 16 (124 Ki) 187.4 → 209.4,
// nvfp4 203.1 → 225.1. So 48 Ki: KDA B = 16 keeps four, GDN B = 8 too (1–3 %
// left there).
inline constexpr int64_t SPEC_PACKED_FEW_ELEMS_PER_SM = 48 * 1024;
inline int spec_packed_tile_bps(int64_t elems, int sm_count) {
  return elems < SPEC_PACKED_FEW_ELEMS_PER_SM * std::max(sm_count, 1) ? 1 : REPLAY_MIN_BLOCKS_PER_SM;
}

// KDA blocks (one head, 128 rows: 64 KiB of fp32) are short-lived, so their
// preparation weighs more: half-size stages (32 KiB, 2 fp32 rows per thread)
// and three resident blocks per SM instead.
inline constexpr int REPLAY1_KDA_CHUNKS = 8;
inline constexpr int REPLAY1_KDA_MIN_BLOCKS = 3;
// The bulk stream of a packed read copy (dual pools, fp8 / nvfp4 codes,
// replay1.cuh QB) moves a quarter of the fp32 stream's bytes per block, so
// its per-block chain weighs more than the depth of its stages: three
// resident blocks per SM (80 registers) with 32 KiB of stages each (GDN
// fp8: one sweep of 16.5 KiB; nvfp4: three of 9 KiB), as KDA's. Measured
// against two blocks with 64 KiB (docs/perf_notes_delta.md, "the packed-copy
// stream at three blocks per SM"): GDN HV64 dual fp8 B = 256 407 → 384 µs,
// nvfp4 511 → 479, B = 512 fp8 800 → 750.
inline constexpr int REPLAY1_QB_MIN_BLOCKS = 3;
inline constexpr int R1Q_STAGE_BYTES = 32 * 1024;

// Shared memory per T = 1 replay block for its resident blocks per SM (H200:
// 228 KiB per SM, 1 KiB reserved per block): two blocks (GDN f32 / bf16 /
// f16 streams) at REPLAY1_SMEM_CAP, three (KDA, packed copies) at 75 KiB.
inline int64_t replay1_smem_budget(bool three_blocks) { return three_blocks ? 75 * 1024 : REPLAY1_SMEM_CAP; }

// d records held in shared memory by a T = 1 replay block of a long ring
// (replay1.cuh, replay1_dt_floats): L when they fit the budget, else the
// largest multiple of 4 that does (records past it come from L2, and a flush
// of more stages its weights per sweep); L if none fits (the launcher then
// keeps the tile that fits with all L). At L = 32 the full tile's 64 KiB of
// GDN fp32 d records did not fit two blocks per SM, so the tile was split to
// one value head (B = 256: 710 µs against 336 at L = 16), and KDA lost its
// third slot (418 against 297); with ld = 12: GDN 412, KDA 379
// (docs/perf_notes_delta.md, "long rings keep whole tiles").
template <class SmemFn>
int replay1_ld(int L, SmemFn smem_bytes, int64_t budget) {
  if (smem_bytes(L) <= budget) return L;
  for (int c = (L - 1) / 4 * 4; c >= 4; c -= 4)
    if (smem_bytes(c) <= budget) return c;
  return L;
}

// Records prefetch of the T = 1 replay (kernel_common.cuh,
// prefetch_block_ahead): a block prefetches into L2 the records of the block
// half a resident grid after it (GDN 2, KDA 3 blocks per SM), which starts
// about half a block lifetime later, so its record loads hit L2 instead of
// waiting a loaded DRAM round trip; the stream's copies then take
// evict_first (without it the stream evicts the records first: GDN fp32
// got slower). Measured on the H200 (perf_notes_delta.md, "records prefetched
// into L2 half a resident grid ahead"): B = 256, GDN HV64 fp32 358.5 → 334.3
// µs, bf16 292.2 → 278.8, KDA fp32 317.7 → 304.9; a whole resident grid ahead,
// or the state's first sweeps prefetched as well, was slower. From batch 32
// on (batch 1 keeps its path).
inline int replay1_prefetch_distance(bool kda, int64_t B, int sm_count) {
  return B >= 32 ? (kda ? REPLAY1_KDA_MIN_BLOCKS : REPLAY1_MIN_BLOCKS) * std::max(sm_count, 1) / 2 : 0;
}

// The same prefetch in the speculative (T > 1) kernel (replay.cuh, two
// blocks per SM): KDA only, from batch 32 on. Its state units come by
// cp.async without a cache hint (the hinted cp.async raised an illegal
// instruction on the H200; not investigated), and GDN got no faster with it
// (T = 5, B = 256 fp32 913 → 920–945 µs), as the T = 1 stream without
// evict_first; KDA T = 5, B = 256: fp32 997 → 889 µs, bf16 913 → 799
// (perf_notes_delta.md, "the same prefetch in the speculative kernel (KDA)").
inline int replay_spec_prefetch_distance(bool kda, int64_t B, int sm_count) {
  return kda && B >= 32 ? 2 * std::max(sm_count, 1) / 2 : 0;
}

// A3 (replay.cuh: KDA's fp32 tensor-core kernel at three blocks per SM) by
// default from T = 8 on, with the block-ahead record prefetch off (its
// records come by REC16's copies). Measured on an H100, KDA 32×128, L = 16,
// µs, main (two blocks per SM, the prefetch on) against A3 without the
// prefetch (perf_notes_delta.md v58): T = 8 B = 64 / 128 / 256 184.6 → 175.4 /
// 360.6 → 328.1 / 714.0–715.8 → 637.4–637.8; T = 5 B = 64 / 128 / 256 / 512
// 147.8 → 155.6 / 287.2 → 291.4 / 566.6 → 563.7 / 1128.3 → 1117.3–1117.9,
// where the branch with A3 off and no half-tile prefetch took 554.6–554.8 at
// B = 256. T = 6 and 7 were not measured and keep two blocks per SM.
inline constexpr int64_t SPEC_A3_MIN_T = 8;

// The persistent T = 1 step (replay1p.cuh) by default from this much of the
// batch's state per SM: 16-bit GDN states 1.75 MiB, 16-bit KDA states 1 MiB,
// fp32 KDA states 1.375 MiB (B >= 91 at 132 SMs; 3.5 MiB before the 16
// consumer warps of that instance, replay1p.cuh r1p_warps: blocks against
// persistent at B = 80 / 88 / 96 / 128 / 256 / 512 93.4 / 101.7 / 109.9 /
// 141.8 / 271.8 / 531.3 against 95.4 / 101.2 / 107.2 / 135.3 / 238.6 / 440.9,
// perf_notes_delta.md, "sixteen consumer warps for fp32 KDA in the persistent
// step"); never for fp32 GDN states (at 16 warps too: 312.5 against 342.4 at
// B = 256). Measured against replay1.cuh's blocks since 963d915 (the
// persistent step's cursors without 64-bit divisions; REPLAYSSM_R1P = 0 / 1 in
// one run, perf_notes_delta.md, "the persistent step's thresholds moved",
// L = 16, µs): GDN HV64 bf16 (2 MiB per row) B = 96 / 112 106.9 / 121.2
// against 113.5 / 123.3 (blocks faster), B = 128 / 160 / 192 / 256 135.4 /
// 165.7 / 193.3 / 252.2 against 133.7 / 154.8 / 179.4 / 239.5; KDA bf16 (1 MiB
// per row) B = 112 / 128 112.9 / 128.0 against 117.6 / 131.4, B = 160 / 192 /
// 256 156.2 / 185.2 / 242.6 against 154.7 / 177.7 / 225.3; KDA fp32 (2 MiB per
// row) B = 64 / 128 / 192 77.0 / 141.7 / 206.4 against 91.0 / 151.1 / 207.5,
// B = 256 / 384 / 512 271.1 / 401.0 / 530.9 against 266.8 / 380.8 / 496.4; GDN
// fp32 B = 256 314.6 against 350.2 (before 963d915 the thresholds were 3 MiB
// for 16-bit states and none for fp32: perf_notes_delta.md, "the persistent
// step in two kernels"). A captured step that has no device scratch for it (no
// Exec::workspace and no library buffer of the stream) takes the blocks
// instead: the same arithmetic (DeltaGpu.PersistentMatchesBlockKernel).
// Below the H200's class (core/device_class.h h200_class) fp32 KDA states
// and 16-bit GDN states of three or more value heads per key head (G, an
// item's heads) keep the blocks at every batch: on an H100 (t50-call6 and
// -call8, experiments/2026-12-06_t50/README.md, two rounds, L = 16, µs,
// persistent against blocks) GDN HV64 bf16 B = 128 / 256 / 512 148.7 /
// 280.4 / 540.6 against 139.0 / 256.2 / 495.7, HV48 B = 256 / 512 219.6 /
// 417.3 against 214.6 / 413.0, KDA fp32 B = 128 / 256 / 512 144.0 / 277.0 /
// 535.0 against 137.2 / 260.5 / 508.6. 16-bit KDA keeps its threshold
// there (B = 256 / 512 203.5 / 386.9 against 228.4 / 444.0; even at
// B = 128). 16-bit GDN of G = 2 (HV32) takes the step there from 10 items
// (row, key head) per SM (HV32 from B = 83 at 132 SMs; t50-call8, -call10,
// -call11: B = 32 / 64 / 96 / 128 / 160 / 256 / 512 bf16 41.7 / 59.4 / 73.6 /
// 87.5 / 103.4 / 157.9 / 294.3 against 35.9 / 57.3 / 79.4 / 100.5 / 120.1 /
// 180.0 / 342.4, f16 alike: the crossover between 7.8 and 11.6 items per SM).
inline constexpr int64_t R1P_MIN_STATE_PER_SM_GDN16 = int64_t(7) << 18;  // 1.75 MiB
inline constexpr int64_t R1P_MIN_STATE_PER_SM_KDA16 = int64_t(1) << 20;
inline constexpr int64_t R1P_MIN_STATE_PER_SM_KDA32 = int64_t(11) << 17;  // 1.375 MiB
inline constexpr int64_t R1P_LOW_BW_GDN2_MIN_ITEMS_PER_SM = 10;
// The rows that keep the blocks below the H200's class: fp32 KDA states,
// 16-bit GDN states (and, r1p_dual_by_default, bf16 / f16 copies: elem_size
// 2) of G >= 3.
inline bool r1p_blocks_below_h200(bool kda, int64_t elem_size, int64_t G) {
  return kda ? elem_size == 4 : elem_size == 2 && G >= 3;
}
inline bool r1p_by_default(bool kda, int64_t state_size, int64_t state_bytes, int sm_count, double peak_gbps,
                           int64_t G, int64_t items) {
  if (!h200_class(peak_gbps)) {
    if (r1p_blocks_below_h200(kda, state_size, G)) return false;
    if (!kda && state_size == 2 && G == 2) return items >= R1P_LOW_BW_GDN2_MIN_ITEMS_PER_SM * std::max(sm_count, 1);
  }
  const int64_t per_sm = state_size == 2 ? (kda ? R1P_MIN_STATE_PER_SM_KDA16 : R1P_MIN_STATE_PER_SM_GDN16)
                         : kda && state_size == 4 ? R1P_MIN_STATE_PER_SM_KDA32
                                                  : -1;
  return per_sm > 0 && state_bytes >= per_sm * std::max(sm_count, 1);
}
// A dual step's T = 1 read of its copy (every format) takes it from 12
// items (row, key head) per SM. Against replay1.cuh's blocks, fp32
// checkpoint, L = 16, µs (perf_notes_delta.md, "dual T = 1 steps on the
// persistent step"): GDN HV64 (16 items per row) at B = 64 / 128 (d650413;
// its part "the threshold, and where the GDN dual step's time goes"): fp8
// 103.2 → 110.8 / 185.8 → 182.6, nvfp4 135.1 → 141.3 / 241.9 → 239.5, bf16
// 103.9 → 109.2 / 190.1 → 178.2; at B = 256 / 512 (1d3f2fb): fp8 327.4 → 312.6
// / 630.3 → 598.5, nvfp4 447.7 → 437.1 / 869.6 → 847.4, bf16 331.3 → 302.6 /
// 636.7 → 569.5. KDA (32 per row) at B = 64 / 128: fp8 81.0 → 76.2 / 149.8 →
// 132.6, nvfp4 99.5 → 95.5 / 184.4 → 165.8, bf16 81.7 → 78.0 / 148.8 → 133.6;
// at B = 256 / 512: fp8 286.3 → 241.9 / 542.1 → 437.4, nvfp4 350.4 → 297.9 /
// 671.3 → 558.7, bf16 283.1 → 248.1 / 525.6 → 448.1. Slower at 7.8 items per
// SM (GDN B = 64), faster from 15.5 (the threshold lies between). Below
// the H200's class GDN's bf16 / f16 copies of G >= 3 keep the blocks
// (r1p_blocks_below_h200 with the copy's element size; a KDA copy's is
// never 4): on an H100 (t50-call6, as above) HV64
// B = 128 / 256 / 512 203.3 / 362.3 / 678.7 against 201.2 / 343.3 / 631.7;
// HV32's (t50-call8, B = 256 207.5 against 237.2), GDN's fp8 / nvfp4 copies
// and every KDA copy are faster persistent there too (GDN HV64 fp8 B = 256
// 294.0 against 329.9, KDA bf16 254.5 against 270.6).
inline constexpr int64_t R1P_DUAL_MIN_ITEMS_PER_SM = 12;
inline bool r1p_dual_by_default(int64_t items, int sm_count, bool kda, int64_t copy_elem_size, int64_t G,
                                double peak_gbps) {
  if (!h200_class(peak_gbps) && r1p_blocks_below_h200(kda, copy_elem_size, G)) return false;
  return items >= R1P_DUAL_MIN_ITEMS_PER_SM * std::max(sm_count, 1);
}

// The persistent stream's stages: as many as fit (at most max_stages) on a
// device of the H200's class (core/device_class.h h200_class: 4.8 TB/s,
// where the defaults were measured, or no bandwidth reported) and for sweeps
// of an fp32 state, else at most R1P_INFLIGHT_BYTES of sweeps in flight per
// SM (at least two stages). On an H100 (3.35 TB/s), B = 256, L = 16, with the
// per-warp stage release of 9744c67 (experiments/2026-12-05_t41/README.md,
// t41-call4, µs, as many stages as fit against this rule's count): GDN HV64
// bf16 (32 KiB sweeps, 2 stages) 287.3 → 285.2, KDA bf16 (16 KiB, 4) 211.2
// → 205.2, GDN / KDA dual fp8 (16.5 KiB, 4) 310.4 → 304.3 / 245.8 → 242.8;
// more stages were slower on those rows. Not fp32 KDA (32 KiB sweeps of 16
// consumer warps): two stages 281.8 → 281.6 there, but 281.4 → 284.3 in
// t43-call1 (experiments/2026-12-05_t43/README.md), so fp32 states keep
// their five. 76 KiB gives each of the others its count and leaves nvfp4
// copies (9 KiB sweeps; t43-call1: even) their eight.
inline constexpr int64_t R1P_INFLIGHT_BYTES = int64_t(76) << 10;
inline int r1p_stage_cap(int64_t sweep_bytes, bool fp32_state, double peak_gbps, int max_stages) {
  if (fp32_state || h200_class(peak_gbps)) return max_stages;
  return int(std::clamp<int64_t>(R1P_INFLIGHT_BYTES / std::max<int64_t>(sweep_bytes, 1), 2, max_stages));
}

// KDA's persistent step (not on nvfp4 copies) takes at most three stages and
// four result buffers on every device. Against the rule above, B = 256,
// L = 16, µs: on the H200 (experiments/2026-12-06_t47/README.md, two rounds)
// bf16 196.9–197.2 → 192.0–192.3, dual fp8 235.0–235.3 → 231.3, fp32 218.7
// → 217.6–217.7, nvfp4 copies 281.0–281.6 → 281.5–281.6; on an H100
// (t41-call4) bf16 −2.7 %, dual fp8 −1.1 %, fp32 even; on an H100 as the
// default of one binary (t48, B = 128 / 256 / 512) bf16 122.7 / 210.9 / 395.3
// → 122.6 / 205.6 / 391.3, dual fp8 134.2 / 244.4 / 437.2 → 130.1 / 244.0 /
// 436.6, fp32 even. GDN within 0.3 % either way keeps the rule above.
inline constexpr int R1P_KDA_STAGES = 3;
inline constexpr int R1P_KDA_RESULT_BUFFERS = 4;

// Value heads per block of the dual fold (dual_fold*.cuh): few blocks for
// the rows that do not flush (they only read a cursor), yet many resident
// blocks per SM when every row flushes (the fold is a dependent chain per
// state row: it needs warps in flight): HV·rows / (32 per SM). The GDN
// tensor-core fold (`share_keys`) makes a key head's keys once per block
// for its value heads, so its blocks hold whole key heads (a multiple of G)
// or an aligned part of one (a divisor of G). KDA's tensor-core fold
// (`kda_mma`) takes 2 where the ratio is 1.5 to 2 (B ≈ 198–263 for 32
// heads at 132 SMs): on an H100 at B = 256, L = 16 (t60,
// bench/results/2026-12-07_h100_t60_kda_fold_hpb.jsonl) dual fp8 240.3–240.7
// → 233.3–233.9 µs, nvfp4 copies even; at B = 64 / 128 one head stays best
// and at B = 512 two and three (the rule) are even. t61 (an H100, same
// call, …_h100_t61_rows.jsonl / …_knobs.jsonl): the rule's 2 at B = 256 fp8
// 231.7 µs against 239.0–240.6 forced to 1.
inline int dual_fold_heads_per_block(int64_t HV, int64_t G, int64_t rows, int sm_count, bool share_keys,
                                     bool kda_mma = false) {
  const int64_t want = 32 * int64_t(std::max(sm_count, 1));
  int64_t h = std::clamp<int64_t>(HV * rows / want, 1, HV);
  if (kda_mma && HV >= 2 && h == 1 && 2 * HV * rows >= 3 * want) h = 2;
  if (share_keys && G > 1) {
    if (h >= G) {
      h = h / G * G;
    } else {
      while (G % h != 0) --h;
    }
  }
  return int(h);
}

struct ReplayTile {
  int nh;  // value heads per block (a divisor of G); > 1 only with vt = V
  int vt;  // rows of V per head per block
};

// GDN starts from a block per key head (all G = HV/H value heads: the
// products k_j·u of the history keys with the step's k and q are computed
// once per key head and shared by its value heads) and splits value heads,
// then V, until the grid has enough blocks or shared memory fits. KDA's
// products carry per-head gates, so its blocks never span heads.
template <class SmemFn>
ReplayTile replay_tile(DeltaFamily f, int64_t B, int64_t H, int64_t G, int64_t V, int lpr,
                       int sm_count, SmemFn smem_bytes, int64_t smem_cap = REPLAY_SMEM_CAP,
                       int blocks_per_sm = REPLAY_MIN_BLOCKS_PER_SM) {
  const int rpp = REPLAY_THREADS / lpr;
  ReplayTile t{f == DeltaFamily::gdn ? int(G) : 1, int(V)};
  const int64_t target = int64_t(blocks_per_sm) * std::max(sm_count, 1);
  auto blocks = [&](const ReplayTile& x) { return B * H * (G / x.nh) * ((V + x.vt - 1) / x.vt); };
  for (;;) {
    const bool few = blocks(t) < target, big = smem_bytes(t) > smem_cap;
    if (!few && !big) break;
    if (t.nh > 1) {
      int n = t.nh - 1;
      while (G % n) --n;
      t.nh = n;
    } else if (t.vt > rpp) {
      t.vt = std::max(rpp, ((t.vt + 1) / 2 + rpp - 1) / rpp * rpp);
    } else {
      break;
    }
  }
  return t;
}

}  // namespace replayssm::delta::cuda_impl
