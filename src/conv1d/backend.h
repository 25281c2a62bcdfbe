// Internal interface between the validating entry points (api.cpp) and the
// conv1d backends. Arguments reaching these functions are already validated:
// shapes, dtypes, devices, unit inner strides, W >= 2, T <= T_max; on the CPU
// backends also slots (in range, distinct), pending counts and accepted counts.
#pragma once
#include "core/workspace.h"
#include "replayssm/conv1d.h"

namespace replayssm::conv1d {

struct Dims {
  int64_t B = 0;       // rows (step, commit) or prompts (prefill)
  int64_t T = 0;       // tokens per row (step)
  int64_t dim = 0;     // channels
  int64_t W = 0;       // kernel width
  int64_t S = 0;       // slots in conv_state
  int64_t R = 0;       // conv_state rows = W − 1 + T_max
  int64_t tokens = 0;  // prefill: packed tokens (cu_seqlens[B])
  int64_t T_max() const { return R - (W - 1); }
};

#define RSSM_CONV1D_BACKEND_API(...)                                                          \
  void update(const Conv1dStep& step, const Tensor& conv_state, const Tensor& conv_pending,   \
              const Tensor& num_accepted, const Dims& d __VA_ARGS__);                        \
  void prefill(const Conv1dPrefill& p, const Tensor& conv_state, const Tensor& conv_pending, \
               const Dims& d __VA_ARGS__);                                                   \
  void commit(const Tensor& conv_state, const Tensor& conv_pending, const Tensor& slot,       \
              int64_t pad_slot_id, const Tensor& num_accepted, const Dims& d __VA_ARGS__);

namespace reference { RSSM_CONV1D_BACKEND_API() }
namespace cpu {
RSSM_CONV1D_BACKEND_API(, const Exec& exec)
// Workspace of `op` for dims d on `threads` threads.
WorkspacePlan workspace_plan(Conv1dOp op, const Dims& d, int threads);
}
namespace cuda { RSSM_CONV1D_BACKEND_API(, const Exec& exec) }

#undef RSSM_CONV1D_BACKEND_API

// Widest kernel the cuda backend supports (the sliding window lives in registers).
inline constexpr int64_t CUDA_MAX_W = 16;

}  // namespace replayssm::conv1d
