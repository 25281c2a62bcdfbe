// `replayssm bench --backend cuda`: baseline vs replay decode on the GPU, and
// the dual-precision and shared modes (design §4) on read copies.
//
// Method (docs/benchmarks.md): for each model shape, batch B, state dtype and
// history capacity L, a pool of S = nsets·B slots whose states together exceed
// max(256 MB, 4 × L2) is split into nsets disjoint slot sets; successive steps
// rotate through the sets, so no step finds its states in L2. A CUDA graph
// captures n steps (replay: nsets·L·k steps, so every slot runs whole flush
// cycles and the amortised time includes its flush); the graph is replayed
// many times and us_per_step = median(replay time) / n. Copy bandwidth is
// measured in the same run (device-to-device cudaMemcpyAsync, read + write)
// and every row is reported against its modelled bytes (design §6).
#if defined(REPLAYSSM_WITH_CUDA)
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench_gpu.h"
#include "bench_gpu_cases.h"
#include "common.h"

namespace replayssm::bench {
namespace {

struct Options {
  std::vector<std::string> families, presets, modes, states, reads;
  std::vector<int64_t> batches, Ls, Ts;
  std::string out, flush = "spread", d_dtype = "fp32";
  bool quick = false, append = false, copy_only = false;
  double budget_s = 0, target_ms = 0, copy_gib = 2, accept_rate = 0.82;
  uint64_t seed = 1234;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  for (std::string t; std::getline(ss, t, ',');)
    if (!t.empty()) v.push_back(t);
  return v;
}

void usage() {
  std::puts(
      "usage: replayssm bench --backend cuda [--family mamba2,gdn,kda] [--preset SHAPE,...]\n"
      "         [--batch 1,32,64,256,512] [--L 8,16,32] [--state fp32,bf16] [--modes baseline,replay]\n"
      "         [--flush spread|aligned] [--d-dtype fp32|bf16] [--out FILE.jsonl] [--append]\n"
      "         [--quick] [--budget-s SECONDS] [--target-ms MS] [--copy-gib GIB] [--copy-only]\n"
      "         [--seed N] [--T 1,5,8] [--accept-rate P] [--read fp8,nvfp4,bf16,fp16]\n"
      "  --preset  preset names (tools/presets.h: nemotron3, qwen35-122b, kimi, ...), 'all', a\n"
      "            family, or substrings of family/shape (H128-P64-N128-G8, gdn/H16-HV64)\n"
      "  --quick   batch 256, L 16, shapes mamba2 H128-P64, gdn HV64, kda; fp32 and bf16 state\n"
      "  --budget-s  stop starting new configurations after this many seconds (0 = no limit)\n"
      "  --T       tokens per row; T > 1 is speculative decoding (1 + drafts): replay with commit\n"
      "            vs the snapshot baseline (mode 'baseline' = snapshot); rows with L < T skipped\n"
      "  --accept-rate  per-draft acceptance probability (default 0.82: mean 3.5 of T = 5);\n"
      "            accepted = 1 + leading accepted drafts, drawn per row and step\n"
      "  --modes   baseline, replay, dual (checkpoint in --state, read copy in each --read format;\n"
      "            T > 1: dual_spec), shared (one packed state in each --read format, T = 1)\n"
      "  --read    read-copy / shared formats (default fp8,nvfp4)");
}

int apply_defaults(Options& o);

// Returns 0 on success, 2 on a usage error, 1 after printing help.
int parse(int argc, char** argv, Options& o, bool defaults = false) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) continue;  // program / subcommand words
    if (const size_t eq = a.find('='); eq != std::string::npos) {  // --name=value
      const std::string v = a.substr(eq + 1);
      a = a.substr(0, eq);
      if (a == "--backend" && v != "cuda") { std::fprintf(stderr, "bench_gpu: --backend must be cuda\n"); return 2; }
      if (a != "--backend") {
        std::vector<std::string> pair = {"bench", a, v};
        std::vector<char*> pv = {pair[0].data(), pair[1].data(), pair[2].data()};
        if (int rc = parse(3, pv.data(), o)) return rc;
      }
      continue;
    }
    if (a == "--help" || a == "-h") { usage(); return 1; }
    if (a == "--quick") { o.quick = true; continue; }
    if (a == "--append") { o.append = true; continue; }
    if (a == "--copy-only") { o.copy_only = true; continue; }
    if (i + 1 >= argc) { std::fprintf(stderr, "bench: %s needs a value\n", a.c_str()); return 2; }
    const std::string v = argv[++i];
    try {
      if (a == "--backend") {
        if (v != "cuda") { std::fprintf(stderr, "bench_gpu: --backend must be cuda\n"); return 2; }
      } else if (a == "--family") o.families = split(v);
      else if (a == "--preset") o.presets = split(v);
      else if (a == "--modes" || a == "--mode") o.modes = split(v);
      else if (a == "--state") o.states = split(v);
      else if (a == "--read") o.reads = split(v);
      else if (a == "--batch") { o.batches.clear(); for (auto& t : split(v)) o.batches.push_back(std::stoll(t)); }
      else if (a == "--L") { o.Ls.clear(); for (auto& t : split(v)) o.Ls.push_back(std::stoll(t)); }
      else if (a == "--T") { o.Ts.clear(); for (auto& t : split(v)) o.Ts.push_back(std::stoll(t)); }
      else if (a == "--accept-rate") o.accept_rate = std::stod(v);
      else if (a == "--out") o.out = v;
      else if (a == "--flush") o.flush = v;
      else if (a == "--d-dtype") o.d_dtype = v;
      else if (a == "--budget-s") o.budget_s = std::stod(v);
      else if (a == "--target-ms") o.target_ms = std::stod(v);
      else if (a == "--copy-gib") o.copy_gib = std::stod(v);
      else if (a == "--seed") o.seed = std::stoull(v);
      else { std::fprintf(stderr, "bench: unknown option %s\n", a.c_str()); usage(); return 2; }
    } catch (const std::exception&) {
      std::fprintf(stderr, "bench: bad value '%s' for %s\n", v.c_str(), a.c_str());
      return 2;
    }
  }
  return defaults ? apply_defaults(o) : 0;
}

