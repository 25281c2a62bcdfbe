#!/bin/bash
# t38, device call 2 (about 500 s; carry gpubin-x/t38final.tar.xz): the
# landed build (`final`: 4d41a37 + the narrowed host layouts) as one binary.
# 1. the whole GPU suite (16 shards) and the sanitizer subset;
# 2. racecheck on two delta tests with a longer limit (call 1's ran out of time);
# 3. Mamba-2 H128 T = 1 fp32 B = 256 with four heads per block
#    (REPLAYSSM_M2_R1_BPS=40) against the default eight, two rounds.
#   run: bash experiments/2026-12-05_t38/t38-call2.sh
set -u
cd "$(dirname "$0")/../.."
q=$(mktemp -d)
xz -dc gpubin-x/t38final.tar.xz | tar -C "$q" -x
touch "$q/final/PREBUILT"
BUILD_DIR=$q/final SKIP_CPU_TESTS=1 TEST_SHARDS=16 DEADLINE_S=300 OUT=$OUT/final \
  bash scripts/gpu_check.sh test sanitize > /dev/null 2>&1
grep -E "^(test|sanitize) " "$OUT/final/log.txt" | tail -2
SANITIZE_FILTER='DeltaGpu.ReplayBulkSmall:DeltaGpu.SpecMmaSmall' SANITIZE_TIMEOUT_S=140 \
  BUILD_DIR=$q/final SKIP_CPU_TESTS=1 DEADLINE_S=150 OUT=$OUT/race \
  bash scripts/gpu_check.sh sanitize > /dev/null 2>&1
grep -E "^sanitize " "$OUT/race/log.txt" | tail -1
BENCH_ARGS="--family mamba2 --preset nemotron3 --L 16 --target-ms 2 --modes replay --batch 256 --state fp32" \
ENVS="hb8:REPLAYSSM_M2_R1_BPS=0;hb4:REPLAYSSM_M2_R1_BPS=40" ONLY=final PACK=gpubin-x/t38final.tar.xz REPS=2 \
  OUT=$OUT/bench timeout 90 bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "bench rc $?"
tail -n 6 "$OUT/bench/log.txt"
