// The device E4M3 encoders on every fp32 bit pattern. e4m3x2_encode (and so
// e4m3x2_encode_finite, its finite case) is the hardware conversion alone;
// it must give, for all 2^32 inputs in both halves of the pair, the codes of
// the guarded form it replaced, which sent |v| < 2^-11 (fp32 subnormals
// among them) to ±0 before the conversion so that the hardware's handling of
// subnormal inputs never mattered. QuantGpu.* compare the encoders with the
// CPU oracle (quant_oracle.cpp) on every representable value, ties, tiny
// scales and specials; this test shows that dropping the guard changes no
// code anywhere.
#include <cuda_fp8.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>

#include "gpu_util.h"
#include "quant/quant.cuh"

namespace replayssm::test {
namespace {

// The guarded form (quant.cuh before the guard was dropped).
__device__ uint32_t e4m3x2_guarded(float lo, float hi) {
  lo = fabsf(lo) < 0x1p-11f ? copysignf(0.f, lo) : lo;
  hi = fabsf(hi) < 0x1p-11f ? copysignf(0.f, hi) : hi;
  uint32_t c = __nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3);
  if (!isfinite(lo)) c = (c & 0xFF00u) | (isinf(lo) && lo < 0.f ? 0xFFu : 0x7Fu);
  if (!isfinite(hi)) c = (c & 0x00FFu) | ((isinf(hi) && hi < 0.f ? 0xFFu : 0x7Fu) << 8);
  return c;
}

struct Mismatch {
  unsigned long long count;
  uint32_t first;  // an input bit pattern of a mismatch (the lo value)
};

// Every u in [0, 2^32): lo = u, hi = the bit reversal of u (a bijection, so
// the hi half also sees every pattern, paired with another value).
__global__ void e4m3_exhaustive_kernel(Mismatch* m) {
  const uint64_t n = uint64_t(1) << 32, stride = uint64_t(gridDim.x) * blockDim.x;
  unsigned long long bad = 0;
  uint32_t first = 0;
  for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const uint32_t u = uint32_t(i);
    const float lo = __uint_as_float(u), hi = __uint_as_float(__brev(u));
    if (quant::dev::e4m3x2_encode(lo, hi) != e4m3x2_guarded(lo, hi)) {
      if (bad == 0) first = u;
      ++bad;
    }
  }
  if (bad) {
    atomicAdd(&m->count, bad);
    m->first = first;
  }
}

TEST(QuantGpuExhaustive, E4m3EncodeEqualsGuardedFormOnEveryInput) {
  RSSM_SKIP_WITHOUT_GPU();
  Mismatch* d = nullptr;
  RSSM_CUDA_OK(cudaMalloc(&d, sizeof(Mismatch)));
  RSSM_CUDA_OK(cudaMemset(d, 0, sizeof(Mismatch)));
  e4m3_exhaustive_kernel<<<1024, 256>>>(d);
  RSSM_CUDA_OK(cudaGetLastError());
  RSSM_CUDA_OK(cudaDeviceSynchronize());
  Mismatch h{};
  RSSM_CUDA_OK(cudaMemcpy(&h, d, sizeof(Mismatch), cudaMemcpyDeviceToHost));
  RSSM_CUDA_OK(cudaFree(d));
  float f;
  std::memcpy(&f, &h.first, 4);
  EXPECT_EQ(h.count, 0ull) << "e.g. input bits 0x" << std::hex << h.first << " (" << f << ")";
}

}  // namespace
}  // namespace replayssm::test
