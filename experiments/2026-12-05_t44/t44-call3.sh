#!/bin/bash
# t44, device call 3 (at most ~560 s; carry gpubin-x/t44c.tar.xz: `main` =
# 9a6a67c, `diet` = 7c7fb53 (the T > 1 kernel's instruction cuts), `tc` =
# diet plus the GDN fp8 copy's sweeps on tensor cores in the persistent T = 1
# stream (replay1p.cuh R1P_TC, V = 128; replay1.cuh's phase 4 as shared
# helpers, the same instructions)): tc's dual / persistent / arena GPU tests
# and the sanitizers on DualDeltaGpu.BulkCopySmall; then, alternating in one
# run, two rounds, L = 16: the dual rows (diet vs tc), the T = 5 rows (main
# vs diet) and, on tc alone, the T = 1 target rows of issue 3 (on an H200:
# the target table's figures; skipped on other GPUs).
#   run: bash experiments/2026-12-05_t44/t44-call3.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name,memory.total,clocks.max.memory --format=csv,noheader
GTEST_FILTER='*Dual*:*Persistent*:SharedDelta*:DeltaGpuArena*' PACK=gpubin-x/t44c.tar.xz PACK_LABEL=tc \
  SKIP_CPU_TESTS=1 TEST_SHARDS=16 DEADLINE_S=${T_SUITE:-140} SANITIZE_FILTER='DualDeltaGpu.BulkCopySmall' \
  SANITIZE_TIMEOUT_S=40 OUT=$OUT/suite bash scripts/gpu_check.sh test sanitize > /dev/null 2>&1
grep -E "^(test|sanitize) " "$OUT/suite/log.txt" | tail -2
grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/suite/sanitize.txt" | head -4
cmp() {  # name, seconds, ONLY, BENCH_ARGS
  ONLY="$3" BENCH_ARGS="$4" PACK=gpubin-x/t44c.tar.xz REPS=2 OUT=$OUT/$1 timeout "$2" bash scripts/gpu_compare.sh > /dev/null 2>&1
  echo "== $1 rc $?"
  sed -n '/^µs per step/,$p' "$OUT/$1/log.txt"
}
cmp dual 140 "diet tc" "--family gdn,mamba2,kda --preset qwen35-122b,nemotron3,kimi --batch 256 --L 16 --state fp32 --modes dual --read fp8,nvfp4 --target-ms 2;\
--family gdn --preset qwen35-122b --batch 64,512 --L 16 --state fp32 --modes dual --read fp8 --target-ms 2"
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && cmp spec 70 "main diet" "--family gdn,kda --preset qwen35-122b,kimi --batch 256 --T 5 --L 16 --state fp32 --modes replay --target-ms 2"
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && cmp t1 90 "tc" "--family gdn,mamba2,kda --preset qwen35-122b,nemotron3,kimi --batch 256 --L 16 --state fp32,bf16 --modes replay --target-ms 2;\
--family gdn --preset qwen35-122b --batch 256 --L 16 --state fp32 --d-dtype bf16 --modes replay --target-ms 2;\
--family mamba2 --preset nemotron3 --batch 256 --T 5 --L 16 --state fp32 --modes replay --target-ms 2"
