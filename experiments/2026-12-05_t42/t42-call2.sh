#!/bin/bash
# t42, device call 2 (about 300 s; carry gpubin-x/t42.tar.xz, as call 1):
# 1. land against main, alternating, two rounds, L = 16: Mamba-2 H128 fp32
#    replay B = 64 / 256 / 512 (the prefetch from 16 blocks per SM);
#    H128 / H96 bf16 B = 3 baseline and replay (6 / 5.6 MiB of state: the
#    replay kernel on main, the eager step on land); the persistent step's
#    rows at B = 256 (GDN HV64 bf16, KDA bf16 / fp32, GDN / KDA dual fp8 and
#    nvfp4): land's stage cap against main's as many stages as fit;
# 2. the Python package built on the GPU machine, tests/python with torch
#    (b88cb5d's fix of the torch ops' arguments).
#   run: bash experiments/2026-12-05_t42/t42-call2.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
G="--family gdn --preset qwen35-122b --L 16 --target-ms 2 --batch 256"
K="--family kda --preset kimi --L 16 --target-ms 2 --batch 256"
BENCH_ARGS="--family mamba2 --preset nemotron3 --L 16 --target-ms 2 --modes replay --state fp32 --batch 64,256,512;\
--family mamba2 --preset nemotron3,nemotron3-nano --L 16 --target-ms 2 --modes baseline,replay --state bf16 --batch 3;\
$G --modes replay --state bf16;$K --modes replay --state fp32,bf16;\
$G --modes dual --state fp32 --read fp8,nvfp4;$K --modes dual --state fp32 --read fp8,nvfp4" \
ONLY="main land" PACK=gpubin-x/t42.tar.xz REPS=2 OUT=$OUT/cmp timeout 170 \
  bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "cmp rc $?"
tail -n 14 "$OUT/cmp/log.txt"
DEADLINE_S=110 OUT=$OUT/py bash scripts/gpu_check.sh python > /dev/null 2>&1
grep -E "^python " "$OUT/py/log.txt" | tail -1
