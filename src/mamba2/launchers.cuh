// Host launchers of the Mamba-2 kernels, one explicit instantiation per
// (state dtype, activation dtype) in kernels_<state dtype>.cu; launch.cu
// holds the dispatch switch.
#pragma once
#include <cuda_runtime.h>

#include "mamba2/backend.h"
#include "mamba2/kernel_common.cuh"
#include "replayssm/quant.h"

namespace replayssm::mamba2::kern {

struct LaunchCfg {
  dim3 grid;
  size_t smem = 0;
  cudaStream_t stream = nullptr;
  int vpl = 1;  // vectors per lane (heuristics.h::RowGeometry)
  const char* fn = "";
  // Launched as the stream's previous kernel's programmatic dependent
  // (cuda_util::launch_dependent): it waits (griddepcontrol.wait) before
  // reading what that kernel writes.
  bool dependent = false;
};

template <DType SD, DType AD> void launch_replay(const Params& p, const LaunchCfg& c);
// N = 128, T <= 8: the replay step fed by bulk copies (replay1_kernel.cuh).
template <DType SD, DType AD> void launch_replay1(const Params& p, const LaunchCfg& c);
template <DType SD, DType AD> void launch_decode(const Params& p, const LaunchCfg& c);
template <DType SD, DType AD> void launch_fold(const Params& p, const LaunchCfg& c);
template <DType SD, DType AD> void launch_prefill(const Params& p, const LaunchCfg& c);
// Dual precision (dual_pack.cu, dual_replay_*.cu): the replay kernel on a
// packed read copy (QF_FP8 | QF_NVFP4), and the pack kernel.
template <int QF, DType AD> void launch_replay_packed(const Params& p, const LaunchCfg& c);
// T = 1, N = 128: the bulk-copy replay kernel on a packed copy (launch.cu::replay1_qfits).
template <int QF, DType AD> void launch_replay1_packed(const Params& p, const LaunchCfg& c);
// fold = true (step): fold the flushing rows of p's plan into the checkpoint
// and pack their copy; fold = false: pack every valid row's checkpoint.
// p: slots (and cursors, records, A, num_accepted for fold) of the call;
// state: the checkpoint dtype, rec: the records' dtype.
void launch_dual_pack(const char* fn, const Params& p, const Tensor& read_copy, ReadFormat format,
                      DType state, DType rec, bool fold, int sms, int smem_optin, int smem_per_sm,
                      cudaStream_t stream);

}  // namespace replayssm::mamba2::kern

namespace replayssm::mamba2::cuda {

// Parameter block from validated API tensors (launch.cu; also used by the
// shared-mode launcher, shared.cu). set_step fills the step tensors [B, T, ...],
// the per-head parameters and pad_slot_id; set_slot the slot vector and pad.
void set_dims(kern::Params& p, const Dims& d);
void set_params(kern::Params& p, const Tensor& A, const Tensor& dt_bias, const Tensor& D, bool dt_softplus);
void set_step(kern::Params& p, const Mamba2Step& s);
void set_slot(kern::Params& p, const Tensor& slot, int64_t pad);

}  // namespace replayssm::mamba2::cuda
