#!/bin/bash
# t45, device call 3 (about 330 s; any H100 / H200; carry gpubin-x/t45b.tar.xz
# as call 2): main against fp's default on the dual rows (GDN HV64 / KDA,
# fp8 / nvfp4, B = 256 / 512), two rounds; fp with the fold beside the
# step at REPLAYSSM_FOLD_PERSIST = 0 (off) / 96 / 192 / 384 / 768, B = 256,
# two rounds; per-item timelines of one GDN HV64 dual fp8 step at B = 256
# (R1P_TIMING, scripts/r1p_timeline.py: the items that waited for the fold
# beside the step, when they were reached and released), ratios 0 and 192.
#   run: bash experiments/2026-12-05_t45/t45-call3.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name,memory.total,clocks.max.memory --format=csv,noheader
P=gpubin-x/t45b.tar.xz
DUAL="--family gdn,kda --preset qwen35-122b,kimi --L 16 --state fp32 --modes dual --read fp8,nvfp4 --target-ms 2"
ONLY="ce9aa8c fp" BENCH_ARGS="$DUAL --batch 256,512" PACK=$P REPS=2 OUT=$OUT/base \
  timeout 170 bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "== base rc $?"
sed -n '/^µs per step/,$p' "$OUT/base/log.txt"
ENVS="r0:REPLAYSSM_FOLD_PERSIST=0;r96:REPLAYSSM_FOLD_PERSIST=96;r192:REPLAYSSM_FOLD_PERSIST=192;\
r384:REPLAYSSM_FOLD_PERSIST=384;r768:REPLAYSSM_FOLD_PERSIST=768" \
  ONLY=fp BENCH_ARGS="$DUAL --batch 256" PACK=$P REPS=2 OUT=$OUT/persist timeout 130 bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "== persist rc $?"
sed -n '/^µs per step/,$p' "$OUT/persist/log.txt"
d=$(mktemp -d)
xz -dc $P | tar -C "$d" -x
for r in 0 192; do
  REPLAYSSM_FOLD_PERSIST=$r R1P_TIMING=$OUT/r1p_$r.bin timeout 25 "$d/fp/replayssm" bench --backend cuda --family gdn \
    --preset qwen35-122b --batch 256 --L 16 --state fp32 --modes dual --read fp8 --target-ms 1 > /dev/null 2>&1
  echo "== timeline, ratio $r"
  python3 scripts/r1p_timeline.py "$OUT/r1p_$r.bin" 2>&1 | tail -n 25
done
