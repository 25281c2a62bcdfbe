#!/bin/bash
# t53, device call 3 (carry gpubin-x/t53m.tar.xz): on an H200 first the
# target rows of t53-call1 (its tests already passed on an H100: skipped
# here), then on any card t53-call2's ncu profile of KDA T = 5.
#   run: bash experiments/2026-12-06_t53/t53-call3.sh
set -u
cd "$(dirname "$0")/../.."
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "$name"
if [[ $name == *H200* ]]; then
  d=$(mktemp -d)
  xz -dc gpubin-x/t53m.tar.xz | tar -C "$d" -x
  M=$d/main
  A="--backend cuda --L 16 --target-ms 2"
  for r in 1 2; do
    echo "== round $r"
    timeout 100 $M/replayssm bench $A --out $OUT/r${r}_t1.jsonl --family gdn,kda,mamba2 --preset qwen35-122b,kimi,nemotron3 --batch 256 --state fp32,bf16 --modes baseline,replay 2>&1 | grep -E " replay| baseline|copy" | sed 's/^/T1 /'
    timeout 60 $M/replayssm bench $A --out $OUT/r${r}_bf16d.jsonl --family gdn --preset qwen35-122b --batch 256 --state fp32 --d-dtype bf16 --modes replay 2>&1 | grep " replay" | sed 's/^/bf16d /'
    timeout 90 $M/replayssm bench $A --out $OUT/r${r}_dual.jsonl --family gdn,kda,mamba2 --preset qwen35-122b,kimi,nemotron3 --batch 256 --state fp32 --modes dual --read fp8,nvfp4 2>&1 | grep "dual/" | sed 's/^/dual /'
    timeout 100 $M/replayssm bench $A --out $OUT/r${r}_t5.jsonl --family gdn,kda,mamba2 --preset qwen35-122b,kimi,nemotron3 --batch 256 --T 5 --state fp32 --modes replay 2>&1 | grep " replay" | sed 's/^/T5 /'
  done
  (cd "$OUT" && cat r*.jsonl > rows.txt && rm -f r*.jsonl && mv rows.txt rows.jsonl)
fi
bash experiments/2026-12-06_t53/t53-call2.sh | tail -n +2
