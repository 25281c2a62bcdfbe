#!/bin/bash
# For the next session (prepared in t63, not run): what landing t62's T = 1
# fold (experiments/2026-12-07_t62/t1fold) still needs, ~480 s on any card.
# Carry gpubin-x/t62b.tar.xz (builds `main` = 3f676ce and `ftc2` = the T = 1
# patch f12f736 on 305bc5e, both with their test binaries); if the workspace
# lost it, build main and main + the two t1fold patches and pack them under
# those labels (scripts/pack_builds.sh).
#  1. ftc2's tests, one process each, at once (300 s): ReplayFoldTensorCores
#     (both folds against fp64; P = 40, tiles across heads), SpecFoldTensorCores,
#     the dual checkpoint identity (FMA stream bit for bit, tensor-core fold
#     within tolerance), ReplaySmallBatchTiles, ReplayManyItems; racecheck and
#     memcheck of ReplayManyItems (80 rows on the bulk-copy stream, flushing:
#     the stage folded in place; ReplayShortRunN128's 3 rows are eager steps);
#  2. main and ftc2, Mamba-2 H128 T = 1 fp32 / bf16 at B = 64 / 256 / 512,
#     L = 16, two rounds alternating.
# Files: t_*.txt / t_*.json, san_*.txt, log.txt, compare.jsonl.
#   run: bash experiments/2026-12-07_t63/t63-next.sh
set -u
TT=${TT:-300} CT=${CT:-170} BATCH=${BATCH:-64,256,512}  # limits (s) and batches; t64 ran TT=210 CT=140
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
