// Ring cursor bookkeeping shared by every backend (host and device).
//
// Per slot the pool keeps a cursor of three int32 {start, count, pending}:
//   start   physical ring position of logical record 0 (0 <= start < R)
//   count   committed records since the checkpoint (0 <= count <= L)
//   pending records appended by the last step and not yet committed
// Record i (logical, 0-based from the checkpoint) lives at (start + i) % R.
//
// The ring has R >= L + T physical entries: a flushing step folds its
// `count` committed records and appends its T new ones after them, so the
// two sets never share an entry and shared (per group / key head) records
// can be read and appended by different blocks of one launch without a race.
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define RSSM_HD __host__ __device__ __forceinline__
#else
#define RSSM_HD inline
#endif

namespace replayssm {

inline constexpr int CURSOR_FIELDS = 3;

struct RingCursor {
  int32_t start;
  int32_t count;
  int32_t pending;
};

// What one step does on one row.
struct StepPlan {
  bool flush;           // fold `fold_count` records into the checkpoint first
  int32_t fold_start;   // physical position of the first record to fold
  int32_t fold_count;   // records folded (0 when !flush)
  int32_t hist_start;   // physical position of the first history record read
  int32_t hist_count;   // committed records the step's outputs read on top of
                        // the (possibly new) checkpoint
  int32_t append_start; // physical position of the step's first new record
  RingCursor next;      // cursor after the step (pending = T)
};

// Commit `accepted` of the pending records. Returns false (cursor unchanged)
// when accepted is outside [1, pending].
RSSM_HD bool ring_commit(RingCursor& c, int32_t accepted) {
  if (accepted < 1 || accepted > c.pending) return false;
  c.count += accepted;
  c.pending = 0;
  return true;
}

// Plan a step of T tokens with history capacity L on a ring of R entries.
// Precondition: c.pending == 0 (committed), 1 <= T <= L, R >= L + T.
RSSM_HD StepPlan ring_plan_step(RingCursor c, int32_t T, int32_t L, int32_t R) {
  StepPlan p;
  p.flush = c.count + T > L;
  p.fold_start = c.start;
  p.fold_count = p.flush ? c.count : 0;
  int32_t start = p.flush ? (c.start + c.count) % R : c.start;
  int32_t count = p.flush ? 0 : c.count;
  p.hist_start = start;
  p.hist_count = count;
  p.append_start = (start + count) % R;
  p.next = RingCursor{start, count, T};
  return p;
}

// Physical position of logical record i of a ring starting at `start`.
RSSM_HD int32_t ring_pos(int32_t start, int32_t i, int32_t R) { return (start + i) % R; }
// The same for start < R and i <= R (a valid cursor's records and the step's
// appends), without a division.
RSSM_HD int32_t ring_pos_near(int32_t start, int32_t i, int32_t R) {
  const int32_t p = start + i;
  return p >= R ? p - R : p;
}

}  // namespace replayssm
