// `replayssm bench` on the CPU backend: standard decode (the baseline,
// mamba2_decode / delta_decode, T = 1) against replay decode (replay_step,
// T = 1, commit_all) at a preset's per-layer shape, with the batch large
// enough that the states exceed the caches. Both are measured in the same run,
// in alternating windows of L steps (one whole flush cycle each, so replay
// times are amortised over its flushes); the reported time per step is the
// median over windows. Bytes per step follow the model of design §6
// (presets.h); frac_of_copy compares the achieved rate with a parallel
// memcpy measured in the same run (read + write bytes).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "bench_gpu.h"
#include "common.h"
#include "core/parallel.h"
#include "presets.h"
#include "replayssm/delta.h"
#include "replayssm/mamba2.h"

namespace replayssm::tools {
namespace {

constexpr double MIB = 1024.0 * 1024.0;

struct Options {
  std::string preset = "all";
  int64_t batch = 0;  // 0 = enough rows for min_state_mib of state
  int64_t L = 16;
  int64_t steps = 64;
  int threads = 0;
  DType state = DType::f32, act = DType::bf16;
  double min_state_mib = 512;
};

// Copy bandwidth: a parallel memcpy of `bytes` (median of several runs),
// counting read + write bytes. Returns GB/s.
double copy_gbps(size_t bytes, int threads) {
  std::vector<uint8_t> src(bytes, 1), dst(bytes, 0);
  const int64_t chunks = 256;
  const size_t chunk = (bytes + size_t(chunks) - 1) / size_t(chunks);
  auto once = [&] {
    parallel_for(chunks, cpu_threads(threads), [&](int64_t c) {
      const size_t b = size_t(c) * chunk, e = std::min(bytes, b + chunk);
      if (b < e) std::memcpy(dst.data() + b, src.data() + b, e - b);
    });
  };
  once();
  std::vector<double> t;
  for (int r = 0; r < 7; ++r) {
    const double t0 = now_seconds();
    once();
    t.push_back(now_seconds() - t0);
  }
  return 2.0 * double(bytes) / median(t) / 1e9;
}

void fill(Buf& b, std::mt19937_64& rng, bool normal, double x, double y) {
  std::normal_distribution<double> nd(x, y);
  std::uniform_real_distribution<double> ud(x, y);
  for (int64_t i = 0; i < b.numel(); ++i) b.set(i, normal ? nd(rng) : ud(rng));
}

// One preset: baseline and replay pools of B rows (slot b = row b), one set of
// random step inputs reused every step (traffic does not depend on values).
class Bench {
 public:
  Bench(const Preset& p, const Options& o, int64_t B) : p_(p), o_(o), B_(B) {
    std::mt19937_64 rng(42);
    ex_.backend = Backend::cpu;
    ex_.num_threads = o.threads;
    const int64_t R = p.family == Family::mamba2 ? mamba2_ring_length(o.L, 1) : delta_ring_length(o.L, 1);
    slot_ = Buf(DType::i32, {B});
    for (int64_t b = 0; b < B; ++b) slot_.set(b, double(b));
    if (p.family == Family::mamba2) {
      base_state_ = Buf(o.state, {B, p.H, p.P, p.N});
      pool_state_ = Buf(o.state, {B, p.H, p.P, p.N});
      rings_.emplace_back(o.act, std::vector<int64_t>{B, R, p.H, p.P});
      rings_.emplace_back(DType::f32, std::vector<int64_t>{B, R, p.H});
      rings_.emplace_back(o.act, std::vector<int64_t>{B, R, p.G, p.N});
      in_.emplace_back(o.act, std::vector<int64_t>{B, 1, p.H, p.P});  // x
      in_.emplace_back(DType::f32, std::vector<int64_t>{B, 1, p.H});   // dt
      in_.emplace_back(o.act, std::vector<int64_t>{B, 1, p.G, p.N});  // B
      in_.emplace_back(o.act, std::vector<int64_t>{B, 1, p.G, p.N});  // C
      fill(in_[0], rng, true, 0, 1);
      fill(in_[1], rng, false, -3, 1);
      fill(in_[2], rng, true, 0, 0.3);
      fill(in_[3], rng, true, 0, 0.3);
      params_.emplace_back(DType::f32, std::vector<int64_t>{p.H});  // A
      params_.emplace_back(DType::f32, std::vector<int64_t>{p.H});  // dt_bias
      params_.emplace_back(DType::f32, std::vector<int64_t>{p.H});  // D
      fill(params_[0], rng, false, -8, -0.5);
      fill(params_[1], rng, false, -4, 0);
      fill(params_[2], rng, false, -1, 1);
      y_ = Buf(o.act, {B, 1, p.H, p.P});
      y2_ = Buf(o.act, {B, 1, p.H, p.P});
    } else {
      const bool kda = p.family == Family::kda;
      base_state_ = Buf(o.state, {B, p.HV, p.V, p.K});
      pool_state_ = Buf(o.state, {B, p.HV, p.V, p.K});
      rings_.emplace_back(DType::f32, std::vector<int64_t>{B, R, p.HV, p.V});
      rings_.emplace_back(o.act, std::vector<int64_t>{B, R, p.H, p.K});
      rings_.emplace_back(DType::f32, std::vector<int64_t>{B, R, p.H});
      rings_.emplace_back(DType::f32, kda ? std::vector<int64_t>{B, R, p.HV, p.K} : std::vector<int64_t>{B, R, p.HV});
      in_.emplace_back(o.act, std::vector<int64_t>{B, 1, p.H, p.K});   // q
      in_.emplace_back(o.act, std::vector<int64_t>{B, 1, p.H, p.K});   // k
      in_.emplace_back(o.act, std::vector<int64_t>{B, 1, p.HV, p.V});  // v
      in_.emplace_back(DType::f32, kda ? std::vector<int64_t>{B, 1, p.HV, p.K} : std::vector<int64_t>{B, 1, p.HV});
      in_.emplace_back(DType::f32, std::vector<int64_t>{B, 1, p.HV});  // beta
      for (size_t i = 0; i < in_.size(); ++i) fill(in_[i], rng, true, 0, 1);
      params_.emplace_back(DType::f32, std::vector<int64_t>{p.HV});  // A_log
      params_.emplace_back(DType::f32, kda ? std::vector<int64_t>{p.HV, p.K} : std::vector<int64_t>{p.HV});
      fill(params_[0], rng, false, std::log(0.1), std::log(4.0));
      fill(params_[1], rng, false, -3, 1);
      y_ = Buf(o.act, {B, 1, p.HV, p.V});
      y2_ = Buf(o.act, {B, 1, p.HV, p.V});
    }
    cursor_ = Buf(DType::i32, {B, 3});
  }

