#!/bin/bash
# t44, device call 5 (H200 only; about 250 s; carry gpubin-x/t44e.tar.xz:
# CLIs of `main` = 9a6a67c and `tc` = b395a18, whose kernels are main's at
# the session's end): the target rows of issues 3-5 on the H200, two rounds,
# L = 16, B = 256: T = 1 (tc alone: its T = 1 plain kernels are main's),
# T = 5 fp32 and the dual rows (main and tc alternating).
#   run: bash experiments/2026-12-05_t44/t44-call5.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name,memory.total,clocks.max.memory --format=csv,noheader
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: nothing run"; exit 0; }
cmp() {  # name, seconds, ONLY, BENCH_ARGS
  ONLY="$3" BENCH_ARGS="$4" PACK=gpubin-x/t44e.tar.xz REPS=2 OUT=$OUT/$1 timeout "$2" bash scripts/gpu_compare.sh > /dev/null 2>&1
  echo "== $1 rc $?"
  sed -n '/^µs per step/,$p' "$OUT/$1/log.txt"
}
cmp t1 80 "tc" "--family gdn,mamba2,kda --preset qwen35-122b,nemotron3,kimi --batch 256 --L 16 --state fp32,bf16 --modes replay --target-ms 2;\
--family gdn --preset qwen35-122b --batch 256 --L 16 --state fp32 --d-dtype bf16 --modes replay --target-ms 2"
cmp spec 80 "main tc" "--family gdn,kda,mamba2 --preset qwen35-122b,kimi,nemotron3 --batch 256 --T 5 --L 16 --state fp32 --modes replay --target-ms 2"
cmp dual 100 "main tc" "--family gdn,mamba2,kda --preset qwen35-122b,nemotron3,kimi --batch 256 --L 16 --state fp32 --modes dual --read fp8,nvfp4 --target-ms 2"
