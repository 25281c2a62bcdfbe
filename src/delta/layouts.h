// Shared-memory layouts of delta kernels' blocks, computed on the host by the
// launch wrappers (kernels.cuh, delta_replay1p.cu) and passed in the kernel's
// parameter block, so a block need not spend instructions on them: the
// T > 1 replay kernel's (replay.cuh replay_layout, 130–210 instructions per
// thread) and the persistent T = 1 step's preparation (replay1p.cuh
// p1_layout / r1p_res, ~90–200 per item).
//
// The T > 1 kernel reads it for KDA only (HOST_LAYOUT); GDN's instances and
// the other kernels compute their layouts per block. Measured against
// kernels that all computed their own, in one run each (B = 256, L = 16, µs;
// docs/perf_notes_delta.md, "host layouts where they pay" and "KDA
// preparation, constant-K bulk and tail tiles landed"): the persistent step
// KDA fp32 230.9 → 219.1, bf16 213.0 → 201.0, GDN bf16 236.6 → 234.7, dual
// GDN fp8 / nvfp4 −0.3 %; KDA T = 5 bf16 584.3 → 563.4, fp32 621.7 → 620.7.
// But GDN's kernels lost: fp32 T = 1 312.2 → 315.4 (blocks: the offsets
// re-read from the constant bank where used), T = 5 664.3 → 667.6; and so
// did KDA's T = 1 blocks, B = 64 70.6 → 73.4, and the KDA decode, 289.1 →
// 291.2.
#pragma once
#include <cstdint>

namespace replayssm::delta::cuda_impl {

template <bool KDA>
inline constexpr bool HOST_LAYOUT = KDA;

// replay.cuh (T > 1 and the CUDA-core replay): the log-decays first (GDN:
// fp64 Λ per head and record; KDA: fp32 partial sums per record and
// channel, then their totals), then floats; sizes in bytes. NM = L + T
// bounds the records of a step (n_old <= L with a flush, <= L − T without),
// RB = nh·vt rows.
struct ReplayLayout {
  int64_t lamd;                                       // offset of the log-decays
  int64_t kv, qv, uk, uq, e0v, ua, w, dt, gs, beta, eu, kq, cf, e0;  // float offsets (after the log-decays)
  int64_t float_base, bytes;
};

// replay1p.cuh: an item's result buffer (and scratch payload), in floats:
// the vectors the consumers read for every item; a flushing item's payload
// adds the fold's decays (GDN [nh][L]) and keys ([n_old][K]: k̂_j, KDA
// c_j ⊙ k̂_j).
struct R1PRes {
  int64_t uk, uq, e0v, vs, hq, eu, e0, beta, sz;  // sz: the result buffer
  int64_t co, kv, pay;                             // offsets of the flush part; pay: payload stride
};
// replay1p.cuh's preparation kernel: per-warp shared memory in floats.
struct P1Layout {
  int64_t kt, qv, kr, gs, co, dk, dq, total;
};

}  // namespace replayssm::delta::cuda_impl
