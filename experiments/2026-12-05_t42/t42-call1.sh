#!/bin/bash
# t42, device call 1 (about 450 s; carry gpubin-x/t42.tar.xz: `main`, the
# CLI of 9744c67 (SASS-identical to cd94694), and `land`, the landing build:
# branch t41-m2pf's Mamba-2 T = 1 sweep-ahead L2 prefetch on fp32 states
# and the Mamba-2 eager rule's 6 MiB for 16-bit states):
# 1. the landing build as one binary: the whole GPU suite (16 shards) and
#    gpu_check.sh's sanitizer subset;
# 2. land against main, alternating, two rounds: Mamba-2 H128 fp32 replay
#    B = 64 / 256 / 512 (the prefetch from 16 blocks per SM), and H128 / H96
#    bf16 B = 3 baseline and replay (6 / 5.6 MiB of state: the replay
#    kernel on main, the eager step on land);
# 3. the Python package built on the GPU machine, tests/python with torch
#    (b88cb5d's fix of the torch ops' arguments).
#   run: bash experiments/2026-12-05_t42/t42-call1.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader
PACK=gpubin-x/t42.tar.xz PACK_LABEL=land SKIP_CPU_TESTS=1 TEST_SHARDS=16 DEADLINE_S=${DEADLINE_S:-300} \
  OUT=$OUT/suite bash scripts/gpu_check.sh test sanitize > /dev/null 2>&1
grep -E "^(test|sanitize) " "$OUT/suite/log.txt" | tail -2
BENCH_ARGS="--family mamba2 --preset nemotron3 --L 16 --target-ms 2 --modes replay --state fp32 --batch 64,256,512;\
--family mamba2 --preset nemotron3,nemotron3-nano --L 16 --target-ms 2 --modes baseline,replay --state bf16 --batch 3" \
ONLY="main land" PACK=gpubin-x/t42.tar.xz REPS=2 OUT=$OUT/cmp timeout 150 \
  bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "cmp rc $?"
tail -n 8 "$OUT/cmp/log.txt"
DEADLINE_S=150 OUT=$OUT/py bash scripts/gpu_check.sh python > /dev/null 2>&1
grep -E "^python " "$OUT/py/log.txt" | tail -1
