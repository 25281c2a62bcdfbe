#!/bin/bash
# t44, device call 1 (about 420 s; carry gpubin-x/t44.tar.xz, `main` =
# 9a6a67c built here): the tests of what has not run on a GPU yet
# (Mamba2Gpu.TensorOnAnotherDeviceRejected with the rest of Mamba2Gpu;
# the Python package with torch, after the cupy / stream / device_index
# changes), then ncu with per-line instruction and stall counts of the two
# kernels this session works on: KDA T = 5 fp32 (delta_replay_kernel, B =
# 256, L = 16) and GDN HV64 dual fp8 (the persistent stream
# delta_replay1p_kernel, B = 256, L = 16).
#   run: bash experiments/2026-12-05_t44/t44-call1.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name,memory.total,clocks.max.memory --format=csv,noheader
GTEST_FILTER='Mamba2Gpu.*' PACK=gpubin-x/t44.tar.xz PACK_LABEL=main SKIP_CPU_TESTS=1 TEST_SHARDS=16 \
  DEADLINE_S=${T_TEST:-90} OUT=$OUT/tests bash scripts/gpu_check.sh test > /dev/null 2>&1
grep -E "^test " "$OUT/tests/log.txt" | tail -1
grep -E "TensorOnAnotherDevice" "$OUT/tests/log.txt" | head -3
DEADLINE_S=${T_PY:-200} OUT=$OUT/py bash scripts/gpu_check.sh python > /dev/null 2>&1
grep -E "^python " "$OUT/py/log.txt" | tail -1
grep -E "passed|failed|SKIPPED|FAILED" "$OUT/py/log.txt" | tail -8
prof() {  # name kernel args
  PACK=gpubin-x/t44.tar.xz PACK_LABEL=main OUT=$OUT/$1 DEADLINE_S=100 PROFILE_KERNEL=$2 PROFILE_SKIP=${SKIP:-20} \
    PROFILE_ARGS="$3" bash scripts/gpu_check.sh profile > /dev/null 2>&1
  echo "== $1: $(grep -E '^profile ' "$OUT/$1/log.txt" | tail -1)"
  grep -E "Duration|Registers Per|Executed Ipc Active|Issue Slots Busy|DRAM Throughput|Executed Instructions  " \
    "$OUT/$1/profile.txt" | tr -s ' ' | head -8
  head -n 45 "$OUT/$1/profile_lines.txt"
  xz -9 "$OUT/$1/sass.csv" 2>/dev/null
  rm -f "$OUT/$1"/*.ncu-rep "$OUT/$1/sass.txt"
}
prof kda_t5 delta_replay_kernel "--family kda --preset kimi --modes replay --T 5 --batch 256 --L 16 --state fp32 --target-ms 2"
prof gdn_dual_fp8 delta_replay1p_kernel "--family gdn --preset qwen35-122b --modes dual --read fp8 --batch 256 --L 16 --state fp32 --target-ms 2"
