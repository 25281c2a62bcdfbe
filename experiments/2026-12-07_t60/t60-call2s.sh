#!/bin/bash
# t60, device call 2s: t60-call2.sh cut to what ~300 s of device time allows
# (~230 s; carry gpubin-x/t60a.tar.xz). new's suites of every kernel that
# encodes a read copy (quantizer, shared, dual delta, dual Mamba-2;
# QuantGpuExhaustive among them) in 8 shards, then the dual fp8 / nvfp4 rows
# of GDN HV64 / KDA / Mamba-2 H128 at B = 256, L = 16, main / new / exk
# alternating, two rounds. Files: log.txt, tests.json, compare.jsonl.
#   run: bash experiments/2026-12-07_t60/t60-call2s.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tee "$OUT/log.txt"
d=$(mktemp -d)
xz -dc gpubin-x/t60a.tar.xz | tar -C "$d" -x
JSON=$OUT/tests.json bash scripts/gpu_shard_tests.sh "$d/new/replayssm_gpu_tests" 'QuantGpu*:SharedGpu*:*DualDelta*:*DualMamba2*' \
  "$d/tn" 8 ${TEST_LIMIT:-190} > "$d/sum.txt" 2>&1
{ cat "$d/sum.txt"; grep -h -B2 -A12 'Failure' "$d"/tn/tests*.txt 2>/dev/null | head -30; } | tee -a "$OUT/log.txt"
BENCH_ARGS="--family gdn,kda,mamba2 --preset qwen35-122b,kimi,nemotron3 --batch 256 --L 16 --state fp32 --modes dual --read fp8,nvfp4 --target-ms 2" \
  PACK=gpubin-x/t60a.tar.xz ONLY="main new exk" REPS=2 OUT=$d/cmp BENCH_TIMEOUT_S=60 timeout 100 bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "compare rc=$?" | tee -a "$OUT/log.txt"
sed -n '/^µs per step/,$p' "$d/cmp/log.txt" | tee -a "$OUT/log.txt"
cp "$d/cmp/compare.jsonl" "$OUT/compare.jsonl"
