// `replayssm drift`: long-run output error of every precision arm against an
// fp64 trajectory (docs/dual_precision.md). One layer per family at a small
// per-group shape, plain decode (B = 1, T = 1), inputs from a generator that
// mimics real statistics; the error of each step's output is binned by
// position (log2 bins) and a growth exponent fitted per arm.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common.h"
#include "replayssm/delta.h"
#include "replayssm/dual.h"
#include "replayssm/mamba2.h"

namespace replayssm::tools {

extern const char* DRIFT_USAGE;
const char* DRIFT_USAGE =
    "usage: replayssm drift [--steps N] [--family mamba2|gdn|kda|all] [--L L]\n"
    "                       [--seed S] [--threads N] [--out FILE.csv] [--backend cpu|cuda]\n"
    "\n"
    "Runs one layer of each family for N decode steps (default 16384, at most\n"
    "131072) on the CPU backend (or the GPU: --backend cuda; inputs uploaded and\n"
    "outputs read back every step) in every precision arm: fp32 step-wise, fp32\n"
    "replay, shared bf16/f16/fp8/nvfp4 (round to nearest and stochastic), dual\n"
    "fp32+bf16/fp8/nvfp4 and fp16+nvfp4, each against an fp64 trajectory on the\n"
    "same inputs. Prints per arm the output relative error at the first and\n"
    "last log2 position bins and the fitted growth exponent (slope of log error\n"
    "over log position, bins from position 32 on); writes every bin to the CSV\n"
    "(default drift.csv; render with scripts/plot_drift.py). Shapes (one head\n"
    "group at the real head dims): Mamba-2 H=2 P=64 N=128 G=1; GDN H=1 HV=2\n"
    "K=V=128; KDA H=HV=1 K=V=128. --threads runs families in parallel (default 2).\n";

namespace {

constexpr int64_t FIT_FROM = 32;

// Per-bin statistics of one arm.
struct Bins {
  std::vector<double> sum, max;
  std::vector<int64_t> n;
  void add(int64_t pos, double e) {  // pos >= 1
    const size_t b = size_t(std::floor(std::log2(double(pos))));
    if (b >= n.size()) sum.resize(b + 1, 0.0), max.resize(b + 1, 0.0), n.resize(b + 1, 0);
    sum[b] += e, max[b] = std::max(max[b], e), n[b] += 1;
  }
  double mean(size_t b) const { return n[b] ? sum[b] / double(n[b]) : NAN; }
  // Least-squares slope of log(mean) over log(bin centre), bins from FIT_FROM.
  double exponent() const {
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    int m = 0;
    for (size_t b = 0; b < n.size(); ++b) {
      const double lo = std::ldexp(1.0, int(b));
      if (lo < FIT_FROM || !n[b] || !(mean(b) > 0) || !std::isfinite(mean(b))) continue;
      const double x = std::log(lo * std::sqrt(2.0)), y = std::log(mean(b));
      sx += x, sy += y, sxx += x * x, sxy += x * y, ++m;
    }
    if (m < 2) return NAN;
    return (m * sxy - sx * sy) / (m * sxx - sx * sx);
  }
};

double rel_err(const float* y, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(y[i])) return INFINITY;
    num += (y[i] - ref[i]) * (y[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
}

double softplus(double v) { return v > 20 ? v : std::log1p(std::exp(v)); }

// The precision arms. `kind`: step (fp32 baseline), replay (fp32), shared, dual.
struct ArmSpec {
  std::string name;
  enum Kind { step, replay, shared, dual } kind;
  DType state = DType::f32;
  ReadFormat format = ReadFormat::bf16;
  bool sr = false;
};

std::vector<ArmSpec> arm_specs() {
  std::vector<ArmSpec> v{{"fp32_step", ArmSpec::step}, {"fp32_replay", ArmSpec::replay}};
  for (ReadFormat f : {ReadFormat::bf16, ReadFormat::f16, ReadFormat::fp8_e4m3, ReadFormat::nvfp4})
    for (bool sr : {false, true})
      v.push_back({std::string("shared_") + read_format_name(f) + (sr ? "_sr" : ""), ArmSpec::shared,
                   DType::f32, f, sr});
  for (ReadFormat f : {ReadFormat::bf16, ReadFormat::fp8_e4m3, ReadFormat::nvfp4})
    v.push_back({std::string("dual_fp32_") + read_format_name(f), ArmSpec::dual, DType::f32, f});
  v.push_back({"dual_fp16_nvfp4", ArmSpec::dual, DType::f16, ReadFormat::nvfp4});
  return v;
}

struct Result {
  std::string family, arm;
  Bins bins;
};

// ---- Mamba-2 ----------------------------------------------------------------

void run_mamba2(int64_t steps, int64_t L, uint64_t seed, const Exec& ex, std::vector<Result>& out) {
  const int64_t H = 2, P = 64, N = 128, G = 1, R = L + 1;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0, 1);
  std::student_t_distribution<double> heavy(3.0);
  const Device dv = device_of(ex.backend);
  Buf A(DType::f32, {H}, dv), dt_bias(DType::f32, {H}, dv);
  A.set(0, -1e-3), A.set(1, -0.5);  // a = exp(δA): ≈ 0.9999 and ≈ 0.94
  dt_bias.set(0, 0.0), dt_bias.set(1, 0.0);
  Buf x(DType::f32, {1, 1, H, P}, dv), dt(DType::f32, {1, 1, H}, dv), Bm(DType::f32, {1, 1, G, N}, dv),
      Cm(DType::f32, {1, 1, G, N}, dv), slot(DType::i32, {1}, dv);
  for (const Buf* b : {&A, &dt_bias, &slot}) b->upload();

  struct Arm {
    ArmSpec spec;
    Buf state, ring_x, ring_dt, ring_B, cursor, copy, y;
    Bins bins;
  };
  std::vector<Arm> arms;
  for (const ArmSpec& s : arm_specs()) {
    Arm a{s, {}, {}, {}, {}, {}, {}, Buf(DType::f32, {1, 1, H, P}, dv), {}};
    if (s.kind == ArmSpec::shared) {
      a.copy = Buf(DType::u8, {1, H, quant_layout(s.format, P, N).tile_bytes}, dv);
    } else {
      a.state = Buf(s.state, {1, H, P, N}, dv);
      if (s.kind != ArmSpec::step) {
        a.ring_x = Buf(DType::f32, {1, R, H, P}, dv), a.ring_dt = Buf(DType::f32, {1, R, H}, dv);
        a.ring_B = Buf(DType::f32, {1, R, G, N}, dv), a.cursor = Buf(DType::i32, {1, 3}, dv);
      }
      if (s.kind == ArmSpec::dual) a.copy = Buf(DType::u8, {1, H, quant_layout(s.format, P, N).tile_bytes}, dv);
    }
    for (const Buf* b : {&a.state, &a.ring_x, &a.ring_dt, &a.ring_B, &a.cursor, &a.copy, &a.y})
      if (b->bytes()) b->upload();  // zeros
    arms.push_back(std::move(a));
  }
  std::vector<double> S(size_t(H * P * N), 0.0), ref(size_t(H * P));
  for (int64_t t = 1; t <= steps; ++t) {
    for (int64_t i = 0; i < H * P; ++i) x.set(i, heavy(rng) / std::sqrt(3.0));
    for (int64_t h = 0; h < H; ++h) dt.set(h, -2.0 + nd(rng));
    for (int64_t n = 0; n < N; ++n) Bm.set(n, nd(rng)), Cm.set(n, nd(rng));
    for (const Buf* b : {&x, &dt, &Bm, &Cm}) b->upload();
    // fp64 reference (inputs as stored in fp32).
    for (int64_t h = 0; h < H; ++h) {
      const double d = softplus(dt.get(h) + dt_bias.get(h)), a = std::exp(d * A.get(h));
      for (int64_t p = 0; p < P; ++p) {
        double* row = &S[size_t((h * P + p) * N)];
        double acc = 0;
        for (int64_t n = 0; n < N; ++n) {
          row[n] = a * row[n] + d * x.get(h * P + p) * Bm.get(n);
          acc += row[n] * Cm.get(n);
        }
        ref[size_t(h * P + p)] = acc;
      }
    }
    for (Arm& a : arms) {
      Mamba2Step st;
      st.x = x.t(), st.dt = dt.t(), st.Bm = Bm.t(), st.Cm = Cm.t(), st.A = A.t(), st.dt_bias = dt_bias.t();
      st.slot = slot.t(), st.y = a.y.t();
      Mamba2Pool pool;
      switch (a.spec.kind) {
        case ArmSpec::step: mamba2_decode(st, a.state.t(), ex); break;
        case ArmSpec::shared:
          mamba2_decode_shared(st, a.copy.t(), a.spec.format, QuantRounding{a.spec.sr, seed, uint64_t(t)}, ex);
          break;
        case ArmSpec::replay:
        case ArmSpec::dual:
          pool.state = a.state.t(), pool.ring_x = a.ring_x.t(), pool.ring_dt = a.ring_dt.t();
          pool.ring_B = a.ring_B.t(), pool.cursor = a.cursor.t(), pool.L = L, pool.A = A.t();
          if (a.spec.kind == ArmSpec::dual) pool.read_copy = a.copy.t(), pool.read_format = a.spec.format;
          mamba2_replay_step(st, pool, Tensor{}, true, ex);
          break;
      }
      a.y.download();
      a.bins.add(t, rel_err(a.y.as<float>(), ref));
    }
  }
  for (Arm& a : arms) out.push_back({"mamba2", a.spec.name, std::move(a.bins)});
}

// ---- GDN / KDA --------------------------------------------------------------

void run_delta(DeltaFamily fam, int64_t steps, int64_t L, uint64_t seed, const Exec& ex,
               std::vector<Result>& out) {
  const bool kda = fam == DeltaFamily::kda;
  const int64_t H = 1, HV = kda ? 1 : 2, K = 128, V = 128, GW = kda ? K : 1, R = L + 1;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0, 1);
  std::student_t_distribution<double> heavy(3.0);
  // Fixed per-channel statistics: key / query channel means, value channel
  // scales (log-normal), gate centres (GDN per value head, KDA per channel).
  std::vector<double> kmean(static_cast<size_t>(K)), qmean(static_cast<size_t>(K)), vscale(static_cast<size_t>(HV * V)), gcentre(static_cast<size_t>(HV * GW));
  for (auto& m : kmean) m = 0.5 * nd(rng);
  for (auto& m : qmean) m = 0.5 * nd(rng);
  for (auto& s : vscale) s = std::exp(0.5 * nd(rng));
  for (int64_t h = 0; h < HV; ++h)
    for (int64_t c = 0; c < GW; ++c)
      gcentre[size_t(h * GW + c)] = kda ? std::log(1e-4) + (std::log(1.0) - std::log(1e-4)) * double(c) / double(K - 1)
                                        : (h == 0 ? std::log(1e-3) : std::log(0.1));
  const Device dv = device_of(ex.backend);
  Buf q(DType::f32, {1, 1, H, K}, dv), k(DType::f32, {1, 1, H, K}, dv), v(DType::f32, {1, 1, HV, V}, dv),
      g(DType::f32, kda ? std::vector<int64_t>{1, 1, HV, K} : std::vector<int64_t>{1, 1, HV}, dv),
      beta(DType::f32, {1, 1, HV}, dv), slot(DType::i32, {1}, dv);
  slot.upload();
  DeltaGating gating;
  gating.raw_gate = false;  // g is the log-decay
  gating.raw_beta = true;

