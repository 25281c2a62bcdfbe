#!/bin/bash
# t59, device call 7 (~250 s; carry gpubin-x/t59tc3.tar.xz: `main` =
# ae4f02f, `tc3` = branch t59-nv4tc with the Mamba-2 nvfp4 copy's T = 1
# bulk stream on tensor cores as well). The dual Mamba-2 GPU tests (among
# them the new PackedCopyReadsMatchCpuBeforeAFlush: fp32 activations to
# 2e-6 of the cpu backend), memcheck and racecheck on BulkCopySmall and the
# new test; then Mamba-2 H128 dual fp8 / nvfp4 at B = 64 / 256 / 512,
# builds alternating, two rounds.
# Files: log.txt, tests.json, compare.jsonl.
#   run: bash experiments/2026-12-07_t59/t59-call7.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tee "$OUT/log.txt"
d=$(mktemp -d)
xz -dc gpubin-x/t59tc3.tar.xz | tar -C "$d" -x
T=$d/tc3/replayssm_gpu_tests
JSON=$OUT/tests.json bash scripts/gpu_shard_tests.sh "$T" '*DualMamba2*' "$d/t" 4 ${TEST_LIMIT:-150} 2>&1 | tee -a "$OUT/log.txt"
grep -h -B2 -A12 'Failure' "$d"/t/tests*.txt 2>/dev/null | head -40 | tee -a "$OUT/log.txt"
for tool in memcheck racecheck; do
  echo "== $tool" | tee -a "$OUT/log.txt"
  timeout 100 compute-sanitizer --tool $tool --error-exitcode 1 "$T" \
    --gtest_filter='DualMamba2Gpu.BulkCopySmall:DualMamba2Gpu.PackedCopyReadsMatchCpuBeforeAFlush' --gtest_brief=1 2>&1 | tail -n 3 | tee -a "$OUT/log.txt"
done
BENCH_ARGS="--family mamba2 --preset nemotron3 --batch 64,256,512 --L 16 --state fp32 --modes dual --read fp8,nvfp4 --target-ms 2" \
  PACK=gpubin-x/t59tc3.tar.xz REPS=2 OUT=$d/cmp BENCH_TIMEOUT_S=150 timeout 250 bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "compare rc=$?" | tee -a "$OUT/log.txt"
sed -n '/^µs per step/,$p' "$d/cmp/log.txt" | tee -a "$OUT/log.txt"
cp "$d/cmp/compare.jsonl" "$OUT/compare.jsonl"
