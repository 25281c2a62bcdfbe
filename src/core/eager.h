// Eager T = 1 replay steps at small batches (delta_launch.cu run_eager,
// mamba2 launch.cu replay_step; the bench labels its rows with the same
// rule). At a batch of a few rows the replay kernel's dependent chain (slot →
// cursor → records → token → state stream) costs more than the state bytes it
// saves, so the step reads the checkpoint, folds the slot's committed records
// and the token into it and writes it back, as the baseline decode does, and
// the ring ends empty. Outputs, materialised states and speculative windows
// are those of the replay step (the records are folded exactly as a flush
// folds them); a 16-bit checkpoint is rounded every step, as the baseline's.
#pragma once
#include <cstdint>
#include <cstdlib>

namespace replayssm {

// Whether a T = 1 replay step of B rows of state_bytes_per_row each is eager:
// at most max_rows rows and max_bytes of state (the family's heuristics.h).
// REPLAYSSM_EAGER_ROWS=n overrides (eager up to n rows whatever their size;
// 0: never), for tests and measurements.
inline bool eager_step(int64_t B, int64_t state_bytes_per_row, int64_t max_rows, int64_t max_bytes) {
  const char* v = std::getenv("REPLAYSSM_EAGER_ROWS");
  if (v && *v) return B <= std::atoll(v);
  return B <= max_rows && B * state_bytes_per_row <= max_bytes;
}

}  // namespace replayssm
