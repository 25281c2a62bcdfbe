#!/bin/bash
# t40, device call 3 (about 120 s; carry gpubin-x/t40pf.tar.xz): the T = 1
# bulk streams with an L2 prefetch of the sweep D after the one issued into a
# stage (branch t40-t1pf, REPLAYSSM_T1_L2PF=D; Mamba-2 replay1_kernel.cuh and
# delta replay1.cuh, not the persistent step, not packed copies) against
# `main` (9744c67's kernels), alternating, two rounds, L = 16:
#   main  REPLAYSSM_T1_L2PF=0 (main's build)
#   pf1   D = 1
#   pf2   D = 2
# Mamba-2 H128 fp32 / bf16 B = 64 / 256; GDN HV64 fp32 B = 64 / 256 and its
# bf16-d row; KDA fp32 B = 64 (replay1.cuh's blocks).
#   run: bash experiments/2026-12-05_t40/t40-call3.sh
set -u
cd "$(dirname "$0")/../.."
M="--family mamba2 --preset nemotron3 --L 16 --target-ms 2 --modes replay"
G="--family gdn --preset qwen35-122b --L 16 --target-ms 2 --modes replay"
K="--family kda --preset kimi --L 16 --target-ms 2 --modes replay"
BENCH_ARGS="$M --batch 64,256 --state fp32,bf16;$G --batch 64,256 --state fp32;$G --batch 256 --state fp32 --d-dtype bf16;\
$K --batch 64 --state fp32" \
ONLY="main pf1 pf2" PACK=gpubin-x/t40pf.tar.xz REPS=2 OUT=$OUT/pf timeout 200 \
  bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "pf rc $?"
tail -n 12 "$OUT/pf/log.txt"
