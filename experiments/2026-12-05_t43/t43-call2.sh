#!/bin/bash
# t43, device call 2 (at most ~300 s; carry gpubin-x/t43.tar.xz): why the
# Mamba-2 eager step at batch 1 trails the baseline decode (H200 7.17 /
# 6.86 µs fp32, 6.50 / 6.01 bf16): ncu (--set full, warm caches, the
# launch after PROFILE_SKIP, past the first visit of every slot set, whose
# eager steps fold the records the bench's cursors start with) of the
# decode kernel in baseline and in replay mode, H128 bf16 and fp32, B = 1,
# each with its per-line instruction and stall counts; then land's
# sanitizer subset of the stage cap (memcheck on the persistent steps).
#   run: bash experiments/2026-12-05_t43/t43-call2.sh
set -u
cd "$(dirname "$0")/../.."
for st in bf16 fp32; do
  for mode in baseline replay; do
    PACK=gpubin-x/t43.tar.xz PACK_LABEL=land OUT=$OUT/$st-$mode DEADLINE_S=70 PROFILE_KERNEL=mamba2_decode \
      PROFILE_SKIP=1500 PROFILE_NCU_ARGS="--cache-control none" \
      PROFILE_ARGS="--family mamba2 --preset nemotron3 --modes $mode --batch 1 --L 16 --state $st --target-ms 5" \
      bash scripts/gpu_check.sh profile > /dev/null 2>&1
    echo "== $st $mode: $(grep -E '^profile ' "$OUT/$st-$mode/log.txt" | tail -1)"
    grep -E "Duration|Registers Per|Elapsed Cycles|Dynamic Shared" "$OUT/$st-$mode/profile.txt" | tr -s ' ' | head -5
    rm -f "$OUT/$st-$mode"/*.ncu-rep "$OUT/$st-$mode/sass.csv" "$OUT/$st-$mode/sass.txt"
  done
done
SANITIZE_FILTER='DeltaGpu.PersistentStep' SANITIZE_TIMEOUT_S=80 \
  PACK=gpubin-x/t43.tar.xz PACK_LABEL=land DEADLINE_S=200 OUT=$OUT/san bash scripts/gpu_check.sh sanitize > /dev/null 2>&1
grep -E "^sanitize " "$OUT/san/log.txt" | tail -1
grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/san/sanitize.txt" | tail -6