  void baseline_step() {
    if (p_.family == Family::mamba2) mamba2_decode(m2_step(y_), base_state_.host(), ex_);
    else delta_decode(dfam(), d_step(y_), base_state_.host(), ex_);
  }
  void replay_step() {
    if (p_.family == Family::mamba2) {
      Mamba2Pool pool;
      pool.state = pool_state_.host();
      pool.ring_x = rings_[0].host();
      pool.ring_dt = rings_[1].host();
      pool.ring_B = rings_[2].host();
      pool.A = params_[0].host();
      pool.cursor = cursor_.host();
      pool.L = o_.L;
      mamba2_replay_step(m2_step(y2_), pool, Tensor{}, true, ex_);
    } else {
      DeltaPool pool;
      pool.state = pool_state_.host();
      pool.ring_d = rings_[0].host();
      pool.ring_k = rings_[1].host();
      pool.ring_ks = rings_[2].host();
      pool.ring_g = rings_[3].host();
      pool.cursor = cursor_.host();
      pool.L = o_.L;
      delta_replay_step(dfam(), d_step(y2_), pool, Tensor{}, true, ex_);
    }
  }
  // Both pools have seen the same tokens: the last outputs must agree.
  double check_rel_err() const {
    ErrAcc e;
    for (int64_t i = 0; i < y_.numel(); ++i) e.add(y2_.get(i), y_.get(i));
    return e.value();
  }
  int64_t replay_bytes_per_row() const {
    if (p_.family == Family::mamba2)
      return mamba2_replay_bytes_per_row({p_.H, p_.P, p_.N, p_.G}, o_.state, o_.act, o_.L, 1);
    return delta_replay_bytes_per_row(dfam(), {p_.H, p_.HV, p_.K, p_.V}, o_.state, o_.act, DType::f32, o_.L, 1);
  }

