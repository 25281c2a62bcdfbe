#!/bin/bash
# For the next session (prepared in t64, not run), ~300 s on any card, more
# useful on an H200: main's build (923fa05 or later) runs the fixed
# Mamba2Gpu.ReplayFoldTensorCores and SpecFoldTensorCoresRule, then every
# issue 3-5 target row (scripts/target_rows.sh; the first H200 figures since
# t47 if an H200 comes).
# Carry gpubin-x/t64b.tar.xz, label `main` with its test binary; if the
# workspace lost it: build main (README, build-gpu) and
#   DEST=gpubin-x/t64b.tar.xz bash scripts/pack_builds.sh main=build-gpu
# Files: t_*.txt / t_*.json, rows.jsonl, log.txt.
#   run: bash experiments/2026-12-07_t64/next.sh
set -u
TT=${TT:-120} SETS=${SETS:-"t1 t1bd dual t5 b64"}
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tee "$OUT/log.txt"
d=$(mktemp -d)
xz -dc gpubin-x/t64b.tar.xz | tar -C "$d" -x
for t in Mamba2Gpu.ReplayFoldTensorCores Mamba2Gpu.SpecFoldTensorCoresRule; do
  timeout "$TT" "$d/main/replayssm_gpu_tests" --gtest_filter="$t" --gtest_output="json:$OUT/t_$t.json" > "$OUT/t_$t.txt" 2>&1 &
done
wait
grep -hE "^\[  (PASSED|FAILED) |OK \]|FAILED|max output error" "$OUT"/t_*.txt | tee -a "$OUT/log.txt"
BIN=$d/main/replayssm OUT_JSONL=$OUT/rows.jsonl LOG=$OUT/log.txt SETS="$SETS" bash scripts/target_rows.sh
