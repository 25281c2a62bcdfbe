#!/bin/bash
# t61, device call 3 (~250 s; carry gpubin-x/t61.tar.xz, 3f676ce's build).
# On an H200: every issue 3-5 target row at B = 256, L = 16 (call 1's part
# 3) and the issue 3 baseline rows at B = 64 (fp32: GDN HV32 / HV64, KDA,
# Mamba-2 H64 / H96-P80 / H128), one round. On any other card: KDA dual fp8 /
# nvfp4 at B = 198 / 256 / 512, the rule against the fold forced to 1 head
# per block, two rounds alternating (call 1's compare lacked the default).
# Files: log.txt, rows.jsonl (H200) or compare.jsonl.
#   run: bash experiments/2026-12-07_t61/t61-call3.sh
set -u
cd "$(dirname "$0")/../.."
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "$card" | tee "$OUT/log.txt"
d=$(mktemp -d)
xz -dc gpubin-x/t61.tar.xz | tar -C "$d" -x
M=$d/hpb/replayssm
if [[ $card == *H200* ]]; then
  A="--backend cuda --L 16 --target-ms 2"
  run() {  # part, timeout, bench args...
    local p=$1 t=$2; shift 2
    timeout "$t" $M bench $A --out "$d/$p.jsonl" "$@" 2>&1 | grep -E " replay| baseline|dual/|copy" | sed "s/^/$p /" | tee -a "$OUT/log.txt"
  }
  run t1 100 --batch 256 --family gdn,kda,mamba2 --preset qwen35-122b,kimi,nemotron3 --state fp32,bf16 --modes baseline,replay
  run t1bd 40 --batch 256 --family gdn --preset qwen35-122b --state fp32 --d-dtype bf16 --modes replay
  run dual 90 --batch 256 --family gdn,kda,mamba2 --preset qwen35-122b,kimi,nemotron3 --state fp32 --modes dual --read fp8,nvfp4
  run t5 100 --batch 256 --family gdn,kda,mamba2 --preset qwen35-122b,kimi,nemotron3 --T 5 --state fp32 --modes replay
  run b64 60 --batch 64 --family gdn,kda,mamba2 --preset qwen35,qwen35-122b,kimi,nemotron3,nemotron3-h64,nemotron3-nano --state fp32 --modes baseline
  cat "$d"/t1.jsonl "$d"/t1bd.jsonl "$d"/dual.jsonl "$d"/t5.jsonl "$d"/b64.jsonl > "$OUT/rows.jsonl" 2>/dev/null
else
  BENCH_ARGS="--family kda --preset kimi --batch 198,256,512 --L 16 --state fp32 --modes dual --read fp8,nvfp4 --target-ms 2" \
    PACK=gpubin-x/t61.tar.xz ENVS=";h1:REPLAYSSM_FOLD_HPB=1" REPS=2 OUT=$d/cmp BENCH_TIMEOUT_S=60 timeout 200 bash scripts/gpu_compare.sh > /dev/null 2>&1
  echo "compare rc=$?" | tee -a "$OUT/log.txt"
  sed -n '/^µs per step/,$p' "$d/cmp/log.txt" | tee -a "$OUT/log.txt"
  cp "$d/cmp/compare.jsonl" "$OUT/compare.jsonl"
fi
