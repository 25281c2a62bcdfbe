#!/bin/bash
# t58, device call 2 (~150 s on an H200; carry gpubin-x/t57.tar.xz, whose
# `main` is main's build at c97a465's code, SASS-identical to main's
# kernels since). The two issue 3 rows nearest their targets, with the
# launch switches that move them, in one binary, rounds alternating:
#   - Mamba-2 H128 fp32 T = 1 (≤ 310 µs; t47: 314.7–315.1): the default
#     (block-ahead record prefetch at SMs blocks), REPLAYSSM_M2_PF=0 / half
#     / twice the SMs;
#   - GDN HV64 fp32 with bf16 d records (≤ 300 µs; t47: 307.4–308.3): the
#     default (replay1.cuh's blocks, four per SM), REPLAYSSM_R1_TILE_BPS=2 /
#     3 / 6, and REPLAYSSM_R1P=2 (the persistent step where it fits).
# Then main's t53 target rows, one round. B = 256, L = 16. The card's name
# is the first line. Rows: one file per row and variant,
# sw_<row>_<variant>_r<round>.jsonl, and t53_<part>.jsonl. Both cards have
# 132 SMs (the prefetch distances below).
#   run: bash experiments/2026-12-07_t58/t58-call2.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
SM=132
d=$(mktemp -d)
xz -dc "${PACK:-gpubin-x/t57.tar.xz}" | tar -C "$d" -x
M=$d/main/replayssm
A="--backend cuda --L 16 --target-ms 2 --batch 256"
m2() {  # variant, env
  local v=$1; shift
  env "$@" timeout 40 $M bench $A --family mamba2 --preset nemotron3 --state fp32 --modes replay \
    --out $OUT/sw_m2_${v}_r$r.jsonl 2>&1 | grep " replay" | sed "s/^/m2 $v r$r /"
}
gd() {
  local v=$1; shift
  env "$@" timeout 40 $M bench $A --family gdn --preset qwen35-122b --state fp32 --d-dtype bf16 --modes replay \
    --out $OUT/sw_gdnbd_${v}_r$r.jsonl 2>&1 | grep " replay" | sed "s/^/gdn-bf16d $v r$r /"
}
for r in 1 2; do
  m2 def X=0; m2 pf0 REPLAYSSM_M2_PF=0; m2 pfh REPLAYSSM_M2_PF=$((SM / 2)); m2 pf2 REPLAYSSM_M2_PF=$((2 * SM))
  gd def X=0; gd bps2 REPLAYSSM_R1_TILE_BPS=2; gd bps3 REPLAYSSM_R1_TILE_BPS=3; gd bps6 REPLAYSSM_R1_TILE_BPS=6
  gd r1p REPLAYSSM_R1P=2
done
timeout 100 $M bench $A --out $OUT/t53_t1.jsonl --family gdn,kda,mamba2 --preset qwen35-122b,kimi,nemotron3 \
  --state fp32,bf16 --modes baseline,replay 2>&1 | grep -E " replay| baseline|copy" | sed 's/^/T1 /'
timeout 90 $M bench $A --out $OUT/t53_dual.jsonl --family gdn,kda,mamba2 --preset qwen35-122b,kimi,nemotron3 \
  --state fp32 --modes dual --read fp8,nvfp4 2>&1 | grep "dual/" | sed 's/^/dual /'
timeout 100 $M bench $A --out $OUT/t53_t5.jsonl --family gdn,kda,mamba2 --preset qwen35-122b,kimi,nemotron3 \
  --T 5 --state fp32 --modes replay 2>&1 | grep " replay" | sed 's/^/T5 /'
