#!/bin/bash
# t47, device call for an H200 (about 400 s; carry gpubin-x/t46m.tar.xz =
# main 5223504's build `m5223`, whose kernels are SASS-identical to
# ce9aa8c's): t45-call1's benchmarks (main's target rows of issues 3-5, the
# persistent step's stage count, the B = 64 baselines; its memcheck ran on
# an H100 this session), then the Mamba-2 fp32 T = 1 sweep-ahead prefetch
# on / off (2d99071, an H100 figure only) and batch 1 of every family.
#   run: bash experiments/2026-12-06_t47/t47-call1.sh
set -u
cd "$(dirname "$0")/../.."
P=gpubin-x/t46m.tar.xz LABEL=m5223 MEMCHECK=0 bash experiments/2026-12-05_t45/t45-call1.sh
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || exit 0
for part in "m2pf|def:X=0;pf0:REPLAYSSM_M2_T1_L2PF=0|--family mamba2 --preset nemotron3 --batch 256 --L 16 --state fp32 --modes replay --target-ms 2" \
            "b1||--family gdn,mamba2,kda --preset qwen35-122b,nemotron3,kimi --batch 1 --L 16 --state fp32,bf16 --modes baseline,replay --target-ms 2"; do
  IFS='|' read -r name envs args <<< "$part"
  ENVS="$envs" BENCH_ARGS="$args" PACK=gpubin-x/t46m.tar.xz REPS=2 OUT=$OUT/$name timeout 60 bash scripts/gpu_compare.sh > /dev/null 2>&1
  echo "== $name rc $?"
  sed -n '/^µs per step/,$p' "$OUT/$name/log.txt"
done
