#!/bin/bash
# t60, device call 2 (~500 s; carry gpubin-x/t60a.tar.xz: `c2db` = the CLI
# of t59next's main build (c2db7c1's kernels), `main` = e89c1d2 built fresh
# (every object rebuilt: the E2M1 encode by one fma in every kernel), `new`
# = branch t60-pack: E4M3 encode without the subnormal guard, the register
# packs' block maxima as integer maxima, QuantGpuExhaustive; `exk` = branch
# t60-exk: new + the GDN dual fold's products in two tf32 terms for 16-bit
# keys).
# 1. new's suites of every kernel that encodes a read copy (quantizer,
#    shared, dual delta, dual Mamba-2; QuantGpuExhaustive among them) in 8
#    shards: they contain main's change too (t60 call 1's build had stale
#    GDN / KDA fold and delta shared objects);
#    exk's dual delta suites beside them (4 shards); memcheck of new on one
#    dual delta test.
# 2. dual fp8 / nvfp4 rows, GDN HV64 / KDA / Mamba-2 H128, B = 256, L = 16,
#    the four builds alternating, two rounds; GDN fp8 / nvfp4 B = 512.
# 3. KDA's fold heads per block (REPLAYSSM_FOLD_HPB 1 / 2 / 3 / 4) on new,
#    B = 256 (fp8, nvfp4; the rule's 1) and 512 (fp8; the rule's 3), one round.
# 4. every other target row on new (T = 1, bf16 d, T = 5, KDA T = 8), B = 256, one round.
# Files: log.txt, tests.json, tests_exk.json, compare.jsonl, hpb.jsonl, rows.jsonl.
#   run: bash experiments/2026-12-07_t60/t60-call2.sh
set -u
cd "$(dirname "$0")/../.."
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "$name" | tee "$OUT/log.txt"
d=$(mktemp -d)
xz -dc gpubin-x/t60a.tar.xz | tar -C "$d" -x
JSON=$OUT/tests.json bash scripts/gpu_shard_tests.sh "$d/new/replayssm_gpu_tests" 'QuantGpu*:SharedGpu*:*DualDelta*:*DualMamba2*' \
  "$d/tn" 8 ${TEST_LIMIT:-240} > "$d/sum_n.txt" 2>&1 &
JSON=$OUT/tests_exk.json bash scripts/gpu_shard_tests.sh "$d/exk/replayssm_gpu_tests" '*DualDelta*' \
  "$d/te" 4 ${TEST_LIMIT:-240} > "$d/sum_e.txt" 2>&1 &
wait
for b in n e; do echo "== tests $b"; cat "$d/sum_$b.txt"; grep -h -B2 -A12 'Failure' "$d"/t$b/tests*.txt 2>/dev/null | head -30; done | tee -a "$OUT/log.txt"
echo "== memcheck" | tee -a "$OUT/log.txt"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 1 "$d/new/replayssm_gpu_tests" \
  --gtest_filter='DualDeltaGpu.BulkCopySmall' --gtest_brief=1 2>&1 | tail -n 2 | tee -a "$OUT/log.txt"
BENCH_ARGS="--family gdn,kda,mamba2 --preset qwen35-122b,kimi,nemotron3 --batch 256 --L 16 --state fp32 --modes dual --read fp8,nvfp4 --target-ms 2;--family gdn --preset qwen35-122b --batch 512 --L 16 --state fp32 --modes dual --read fp8,nvfp4 --target-ms 2" \
  PACK=gpubin-x/t60a.tar.xz REPS=2 OUT=$d/cmp BENCH_TIMEOUT_S=100 timeout 190 bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "compare rc=$?" | tee -a "$OUT/log.txt"
sed -n '/^µs per step/,$p' "$d/cmp/log.txt" | tee -a "$OUT/log.txt"
cp "$d/cmp/compare.jsonl" "$OUT/compare.jsonl"
BENCH_ARGS="--family kda --preset kimi --batch 256 --L 16 --state fp32 --modes dual --read fp8,nvfp4 --target-ms 2;--family kda --preset kimi --batch 512 --L 16 --state fp32 --modes dual --read fp8 --target-ms 2" \
  PACK=gpubin-x/t60a.tar.xz ONLY=new ENVS="h1:REPLAYSSM_FOLD_HPB=1;h2:REPLAYSSM_FOLD_HPB=2;h3:REPLAYSSM_FOLD_HPB=3;h4:REPLAYSSM_FOLD_HPB=4" \
  OUT=$d/hpb BENCH_TIMEOUT_S=60 timeout 90 bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "hpb rc=$?" | tee -a "$OUT/log.txt"
sed -n '/^µs per step/,$p' "$d/hpb/log.txt" | tee -a "$OUT/log.txt"
cp "$d/hpb/compare.jsonl" "$OUT/hpb.jsonl"
# 4. every issue 3-5 target row on new, B = 256, L = 16, one round (as t59-call1).
M=$d/new/replayssm
A="--backend cuda --L 16 --target-ms 2 --batch 256"
run() {  # part, timeout, bench args...
  local p=$1 t=$2; shift 2
  timeout "$t" $M bench $A --out "$d/$p.jsonl" "$@" 2>&1 | grep -E " replay| baseline|dual/|copy" | sed "s/^/$p /" | tee -a "$OUT/log.txt"
}
run t1 60 --family gdn,kda,mamba2 --preset qwen35-122b,kimi,nemotron3 --state fp32,bf16 --modes baseline,replay
run t1bd 30 --family gdn --preset qwen35-122b --state fp32 --d-dtype bf16 --modes replay
run t5 60 --family gdn,kda,mamba2 --preset qwen35-122b,kimi,nemotron3 --T 5 --state fp32 --modes replay
run t8 30 --family kda --preset kimi --T 8 --state fp32 --modes replay
cat "$d"/t1.jsonl "$d"/t1bd.jsonl "$d"/t5.jsonl "$d"/t8.jsonl > "$OUT/rows.jsonl" 2>/dev/null
