// The cursor side of step / commit / flush / prefill: one thread per row,
// launched after the state kernel on the same stream. Included only by
// launch.cu (a non-template kernel must have one definition).
#pragma once
#include "mamba2/slot_kernels.cuh"

namespace replayssm::mamba2::kern {

// One thread per row: the cursor side of step / commit / flush / prefill.
// Validation repeats the state kernel's, so both skip the same rows; status
// bits of these modes are reported here.
__global__ void mamba2_cursor_kernel(const Params p) {
  // Launched as a programmatic dependent of the replay kernel (step mode):
  // wait until that grid has completed and its memory is visible. A no-op
  // for ordinary launches.
  asm volatile("griddepcontrol.wait;" ::: "memory");
  const int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= p.B) return;
  int32_t bits = 0;
  if (p.mode == Mode::step) {
    int64_t slot;
    StepPlan plan;
    if (step_row_plan(p, b, &slot, &plan, &bits) == ROW_OK) {
      RingCursor next = plan.next;
      if (p.commit_all) ring_commit(next, p.T);
      if (p.eager) {  // the committed records and the token were folded (decode_kernel.cuh)
        const int n = plan.flush ? plan.fold_count : plan.hist_count;
        next = RingCursor{ring_pos(plan.flush ? plan.fold_start : plan.hist_start, n, p.R), 0, 0};
      }
      store_cursor(p, slot, next);
    }
  } else {
    const int64_t slot = row_slot(p, b);
    int64_t t0, t1;
    bool ok = check_slot(p, slot, &bits) == ROW_OK;
    if (p.mode == Mode::prefill) ok = prompt_range(p, b, &t0, &t1, &bits) && ok;
    if (ok) {
      RingCursor c = load_cursor(p, slot);
      if (!cursor_sane(p, c)) {
        bits |= STATUS_RING_OVERFLOW;
      } else if (p.mode == Mode::commit) {
        const int64_t a = cuda_util::load_index(p.acc, p.acc_dtype, b * p.acc_s);
        if (c.pending == 0 || a < 1 || a > c.pending) bits |= STATUS_BAD_ACCEPTED;
        else if (c.count + a > p.L) bits |= STATUS_RING_OVERFLOW;
        else if (ring_commit(c, int32_t(a))) store_cursor(p, slot, c);
      } else if (p.mode == Mode::flush) {
        if (c.pending != 0) {
          bits |= STATUS_UNCOMMITTED;
        } else {
          store_cursor(p, slot, RingCursor{ring_pos(c.start, c.count, p.R), 0, 0});
        }
      } else if (p.mode == Mode::prefill) {
        store_cursor(p, slot, RingCursor{c.start, 0, 0});
      }
    }
  }
  if (bits) cuda_util::report(p.status, bits);
}

}  // namespace replayssm::mamba2::kern
