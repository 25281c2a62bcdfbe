#!/bin/bash
# t47, device call 4 (not run; about 80 s on an H200; carry
# gpubin-x/t47k.tar.xz, branch t47-kda-stages' build `k3`, whose Mamba-2
# code is main's 276298f: no sweep-ahead prefetch on the H200): the Mamba-2
# fp32 T = 1 row (314.7-315.1 µs against <= 310) by its record prefetch
# distance, REPLAYSSM_M2_PF = 0 / 66 / 132 (the default, one resident
# grid's SMs) / 264 blocks, chosen in perf_notes_mamba2.md v31 before the
# stream's later changes; B = 256 and 512, two rounds.
#   run: bash experiments/2026-12-06_t47/t47-call4.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader
ENVS="def:X=0;pf0:REPLAYSSM_M2_PF=0;pf66:REPLAYSSM_M2_PF=66;pf264:REPLAYSSM_M2_PF=264" \
BENCH_ARGS="--family mamba2 --preset nemotron3 --batch 256,512 --L 16 --state fp32 --modes replay --target-ms 2" \
  PACK=gpubin-x/t47k.tar.xz REPS=2 OUT=$OUT/m2pf timeout 150 bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "compare rc=$?"
sed -n '/^µs per step/,$p' "$OUT/m2pf/log.txt"
