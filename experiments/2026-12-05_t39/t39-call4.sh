#!/bin/bash
# t39, device call 4 (about 420 s; carry gpubin-x/t39.tar.xz): `spf`
# (REPLAYSSM_SPEC_L2PF=1: the delta T > 1 tensor-core stream keeps each
# warp's tile after next in L2; a row per lane, lanes 0–15; Mamba-2's T > 1
# stream: the sweep after the last one in flight) against base.
# 1. spf's speculative delta tests (16 shards) and memcheck / racecheck on
#    DeltaGpu.SpecMmaSmall and Mamba2Gpu.SpecShortRunN128;
# 2. both builds alternating, two rounds, L = 16: GDN HV64 and KDA T = 5
#    fp32 / bf16 at B = 64 / 256, T = 8 fp32 at B = 256; Mamba-2 H128 T = 5
#    fp32 / bf16 at B = 256.
#   run: bash experiments/2026-12-05_t39/t39-call4.sh
set -u
cd "$(dirname "$0")/../.."
q=$(mktemp -d)
xz -dc gpubin-x/t39.tar.xz | tar -C "$q" -x
touch "$q/spf/PREBUILT"
GTEST_FILTER='*DeltaGpu.Spec*:*DeltaGpuSpec*:*DeltaGpuArena.Spec*:DeltaGpu.GraphReplayChangingAcceptances:*Mamba2Gpu*Spec*' \
  SANITIZE_FILTER='DeltaGpu.SpecMmaSmall:Mamba2Gpu.SpecShortRunN128' SANITIZE_TIMEOUT_S=60 \
  BUILD_DIR=$q/spf SKIP_CPU_TESTS=1 TEST_SHARDS=16 DEADLINE_S=180 OUT=$OUT/tests-spf \
  bash scripts/gpu_check.sh test sanitize > /dev/null 2>&1
echo "spf:"; grep -E "^(test|sanitize) " "$OUT/tests-spf/log.txt" | tail -2
G="--family gdn --preset qwen35-122b --L 16 --target-ms 2 --modes replay"
K="--family kda --preset kimi --L 16 --target-ms 2 --modes replay"
BENCH_ARGS="$G --T 5 --batch 64,256 --state fp32,bf16;$K --T 5 --batch 64,256 --state fp32,bf16;\
$G --T 8 --batch 256 --state fp32;$K --T 8 --batch 256 --state fp32;\
--family mamba2 --preset nemotron3 --L 16 --target-ms 2 --modes replay --T 5 --batch 256 --state fp32,bf16" \
ONLY="base spf" PACK=gpubin-x/t39.tar.xz REPS=2 OUT=$OUT/spec timeout 240 \
  bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "spec rc $?"
tail -n 30 "$OUT/spec/log.txt"
