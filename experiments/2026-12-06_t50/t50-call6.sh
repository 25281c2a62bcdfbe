#!/bin/bash
# t50, device call 6 (about 200 s; carry gpubin-x/t50d.tar.xz): main's
# kernels (`k3`), the persistent step where the default takes it
# (REPLAYSSM_R1P=-1) against replay1.cuh's blocks (REPLAYSSM_R1P=0), two
# rounds, at B = 128 / 256 / 512, L = 16: GDN HV64 and KDA 32×128, bf16 and
# fp32 states, dual fp32 checkpoints with fp8 / nvfp4 / bf16 copies.
#   run: bash experiments/2026-12-06_t50/t50-call6.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader
BENCH_ARGS="\
--family gdn,kda --preset qwen35-122b,kimi --batch 128,256,512 --L 16 --state bf16,fp32 --modes replay --target-ms 2;\
--family gdn,kda --preset qwen35-122b,kimi --batch 128,256,512 --L 16 --state fp32 --modes dual --read fp8,nvfp4,bf16 --target-ms 2" \
  ENVS="r1p:REPLAYSSM_R1P=-1;blk:REPLAYSSM_R1P=0" ONLY=k3 BENCH_TIMEOUT_S=100 PACK=gpubin-x/t50d.tar.xz REPS=2 \
  OUT=$OUT/cmp timeout 400 bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "compare rc=$?"
sed -n '/^µs per step/,$p' "$OUT/cmp/log.txt"
(cd "$OUT" && tar czf res.tgz cmp && rm -rf cmp)
