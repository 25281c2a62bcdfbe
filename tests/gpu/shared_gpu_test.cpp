// Shared-quantised mode on the cuda backend against the cpu backend on host
// copies of the same bytes: quant_pack_stochastic byte for byte; Mamba-2,
// GDN and KDA shared decode (every format, round to nearest and stochastic,
// T = 1 and 4, model shapes of design §6 and odd shapes, a pad row): outputs
// close, packed states within one quantization step per element plus fp32
// slack (compare_pools; the share of tiles whose bytes differ printed);
// 200-step runs against the CPU's own error; errors write nothing; a
// captured CUDA graph replays like direct calls.
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

// ---- quant_pack_stochastic ---------------------------------------------------------

TEST(SharedGpu, StochasticPackEqualsCpu) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(11);
  struct Sh { int64_t n, R, K; };
  int checked = 0;
  for (ReadFormat f : FORMATS)
    for (Sh sh : {Sh{6, 80, 128}, Sh{3, 5, 64}, Sh{2, 3, 37}}) {
      if (!fmt_ok(f, sh.K)) continue;
      for (int gen = 0; gen < 5; ++gen) {
        HostTensor x(DType::f32, {sh.n, sh.R, sh.K});
        x.fill_normal(rng);
        std::uniform_real_distribution<double> u(0, 1);
        for (int64_t i = 0; i < x.numel(); ++i) {
          if (gen == 1) x.set(i, x.get(i) * std::pow(10.0, 8 * u(rng) - 4));  // heavy tails
          if (gen == 2 && u(rng) < 0.02) x.set(i, u(rng) < 0.5 ? NAN : (u(rng) < 0.5 ? INFINITY : -INFINITY));
          if (gen == 3) x.set(i, i / (sh.R * sh.K) == 0 ? 0.0 : x.get(i) * 1e-32);  // a zero tile, tiny tiles
          if (gen == 4 && u(rng) < 0.3) x.set(i, 0.0);
        }
        Pair ids;
        ids.make(DType::i64, {sh.n});
        for (int64_t i = 0; i < sh.n; ++i) ids.h.set(i, double(1000 + 7 * i));
        ids.up();
        const int64_t tb = quant_layout(f, sh.R, sh.K).tile_bytes;
        DeviceTensor dx(x);
        for (uint64_t seed : {0ull, 7ull, 0x8000000000000005ull})
          for (uint64_t step : {0ull, 1ull, 12345ull})
            for (bool with_ids : {false, true}) {
              HostTensor want(DType::u8, {sh.n, tb}), got(DType::u8, {sh.n, tb});
              std::memset(want.data(), 0xAB, want.bytes());
              std::memset(got.data(), 0xCD, got.bytes());
              DeviceTensor dgot(got);
              const QuantRounding r{true, seed, step};
              quant_pack_stochastic(f, x, want, with_ids ? ids.h.t() : Tensor{}, r, cpu_exec());
              quant_pack_stochastic(f, dx, dgot, with_ids ? ids.d->t() : Tensor{}, r, gpu_exec());
              dgot.download(got);
              ASSERT_TRUE(got.bytes_equal(want)) << read_format_name(f) << " gen " << gen << " R " << sh.R
                                                 << " K " << sh.K << " seed " << seed << " step " << step;
              ++checked;
            }
        // Round to nearest: quant_pack's bytes.
        HostTensor want(DType::u8, {sh.n, tb}), got(DType::u8, {sh.n, tb});
        DeviceTensor dgot(got);
        quant_pack(f, x, want, cpu_exec());
        quant_pack_stochastic(f, dx, dgot, Tensor{}, QuantRounding{false, 3, 4}, gpu_exec());
        dgot.download(got);
        ASSERT_TRUE(got.bytes_equal(want)) << read_format_name(f) << " RNE";
      }
    }
  std::printf("[shared] quant_pack_stochastic: %d GPU/CPU comparisons, all byte-identical\n", checked);
}

