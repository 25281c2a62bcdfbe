// Shared-quantised GDN/KDA decode on the cuda backend (include/replayssm/dual.h):
// one block per (row b, value head hv). The block decodes the packed tile
// [V, K] of (slot, hv), applies the T tokens in fp32 as delta_decode does
// (recurrent.cuh; q̂, k̂ normalised and scaled, gates activated):
//   GDN: a_k = α (S k̂), a_q = α (S q̂)            KDA: a_k = S(α⊙k̂), a_q = S(α⊙q̂)
//   d = β (v − a_k),  o = a_q + (k̂·q̂) d,  S ← α S + d k̂ᵀ  (KDA: S Diag(α) + d k̂ᵀ)
// keeps the new tile in shared memory and re-encodes it in place
// (tile_codec.cuh: round to nearest even, or stochastic with the tile id
// slot·HV + hv). A warp owns a state row v, its lanes 4-value chunks along K.
// Stream-ordered, no allocation, no host synchronisation.
#include <climits>
#include <string>

#include "core/check.h"
#include "cuda/runtime.h"
#include "delta/kernel_common.cuh"
#include "delta/shared.h"
#include "quant/tile_codec.cuh"

namespace replayssm::delta {
namespace cuda_impl {
namespace {

constexpr int SHARED_THREADS = 256;
constexpr int SHARED_MAX_J = 4;  // chunks of 4 per lane: K <= 512

struct SharedArgs {
  Index slot;
  int64_t pad = -1, S = 0, B = 0;
  int T = 0;
  int ks = 0;  // row stride of the staged K-vectors and of the tile: K rounded up to 4
  uint8_t* packed = nullptr;  // [S, HV, tile_bytes]
  int64_t pk_s = 0, pk_h = 0;  // bytes
  quant::dev::TileFmt f;
  bool sr = false;
  uint64_t seed = 0, step = 0;
  int32_t* status = nullptr;
};

__host__ __device__ inline int64_t round4(int64_t n) { return (n + 3) / 4 * 4; }
// Shared memory (floats; regions start 16-byte aligned):
// k̂, q̂ (KDA: α⊙q̂) [T][ks] | KDA: α⊙k̂, α [T][ks] | {α, β, k̂·q̂, -} [T] | v [T][V] | tile [V][ks].
__host__ __device__ inline int64_t shared_smem_floats(bool kda, int T, int ks, int V) {
  return int64_t(kda ? 4 : 2) * T * ks + 4 * int64_t(T) + round4(int64_t(T) * V) + int64_t(V) * ks;
}

template <bool KDA>
__global__ void __launch_bounds__(SHARED_THREADS) delta_decode_shared_kernel(const TokenArgs in, const SharedArgs e) {
  extern __shared__ float4 smem4[];
  float* sm = reinterpret_cast<float*>(smem4);
  const int HV = in.HV, K = in.K, V = in.V, T = e.T, ks = e.ks;
  const int64_t b = blockIdx.x / HV;
  const int hv = int(blockIdx.x % HV), kh = hv / in.G;
  const int tid = threadIdx.x, nthr = blockDim.x;

  // A call with a slot outside [0, S) writes nothing (every block sees it).
  int bad = 0;
  for (int64_t i = tid; i < e.B; i += nthr) {
    const int64_t s = idx_at(e.slot, i);
    bad |= s != e.pad && (s < 0 || s >= e.S);
  }
  if (__syncthreads_or(bad)) {
    if (blockIdx.x == 0 && tid == 0) cuda_util::report(e.status, STATUS_BAD_SLOT);
    return;
  }
  const int64_t s = idx_at(e.slot, b);
  if (s == e.pad) {
    for (int i = tid; i < T * V; i += nthr) out_at(in.o, b, i / V, hv, i % V, 0.f);
    return;
  }

  float* KN = sm;                                  // [T][ks] k̂
  float* QV = KN + int64_t(T) * ks;                // [T][ks] q̂ (KDA: α ⊙ q̂)
  float* KA = QV + int64_t(T) * ks;                // [T][ks] KDA: α ⊙ k̂
  float* AL = KA + (KDA ? int64_t(T) * ks : 0);    // [T][ks] KDA: α
  float* SC = AL + (KDA ? int64_t(T) * ks : 0);    // [T][4] {α (GDN), β, k̂·q̂, -}
  float* VS = SC + 4 * T;                          // [T][V]
  float* TL = VS + round4(int64_t(T) * V);         // [V][ks] the new tile
  // Zero the K-vectors' padding (ks > K), read by the 4-wide chunk products.
  for (int64_t i = tid; i < int64_t(KDA ? 4 : 2) * T * ks; i += nthr) sm[i] = 0.f;
  __syncthreads();
  const int lane = tid & 31, warp = tid >> 5, nwarps = nthr >> 5;
  for (int i = warp; i < T; i += nwarps) {
    float kn_scale, kq;
    warp_prep_qk(in, b, i, kh, KN + i * ks, QV + i * ks, kn_scale, kq);
    if (lane == 0) {
      SC[i * 4 + 1] = beta_at(in, b, i, hv);
      SC[i * 4 + 2] = kq;
      SC[i * 4] = KDA ? 1.f : expf(gate_at(in, false, b, i, hv, 0));
    }
    if (KDA) {
      __syncwarp();
      for (int k = lane; k < K; k += 32) {
        const float al = expf(gate_at(in, true, b, i, hv, k));
        AL[i * ks + k] = al;
        KA[i * ks + k] = al * KN[i * ks + k];
        QV[i * ks + k] *= al;
      }
    }
  }
  for (int i = tid; i < T * V; i += nthr) VS[i] = act_at(in.v, b, i / V, hv, i % V);
  __syncthreads();

  uint8_t* tile = e.packed + s * e.pk_s + int64_t(hv) * e.pk_h;
  for (int r = warp; r < V; r += nwarps) {
    float f[SHARED_MAX_J][4];
#pragma unroll
    for (int j = 0; j < SHARED_MAX_J; ++j) {
      const int k0 = 4 * (lane + 32 * j);
      if (k0 < K) quant::dev::decode_chunk(e.f, tile, r, k0, f[j]);
      else f[j][0] = f[j][1] = f[j][2] = f[j][3] = 0.f;
    }
    for (int t = 0; t < T; ++t) {
      const float* ku = (KDA ? KA : KN) + t * ks;
      const float* qu = QV + t * ks;
      float pk = 0.f, pq = 0.f;
#pragma unroll
      for (int j = 0; j < SHARED_MAX_J; ++j) {
        const int k0 = 4 * (lane + 32 * j);
        if (k0 >= K) continue;
        const float4 a = *reinterpret_cast<const float4*>(ku + k0);
        const float4 c = *reinterpret_cast<const float4*>(qu + k0);
        pk += f[j][0] * a.x + f[j][1] * a.y + f[j][2] * a.z + f[j][3] * a.w;
        pq += f[j][0] * c.x + f[j][1] * c.y + f[j][2] * c.z + f[j][3] * c.w;
      }
      pk = cuda_util::warp_sum(pk);
      pq = cuda_util::warp_sum(pq);
      const float alpha = SC[t * 4];
      const float d = SC[t * 4 + 1] * (VS[t * V + r] - alpha * pk);
      const float o = alpha * pq + SC[t * 4 + 2] * d;
#pragma unroll
      for (int j = 0; j < SHARED_MAX_J; ++j) {
        const int k0 = 4 * (lane + 32 * j);
        if (k0 >= K) continue;
        const float4 kn = *reinterpret_cast<const float4*>(KN + t * ks + k0);
        float4 g = make_float4(alpha, alpha, alpha, alpha);
        if (KDA) g = *reinterpret_cast<const float4*>(AL + t * ks + k0);
        f[j][0] = f[j][0] * g.x + d * kn.x;
        f[j][1] = f[j][1] * g.y + d * kn.y;
        f[j][2] = f[j][2] * g.z + d * kn.z;
        f[j][3] = f[j][3] * g.w + d * kn.w;
      }
      if (lane == 0) out_at(in.o, b, t, hv, r, o);
    }
#pragma unroll
    for (int j = 0; j < SHARED_MAX_J; ++j) {
      const int k0 = 4 * (lane + 32 * j);
      if (k0 < K) *reinterpret_cast<float4*>(TL + int64_t(r) * ks + k0) = make_float4(f[j][0], f[j][1], f[j][2], f[j][3]);
    }
  }
  __syncthreads();  // every read of the old tile is done; the new one is complete
  quant::dev::encode_tile(e.f, [&](int64_t r, int64_t k) { return TL[r * ks + k]; }, tile, e.sr,
                          e.sr ? quant::dev::sr_stream(e.seed, uint64_t(s * HV + hv), e.step) : 0);
}

template <bool KDA>
void launch(const TokenArgs& in, const SharedArgs& e, unsigned grid, size_t smem, cudaStream_t stream,
            const char* fn) {
  cuda_util::launch_smem<delta_decode_shared_kernel<KDA>>(dim3(grid), dim3(SHARED_THREADS), smem, stream, false, fn,
                                                          in, e);
  cuda_util::check_launch(fn);
}

}  // namespace
}  // namespace cuda_impl

void cuda::decode_shared(const DeltaStep& step, const Tensor& packed_state, const QuantLayout& L,
                         const QuantRounding& rounding, const Dims& d, const Exec& exec) {
  using namespace cuda_impl;
  const char* fn = "delta_decode_shared";
  cuda_util::require_supported_device(fn);
  const bool kda = d.family == DeltaFamily::kda;
  check::require(d.K <= 128 * SHARED_MAX_J, fn, "k",
                 "the cuda backend supports K <= " + std::to_string(128 * SHARED_MAX_J) +
                     " in shared mode, got K = " + std::to_string(d.K));
  check::require(d.B * d.HV <= INT32_MAX, fn, "v", "expected B·HV < 2^31 on the cuda backend");
  const int ks = int(round4(d.K));
  const size_t smem = size_t(4 * shared_smem_floats(kda, int(d.T), ks, int(d.V)));
  int dev = 0, optin = 0;
  cuda_util::check(cudaGetDevice(&dev), fn, "cudaGetDevice");
  cuda_util::check(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev), fn,
                   "device attribute");
  check::require(smem <= size_t(optin), fn, "v",
                 "shared mode needs " + std::to_string(smem) + " bytes of shared memory per block (T = " +
                     std::to_string(d.T) + ", V = " + std::to_string(d.V) + ", K = " + std::to_string(d.K) +
                     "), the device offers " + std::to_string(optin));
  if (d.B == 0) return;

  const TokenArgs in = cuda::step_tokens(step, d);

  SharedArgs e;
  e.slot = Index{step.slot.data, step.slot.dtype, step.slot.stride[0], 0};
  e.pad = step.pad_slot_id;
  e.S = d.S;
  e.B = d.B;
  e.T = int(d.T);
  e.ks = ks;
  e.packed = static_cast<uint8_t*>(packed_state.data);
  e.pk_s = packed_state.stride[0];
  e.pk_h = packed_state.stride[1];
  e.f = quant::dev::tile_fmt(L);
  e.sr = rounding.stochastic;
  e.seed = rounding.seed;
  e.step = rounding.step;
  e.status = exec.device_status;

  const unsigned grid = unsigned(d.B * d.HV);
  const cudaStream_t stream = cuda_util::stream_of(exec);
  if (kda) launch<true>(in, e, grid, smem, stream, fn);
  else launch<false>(in, e, grid, smem, stream, fn);
}

}  // namespace replayssm::delta
