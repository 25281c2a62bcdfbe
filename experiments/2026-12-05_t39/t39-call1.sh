#!/bin/bash
# t39, device call 1 (about 450 s; carry gpubin-x/t39.tar.xz): when the T = 1
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
# Mamba-2 H128 T = 1 fp32 / bf16 B = 64 / 256 and T = 5 fp32 B = 256 (rel2 /
# rel2late: the T > 1 stream's fp32 refill by count too), the five builds
# alternating, two rounds.
#   run: bash experiments/2026-12-05_t39/t39-call1.sh
set -u
cd "$(dirname "$0")/../.."
M="--family mamba2 --preset nemotron3 --L 16 --target-ms 2 --modes replay"
BENCH_ARGS="$M --batch 64,256 --state fp32,bf16;$M --T 5 --batch 256 --state fp32" \
ONLY="base rel1 rel2 late rel2late" PACK=gpubin-x/t39.tar.xz REPS=2 OUT=$OUT/m2 timeout 540 \
  bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "mamba2 rc $?"
tail -n 45 "$OUT/m2/log.txt"
