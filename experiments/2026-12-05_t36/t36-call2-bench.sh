#!/bin/bash
# t36, device call 2 (about 400 s): main against hl (host-computed layouts),
# kp (t36-kda-prep.patch) and r1k (experiments/2026-12-04_t35/
# t35-r1-bulk-k.patch), builds
# alternating, two rounds: GDN HV64 / KDA T = 1 baseline and replay at B =
# 64 / 256 (fp32; bf16 replay at 256), GDN fp32 with bf16 d records, T = 5
# replay (fp32, bf16) and dual fp8 / nvfp4 at B = 256.
#   run: bash experiments/2026-12-05_t36/t36-call2-bench.sh   (carry gpubin-x/t36.tar.xz)
set -u
cd "$(dirname "$0")/../.."
P="--family gdn,kda --preset qwen35-122b,kimi --L 16 --target-ms 2"
BENCH_ARGS="$P --modes baseline,replay --batch 64,256 --state fp32;\
$P --modes replay --batch 256 --state bf16;\
--family gdn --preset qwen35-122b --L 16 --target-ms 2 --modes replay --batch 256 --state fp32 --d-dtype bf16;\
$P --modes replay --T 5 --batch 256 --state fp32,bf16;\
$P --modes dual --batch 256 --state fp32 --read fp8,nvfp4" \
ONLY="main hl kp r1k" PACK=${PACK:-gpubin-x/t36.tar.xz} REPS=2 OUT=$OUT/x timeout 560 \
  bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "rc $?"
tail -n 40 "$OUT/x/log.txt"
