#!/bin/bash
# t39, device call 2 (about 400 s; carry gpubin-x/t39.tar.xz): the persistent
# T = 1 stream (replay1p.cuh) with the stage released early (rel1: after a
# consumer barrier right after the loads; rel2: one EMPTY arrival per warp,
# no barrier), against base, alternating, two rounds, B = 256, L = 16: GDN
# HV64 bf16, KDA fp32 / bf16, and the dual steps' packed copies (GDN fp8 /
# nvfp4, KDA fp8; fp32 checkpoints).
#   run: bash experiments/2026-12-05_t39/t39-call2.sh
set -u
cd "$(dirname "$0")/../.."
G="--family gdn --preset qwen35-122b --L 16 --target-ms 2 --batch 256"
K="--family kda --preset kimi --L 16 --target-ms 2 --batch 256"
BENCH_ARGS="$G --modes replay --state bf16;$K --modes replay --state fp32,bf16;\
$G --modes dual --state fp32 --read fp8,nvfp4;$K --modes dual --state fp32 --read fp8" \
ONLY="base rel1 rel2" PACK=gpubin-x/t39.tar.xz REPS=2 OUT=$OUT/persistent timeout 420 \
  bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "persistent rc $?"
tail -n 40 "$OUT/persistent/log.txt"