TEST(SharedGpu, StochasticPackErrors) {
  RSSM_SKIP_WITHOUT_GPU();
  HostTensor x(DType::f32, {2, 4, 32});
  DeviceTensor dx(x);
  const int64_t tb = quant_layout(ReadFormat::fp8_e4m3, 4, 32).tile_bytes;
  HostTensor p(DType::u8, {2, tb + 16});
  DeviceTensor dp(p);
  const QuantRounding r{true, 1, 2};
  auto arg_of = [&](auto&& fn) -> std::string {
    try {
      fn();
    } catch (const Error& e) {
      return e.argument();
    }
    return "(none)";
  };
  EXPECT_EQ(arg_of([&] { quant_pack_stochastic(ReadFormat::fp8_e4m3, dx, dp, Tensor{}, r, gpu_exec()); }), "packed");
  HostTensor ok(DType::u8, {2, tb});
  EXPECT_EQ(arg_of([&] { quant_pack_stochastic(ReadFormat::fp8_e4m3, x, ok, Tensor{}, r, gpu_exec()); }), "in");
  EXPECT_TRUE(dp.to_host().bytes_equal(p));
}

// ---- Mamba-2 -----------------------------------------------------------------------

struct M2Shape {
  int64_t H, P, N, G;
};
std::string m2_name(const M2Shape& s) {
  return "H" + std::to_string(s.H) + "-P" + std::to_string(s.P) + "-N" + std::to_string(s.N) + "-G" +
         std::to_string(s.G);
}

struct M2Layer {
  Pair A, dt_bias, D;
  M2Layer(const M2Shape& s, std::mt19937& rng) {
    A.make(DType::f32, {s.H});
    dt_bias.make(DType::f32, {s.H});
    D.make(DType::f32, {s.H});
    std::uniform_real_distribution<double> u(0, 1);
    for (int64_t h = 0; h < s.H; ++h) {
      A.h.set(h, -std::exp(std::log(0.05) + u(rng) * std::log(8.0 / 0.05)));  // decays near 1 and far
      dt_bias.h.set(h, u(rng) - 0.5);
      D.h.set(h, 0.5 + u(rng));
    }
    A.up(), dt_bias.up(), D.up();
  }
};

struct M2Inputs {
  Pair x, dt, Bm, Cm, z, slot, y;
  M2Inputs(const M2Shape& s, int64_t B, int64_t T, DType act, bool with_z, const std::vector<int64_t>& slots,
           std::mt19937& rng) {
    x.make(act, {B, T, s.H, s.P});
    dt.make(DType::f32, {B, T, s.H});
    Bm.make(act, {B, T, s.G, s.N});
    Cm.make(act, {B, T, s.G, s.N});
    y.make(act, {B, T, s.H, s.P});
    x.h.fill_normal(rng);
    dt.h.fill_uniform(rng, -4.0, 1.0);
    Bm.h.fill_normal(rng, 0, 0.3);
    Cm.h.fill_normal(rng, 0, 0.3);
    if (with_z) {
      z.make(act, {B, T, s.H, s.P});
      z.h.fill_normal(rng);
      z.up();
    }
    slot = Pair{index_tensor(slots), nullptr};
    y.h.fill_nan();
    x.up(), dt.up(), Bm.up(), Cm.up(), slot.up(), y.up();
  }
  Mamba2Step view(const M2Layer& l, bool dev) const {
    Mamba2Step s;
    s.x = x.at(dev), s.dt = dt.at(dev), s.Bm = Bm.at(dev), s.Cm = Cm.at(dev), s.z = z.at(dev);
    s.A = l.A.at(dev), s.dt_bias = l.dt_bias.at(dev), s.D = l.D.at(dev);
    s.slot = slot.at(dev), s.y = y.at(dev);
    return s;
  }
};

