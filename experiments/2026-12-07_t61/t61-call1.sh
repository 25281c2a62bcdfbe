#!/bin/bash
# t61, device call 1 (carry gpubin-x/t61.tar.xz: t61-kda-hpb's build at the knob's commit:
# main 2a96e8d, KDA's fold rule and two SASS-neutral helpers; CLI and GPU
# tests). In order:
# 1. the KDA fold heads-per-block tests (never run on a GPU) and the rule;
# 2. KDA dual fp8 / nvfp4 at B = 198 / 256 / 512, L = 16, the rule against
#    REPLAYSSM_FOLD_HPB=1 (main's rule below B = 264), two rounds;
# 2b. Mamba-2 H128 dual fp8 / nvfp4 at B = 256 / 512, the pack at two blocks
#    per SM (default) against one (REPLAYSSM_M2_PACK_BPS=1), two rounds;
# 3. every issue 3-5 target row at B = 256, L = 16, one round;
# 4. the whole GPU suite in 8 shards (TEST_LIMIT per shard, default 300).
# The card's name is the first line. Files: log.txt, hpb_tests.json,
# compare.jsonl, compare2.jsonl, rows.jsonl, tests.json.
#   run: bash experiments/2026-12-07_t61/t61-call1.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tee "$OUT/log.txt"
d=$(mktemp -d)
xz -dc gpubin-x/t61.tar.xz | tar -C "$d" -x
T=$d/hpb/replayssm_gpu_tests M=$d/hpb/replayssm
timeout 120 "$T" --gtest_brief=1 --gtest_filter='DualDeltaGpu.KdaFoldHeadsPerBlockMatchCpu:DualDeltaGpu.FoldKeysSharedAcrossValueHeads:DualDeltaGpu.FoldHeadsPerBlockRule' \
  --gtest_output="json:$OUT/hpb_tests.json" 2>&1 | tail -n 12 | tee -a "$OUT/log.txt"
BENCH_ARGS="--family kda --preset kimi --batch 198,256,512 --L 16 --state fp32 --modes dual --read fp8,nvfp4 --target-ms 2" \
  PACK=gpubin-x/t61.tar.xz ENVS="h1:REPLAYSSM_FOLD_HPB=1" REPS=2 OUT=$d/cmp BENCH_TIMEOUT_S=60 timeout 150 bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "compare rc=$?" | tee -a "$OUT/log.txt"
sed -n '/^µs per step/,$p' "$d/cmp/log.txt" | tee -a "$OUT/log.txt"
cp "$d/cmp/compare.jsonl" "$OUT/compare.jsonl"
BENCH_ARGS="--family mamba2 --preset nemotron3 --batch 256,512 --L 16 --state fp32 --modes dual --read fp8,nvfp4 --target-ms 2" \
  PACK=gpubin-x/t61.tar.xz ENVS="pk1:REPLAYSSM_M2_PACK_BPS=1" REPS=2 OUT=$d/cmp2 BENCH_TIMEOUT_S=60 timeout 120 bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "compare2 rc=$?" | tee -a "$OUT/log.txt"
sed -n '/^µs per step/,$p' "$d/cmp2/log.txt" | tee -a "$OUT/log.txt"
cp "$d/cmp2/compare.jsonl" "$OUT/compare2.jsonl"
A="--backend cuda --L 16 --target-ms 2 --batch 256"
run() {  # part, timeout, bench args...
  local p=$1 t=$2; shift 2
  timeout "$t" $M bench $A --out "$d/$p.jsonl" "$@" 2>&1 | grep -E " replay| baseline|dual/|copy" | sed "s/^/$p /" | tee -a "$OUT/log.txt"
}
run t1 100 --family gdn,kda,mamba2 --preset qwen35-122b,kimi,nemotron3 --state fp32,bf16 --modes baseline,replay
run t1bd 40 --family gdn --preset qwen35-122b --state fp32 --d-dtype bf16 --modes replay
run dual 90 --family gdn,kda,mamba2 --preset qwen35-122b,kimi,nemotron3 --state fp32 --modes dual --read fp8,nvfp4
run t5 100 --family gdn,kda,mamba2 --preset qwen35-122b,kimi,nemotron3 --T 5 --state fp32 --modes replay
cat "$d"/t1.jsonl "$d"/t1bd.jsonl "$d"/dual.jsonl "$d"/t5.jsonl > "$OUT/rows.jsonl" 2>/dev/null
JSON=$OUT/tests.json LOG=$d/tests.log bash scripts/gpu_shard_tests.sh "$T" '*' "$d/tests" 8 ${TEST_LIMIT:-300} 2>&1 \
  | tee -a "$OUT/log.txt" | tail -n 20
grep -h -B2 -A12 'Failure' "$d"/tests/tests*.txt 2>/dev/null | head -40 | tee -a "$OUT/log.txt"
