#!/bin/bash
# t59, device call 10 (prepared for the next session; ~420 s; carry
# gpubin-x/t59next.tar.xz: `main` = main's build at 22b8ca2's code (the
# kernels of ba05f6e), `m2f8` = branch t59-m2fp8tc (2c2d8da: the Mamba-2 fp8
# copy's T = 1 stream on tensor cores), `e2m1` = branch t59-e2m1 (455c4f9:
# the E2M1 encode by one fma; every nvfp4 encoder, and the dual fold without
# spills)). Replaces t59-call9. First the tests of both branches side by
# side: m2f8 the dual Mamba-2 suite, e2m1 the quantizer, shared-mode and
# dual suites; memcheck of each on one small test; then the dual fp8 / nvfp4
# rows of GDN HV64, KDA and Mamba-2 H128 at B = 256, L = 16, the three
# builds alternating, two rounds. (On an H200, t58-call2 is still pending:
# run it as a call of its own, carry gpubin-x/t57.tar.xz.)
# Files: log.txt, tests_m2f8.json, tests_e2m1.json, compare.jsonl.
#   run: bash experiments/2026-12-07_t59/t59-call10.sh
set -u
cd "$(dirname "$0")/../.."
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "$name" | tee "$OUT/log.txt"
d=$(mktemp -d)
xz -dc gpubin-x/t59next.tar.xz | tar -C "$d" -x
JSON=$OUT/tests_m2f8.json bash scripts/gpu_shard_tests.sh "$d/m2f8/replayssm_gpu_tests" '*DualMamba2*' "$d/tm" 4 150 > "$d/sum_m.txt" 2>&1 &
JSON=$OUT/tests_e2m1.json bash scripts/gpu_shard_tests.sh "$d/e2m1/replayssm_gpu_tests" 'QuantGpu*:SharedGpu*:*DualDelta*:*DualMamba2*' \
  "$d/te" 8 240 > "$d/sum_e.txt" 2>&1 &
wait
for b in m e; do echo "== tests $b"; cat "$d/sum_$b.txt"; grep -h -B2 -A12 'Failure' "$d"/t$b/tests*.txt 2>/dev/null | head -30; done | tee -a "$OUT/log.txt"
echo "== memcheck" | tee -a "$OUT/log.txt"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 1 "$d/m2f8/replayssm_gpu_tests" \
  --gtest_filter='DualMamba2Gpu.PackedCopyReadsMatchCpuBeforeAFlush' --gtest_brief=1 2>&1 | tail -n 2 | tee -a "$OUT/log.txt"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 1 "$d/e2m1/replayssm_gpu_tests" \
  --gtest_filter='DualDeltaGpu.BulkCopySmall' --gtest_brief=1 2>&1 | tail -n 2 | tee -a "$OUT/log.txt"
BENCH_ARGS="--family gdn,kda,mamba2 --preset qwen35-122b,kimi,nemotron3 --batch 256 --L 16 --state fp32 --modes dual --read fp8,nvfp4 --target-ms 2" \
  PACK=gpubin-x/t59next.tar.xz REPS=2 OUT=$d/cmp BENCH_TIMEOUT_S=150 timeout 300 bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "compare rc=$?" | tee -a "$OUT/log.txt"
sed -n '/^µs per step/,$p' "$d/cmp/log.txt" | tee -a "$OUT/log.txt"
cp "$d/cmp/compare.jsonl" "$OUT/compare.jsonl"
