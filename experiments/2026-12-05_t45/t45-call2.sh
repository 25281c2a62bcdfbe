#!/bin/bash
# t45, device call 2 (about 480 s; any H100 / H200; carry gpubin-x/t45b.tar.xz:
# `ce9aa8c` = main, `fp` = branch t45-fold-persist, CLI and GPU tests each):
# the dual step's fold as a persistent grid beside the step
# (perf_notes_delta.md v47, REPLAYSSM_FOLD_PERSIST, off by default).
# 1. fp's dual GPU tests (every DualDeltaGpu* test and part: the fold
#    kernel's refactored code, the dual preparation / stream changes, the
#    new PersistentFold tests), memcheck + racecheck of
#    DualDeltaGpu.PersistentFoldSmall; then main against fp's default on the
#    dual rows (GDN HV64 / KDA, fp8 / nvfp4, B = 256 / 512), two rounds;
# 2. fp with the fold beside the step, its share of the SMs by the ratio:
#    0 (off) / 96 / 192 / 384 / 768, B = 256, two rounds.
#   run: bash experiments/2026-12-05_t45/t45-call2.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name,memory.total,clocks.max.memory --format=csv,noheader
P=gpubin-x/t45b.tar.xz
DUAL="--family gdn,kda --preset qwen35-122b,kimi --L 16 --state fp32 --modes dual --read fp8,nvfp4 --target-ms 2"
TEST_BUILD=fp TEST_FILTER='*DualDeltaGpu*' TEST_TIMEOUT_S=200 SANITIZE_FILTER=DualDeltaGpu.PersistentFoldSmall \
  ONLY="ce9aa8c fp" BENCH_ARGS="$DUAL --batch 256,512" PACK=$P REPS=2 OUT=$OUT/base \
  timeout 400 bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "== base rc $?"
grep -v "^\[" "$OUT/base/log.txt" | tail -n 40
ENVS="r0:REPLAYSSM_FOLD_PERSIST=0;r96:REPLAYSSM_FOLD_PERSIST=96;r192:REPLAYSSM_FOLD_PERSIST=192;\
r384:REPLAYSSM_FOLD_PERSIST=384;r768:REPLAYSSM_FOLD_PERSIST=768" \
  ONLY=fp BENCH_ARGS="$DUAL --batch 256" PACK=$P REPS=2 OUT=$OUT/persist timeout 150 bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "== persist rc $?"
sed -n '/^µs per step/,$p' "$OUT/persist/log.txt"
