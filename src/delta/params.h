// Kernel parameter blocks of the delta CUDA backend (plain C++, passed by
// value to the kernels). Every view is (pointer, dtype, int64 element
// strides); the innermost dimension has stride 1.
#pragma once
#include <cstdint>

#include "delta/layouts.h"
#include "replayssm/delta.h"
#include "quant/tile_geom.h"
#include "replayssm/quant.h"

namespace replayssm::delta::cuda_impl {

// Per-token input: element (b, t, h, i) lives at b*sb + t*st + h*sh + i.
// Prefill views its packed [tokens, ...] tensors with sb = 0.
struct Act {
  const void* p = nullptr;
  DType dt = DType::f32;
  int64_t sb = 0, st = 0, sh = 0;
};
struct Out {
  void* p = nullptr;
  DType dt = DType::f32;
  int64_t sb = 0, st = 0, sh = 0;
};

// i32 | i64 index vector or matrix: element (i, j) at i*s0 + j*s1.
struct Index {
  const void* p = nullptr;
  DType dt = DType::i32;
  int64_t s0 = 0, s1 = 0;
};

// Token inputs shared by every per-token kernel.
struct TokenArgs {
  Act q, k, v, g, beta;
  Out o;
  const float* A_log = nullptr;  // [HV], raw_gate only
  int64_t sA = 0;
  const float* dt_bias = nullptr;  // GDN [HV], KDA [HV, K]; null when absent
  int64_t sdb = 0;
  bool raw_gate = true, raw_beta = true, l2norm = true;
  float q_scale = 1.f;  // resolved (K^-1/2 when the caller passed 0)
  int H = 0, HV = 0, G = 1, K = 0, V = 0;
};

// State pool [S, HV, V, K] (K contiguous, 16-byte aligned rows).
struct StateView {
  void* p = nullptr;
  int64_t s0 = 0, s1 = 0, s2 = 0;
};

// Replay rings and cursors (d == nullptr: a baseline pool without rings).
struct Rings {
  void* d = nullptr;  // [S, R, HV, V] f32 | f16 | bf16
  DType d_dt = DType::f32;
  int64_t d0 = 0, d1 = 0, d2 = 0;
  void* k = nullptr;  // [S, R, H, K] dtype of k
  DType k_dt = DType::f32;
  int64_t k0 = 0, k1 = 0, k2 = 0;
  float* ks = nullptr;  // [S, R, H]
  int64_t ks0 = 0, ks1 = 0, ks2 = 0;
  float* g = nullptr;  // GDN [S, R, HV], KDA [S, R, HV, K]
  int64_t g0 = 0, g1 = 0, g2 = 0;
  int32_t* cur = nullptr;  // [S, 3] {start, count, pending}
  int64_t c0 = 0, c1 = 0;
  int R = 0, L = 0;
};

// A per-record ring of a dual pool: ring_v [S, R, HV, V] (dtype of v) or
// ring_beta [S, R, HV] (f32); element (s, pos, h, i) at s*s0 + pos*s1 + h*s2 + i.
struct RecRing {
  void* p = nullptr;
  DType dt = DType::f32;
  int64_t s0 = 0, s1 = 0, s2 = 0;
};

// Read-copy formats a replay kernel decodes in registers (QF_NONE: the state
// view holds plain f32 | f16 | bf16 rows, which covers bf16 / f16 copies).
enum QuantRead : int { QF_NONE = 0, QF_FP8 = 1, QF_NVFP4 = 2 };
// Packed read copy as a replay state: the StateView points at the copy with
// s0, s1 in bytes (slot, head tiles) and s2 = code bytes per row.
struct QuantGeom {
  int64_t scale_offset = 0, scale_row_bytes = 0, tensor_scale_offset = 0;
};

// Baseline recurrence: decode (mode 0), snapshot decode (1), prefill (2).
enum RecMode : int { REC_DECODE = 0, REC_SNAPSHOT = 1, REC_PREFILL = 2 };
struct RecArgs {
  TokenArgs in;
  StateView st;
  Rings rings;       // prefill from the current state of a replay pool
  int mode = REC_DECODE;
  Index slot;        // [B]
  int64_t pad = -1, S = 0;
  Index sidx;        // snapshot [B, T]
  Index acc;         // snapshot / eager step num_accepted [B] (p null: 1 / none)
  Index cu;          // prefill cu_seqlens [B + 1]
  Index init;        // prefill initial [B] (p null: 0)
  int T = 0;         // decode / snapshot tokens per row
  int lpr = 8;       // lanes per state row
  int tc = 8;        // tokens per shared-memory chunk
  int nh = 1;        // T = 1 decode kernel: value heads per block
  int vt = 0;        // T = 1 decode kernel: V rows per block per head
  int vtiles = 1;    // T = 1 decode kernel: ceil(V / vt)
  int kpb = 1;       // T = 1 decode kernel: key heads per block (> 1 only when G = 1: one per value head)
  // T = 1 decode kernel, TAIL (big > 0): the first `big` blocks of a 1-D grid
  // take the tiles above of rows [0, tb0), the rest tiles (tnh, tvt, tkpb)
  // of rows [tb0, B) (decode1.cuh).
  unsigned big = 0;
  int tb0 = 0, tnh = 1, tvt = 0, tvtiles = 1, tkpb = 1;
  int32_t* status = nullptr;
  // Eager replay step (decode1.cuh, EAGER): per-row arrival counters [B]
  // (zero between launches); the row's last block resets its cursor. Null:
  // the cursor kernel does it after the step.
  unsigned* ctr = nullptr;
};

// Replay step (and its fused flush).
struct ReplayArgs {
  TokenArgs in;
  StateView st;
  Rings rings;
  Index slot;
  int64_t pad = -1, S = 0;
  Index acc;          // num_accepted [B] (p null: none)
  bool commit_all = false;
  int T = 0;
  int lpr = 8;
  int nh = 1;         // value heads per block (all of them when > 1: vt = V)
  int vt = 0;         // V rows per block per head
  int vtiles = 1;     // ceil(V / vt)
  bool late_first = false;  // T = 1 GDN bulk stream: first sweeps after the record loads (replay1.cuh)
  // Each replay block prefetches into L2 the records (and token inputs) of
  // the block rec_pf after its own (T = 1: its bulk stream's copies then take
  // evict_first; T > 1: KDA only); 0: none (kernel_common.cuh,
  // prefetch_block_ahead; heuristics.h)
  int rec_pf = 0;
  // Records readable 4 elements at a time (pointer and outer strides aligned
  // to 4 elements; T = 1 kernel): ring_d (and V % 4 == 0), ring_k, ring_g (KDA).
  bool d_vec = false, k_vec = false, g_vec = false;
  // Dual pools (design §4): the state view is the read copy. A row whose plan
  // flushes was folded and repacked by delta_dual_fold_kernel before this
  // launch, so it reads the fresh copy with an empty history and the kernel
  // never writes the state. v_j and β_j are appended to ring_v / ring_beta.
  bool dual = false;
  RecRing ring_v, ring_beta;
  QuantGeom qg;  // QF_FP8 / QF_NVFP4 kernels
  int32_t* status = nullptr;
  int ld = 0;  // T = 1 bulk streams: d records per block in shared memory (heuristics.h, replay1_ld)
  // Persistent T = 1 step (replay1p.cuh): the stream's stages and result
  // buffers, the batch's rows, items per claim, sweeps per item; device
  // scratch (counters, headers, payloads of scr_ps floats).
  int nst = 0, nb = 0, rows = 0, chunk = 1, nsw = 0;
  void* scr = nullptr;
  int64_t scr_ps = 0;
  bool lanes_copy = false;  // persistent T = 1 kernel: its producer warp copies by 16-byte cp.async (else bulk copies)
  // Timeline stamps: per block (replay1.cuh, R1_STAMP; builds with
  // REPLAYSSM_R1_TIMING) or per item (replay1p.cuh, R1P_TIMING=file at run time).
  unsigned long long* timing = nullptr;
  // The block's shared-memory layout, filled by the launch wrapper
  // (kernels.cuh, delta_replay1p.cu; layouts.h): replay.cuh's (rl) for KDA,
  // the persistent step's preparation (p1 per warp, p1res its result buffer)
  ReplayLayout rl{};
  P1Layout p1{};
  R1PRes p1res{};
  // KDA tensor-core T > 1 kernel (replay.cuh, REC16): the old records' key,
  // d and gate rows are 16-byte runs (pointers and outer strides aligned,
  // K = V = 128, one value head per block) that fit the operand region, so
  // they are requested at once by cp.async (delta_launch.cu rec16_fits).
  // Last, so that the other kernels keep their parameter offsets.
  bool rec16 = false;
  // fp32 tensor-core T > 1 kernel (replay.cuh): the second half of each
  // warp's tile is prefetched into L2 when its first is requested (the first
  // tile's before the preparation); KDA's instances only, off by default
  // (slower, perf_notes_delta.md v58; REPLAYSSM_SPEC_HALF_PF=1 sets it).
  bool half_pf = false;
  // KDA's fp32 tensor-core T > 1 kernel at three blocks per SM (replay.cuh
  // A3; delta_launch.cu spec_plan).
  bool a3 = false;
};

// Fold of the committed records: materialize (out) or flush (in place).
struct FoldArgs {
  StateView st;
  Rings rings;
  Index slot;
  int64_t pad = -1, S = 0;
  void* out = nullptr;  // materialize [n, HV, V, K]; null: flush into the state
  DType out_dt = DType::f32;
  int64_t o0 = 0, o1 = 0, o2 = 0;
  int H = 0, HV = 0, G = 1, K = 0, V = 0;
  int lpr = 8;
  int32_t* status = nullptr;
};

// Dual pools: the high-precision fold (every d_j recomputed against the
// running checkpoint from k_j, g_j, v_j, β_j) and the repack of the copy, one
// block per (value head, row). Ops:
//   DUAL_STEP         rows whose step plan flushes (after committing `acc`):
//                     fold in place, repack; cursors untouched (the cursor
//                     kernel moves them after the step kernel)
//   DUAL_FLUSH        fold in place (committed rows only), repack
//   DUAL_INIT         prefill rows with initial != 0: fold in place (no pack)
//   DUAL_MATERIALIZE  fold into `out` (pad rows: zeros)
//   DUAL_PACK         repack the copy from the checkpoint
enum DualOp : int { DUAL_STEP = 0, DUAL_FLUSH = 1, DUAL_INIT = 2, DUAL_MATERIALIZE = 3, DUAL_PACK = 4 };
struct CopyView {
  uint8_t* p = nullptr;  // [S, HV, tile_bytes]
  int64_t s0 = 0, s1 = 0;  // bytes
};
struct DualArgs {
  StateView st;
  Rings rings;  // absent (cur null) for a pool without rings
  RecRing ring_v, ring_beta;
  CopyView copy;
  quant::TileGeom geom;  // layout of the copy's tiles [V, K]
  Index slot;
  int64_t pad = -1, S = 0;
  Index acc;   // DUAL_STEP num_accepted (p null: none)
  Index init;  // DUAL_INIT initial (p null: none)
  int op = DUAL_STEP;
  int T = 0;
  void* out = nullptr;  // DUAL_MATERIALIZE [n, HV, V, K]
  DType out_dt = DType::f32;
  int64_t o0 = 0, o1 = 0, o2 = 0;
  int H = 0, HV = 0, G = 1, K = 0, V = 0;
  int lpr = 8;
  int hpb = 1;  // value heads per block
  // per-block timelines (FOLD_TIMING=file; dual_fold_stamp), else null
  unsigned long long* timing = nullptr;
  // ring_k / ring_v / ring_g (KDA) readable in aligned 4-element groups
  // (the tensor-core fold's vectorised record loads)
  bool k_vec = false, v_vec = false, g_vec = false;
  int32_t* status = nullptr;
};

// Cursor updates after the data kernels of one call (a separate launch, so
// no block of the data kernel can see a half-updated cursor).
enum CursorOp : int { CUR_STEP = 0, CUR_COMMIT = 1, CUR_FLUSH = 2, CUR_PREFILL = 3, CUR_EAGER = 4 };
struct CursorArgs {
  Rings rings;
  Index slot;
  int64_t pad = -1, S = 0;
  Index acc;
  int op = CUR_STEP;
  bool commit_all = false;
  int T = 0;
  int n = 0;  // rows
  int32_t* status = nullptr;
};

}  // namespace replayssm::delta::cuda_impl