// One run of `steps` shared steps on the cpu and the gpu from the same packed
// pool; returns the pool comparison after the last step (outputs checked per step).
PoolDiff m2_run(const M2Shape& s, ReadFormat f, bool sr, int64_t T, DType act, bool with_z, int steps,
                uint64_t seed, double* out_err, double* state_err, RefErr* ref = nullptr) {
  std::mt19937 rng{uint32_t(seed)};
  const std::vector<int64_t> slots = {4, -1, 1, 2};  // 3 rows + a pad row; slots 0, 3, 5 untouched
  const int64_t S = 6;
  const QuantLayout L = quant_layout(f, s.P, s.N);
  M2Layer layer(s, rng);
  Pair pool;
  fill_pool(pool, L, S, s.H, 0.5, rng);
  HostTensor cpu_pool(DType::u8, {S, s.H, L.tile_bytes});
  cpu_pool.copy_from(pool.h);
  const HostTensor before = pool.fetch();
  HostTensor ref_state = ref ? unpacked(L, pool.h) : HostTensor();
  double worst_out = 0;
  for (int it = 0; it < steps; ++it) {
    M2Inputs in(s, int64_t(slots.size()), T, act, with_z, slots, rng);
    const QuantRounding r{sr, seed * 31 + 1, uint64_t(it)};
    mamba2_decode_shared(in.view(layer, true), pool.d->t(), f, r, gpu_exec());
    mamba2_decode_shared(in.view(layer, false), cpu_pool, f, r, cpu_exec());
    const HostTensor y = in.y.fetch();
    if (!pad_rows_zero(y, slots)) ADD_FAILURE() << "pad row output not zero";
    worst_out = std::max(worst_out, rel_err(y.to_f64(), in.y.h.to_f64()));
    if (ref) {
      HostTensor yref(act, {int64_t(slots.size()), T, s.H, s.P});
      Mamba2Step rs = in.view(layer, false);
      rs.y = yref;
      mamba2_decode(rs, ref_state, cpu_exec());
      ref->out = std::max(ref->out, rel_err(in.y.h.to_f64(), yref.to_f64()));
    }
  }
  const HostTensor got = pool.fetch();
  if (ref) ref->state = rel_err(decoded(L, cpu_pool, real_slots(slots)), slot_values(ref_state, real_slots(slots)));
  for (int64_t u : {0, 3, 5})  // untouched slots keep their bytes
    EXPECT_EQ(std::memcmp(got.as<uint8_t>() + u * s.H * L.tile_bytes, before.as<uint8_t>() + u * s.H * L.tile_bytes,
                          size_t(s.H * L.tile_bytes)),
              0);
  *out_err = worst_out;
  *state_err = rel_err(decoded(L, got, real_slots(slots)), decoded(L, cpu_pool, real_slots(slots)));
  return compare_pools(L, got, cpu_pool, real_slots(slots), sr);
}

TEST(SharedGpu, Mamba2MatchesCpu) {
  RSSM_SKIP_WITHOUT_GPU();
  const M2Shape shapes[] = {{96, 80, 128, 8}, {64, 64, 128, 8}, {128, 64, 128, 8}, {256, 64, 128, 8},
                            {6, 80, 96, 3}, {5, 7, 37, 5}};
  const DType acts[] = {DType::bf16, DType::f16, DType::f32};
  int ci = 0;
  for (const M2Shape& s : shapes)
    for (ReadFormat f : FORMATS) {
      if (!fmt_ok(f, s.N) || (quick() && s.H > 8)) continue;
      PoolDiff total;
      for (bool sr : {false, true})
        for (int64_t T : {1, 4}) {
          const DType act = acts[ci % 3];
          const bool z = ci % 2 == 1;
          ++ci;
          double oe = 0, se = 0;
          const PoolDiff d = m2_run(s, f, sr, T, act, z, 1, uint64_t(ci), &oe, &se);
          EXPECT_LE(oe, out_tol(act)) << m2_name(s) << " " << read_format_name(f) << " sr " << sr << " T " << T;
          EXPECT_EQ(d.beyond, 0) << m2_name(s) << " " << read_format_name(f) << " sr " << sr << " T " << T
                                      << " worst " << d.worst;
          total.add(d);
        }
      std::printf("[shared] mamba2 %s %s: tiles differing %lld/%lld, elements %lld/%lld, over one step %lld, "
                  "worst %.3g step\n",
                  m2_name(s).c_str(), read_format_name(f), (long long)total.tiles_differ, (long long)total.tiles,
                  (long long)total.elems_differ, (long long)total.elems, (long long)total.over_one_step, total.worst);
    }
}

