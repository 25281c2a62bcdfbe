// Internal interface between the validating entry points (api.cpp) and the
// backends. Arguments reaching these functions are already validated: shapes,
// dtypes, devices, strides; on CPU backends also slots, cursors and counts.
#pragma once
#include "core/workspace.h"
#include "replayssm/delta.h"

namespace replayssm::delta {

struct Dims {
  DeltaFamily family = DeltaFamily::gdn;
  int64_t B = 0, T = 0, H = 0, HV = 0, K = 0, V = 0;
  int64_t S = 0;  // slots in the pool
  int64_t L = 0;  // history capacity
  int64_t R = 0;  // physical ring length (>= L + T)
  int64_t tokens = 0;  // prefill: packed tokens (cu_seqlens[B]); B = prompts
};

#define RSSM_DELTA_BACKEND_API(...)                                                            \
  void decode(const DeltaStep& step, const Tensor& state, const Dims& d __VA_ARGS__);          \
  void snapshot_decode(const DeltaStep& step, const Tensor& state, const Tensor& state_indices, \
                       const Tensor& num_accepted, const Dims& d __VA_ARGS__);                  \
  void prefill(const DeltaPrefill& p, const DeltaPool& pool, const Dims& d __VA_ARGS__);     \
  void replay_step(const DeltaStep& step, const DeltaPool& pool, const Tensor& num_accepted,  \
                   bool commit_all, const Dims& d __VA_ARGS__);                                 \
  void commit(const DeltaPool& pool, const Tensor& slot, int64_t pad,                          \
              const Tensor& num_accepted, const Dims& d __VA_ARGS__);                           \
  void materialize(const DeltaPool& pool, const Tensor& slot, int64_t pad, const Tensor& out,  \
                   const Dims& d __VA_ARGS__);                                                  \
  void flush(const DeltaPool& pool, const Tensor& slot, int64_t pad, const Dims& d __VA_ARGS__);

namespace reference { RSSM_DELTA_BACKEND_API() }
namespace cpu {
RSSM_DELTA_BACKEND_API(, const Exec& exec)
// Workspace of `op` for dims d on `threads` threads (shared part + per-thread
// slabs); the backend carves exactly this layout from exec.workspace.
WorkspacePlan workspace_plan(SsmOp op, const Dims& d, int threads);
}
namespace cuda {
RSSM_DELTA_BACKEND_API(, const Exec& exec)
// The T = 1 replay launch that replay_step takes for a contiguous pool of
// dtype `state` on a GPU with `sms` SMs (delta_launch.cu, replay1_plan):
// value heads and rows per block, d records in shared memory, bulk stream,
// shared memory bytes. For tests.
struct Replay1Choice {
  int nh = 0, vt = 0, ld = 0;
  bool bulk = false, qbulk = false;  // qbulk: the packed-copy bulk stream
  int64_t smem = 0;
};
// copy: a dual pool's read copy of that layout (the T = 1 step
// on the copy); null: the state itself.
Replay1Choice replay1_choice(const Dims& d, DType state, int sms, const QuantLayout* copy = nullptr);
// The T > 1 (speculative) replay launch for a contiguous pool (d.T > 1;
// delta_launch.cu, spec_plan): value heads and rows per block, the
// tensor-core stream, shared memory bytes. For tests.
// rec16: the KDA tensor-core kernel's old records by 16-byte cp.async
// (replay.cuh REC16; rings of records k_dtype / d_dtype, fp32 gates).
struct SpecChoice {
  int nh = 0, vt = 0;
  bool mma = false;
  int64_t smem = 0;
  bool rec16 = false;
  bool a3 = false;  // replay.cuh A3 (REPLAYSSM_SPEC_A3), on an SM of smem_per_sm bytes (the H100 / H200's 228 KiB)
};
SpecChoice spec_choice(const Dims& d, DType state, int sms, const QuantLayout* copy = nullptr,
                       DType d_dtype = DType::f32, DType k_dtype = DType::bf16, int smem_per_sm = 228 * 1024);
// The persistent T = 1 kernel's choice for contiguous rings of these record
// dtypes (delta_launch.cu, replay1p_plan; REPLAYSSM_R1P applies): taken,
// stages, result buffers, grid, shared memory bytes; copy: the step on a dual pool's read copy
// of that layout; gbps: the device's peak memory bandwidth (heuristics.h
// r1p_stage_cap; 0: the defaults, as on the H200). For tests.
struct Replay1PChoice {
  bool use = false;
  int nst = 0, nb = 0, threads = 0;  // stages; result buffers; threads per block (consumer warps + 2)
  int64_t grid = 0, smem = 0;
};
Replay1PChoice replay1p_choice(const Dims& d, DType state, DType d_dtype, DType k_dtype, int sms,
                               const QuantLayout* copy = nullptr, double gbps = 0.0);
// Device workspace of `op` (Exec::workspace): the persistent T = 1 replay
// step's scratch (delta_launch.cu, replay1p_plan) when it would be taken for
// a contiguous pool with records of the state's dtype or fp32, or for a
// dual pool's read copy (the larger); 0 for every other operation (a
// captured step without it takes the blocks).
size_t workspace_bytes(SsmOp op, const Dims& d);
// Dual-precision pools (pool.read_copy of layout `copy`; dual tensors
// validated by dual::check_device_pool, the rest as for a single pool).
void dual_replay_step(const DeltaStep& step, const DeltaPool& pool, const QuantLayout& copy,
                      const Tensor& num_accepted, bool commit_all, const Dims& d, const Exec& exec);
void dual_prefill(const DeltaPrefill& p, const DeltaPool& pool, const QuantLayout& copy, const Dims& d,
                  const Exec& exec);
void dual_materialize(const DeltaPool& pool, const QuantLayout& copy, const Tensor& slot, int64_t pad,
                      const Tensor& out, const Dims& d, const Exec& exec);
void dual_flush(const DeltaPool& pool, const QuantLayout& copy, const Tensor& slot, int64_t pad,
                const Dims& d, const Exec& exec);
// copy[slot] = quant_pack(state[slot]) (delta_reset_slot).
void dual_pack(const DeltaPool& pool, const QuantLayout& copy, const Tensor& slot, int64_t pad,
               const Dims& d, const Exec& exec);
}

#undef RSSM_DELTA_BACKEND_API

}  // namespace replayssm::delta