int apply_defaults(Options& o) {
  if (o.families.empty()) o.families = {"mamba2", "gdn", "kda"};
  if (o.modes.empty()) o.modes = {"baseline", "replay"};
  if (o.states.empty()) o.states = {"fp32", "bf16"};
  if (o.batches.empty()) o.batches = o.quick ? std::vector<int64_t>{256} : std::vector<int64_t>{1, 32, 64, 256, 512};
  if (o.Ls.empty()) o.Ls = o.quick ? std::vector<int64_t>{16} : std::vector<int64_t>{8, 16, 32};
  if (o.target_ms <= 0) o.target_ms = o.quick ? 100 : 150;
  if (o.Ts.empty()) o.Ts = {1};
  if (o.reads.empty()) o.reads = {"fp8", "nvfp4"};
  for (const auto& r : o.reads) {
    ReadFormat f;
    if (!parse_format_label(r, &f)) { std::fprintf(stderr, "bench: unknown read format %s\n", r.c_str()); return 2; }
  }
  for (int64_t t : o.Ts) if (t < 1 || t > 8) { std::fprintf(stderr, "bench: T must be in [1, 8]\n"); return 2; }
  if (!(o.accept_rate >= 0 && o.accept_rate <= 1)) { std::fprintf(stderr, "bench: --accept-rate in [0, 1]\n"); return 2; }
  for (const auto& m : o.modes)
    if (m != "baseline" && m != "replay" && m != "dual" && m != "shared") { std::fprintf(stderr, "bench: unknown mode %s\n", m.c_str()); return 2; }
  for (const auto& f : o.families)
    if (f != "mamba2" && f != "gdn" && f != "kda") { std::fprintf(stderr, "bench: unknown family %s\n", f.c_str()); return 2; }
  if (o.flush != "spread" && o.flush != "aligned") { std::fprintf(stderr, "bench: --flush spread|aligned\n"); return 2; }
  for (int64_t b : o.batches) if (b < 1) { std::fprintf(stderr, "bench: batch must be >= 1\n"); return 2; }
  for (int64_t l : o.Ls) if (l < 1) { std::fprintf(stderr, "bench: L must be >= 1\n"); return 2; }
  return 0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

// Median device-to-device copy bandwidth in GB/s (bytes read + written).
double measure_copy_gbps(double gib, cudaStream_t s) {
  const size_t bytes = size_t(gib * double(size_t(1) << 30)) & ~size_t(255);
  DeviceBuffer a(bytes), b(bytes);
  cuda_ok(cudaMemset(a.get(), 1, bytes), "copy memset");
  cudaEvent_t e0, e1;
  cuda_ok(cudaEventCreate(&e0), "event");
  cuda_ok(cudaEventCreate(&e1), "event");
  std::vector<double> gbps;
  for (int r = 0; r < 12; ++r) {
    cuda_ok(cudaEventRecord(e0, s), "event record");
    cuda_ok(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice, s), "copy");
    cuda_ok(cudaEventRecord(e1, s), "event record");
    cuda_ok(cudaEventSynchronize(e1), "event sync");
    float ms = 0;
    cuda_ok(cudaEventElapsedTime(&ms, e0, e1), "elapsed");
    if (r >= 2) gbps.push_back(2.0 * double(bytes) / (double(ms) * 1e6));
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return median(gbps);
}

struct Timing {
  double us_per_step = 0;
  int64_t steps = 0, replays = 0;
  bool graph = false;
};

// Times `steps` calls of launch(i): captured into a CUDA graph when the calls
// are capturable (else launched directly), warmed up, then timed replay by
// replay with events; median per-replay time / steps.
Timing time_steps(const std::function<void(int64_t)>& launch, int64_t steps, cudaStream_t s,
                  const Exec& exec, double target_ms) {
  Timing t;
  t.steps = steps;
  for (int64_t i = 0; i < steps; ++i) launch(i);  // eager warm-up; validates the calls
  check_device_status(exec, "bench warm-up");
  cuda_ok(cudaStreamSynchronize(s), "warm-up");

  cudaGraph_t graph = nullptr;
  cudaGraphExec_t gexec = nullptr;
  cuda_ok(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "begin capture");
  bool captured = true;
  try {
    for (int64_t i = 0; i < steps; ++i) launch(i);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench: capture failed (%s); timing eager launches\n", e.what());
    captured = false;
  }
  cudaError_t end = cudaStreamEndCapture(s, &graph);
  if (!captured || end != cudaSuccess || !graph) {
    if (captured) std::fprintf(stderr, "bench: capture failed (%s); timing eager launches\n", cudaGetErrorString(end));
    if (graph) cudaGraphDestroy(graph);
    graph = nullptr;
    (void)cudaGetLastError();
  } else {
    cuda_ok(cudaGraphInstantiate(&gexec, graph, 0), "graph instantiate");
  }
  t.graph = gexec != nullptr;
  auto run_once = [&] {
    if (gexec) cuda_ok(cudaGraphLaunch(gexec, s), "graph launch");
    else for (int64_t i = 0; i < steps; ++i) launch(i);
  };

  cudaEvent_t e0, e1;
  cuda_ok(cudaEventCreate(&e0), "event");
  cuda_ok(cudaEventCreate(&e1), "event");
  auto timed = [&] {
    cuda_ok(cudaEventRecord(e0, s), "event record");
    run_once();
    cuda_ok(cudaEventRecord(e1, s), "event record");
    cuda_ok(cudaEventSynchronize(e1), "event sync");
    float ms = 0;
    cuda_ok(cudaEventElapsedTime(&ms, e0, e1), "elapsed");
    return double(ms);
  };
  const double first = std::max(timed(), 1e-3);  // warm replay, also sizes the run
  const int64_t reps = std::clamp<int64_t>(int64_t(target_ms / first), 5, 200);
  std::vector<double> ms;
  for (int64_t r = 0; r < reps; ++r) ms.push_back(timed());
  check_device_status(exec, "bench");
  t.replays = reps;
  t.us_per_step = median(ms) * 1e3 / double(steps);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  if (gexec) cudaGraphExecDestroy(gexec);
  if (graph) cudaGraphDestroy(graph);
  return t;
}

std::string json_escape(const std::string& s) {
  std::string r;
  for (char c : s) {
    if (c == '"' || c == '\\') { r += '\\'; r += c; }
    else if (static_cast<unsigned char>(c) < 0x20) r += ' ';
    else r += c;
  }
  return r;
}

std::string commit_id() { return tools::git_commit(); }

// One measured row (design §7 fields plus method details).
struct Row {
  std::string family, shape, state, read, record, records, act, mode, flush_layout;
  int64_t batch = 0, L = 0, T = 1, mem_bytes_per_row = 0, pool_slots = 0, slot_sets = 0;
  double us = 0, accept_mean = 1, flush_share = 0, flush_peak = 0, hist_mean = 0, bytes = 0,
         frac = 0, floor_us = 0, speedup = 0, model_speedup = 0;
  Timing timing;
  bool finite = true;
};

std::string to_json(const Row& r, double copy_gbps, const std::string& device, const std::string& commit,
                    const std::string& command) {
  char num[1024];
  std::snprintf(num, sizeof num,
                "\"batch\": %lld, \"L\": %lld, \"T\": %lld, \"us_per_step\": %.4f, \"accept_mean\": %.4f, "
                "\"flush_share\": %.6f, \"flush_peak\": %.6f, \"hist_mean\": %.4f, \"bytes_per_step\": %.0f, "
                "\"frac_of_copy\": %.4f, \"copy_gbps\": %.1f, \"floor_us\": %.4f, \"speedup\": %.4f, "
                "\"model_speedup\": %.4f, \"mem_bytes_per_row\": %lld, \"pool_slots\": %lld, "
                "\"slot_sets\": %lld, \"steps_per_graph\": %lld, \"replays\": %lld, \"graph\": %s, "
                "\"outputs_finite\": %s",
                (long long)r.batch, (long long)r.L, (long long)r.T, r.us, r.accept_mean, r.flush_share,
                r.flush_peak, r.hist_mean, r.bytes, r.frac, copy_gbps, r.floor_us, r.speedup,
                r.model_speedup, (long long)r.mem_bytes_per_row, (long long)r.pool_slots,
                (long long)r.slot_sets, (long long)r.timing.steps, (long long)r.timing.replays,
                r.timing.graph ? "true" : "false", r.finite ? "true" : "false");
  std::string j = "{\"family\": \"" + r.family + "\", \"shape\": \"" + r.shape + "\", \"state_dtype\": \"" +
                  r.state + "\", \"read_dtype\": \"" + r.read + "\", \"record_dtype\": \"" + r.record +
                  "\", \"records\": \"" + r.records + "\", \"act_dtype\": \"" + r.act + "\", \"mode\": \"" +
                  r.mode + "\", \"flush_layout\": \"" + r.flush_layout + "\", " + num + ", \"device\": \"" +
                  json_escape(device) + "\", \"commit\": \"" + json_escape(commit) + "\", \"command\": \"" +
                  json_escape(command) + "\"}";
  return j;
}

void print_header() {
  std::printf("%-6s %-20s %5s %3s %2s %5s %-13s %10s %9s %6s %8s %6s %7s %7s %6s\n", "family", "shape", "B", "L", "T",
              "state", "mode", "us/step", "floor_us", "/floor", "GB/s", "%copy", "speedup", "model", "flush");
}
void print_row(const Row& r) {
  char sp[16] = "-", ms[16] = "-", fl[16] = "-";
  if (r.speedup > 0) std::snprintf(sp, sizeof sp, "%.2fx", r.speedup);
  if (r.model_speedup > 0) std::snprintf(ms, sizeof ms, "%.2fx", r.model_speedup);
  if (r.mode == "replay" || r.mode == "replay_spec" || r.mode == "dual" || r.mode == "dual_spec")
    std::snprintf(fl, sizeof fl, "%.3f", r.flush_share);
  std::printf("%-6s %-20s %5lld %3lld %2lld %5s %-13s %10.2f %9.2f %5.2fx %8.0f %5.1f%% %7s %7s %6s%s%s\n",
              r.family.c_str(), r.shape.c_str(), (long long)r.batch, (long long)r.L, (long long)r.T, r.state.c_str(),
              (r.read == r.state ? r.mode : r.mode + "/" + r.read).c_str(), r.us, r.floor_us, r.us / r.floor_us, r.bytes / (r.us * 1e3), 100 * r.frac, sp, ms, fl, r.timing.graph ? "" : " (eager)",
              r.finite ? "" : " NONFINITE");
  std::fflush(stdout);
}

bool shape_selected(const ModelShape& s, const Options& o) {
  if (std::find(o.families.begin(), o.families.end(), s.family) == o.families.end()) return false;
  if (o.presets.empty()) return true;
  for (const auto& p : o.presets)
    if (shape_matches(s, p)) return true;
  return false;
}

}  // namespace