// 200 steps from the same pool: the GPU run stays as close to the CPU run as
// the CPU run is to the unquantised fp32 run (twice its error: two
// realisations of the rounding that differ only where fp32 ulps flip a
// rounding decision), outputs and states.
TEST(SharedGpu, Mamba2LongRun) {
  RSSM_SKIP_WITHOUT_GPU();
  for (ReadFormat f : FORMATS)
    for (bool sr : {false, true}) {
      double oe = 0, se = 0;
      RefErr ref;
      const PoolDiff d = m2_run({8, 64, 128, 2}, f, sr, 1, DType::bf16, true, 200, 77, &oe, &se, &ref);
      std::printf("[shared] mamba2 H8-P64-N128-G2, 200 steps, %s sr %d: GPU vs CPU state %.3g, outputs %.3g "
                  "(CPU vs fp32: state %.3g, outputs %.3g); tiles differing %lld/%lld, elements %lld/%lld\n",
                  read_format_name(f), int(sr), se, oe, ref.state, ref.out, (long long)d.tiles_differ,
                  (long long)d.tiles, (long long)d.elems_differ, (long long)d.elems);
      EXPECT_LE(se, 2 * ref.state + 1e-6) << read_format_name(f) << " sr " << sr;
      EXPECT_LE(oe, 2 * ref.out + out_tol(DType::bf16)) << read_format_name(f) << " sr " << sr;
    }
}

TEST(SharedGpu, Mamba2ErrorsWriteNothing) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(5);
  const M2Shape s{8, 16, 64, 2};
  const ReadFormat f = ReadFormat::nvfp4;
  const QuantLayout L = quant_layout(f, s.P, s.N);
  M2Layer layer(s, rng);
  Pair pool;
  fill_pool(pool, L, 4, s.H, 0.5, rng);
  M2Inputs in(s, 3, 2, DType::bf16, false, {2, -1, 4}, rng);  // slot 4 is out of range
  int32_t* status = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&status), 4), cudaSuccess);
  ASSERT_EQ(cudaMemset(status, 0, 4), cudaSuccess);
  Exec e = gpu_exec();
  e.device_status = status;
  mamba2_decode_shared(in.view(layer, true), pool.d->t(), f, QuantRounding{true, 1, 1}, e);
  bool threw = false;
  try {
    check_device_status(e, "test");
  } catch (const Error&) {
    threw = true;
  }
  EXPECT_TRUE(threw) << "bad slot not reported";
  EXPECT_TRUE(pool.fetch().bytes_equal(pool.h)) << "bad slot: pool written";
  EXPECT_TRUE(in.y.fetch().bytes_equal(in.y.h)) << "bad slot: outputs written";
  // Wrong tile size, host pool: host-side errors.
  Pair wide;
  wide.make(DType::u8, {4, s.H, L.tile_bytes + 16});
  wide.up();
  M2Inputs ok(s, 3, 2, DType::bf16, false, {2, -1, 3}, rng);
  auto arg_of = [&](const Tensor& p) -> std::string {
    try {
      mamba2_decode_shared(ok.view(layer, true), p, f, QuantRounding{}, e);
    } catch (const Error& err) {
      return err.argument();
    }
    return "(none)";
  };
  EXPECT_EQ(arg_of(wide.d->t()), "packed_state");
  EXPECT_EQ(arg_of(pool.h.t()), "packed_state");
  EXPECT_TRUE(ok.y.fetch().bytes_equal(ok.y.h));
  EXPECT_TRUE(wide.fetch().bytes_equal(wide.h));
  EXPECT_TRUE(pool.fetch().bytes_equal(pool.h));
  cudaFree(status);
}

