#!/bin/bash
# t63, device call 3 (~200 s, H200 only; carry gpubin-x/t62b.tar.xz): the
# rows nearest their targets by their runtime knobs on `ftc2`'s binary,
# default column first, two rounds alternating: GDN HV64 fp32 with bf16 d
# (<= 300 us) by T = 1 tile blocks per SM and the persistent step; Mamba-2
# H128 fp32 (<= 310 us) by the record prefetch distance and the tile's
# blocks per SM; KDA fp32 (<= 180 us) by the persistent step's stages and
# items per claim, and the blocks instead.
# Files: log.txt, knobs_gdn.jsonl, knobs_m2.jsonl, knobs_kda.jsonl.
#   run: bash experiments/2026-12-07_t63/t63-call3.sh
set -u
cd "$(dirname "$0")/../.."
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "$card" | tee "$OUT/log.txt"
[[ $card == *H200* ]] || { echo "not an H200: nothing run" | tee -a "$OUT/log.txt"; exit 0; }
d=$(mktemp -d)
knobs() {  # name, envs, bench args
  BENCH_ARGS="$3" PACK=gpubin-x/t62b.tar.xz ONLY=ftc2 ENVS="$2" REPS=2 OUT=$d/$1 BENCH_TIMEOUT_S=60 \
    timeout 170 bash scripts/gpu_compare.sh > /dev/null 2>&1
  echo "$1 rc=$?" | tee -a "$OUT/log.txt"
  sed -n '/^µs per step/,$p' "$d/$1/log.txt" | tee -a "$OUT/log.txt"
  cp "$d/$1/compare.jsonl" "$OUT/knobs_$1.jsonl"
}
knobs gdn ";b2:REPLAYSSM_R1_TILE_BPS=2;b8:REPLAYSSM_R1_TILE_BPS=8;p1:REPLAYSSM_R1P=1" \
  "--family gdn --preset qwen35-122b --batch 256 --L 16 --state fp32 --d-dtype bf16 --modes replay --target-ms 2"
knobs m2 ";pf0:REPLAYSSM_M2_PF=0;pf66:REPLAYSSM_M2_PF=66;pf264:REPLAYSSM_M2_PF=264;bps2:REPLAYSSM_M2_R1_BPS=2" \
  "--family mamba2 --preset nemotron3 --batch 256 --L 16 --state fp32 --modes replay --target-ms 2"
knobs kda ";blk:REPLAYSSM_R1P=0;n2:REPLAYSSM_R1P_NST=2;n4:REPLAYSSM_R1P_NST=4,REPLAYSSM_R1P_NB=6;c2:REPLAYSSM_R1P_CHUNK=2" \
  "--family kda --preset kimi --batch 256 --L 16 --state fp32 --modes replay --target-ms 2"
