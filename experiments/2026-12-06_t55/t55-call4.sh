#!/bin/bash
# t55, device call 4 (carry gpubin-x/t53r.tar.xz): main / rec rows beside
# t53-call4's: B = 256, T = 5 with bf16 states at L = 16 (REC16 taken) and
# fp32 states at L = 32 (REC16 not taken: L · 772 bytes > 16,640), two
# rounds, builds alternating.
#   run: bash experiments/2026-12-06_t55/t55-call4.sh
set -u
cd "$(dirname "$0")/../.."
d=$(mktemp -d)
xz -dc gpubin-x/t53r.tar.xz | tar -C "$d" -x
A="--backend cuda --target-ms 2 --family kda,gdn --preset kimi,qwen35-122b --modes replay --batch 256 --T 5"
for r in 1 2; do
  for b in main rec; do
    bin=$d/$b/replayssm
    timeout 60 $bin bench $A --L 16 --state bf16 --out $OUT/s${r}_${b}_bf16.jsonl 2>&1 | grep " replay" | sed "s/^/$b r$r /"
    timeout 60 $bin bench $A --L 32 --state fp32 --out $OUT/s${r}_${b}_l32.jsonl 2>&1 | grep " replay" | sed "s/^/$b r$r /"
  done
done
(cd "$OUT" && cat s*.jsonl > rows2.jsonl && rm s*.jsonl)
