#!/bin/bash
# t52, device call 5 (prepared, not run: the session's device time was spent;
# about 360 s; carry gpubin-x/t52m.tar.xz; only on an H200: on another card
# it prints the name and stops). `main` = main's build at da9f7be (0372d7e's
# kernels; c48f0f7's
# pack plus ae8be38 and da9f7be, which no GPU has run: its DualMamba2Gpu and
# Mamba2Gpu.Replay* tests run first), `fin` = c9736c2's kernels (the t51f
# build). The target rows at B = 256, L = 16 on main (T = 1 fp32 / bf16 /
# the bf16-d option, dual fp8 / nvfp4, T = 5 fp32), Mamba-2's dual copies
# from fin beside them; GDN HV32 bf16 default against the blocks
# (REPLAYSSM_R1P=0) at B = 96 / 128 / 256 (t50's unmeasured H200 threshold).
#   run: bash experiments/2026-12-06_t52/t52-call5.sh
set -u
cd "$(dirname "$0")/../.."
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "$name"
[[ $name == *H200* ]] || { echo "not an H200: stop"; exit 0; }
d=$(mktemp -d)
xz -dc gpubin-x/t52m.tar.xz | tar -C "$d" -x
M=$d/main F=$d/fin
timeout 200 "$M/replayssm_gpu_tests" --gtest_brief=1 --gtest_filter='DualMamba2Gpu.*:Mamba2Gpu.Replay*' 2>&1 | tail -n 4
A="--backend cuda --L 16 --target-ms 2"
for r in 1 2; do
  echo "== round $r"
  timeout 90 $M/replayssm bench $A --out $OUT/r${r}_t1.jsonl --family gdn,kda,mamba2 --preset qwen35-122b,kimi,nemotron3 --batch 256 --state fp32,bf16 --modes replay 2>&1 | grep " replay" | sed 's/^/main /'
  timeout 90 $M/replayssm bench $A --out $OUT/r${r}_bf16d.jsonl --family gdn --preset qwen35-122b --batch 256 --state fp32 --d-dtype bf16 --modes replay 2>&1 | grep " replay" | sed 's/^/main bf16d /'
  timeout 90 $M/replayssm bench $A --out $OUT/r${r}_dual.jsonl --family gdn,kda,mamba2 --preset qwen35-122b,kimi,nemotron3 --batch 256 --state fp32 --modes dual --read fp8,nvfp4 2>&1 | grep "dual/" | sed 's/^/main /'
  timeout 90 $F/replayssm bench $A --out $OUT/r${r}_fin_m2dual.jsonl --family mamba2 --preset nemotron3 --batch 256 --state fp32 --modes dual --read fp8,nvfp4 2>&1 | grep "dual/" | sed 's/^/fin /'
  timeout 90 $M/replayssm bench $A --out $OUT/r${r}_t5.jsonl --family gdn,kda,mamba2 --preset qwen35-122b,kimi,nemotron3 --batch 256 --T 5 --state fp32 --modes replay 2>&1 | grep " replay" | sed 's/^/main T5 /'
done
for B in 96 128 256; do
  timeout 60 $M/replayssm bench $A --out $OUT/hv32_def_$B.jsonl --family gdn --preset qwen35 --batch $B --state bf16 --modes replay 2>&1 | grep " replay" | sed 's/^/default /'
  REPLAYSSM_R1P=0 timeout 60 $M/replayssm bench $A --out $OUT/hv32_blk_$B.jsonl --family gdn --preset qwen35 --batch $B --state bf16 --modes replay 2>&1 | grep " replay" | sed 's/^/blocks /'
done
(cd "$OUT" && cat *.jsonl > rows.txt && rm -f *.jsonl && mv rows.txt rows.jsonl)
