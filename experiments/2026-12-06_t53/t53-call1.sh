#!/bin/bash
# t53, device call 1 (carry gpubin-x/t53m.tar.xz; `main` = main's build at
# 7d4e3ac, built here). First the GPU tests no device has run on main's
# pack kernel (ae8be38, the second reading of t52: DualMamba2Gpu.* and
# Mamba2Gpu.Replay*), then the issue 3-5 target rows at B = 256, L = 16 with
# their baselines in the same run, two rounds. On any card; the card's
# name is the first line. SKIP_TESTS=1: the rows only (t53-call3).
# PACK=gpubin-x/OTHER.tar.xz: the `main` build of another pack (t55: t55s,
# main's build at b6b96ac's code).
#   run: bash experiments/2026-12-06_t53/t53-call1.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
d=$(mktemp -d)
xz -dc "${PACK:-gpubin-x/t53m.tar.xz}" | tar -C "$d" -x
M=$d/main
[[ ${SKIP_TESTS:-0} == 1 ]] || timeout 240 "$M/replayssm_gpu_tests" --gtest_brief=1 --gtest_filter='DualMamba2Gpu.*:Mamba2Gpu.Replay*' 2>&1 | tail -n 5
A="--backend cuda --L 16 --target-ms 2"
for r in 1 2; do
  echo "== round $r"
  timeout 100 $M/replayssm bench $A --out $OUT/r${r}_t1.jsonl --family gdn,kda,mamba2 --preset qwen35-122b,kimi,nemotron3 --batch 256 --state fp32,bf16 --modes baseline,replay 2>&1 | grep -E " replay| baseline|copy" | sed 's/^/T1 /'
  timeout 60 $M/replayssm bench $A --out $OUT/r${r}_bf16d.jsonl --family gdn --preset qwen35-122b --batch 256 --state fp32 --d-dtype bf16 --modes replay 2>&1 | grep " replay" | sed 's/^/bf16d /'
  timeout 90 $M/replayssm bench $A --out $OUT/r${r}_dual.jsonl --family gdn,kda,mamba2 --preset qwen35-122b,kimi,nemotron3 --batch 256 --state fp32 --modes dual --read fp8,nvfp4 2>&1 | grep "dual/" | sed 's/^/dual /'
  timeout 100 $M/replayssm bench $A --out $OUT/r${r}_t5.jsonl --family gdn,kda,mamba2 --preset qwen35-122b,kimi,nemotron3 --batch 256 --T 5 --state fp32 --modes replay 2>&1 | grep " replay" | sed 's/^/T5 /'
done
(cd "$OUT" && cat *.jsonl > rows.txt && rm -f *.jsonl && mv rows.txt rows.jsonl)
