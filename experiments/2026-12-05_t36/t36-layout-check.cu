// One-off host check (thirty-sixth session): every field of every block
// layout the t36-host-layouts patch passes to the delta kernels is a
// non-negative multiple of 4, over a grid of configurations.
#include <cstdio>
#include <cstring>
#include "delta/kernels.cuh"
#include "delta/replay1p.cuh"
using namespace replayssm;
using namespace replayssm::delta::cuda_impl;
static long bad = 0, checked = 0;
template <class Lt> void chk(const Lt& l, const char* what) {
  int64_t f[sizeof(Lt) / 8];
  std::memcpy(f, &l, sizeof(Lt));
  for (int64_t x : f) { ++checked; if (x < 0 || x % 4) { if (bad++ < 10) printf("BAD %s %lld\n", what, (long long)x); } }
}
template <DType SD, bool KDA, int QF, bool BULK, bool LR> void r1(ReplayArgs a, int nthr) {
  chk(replay1_block_layout<SD, KDA, QF, BULK, LR>(a, nthr), "replay1");
}
int main() {
  for (int K : {4, 8, 12, 16, 40, 64, 100, 128, 132, 256})
    for (int T = 1; T <= 8; ++T)
      for (int L : {1, 2, 3, 5, 8, 15, 16, 17, 31, 32})
        for (int nh : {1, 2, 3, 4, 8})
          for (int vt : {1, 3, 16, 40, 64, 128}) {
            for (bool kda : {false, true})
              for (bool mma : {false, true}) chk(replay_layout(kda, K, T, L, nh, nh * vt, mma), "replay");
            for (bool kda : {false, true})
              for (int nch : {1, 2, 4})
                for (int np : {1, 2, 3, 5, 8}) {
                  chk(decode1_layout(kda, K, nh, nh * vt, nch, np, 1, 0), "decode1");
                  chk(decode1_layout(kda, K, nh, nh * vt, nch, np, nh, L), "decode1 eager");
                }
            for (bool kda : {false, true}) {
              chk(rec_layout(kda, K, T, 0, vt), "rec");
              chk(rec_layout(kda, K, T, L, vt), "rec fold");
              chk(p1_layout(kda, K, L, nh), "p1");
              if (K % 4 == 0) chk(r1p_res(kda, K, L, nh, nh * vt), "r1p_res");
            }
          }
  for (int L : {1, 4, 8, 16, 17, 32})
    for (int nh : {1, 2, 4, 8})
      for (int vt : {16, 32, 64, 128})
        for (int lpr : {8, 16, 32})
          for (int ld : {1, 4, 12, 32}) {
            ReplayArgs a;
            a.in.K = 128; a.in.V = 128; a.rings.L = L; a.nh = nh; a.vt = vt; a.lpr = lpr; a.ld = ld < L ? ld : L;
            a.qg.scale_row_bytes = 8;
            r1<DType::f32, false, QF_NONE, false, false>(a, 256);
            r1<DType::f32, true, QF_NONE, false, false>(a, 256);
            r1<DType::bf16, false, QF_NONE, true, false>(a, 256);
            r1<DType::bf16, true, QF_NONE, true, true>(a, 256);
            r1<DType::f32, false, QF_NONE, true, true>(a, 256);
            r1<DType::f32, true, QF_NONE, true, false>(a, 256);
            r1<DType::f16, false, QF_NONE, true, false>(a, 256);
            r1<DType::bf16, false, QF_FP8, true, false>(a, 256);
            r1<DType::bf16, true, QF_NVFP4, true, true>(a, 256);
            r1<DType::bf16, false, QF_FP8, false, false>(a, 256);
          }
  printf("checked %ld fields, %ld not a multiple of 4\n", checked, bad);
  return bad != 0;
}
