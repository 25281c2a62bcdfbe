// Internal interface between the validating entry points (api.cpp) and the
// backends. Arguments reaching these functions are already validated: shapes,
// dtypes, devices, strides; on CPU backends also slots, cursors and counts.
#pragma once
#include "core/workspace.h"
#include "replayssm/mamba2.h"

namespace replayssm::mamba2 {

struct Dims {
  int64_t B = 0, T = 0, H = 0, P = 0, N = 0, G = 0;
  int64_t S = 0;  // slots in the pool
  int64_t L = 0;  // history capacity
  int64_t R = 0;  // physical ring length (>= L + T)
  int64_t tokens = 0;  // prefill: packed tokens (cu_seqlens[B]); B = prompts
};

#define RSSM_MAMBA2_BACKEND_API(...)                                                            \
  void decode(const Mamba2Step& step, const Tensor& state, const Dims& d __VA_ARGS__);          \
  void snapshot_decode(const Mamba2Step& step, const Tensor& state, const Tensor& state_indices, \
                       const Tensor& num_accepted, const Dims& d __VA_ARGS__);                  \
  void prefill(const Mamba2Prefill& p, const Mamba2Pool& pool, const Dims& d __VA_ARGS__);     \
  void replay_step(const Mamba2Step& step, const Mamba2Pool& pool, const Tensor& num_accepted,  \
                   bool commit_all, const Dims& d __VA_ARGS__);                                 \
  void commit(const Mamba2Pool& pool, const Tensor& slot, int64_t pad,                          \
              const Tensor& num_accepted, const Dims& d __VA_ARGS__);                           \
  void materialize(const Mamba2Pool& pool, const Tensor& slot, int64_t pad, const Tensor& out,  \
                   const Dims& d __VA_ARGS__);                                                  \
  void flush(const Mamba2Pool& pool, const Tensor& slot, int64_t pad, const Dims& d __VA_ARGS__);

namespace reference { RSSM_MAMBA2_BACKEND_API() }
namespace cpu {
RSSM_MAMBA2_BACKEND_API(, const Exec& exec)
// Workspace of `op` for dims d on `threads` threads (shared part + per-thread
// slabs); the backend carves exactly this layout from exec.workspace.
WorkspacePlan workspace_plan(SsmOp op, const Dims& d, int threads);
}
namespace cuda {
RSSM_MAMBA2_BACKEND_API(, const Exec& exec)
// Heads per block of the bulk-copy T = 1 / speculative replay kernel
// (replay1_kernel.cuh) as its launcher takes them on `sms` SMs: qf 0 for a
// state of state_size bytes, 1 / 2 for an fp8 / nvfp4 read copy with srb
// scale bytes per row; blocks_per_sm > 0: REPLAYSSM_M2_R1_BPS's target.
// For tests.
int replay1_tile_heads(int64_t B, int64_t G, int64_t hpg, int64_t P, int64_t L, int64_t T, int act_size,
                       int state_size, int qf, int srb, int sms, int blocks_per_sm = 0);
}

#undef RSSM_MAMBA2_BACKEND_API

}  // namespace replayssm::mamba2
