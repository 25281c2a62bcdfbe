#!/bin/bash
# t58, device call 4 (~100 s on any H100 / H200; carry gpubin-x/t57.tar.xz):
# after t58-call1 (A3 +3.8 % at T = 5, −3.5 % at T = 8; A3 without the
# block-ahead record prefetch even with main at T = 5), KDA fp32 L = 16
# B = 256 at T = 5 (round 1) and T = 8 (two rounds) for main, mainpf0
# (main's build with REPLAYSSM_SPEC_REC_PF=0: does the prefetch cost main
# too?), a3pf0 and a3. Rows: rows.jsonl (one file: the tool returns at most
# eight), each with `variant`.
#   run: bash experiments/2026-12-07_t58/t58-call4.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
d=$(mktemp -d)
xz -dc "${PACK:-gpubin-x/t57.tar.xz}" | tar -C "$d" -x
A="--backend cuda --target-ms 2 --modes replay --family kda --preset kimi --L 16 --state fp32 --batch 256"
for r in 1 2; do
  for v in main mainpf0 a3pf0 a3; do
    unset REPLAYSSM_SPEC_A3 REPLAYSSM_SPEC_REC_PF
    bin=$d/a3/replayssm
    case $v in
      main) bin=$d/main/replayssm ;;
      mainpf0) bin=$d/main/replayssm; export REPLAYSSM_SPEC_REC_PF=0 ;;
      a3) export REPLAYSSM_SPEC_A3=1 ;;
      a3pf0) export REPLAYSSM_SPEC_A3=1 REPLAYSSM_SPEC_REC_PF=0 ;;
    esac
    for T in 5 8; do
      [[ $r == 2 && $T == 5 ]] && continue
      f=$OUT/r${r}_${v}_T$T.jsonl
      timeout 40 $bin bench $A --T $T --out $f 2>&1 | grep " replay" | sed "s/^/$v r$r /"
      sed -i "s/}\$/, \"variant\": \"$v\", \"round\": $r}/" $f
    done
  done
done
cat $OUT/r*_T*.jsonl > $OUT/rows.jsonl && rm -f $OUT/r*_T*.jsonl
