// Shared-quantised mode on the cuda backend against the cpu backend on host
// copies of the same bytes: quant_pack_stochastic byte for byte; Mamba-2
// shared decode (every format, round to nearest and stochastic, T = 1 and 4,
// model shapes of design §6 and odd shapes, a pad row): outputs close, packed
// states within one quantization step per element plus fp32 slack
// (compare_pools; the share of tiles whose bytes differ printed); 200-step
// runs against the CPU's own error; errors write nothing; a captured CUDA
// graph replays like direct calls. GDN / KDA: shared_delta_gpu_test.cpp.
#include "shared_gpu_util.h"

namespace replayssm::test {
namespace {

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
  CapturedGraph graph;
  const Exec e = graph.exec(gpu_exec());
  const QuantRounding r{true, 9, 4};
  mamba2_decode_shared(in.view(layer, true), a.d->t(), f, r, e);  // warm-up (attributes)
  mamba2_decode_shared(in.view(layer, true), b.d->t(), f, r, e);
  graph.capture([&] { mamba2_decode_shared(in.view(layer, true), a.d->t(), f, r, e); });
  for (int i = 0; i < 20; ++i) {
    graph.launch();
    mamba2_decode_shared(in.view(layer, true), b.d->t(), f, r, e);
  }
  RSSM_CUDA_OK(cudaStreamSynchronize(graph.stream()));
  EXPECT_TRUE(a.fetch().bytes_equal(b.fetch()));
}

}  // namespace
}  // namespace replayssm::test
