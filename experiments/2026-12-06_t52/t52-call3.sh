#!/bin/bash
# t52, device call 3 (about 300 s; carry gpubin-x/t52a.tar.xz: `fin` = 4615f29
# (main's kernels), `pk` = branch t52-pack: the Mamba-2 dual pack with
# 16-byte record loads fused with the fold weights, unchecked row loads and
# stores by pointer, the fp8 rows' codes by pointer and a cheaper finite
# test). pk's DualMamba2Gpu and Mamba2Gpu tests; memcheck and racecheck of
# the bulk-copy tests; fin against pk, two rounds alternating, Mamba-2 dual
# copies (fp32 checkpoint) H128 at B = 64, 256, 512 (+ bf16 checkpoint fp8 at
# B = 256); ncu of both packs (duration, instructions).
#   run: bash experiments/2026-12-06_t52/t52-call3.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader
d=$(mktemp -d)
xz -dc gpubin-x/t52a.tar.xz | tar -C "$d" -x
F=$d/fin K=$d/pk
timeout 200 "$K/replayssm_gpu_tests" --gtest_brief=1 --gtest_filter='DualMamba2Gpu.*' 2>&1 | tail -n 4
for tool in memcheck racecheck; do
  echo "== $tool"
  timeout 100 compute-sanitizer --tool $tool --error-exitcode 1 "$K/replayssm_gpu_tests" --gtest_brief=1 \
    --gtest_filter='DualMamba2Gpu.BulkCopySmall:DualMamba2Gpu.BulkCopyWholeGroupTiles' 2>&1 | tail -n 2
done
A="--backend cuda --family mamba2 --preset nemotron3 --L 16 --target-ms 2"
for r in 1 2; do
  echo "== round $r"
  timeout 90 $F/replayssm bench $A --out $OUT/r${r}_fin.jsonl --batch 64,256,512 --state fp32 --modes dual --read fp8,nvfp4,bf16 2>&1 | grep "dual/" | sed 's/^/fin /'
  timeout 90 $K/replayssm bench $A --out $OUT/r${r}_pk.jsonl --batch 64,256,512 --state fp32 --modes dual --read fp8,nvfp4,bf16 2>&1 | grep "dual/" | sed 's/^/pk /'
  timeout 60 $F/replayssm bench $A --out $OUT/r${r}_fin_b.jsonl --batch 256 --state bf16 --modes dual --read fp8 2>&1 | grep "dual/" | sed 's/^/fin /'
  timeout 60 $K/replayssm bench $A --out $OUT/r${r}_pk_b.jsonl --batch 256 --state bf16 --modes dual --read fp8 2>&1 | grep "dual/" | sed 's/^/pk /'
done
for b in fin pk; do
  timeout 90 ncu --clock-control none -k regex:dual_pack --launch-skip 20 --launch-count 4 \
    --metrics gpu__time_duration.sum,smsp__inst_executed.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread \
    $d/$b/replayssm bench $A --batch 256 --state fp32 --modes dual --read fp8 --target-ms 1 > "$OUT/ncu_$b.txt" 2>&1
  echo "ncu $b rc=$?"; grep -E "duration|inst_executed|dram__|registers" "$OUT/ncu_$b.txt" | awk '{print "'$b'", $1, $NF}' | head -16
done
(cd "$OUT" && cat r*_*.jsonl > rows.jsonl && rm -f r*_*.jsonl)
