// Causal depthwise conv1d update that precedes every SSM layer, with
// speculative rollback by the accepted count (design §3).
//
// out[t, c] = act( bias[c] + Σ_{i<W} weight[c, i] · u[t − (W−1) + i, c] )
// where u is the row's input stream (history, then this step's tokens) and
// act = SiLU when silu, else identity.
//
// conv_state [S, W − 1 + T_max, dim] holds, after a step of T tokens, the
// W − 1 committed history inputs in rows [0, W − 1) followed by the step's T
// inputs in rows [W − 1, W − 1 + T); conv_pending [S] i32 holds T. The next
// step, given accepted count a (1 <= a <= T), takes rows [a, a + W − 1) as its
// history: rejected drafts leave no trace. Prefill and reset set pending = 0.
#pragma once
#include "replayssm/types.h"

namespace replayssm {

struct Conv1dStep {
  Tensor x;        // [B, T, dim] f32 | f16 | bf16
  Tensor weight;   // [dim, W] f32 | activation dtype
  Tensor bias;     // optional [dim]
  bool silu = true;
  Tensor slot;     // [B] i32 | i64
  int64_t pad_slot_id = -1;
  Tensor out;      // out [B, T, dim] activation dtype
};

struct Conv1dPrefill {
  Tensor x;           // [tokens, dim]
  Tensor weight;      // [dim, W]
  Tensor bias;        // optional [dim]
  bool silu = true;
  Tensor cu_seqlens;  // [B + 1]
  Tensor slot;        // [B]
  int64_t pad_slot_id = -1;
  Tensor initial;     // optional [B] i32 (0/1): continue from the row's committed history
  Tensor out;         // out [tokens, dim]
};

// num_accepted [B] i32: accepted count of each row's previous step, in
// [1, pending] (absent = all of it). As for the SSM pools, a row with nothing
// pending (fresh from prefill or reset) must not be given one: that is an
// error (cuda: the row is skipped and STATUS_BAD_ACCEPTED is reported). A
// batch that mixes fresh rows and rows with pending drafts first commits the
// pending rows (conv1d_commit, fresh rows given pad_slot_id there), then runs
// one conv1d_update of every row without num_accepted.
void conv1d_update(const Conv1dStep& step, const Tensor& conv_state, const Tensor& conv_pending,
                   const Tensor& num_accepted, const Exec& exec);

// Commit: for every row b whose slot s = slot[b] ([B] i32 | i64) is not
// pad_slot_id, with a = num_accepted[b] ([B] i32, 1 <= a <= pending[s]):
// conv_state[s, 0 : W − 1] ← conv_state[s, a : a + W − 1], pending[s] ← 0.
// Rows past W − 1 are not written. W is the kernel width (>= 2, R >= W).
// Afterwards the slot is fresh: an update without num_accepted gives the
// outputs and state bytes of an update with num_accepted given a. Pad rows
// touch nothing. cuda: a bad slot, a pending count outside [1, T_max] or an
// accepted count outside [1, pending] skips the row (no writes) and reports
// STATUS_BAD_SLOT / STATUS_BAD_ACCEPTED; graph safe, no host sync.
void conv1d_commit(const Tensor& conv_state, const Tensor& conv_pending, const Tensor& slot,
                   int64_t pad_slot_id, const Tensor& num_accepted, int64_t W, const Exec& exec);
void conv1d_prefill(const Conv1dPrefill& prefill, const Tensor& conv_state,
                    const Tensor& conv_pending, const Exec& exec);
int64_t conv1d_state_rows(int64_t W, int64_t T_max);  // W − 1 + T_max

// Workspace (Exec::workspace, types.h): bytes `op` needs on exec's backend and
// thread count for B rows (update, commit) or prompts (prefill), T tokens per
// row (update; ignored otherwise), dim channels and kernel width W. It grows
// with B, T, dim and W. The reference and cuda backends need none (0) and
// ignore Exec::workspace (the reference keeps its own allocations); the cpu
// backend uses only the given workspace, or an internal per-thread buffer
// when data == nullptr. Commit moves state rows in place and needs none on
// any backend (0; a given cpu workspace is still checked for alignment).
enum class Conv1dOp : int8_t { update, prefill, commit };
size_t conv1d_workspace_bytes(Conv1dOp op, int64_t B, int64_t T, int64_t dim, int64_t W,
                              const Exec& exec);

}  // namespace replayssm
