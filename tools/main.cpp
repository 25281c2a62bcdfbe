// The `replayssm` command line: verify, bench, presets, info.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "common.h"
#include "presets.h"

namespace replayssm::tools {
std::string g_command;
extern const char* VERIFY_USAGE;
extern const char* BENCH_USAGE;
extern const char* DRIFT_USAGE;
int verify_main(int argc, char** argv);
int drift_main(int argc, char** argv);
int bench_main(int argc, char** argv);
}  // namespace replayssm::tools

namespace {

using namespace replayssm::tools;

const char* USAGE =
    "usage: replayssm <command> [options]\n"
    "\n"
    "replayssm: replay decode for Mamba-2, Gated DeltaNet and Kimi Delta Attention\n"
    "(checkpoint + ring of inputs instead of writing the state every step).\n"
    "\n"
    "commands:\n"
    "  verify    check the replay invariants against the reference backend\n"
    "  bench     baseline vs replay decode time, bytes and copy-bandwidth fraction\n"
    "  drift     long-run output error per precision arm (dual, shared, fp32) vs fp64\n"
    "  presets   list the model presets (shapes of design/replay.md §6)\n"
    "  info      build and device facts (cuda_built, cuda_available, cpu)\n"
    "  help CMD  options of one command (also: replayssm CMD --help)\n"
    "\n"
    "examples:\n"
    "  replayssm verify --backend cpu --quick\n"
    "  replayssm bench --preset qwen35 --out bench/results/cpu-qwen35.jsonl\n"
    "  replayssm bench --backend cuda --preset all\n";

const char* PRESETS_USAGE =
    "usage: replayssm presets\n"
    "\n"
    "Lists the model presets: name, family, per-layer shape (TP = 1), fp32 state\n"
    "per row per layer and default history capacity L. Headline presets (*) are\n"
    "the ones `--preset all` selects.\n";

const char* INFO_USAGE =
    "usage: replayssm info\n"
    "\n"
    "Prints `key: value` lines: cuda_built (compiled with the CUDA backend),\n"
    "cuda_available (built and a usable GPU present), cpu, commit. Scripts use\n"
    "cuda_available to pick the backend.\n";

int info_main() {
#if defined(REPLAYSSM_WITH_CUDA)
  const bool built = true;
#else
  const bool built = false;
#endif
  std::printf("cuda_built: %s\n", built ? "yes" : "no");
  std::printf("cuda_available: %s\n", replayssm::cuda_available() ? "yes" : "no");
  std::printf("cpu: %s\n", cpu_model().c_str());
  std::printf("commit: %s\n", git_commit().c_str());
  return 0;
}

int presets_main() {
  std::printf("%-16s %-6s %-20s %12s %4s  %s\n", "name", "family", "shape", "fp32 state", "L", "model");
  for (const Preset& p : PRESETS) {
    char mib[32];
    std::snprintf(mib, sizeof mib, "%.2f MiB", double(state_elems(p)) * 4.0 / (1024.0 * 1024.0));
    std::printf("%-16s %-6s %-20s %12s %4lld  %s%s\n", p.name, family_name(p.family), shape_str(p).c_str(), mib,
                (long long)p.L, p.model, p.main ? " *" : "");
  }
  return 0;
}

bool wants_help(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) return true;
  return false;
}

bool is_cuda_bench(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--backend=cuda")) return true;
    if (!std::strcmp(argv[i], "--backend") && i + 1 < argc && !std::strcmp(argv[i + 1], "cuda")) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  g_command = command_line(argc, argv);
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::fputs(USAGE, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  std::string cmd = argv[1];
  if (cmd == "help") {
    const std::string what = argc > 2 ? argv[2] : "";
    std::fputs(what == "verify" ? VERIFY_USAGE : what == "bench" ? BENCH_USAGE : what == "drift" ? DRIFT_USAGE
               : what == "presets" ? PRESETS_USAGE : what == "info" ? INFO_USAGE : USAGE, stdout);
    return 0;
  }
  // The command's own argv: argv[0] = command name.
  const int cargc = argc - 1;
  char** cargv = argv + 1;
  const char* usage = cmd == "verify" ? VERIFY_USAGE : cmd == "bench" ? BENCH_USAGE : cmd == "drift" ? DRIFT_USAGE
                      : cmd == "presets" ? PRESETS_USAGE : cmd == "info" ? INFO_USAGE : nullptr;
  if (!usage) {
    std::fprintf(stderr, "replayssm: unknown command '%s'\n\n%s", cmd.c_str(), USAGE);
    return 2;
  }
  // The GPU bench has its own options and help.
  if (wants_help(cargc, cargv) && !(cmd == "bench" && is_cuda_bench(cargc, cargv))) {
    std::fputs(usage, stdout);
    return 0;
  }
  try {
    if (cmd == "verify") return verify_main(cargc, cargv);
    if (cmd == "bench") return bench_main(cargc, cargv);
    if (cmd == "drift") return drift_main(cargc, cargv);
    if (cargc > 1) throw UsageError(cmd + " takes no options");
    return cmd == "info" ? info_main() : presets_main();
  } catch (const UsageError& e) {
    std::fprintf(stderr, "replayssm %s: %s\n\n%s", cmd.c_str(), e.what(), usage);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "replayssm %s: error: %s\n", cmd.c_str(), e.what());
    return 1;
  }
}
