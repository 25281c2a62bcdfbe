#!/bin/bash
# t62, device call 4 (~230 s, any card; carry gpubin-x/t62b.tar.xz: builds
# `main` (3f676ce, kernels as f6c6f5a) and `ftc2` (the Mamba-2 fold on
# tensor cores at T = 1 too)):
#  1. ftc2's tests of the change (110 s at most): the T = 1 fold test (both
#     folds against fp64, P = 40 tiles across heads), the dual checkpoint
#     identity, the T = 1 long run and production tiles, the T > 1 fold
#     test; racecheck of ReplayShortRunN128 (the stage written in place);
#  2. Mamba-2 H128 T = 1 fp32 / bf16 at B = 256, L = 16: main and ftc2, each
#     by default and with REPLAYSSM_M2_FOLD_TC=0, two rounds alternating.
# Files: log.txt, compare.jsonl.
#   run: bash experiments/2026-12-07_t62/t62-call4.sh
set -u
cd "$(dirname "$0")/../.."
BENCH_ARGS="--family mamba2 --preset nemotron3 --batch 256 --L 16 --state fp32,bf16 --modes replay --target-ms 2" \
  PACK=gpubin-x/t62b.tar.xz TEST_BUILD=ftc2 ENVS=";fma:REPLAYSSM_M2_FOLD_TC=0" REPS=2 \
  TEST_FILTER='Mamba2Gpu.ReplayFoldTensorCores:Mamba2Gpu.SpecFoldTensorCoresRule:DualMamba2Gpu.CheckpointBitIdentical*:Mamba2Gpu.ReplayLongRun:Mamba2Gpu.ReplayProductionTiles*:Mamba2Gpu.ReplayShortRunN128:Mamba2Gpu.SpecFoldTensorCores' \
  SANITIZE_FILTER=Mamba2Gpu.ReplayShortRunN128 TEST_TIMEOUT_S=110 BENCH_TIMEOUT_S=40 \
  timeout 225 bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "compare rc=$?"
sed -n '/^== tests/,$p' "$OUT/log.txt" | grep -v "^µs" | head -20
sed -n '/^µs per step/,$p' "$OUT/log.txt"