int run(int argc, char** argv) {
  Options o;
  if (int rc = parse(argc, argv, o, true)) return rc == 1 ? 0 : rc;
  std::string command = tools::g_command;
  if (command.empty()) {
    command = "replayssm";
    for (int i = 0; i < argc; ++i) command += std::string(" ") + argv[i];
  }

  int dev = 0;
  cuda_ok(cudaGetDevice(&dev), "cudaGetDevice");
  cudaDeviceProp prop{};
  cuda_ok(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
  const std::string device = prop.name;
  const std::string commit = commit_id();
  cudaStream_t stream;
  cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  DeviceBuffer status(sizeof(int32_t));
  cuda_ok(cudaMemset(status.get(), 0, sizeof(int32_t)), "status");
  Exec exec;
  exec.backend = Backend::cuda;
  exec.stream = stream;
  exec.device_status = static_cast<int32_t*>(status.get());

  const double copy_gbps = measure_copy_gbps(o.copy_gib, stream);
  const double l2 = double(prop.l2CacheSize);
  const double pool_target = std::max(256.0 * (1 << 20), 4 * l2);
  std::printf("device: %s (L2 %.0f MB, %.0f GB)  copy bandwidth: %.1f GB/s (read + write, %.1f GiB copy)\n",
              device.c_str(), l2 / 1e6, double(prop.totalGlobalMem) / 1e9, copy_gbps, o.copy_gib);
  if (o.copy_only) return 0;

  FILE* out = nullptr;
  if (!o.out.empty()) {
    out = std::fopen(o.out.c_str(), o.append ? "a" : "w");
    if (!out) { std::fprintf(stderr, "bench: cannot open %s\n", o.out.c_str()); return 2; }
  }
  DType d_dtype = DType::f32;
  if (!parse_dtype_label(o.d_dtype, &d_dtype)) { std::fprintf(stderr, "bench: bad --d-dtype\n"); return 2; }
  const bool aligned = o.flush == "aligned";
  const bool want_base = std::find(o.modes.begin(), o.modes.end(), "baseline") != o.modes.end();
  const bool want_replay = std::find(o.modes.begin(), o.modes.end(), "replay") != o.modes.end();
  const bool want_dual = std::find(o.modes.begin(), o.modes.end(), "dual") != o.modes.end();
  const bool want_shared = std::find(o.modes.begin(), o.modes.end(), "shared") != o.modes.end();
  std::vector<ReadFormat> reads;
  for (const auto& r : want_dual || want_shared ? o.reads : std::vector<std::string>{}) {
    ReadFormat f;
    parse_format_label(r, &f);
    reads.push_back(f);
  }
  const int64_t L_max = *std::max_element(o.Ls.begin(), o.Ls.end());
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  int failures = 0, skipped = 0, rows = 0;
  print_header();

  for (const ModelShape& shape : o.quick && o.presets.empty() ? quick_shapes() : default_shapes()) {
    if (!shape_selected(shape, o)) continue;
    for (const std::string& st : o.states) {
      DType state;
      if (!parse_dtype_label(st, &state)) { std::fprintf(stderr, "bench: bad state dtype %s\n", st.c_str()); return 2; }
      for (int64_t B : o.batches) {
        if (o.budget_s > 0 && elapsed() > o.budget_s) { ++skipped; continue; }
        // Runs one measurement; a failure is reported and the run goes on.
        auto guarded = [&](const std::string& what, const std::function<void()>& fn) {
          try {
            fn();
            return true;
          } catch (const std::exception& e) {
            ++failures;
            std::printf("FAILED %s/%s B=%lld state=%s %s: %s\n", shape.family.c_str(), shape.name().c_str(),
                        (long long)B, st.c_str(), what.c_str(), e.what());
            std::fflush(stdout);
            (void)cudaGetLastError();
            (void)cudaMemset(status.get(), 0, sizeof(int32_t));
            return false;
          }
        };
        for (int64_t T : o.Ts) {
        std::unique_ptr<Case> c;
        // Pool: enough slot sets that the states exceed pool_target.
        const int64_t elems = shape.family == "mamba2" ? shape.H * shape.P * shape.N : shape.HV * shape.V * shape.K;
        const int64_t bytes_state = elems * int64_t(dtype_size(state));
        // Slot sets: the smallest representation timed (a read copy) exceeds pool_target too.
        int64_t bytes_small = bytes_state;
        for (ReadFormat f : reads) {
          const QuantLayout q = shape.family == "mamba2" ? quant_layout(f, shape.P, shape.N) : quant_layout(f, shape.V, shape.K);
          bytes_small = std::min(bytes_small, int64_t(std::ceil(double(elems) * q.bytes_per_element())));
        }
        const int64_t nsets = std::max<int64_t>(1, int64_t(std::ceil(pool_target / double(bytes_small * B))));
        if (!guarded("setup", [&] { c = make_case(shape, B, nsets, state, DType::bf16, d_dtype, L_max, o.seed + uint64_t(B), T); }))
          continue;
        const ByteModel bm = c->bytes();
        Row proto;
        proto.family = shape.family;
        proto.shape = shape.name();
        proto.state = proto.read = dtype_label(state);
        proto.act = dtype_label(c->act);
        proto.batch = B;
        proto.pool_slots = c->S;
        proto.slot_sets = nsets;
        const double base_bytes = baseline_bytes_per_step(bm, B);
        auto finish = [&](Row& r) {
          r.frac = (r.bytes / (r.us * 1e-6)) / (copy_gbps * 1e9);
          r.floor_us = r.bytes / (copy_gbps * 1e3);
          int64_t nz = 0;
          r.finite = c->outputs_finite(&nz);
          if (!r.finite) ++failures;
          print_row(r);
          if (out) { std::fprintf(out, "%s\n", to_json(r, copy_gbps, device, commit, command).c_str()); std::fflush(out); }
          ++rows;
        };
        proto.T = T;
        if (T > 1) {
          // Speculative decoding: snapshot baseline vs replay with commit.
          // A seeded acceptance trace of >= 1,000 steps (design §7), whole slot-set cycles.
          const int64_t spec_steps = nsets * std::max<int64_t>(1, (1000 + nsets - 1) / nsets);
          const double accept_mean = c->prepare_acceptance(spec_steps, o.accept_rate, o.seed + 7 * uint64_t(T));
          proto.accept_mean = accept_mean;
          Row snap = proto;
          if (want_base) {
            guarded("snapshot T=" + std::to_string(T), [&] {
              const int64_t nsnap = std::max<int64_t>(
                  1, int64_t(std::ceil(pool_target / double(bytes_state * B * T))));
              c->prepare_snapshot(nsnap);
              snap.mode = "snapshot_spec";
              snap.record = snap.records = "none";
              snap.L = 0;
              snap.flush_layout = "none";
              snap.slot_sets = nsnap;
              snap.pool_slots = nsnap * B * T;
              snap.mem_bytes_per_row = c->snapshot_mem_bytes_per_row();
              snap.bytes = snapshot_bytes_per_step(bm, B, T);
              snap.timing = time_steps([&](int64_t i) { c->step_spec(false, i % nsets, i, exec); }, spec_steps,
                                       stream, exec, o.target_ms);
              snap.us = snap.timing.us_per_step;
              c->prepare_snapshot(0);  // release the snapshot pool before the replay rows
              finish(snap);
            });
          }
          // replay_spec, or dual_spec while a read copy is bound.
          auto spec_row = [&](int64_t L) {
            const bool dual = c->has_copy;
            const ByteModel m = c->bytes();
            Row r = proto;
            r.mode = dual ? "dual_spec" : "replay_spec";
            if (dual) r.read = format_label(c->read_format);
            r.L = L;
            r.flush_layout = "spread";
            r.record = dtype_label(c->record_dtype());
            r.records = c->record_desc();
            c->prepare_spec(L, o.seed + uint64_t(L));
            const FlushStats fs = c->simulate_spec(spec_steps, 4);
            r.flush_share = fs.flush_share;
            r.flush_peak = fs.flush_peak;
            r.hist_mean = fs.hist_mean;
            r.bytes = dual ? dual_bytes_per_step(m, fs, B, T) : spec_replay_bytes_per_step(m, fs, B, T);
            r.mem_bytes_per_row = dual ? c->dual_mem_bytes_per_row() : c->replay_mem_bytes_per_row();
            r.model_speedup = snapshot_bytes_per_step(bm, B, T) / r.bytes;
            r.timing = time_steps([&](int64_t i) { c->step_spec(true, i % nsets, i, exec); }, spec_steps,
                                  stream, exec, o.target_ms);
            r.us = r.timing.us_per_step;
            if (snap.us > 0) r.speedup = snap.us / r.us;
            finish(r);
          };
          auto spec_rows = [&](const std::string& what) {
            for (int64_t L : o.Ls) {
              if (L < T) continue;
              if (o.budget_s > 0 && elapsed() > o.budget_s) { ++skipped; continue; }
              guarded(what + " T=" + std::to_string(T) + " L=" + std::to_string(L), [&] { spec_row(L); });
            }
          };
          if (want_replay) spec_rows("replay");
          for (ReadFormat f : want_dual ? reads : std::vector<ReadFormat>{}) {
            if (!guarded(std::string("read copy ") + format_label(f), [&] { c->set_read_copy(f); })) continue;
            spec_rows(std::string("dual_spec ") + format_label(f));
            c->clear_read_copy();
          }
          continue;
        }
        Row base = proto;
        if (want_base) {
          guarded("baseline", [&] {
            base.mode = "baseline";
            base.record = base.records = "none";
            base.L = 0;
            base.flush_layout = "none";
            base.mem_bytes_per_row = int64_t(bm.state);
            base.bytes = base_bytes;
            const int64_t steps = nsets * std::max<int64_t>(1, (32 + nsets - 1) / nsets);
            base.timing = time_steps([&](int64_t i) { c->step(false, i % nsets, exec); }, steps, stream, exec, o.target_ms);
            base.us = base.timing.us_per_step;
            finish(base);
          });
        }
        // replay, or dual while a read copy is bound: one row per L.
        auto replay_rows = [&](const std::string& what) {
          const bool dual = c->has_copy;
          const ByteModel m = c->bytes();
          for (int64_t L : o.Ls) {
            if (o.budget_s > 0 && elapsed() > o.budget_s) { ++skipped; continue; }
            guarded(what + " L=" + std::to_string(L), [&] {
              Row r = proto;
              r.mode = dual ? "dual" : "replay";
              if (dual) r.read = format_label(c->read_format);
              r.L = L;
              // an eager T = 1 step (core/eager.h) moves the baseline's bytes
              const bool eager = !dual && c->eager_step();
              r.flush_layout = eager ? "eager" : aligned ? "aligned" : "spread";
              r.record = dtype_label(c->record_dtype());
              r.records = c->record_desc();
              c->prepare_replay(L, aligned, o.seed + uint64_t(L));
              // Whole flush cycles for every slot: nsets·L·k steps, k >= 1, >= 32 steps.
              const int64_t cycle = nsets * L;
              const int64_t steps = cycle * std::max<int64_t>(1, (32 + cycle - 1) / cycle);
              const FlushStats fs = c->simulate(steps);
              r.flush_share = fs.flush_share;
              r.flush_peak = fs.flush_peak;
              r.hist_mean = fs.hist_mean;
              r.bytes = dual ? dual_bytes_per_step(m, fs, B, 1) : eager ? base_bytes : replay_bytes_per_step(m, fs, B);
              r.mem_bytes_per_row = dual ? c->dual_mem_bytes_per_row() : c->replay_mem_bytes_per_row();
              r.model_speedup = base_bytes / r.bytes;
              r.timing = time_steps([&](int64_t i) { c->step(true, i % nsets, exec); }, steps, stream, exec, o.target_ms);
              r.us = r.timing.us_per_step;
              if (base.us > 0) r.speedup = base.us / r.us;
              finish(r);
            });
          }
        };
        if (want_replay) replay_rows("replay");
        // Dual precision (replay on a read copy) and shared mode, per format.
        for (ReadFormat f : reads) {
          if (!guarded(std::string("read copy ") + format_label(f), [&] { c->set_read_copy(f); })) continue;
          const ByteModel dm = c->bytes();
          if (want_dual) replay_rows(std::string("dual ") + format_label(f));
          if (want_shared && (o.budget_s <= 0 || elapsed() <= o.budget_s)) {
            guarded(std::string("shared ") + format_label(f), [&] {
              Row r = proto;
              r.mode = "shared";
              r.state = r.read = format_label(f);
              r.record = r.records = "none";
              r.L = 0;
              r.flush_layout = "none";
              r.bytes = shared_bytes_per_step(dm, B, 1);
              r.mem_bytes_per_row = c->shared_mem_bytes_per_row();
              r.model_speedup = base_bytes / r.bytes;
              const int64_t steps = nsets * std::max<int64_t>(1, (32 + nsets - 1) / nsets);
              r.timing = time_steps([&](int64_t i) { c->step_shared(i % nsets, exec); }, steps, stream, exec, o.target_ms);
              r.us = r.timing.us_per_step;
              if (base.us > 0) r.speedup = base.us / r.us;
              finish(r);
            });
          }
          c->clear_read_copy();
        }
        }  // T
      }
    }
  }
  if (out) std::fclose(out);
  cudaStreamDestroy(stream);
  std::printf("bench: %d rows, %d failed, %d skipped (budget), %.1f s\n", rows, failures, skipped, elapsed());
  return failures ? 1 : 0;
}

}  // namespace replayssm::bench

int bench_gpu_main(int argc, char** argv) {
  try {
    return replayssm::bench::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench: %s\n", e.what());
    return 1;
  }
}
#endif  // REPLAYSSM_WITH_CUDA
