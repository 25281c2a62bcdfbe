#!/bin/bash
# t50, device call 8 (about 60 s; carry gpubin-x/t50m.tar.xz: `main` =
# d05adf4): the rule's other GDN shapes on this device class, two rounds
# alternating: the default (REPLAYSSM_R1P=-1: the blocks below the H200's
# class) against the persistent step wherever it fits (REPLAYSSM_R1P=2),
# GDN HV32 / HV48 bf16 at B = 256 / 512 and HV32's dual bf16 copy at B = 256.
#   run: bash experiments/2026-12-06_t50/t50-call8.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader
BENCH_ARGS="\
--family gdn --preset qwen35,qwen35-hv48 --batch 256,512 --L 16 --state bf16 --modes replay --target-ms 2;\
--family gdn --preset qwen35 --batch 256 --L 16 --state fp32 --modes dual --read bf16 --target-ms 2" \
  ENVS="def:REPLAYSSM_R1P=-1;p2:REPLAYSSM_R1P=2" BENCH_TIMEOUT_S=100 PACK=gpubin-x/t50m.tar.xz REPS=2 \
  OUT=$OUT/cmp timeout 300 bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "compare rc=$?"
sed -n '/^µs per step/,$p' "$OUT/cmp/log.txt"
(cd "$OUT" && tar czf res.tgz cmp && rm -rf cmp)
