#!/bin/bash
# t59, device call 1 (~450 s; carry gpubin-x/t59.tar.xz = main's build at
# ae4f02f, CLI and GPU tests). The landed binary with its defaults (A3 from
# T = 8, the half-tile prefetch off) has not run on a GPU. First the whole
# GPU suite in 8 shards (JSON merged), then every issue 3-5 target row at
# B = 256, L = 16, one round: T = 1 fp32 / bf16 baseline and replay, dual
# fp8 / nvfp4, T = 5 fp32, KDA T = 8 fp32. The card's name is the first
# line. Files: tests.json, rows.jsonl (every row), log.txt. As run, three
# shards passed the 200 s limit on an H100 (t59-call2 reran them): set
# TEST_LIMIT=420 there.
#   run: bash experiments/2026-12-07_t59/t59-call1.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tee "$OUT/log.txt"
d=$(mktemp -d)
xz -dc "${PACK:-gpubin-x/t59.tar.xz}" | tar -C "$d" -x
b=$(head -1 "$d/BUILDS")
M=$d/$b/replayssm
JSON=$OUT/tests.json LOG=$OUT/log.txt bash scripts/gpu_shard_tests.sh "$d/$b/replayssm_gpu_tests" '*' "$d/tests" 8 ${TEST_LIMIT:-200} 2>&1 \
  | tee -a "$OUT/log.txt" | tail -n 20
A="--backend cuda --L 16 --target-ms 2 --batch 256"
run() {  # part, timeout, bench args...
  local p=$1 t=$2; shift 2
  timeout "$t" $M bench $A --out "$d/$p.jsonl" "$@" 2>&1 | grep -E " replay| baseline|dual/|copy" | sed "s/^/$p /" | tee -a "$OUT/log.txt"
}
run t1 100 --family gdn,kda,mamba2 --preset qwen35-122b,kimi,nemotron3 --state fp32,bf16 --modes baseline,replay
run t1bd 40 --family gdn --preset qwen35-122b --state fp32 --d-dtype bf16 --modes replay
run dual 90 --family gdn,kda,mamba2 --preset qwen35-122b,kimi,nemotron3 --state fp32 --modes dual --read fp8,nvfp4
run t5 100 --family gdn,kda,mamba2 --preset qwen35-122b,kimi,nemotron3 --T 5 --state fp32 --modes replay
run t8 40 --family kda --preset kimi --T 8 --state fp32 --modes replay
cat "$d"/t1.jsonl "$d"/t1bd.jsonl "$d"/dual.jsonl "$d"/t5.jsonl "$d"/t8.jsonl > "$OUT/rows.jsonl" 2>/dev/null
