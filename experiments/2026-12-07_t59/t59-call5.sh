#!/bin/bash
# t59, device call 5 (~420 s; carry gpubin-x/t59tc.tar.xz: `main` = ae4f02f,
# `tc` = branch t59-nv4tc (the GDN nvfp4 copy's persistent sweeps on tensor
# cores), `tck` = the same with -DREPLAYSSM_R1P_TC_KDA in its persistent
# quant unit (KDA's fp8 and nvfp4 sweeps on tensor cores too)). First the
# dual GPU tests of tc and tck side by side (4 shards each), memcheck and
# racecheck of tck on the persistent no-flush precision part; then the dual
# rows of the three builds, builds alternating, two rounds.
# Files: log.txt, tests_<build>.json, compare.jsonl.
#   run: bash experiments/2026-12-07_t59/t59-call5.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tee "$OUT/log.txt"
d=$(mktemp -d)
xz -dc gpubin-x/t59tc.tar.xz | tar -C "$d" -x
F='DualDelta*'
for b in tc tck; do
  JSON=$OUT/tests_$b.json bash scripts/gpu_shard_tests.sh "$d/$b/replayssm_gpu_tests" "$F" "$d/t_$b" 4 ${TEST_LIMIT:-240} > "$d/sum_$b.txt" 2>&1 &
done
wait
for b in tc tck; do echo "== tests $b"; cat "$d/sum_$b.txt"; grep -h -B2 -A12 'Failure' "$d"/t_$b/tests*.txt | head -40; done | tee -a "$OUT/log.txt"
for tool in memcheck racecheck; do
  echo "== $tool tck" | tee -a "$OUT/log.txt"
  timeout 90 compute-sanitizer --tool $tool --error-exitcode 1 "$d/tck/replayssm_gpu_tests" \
    --gtest_filter='Part/DualDeltaGpuPersistentStep.MatchCpu/3' --gtest_brief=1 2>&1 | tail -n 3 | tee -a "$OUT/log.txt"
done
BENCH_ARGS="--family gdn,kda --preset qwen35-122b,kimi --batch 64,256 --L 16 --state fp32 --modes dual --read fp8,nvfp4 --target-ms 2" \
  PACK=gpubin-x/t59tc.tar.xz REPS=2 OUT=$d/cmp BENCH_TIMEOUT_S=200 timeout 240 bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "compare rc=$?" | tee -a "$OUT/log.txt"
sed -n '/^µs per step/,$p' "$d/cmp/log.txt" | tee -a "$OUT/log.txt"
cp "$d/cmp/compare.jsonl" "$OUT/compare.jsonl"
