// Gated DeltaNet (GDN) and Kimi Delta Attention (KDA) decode: baseline,
// snapshot speculative baseline, prefill, replay step / commit, slot
// operations. Math: design/replay.md §1-3 and src/delta/README.md.
//
// Per value head h (key head h / (HV/H)), state S: V×K:
//   GDN: S_t = α_t S_{t-1} + d_t k_tᵀ,        d_t = β_t (v_t − α_t S_{t-1} k_t), α_t = exp(g_t)
//   KDA: S_t = S_{t-1} Diag(α_t) + d_t k_tᵀ,  d_t = β_t (v_t − S_{t-1}(α_t ⊙ k_t)), α_t ∈ R^K
//   o_t = S_t q_t
// Gating (when raw): g = −exp(A_log)·softplus(a + dt_bias), β = sigmoid(b),
// q and k L2-normalised (ε = 1e-6, x / sqrt(Σx² + ε)), q scaled by q_scale.
#pragma once
#include "replayssm/quant.h"
#include "replayssm/types.h"

namespace replayssm {

enum class DeltaFamily : int8_t { gdn, kda };

struct DeltaGating {
  bool raw_gate = true;   // g holds a: g = −exp(A_log)·softplus(a + dt_bias); else g is the log-decay
  bool raw_beta = true;   // beta holds b: β = sigmoid(b); else β
  bool l2norm_qk = true;  // L2-normalise q and k in the kernel
  float q_scale = 0.f;    // 0 = K^-1/2
};

struct DeltaStep {
  Tensor q;        // [B, T, H, K]   f32 | f16 | bf16 (activation dtype)
  Tensor k;        // [B, T, H, K]   activation dtype
  Tensor v;        // [B, T, HV, V]  activation dtype
  Tensor g;        // GDN [B, T, HV], KDA [B, T, HV, K]; f32 | activation dtype
  Tensor beta;     // [B, T, HV]     f32 | activation dtype
  Tensor A_log;    // [HV] f32 (required when raw_gate)
  Tensor dt_bias;  // optional, raw_gate only: GDN [HV], KDA [HV, K]; f32
  DeltaGating gating;
  Tensor slot;     // [B] i32 | i64
  int64_t pad_slot_id = -1;
  Tensor o;        // out [B, T, HV, V] activation dtype
};

struct DeltaPrefill {
  Tensor q, k;        // [tokens, H, K]
  Tensor v;           // [tokens, HV, V]
  Tensor g;           // GDN [tokens, HV], KDA [tokens, HV, K]
  Tensor beta;        // [tokens, HV]
  Tensor A_log, dt_bias;
  DeltaGating gating;
  Tensor cu_seqlens;  // [B + 1]
  Tensor slot;        // [B]
  int64_t pad_slot_id = -1;
  Tensor initial;     // optional [B] i32 (0/1): start from the row's current state
  Tensor o;           // out [tokens, HV, V]
};

// Replay pool; a baseline pool has only `state`.
struct DeltaPool {
  Tensor state;     // [S, HV, V, K] checkpoint, f32 | f16 | bf16
  Tensor ring_d;    // [S, R, HV, V] d_j: f32 by default; bf16/f16 as an explicit option
  Tensor ring_k;    // [S, R, H, K]  k_j as it arrived (dtype of k)
  Tensor ring_ks;   // [S, R, H]     f32 scale applied to ring_k (1/‖k‖ with l2norm, else 1)
  Tensor ring_g;    // GDN [S, R, HV], KDA [S, R, HV, K]: log-decay g_j, f32
  Tensor cursor;    // [S, 3] i32 {start, count, pending}
  int64_t L = 16;   // history capacity; R >= L + T for every step
  // Dual precision (design §4, docs/dual_precision.md); absent = single
  // precision. read_copy: a packed read copy of the checkpoint, one
  // self-contained tile [V, K] per (slot, value head) with its block scales
  // inside the tile (quant_layout(read_format, V, K)). Steps that do not
  // flush read only the copy and store d̂_j (computed against it, used for
  // outputs only) in ring_d; a flush recomputes every d_j against the
  // high-precision checkpoint from the records' k_j, g_j, v_j, β_j, so the
  // checkpoint never depends on the copy. Dual pools need all three tensors
  // and run on the reference, cpu and cuda backends (cuda: bf16 / f16 copies
  // need K % 8 == 0).
  Tensor read_copy;  // [S, HV, tile_bytes] u8, tile rows 16-byte aligned
  ReadFormat read_format = ReadFormat::bf16;
  Tensor ring_v;     // [S, R, HV, V] v_j as it arrived (dtype of v)
  Tensor ring_beta;  // [S, R, HV]    β_j (after sigmoid when raw), f32
};

void delta_decode(DeltaFamily f, const DeltaStep& step, const Tensor& state, const Exec& exec);
void delta_snapshot_decode(DeltaFamily f, const DeltaStep& step, const Tensor& state,
                           const Tensor& state_indices, const Tensor& num_accepted,
                           const Exec& exec);
void delta_prefill(DeltaFamily f, const DeltaPrefill& prefill, const DeltaPool& pool,
                   const Exec& exec);
void delta_replay_step(DeltaFamily f, const DeltaStep& step, const DeltaPool& pool,
                       const Tensor& num_accepted, bool commit_all, const Exec& exec);
void delta_commit(DeltaFamily f, const DeltaPool& pool, const Tensor& slot,
                  int64_t pad_slot_id, const Tensor& num_accepted, const Exec& exec);
void delta_materialize(DeltaFamily f, const DeltaPool& pool, const Tensor& slot,
                       int64_t pad_slot_id, const Tensor& out, const Exec& exec);
void delta_flush(DeltaFamily f, const DeltaPool& pool, const Tensor& slot, int64_t pad_slot_id,
                 const Exec& exec);
void delta_copy_slot(DeltaFamily f, const DeltaPool& pool, const Tensor& src, const Tensor& dst,
                     int64_t pad_slot_id, const Exec& exec);
void delta_reset_slot(DeltaFamily f, const DeltaPool& pool, const Tensor& slot,
                      int64_t pad_slot_id, const Exec& exec);

struct DeltaShape {
  int64_t H, HV, K, V;
};
int64_t delta_ring_length(int64_t L, int64_t T_max);  // R = L + T_max
int64_t delta_replay_bytes_per_row(DeltaFamily f, const DeltaShape& s, DType state, DType act,
                                   DType d_dtype, int64_t L, int64_t T_max);
int64_t delta_snapshot_bytes_per_row(const DeltaShape& s, DType state, int64_t T_max);

// Workspace (Exec::workspace, types.h): bytes `op` needs on exec's backend
// and thread count (cpu: num_threads, 0 = hardware concurrency) for
//   B  rows (decode, snapshot_decode, replay_step), prompts (prefill) or
//      slot-vector length (commit, materialize, flush, copy_slot, reset_slot);
//   T  tokens per row (decode, snapshot_decode, replay_step; ignored otherwise);
//   L  the pool's history capacity (replay_step, prefill, materialize, flush;
//      0 for a baseline pool; ignored by decode and snapshot_decode).
// On the cpu backend the size grows with B, T and L, so one workspace sized
// for the largest call serves every smaller one. The reference backend (the
// oracle) needs none (0) and ignores Exec::workspace (it keeps its own
// allocations). On the cpu backend a call given a workspace uses only it (no
// allocation while computing); without one (data == nullptr) it uses an
// internal per-thread buffer. On the cuda backend only replay_step at T = 1
// on the persistent path needs one (taken for bf16 / fp16 states of at least
// 3 MiB per SM and, on a dual pool, for the read copy of any format from 12
// rows × key heads per SM, with L <= 32, docs/perf_notes_delta.md, "the
// persistent step in two kernels" to "dual T = 1 steps on the persistent step");
// it grows with B and is 0 for other calls): device memory, 64-byte aligned, for the
// step's per-item scratch. Without one the library keeps a device buffer per
// device and stream that only grows (older ones stay allocated for graphs
// that captured them) and cannot grow while the stream is capturing: a
// captured step that finds none big enough takes the block kernel instead
// (the same results, a slower step). Pass a workspace when capturing a step
// of a size not run before on that stream.
size_t delta_workspace_bytes(DeltaFamily f, SsmOp op, const DeltaShape& s, int64_t B, int64_t T,
                             int64_t L, const Exec& exec);

// Named entry points (same semantics as delta_* with the family fixed).
inline void gdn_decode(const DeltaStep& s, const Tensor& st, const Exec& e) { delta_decode(DeltaFamily::gdn, s, st, e); }
inline void kda_decode(const DeltaStep& s, const Tensor& st, const Exec& e) { delta_decode(DeltaFamily::kda, s, st, e); }
inline void gdn_replay_step(const DeltaStep& s, const DeltaPool& p, const Tensor& a, bool c, const Exec& e) { delta_replay_step(DeltaFamily::gdn, s, p, a, c, e); }
inline void kda_replay_step(const DeltaStep& s, const DeltaPool& p, const Tensor& a, bool c, const Exec& e) { delta_replay_step(DeltaFamily::kda, s, p, a, c, e); }

}  // namespace replayssm