 private:
  DeltaFamily dfam() const { return p_.family == Family::kda ? DeltaFamily::kda : DeltaFamily::gdn; }
  Mamba2Step m2_step(const Buf& y) const {
    Mamba2Step s;
    s.x = in_[0].host();
    s.dt = in_[1].host();
    s.Bm = in_[2].host();
    s.Cm = in_[3].host();
    s.A = params_[0].host();
    s.dt_bias = params_[1].host();
    s.D = params_[2].host();
    s.slot = slot_.host();
    s.y = y.host();
    return s;
  }
  DeltaStep d_step(const Buf& o) const {
    DeltaStep s;
    s.q = in_[0].host();
    s.k = in_[1].host();
    s.v = in_[2].host();
    s.g = in_[3].host();
    s.beta = in_[4].host();
    s.A_log = params_[0].host();
    s.dt_bias = params_[1].host();
    s.slot = slot_.host();
    s.o = o.host();
    return s;
  }

  Preset p_;
  Options o_;
  int64_t B_;
  Exec ex_;
  Buf slot_, base_state_, pool_state_, cursor_, y_, y2_;
  std::vector<Buf> rings_, in_, params_;
};

}  // namespace

const char* BENCH_USAGE =
    "usage: replayssm bench [--backend cpu|cuda] [--preset qwen35|nemotron3|kimi|all|NAME]\n"
    "                       [--batch N] [--L 16] [--state fp32|fp16|bf16] [--act bf16|fp16|fp32]\n"
    "                       [--steps N] [--threads N] [--out FILE.jsonl]\n"
    "\n"
    "Standard decode (baseline) against replay decode (T = 1, commit every step)\n"
    "at a model's per-layer shape, measured in the same run, next to the copy\n"
    "bandwidth of the machine. --backend cuda runs the GPU bench (its own options:\n"
    "replayssm bench --backend cuda --help).\n"
    "\n"
    "  --preset   headline presets (all = qwen35, nemotron3, kimi), a family name\n"
    "             (every preset of it) or one preset; see `replayssm presets`\n"
    "  --batch    rows (default: enough for >= 512 MiB of state per pool)\n"
    "  --L        history capacity (default 16)\n"
    "  --state    state dtype (default fp32)\n"
    "  --act      activation dtype of inputs, outputs and x/B/k records (default bf16)\n"
    "  --steps    measured steps per mode, rounded up to whole windows of L (default 64)\n"
    "  --threads  CPU threads (default: all)\n"
    "  --out      write one JSON object per measured row (design §7 fields)\n";

int bench_main(int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--backend" && std::string(argv[i + 1]) == "cuda") return bench_gpu_main(argc, argv);
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--backend=cuda") return bench_gpu_main(argc, argv);

  Args a(argc, argv, 1, {});
  a.only({"--backend", "--preset", "--batch", "--L", "--state", "--act", "--steps", "--threads", "--out"});
  const std::string backend = a.str("--backend", "cpu");
  if (backend != "cpu") throw UsageError("bench: --backend expects cpu or cuda");
  Options o;
  o.preset = a.str("--preset", "all");
  o.batch = a.integer("--batch", 0);
  o.L = a.integer("--L", 16);
  o.steps = a.integer("--steps", 64);
  o.threads = int(a.integer("--threads", 0));
  o.state = parse_dtype(a.str("--state", "fp32"), "--state");
  o.act = parse_dtype(a.str("--act", "bf16"), "--act");
  if (o.L < 1) throw UsageError("--L must be >= 1");
  if (o.batch < 0 || o.steps < 1) throw UsageError("--batch must be >= 0 and --steps >= 1");
  const std::vector<Preset> presets = select_presets(o.preset);
  if (presets.empty()) throw UsageError("unknown preset '" + o.preset + "' (see `replayssm presets`)");

  JsonlWriter out(a.str("--out", ""));
  const std::string device = cpu_model(), commit = git_commit();
  const int threads = cpu_threads(o.threads);
  const int64_t windows = (o.steps + o.L - 1) / o.L;

  std::fprintf(stderr, "measuring copy bandwidth ...\n");
  const double copy = copy_gbps(size_t(512 * MIB), o.threads);
  std::printf("device: %s; %d worker threads; copy bandwidth %.1f GB/s (read + write)\n", device.c_str(), threads,
              copy);
  std::printf("%-12s %-6s %-20s %6s %-9s %12s %10s %8s %7s %8s\n", "preset", "family", "shape", "batch", "mode",
              "us/step", "MB/step", "GB/s", "%copy", "speedup");

  int rc = 0;
  for (const Preset& p : presets) {
    const int64_t s = int64_t(dtype_size(o.state)), act = int64_t(dtype_size(o.act));
    const double row_state = double(state_elems(p) * s);
    const int64_t B = o.batch ? o.batch : int64_t(std::ceil(o.min_state_mib * MIB / row_state));
    Bench bench(p, o, B);

    // Warm-up: one flush cycle of each mode (faults the pages in, fills the ring).
    Progress prog("bench " + std::string(p.name), 2 * (windows + 1) * o.L);
    int64_t done = 0;
    for (int64_t i = 0; i < o.L; ++i, prog.tick(++done)) bench.baseline_step();
    for (int64_t i = 0; i < o.L; ++i, prog.tick(++done)) bench.replay_step();
    std::vector<double> t_base, t_replay;
    for (int64_t w = 0; w < windows; ++w) {
      double t0 = now_seconds();
      for (int64_t i = 0; i < o.L; ++i, prog.tick(++done)) bench.baseline_step();
      t_base.push_back((now_seconds() - t0) / double(o.L));
      t0 = now_seconds();
      for (int64_t i = 0; i < o.L; ++i, prog.tick(++done)) bench.replay_step();
      t_replay.push_back((now_seconds() - t0) / double(o.L));
    }
    prog.done();
    const double check = bench.check_rel_err();
    const double check_tol = o.act == DType::bf16 || o.state == DType::bf16 ? 3e-2 : o.act == DType::f16 || o.state == DType::f16 ? 4e-3 : 1e-4;
    const bool ok = check <= check_tol;
    if (!ok) rc = 1;

    const TokenBytes tb = token_bytes(p, s, act);
    const ReplayCycle cyc = replay_cycle(o.L, 1, 1);
    const double us_base = median(t_base) * 1e6, us_replay = median(t_replay) * 1e6;
    const double bytes_base = double(B) * baseline_bytes(tb, 1), bytes_replay = double(B) * replay_bytes(tb, 1, cyc);
    const double gbps_base = bytes_base / us_base / 1e3, gbps_replay = bytes_replay / us_replay / 1e3;

    auto row = [&](const char* mode, double us, double bytes, double gbps, int64_t mem_per_row, bool replay) {
      JsonRow r;
      r.str("family", family_name(p.family)).str("shape", shape_str(p)).integer("batch", B);
      r.str("state_dtype", dtype_tag(o.state)).str("read_dtype", dtype_tag(o.state));
      r.str("record_dtype", replay ? (p.family == Family::mamba2 ? dtype_tag(o.act) : "fp32") : "none");
      r.str("act_dtype", dtype_tag(o.act)).integer("L", o.L).integer("T", 1).str("mode", mode);
      r.num("us_per_step", us);
      if (replay) r.num("accept_mean", 1.0).num("flush_share", cyc.flush_share);
      else r.null("accept_mean").null("flush_share");
      r.num("bytes_per_step", bytes).num("frac_of_copy", gbps / copy).num("copy_gbps", copy);
      r.integer("mem_bytes_per_row", mem_per_row).str("device", device).str("commit", commit);
      r.str("command", g_command).str("backend", "cpu").str("preset", p.name).integer("threads", threads);
      r.integer("windows", windows).num("check_rel_err", check);
      if (replay) r.num("speedup", us_base / us);
      out.write(r);
    };
    row("baseline", us_base, bytes_base, gbps_base, int64_t(row_state), false);
    row("replay", us_replay, bytes_replay, gbps_replay, bench.replay_bytes_per_row(), true);

    std::printf("%-12s %-6s %-20s %6lld %-9s %12.1f %10.1f %8.1f %6.0f%% %8s\n", p.name, family_name(p.family),
                shape_str(p).c_str(), (long long)B, "baseline", us_base, bytes_base / 1e6, gbps_base,
                100 * gbps_base / copy, "");
    char sp[32];
    std::snprintf(sp, sizeof sp, "%.2fx", us_base / us_replay);
    std::printf("%-12s %-6s %-20s %6lld %-9s %12.1f %10.1f %8.1f %6.0f%% %8s\n", "", "", "", (long long)B, "replay",
                us_replay, bytes_replay / 1e6, gbps_replay, 100 * gbps_replay / copy, sp);
    std::printf("%-12s modelled ceiling %.2fx (bytes), flush share %.4f, history %.2f records/step, "
                "check rel err %.1e%s\n",
                "", bytes_base / bytes_replay, cyc.flush_share, cyc.hist_records + cyc.fold_records, check,
                ok ? "" : "  (MISMATCH: replay and baseline outputs disagree)");
    std::fflush(stdout);
  }
  return rc;
}

}  // namespace replayssm::tools
