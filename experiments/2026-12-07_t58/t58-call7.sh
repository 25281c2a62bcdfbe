#!/bin/bash
# t58, device call 7 (~30 s; carry gpubin-x/t57.tar.xz): KDA fp32 T = 5,
# L = 16, B = 256: main, splithpf0 (the a3 build, A3 off, the half-tile L2
# prefetch off: REPLAYSSM_SPEC_HALF_PF=0) and split, two rounds.
#   run: bash experiments/2026-12-07_t58/t58-call7.sh
set -u
cd "$(dirname "$0")/../.."
d=$(mktemp -d); xz -dc gpubin-x/t57.tar.xz | tar -C $d -x
A="--backend cuda --target-ms 2 --modes replay --family kda --preset kimi --L 16 --state fp32 --batch 256 --T 5"
for r in 1 2; do for v in main splithpf0 split; do
  bin=$d/a3/replayssm; unset REPLAYSSM_SPEC_HALF_PF
  [[ $v == main ]] && bin=$d/main/replayssm; [[ $v == splithpf0 ]] && export REPLAYSSM_SPEC_HALF_PF=0
  timeout 20 $bin bench $A --out $OUT/r${r}_$v.jsonl 2>&1 | grep " replay" | sed "s/^/$v r$r /"
done; done
