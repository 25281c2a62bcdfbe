#!/bin/bash
# t45, device call 1 (about 420 s on an H200; carry gpubin-x/t45a.tar.xz:
# `ce9aa8c` = main's build, CLI and GPU tests): main's target rows of
# issues 3-5 on the H200 (none measured there since 9744c67: the T > 1
# instruction cuts 7c7fb53, the GDN dual fp8 tensor-core sweeps b395a18 and
# the Mamba-2 sweep-ahead prefetch 2d99071 are H100 figures only), two
# rounds, L = 16, B = 256; the persistent step's stage count on the H200
# (t41-call4 part 1: default against three stages with four result
# buffers); the B = 64 baseline rows below 0.85 of copy; then memcheck of
# the persistent dual fp8 step (t44-call6).
#   run: bash experiments/2026-12-05_t45/t45-call1.sh
#   (P and LABEL pick another pack and its build label; t47 runs it on
#   gpubin-x/t46m.tar.xz, label m5223, whose kernels are SASS-identical;
#   MEMCHECK=0 skips the memcheck, which t47 ran on an H100.)
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name,memory.total,clocks.max.memory --format=csv,noheader
P=${P:-gpubin-x/t45a.tar.xz}
LABEL=${LABEL:-ce9aa8c}
d=$(mktemp -d)
xz -dc $P | tar -C "$d" -x
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
[ "${MEMCHECK:-1}" = 0 ] || { timeout 110 "$cs" --tool memcheck --error-exitcode 3 "$d/$LABEL/replayssm_gpu_tests" \
  --gtest_filter='Part/DualDeltaGpuPersistentStep.MatchCpu/0' --gtest_brief=1 > "$OUT/memcheck.txt" 2>&1
echo "memcheck rc=$?"
tail -n 4 "$OUT/memcheck.txt"; }
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: no benchmarks"; exit 0; }
cmp() {  # name, seconds, ENVS, BENCH_ARGS
  ENVS="$3" BENCH_ARGS="$4" PACK=$P REPS=2 OUT=$OUT/$1 timeout "$2" bash scripts/gpu_compare.sh > /dev/null 2>&1
  echo "== $1 rc $?"
  sed -n '/^µs per step/,$p' "$OUT/$1/log.txt"
}
cmp t1 100 "" "--family gdn,mamba2,kda --preset qwen35-122b,nemotron3,kimi --batch 256 --L 16 --state fp32,bf16 --modes baseline,replay --target-ms 2;\
--family gdn --preset qwen35-122b --batch 256 --L 16 --state fp32 --d-dtype bf16 --modes replay --target-ms 2"
cmp spec 70 "" "--family gdn,kda,mamba2 --preset qwen35-122b,kimi,nemotron3 --batch 256 --T 5 --L 16 --state fp32 --modes replay --target-ms 2"
cmp stages 110 "def:X=0;nst3nb4:REPLAYSSM_R1P_NST=3,REPLAYSSM_R1P_NB=4" \
"--family gdn,kda --preset qwen35-122b,kimi --batch 256 --L 16 --state bf16 --modes replay --target-ms 2;\
--family kda --preset kimi --batch 256 --L 16 --state fp32 --modes replay --target-ms 2;\
--family gdn,kda,mamba2 --preset qwen35-122b,kimi,nemotron3 --batch 256 --L 16 --state fp32 --modes dual --read fp8,nvfp4 --target-ms 2"
cmp b64 60 "" "--family kda,mamba2 --preset kimi,nemotron3-h64,nemotron3-nano --batch 64 --L 16 --state fp32 --modes baseline --target-ms 2"
