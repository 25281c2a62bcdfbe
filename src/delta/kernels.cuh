// Definitions of the typed launch entry points (kernels.h); included only by
// the per-dtype instantiation units.
#pragma once
#include <cstring>
#include <stdexcept>
#include <string>

#include "delta/kernels.h"
#include "delta/launch_kernel.cuh"
#include "delta/decode1.cuh"
#include "delta/recurrent.cuh"
#include "delta/replay.cuh"
#include "delta/replay1.cuh"

namespace replayssm::delta::cuda_impl {

// K = 128 (every model shape of design §6) takes an instance with K and the
// lanes per row as constants: the row chunks' bounds checks and the lane
// arithmetic fold away (GDN bf16: no spill reloads left in the token loop).
// Snapshot baseline, B = 256, T = 5, µs, against the runtime-K instance in
// one run: GDN HV64 fp32 1938 → 1698, bf16 1955 → 1296; KDA fp32 1066 → 971,
// bf16 1235 → 841 (perf_notes_delta.md, "the recurrent kernel at K = 128").
// The T > 1 replay wrappers below pass KDA kernels their block layout
// (layouts.h HOST_LAYOUT), computed here on the host with the function the
// GDN kernels call per block. The kernels rely on each field being a
// multiple of four (align4 throughout; kernel_common.cuh at_aligned): an
// internal invariant, checked per launch.
template <class Layout>
const Layout& check_layout(const Layout& l, const char* kernel) {
  static_assert(sizeof(Layout) % sizeof(int64_t) == 0, "layouts hold int64 fields only");
  int64_t f[sizeof(Layout) / sizeof(int64_t)];
  std::memcpy(f, &l, sizeof(Layout));
  for (const int64_t x : f)
    if (x < 0 || x % 4 != 0)
      throw std::logic_error(std::string("replayssm internal error: ") + kernel + " layout offset " +
                             std::to_string(x) + " is not a multiple of 4");
  return l;
}
template <DType SD, bool KDA> void launch_recurrent(const RecArgs& a, const Launch& l) {
  if (a.in.K == 128 && a.lpr == 128 / ELEMS_PER_LANE) return launch_kernel<delta_recurrent_kernel<SD, KDA, 128>>(l, a);
  launch_kernel<delta_recurrent_kernel<SD, KDA>>(l, a);
}
template <DType SD, bool KDA> void launch_decode1(const RecArgs& a, const Launch& l) {
  if (a.big > 0) launch_kernel<delta_decode1_kernel<SD, KDA, 0, true>>(l, a);
  else launch_kernel<delta_decode1_kernel<SD, KDA>>(l, a);
}
template <DType SD, bool KDA> void launch_decode1_eager(const RecArgs& a, const Launch& l, bool two_per_sm) {
  if (two_per_sm) launch_kernel<delta_decode1_kernel<SD, KDA, 2>>(l, a);
  else launch_kernel<delta_decode1_kernel<SD, KDA, DECODE1_MIN_BLOCKS>>(l, a);
}
// replay.cuh's layout (MMA: the tensor-core instance, K = REPLAY_MMA_K)
template <bool KDA, bool MMA>
ReplayArgs with_replay_layout(const ReplayArgs& a) {
  ReplayArgs b = a;
  if constexpr (HOST_LAYOUT<KDA>)
    b.rl = check_layout(replay_layout(KDA, MMA ? REPLAY_MMA_K : a.in.K, a.T, a.rings.L, a.nh, a.nh * a.vt, MMA,
                                      MMA && a.a3),
                        "delta_replay_kernel");
  return b;
}
template <DType SD, bool KDA> void launch_replay(const ReplayArgs& a, const Launch& l) {
  launch_kernel<delta_replay_kernel<SD, KDA>>(l, with_replay_layout<KDA, false>(a));
}
// KDA with a.rec16 (delta_launch.cu rec16_fits): REC16's instance; fp32
// with a.a3 (delta_launch.cu spec_plan): three blocks per SM
template <DType SD, bool KDA> void launch_replay_mma(const ReplayArgs& a, const Launch& l) {
  if constexpr (KDA && SD == DType::f32)
    if (a.a3) {
      if (a.rec16) return launch_kernel<delta_replay_kernel<SD, KDA, QF_NONE, true, true, true>>(l, with_replay_layout<KDA, true>(a));
      return launch_kernel<delta_replay_kernel<SD, KDA, QF_NONE, true, false, true>>(l, with_replay_layout<KDA, true>(a));
    }
  if constexpr (KDA)
    if (a.rec16) return launch_kernel<delta_replay_kernel<SD, KDA, QF_NONE, true, true>>(l, with_replay_layout<KDA, true>(a));
  launch_kernel<delta_replay_kernel<SD, KDA, QF_NONE, true>>(l, with_replay_layout<KDA, true>(a));
}
template <DType SD, bool KDA> void launch_replay1(const ReplayArgs& a, const Launch& l) {
  launch_kernel<delta_replay1_kernel<SD, KDA>>(l, a);
}
// a.ld < L: the long-ring instance (replay1.cuh, LR)
template <DType SD, bool KDA> void launch_replay1_bulk(const ReplayArgs& a, const Launch& l) {
  if (a.ld < a.rings.L) launch_kernel<delta_replay1_kernel<SD, KDA, QF_NONE, true, true>>(l, a);
  else launch_kernel<delta_replay1_kernel<SD, KDA, QF_NONE, true>>(l, a);
}
template <DType SD, bool KDA> void launch_fold(const FoldArgs& a, const Launch& l) {
  launch_kernel<delta_fold_kernel<SD, KDA>>(l, a);
}

template <int QF, bool KDA> void launch_replay_quant(const ReplayArgs& a, const Launch& l) {
  launch_kernel<delta_replay_kernel<DType::f32, KDA, QF>>(l, with_replay_layout<KDA, false>(a));
}
template <int QF, bool KDA> void launch_replay1_quant(const ReplayArgs& a, const Launch& l, bool bulk) {
  if (bulk && a.ld < a.rings.L) launch_kernel<delta_replay1_kernel<DType::bf16, KDA, QF, true, true>>(l, a);
  else if (bulk) launch_kernel<delta_replay1_kernel<DType::bf16, KDA, QF, true>>(l, a);
  else launch_kernel<delta_replay1_kernel<DType::bf16, KDA, QF>>(l, a);
}

#define RSSM_DELTA_INSTANTIATE_QUANT(QF)                                                \
  template void launch_replay_quant<QF, false>(const ReplayArgs&, const Launch&);       \
  template void launch_replay_quant<QF, true>(const ReplayArgs&, const Launch&);        \
  template void launch_replay1_quant<QF, false>(const ReplayArgs&, const Launch&, bool); \
  template void launch_replay1_quant<QF, true>(const ReplayArgs&, const Launch&, bool);

#define RSSM_DELTA_INSTANTIATE(SD)                                                      \
  template void launch_recurrent<SD, false>(const RecArgs&, const Launch&);             \
  template void launch_recurrent<SD, true>(const RecArgs&, const Launch&);              \
  template void launch_decode1<SD, false>(const RecArgs&, const Launch&);               \
  template void launch_decode1<SD, true>(const RecArgs&, const Launch&);                \
  template void launch_decode1_eager<SD, false>(const RecArgs&, const Launch&, bool);   \
  template void launch_decode1_eager<SD, true>(const RecArgs&, const Launch&, bool);    \
  template void launch_replay<SD, false>(const ReplayArgs&, const Launch&);             \
  template void launch_replay<SD, true>(const ReplayArgs&, const Launch&);              \
  template void launch_replay_mma<SD, false>(const ReplayArgs&, const Launch&);         \
  template void launch_replay_mma<SD, true>(const ReplayArgs&, const Launch&);          \
  template void launch_replay1<SD, false>(const ReplayArgs&, const Launch&);            \
  template void launch_replay1<SD, true>(const ReplayArgs&, const Launch&);             \
  template void launch_replay1_bulk<SD, false>(const ReplayArgs&, const Launch&);       \
  template void launch_replay1_bulk<SD, true>(const ReplayArgs&, const Launch&);        \
  template void launch_fold<SD, false>(const FoldArgs&, const Launch&);                 \
  template void launch_fold<SD, true>(const FoldArgs&, const Launch&);

}  // namespace replayssm::delta::cuda_impl
