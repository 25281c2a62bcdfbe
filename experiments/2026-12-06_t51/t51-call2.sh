#!/bin/bash
# t51, device call 2 (about 400 s; carry gpubin-x/t51q.tar.xz: `main` = main's
# build, `q16` = the packed copy's history terms in the T = 1 stream's
# epilogue, so an fp8 copy's block takes a group's 16 heads). The Mamba-2 GPU
# tests of q16 (Mamba2Gpu*, DualMamba2Gpu*, SharedGpu.Mamba2*), memcheck of
# DualMamba2Gpu.BulkCopy*; then main against q16, two rounds alternating:
# Mamba-2 H128 dual fp8 / nvfp4 / bf16 copies at B = 64, 128, 256, 512 and the
# single-precision T = 1 rows at B = 256 (their kernels are unchanged); q16 at
# B = 256 with REPLAYSSM_M2_R1_BPS=16 (eight heads per block, the epilogue's
# history) and with REPLAYSSM_M2_PACK_PF=1 (the pack kernel's next item's
# checkpoint rows into L2); ncu of q16's dual fp8 step.
#   run: bash experiments/2026-12-06_t51/t51-call2.sh
set -u
cd "$(dirname "$0")/../.."
d=$(mktemp -d)
xz -dc gpubin-x/t51q.tar.xz | tar -C "$d" -x
Q=$d/q16
timeout 200 "$Q/replayssm_gpu_tests" --gtest_brief=1 --gtest_filter='Mamba2Gpu*:DualMamba2Gpu*:SharedGpu.Mamba2*' 2>&1 | grep -v '^  ' | tail -n 8
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 1 "$Q/replayssm_gpu_tests" --gtest_brief=1 \
  --gtest_filter='DualMamba2Gpu.BulkCopySmall:DualMamba2Gpu.BulkCopyWholeGroupTiles' 2>&1 | tail -n 3
PACK=gpubin-x/t51q.tar.xz REPS=2 BENCH_TIMEOUT_S=120 OUT=$OUT/cmp \
  BENCH_ARGS="--family mamba2 --preset nemotron3 --batch 64,128,256,512 --L 16 --state fp32 --modes dual --read fp8,nvfp4,bf16 --target-ms 2;--family mamba2 --preset nemotron3 --batch 256 --L 16 --state fp32,bf16 --modes replay --target-ms 2" \
  bash scripts/gpu_compare.sh 2>&1 | grep -E "^ *mamba2 |^==|rc=" | tail -n 60
qb() { timeout 60 "$Q/replayssm" bench --backend cuda --family mamba2 --preset nemotron3 --batch 256 --L 16 --state fp32 --modes dual --read fp8,nvfp4,bf16 --target-ms 2 2>&1 | grep ' dual'; }
for r in 1 2; do
  echo "== q16 bps16 (eight heads per block), round $r"; REPLAYSSM_M2_R1_BPS=16 qb
  echo "== q16 pack pf (next item into L2), round $r"; REPLAYSSM_M2_PACK_PF=1 qb
  echo "== q16 default, round $r"; qb
done
timeout 100 ncu --clock-control none --launch-skip 40 --launch-count 3 \
  --metrics gpu__time_duration.sum,smsp__inst_executed.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size,launch__occupancy_limit_shared_mem \
  "$Q/replayssm" bench --backend cuda --L 16 --batch 256 --target-ms 1 --family mamba2 --preset nemotron3 --state fp32 --modes dual --read fp8 > "$OUT/ncu_q16.txt" 2>&1
echo "ncu rc=$?"
