#!/bin/bash
# t64 call 1: t63-next.sh with shorter limits (tests 230 s, compare 150 s) to fit
# the device time left after this session's refused starts; otherwise the same.
# Carry gpubin-x/t62b.tar.xz (labels main = 3f676ce, ftc2 = the T = 1 fold).
#  1. ftc2's tests, one process each, at once (230 s): ReplayFoldTensorCores
#     (both folds against fp64; P = 40, tiles across heads), SpecFoldTensorCores,
#     the dual checkpoint identity (FMA stream bit for bit, tensor-core fold
#     within tolerance), ReplaySmallBatchTiles, ReplayManyItems; racecheck and
#     memcheck of ReplayManyItems (80 rows on the bulk-copy stream, flushing:
#     the stage folded in place; ReplayShortRunN128's 3 rows are eager steps);
#  2. main and ftc2, Mamba-2 H128 T = 1 fp32 / bf16 at B = 64 / 256 / 512,
#     L = 16, two rounds alternating.
# Files: t_*.txt / t_*.json, san_*.txt, log.txt, compare.jsonl.
#   run: bash experiments/2026-12-07_t64/call1.sh
set -u
TT=${TT:-230} CT=${CT:-150} BATCH=${BATCH:-64,256,512}  # shorter where less device time is left
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
d=$(mktemp -d)
xz -dc gpubin-x/t62b.tar.xz | tar -C "$d" -x
tb=$d/ftc2/replayssm_gpu_tests
for t in Mamba2Gpu.ReplayFoldTensorCores Mamba2Gpu.SpecFoldTensorCores DualMamba2Gpu.CheckpointBitIdenticalAcrossFormats \
         Mamba2Gpu.ReplaySmallBatchTiles Mamba2Gpu.ReplayManyItems; do
  timeout "$TT" "$tb" --gtest_filter="$t" --gtest_output="json:$OUT/t_$t.json" > "$OUT/t_$t.txt" 2>&1 &
done
for tool in racecheck memcheck; do
  timeout "$TT" compute-sanitizer --tool "$tool" --error-exitcode 1 "$tb" --gtest_filter=Mamba2Gpu.ReplayManyItems \
    --gtest_brief=1 > "$OUT/san_$tool.txt" 2>&1 &
done
wait
grep -hE "^\[  (PASSED|FAILED) |OK \]|FAILED|max output error" "$OUT"/t_*.txt
tail -n 2 "$OUT"/san_*.txt
BENCH_ARGS="--family mamba2 --preset nemotron3 --batch $BATCH --L 16 --state fp32,bf16 --modes replay --target-ms 2" \
  PACK=gpubin-x/t62b.tar.xz REPS=2 BENCH_TIMEOUT_S=40 timeout "$CT" bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "compare rc=$?"
sed -n '/^µs per step/,$p' "$OUT/log.txt"
