#!/bin/bash
# t49, device call 2 (about 120 s; carry gpubin-x/t49b.tar.xz: `ps2` =
# t48-prep-split b464663, whose tail is the 80-register preparation; `s1` =
# t49-split 09bba5f, whose tail is capped per family, 72 registers for KDA).
# KDA bf16: the two tails at 80 %; KDA fp32 and GDN bf16 (s1 only: ps2 keeps
# one preparation there) at 80 / 90 % against one preparation, two rounds.
#   run: bash experiments/2026-12-06_t49/t49-call2.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader
ENVS="p100:X=0;s80:REPLAYSSM_P1_SPLIT=80;s90:REPLAYSSM_P1_SPLIT=90" BENCH_ARGS="\
--family kda --preset kimi --batch 256,512 --L 16 --state bf16,fp32 --modes replay --target-ms 2;\
--family gdn --preset qwen35-122b --batch 256,512 --L 16 --state bf16 --modes replay --target-ms 2" \
  BENCH_TIMEOUT_S=90 PACK=gpubin-x/t49b.tar.xz REPS=2 OUT=$OUT/cmp timeout 400 bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "compare rc=$?"
sed -n '/^µs per step/,$p' "$OUT/cmp/log.txt"
(cd "$OUT" && tar czf res.tgz cmp && rm -rf cmp)
