#!/bin/bash
# t62, device call 2 (~450 s; carry gpubin-x/t62.tar.xz: builds `main`
# (3f676ce, kernels and host code as main f6c6f5a) and `ftc` (the Mamba-2
# T > 1 fold on tensor cores)), on any card:
#  1. ftc's tests of the change: the fold tests, the T > 1 suites against
#     the fp64 reference and the cpu backend (every model shape, the
#     1,000-step long runs, graph replay), the dual checkpoint identity;
#     memcheck and racecheck of SpecShortRunN128;
#  2. Mamba-2 H128 T = 5 / 8, fp32 and bf16 states, B = 64 / 256 / 512:
#     main, ftc, ftc with the FMA-stream fold (REPLAYSSM_M2_FOLD_TC=0), two
#     rounds alternating;
#  3. on an H200 only: every target row on ftc's binary (scripts/target_rows.sh).
# Files: log.txt, compare.jsonl, rows.jsonl (H200).
#   run: bash experiments/2026-12-07_t62/t62-call2.sh
set -u
cd "$(dirname "$0")/../.."
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "$card" | tee "$OUT/log.txt"
d=$(mktemp -d)
BENCH_ARGS="--family mamba2 --preset nemotron3 --batch 64,256,512 --L 16 --T 5,8 --state fp32,bf16 --modes replay --target-ms 2" \
  PACK=gpubin-x/t62.tar.xz TEST_BUILD=ftc ENVS=";fma:REPLAYSSM_M2_FOLD_TC=0" REPS=2 OUT=$d/cmp \
  TEST_FILTER='Mamba2Gpu.SpecFold*:*Mamba2GpuSpecTensorCores*:*Mamba2GpuSpecProductionTiles*:*Mamba2GpuSpeculativeLongRun*:Mamba2Gpu.Spec*:Mamba2Gpu.GraphReplay*:Mamba2Gpu.SpeculativeWindows:DualMamba2Gpu.CheckpointBitIdentical*:DualMamba2Gpu.Spec*' \
  SANITIZE_FILTER=Mamba2Gpu.SpecShortRunN128 TEST_TIMEOUT_S=240 BENCH_TIMEOUT_S=120 \
  timeout 420 bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "compare rc=$?" | tee -a "$OUT/log.txt"
cat "$d/cmp/log.txt" >> "$OUT/log.txt"
sed -n '/^µs per step/,$p' "$d/cmp/log.txt"
grep -E "^==|PASSED|FAILED|ERROR SUMMARY|hazard" "$d/cmp/log.txt"
cp "$d/cmp/compare.jsonl" "$OUT/compare.jsonl"
if [[ $card == *H200* ]]; then
  xz -dc gpubin-x/t62.tar.xz | tar -C "$d" -x
  BIN=$d/ftc/replayssm OUT_JSONL=$OUT/rows.jsonl LOG=$OUT/log.txt timeout 150 bash scripts/target_rows.sh
fi
