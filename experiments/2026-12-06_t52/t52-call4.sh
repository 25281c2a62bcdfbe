#!/bin/bash
# t52, device call 4 (about 200 s; carry gpubin-x/t52b.tar.xz: `fin` = 4615f29
# (main's kernels), `pk` = c48f0f7 (t52-call3's pk), `pp` = pk + pipelined
# items: the next item's state tile and raw records by bulk copies into a
# second shared stage). pp's DualMamba2Gpu tests; memcheck and racecheck of
# the bulk-copy tests; pk / pp, two rounds alternating, Mamba-2 dual
# copies (fp32 checkpoint) H128 at B = 256, 512; ncu of pp's pack.
#   run: bash experiments/2026-12-06_t52/t52-call4.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader
d=$(mktemp -d)
xz -dc gpubin-x/t52b.tar.xz | tar -C "$d" -x
F=$d/fin K=$d/pk Q=$d/pp
timeout 160 "$Q/replayssm_gpu_tests" --gtest_brief=1 --gtest_filter='DualMamba2Gpu.*' 2>&1 | tail -n 4
for tool in memcheck racecheck; do
  echo "== $tool"
  timeout 100 compute-sanitizer --tool $tool --error-exitcode 1 "$Q/replayssm_gpu_tests" --gtest_brief=1 \
    --gtest_filter='DualMamba2Gpu.BulkCopySmall:DualMamba2Gpu.BulkCopyWholeGroupTiles' 2>&1 | tail -n 2
done
A="--backend cuda --family mamba2 --preset nemotron3 --L 16 --target-ms 2"
for r in 1 2; do
  echo "== round $r"
  timeout 90 $K/replayssm bench $A --out $OUT/r${r}_pk.jsonl --batch 256,512 --state fp32 --modes dual --read fp8,nvfp4,bf16 2>&1 | grep "dual/" | sed 's/^/pk /'
  timeout 90 $Q/replayssm bench $A --out $OUT/r${r}_pp.jsonl --batch 256,512 --state fp32 --modes dual --read fp8,nvfp4,bf16 2>&1 | grep "dual/" | sed 's/^/pp /'
done
timeout 90 ncu --clock-control none -k regex:dual_pack --launch-skip 20 --launch-count 4 \
  --metrics gpu__time_duration.sum,smsp__inst_executed.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread \
  $Q/replayssm bench $A --batch 256 --state fp32 --modes dual --read fp8 --target-ms 1 > "$OUT/ncu_pp.txt" 2>&1
echo "ncu pp rc=$?"; grep -E "duration|inst_executed|dram__" "$OUT/ncu_pp.txt" | awk '{print "pp", $1, $NF}' | head -12
(cd "$OUT" && cat r*_*.jsonl > rows.jsonl && rm -f r*_*.jsonl)