  struct Arm {
    ArmSpec spec;
    Buf state, ring_d, ring_k, ring_ks, ring_g, ring_v, ring_beta, cursor, copy, o;
    Bins bins;
  };
  std::vector<Arm> arms;
  for (const ArmSpec& s : arm_specs()) {
    Arm a;
    a.spec = s;
    a.o = Buf(DType::f32, {1, 1, HV, V}, dv);
    const int64_t tile = quant_layout(s.format, V, K).tile_bytes;
    if (s.kind == ArmSpec::shared) {
      a.copy = Buf(DType::u8, {1, HV, tile}, dv);
    } else {
      a.state = Buf(s.state, {1, HV, V, K}, dv);
      if (s.kind != ArmSpec::step) {
        a.ring_d = Buf(DType::f32, {1, R, HV, V}, dv), a.ring_k = Buf(DType::f32, {1, R, H, K}, dv);
        a.ring_ks = Buf(DType::f32, {1, R, H}, dv);
        a.ring_g = Buf(DType::f32, kda ? std::vector<int64_t>{1, R, HV, K} : std::vector<int64_t>{1, R, HV}, dv);
        a.cursor = Buf(DType::i32, {1, 3}, dv);
      }
      if (s.kind == ArmSpec::dual) {
        a.copy = Buf(DType::u8, {1, HV, tile}, dv);
        a.ring_v = Buf(DType::f32, {1, R, HV, V}, dv), a.ring_beta = Buf(DType::f32, {1, R, HV}, dv);
      }
    }
    for (const Buf* b : {&a.state, &a.ring_d, &a.ring_k, &a.ring_ks, &a.ring_g, &a.ring_v, &a.ring_beta,
                         &a.cursor, &a.copy, &a.o})
      if (b->bytes()) b->upload();  // zeros
    arms.push_back(std::move(a));
  }
  std::vector<double> S(size_t(HV * V * K), 0.0), ref(size_t(HV * V));
  std::vector<double> kk(static_cast<size_t>(K)), qq(static_cast<size_t>(K)), alpha(static_cast<size_t>(K));
  const double qscale = 1.0 / std::sqrt(double(K));
  for (int64_t t = 1; t <= steps; ++t) {
    for (int64_t c = 0; c < K; ++c) k.set(c, kmean[size_t(c)] + nd(rng)), q.set(c, qmean[size_t(c)] + nd(rng));
    for (int64_t i = 0; i < HV * V; ++i) v.set(i, vscale[size_t(i)] * heavy(rng) / std::sqrt(3.0));
    for (int64_t i = 0; i < HV * GW; ++i) g.set(i, -std::exp(gcentre[size_t(i)] + 0.5 * nd(rng)));
    for (int64_t h = 0; h < HV; ++h) beta.set(h, nd(rng));
    for (const Buf* b : {&q, &k, &v, &g, &beta}) b->upload();
    // fp64 reference (inputs as stored in fp32).
    double nk = 0, nq = 0;
    for (int64_t c = 0; c < K; ++c) nk += k.get(c) * k.get(c), nq += q.get(c) * q.get(c);
    for (int64_t c = 0; c < K; ++c) {
      kk[size_t(c)] = k.get(c) / std::sqrt(nk + 1e-6);
      qq[size_t(c)] = q.get(c) / std::sqrt(nq + 1e-6) * qscale;
    }
    for (int64_t h = 0; h < HV; ++h) {
      for (int64_t c = 0; c < K; ++c) alpha[size_t(c)] = std::exp(g.get(h * GW + (kda ? c : 0)));
      const double b = 1.0 / (1.0 + std::exp(-beta.get(h)));
      for (int64_t r = 0; r < V; ++r) {
        double* row = &S[size_t((h * V + r) * K)];
        double sk = 0;
        for (int64_t c = 0; c < K; ++c) row[c] *= alpha[size_t(c)], sk += row[c] * kk[size_t(c)];
        const double d = b * (v.get(h * V + r) - sk);
        double o = 0;
        for (int64_t c = 0; c < K; ++c) row[c] += d * kk[size_t(c)], o += row[c] * qq[size_t(c)];
        ref[size_t(h * V + r)] = o;
      }
    }
    for (Arm& a : arms) {
      DeltaStep st;
      st.q = q.t(), st.k = k.t(), st.v = v.t(), st.g = g.t(), st.beta = beta.t(), st.gating = gating;
      st.slot = slot.t(), st.o = a.o.t();
      DeltaPool pool;
      switch (a.spec.kind) {
        case ArmSpec::step: delta_decode(fam, st, a.state.t(), ex); break;
        case ArmSpec::shared:
          delta_decode_shared(fam, st, a.copy.t(), a.spec.format, QuantRounding{a.spec.sr, seed, uint64_t(t)}, ex);
          break;
        case ArmSpec::replay:
        case ArmSpec::dual:
          pool.state = a.state.t(), pool.ring_d = a.ring_d.t(), pool.ring_k = a.ring_k.t();
          pool.ring_ks = a.ring_ks.t(), pool.ring_g = a.ring_g.t(), pool.cursor = a.cursor.t(), pool.L = L;
          if (a.spec.kind == ArmSpec::dual) {
            pool.read_copy = a.copy.t(), pool.read_format = a.spec.format;
            pool.ring_v = a.ring_v.t(), pool.ring_beta = a.ring_beta.t();
          }
          delta_replay_step(fam, st, pool, Tensor{}, true, ex);
          break;
      }
      a.o.download();
      a.bins.add(t, rel_err(a.o.as<float>(), ref));
    }
  }
  for (Arm& a : arms) out.push_back({kda ? "kda" : "gdn", a.spec.name, std::move(a.bins)});
}

}  // namespace

