// Shared-quantised Mamba-2 decode on the cuda backend (include/replayssm/dual.h):
// one block per (row b, head h). The block decodes the packed tile [P, N] of
// (slot, h), applies the T tokens in fp32 as mamba2_decode does
//   S ← a_t S + (δ_t x_t[p]) B_t,  a_t = e^{δ_t A},  y_t[p] = S·C_t + D x_t[p]
// (y ← y·silu(z) with z), keeps the new tile in shared memory and re-encodes
// it in place (tile_codec.cuh: round to nearest even, or stochastic with the
// tile id slot·H + h). A warp owns a state row p, its lanes 4-value chunks
// along N. Stream-ordered, no allocation, no host synchronisation.
#include <climits>
#include <string>

#include "core/check.h"
#include "cuda/runtime.h"
#include "mamba2/kernel_common.cuh"
#include "mamba2/launchers.cuh"
#include "mamba2/shared.h"
#include "quant/tile_codec.cuh"

namespace replayssm::mamba2 {
namespace kern {
namespace {

constexpr int SHARED_THREADS = 256;
constexpr int SHARED_MAX_J = 4;  // chunks of 4 per lane: N <= 512

struct SharedArgs {
  uint8_t* packed = nullptr;  // [S, H, tile_bytes]
  int64_t pk_s = 0, pk_h = 0;  // bytes
  quant::dev::TileFmt f;
  bool sr = false;
  uint64_t seed = 0, step = 0;
  int ns = 0;  // row stride of the staged N-vectors and of the tile: N rounded up to 4
};

__host__ __device__ inline int round4(int n) { return (n + 3) / 4 * 4; }
// Shared memory (floats; regions start 16-byte aligned):
// B, C [T][ns] | x, z [T][P] | δ, a [T] | tile [P][ns].
__host__ __device__ inline int64_t shared_smem_floats(int T, int P, int ns, bool z) {
  return 2 * int64_t(T) * ns + int64_t(z ? 2 : 1) * round4(T * P) + 2 * round4(T) + int64_t(P) * ns;
}

template <DType AD>
__global__ void __launch_bounds__(SHARED_THREADS) mamba2_decode_shared_kernel(const Params p, const SharedArgs e) {
  extern __shared__ float4 smem4[];
  float* sm = reinterpret_cast<float*>(smem4);
  const int64_t b = blockIdx.x / p.H;
  const int h = int(blockIdx.x % p.H);
  const int tid = threadIdx.x, nthr = blockDim.x;

  // A call with a slot outside [0, S) writes nothing (every block sees it).
  int bad = 0;
  for (int64_t i = tid; i < p.B; i += nthr) {
    const int64_t s = row_slot(p, i);
    bad |= s != p.pad && (s < 0 || s >= p.S);
  }
  if (__syncthreads_or(bad)) {
    if (blockIdx.x == 0 && tid == 0) cuda_util::report(p.status, STATUS_BAD_SLOT);
    return;
  }
  const int T = p.T, P = p.P, N = p.N, ns = e.ns;
  const int64_t s = row_slot(p, b);
  if (s == p.pad) {
    for (int i = tid; i < T * P; i += nthr)
      st_act<AD>(p.y, b * p.y_b + (i / P) * p.y_t + int64_t(h) * p.y_h + i % P, 0.f);
    return;
  }

  const int g = h / p.hpg;
  float* Bs = sm;                           // [T][ns]
  float* Cs = Bs + T * ns;                  // [T][ns]
  float* xs = Cs + T * ns;                  // [T][P]
  float* zs = xs + round4(T * P);           // [T][P] (with z)
  float* dl = zs + (p.z ? round4(T * P) : 0);  // [T] δ_t
  float* al = dl + round4(T);               // [T] a_t
  float* tl = al + round4(T);               // [P][ns] the new tile
  for (int i = tid; i < 2 * T * ns; i += nthr) {
    const bool isC = i >= T * ns;
    const int c = isC ? i - T * ns : i, t = c / ns, n = c % ns;
    Bs[i] = n >= N ? 0.f
            : isC  ? ld_act<AD>(p.Cm, b * p.C_b + t * p.C_t + g * p.C_g + n)
                   : ld_act<AD>(p.Bm, b * p.B_b + t * p.B_t + g * p.B_g + n);
  }
  for (int i = tid; i < T * P; i += nthr) {
    const int t = i / P, pp = i % P;
    xs[i] = ld_act<AD>(p.x, b * p.x_b + t * p.x_t + int64_t(h) * p.x_h + pp);
    if (p.z) zs[i] = ld_act<AD>(p.z, b * p.z_b + t * p.z_t + int64_t(h) * p.z_h + pp);
  }
  for (int t = tid; t < T; t += nthr) {
    dl[t] = delta_of(p, b, t, h);
    al[t] = expf(dl[t] * A_of(p, h));
  }
  __syncthreads();

  uint8_t* tile = e.packed + s * e.pk_s + int64_t(h) * e.pk_h;
  const int lane = tid & 31, warp = tid >> 5, nwarps = nthr >> 5;
  const float Dh = D_of(p, h);
  for (int r = warp; r < P; r += nwarps) {
    float f[SHARED_MAX_J][4];
#pragma unroll
    for (int j = 0; j < SHARED_MAX_J; ++j) {
      const int k0 = 4 * (lane + 32 * j);
      if (k0 < N) quant::dev::decode_chunk(e.f, tile, r, k0, f[j]);
      else f[j][0] = f[j][1] = f[j][2] = f[j][3] = 0.f;
    }
    for (int t = 0; t < T; ++t) {
      const float xv = xs[t * P + r], a = al[t], dx = dl[t] * xv;
      float part = 0.f;
#pragma unroll
      for (int j = 0; j < SHARED_MAX_J; ++j) {
        const int k0 = 4 * (lane + 32 * j);
        if (k0 >= N) continue;
        axpby_smem<4>(f[j], a, dx, Bs + t * ns + k0);
        part += dot_smem<4>(f[j], Cs + t * ns + k0);
      }
      part = cuda_util::warp_sum(part);
      if (lane == 0) {
        float yv = fmaf(Dh, xv, part);
        if (p.z) yv = silu_gate(yv, zs[t * P + r]);
        st_act<AD>(p.y, b * p.y_b + t * p.y_t + int64_t(h) * p.y_h + r, yv);
      }
    }
#pragma unroll
    for (int j = 0; j < SHARED_MAX_J; ++j) {
      const int k0 = 4 * (lane + 32 * j);
      if (k0 < N) *reinterpret_cast<float4*>(tl + int64_t(r) * ns + k0) = make_float4(f[j][0], f[j][1], f[j][2], f[j][3]);
    }
  }
  __syncthreads();  // every read of the old tile is done; the new one is complete
  quant::dev::encode_tile(e.f, [&](int64_t r, int64_t k) { return tl[r * ns + k]; }, tile, e.sr,
                          e.sr ? quant::dev::sr_stream(e.seed, uint64_t(s * p.H + h), e.step) : 0);
}

template <DType AD>
void launch(const Params& p, const SharedArgs& e, unsigned grid, size_t smem, cudaStream_t stream,
            const char* fn) {
  cuda_util::launch_smem<mamba2_decode_shared_kernel<AD>>(dim3(grid), dim3(SHARED_THREADS), smem, stream, false, fn,
                                                          p, e);
  cuda_util::check_launch(fn);
}

}  // namespace
}  // namespace kern

void cuda::decode_shared(const Mamba2Step& step, const Tensor& packed_state, const QuantLayout& L,
                         const QuantRounding& rounding, const Dims& d, const Exec& exec) {
  const char* fn = "mamba2_decode_shared";
  cuda_util::require_supported_device(fn);
  check::require(d.N <= 128 * kern::SHARED_MAX_J, fn, "Bm",
                 "the cuda backend supports d_state N <= " + std::to_string(128 * kern::SHARED_MAX_J) +
                     " in shared mode, got N = " + std::to_string(d.N));
  check::require(d.B * d.H <= INT32_MAX, fn, "x", "expected B·H < 2^31 on the cuda backend");
  const int ns = int((d.N + 3) / 4 * 4);
  const size_t smem = size_t(4 * kern::shared_smem_floats(int(d.T), int(d.P), ns, step.z.defined()));
  int dev = 0, optin = 0;
  cuda_util::check(cudaGetDevice(&dev), fn, "cudaGetDevice");
  cuda_util::check(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev), fn,
                   "device attribute");
  check::require(smem <= size_t(optin), fn, "x",
                 "shared mode needs " + std::to_string(smem) + " bytes of shared memory per block (T = " +
                     std::to_string(d.T) + ", P = " + std::to_string(d.P) + ", N = " + std::to_string(d.N) +
                     "), the device offers " + std::to_string(optin));
  if (d.B == 0) return;

  kern::Params p;
  cuda::set_dims(p, d);
  cuda::set_step(p, step);
  cuda::set_slot(p, step.slot, step.pad_slot_id);
  p.status = exec.device_status;

  kern::SharedArgs e;
  e.packed = static_cast<uint8_t*>(packed_state.data);
  e.pk_s = packed_state.stride[0];
  e.pk_h = packed_state.stride[1];
  e.f = quant::dev::tile_fmt(L);
  e.sr = rounding.stochastic;
  e.seed = rounding.seed;
  e.step = rounding.step;
  e.ns = ns;

  const unsigned grid = unsigned(d.B * d.H);
  const cudaStream_t stream = cuda_util::stream_of(exec);
  switch (step.x.dtype) {
    case DType::f32: return kern::launch<DType::f32>(p, e, grid, smem, stream, fn);
    case DType::f16: return kern::launch<DType::f16>(p, e, grid, smem, stream, fn);
    case DType::bf16: return kern::launch<DType::bf16>(p, e, grid, smem, stream, fn);
    default: check::fail(fn, "x", std::string("unsupported activation dtype ") + dtype_name(step.x.dtype));
  }
}

}  // namespace replayssm::mamba2
