#!/bin/bash
# t45, device call 2 (about 330 s; any H100 / H200; carry gpubin-x/t45b.tar.xz:
# `ce9aa8c` = main, `fp` = branch t45-fold-persist, CLI and GPU tests each):
# the dual step's fold as a persistent grid beside the step
# (perf_notes_delta.md v47, REPLAYSSM_FOLD_PERSIST, off by default): fp's
# dual GPU tests (every DualDeltaGpu* test and part: the fold kernel's
# refactored code, the dual preparation / stream changes, the new
# PersistentFold tests), memcheck + racecheck of
# DualDeltaGpu.PersistentFoldSmall, memcheck of DualDeltaGpuPersistentStep
# part 0 (t44-call6). Benchmarks: t45-call3.
#   run: bash experiments/2026-12-05_t45/t45-call2.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name,memory.total,clocks.max.memory --format=csv,noheader
d=$(mktemp -d)
xz -dc gpubin-x/t45b.tar.xz | tar -C "$d" -x
tb=$d/fp/replayssm_gpu_tests
# eight GoogleTest shards in parallel (one process each)
pids=()
for i in 0 1 2 3 4 5 6 7; do
  GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$i timeout 200 "$tb" --gtest_filter='*DualDeltaGpu*' --gtest_brief=1 \
    > "$OUT/tests_$i.txt" 2>&1 &
  pids+=($!)
done
trc=0
for p in "${pids[@]}"; do wait "$p" || trc=1; done
echo "tests rc=$trc"
cat "$OUT"/tests_*.txt > "$OUT/tests.txt" && rm -f "$OUT"/tests_*.txt
grep -E "^\[  (PASSED|FAILED) |FAILED|Failure|rror" "$OUT/tests.txt" | head -n 30
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck; do
  timeout 90 "$cs" --tool $tool --error-exitcode 3 "$tb" --gtest_filter=DualDeltaGpu.PersistentFoldSmall \
    --gtest_brief=1 > "$OUT/$tool.txt" 2>&1
  echo "$tool PersistentFoldSmall rc=$?"
  tail -n 3 "$OUT/$tool.txt"
done
timeout 60 "$cs" --tool memcheck --error-exitcode 3 "$tb" --gtest_filter='Part/DualDeltaGpuPersistentStep.MatchCpu/0' \
  --gtest_brief=1 > "$OUT/memcheck_step.txt" 2>&1
echo "memcheck PersistentStep/0 rc=$?"
tail -n 3 "$OUT/memcheck_step.txt"
