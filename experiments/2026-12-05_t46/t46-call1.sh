#!/bin/bash
# t46, device call 1 (about 380 s; any H100 / H200; carry gpubin-x/t45b.tar.xz:
# `ce9aa8c` = main's kernels, `fp` = branch t45-fold-persist's, identical in
# SASS to t46-fold-persist's): t45-call2 and t45-call3 cut to what decides
# the branch, for a session whose device budget no longer holds both.
# 1. fp's dual GPU tests in eight shards, memcheck of
#    DualDeltaGpu.PersistentFoldSmall;
# 2. main against fp on the dual rows at B = 256 (GDN HV64 / KDA, fp8 /
#    nvfp4), fp with the fold beside the step at REPLAYSSM_FOLD_PERSIST = 0
#    (its default) / 192 / 384 (main ignores the variable: three samples).
#   run: bash experiments/2026-12-05_t46/t46-call1.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name,memory.total,clocks.max.memory --format=csv,noheader
P=gpubin-x/t45b.tar.xz
d=$(mktemp -d)
xz -dc $P | tar -C "$d" -x
tb=$d/fp/replayssm_gpu_tests
pids=()
for i in 0 1 2 3 4 5 6 7; do
  GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$i timeout 160 "$tb" --gtest_filter='*DualDeltaGpu*' --gtest_brief=1 \
    > "$OUT/tests_$i.txt" 2>&1 &
  pids+=($!)
done
trc=0
for p in "${pids[@]}"; do wait "$p" || trc=1; done
echo "tests rc=$trc"
cat "$OUT"/tests_*.txt > "$OUT/tests.txt" && rm -f "$OUT"/tests_*.txt
grep -E "^\[  (PASSED|FAILED) |FAILED|Failure|rror" "$OUT/tests.txt" | head -n 30
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 80 "$cs" --tool memcheck --error-exitcode 3 "$tb" --gtest_filter=DualDeltaGpu.PersistentFoldSmall \
  --gtest_brief=1 > "$OUT/memcheck.txt" 2>&1
echo "memcheck PersistentFoldSmall rc=$?"
tail -n 3 "$OUT/memcheck.txt"
ENVS="r0:REPLAYSSM_FOLD_PERSIST=0;r192:REPLAYSSM_FOLD_PERSIST=192;r384:REPLAYSSM_FOLD_PERSIST=384" \
ONLY="ce9aa8c fp" PACK=$P REPS=1 OUT=$OUT/bench \
BENCH_ARGS="--family gdn,kda --preset qwen35-122b,kimi --batch 256 --L 16 --state fp32 --modes dual --read fp8,nvfp4 --target-ms 2" \
  timeout 130 bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "== bench rc $?"
sed -n '/^µs per step/,$p' "$OUT/bench/log.txt"
