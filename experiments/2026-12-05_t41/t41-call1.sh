#!/bin/bash
# t41, device call 1 (about 150 s; carry gpubin-x/t40pf.tar.xz): after
# t40-call5's H100 run (fewer stages faster on the persistent step's
# 16-bit and fp8-copy rows), the stage count, result buffers and items per
# claim in combination, on the landed CLI (`main`), alternating, two
# rounds, B = 256, L = 16; then main against pf1 (REPLAYSSM_T1_L2PF=1) on
# the two T = 1 rows nearest their targets, four rounds.
#   run: bash experiments/2026-12-05_t41/t41-call1.sh
set -u
cd "$(dirname "$0")/../.."
R1P_ENVS="def:X=0;nst2:REPLAYSSM_R1P_NST=2;nst3:REPLAYSSM_R1P_NST=3;nst4:REPLAYSSM_R1P_NST=4;\
nst3ch2:REPLAYSSM_R1P_NST=3,REPLAYSSM_R1P_CHUNK=2;nst3nb4:REPLAYSSM_R1P_NST=3,REPLAYSSM_R1P_NB=4" \
  bash experiments/2026-12-05_t40/t40-call5.sh
M="--family mamba2 --preset nemotron3 --L 16 --target-ms 2 --modes replay --batch 256 --state fp32"
G1="--family gdn --preset qwen35-122b --L 16 --target-ms 2 --modes replay --batch 256 --state fp32 --d-dtype bf16"
BENCH_ARGS="$M;$G1" ONLY="main pf1" PACK=gpubin-x/t40pf.tar.xz REPS=4 OUT=$OUT/pf timeout 120 \
  bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "pf rc $?"
tail -n 4 "$OUT/pf/log.txt"
