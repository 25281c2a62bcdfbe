#!/bin/bash
# t44, device call 2 (about 420 s; carry gpubin-x/t44b.tar.xz: `main` =
# 9a6a67c, `diet` = main plus the T > 1 tensor-core kernel's instruction
# cuts: the window tokens' q / k and the old records' keys / d loaded with
# one dtype branch per row (warp_prep_qk128, raw_row128), the solve's
# rounding without a divergent switch, d / o stores with one dtype branch,
# KDA's −e^{A_log} once per channel; bit-identical by construction):
# diet's whole GPU suite and the sanitizers on DeltaGpu.SpecMmaSmall, then
# both builds alternating on the T = 5 / 8 rows.
#   run: bash experiments/2026-12-05_t44/t44-call2.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name,memory.total,clocks.max.memory --format=csv,noheader
PACK=gpubin-x/t44b.tar.xz PACK_LABEL=diet SKIP_CPU_TESTS=1 TEST_SHARDS=16 DEADLINE_S=${T_SUITE:-250} \
  SANITIZE_FILTER='DeltaGpu.SpecMmaSmall' OUT=$OUT/suite bash scripts/gpu_check.sh test sanitize > /dev/null 2>&1
grep -E "^(test|sanitize) " "$OUT/suite/log.txt" | tail -2
grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/suite/sanitize.txt" | head -4
BENCH_ARGS="--family gdn,kda --preset qwen35-122b,kimi --batch 64,256 --T 5 --L 16 --state fp32,bf16 --modes replay --target-ms 2;\
--family gdn,kda --preset qwen35-122b,kimi --batch 256 --T 8 --L 16 --state fp32 --modes replay --target-ms 2" \
  PACK=gpubin-x/t44b.tar.xz REPS=2 OUT=$OUT/cmp timeout ${T_CMP:-200} bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "cmp rc $?"
sed -n '/^µs per step/,$p' "$OUT/cmp/log.txt"
