// Helpers of the shared-mode GPU tests (shared_gpu_test.cpp,
// shared_delta_gpu_test.cpp): host/device pairs, packed-state comparison
// within one quantization step, reference errors.
#pragma once
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gpu_util.h"
#include "quant/codec.h"
#include "replayssm/delta.h"
#include "replayssm/dual.h"
#include "replayssm/mamba2.h"

namespace replayssm::test {
namespace {

const ReadFormat FORMATS[] = {ReadFormat::bf16, ReadFormat::f16, ReadFormat::fp8_e4m3, ReadFormat::nvfp4};

Exec cpu_exec() {
  Exec e;
  e.backend = Backend::cpu;
  return e;
}
Exec gpu_exec() {
  Exec e;
  e.backend = Backend::cuda;
  return e;
}

// One tensor on the host and (after up()) on the device.
struct Pair {
  HostTensor h;
  std::unique_ptr<DeviceTensor> d;
  void make(DType dt, const std::vector<int64_t>& shape) { h.reset(dt, shape); }
  void up() {
    if (!d) d = std::make_unique<DeviceTensor>(h);
    else d->upload(h);
  }
  HostTensor fetch() const { return d->to_host(); }
  Tensor at(bool dev) const { return h.t().data ? (dev ? d->t() : h.t()) : Tensor{}; }
};

bool fmt_ok(ReadFormat f, int64_t K) {
  return f == ReadFormat::fp8_e4m3 ? K % 32 == 0 : f == ReadFormat::nvfp4 ? K % 16 == 0 : true;
}

// ---- packed-state comparison ---------------------------------------------------

// One quantization step of format f at magnitude m with block scale `scale`
// (fp8: 2^k; nvfp4: e4m3(s_b)·t; unused for bf16 / f16).
double step_at(ReadFormat f, double m, double scale) {
  auto e2 = [](double v) { return std::floor(std::log2(v)); };
  switch (f) {
    case ReadFormat::bf16: return m < 0x1p-126 ? 0x1p-133 : std::exp2(e2(m) - 7);
    case ReadFormat::f16: return m < 0x1p-14 ? 0x1p-24 : std::exp2(e2(m) - 10);
    case ReadFormat::fp8_e4m3: {
      const double y = m / scale;
      return (y < 0x1p-6 ? 0x1p-9 : std::exp2(e2(y) - 3)) * scale;
    }
    case ReadFormat::nvfp4: {
      const double y = scale > 0 ? m / scale : 0;
      return (y < 2 ? 0.5 : y < 4 ? 1.0 : 2.0) * scale;
    }
  }
  return 0;
}
// Block scale of element (r, k) of a packed tile.
double scale_at(const QuantLayout& L, const uint8_t* tile, int64_t r, int64_t k) {
  if (L.format == ReadFormat::fp8_e4m3)
    return std::exp2(double(tile[L.scale_offset + r * (L.K / 32) + k / 32]) - 127);
  if (L.format == ReadFormat::nvfp4) {
    float t;
    std::memcpy(&t, tile + L.tensor_scale_offset, 4);
    return double(quant::e4m3_decode(tile[L.scale_offset + r * (L.K / 16) + k / 16])) * double(t);
  }
  return 1;
}

struct PoolDiff {
  int64_t tiles = 0, tiles_differ = 0, elems = 0, elems_differ = 0;
  int64_t over_one_step = 0;  // |a − b| > one step (information)
  int64_t beyond = 0;         // |a − b| > the allowed bound (failure)
  double worst = 0;           // largest |a − b| / step
  void add(const PoolDiff& o) {
    tiles += o.tiles, tiles_differ += o.tiles_differ, elems += o.elems, elems_differ += o.elems_differ;
    over_one_step += o.over_one_step, beyond += o.beyond;
    worst = std::max(worst, o.worst);
  }
};

// The GPU and the CPU run the recurrence in fp32 in different orders (FMA
// contraction, summation order), so the fp32 tiles they encode differ by a
// few ulps of the terms. Where the new state nearly cancels (|S| ≪ its
// terms) that is many steps of a fine format at |S|: measured up to 76 bf16
// steps at single elements of 12M (model shapes, T = 4), and up to 1.33
// NVFP4 steps with stochastic rounding where the two tile scales differ. The
// bound is therefore one step (two with stochastic rounding: the grids of
// two different block scales, each value on either neighbour) plus
// FP32_SLACK of the tile's largest magnitude: the fp32 discrepancy of T <= 4
// tokens is at most ~10 ulps of terms of that size (~6e-7), while a step
// at a third of the maximum is 1.3e-3 (bf16) and 1.6e-4 (f16) of it.
constexpr double FP32_SLACK = 5e-5;

// Decodes the packed pools a and b ([S, heads, tile_bytes], slots listed) on
// the cpu and compares them element by element.
PoolDiff compare_pools(const QuantLayout& L, const HostTensor& a, const HostTensor& b,
                       const std::vector<int64_t>& slots, bool sr) {
  const int64_t heads = a.t().shape[1], tb = L.tile_bytes, R = L.R, K = L.K;
  PoolDiff d;
  HostTensor ya(DType::f32, {1, R, K}), yb(DType::f32, {1, R, K});
  for (int64_t s : slots)
    for (int64_t h = 0; h < heads; ++h) {
      const uint8_t* ta = a.as<uint8_t>() + (s * heads + h) * tb;
      const uint8_t* tbp = b.as<uint8_t>() + (s * heads + h) * tb;
      ++d.tiles;
      if (std::memcmp(ta, tbp, size_t(tb)) == 0) {
        d.elems += R * K;
        continue;
      }
      ++d.tiles_differ;
      Tensor pa = Tensor::view(const_cast<uint8_t*>(ta), DType::u8, {1, tb});
      Tensor pb = Tensor::view(const_cast<uint8_t*>(tbp), DType::u8, {1, tb});
      quant_unpack(L.format, pa, ya, cpu_exec());
      quant_unpack(L.format, pb, yb, cpu_exec());
      double amax = 0;
      for (int64_t i = 0; i < R * K; ++i)
        for (double v : {ya.get(i), yb.get(i)})
          if (std::isfinite(v)) amax = std::max(amax, std::fabs(v));
      for (int64_t r = 0; r < R; ++r)
        for (int64_t k = 0; k < K; ++k) {
          ++d.elems;
          const double va = ya.get(r * K + k), vb = yb.get(r * K + k);
          if (va == vb || (std::isnan(va) && std::isnan(vb))) continue;
          ++d.elems_differ;
          const double m = std::max(std::fabs(va), std::fabs(vb));
          const double st = step_at(L.format, m, std::max(scale_at(L, ta, r, k), scale_at(L, tbp, r, k)));
          const double diff = std::fabs(va - vb), ratio = diff / st;
          d.worst = std::max(d.worst, std::isnan(ratio) ? 1e30 : ratio);
          if (!(ratio <= 1.0 + 1e-6)) ++d.over_one_step;
          if (!(diff <= (sr ? 2.0 : 1.0) * st * (1 + 1e-6) + FP32_SLACK * amax)) ++d.beyond;
        }
    }
  return d;
}

// Decoded state of the listed slots as one vector.
std::vector<double> decoded(const QuantLayout& L, const HostTensor& pool, const std::vector<int64_t>& slots) {
  const int64_t heads = pool.t().shape[1], tb = L.tile_bytes;
  std::vector<double> v;
  HostTensor y(DType::f32, {heads, L.R, L.K});
  for (int64_t s : slots) {
    Tensor p = Tensor::view(pool.as<uint8_t>() + s * heads * tb, DType::u8, {heads, tb});
    quant_unpack(L.format, p, y, cpu_exec());
    const auto f = y.to_f64();
    v.insert(v.end(), f.begin(), f.end());
  }
  return v;
}

// Values of the listed slots of a state [S, heads, R, K] as one vector.
std::vector<double> slot_values(const HostTensor& st, const std::vector<int64_t>& slots) {
  const int64_t per = st.numel() / st.t().shape[0];
  std::vector<double> v;
  for (int64_t s : slots)
    for (int64_t i = 0; i < per; ++i) v.push_back(st.get(s * per + i));
  return v;
}
// An fp32 state [S, heads, R, K] decoded from a packed pool (the unquantised
// reference trajectory of the long runs starts there).
HostTensor unpacked(const QuantLayout& L, const HostTensor& pool) {
  const int64_t S = pool.t().shape[0], heads = pool.t().shape[1];
  HostTensor st(DType::f32, {S, heads, L.R, L.K});
  Tensor flat = Tensor::view(pool.data(), DType::u8, {S * heads, L.tile_bytes});
  Tensor out = Tensor::view(st.data(), DType::f32, {S * heads, L.R, L.K});
  quant_unpack(L.format, flat, out, cpu_exec());
  return st;
}

// Long runs: the shared CPU run's own error against an fp32 state run
// (mamba2_decode / delta_decode on the cpu from the same initial state).
struct RefErr {
  double state = 0, out = 0;
};

// A packed pool [S, heads, tile] holding quant_pack of N(0, sd) states.
void fill_pool(Pair& pool, const QuantLayout& L, int64_t S, int64_t heads, double sd, std::mt19937& rng) {
  HostTensor x(DType::f32, {S * heads, L.R, L.K});
  x.fill_normal(rng, 0, sd);
  pool.make(DType::u8, {S, heads, L.tile_bytes});
  Tensor flat = Tensor::view(pool.h.data(), DType::u8, {S * heads, L.tile_bytes});
  quant_pack(L.format, x, flat, cpu_exec());
  pool.up();
}

std::vector<int64_t> real_slots(const std::vector<int64_t>& slots) {
  std::vector<int64_t> v;
  for (int64_t s : slots)
    if (s >= 0) v.push_back(s);
  return v;
}

double out_tol(DType act) { return std::max(tolerance(act), 1e-4); }

// Pad rows of y [B, T, heads, R] are zero.
bool pad_rows_zero(const HostTensor& y, const std::vector<int64_t>& slots) {
  const int64_t per = y.numel() / y.t().shape[0];
  for (size_t b = 0; b < slots.size(); ++b)
    if (slots[b] < 0)
      for (int64_t i = 0; i < per; ++i)
        if (y.get(int64_t(b) * per + i) != 0.0) return false;
  return true;
}

// RSSM_SHARED_QUICK=1 (sanitizer runs): odd shapes only.
bool quick() { return std::getenv("RSSM_SHARED_QUICK") != nullptr; }


}  // namespace
}  // namespace replayssm::test
