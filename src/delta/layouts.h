// Shared-memory layouts of the delta replay kernels' blocks (offsets into
// the dynamic shared memory). The functions that fill them live beside their
// kernels (replay.cuh replay_layout, replay1.cuh replay1_layout, replay1p.cuh
// p1_layout / r1p_res). The launch wrappers (kernels.cuh, delta_replay1p.cu)
// compute a launch's layout on the host and pass it in the kernel's
// parameter block, so a block need not spend instructions on it (80–210 per
// thread in the T = 1 / T > 1 replay kernels, ~200 per item in the
// persistent step's preparation; experiments/2026-12-05_t36/README.md).
//
// Who reads it (HOST_LAYOUT): the persistent step's preparation always, the
// T = 1 and T > 1 replay kernels for KDA only. Measured with every kernel
// reading it against every kernel computing its own, in one run (B = 256,
// L = 16, µs; bench/results/2026-12-05_h200_t36_variants.jsonl): KDA T = 1
// 230.9 → 219.4 (persistent), bf16 213.4 → 200.6, B = 64 77.2 → 76.1
// (blocks), T = 5 652.6 → 634.9; GDN bf16 T = 1 236.5 → 233.7 (persistent);
// but GDN fp32 T = 1 312.2 → 315.4 (blocks: their offsets are re-read from
// the constant bank where used instead of being held), T = 5 664.3 → 667.6,
// and the decode baseline (decode1.cuh) KDA 289.1 → 291.2, B = 64 81.8 →
// 83.2. So GDN's replay kernels and both decodes keep computing theirs.
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

// replay1.cuh (T = 1), in floats (stages first: 16-byte aligned).
struct Replay1Layout {
  int64_t stg, bar, kv, kr, qv, uk, uq, e0v, gs, dt, dk, dq, co, eu, e0, beta, misc, vs, hq, total;
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
