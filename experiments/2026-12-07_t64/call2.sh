#!/bin/bash
# t64 call 2: the T = 1 fold as it lands (fp32 states on tensor cores; 16-bit
# states keep the FMA stream, their T = 1 instances SASS-identical to main's)
# beside main. Carry gpubin-x/t64.tar.xz (labels main = 0094727, t1f = branch
# t64-t1fold, with its test binary).
#  1. t1f's tests, one process each, at once (150 s): ReplayFoldTensorCores,
#     SpecFoldTensorCoresRule, SpecFoldTensorCores, the dual checkpoint identity;
#  2. main and t1f, Mamba-2 H128 fp32 / bf16 states at B = 64 / 256 / 512,
#     L = 16, T = 1 and T = 5, two rounds alternating (T > 1's instances are
#     t62b ftc2's, not main's: the fold's code moved into fold_tile_tc).
# Files: t_*.txt / t_*.json, log.txt, compare.jsonl.
#   run: bash experiments/2026-12-07_t64/call2.sh
set -u
TT=${TT:-150} CT=${CT:-150}
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
d=$(mktemp -d)
xz -dc gpubin-x/t64.tar.xz | tar -C "$d" -x
tb=$d/t1f/replayssm_gpu_tests
for t in Mamba2Gpu.ReplayFoldTensorCores Mamba2Gpu.SpecFoldTensorCoresRule Mamba2Gpu.SpecFoldTensorCores \
         DualMamba2Gpu.CheckpointBitIdenticalAcrossFormats; do
  timeout "$TT" "$tb" --gtest_filter="$t" --gtest_output="json:$OUT/t_$t.json" > "$OUT/t_$t.txt" 2>&1 &
done
wait
grep -hE "^\[  (PASSED|FAILED) |OK \]|FAILED|max output error" "$OUT"/t_*.txt
A="--family mamba2 --preset nemotron3 --batch 64,256,512 --L 16 --state fp32,bf16 --modes replay --target-ms 2"
BENCH_ARGS="$A --T 1;$A --T 5" PACK=gpubin-x/t64.tar.xz REPS=2 BENCH_TIMEOUT_S=60 \
  timeout "$CT" bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "compare rc=$?"
sed -n '/^µs per step/,$p' "$OUT/log.txt"
