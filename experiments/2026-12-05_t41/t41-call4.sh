#!/bin/bash
# t41, device call 4 (about 180 s; carry gpubin-x/t40pf.tar.xz): 
# 1. the persistent step's default against 2 / 3 / 4 / 6 stages with four
#    result buffers, B = 256, L = 16, two rounds (the H200 check of
#    t41-call1 / 2's H100 finding; the stages' bytes per SM: README);
# 2. ncu (full set) of one Mamba-2 decode kernel launch at B = 1, H128 fp32,
#    L = 16: the baseline's and the eager replay step's (batch 1's gap,
#    7.46 against 7.11 µs on the H100, is not the stage count: t41-call3);
# 3. Mamba-2 H128 B = 1–3 by the eager rule (`def`) and eager up to three
#    rows whatever their bytes (`e3`: REPLAYSSM_EAGER_ROWS=3): on the H100
#    bf16 B = 3 (6 MiB, the replay kernel by the rule) took 10.36 µs against
#    the baseline's 8.49 (t41-call3).
#   run: bash experiments/2026-12-05_t41/t41-call4.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader
R1P_ENVS="def:X=0;nst2nb4:REPLAYSSM_R1P_NST=2,REPLAYSSM_R1P_NB=4;nst3nb4:REPLAYSSM_R1P_NST=3,REPLAYSSM_R1P_NB=4;\
nst4nb4:REPLAYSSM_R1P_NST=4,REPLAYSSM_R1P_NB=4;nst6nb4:REPLAYSSM_R1P_NST=6,REPLAYSSM_R1P_NB=4" \
  bash experiments/2026-12-05_t40/t40-call5.sh
for m in baseline replay; do
  PROFILE_KERNEL=mamba2_decode_kernel \
  PROFILE_ARGS="--family mamba2 --preset nemotron3 --modes $m --batch 1 --L 16 --state fp32 --target-ms 1" \
    PACK=gpubin-x/t40pf.tar.xz PACK_LABEL=main DEADLINE_S=100 OUT=$OUT/prof-$m \
    bash scripts/gpu_check.sh profile > /dev/null 2>&1
  echo "$m:"; grep -E "^profile " "$OUT/prof-$m/log.txt" | tail -1
  grep -E "Duration|Registers Per|Dynamic Shared|Achieved Occupancy|DRAM Throughput|Block Limit Shared|Grid Size" "$OUT/prof-$m/profile.txt" | head -10
  # at most 8 files come back from $OUT: keep the details and the per-line table
  rm -f "$OUT/prof-$m/sass.csv" "$OUT/prof-$m/sass.txt" "$OUT/prof-$m/profile.ncu-rep" "$OUT/prof-$m/log.txt"
done
BENCH_ARGS="--family mamba2 --preset nemotron3 --L 16 --target-ms 2 --modes baseline,replay --state fp32,bf16 --batch 1,2,3" \
ENVS="def:X=0;e3:REPLAYSSM_EAGER_ROWS=3" ONLY=main PACK=gpubin-x/t40pf.tar.xz REPS=2 OUT=$OUT/eager timeout 90 \
  bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "eager rc $?"
tail -n 13 "$OUT/eager/log.txt"
