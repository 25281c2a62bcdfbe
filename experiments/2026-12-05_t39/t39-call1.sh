#!/bin/bash
# t39, device call 1 (about 480 s; carry gpubin-x/t39.tar.xz): when the T = 1
# block streams release a consumed stage, and Mamba-2's first sweeps; five
# builds of one source (README.md here):
#   base      main's kernels (SASS-identical to 40c9cb6's)
#   rel1      REPLAYSSM_R1_RELEASE=1: the barrier and the refill right after
#             the sweep's rows are in registers
#   rel2      REPLAYSSM_R1_RELEASE=2: no barrier; the last warp to have its
#             rows refills (block kernels), one EMPTY arrival per warp
#             (the persistent stream)
#   late      REPLAYSSM_M2_LATE=1: Mamba-2's first sweeps after its records
#   rel2late  both
# 1. Mamba-2 H128 T = 1 fp32 / bf16 B = 64 / 256, the five builds alternating,
#    two rounds;
# 2. the delta block kernels (replay1.cuh): GDN HV64 fp32 B = 64 / 256 and its
#    bf16-d row, KDA fp32 B = 64; base, rel1, rel2 alternating, two rounds.
#   run: bash experiments/2026-12-05_t39/t39-call1.sh
set -u
cd "$(dirname "$0")/../.."
M="--family mamba2 --preset nemotron3 --L 16 --target-ms 2 --modes replay"
G="--family gdn --preset qwen35-122b --L 16 --target-ms 2 --modes replay"
K="--family kda --preset kimi --L 16 --target-ms 2 --modes replay"
BENCH_ARGS="$M --batch 64,256 --state fp32,bf16" \
ONLY="base rel1 rel2 late rel2late" PACK=gpubin-x/t39.tar.xz REPS=2 OUT=$OUT/m2 timeout 230 \
  bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "mamba2 rc $?"
tail -n 45 "$OUT/m2/log.txt"
BENCH_ARGS="$G --batch 64,256 --state fp32;$G --batch 256 --state fp32 --d-dtype bf16;$K --batch 64 --state fp32" \
ONLY="base rel1 rel2" PACK=gpubin-x/t39.tar.xz REPS=2 OUT=$OUT/blocks timeout 230 \
  bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "delta blocks rc $?"
tail -n 30 "$OUT/blocks/log.txt"
