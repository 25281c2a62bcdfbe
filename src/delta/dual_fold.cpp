// The high-precision fold of a dual GDN/KDA pool (design §4): the flushed
// records' d_j recomputed against the running high-precision state, one
// record after the other (the sequential form of the triangular system of
// §3). Reference: fp64 arithmetic on the stored values; cpu: fp32, fixed
// summation order (deterministic, independent of threads).
#include <cmath>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"
#include "core/dual_util.h"
#include "core/parallel.h"
#include "core/ring.h"
#include "delta/dual.h"

namespace replayssm::delta::dual {
namespace {

using replayssm::dual::element;

// Value of a scalar of dtype dt rounded through that dtype.
template <class Acc>
Acc round_to(DType dt, Acc v) {
  if (dt == DType::f32) return Acc(float(v));
  if (dt == DType::bf16) return Acc(bf16_to_f32(f32_to_bf16(float(v))));
  if (dt == DType::f16) return Acc(f16_to_f32(f32_to_f16(float(v))));
  return v;
}

template <class Acc>
void fold_head(DeltaFamily f, const DeltaPool& pool, int64_t s, int64_t h, const Tensor& out,
               int64_t o) {
  const int64_t HV = pool.state.shape[1], V = pool.state.shape[2], K = pool.state.shape[3];
  const int64_t H = pool.ring_k.shape[2], R = pool.ring_k.shape[1];
  const int64_t kh = h / (HV / H);
  const bool kda = f == DeltaFamily::kda;
  const int32_t* cur = reinterpret_cast<const int32_t*>(element(pool.cursor, {s, 0}));
  const int32_t start = cur[0], count = cur[pool.cursor.stride[1]];

  std::vector<Acc> S(static_cast<size_t>(V * K)), kk(static_cast<size_t>(K)), alpha(static_cast<size_t>(K));
  for (int64_t v = 0; v < V; ++v) {
    const uint8_t* p = element(pool.state, {s, h, v});
    for (int64_t k = 0; k < K; ++k) S[size_t(v * K + k)] = Acc(load_as_f64(p, pool.state.dtype, k));
  }
  for (int32_t j = 0; j < count; ++j) {
    const int64_t pos = ring_pos(start, j, int32_t(R));
    const Acc ks = Acc(*reinterpret_cast<const float*>(element(pool.ring_ks, {s, pos, kh})));
    const uint8_t* kp = element(pool.ring_k, {s, pos, kh});
    for (int64_t k = 0; k < K; ++k) kk[size_t(k)] = Acc(load_as_f64(kp, pool.ring_k.dtype, k)) * ks;
    const float* gp = reinterpret_cast<const float*>(element(pool.ring_g, {s, pos, h}));
    for (int64_t k = 0; k < K; ++k) alpha[size_t(k)] = std::exp(Acc(gp[kda ? k : 0]));
    const Acc beta = Acc(*reinterpret_cast<const float*>(element(pool.ring_beta, {s, pos, h})));
    const uint8_t* vp = element(pool.ring_v, {s, pos, h});
    for (int64_t v = 0; v < V; ++v) {
      Acc* row = S.data() + v * K;
      Acc a = 0;
      for (int64_t k = 0; k < K; ++k) a += row[k] * (alpha[size_t(k)] * kk[size_t(k)]);
      const Acc d = round_to<Acc>(pool.ring_d.dtype, beta * (Acc(load_as_f64(vp, pool.ring_v.dtype, v)) - a));
      for (int64_t k = 0; k < K; ++k) row[k] = row[k] * alpha[size_t(k)] + d * kk[size_t(k)];
    }
  }
  for (int64_t v = 0; v < V; ++v) {
    uint8_t* p = element(out, {o, h, v});
    for (int64_t k = 0; k < K; ++k) store_from_f64(p, out.dtype, k, double(S[size_t(v * K + k)]));
  }
}

}  // namespace

void fold_rows(Backend backend, DeltaFamily f, const DeltaPool& pool,
               const std::vector<std::pair<int64_t, int64_t>>& rows, const Tensor& out,
               int threads) {
  const int64_t HV = pool.state.shape[1];
  const int64_t n = int64_t(rows.size()) * HV;
  if (backend == Backend::reference) {
    for (int64_t u = 0; u < n; ++u)
      fold_head<double>(f, pool, rows[size_t(u / HV)].first, u % HV, out, rows[size_t(u / HV)].second);
    return;
  }
  parallel_for(n, cpu_threads(threads), [&](int64_t u) {
    fold_head<float>(f, pool, rows[size_t(u / HV)].first, u % HV, out, rows[size_t(u / HV)].second);
  });
}

}  // namespace replayssm::delta::dual
