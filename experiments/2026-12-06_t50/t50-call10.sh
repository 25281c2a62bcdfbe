#!/bin/bash
# t50, device call 10 (about 40 s; carry gpubin-x/t50n.tar.xz: `main` =
# 97f7f41): the rule's f16 rows and GDN HV32 at B = 128 on this device
# class, two rounds alternating: the default against the persistent step
# wherever it fits (REPLAYSSM_R1P=2), L = 16.
#   run: bash experiments/2026-12-06_t50/t50-call10.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader
BENCH_ARGS="\
--family gdn,kda --preset qwen35-122b,kimi --batch 256 --L 16 --state fp16 --modes replay --target-ms 2;\
--family gdn --preset qwen35 --batch 128 --L 16 --state bf16 --modes replay --target-ms 2" \
  ENVS="def:REPLAYSSM_R1P=-1;p2:REPLAYSSM_R1P=2" BENCH_TIMEOUT_S=100 PACK=gpubin-x/t50n.tar.xz REPS=2 \
  OUT=$OUT/cmp timeout 200 bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "compare rc=$?"
sed -n '/^µs per step/,$p' "$OUT/cmp/log.txt"
(cd "$OUT" && tar czf res.tgz cmp && rm -rf cmp)
