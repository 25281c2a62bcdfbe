#!/bin/bash
# t40, device call 1 (about 160 s; carry gpubin-x/t40.tar.xz): the landed
# t39 winners (`land`, 9744c67: the persistent stream's per-warp stage
# release except nvfp4 copies, Mamba-2's late first sweeps on 16-bit states,
# the T > 1 L2 prefetch on Mamba-2 fp32 and KDA fp32 states) against `base`
# (main's kernels before, t39's base build, CLI only).
# 1. the rows the change touches, alternating, two rounds, L = 16;
# 2. land's GPU tests of the changed kernels (16 shards).
#   run: bash experiments/2026-12-05_t40/t40-call1.sh
set -u
cd "$(dirname "$0")/../.."
G="--family gdn --preset qwen35-122b --L 16 --target-ms 2 --batch 256"
K="--family kda --preset kimi --L 16 --target-ms 2 --batch 256"
M="--family mamba2 --preset nemotron3 --L 16 --target-ms 2 --modes replay"
BENCH_ARGS="$G --modes replay --state bf16;$K --modes replay --state fp32,bf16;\
$G --modes dual --state fp32 --read fp8,nvfp4;$K --modes dual --state fp32 --read fp8;\
$M --batch 64,256 --state bf16;$M --batch 256 --state fp32;$M --T 5 --batch 256 --state fp32;\
$K --modes replay --T 5 --state fp32" \
ONLY="base land" PACK=gpubin-x/t40.tar.xz REPS=2 OUT=$OUT/bench timeout 70 \
  bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "bench rc $?"
tail -n 16 "$OUT/bench/log.txt"
GTEST_FILTER='DeltaGpu.Persistent*:*DualDeltaGpu*Persistent*:DeltaGpu.ReplayStep:Mamba2Gpu.Replay*:Mamba2Gpu.Spec*:*Mamba2GpuSpec*:DeltaGpu.SpecMmaSmall:*DeltaGpuSpecTensorCores*' \
  PACK=gpubin-x/t40.tar.xz PACK_LABEL=land SKIP_CPU_TESTS=1 TEST_SHARDS=16 DEADLINE_S=${DEADLINE_S:-100} OUT=$OUT/tests \
  bash scripts/gpu_check.sh test > /dev/null 2>&1
grep -E "^test " "$OUT/tests/log.txt" | tail -1
