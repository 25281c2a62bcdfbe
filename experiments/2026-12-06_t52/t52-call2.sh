#!/bin/bash
# t52, device call 2 (about 250 s; carry gpubin-x/t51f.tar.xz). `fin` =
# 4615f29 (main's kernels since). On an H200 first the target rows of
# t52-call1 (= t51-call4); on any card an ncu source page of one launch of
# the Mamba-2 dual pack kernel (fp8 copy, H128, B = 256, L = 16), for
# scripts/ncu_lines.py.
#   run: bash experiments/2026-12-06_t52/t52-call2.sh
set -u
cd "$(dirname "$0")/../.."
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "$name"
if [[ $name == *H200* ]]; then bash experiments/2026-12-06_t52/t52-call1.sh | tail -n +2; fi
d=$(mktemp -d)
xz -dc gpubin-x/t51f.tar.xz | tar -C "$d" -x
F=$d/fin
timeout 150 ncu --clock-control none --set full --import-source yes -k regex:dual_pack --launch-skip 20 --launch-count 1 \
  -o "$OUT/pack" $F/replayssm bench --backend cuda --family mamba2 --preset nemotron3 --modes dual --read fp8 \
  --batch 256 --L 16 --state fp32 --target-ms 1 > "$OUT/ncu_pack_log.txt" 2>&1
echo "ncu rc=$?"
ncu -i "$OUT/pack.ncu-rep" --page source --csv --print-source sass --print-kernel-base mangled > "$OUT/pack_sass.csv" 2>&1
ncu -i "$OUT/pack.ncu-rep" --page details > "$OUT/pack_details.txt" 2>&1
xz -9 "$OUT/pack_sass.csv"
rm -f "$OUT/pack.ncu-rep"
grep -E "Duration|Executed Instructions  |Registers|DRAM Throughput|Memory Throughput|Executed Ipc" "$OUT/pack_details.txt" | head -12
