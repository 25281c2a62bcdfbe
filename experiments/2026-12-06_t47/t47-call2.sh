#!/bin/bash
# t47, device call 2 (not run: the session's device time ran out; about
# 200 s on an H200; carry gpubin-x/t47m.tar.xz = dae621d's build, CLI and
# GPU tests): whether the persistent T = 1 step should take three stages and
# four result buffers on the H200 too. t47-call1 measured it at B = 256
# (KDA bf16 196.9-197.2 -> 192.0-192.3 µs, KDA dual fp8 235.0-235.3 ->
# 231.3, KDA fp32 218.7 -> 217.6-217.7, GDN rows within 0.3 %; nvfp4 copies
# even or 0.3 % slower). This call runs the persistent and bulk-copy GPU
# tests at those counts (no GPU correctness run at them yet) and measures
# B = 128 / 512 against the default, two rounds.
#   run: bash experiments/2026-12-06_t47/t47-call2.sh
set -u
cd "$(dirname "$0")/../.."
d=$(mktemp -d)
xz -dc gpubin-x/t47m.tar.xz | tar -C "$d" -x
REPLAYSSM_R1P_NST=3 REPLAYSSM_R1P_NB=4 timeout 150 "$d/dae621d/replayssm_gpu_tests" \
  --gtest_filter='*Persistent*:*Dual*Bulk*' --gtest_brief=1 > "$OUT/tests_n3b4.txt" 2>&1 &
ENVS="def:X=0;n3b4:REPLAYSSM_R1P_NST=3,REPLAYSSM_R1P_NB=4" BENCH_ARGS="\
--family gdn,kda --preset qwen35-122b,kimi --batch 128,512 --L 16 --state bf16 --modes replay --target-ms 2;\
--family gdn,kda --preset qwen35-122b,kimi --batch 128,512 --L 16 --state fp32 --modes dual --read fp8 --target-ms 2;\
--family kda --preset kimi --batch 128,512 --L 16 --state fp32 --modes replay --target-ms 2" \
  PACK=gpubin-x/t47m.tar.xz REPS=2 OUT=$OUT/n3b4 timeout 200 bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "compare rc=$?"
wait
echo "tests:"; tail -n 3 "$OUT/tests_n3b4.txt"
sed -n '/^µs per step/,$p' "$OUT/n3b4/log.txt"
