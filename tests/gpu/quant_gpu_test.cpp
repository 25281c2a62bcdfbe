// Read-copy formats on the GPU: device pack writes exactly the CPU's bytes
// (padding included) for every format, input dtype and generator, and device
// unpack decodes exactly as the CPU does, over every code and scale byte.
#include <cuda_fp4.h>
#include <cuda_fp8.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gpu_util.h"
#include "quant/codec.h"
#include "quant_test_util.h"
#include "replayssm/quant.h"

namespace replayssm::test {
namespace {

const ReadFormat FORMATS[] = {ReadFormat::bf16, ReadFormat::f16, ReadFormat::fp8_e4m3, ReadFormat::nvfp4};

Exec on(Backend b) {
  Exec e;
  e.backend = b;
  return e;
}

// A host input tile set [n, R, K] of dtype dt holding x (rounded to dt).
HostTensor host_input(const std::vector<float>& x, DType dt, int64_t n, int64_t R, int64_t K) {
  HostTensor in(dt, {n, R, K});
  for (int64_t i = 0; i < in.numel(); ++i) in.set(i, double(x[size_t(i)]));
  return in;
}

// Unpacks `packed` (host bytes) on the CPU and on the GPU; expects equality.
void expect_same_unpack(ReadFormat f, const HostTensor& packed, int64_t n, int64_t R, int64_t K,
                        const char* what) {
  HostTensor y_cpu(DType::f32, {n, R, K});
  y_cpu.fill_nan();
  quant_unpack(f, packed, y_cpu, on(Backend::cpu));
  DeviceTensor d_packed(packed);
  HostTensor poison(DType::f32, {n, R, K});
  poison.fill(-777.0);
  DeviceTensor d_y(poison);
  quant_unpack(f, d_packed, d_y, on(Backend::cuda));
  RSSM_CUDA_OK(cudaDeviceSynchronize());
  const HostTensor y_gpu = d_y.to_host();
  const int64_t bad = first_float_mismatch(y_gpu.as<float>(), y_cpu.as<float>(), y_cpu.numel());
  ASSERT_EQ(bad, -1) << read_format_name(f) << " " << what << " value " << bad << ": gpu "
                     << y_gpu.as<float>()[std::max<int64_t>(bad, 0)] << " cpu "
                     << y_cpu.as<float>()[std::max<int64_t>(bad, 0)];
}

TEST(QuantGpu, PackEqualsCpuBytes) {
  RSSM_SKIP_WITHOUT_GPU();
  struct Shape { int64_t n, R, K; };
  uint64_t seed = 100;
  for (Shape s : {Shape{64, 128, 128}, Shape{7, 5, 32}, Shape{3, 80, 64}})
    for (ReadFormat f : FORMATS)
      for (DType dt : {DType::f32, DType::bf16, DType::f16})
        for (QuantGen g : all_quant_gens()) {
          const auto x = quant_tiles(g, s.n, s.R, s.K, seed++);
          const HostTensor in = host_input(x, dt, s.n, s.R, s.K);
          const QuantLayout L = quant_layout(f, s.R, s.K);
          HostTensor p_cpu(DType::u8, {s.n, L.tile_bytes});
          quant_pack(f, in, p_cpu, on(Backend::cpu));

          HostTensor garbage(DType::u8, {s.n, L.tile_bytes});
          std::memset(garbage.data(), 0xAB, garbage.bytes());
          DeviceTensor d_in(in), d_p(garbage);
          quant_pack(f, d_in, d_p, on(Backend::cuda));
          RSSM_CUDA_OK(cudaDeviceSynchronize());
          const HostTensor p_gpu = d_p.to_host();
          const uint8_t *a = p_gpu.as<uint8_t>(), *b = p_cpu.as<uint8_t>();
          for (size_t i = 0; i < p_cpu.bytes(); ++i)
            ASSERT_EQ(int(a[i]), int(b[i]))
                << read_format_name(f) << " in " << dtype_name(dt) << " " << quant_gen_name(g)
                << " tile " << int64_t(i) / L.tile_bytes << " byte " << int64_t(i) % L.tile_bytes
                << " of shape [" << s.R << ", " << s.K << "]";
          expect_same_unpack(f, p_cpu, s.n, s.R, s.K, quant_gen_name(g));
        }
}

// Every code and every scale byte through the device decoder.
TEST(QuantGpu, UnpackEveryCodeEqualsCpu) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(42);
  {  // bf16 / f16: all 65,536 codes in one tile [512, 128].
    const QuantLayout L = quant_layout(ReadFormat::bf16, 512, 128);
    HostTensor p(DType::u8, {1, L.tile_bytes});
    for (uint32_t c = 0; c < 65536; ++c) std::memcpy(p.as<uint8_t>() + 2 * c, &c, 2);
    expect_same_unpack(ReadFormat::bf16, p, 1, 512, 128, "all codes");
    expect_same_unpack(ReadFormat::f16, p, 1, 512, 128, "all codes");
  }
  {  // fp8: tile [248, 256]: row r uses block exponent byte r (0..247, all
     // that pack can write); each block holds 32 codes, the 8 blocks of a
     // row all 256 codes.
    const int64_t R = 248, K = 256;
    const QuantLayout L = quant_layout(ReadFormat::fp8_e4m3, R, K);
    HostTensor p(DType::u8, {1, L.tile_bytes});
    uint8_t* t = p.as<uint8_t>();
    for (int64_t r = 0; r < R; ++r) {
      for (int64_t k = 0; k < K; ++k) t[r * K + k] = uint8_t(k);
      for (int64_t b = 0; b < K / 32; ++b) t[L.scale_offset + r * (K / 32) + b] = uint8_t(r);
    }
    expect_same_unpack(ReadFormat::fp8_e4m3, p, 1, R, K, "all codes x all exponents");
  }
  {  // nvfp4: tiles [256, 512]: block scale byte = row (all 256 E4M3 codes,
     // NaN included), each row's 256 code bytes = all nibble pairs; tile
     // scales t from zero through subnormal-product ranges to large.
    const int64_t R = 256, K = 512;
    const float T[] = {0.f, 1.f, 1.f / 2688.f, 0x1p-111f, 3.7e-20f, 1.2345e10f, 1.26e35f};
    const int64_t n = int64_t(sizeof(T) / sizeof(T[0]));
    const QuantLayout L = quant_layout(ReadFormat::nvfp4, R, K);
    HostTensor p(DType::u8, {n, L.tile_bytes});
    for (int64_t i = 0; i < n; ++i) {
      uint8_t* t = p.as<uint8_t>() + i * L.tile_bytes;
      for (int64_t r = 0; r < R; ++r) {
        for (int64_t k = 0; k < K / 2; ++k) t[r * (K / 2) + k] = uint8_t(k);
        for (int64_t b = 0; b < K / 16; ++b) t[L.scale_offset + r * (K / 16) + b] = uint8_t(r);
      }
      std::memcpy(t + L.tensor_scale_offset, &T[i], 4);
    }
    expect_same_unpack(ReadFormat::nvfp4, p, n, R, K, "all codes x all scales");
  }
  {  // Random bytes (scale and t in the producible ranges).
    const int64_t n = 16, R = 32, K = 128;
    for (ReadFormat f : {ReadFormat::fp8_e4m3, ReadFormat::nvfp4}) {
      const QuantLayout L = quant_layout(f, R, K);
      HostTensor p(DType::u8, {n, L.tile_bytes});
      uint8_t* b = p.as<uint8_t>();
      for (size_t i = 0; i < p.bytes(); ++i) b[i] = uint8_t(rng());
      for (int64_t i = 0; i < n; ++i) {
        uint8_t* t = b + i * L.tile_bytes;
        if (f == ReadFormat::fp8_e4m3)
          for (int64_t j = 0; j < R * L.scale_row_bytes; ++j) t[L.scale_offset + j] %= 248;
        else {
          const float ts = std::ldexp(1.f + float(rng() % 1000) / 1000.f, int(rng() % 200) - 111);
          std::memcpy(t + L.tensor_scale_offset, &ts, 4);
        }
      }
      expect_same_unpack(f, p, n, R, K, "random bytes");
    }
  }
}

// Host-side, no GPU needed: the fast codecs agree with CUDA's own host
// conversions (cuda_fp8.h satfinite E4M3, cuda_fp4.h RN E2M1), the
// definitions the device instructions implement.
TEST(QuantGpu, HostCodecsMatchCudaHeaders) {
  for (int c = 0; c < 256; ++c) {
    const __half_raw h = __nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t(c), __NV_E4M3);
    const float a = f16_to_f32(h.x), b = quant::e4m3_decode(uint8_t(c));
    ASSERT_EQ(first_float_mismatch(&a, &b, 1), -1) << c;
  }
  std::mt19937 rng(1);
  for (int i = 0; i < 4'000'000; ++i) {
    float v = std::ldexp(float(rng() % 100000) / 1000.f, int(rng() % 30) - 20) * ((rng() & 1) ? -1.f : 1.f);
    if (i % 3 == 0) {
      const uint32_t u = rng();
      std::memcpy(&v, &u, 4);
      if (!std::isfinite(v)) continue;
    }
    ASSERT_EQ(int(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3)), int(quant::e4m3_encode(v))) << v;
    const float w = std::ldexp(float(rng() % 1000000) / 100000.f, int(rng() % 6) - 3) * ((rng() & 1) ? -1.f : 1.f);
    ASSERT_EQ(int(__nv_cvt_float_to_fp4(w, __NV_E2M1, cudaRoundNearest) & 0xF), int(quant::e2m1_encode(w))) << w;
  }
  for (float m : {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.f, 6.f, 7.f})
    for (float sgn : {1.f, -1.f})
      ASSERT_EQ(int(__nv_cvt_float_to_fp4(sgn * m, __NV_E2M1, cudaRoundNearest) & 0xF),
                int(quant::e2m1_encode(sgn * m))) << sgn * m;
}

TEST(QuantGpu, EmptyAndRejected) {
  RSSM_SKIP_WITHOUT_GPU();
  const QuantLayout L = quant_layout(ReadFormat::nvfp4, 4, 32);
  HostTensor in(DType::f32, {0, 4, 32}), packed(DType::u8, {0, L.tile_bytes});
  DeviceTensor d_in(in), d_p(packed);
  EXPECT_NO_THROW(quant_pack(ReadFormat::nvfp4, d_in, d_p, on(Backend::cuda)));
  HostTensor host_p(DType::u8, {0, L.tile_bytes});
  EXPECT_THROW(quant_pack(ReadFormat::nvfp4, d_in, host_p, on(Backend::cuda)), Error);
}

}  // namespace
}  // namespace replayssm::test
