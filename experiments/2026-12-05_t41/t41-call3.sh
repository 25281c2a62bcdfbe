#!/bin/bash
# t41, device call 3 (about 120 s; carry gpubin-x/t41.tar.xz): the Mamba-2
# decode kernel's stages for the blocks an SM actually holds (`m2st`:
# mamba2/heuristics.h decode_stages; at batch 1–4 the eager step's fold
# arrays no longer cost it its fourth stage) against `main` (9744c67's CLI).
# 1. Mamba-2 H128 T = 1, B = 1–4, baseline and replay (eager at B <= 3),
#    fp32 / bf16, L = 16, alternating, three rounds;
# 2. m2st with REPLAYSSM_M2_DEC_STAGES = 6 / 8 (one block per SM takes
#    them) at B = 1, 2, two rounds;
# 3. m2st's Mamba-2 decode / eager / small-batch GPU tests, memcheck on the
#    eager test.
#   run: bash experiments/2026-12-05_t41/t41-call3.sh
set -u
cd "$(dirname "$0")/../.."
M="--family mamba2 --preset nemotron3 --L 16 --target-ms 2 --modes baseline,replay --state fp32,bf16"
BENCH_ARGS="$M --batch 1,2,3,4" ONLY="main m2st" PACK=gpubin-x/t41.tar.xz REPS=3 OUT=$OUT/eager timeout 150 \
  bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "eager rc $?"
tail -n 18 "$OUT/eager/log.txt"
BENCH_ARGS="$M --batch 1,2" ENVS="def:X=0;s6:REPLAYSSM_M2_DEC_STAGES=6;s8:REPLAYSSM_M2_DEC_STAGES=8" \
  ONLY=m2st PACK=gpubin-x/t41.tar.xz REPS=2 OUT=$OUT/stages timeout 100 \
  bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "stages rc $?"
tail -n 10 "$OUT/stages/log.txt"
GTEST_FILTER='Mamba2Gpu.EagerSmallBatch:Mamba2Gpu.DecodeAndReplayAllShapesAndDtypes:Mamba2Gpu.SnapshotDecode:Mamba2Gpu.*SmallBatch*:DualMamba2Gpu.PlainDecodeAllShapesFormats:Mamba2GpuArena.*' \
  SANITIZE_FILTER='Mamba2Gpu.EagerSmallBatch' SANITIZE_TIMEOUT_S=60 \
  PACK=gpubin-x/t41.tar.xz PACK_LABEL=m2st SKIP_CPU_TESTS=1 TEST_SHARDS=8 DEADLINE_S=150 OUT=$OUT/tests \
  bash scripts/gpu_check.sh test sanitize > /dev/null 2>&1
grep -E "^(test|sanitize) " "$OUT/tests/log.txt" | tail -2
