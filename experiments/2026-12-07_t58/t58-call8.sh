#!/bin/bash
# t58, device call 8 (~25 s; carry gpubin-x/t57.tar.xz): GDN HV64 fp32
# T = 5, L = 16, B = 256: main against split (the a3 build with its
# defaults; GDN's half-tile prefetch is off there), two rounds.
#   run: bash experiments/2026-12-07_t58/t58-call8.sh
set -u
cd "$(dirname "$0")/../.."
d=$(mktemp -d); xz -dc gpubin-x/t57.tar.xz | tar -C $d -x
A="--backend cuda --target-ms 2 --modes replay --family gdn --preset qwen35-122b --L 16 --state fp32 --batch 256 --T 5"
for r in 1 2; do for v in main split; do
  bin=$d/a3/replayssm; [[ $v == main ]] && bin=$d/main/replayssm
  timeout 20 $bin bench $A --out $OUT/r${r}_$v.jsonl 2>&1 | grep " replay" | sed "s/^/$v r$r /"
done; done
