#!/bin/bash
# t39, device call 1 (about 450 s; carry gpubin-x/t39.tar.xz): the T = 1 bulk
# streams' stage release and Mamba-2's first sweeps, five builds of one
# source (experiments/2026-12-05_t39/README.md):
#   base      main's kernels (SASS-identical to 40c9cb6's)
#   rel1      REPLAYSSM_R1_RELEASE=1: the block barrier and the refill right
#             after the sweep's rows are in registers (Mamba-2 replay1_kernel.cuh,
#             GDN / KDA replay1.cuh)
#   rel2      REPLAYSSM_R1_RELEASE=2: no barrier; the last warp to have its
#             rows refills (cuda/common.cuh stage_consumed)
#   late      REPLAYSSM_M2_LATE=1: Mamba-2's first sweeps after its records'
#             copies
#   rel2late  both
# The builds alternate, two rounds: Mamba-2 H128 T = 1 fp32 / bf16 B = 64 /
# 256, GDN HV64 fp32 B = 64 / 256 (and bf16 d records at 256), KDA fp32
# B = 64 (the block kernel). No tests here: call 2 tests the winners.
#   run: bash experiments/2026-12-05_t39/t39-call1.sh
set -u
cd "$(dirname "$0")/../.."
M="--family mamba2 --preset nemotron3 --L 16 --target-ms 2 --modes replay"
G="--family gdn --preset qwen35-122b --L 16 --target-ms 2 --modes replay"
K="--family kda --preset kimi --L 16 --target-ms 2 --modes replay"
BENCH_ARGS="$M --batch 64,256 --state fp32,bf16;\
$G --batch 64,256 --state fp32;\
$G --batch 256 --state fp32 --d-dtype bf16;\
$K --batch 64 --state fp32" \
ONLY="base rel1 rel2 late rel2late" PACK=gpubin-x/t39.tar.xz REPS=2 OUT=$OUT/bench timeout 540 \
  bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "bench rc $?"
tail -n 80 "$OUT/bench/log.txt"
