#!/bin/bash
# t39, device call 2 (about 500 s; carry gpubin-x/t39.tar.xz): the delta
# T = 1 streams with the stage released early (rel1: a barrier right after
# the loads; rel2: no barrier: the last warp refills in replay1.cuh's blocks,
# one EMPTY arrival per warp in the persistent stream), against base,
# alternating, two rounds, L = 16:
# - replay1.cuh's blocks: GDN HV64 fp32 B = 64 / 256 and its bf16-d row, KDA
#   fp32 B = 64;
# - the persistent step (replay1p.cuh), B = 256: GDN HV64 bf16, KDA fp32 /
#   bf16, and the dual steps' packed copies (GDN fp8 / nvfp4, KDA fp8; fp32
#   checkpoints).
#   run: bash experiments/2026-12-05_t39/t39-call2.sh
set -u
cd "$(dirname "$0")/../.."
G="--family gdn --preset qwen35-122b --L 16 --target-ms 2"
K="--family kda --preset kimi --L 16 --target-ms 2"
BENCH_ARGS="$G --modes replay --batch 64,256 --state fp32;$G --modes replay --batch 256 --state fp32 --d-dtype bf16;\
$K --modes replay --batch 64 --state fp32;\
$G --modes replay --batch 256 --state bf16;$K --modes replay --batch 256 --state fp32,bf16;\
$G --modes dual --batch 256 --state fp32 --read fp8,nvfp4;$K --modes dual --batch 256 --state fp32 --read fp8" \
ONLY="base rel1 rel2" PACK=gpubin-x/t39.tar.xz REPS=2 OUT=$OUT/delta timeout 560 \
  bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "delta rc $?"
tail -n 60 "$OUT/delta/log.txt"
