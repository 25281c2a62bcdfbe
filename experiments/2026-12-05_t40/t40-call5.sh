#!/bin/bash
# t40, device call 5 (about 90 s; carry gpubin-x/t40pf.tar.xz): the
# persistent T = 1 step's stages and result buffers again, now that its
# consumer warps release a stage as soon as their rows are in registers
# (9744c67): runtime knobs on the landed CLI (`main`), alternating, two
# rounds, B = 256, L = 16. def: NST as many as fit (≤ 8), NB 6 (GDN) / 8
# (KDA); nst3 / nst5: REPLAYSSM_R1P_NST; nb10: REPLAYSSM_R1P_NB=10;
# ch2: REPLAYSSM_R1P_CHUNK=2 (two items per claim).
#   run: bash experiments/2026-12-05_t40/t40-call5.sh
# R1P_ENVS replaces the variants (experiments/2026-12-05_t41 calls 1 and 4).
set -u
cd "$(dirname "$0")/../.."
G="--family gdn --preset qwen35-122b --L 16 --target-ms 2 --batch 256"
K="--family kda --preset kimi --L 16 --target-ms 2 --batch 256"
BENCH_ARGS="$G --modes replay --state bf16;$K --modes replay --state fp32,bf16;\
$G --modes dual --state fp32 --read fp8;$K --modes dual --state fp32 --read fp8" \
ENVS=${R1P_ENVS:-"def:X=0;nst3:REPLAYSSM_R1P_NST=3;nst5:REPLAYSSM_R1P_NST=5;nb10:REPLAYSSM_R1P_NB=10;ch2:REPLAYSSM_R1P_CHUNK=2"} \
ONLY=main PACK=gpubin-x/t40pf.tar.xz REPS=2 OUT=$OUT/r1p timeout 200 \
  bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "r1p rc $?"
tail -n 8 "$OUT/r1p/log.txt"
