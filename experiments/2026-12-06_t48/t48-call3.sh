#!/bin/bash
# t48, device call 3 (about 200 s on any H100 / H200; carry
# gpubin-x/t47k.tar.xz, build `k3`, whose kernels are main's): the dual
# fold's value heads per block (REPLAYSSM_FOLD_HPB; default
# heuristics.h dual_fold_heads_per_block: GDN HV64 B = 256 two, KDA one)
# at 1 / 2 / 4 against the default, GDN HV64 and KDA dual fp8 / nvfp4,
# fp32 checkpoints, B = 64 / 256 / 512, L = 16, two rounds.
#   run: bash experiments/2026-12-06_t48/t48-call3.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader
ENVS="def:X=0;h1:REPLAYSSM_FOLD_HPB=1;h2:REPLAYSSM_FOLD_HPB=2;h4:REPLAYSSM_FOLD_HPB=4" BENCH_ARGS="\
--family gdn,kda --preset qwen35-122b,kimi --batch 64,256,512 --L 16 --state fp32 --modes dual --read fp8,nvfp4 --target-ms 2" \
  PACK=gpubin-x/t47k.tar.xz REPS=2 OUT=$OUT/hpb timeout 400 bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "compare rc=$?"
sed -n '/^µs per step/,$p' "$OUT/hpb/log.txt"
(cd "$OUT" && tar czf hpb.tgz hpb && rm -rf hpb)
