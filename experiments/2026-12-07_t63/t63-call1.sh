#!/bin/bash
# t63, device call 1 (~330 s at most, any card; carry gpubin-x/t63.tar.xz: builds
# `main` (3f676ce, kernels as f6c6f5a; CLI only), `ftc2` (t62's two
# tensor-core folds: T > 1 as on main fb833f2 and the T = 1 patch f12f736;
# CLI only) and `ptc` (those folds through fold_tile_tc_core, and the dual
# pack's fold on tensor cores)):
#  1. ptc's tests: the T = 1 / T > 1 fold tests, every DualMamba2Gpu test
#     (the checkpoint identity with single-precision pools under both folds
#     among them), the T = 1 long run and production tiles (not the
#     speculative long runs: 282 s in t62);
#  2. Mamba-2 H128 B = 256, L = 16, ptc by default and with
#     REPLAYSSM_M2_FOLD_TC=0 (every fold the FMA stream), one round
#     (little device time was left): T = 1 fp32 / bf16; dual fp8 / nvfp4
#     copies over fp32 at T = 1 and fp8 at T = 5 (ptc's single-precision
#     replay kernels are SASS-identical to ftc2's; main and ftc2 ride along,
#     unmeasured, for a later call);
#  3. racecheck of DualMamba2Gpu.BulkCopySmall (the pack's staged tile) and
#     Mamba2Gpu.ReplayShortRunN128 (the stage folded in place), memcheck of
#     the first, 35 s each.
# Files: tests.txt, tests.json, log.txt, compare.jsonl, sanitizers.txt.
#   run: bash experiments/2026-12-07_t63/t63-call1.sh
set -u
cd "$(dirname "$0")/../.."
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "$card"
d=$(mktemp -d)
xz -dc gpubin-x/t63.tar.xz | tar -C "$d" -x
timeout 110 "$d/ptc/replayssm_gpu_tests" --gtest_brief=1 --gtest_output="json:$OUT/tests.json" \
  --gtest_filter='Mamba2Gpu.ReplayFoldTensorCores:Mamba2Gpu.SpecFoldTensorCores*:DualMamba2Gpu.*:Mamba2Gpu.ReplayLongRun:Mamba2Gpu.ReplayProductionTiles*:Mamba2Gpu.ReplayShortRunN128' \
  > "$OUT/tests.txt" 2>&1
echo "tests rc=$?"
tail -n 5 "$OUT/tests.txt"
M="--family mamba2 --preset nemotron3 --batch 256 --L 16 --target-ms 2"
BENCH_ARGS="$M --state fp32,bf16 --modes replay;$M --state fp32 --modes dual --read fp8,nvfp4;$M --T 5 --state fp32 --modes dual --read fp8" \
  PACK=gpubin-x/t63.tar.xz ONLY=ptc TEST_BUILD=ptc ENVS=";fma:REPLAYSSM_M2_FOLD_TC=0" REPS=1 \
  BENCH_TIMEOUT_S=25 timeout 100 bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "compare rc=$?"
sed -n '/^µs per step/,$p' "$OUT/log.txt"
for t in "racecheck DualMamba2Gpu.BulkCopySmall" "racecheck Mamba2Gpu.ReplayShortRunN128" "memcheck DualMamba2Gpu.BulkCopySmall"; do
  set -- $t
  echo "== $1 $2"
  timeout 35 compute-sanitizer --tool "$1" --error-exitcode 1 "$d/ptc/replayssm_gpu_tests" --gtest_filter="$2" --gtest_brief=1 2>&1 | tail -n 2
  echo "rc=${PIPESTATUS[0]}"
done 2>&1 | tee "$OUT/sanitizers.txt"
