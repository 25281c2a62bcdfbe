#!/bin/bash
# Device script for t35-tail-tiles.patch, run from the repository root:
#   PACK=gpubin-x/t36.tar.xz bash experiments/2026-12-04_t35/t35-tail-tiles-call.sh
# (PACK holds LABEL=main and LABEL=tail builds, see README; the thirty-sixth
# session's pack, experiments/2026-12-05_t36, has both; at most ~590 s).
# Benchmarks first (B = 64 and 256, fp32 baselines, tail sizes as runtime
# variants), then the tests with the knob on.
set -u
cd "$(dirname "$0")/../.."
mkdir -p "$OUT/x"
M="--family mamba2,gdn,kda --modes baseline --L 16 --state fp32 --target-ms 2"
BENCH_ARGS="$M --preset nemotron3,nemotron3-h64,nemotron3-nano,qwen35,qwen35-122b,kimi --batch 64" \
ENVS="def:REPLAYSSM_D1_TAIL_ROWS=0;t8:REPLAYSSM_D1_TAIL_ROWS=8,REPLAYSSM_M2_DEC_TAIL_ROWS=8;t16:REPLAYSSM_D1_TAIL_ROWS=16,REPLAYSSM_M2_DEC_TAIL_ROWS=16;t16h:REPLAYSSM_D1_TAIL_ROWS=16,REPLAYSSM_D1_TAIL_VT=64,REPLAYSSM_M2_DEC_TAIL_ROWS=16,REPLAYSSM_M2_DEC_TAIL_PASSES=2" \
ONLY=tail PACK=${PACK:-gpubin-x/tail.tar.xz} REPS=2 OUT=$OUT/x timeout 210 bash scripts/gpu_compare.sh > /dev/null 2>&1
tail -n 20 "$OUT/x/log.txt"
mkdir -p "$OUT/y"
BENCH_ARGS="$M --preset nemotron3,nemotron3-h64,qwen35-122b,kimi --batch 256" \
ENVS="def:REPLAYSSM_D1_TAIL_ROWS=0;t16:REPLAYSSM_D1_TAIL_ROWS=16,REPLAYSSM_M2_DEC_TAIL_ROWS=16;t32:REPLAYSSM_D1_TAIL_ROWS=32,REPLAYSSM_M2_DEC_TAIL_ROWS=32" \
ONLY=tail PACK=${PACK:-gpubin-x/tail.tar.xz} REPS=2 OUT=$OUT/y timeout 180 bash scripts/gpu_compare.sh > /dev/null 2>&1
tail -n 10 "$OUT/y/log.txt"
d=$(mktemp -d); xz -dc "${PACK:-gpubin-x/tail.tar.xz}" | tar -C "$d" -x
echo "== tests, tail rows 7"
REPLAYSSM_D1_TAIL_ROWS=7 REPLAYSSM_M2_DEC_TAIL_ROWS=7 timeout 100 "$d/tail/replayssm_gpu_tests" --gtest_brief=1 \
  --gtest_filter='DeltaGpu.Decode:DeltaGpu.ProductionTiles:DeltaGpu.DeviceStatusBadSlot:Mamba2Gpu.ReplayProductionTiles:Mamba2Gpu.DeviceStatusOnBadRows' > "$OUT/t.txt" 2>&1
echo "rc $?"; tail -n 8 "$OUT/t.txt"
echo "== tests, tail rows 5, half heads, two passes"
REPLAYSSM_D1_TAIL_ROWS=5 REPLAYSSM_D1_TAIL_VT=64 REPLAYSSM_M2_DEC_TAIL_ROWS=5 REPLAYSSM_M2_DEC_TAIL_PASSES=2 timeout 100 \
  "$d/tail/replayssm_gpu_tests" --gtest_brief=1 \
  --gtest_filter='DeltaGpu.ProductionTiles:Mamba2Gpu.ReplayProductionTiles' > "$OUT/t2.txt" 2>&1
echo "rc $?"; tail -n 8 "$OUT/t2.txt"
