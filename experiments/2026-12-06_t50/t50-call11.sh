#!/bin/bash
# t50, device call 11 (about 30 s; carry gpubin-x/t50n.tar.xz: `main` =
# 97f7f41): GDN HV32 (G = 2) bf16 / f16 below its threshold (B >= 231) on
# this device class, two rounds alternating: the default (the blocks there)
# against the persistent step (REPLAYSSM_R1P=2), B = 32 / 64 / 96 / 160,
# L = 16.
#   run: bash experiments/2026-12-06_t50/t50-call11.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader
BENCH_ARGS="--family gdn --preset qwen35 --batch 32,64,96,160 --L 16 --state bf16,fp16 --modes replay --target-ms 2" \
  ENVS="def:REPLAYSSM_R1P=-1;p2:REPLAYSSM_R1P=2" BENCH_TIMEOUT_S=100 PACK=gpubin-x/t50n.tar.xz REPS=2 \
  OUT=$OUT/cmp timeout 200 bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "compare rc=$?"
sed -n '/^µs per step/,$p' "$OUT/cmp/log.txt"
(cd "$OUT" && tar czf res.tgz cmp && rm -rf cmp)
