#!/bin/bash
# t59, device call 6 (~400 s; carry gpubin-x/t59tc2.tar.xz: `main` =
# ae4f02f, `tc2` = branch t59-nv4tc with the GDN nvfp4 sweeps on tensor cores
# in the persistent stream and in replay1.cuh's blocks; KDA's as main).
# call 5's filter 'DualDelta*' missed the parameterized suites (Part/...):
# here every dual suite ('*DualDelta*', 8 shards), memcheck and racecheck
# on the block kernel's nvfp4 path (DualDeltaGpu.BulkCopySmall) and the
# persistent no-flush precision part; then GDN fp8 / nvfp4 and KDA nvfp4 at
# B = 32 / 64 / 128 / 256 / 512, builds alternating, two rounds.
# Files: log.txt, tests.json, compare.jsonl.
#   run: bash experiments/2026-12-07_t59/t59-call6.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tee "$OUT/log.txt"
d=$(mktemp -d)
xz -dc gpubin-x/t59tc2.tar.xz | tar -C "$d" -x
T=$d/tc2/replayssm_gpu_tests
JSON=$OUT/tests.json bash scripts/gpu_shard_tests.sh "$T" '*DualDelta*' "$d/t" 8 ${TEST_LIMIT:-200} 2>&1 | tee -a "$OUT/log.txt"
grep -h -B2 -A12 'Failure' "$d"/t/tests*.txt 2>/dev/null | head -40 | tee -a "$OUT/log.txt"
for tool in memcheck racecheck; do
  echo "== $tool" | tee -a "$OUT/log.txt"
  timeout 100 compute-sanitizer --tool $tool --error-exitcode 1 "$T" \
    --gtest_filter='DualDeltaGpu.BulkCopySmall:Part/DualDeltaGpuPersistentStep.MatchCpu/3' --gtest_brief=1 2>&1 | tail -n 3 | tee -a "$OUT/log.txt"
done
BENCH_ARGS="--family gdn --preset qwen35-122b --batch 32,64,128,256,512 --L 16 --state fp32 --modes dual --read fp8,nvfp4 --target-ms 2;\
--family kda --preset kimi --batch 64,256 --L 16 --state fp32 --modes dual --read nvfp4 --target-ms 2" \
  PACK=gpubin-x/t59tc2.tar.xz REPS=2 OUT=$d/cmp BENCH_TIMEOUT_S=150 timeout 280 bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "compare rc=$?" | tee -a "$OUT/log.txt"
sed -n '/^µs per step/,$p' "$d/cmp/log.txt" | tee -a "$OUT/log.txt"
cp "$d/cmp/compare.jsonl" "$OUT/compare.jsonl"
