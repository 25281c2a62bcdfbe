// Mamba-2 decode: baseline, snapshot speculative baseline, prefill, replay
// step / commit, and slot operations. Math and layouts: design/replay.md §1-3
// and src/mamba2/README.md.
//
// Per head h (group g = h / (H/G)):
//   δ_t = softplus(dt_t + dt_bias) (or dt_t when !dt_softplus), a_t = exp(δ_t A)
//   S_t = a_t S_{t-1} + δ_t x_t B_tᵀ          S: P×N
//   y_t = S_t C_t + D x_t,  y_t ← y_t · silu(z_t) when z is given
#pragma once
#include "replayssm/quant.h"
#include "replayssm/types.h"

namespace replayssm {

// Per-token inputs of one decode / replay step: B rows, T tokens per row.
struct Mamba2Step {
  Tensor x;        // [B, T, H, P]  f32 | f16 | bf16 (the activation dtype)
  Tensor dt;       // [B, T, H]     f32 | activation dtype; raw dt when dt_softplus
  Tensor Bm;       // [B, T, G, N]  activation dtype ("B" of the model)
  Tensor Cm;       // [B, T, G, N]  activation dtype ("C" of the model)
  Tensor z;        // optional [B, T, H, P] activation dtype
  Tensor A;        // [H] f32, A = -exp(A_log)
  Tensor dt_bias;  // optional [H] f32
  Tensor D;        // optional [H] f32
  bool dt_softplus = true;
  Tensor slot;     // [B] i32 | i64: pool slot of each row
  int64_t pad_slot_id = -1;  // rows with this slot are skipped; output zero
  Tensor y;        // out [B, T, H, P] activation dtype
};

// Prompt inputs (varlen): `tokens` = cu_seqlens[B] tokens packed row after row.
struct Mamba2Prefill {
  Tensor x;           // [tokens, H, P]
  Tensor dt;          // [tokens, H]
  Tensor Bm;          // [tokens, G, N]
  Tensor Cm;          // [tokens, G, N]
  Tensor z;           // optional [tokens, H, P]
  Tensor A;           // [H] f32
  Tensor dt_bias;     // optional [H] f32
  Tensor D;           // optional [H] f32
  bool dt_softplus = true;
  Tensor cu_seqlens;  // [B + 1] i32 | i64, cu_seqlens[0] = 0, non-decreasing
  Tensor slot;        // [B] i32 | i64
  int64_t pad_slot_id = -1;
  Tensor initial;     // optional [B] i32 (0/1): start from the row's current
                      // state (checkpoint + committed records); else zero
  Tensor y;           // out [tokens, H, P]
};

// A pool of replay states. Every tensor's leading dimension is the slot; views
// into caller memory with arbitrary strides are accepted (layer-major pools).
// A baseline pool is a Mamba2Pool with only `state` set.
struct Mamba2Pool {
  Tensor state;    // [S, H, P, N]  checkpoint, f32 | f16 | bf16
  Tensor ring_x;   // [S, R, H, P]  records of x, dtype of x
  Tensor ring_dt;  // [S, R, H]     δ (after bias and softplus), f32
  Tensor ring_B;   // [S, R, G, N]  records of B, dtype of B
  Tensor cursor;   // [S, 3] i32 {start, count, pending} (src/core/ring.h)
  int64_t L = 16;  // history capacity; R >= L + T for every step
  Tensor A;        // [H] f32, the layer's A. Records carry δ only, so folding
                   // them (flush, materialize) needs the decay exp(δ·A):
                   // required by mamba2_flush and mamba2_materialize on a
                   // replay pool. Steps and prefill use their own A.
  // Dual precision (design §4, docs/dual_precision.md); absent = single
  // precision. A packed read copy of the checkpoint, one self-contained tile
  // [P, N] per (slot, head) with its block scales inside the tile, laid out
  // by quant_layout(read_format, P, N). Written at every flush, by prefill,
  // flush and reset, copied by copy_slot; steps that do not flush read only
  // it. Dual pools run on the reference, cpu and cuda backends.
  Tensor read_copy;  // [S, H, tile_bytes] u8, tile rows 16-byte aligned
  ReadFormat read_format = ReadFormat::bf16;
};

// Standard decode (the baseline): read state, apply T tokens, write it back.
void mamba2_decode(const Mamba2Step& step, const Tensor& state, const Exec& exec);

// Snapshot speculative baseline: state_indices [B, T] i32|i64; row b starts
// from slot state_indices[b, num_accepted[b] - 1] (num_accepted [B] i32 from
// the previous step; absent = column 0) and writes the state after token t
// into slot state_indices[b, t]. step.slot is ignored; a row whose
// state_indices[b, 0] equals pad_slot_id is a pad row.
void mamba2_snapshot_decode(const Mamba2Step& step, const Tensor& state,
                            const Tensor& state_indices, const Tensor& num_accepted,
                            const Exec& exec);

// Prefill: runs each prompt from zero (or the row's current state), writes
// the final state as the checkpoint and leaves an empty ring (count = 0,
// pending = 0). Works on baseline pools (ring tensors absent) too.
void mamba2_prefill(const Mamba2Prefill& prefill, const Mamba2Pool& pool, const Exec& exec);

// Replay step: T >= 1 tokens per row against checkpoint + ring. When
// num_accepted ([B] i32) is given, it first commits the previous step's
// pending records (1 <= accepted <= pending). A row with pending records and
// no num_accepted is an error. Flushes when count + T > L (design §2), then
// appends T records and writes all T outputs. commit_all commits the T new
// records at the end (plain decode: T = 1, commit_all = true).
void mamba2_replay_step(const Mamba2Step& step, const Mamba2Pool& pool,
                        const Tensor& num_accepted, bool commit_all, const Exec& exec);

// Commit accepted counts ([n] i32) for rows addressed by slot ([n]).
void mamba2_commit(const Mamba2Pool& pool, const Tensor& slot, int64_t pad_slot_id,
                   const Tensor& num_accepted, const Exec& exec);

// Slot operations. slot / src / dst: [n] i32 | i64; pad ids are skipped.
// materialize: out [n, H, P, N] (any float dtype) = checkpoint ⊕ committed records.
void mamba2_materialize(const Mamba2Pool& pool, const Tensor& slot, int64_t pad_slot_id,
                        const Tensor& out, const Exec& exec);
// flush: fold committed records into the checkpoint (rows must have no pending records).
void mamba2_flush(const Mamba2Pool& pool, const Tensor& slot, int64_t pad_slot_id,
                  const Exec& exec);
void mamba2_copy_slot(const Mamba2Pool& pool, const Tensor& src, const Tensor& dst,
                      int64_t pad_slot_id, const Exec& exec);
// reset: zero checkpoint, empty ring, start = 0.
void mamba2_reset_slot(const Mamba2Pool& pool, const Tensor& slot, int64_t pad_slot_id,
                       const Exec& exec);

// Pool sizing (bytes per slot).
struct Mamba2Shape {
  int64_t H, P, N, G;
};
int64_t mamba2_ring_length(int64_t L, int64_t T_max);  // R = L + T_max
int64_t mamba2_replay_bytes_per_row(const Mamba2Shape& s, DType state, DType act, int64_t L,
                                    int64_t T_max);
int64_t mamba2_snapshot_bytes_per_row(const Mamba2Shape& s, DType state, int64_t T_max);

// Workspace (Exec::workspace, types.h): bytes `op` needs on exec's backend
// and thread count (cpu: num_threads, 0 = hardware concurrency) for
//   B  rows (decode, snapshot_decode, replay_step), prompts (prefill) or
//      slot-vector length (commit, materialize, flush, copy_slot, reset_slot);
//   T  tokens per row (decode, snapshot_decode, replay_step; ignored otherwise);
//   L  the pool's history capacity (replay_step, prefill, materialize, flush;
//      0 for a baseline pool; ignored by decode and snapshot_decode).
// The size grows with B, T and L, so one workspace sized for the largest call
// serves every smaller one. The reference backend (the oracle) and the cuda
// backend need none (0) and ignore Exec::workspace; the reference keeps its
// own allocations. On the cpu backend a call given a workspace uses only it
// (no allocation while computing); without one (data == nullptr) it uses an
// internal per-thread buffer.
size_t mamba2_workspace_bytes(SsmOp op, const Mamba2Shape& s, int64_t B, int64_t T, int64_t L,
                              const Exec& exec);

}  // namespace replayssm