int drift_main(int argc, char** argv) {
  Args a(argc, argv, 1, {});
  a.only({"--steps", "--family", "--L", "--seed", "--threads", "--out", "--backend"});
  const int64_t steps = a.integer("--steps", 16384), L = a.integer("--L", 16);
  const uint64_t seed = uint64_t(a.integer("--seed", 1));
  const int threads = int(a.integer("--threads", 2));
  const std::string fam = a.str("--family", "all"), out = a.str("--out", "drift.csv");
  if (steps < 1 || steps > 131072) throw UsageError("--steps must be in [1, 131072]");
  if (L < 1) throw UsageError("--L must be >= 1");
  if (threads < 1) throw UsageError("--threads must be >= 1");
  const std::string backend = a.str("--backend", "cpu");
  if (backend != "cpu" && backend != "cuda") throw UsageError("--backend expects cpu or cuda");
  Exec ex;
  ex.backend = backend == "cuda" ? Backend::cuda : Backend::cpu;
  ex.num_threads = 1;
  std::vector<std::string> fams;
  if (fam == "all") fams = {"mamba2", "gdn", "kda"};
  else if (fam == "mamba2" || fam == "gdn" || fam == "kda") fams = {fam};
  else throw UsageError("--family expects mamba2, gdn, kda or all");

  std::vector<std::vector<Result>> results(fams.size());
  std::mutex err_mu;
  std::string err;
  std::vector<std::thread> pool;
  size_t next = 0;
  std::mutex next_mu;
  auto worker = [&] {
    for (;;) {
      size_t i;
      {
        std::lock_guard<std::mutex> lk(next_mu);
        if (next >= fams.size()) return;
        i = next++;
      }
      try {
        std::fprintf(stderr, "drift: %s, %lld steps on %s ...\n", fams[i].c_str(), (long long)steps, backend.c_str());
        if (fams[i] == "mamba2") run_mamba2(steps, L, seed, ex, results[i]);
        else run_delta(fams[i] == "gdn" ? DeltaFamily::gdn : DeltaFamily::kda, steps, L, seed, ex, results[i]);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lk(err_mu);
        err = e.what();
      }
    }
  };
  for (int t = 0; t < std::min<int>(threads, int(fams.size())); ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  if (!err.empty()) throw std::runtime_error(err);

  std::FILE* f = out.empty() ? nullptr : std::fopen(out.c_str(), "w");
  if (!out.empty() && !f) throw std::runtime_error("cannot write " + out);
  if (f) std::fprintf(f, "family,arm,bin_lo,bin_hi,steps,mean_rel_err,max_rel_err,exponent\n");
  std::printf("| family | arm | err @ [%lld, %lld) | err @ last bin | exponent (bins >= %lld) |\n|---|---|---|---|---|\n",
              (long long)FIT_FROM, (long long)(2 * FIT_FROM), (long long)FIT_FROM);
  for (const auto& rs : results)
    for (const Result& r : rs) {
      const double ex = r.bins.exponent();
      const size_t first = size_t(std::log2(double(FIT_FROM))), last = r.bins.n.size() - 1;
      std::printf("| %s | %s | %.3e | %.3e | %.3f |\n", r.family.c_str(), r.arm.c_str(),
                  first < r.bins.n.size() ? r.bins.mean(first) : NAN, r.bins.mean(last), ex);
      if (f)
        for (size_t b = 0; b < r.bins.n.size(); ++b)
          std::fprintf(f, "%s,%s,%lld,%lld,%lld,%.6e,%.6e,%.4f\n", r.family.c_str(), r.arm.c_str(),
                       (long long)(int64_t(1) << b), (long long)std::min<int64_t>(int64_t(1) << (b + 1), steps + 1),
                       (long long)r.bins.n[b], r.bins.mean(b), r.bins.max[b], ex);
    }
  if (f) std::fclose(f);
  std::printf("\ncommand: %s\n", g_command.c_str());
  return 0;
}

}  // namespace replayssm::tools