// A shared step captured in a CUDA graph replays like direct calls. The
// rounding step is a host value baked into the graph, so every replay uses
// the captured step (a changing step needs a new capture or direct calls).
TEST(SharedGpu, Mamba2GraphReplay) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(8);
  const M2Shape s{64, 64, 128, 8};
  const ReadFormat f = ReadFormat::fp8_e4m3;
  const QuantLayout L = quant_layout(f, s.P, s.N);
  M2Layer layer(s, rng);
  Pair a, b;
  fill_pool(a, L, 4, s.H, 0.5, rng);
  b.make(DType::u8, {4, s.H, L.tile_bytes});
  b.h.copy_from(a.h);
  b.up();
  M2Inputs in(s, 3, 1, DType::bf16, true, {0, -1, 3}, rng);
  cudaStream_t stream;
  RSSM_CUDA_OK(cudaStreamCreate(&stream));
  Exec e = gpu_exec();
  e.stream = stream;
  const QuantRounding r{true, 9, 4};
  mamba2_decode_shared(in.view(layer, true), a.d->t(), f, r, e);  // warm-up (attributes)
  mamba2_decode_shared(in.view(layer, true), b.d->t(), f, r, e);
  cudaGraph_t graph;
  RSSM_CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  mamba2_decode_shared(in.view(layer, true), a.d->t(), f, r, e);
  RSSM_CUDA_OK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  RSSM_CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 20; ++i) {
    RSSM_CUDA_OK(cudaGraphLaunch(exec, stream));
    mamba2_decode_shared(in.view(layer, true), b.d->t(), f, r, e);
  }
  RSSM_CUDA_OK(cudaStreamSynchronize(stream));
  EXPECT_TRUE(a.fetch().bytes_equal(b.fetch()));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// ---- GDN / KDA ---------------------------------------------------------------------

struct DCfg {
  DeltaFamily f;
  int64_t H, HV, K, V;
};
std::string d_name(const DCfg& c) {
  return std::string(c.f == DeltaFamily::kda ? "kda" : "gdn") + " H" + std::to_string(c.H) + "-HV" +
         std::to_string(c.HV) + "-K" + std::to_string(c.K) + "-V" + std::to_string(c.V);
}

struct DLayer {
  Pair A_log, dt_bias;
  DLayer(const DCfg& c, std::mt19937& rng) {
    A_log.make(DType::f32, {c.HV});
    A_log.h.fill_uniform(rng, -2, 1);
    dt_bias.make(DType::f32, c.f == DeltaFamily::kda ? std::vector<int64_t>{c.HV, c.K} : std::vector<int64_t>{c.HV});
    dt_bias.h.fill_normal(rng, 0, 0.5);
    A_log.up(), dt_bias.up();
  }
};

struct DInputs {
  Pair q, k, v, g, beta, slot, o;
  DInputs(const DCfg& c, int64_t B, int64_t T, DType act, const std::vector<int64_t>& slots, std::mt19937& rng) {
    q.make(act, {B, T, c.H, c.K});
    k.make(act, {B, T, c.H, c.K});
    v.make(act, {B, T, c.HV, c.V});
    g.make(DType::f32, c.f == DeltaFamily::kda ? std::vector<int64_t>{B, T, c.HV, c.K} : std::vector<int64_t>{B, T, c.HV});
    beta.make(DType::f32, {B, T, c.HV});
    o.make(act, {B, T, c.HV, c.V});
    q.h.fill_normal(rng);
    k.h.fill_normal(rng);
    v.h.fill_normal(rng);
    g.h.fill_normal(rng, 0, 1.5);
    beta.h.fill_normal(rng, 0, 1.5);
    o.h.fill_nan();
    slot = Pair{index_tensor(slots, DType::i64), nullptr};
    for (Pair* p : {&q, &k, &v, &g, &beta, &slot, &o}) p->up();
  }
  DeltaStep view(const DLayer& l, bool dev) const {
    DeltaStep s;
    s.q = q.at(dev), s.k = k.at(dev), s.v = v.at(dev), s.g = g.at(dev), s.beta = beta.at(dev);
    s.A_log = l.A_log.at(dev), s.dt_bias = l.dt_bias.at(dev);
    s.slot = slot.at(dev), s.o = o.at(dev);
    return s;
  }
};

