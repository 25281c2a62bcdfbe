#!/bin/bash
# t57, device call 1, the short form of t56-call1 for little device time
# (carry gpubin-x/t57.tar.xz: `main` = main's build at c97a465's code,
# `a3` = branch t56-kda3 at 8861ec0). First A3's byte-for-byte tests and
# the REC16 ones beside them (the a3 build), then KDA fp32 T = 5, L = 16,
# B = 64 / 256 / 512 rows of main, split (the branch, A3 off), a3 and a3r0
# (A3 without REC16), builds alternating, ROUNDS rounds (default 2), and
# T = 8 B = 256 of main / split / a3 in round 1. ~200 s.
# Rows: r<round>_<variant>_<part>.jsonl, `commit` set per build.
#   run: bash experiments/2026-12-07_t57/t57-call1.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
d=$(mktemp -d)
xz -dc gpubin-x/t57.tar.xz | tar -C "$d" -x
X=$d/a3
timeout 150 "$X/replayssm_gpu_tests" --gtest_brief=1 \
  --gtest_filter='DeltaGpu.SpecThreeBlocks*:DeltaGpu.SpecRecordsByCopies*' > "$OUT/tests.txt" 2>&1
echo "tests rc=$?"
tail -n 6 "$OUT/tests.txt"
KA="--backend cuda --target-ms 2 --modes replay --family kda --preset kimi --L 16 --state fp32"
for r in ${ROUNDS:-1 2}; do
  for b in ${VARIANTS:-main split a3 a3r0}; do
    bin=$X/replayssm
    export REPLAYSSM_COMMIT=8861ec0
    [[ $b == main ]] && bin=$d/main/replayssm && REPLAYSSM_COMMIT=c97a465
    unset REPLAYSSM_SPEC_REC16 REPLAYSSM_SPEC_A3
    case $b in
      a3) export REPLAYSSM_SPEC_A3=1 ;;
      a3r0) export REPLAYSSM_SPEC_A3=1 REPLAYSSM_SPEC_REC16=0 ;;
    esac
    timeout 60 $bin bench $KA --T 5 --batch 64,256,512 --out $OUT/r${r}_${b}_a.jsonl 2>&1 | grep " replay" | sed "s/^/$b r$r /"
    [[ $r == 1 && $b != a3r0 ]] &&
      timeout 40 $bin bench $KA --T 8 --batch 256 --out $OUT/r${r}_${b}_d.jsonl 2>&1 | grep " replay" | sed "s/^/$b r$r /"
  done
done
unset REPLAYSSM_SPEC_REC16 REPLAYSSM_SPEC_A3
