#!/bin/bash
# t58, device call 6 (~20 s; carry gpubin-x/t57.tar.xz): KDA fp32 L = 16,
# B = 64 / 128, T = 5 and 8, main against a3pf0, one round.
#   run: bash experiments/2026-12-07_t58/t58-call6.sh
set -u
cd "$(dirname "$0")/../.."
d=$(mktemp -d); xz -dc gpubin-x/t57.tar.xz | tar -C $d -x
A="--backend cuda --target-ms 2 --modes replay --family kda --preset kimi --L 16 --state fp32 --batch 64,128"
for v in main a3pf0; do
  bin=$d/a3/replayssm; unset REPLAYSSM_SPEC_A3 REPLAYSSM_SPEC_REC_PF
  [[ $v == main ]] && bin=$d/main/replayssm || export REPLAYSSM_SPEC_A3=1 REPLAYSSM_SPEC_REC_PF=0
  for T in 5 8; do timeout 30 $bin bench $A --T $T --out $OUT/${v}_T$T.jsonl 2>&1 | grep " replay" | sed "s/^/$v /"; done
done