PoolDiff d_run(const DCfg& c, ReadFormat f, bool sr, int64_t T, DType act, int steps, uint64_t seed,
               double* out_err, double* state_err, RefErr* ref = nullptr) {
  std::mt19937 rng{uint32_t(seed)};
  const std::vector<int64_t> slots = {-1, 3, 0, 5};  // a pad row + 3 rows; slots 1, 2, 4 untouched
  const int64_t S = 6;
  const QuantLayout L = quant_layout(f, c.V, c.K);
  DLayer layer(c, rng);
  Pair pool;
  fill_pool(pool, L, S, c.HV, 0.05, rng);
  HostTensor cpu_pool(DType::u8, {S, c.HV, L.tile_bytes});
  cpu_pool.copy_from(pool.h);
  const HostTensor before = pool.fetch();
  HostTensor ref_state = ref ? unpacked(L, pool.h) : HostTensor();
  double worst_out = 0;
  for (int it = 0; it < steps; ++it) {
    DInputs in(c, int64_t(slots.size()), T, act, slots, rng);
    const QuantRounding r{sr, seed * 17 + 3, uint64_t(it)};
    delta_decode_shared(c.f, in.view(layer, true), pool.d->t(), f, r, gpu_exec());
    delta_decode_shared(c.f, in.view(layer, false), cpu_pool, f, r, cpu_exec());
    const HostTensor o = in.o.fetch();
    if (!pad_rows_zero(o, slots)) ADD_FAILURE() << "pad row output not zero";
    worst_out = std::max(worst_out, rel_err(o.to_f64(), in.o.h.to_f64()));
    if (ref) {
      HostTensor oref(act, {int64_t(slots.size()), T, c.HV, c.V});
      DeltaStep rs = in.view(layer, false);
      rs.o = oref;
      delta_decode(c.f, rs, ref_state, cpu_exec());
      ref->out = std::max(ref->out, rel_err(in.o.h.to_f64(), oref.to_f64()));
    }
  }
  const HostTensor got = pool.fetch();
  if (ref) ref->state = rel_err(decoded(L, cpu_pool, real_slots(slots)), slot_values(ref_state, real_slots(slots)));
  for (int64_t u : {1, 2, 4})
    EXPECT_EQ(std::memcmp(got.as<uint8_t>() + u * c.HV * L.tile_bytes, before.as<uint8_t>() + u * c.HV * L.tile_bytes,
                          size_t(c.HV * L.tile_bytes)),
              0);
  *out_err = worst_out;
  *state_err = rel_err(decoded(L, got, real_slots(slots)), decoded(L, cpu_pool, real_slots(slots)));
  return compare_pools(L, got, cpu_pool, real_slots(slots), sr);
}

TEST(SharedGpu, DeltaMatchesCpu) {
  RSSM_SKIP_WITHOUT_GPU();
  const DCfg cfgs[] = {{DeltaFamily::gdn, 16, 32, 128, 128}, {DeltaFamily::gdn, 16, 48, 128, 128},
                       {DeltaFamily::gdn, 16, 64, 128, 128}, {DeltaFamily::kda, 32, 32, 128, 128},
                       {DeltaFamily::gdn, 2, 6, 96, 40},     {DeltaFamily::kda, 2, 6, 96, 40},
                       {DeltaFamily::gdn, 1, 3, 37, 5},      {DeltaFamily::kda, 1, 3, 37, 5}};
  const DType acts[] = {DType::bf16, DType::f32, DType::f16};
  int ci = 0;
  for (const DCfg& c : cfgs)
    for (ReadFormat f : FORMATS) {
      if (!fmt_ok(f, c.K) || (quick() && c.HV > 8)) continue;
      PoolDiff total;
      for (bool sr : {false, true})
        for (int64_t T : {1, 4}) {
          const DType act = acts[ci % 3];
          ++ci;
          double oe = 0, se = 0;
          const PoolDiff d = d_run(c, f, sr, T, act, 1, uint64_t(ci), &oe, &se);
          EXPECT_LE(oe, out_tol(act)) << d_name(c) << " " << read_format_name(f) << " sr " << sr << " T " << T;
          EXPECT_EQ(d.beyond, 0) << d_name(c) << " " << read_format_name(f) << " sr " << sr << " T " << T
                                      << " worst " << d.worst;
          total.add(d);
        }
      std::printf("[shared] %s %s: tiles differing %lld/%lld, elements %lld/%lld, over one step %lld, "
                  "worst %.3g step\n",
                  d_name(c).c_str(), read_format_name(f), (long long)total.tiles_differ, (long long)total.tiles,
                  (long long)total.elems_differ, (long long)total.elems, (long long)total.over_one_step, total.worst);
    }
}

