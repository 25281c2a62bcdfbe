// Shared-quantised GDN / KDA decode on the cuda backend against the cpu
// backend on host copies of the same bytes (every format, round to nearest
// and stochastic, T = 1 and 4, model shapes and odd shapes, a pad row):
// outputs close, packed states within one quantization step; long runs
// against the CPU's own error; errors write nothing.
#include "shared_gpu_util.h"

namespace replayssm::test {
namespace {

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
