#!/bin/bash
# t43, device call 4 (about 330 s; carry gpubin-x/t43b.tar.xz: `base`, call
# 3's `land`, and `eg`, the same plus the Mamba-2 eager step's cursor loaded
# by every thread into registers, planned before the token's barrier, in
# place of thread 0's async copy and its group wait): eg's Mamba-2 GPU tests
# and the sanitizers on the eager test, then eg against base, alternating,
# three rounds: Mamba-2 H128 (nemotron3) and H96 (nemotron3-nano), fp32 and
# bf16, B = 1, 2, 3, baseline and replay (the eager step by the rule), L = 16;
# memcheck of DeltaGpu.PersistentStep (the stage cap).
#   run: bash experiments/2026-12-05_t43/t43-call4.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
GTEST_FILTER='Mamba2Gpu*' SANITIZE_FILTER='Mamba2Gpu.EagerSmallBatch' SANITIZE_TIMEOUT_S=60 \
  PACK=gpubin-x/t43b.tar.xz PACK_LABEL=eg SKIP_CPU_TESTS=1 TEST_SHARDS=16 DEADLINE_S=${T_TEST:-200} OUT=$OUT/tests \
  bash scripts/gpu_check.sh test sanitize > /dev/null 2>&1
grep -E "^(test|sanitize) " "$OUT/tests/log.txt" | tail -2
# memcheck of the persistent step with call 3's stage cap (gpu_check.sh's
# default subset does not hold it)
d=$(mktemp -d) && xz -dc gpubin-x/t43b.tar.xz | tar -x -C "$d" &&
  timeout 90 compute-sanitizer --tool memcheck --error-exitcode 1 "$d/eg/replayssm_gpu_tests" \
    --gtest_filter=DeltaGpu.PersistentStep --gtest_brief=1 > "$OUT/memcheck_persistent.txt" 2>&1
echo "memcheck DeltaGpu.PersistentStep rc $?"; tail -n 3 "$OUT/memcheck_persistent.txt"
BENCH_ARGS="--family mamba2 --preset nemotron3,nemotron3-nano --L 16 --target-ms 5 --modes baseline,replay --state fp32,bf16 --batch 1,2,3" \
  PACK=gpubin-x/t43b.tar.xz REPS=3 OUT=$OUT/cmp timeout ${T_CMP:-150} bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "cmp rc $?"
sed -n '/^µs per step/,$p' "$OUT/cmp/log.txt"