TEST(SharedGpu, DeltaLongRun) {
  RSSM_SKIP_WITHOUT_GPU();
  for (const DCfg& c : {DCfg{DeltaFamily::gdn, 2, 4, 128, 128}, DCfg{DeltaFamily::kda, 4, 4, 128, 128}})
    for (ReadFormat f : FORMATS)
      for (bool sr : {false, true}) {
        double oe = 0, se = 0;
        RefErr ref;
        const PoolDiff d = d_run(c, f, sr, 1, DType::bf16, 200, 99, &oe, &se, &ref);
        std::printf("[shared] %s, 200 steps, %s sr %d: GPU vs CPU state %.3g, outputs %.3g (CPU vs fp32: "
                    "state %.3g, outputs %.3g); tiles differing %lld/%lld, elements %lld/%lld\n",
                    d_name(c).c_str(), read_format_name(f), int(sr), se, oe, ref.state, ref.out,
                    (long long)d.tiles_differ, (long long)d.tiles, (long long)d.elems_differ, (long long)d.elems);
        EXPECT_LE(se, 2 * ref.state + 1e-6) << d_name(c) << " " << read_format_name(f) << " sr " << sr;
        EXPECT_LE(oe, 2 * ref.out + out_tol(DType::bf16)) << d_name(c) << " " << read_format_name(f) << " sr " << sr;
      }
}

TEST(SharedGpu, DeltaErrorsWriteNothing) {
  RSSM_SKIP_WITHOUT_GPU();
  std::mt19937 rng(6);
  const DCfg c{DeltaFamily::kda, 2, 4, 64, 32};
  const ReadFormat f = ReadFormat::fp8_e4m3;
  const QuantLayout L = quant_layout(f, c.V, c.K);
  DLayer layer(c, rng);
  Pair pool;
  fill_pool(pool, L, 4, c.HV, 0.1, rng);
  DInputs in(c, 3, 2, DType::bf16, {1, -1, -7}, rng);  // -7: out of range
  int32_t* status = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&status), 4), cudaSuccess);
  ASSERT_EQ(cudaMemset(status, 0, 4), cudaSuccess);
  Exec e = gpu_exec();
  e.device_status = status;
  delta_decode_shared(c.f, in.view(layer, true), pool.d->t(), f, QuantRounding{}, e);
  bool threw = false;
  try {
    check_device_status(e, "test");
  } catch (const Error&) {
    threw = true;
  }
  EXPECT_TRUE(threw) << "bad slot not reported";
  EXPECT_TRUE(pool.fetch().bytes_equal(pool.h)) << "bad slot: pool written";
  EXPECT_TRUE(in.o.fetch().bytes_equal(in.o.h)) << "bad slot: outputs written";
  Pair wide;
  wide.make(DType::u8, {4, c.HV, L.tile_bytes + 16});
  wide.up();
  DInputs ok(c, 3, 2, DType::bf16, {1, -1, 2}, rng);
  std::string arg = "(none)";
  try {
    delta_decode_shared(c.f, ok.view(layer, true), wide.d->t(), f, QuantRounding{}, e);
  } catch (const Error& err) {
    arg = err.argument();
  }
  EXPECT_EQ(arg, "packed_state");
  EXPECT_TRUE(ok.o.fetch().bytes_equal(ok.o.h));
  EXPECT_TRUE(wide.fetch().bytes_equal(wide.h));
  cudaFree(status);
}

}  // namespace
}  // namespace replayssm::test
