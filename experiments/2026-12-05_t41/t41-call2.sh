#!/bin/bash
# t41, device call 2 (about 90 s; carry gpubin-x/t40pf.tar.xz): the
# persistent step's stages and result buffers at B = 256 and 512 (t41-call1
# on an H100: three stages and four result buffers 1–3 % faster on 16-bit
# states and fp8 copies), NB alone to separate the two, alternating, two
# rounds, L = 16; then main against pf1 on Mamba-2 H128 fp32 B = 256.
#   run: bash experiments/2026-12-05_t41/t41-call2.sh
set -u
cd "$(dirname "$0")/../.."
G="--family gdn --preset qwen35-122b --L 16 --target-ms 2"
K="--family kda --preset kimi --L 16 --target-ms 2"
BENCH_ARGS="$G --modes replay --state bf16 --batch 256,512;$K --modes replay --state bf16 --batch 256,512;\
$K --modes replay --state fp32 --batch 256;\
$G --modes dual --state fp32 --read fp8 --batch 256;$K --modes dual --state fp32 --read fp8 --batch 256" \
ENVS="def:X=0;nb4:REPLAYSSM_R1P_NB=4;nst3nb4:REPLAYSSM_R1P_NST=3,REPLAYSSM_R1P_NB=4;\
nst4nb4:REPLAYSSM_R1P_NST=4,REPLAYSSM_R1P_NB=4;nst5nb4:REPLAYSSM_R1P_NST=5,REPLAYSSM_R1P_NB=4" \
ONLY=main PACK=gpubin-x/t40pf.tar.xz REPS=2 OUT=$OUT/r1p timeout 240 \
  bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "r1p rc $?"
tail -n 10 "$OUT/r1p/log.txt"
M="--family mamba2 --preset nemotron3 --L 16 --target-ms 2 --modes replay --batch 256 --state fp32"
BENCH_ARGS="$M" ONLY="main pf1" PACK=gpubin-x/t40pf.tar.xz REPS=4 OUT=$OUT/pf timeout 90 \
  bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "pf rc $?"
tail -n 3 "$OUT/pf/log.txt"
