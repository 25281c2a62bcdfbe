#!/bin/bash
# t44, device call 4 (about 330 s; carry gpubin-x/t44d.tar.xz: `tc` =
# b395a18 (CLI only), `tcb` = tc plus a GDN bf16 state's (and bf16 copy's)
# sweeps on tensor cores in the persistent T = 1 stream, items that do not
# flush, V = 128 (replay1p.cuh R1P_TCB)): tcb's persistent / bf16 / dual /
# arena GPU tests and the sanitizers on DeltaGpu.PersistentStep, then both
# builds alternating, two rounds, L = 16: GDN HV64 bf16 at B = 128 / 256 / 512
# (the persistent step), B = 64 (blocks: unchanged), the dual bf16 copy at
# B = 256, KDA bf16 (unchanged code) as a control.
#   run: bash experiments/2026-12-05_t44/t44-call4.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name,memory.total,clocks.max.memory --format=csv,noheader
GTEST_FILTER='DeltaGpu.Persistent*:DeltaGpu.Bf16StateReadsMatchCpuBeforeAFlush:*DualDeltaGpuPersistentStep*:DeltaGpuArena.*:DeltaGpu.ProductionTiles:DeltaGpu.GraphReplay*:DeltaGpu.LongRun' \
  PACK=gpubin-x/t44d.tar.xz PACK_LABEL=tcb SKIP_CPU_TESTS=1 TEST_SHARDS=16 DEADLINE_S=${T_SUITE:-120} \
  SANITIZE_FILTER='DeltaGpu.PersistentStep' SANITIZE_TIMEOUT_S=45 OUT=$OUT/suite \
  bash scripts/gpu_check.sh test sanitize > /dev/null 2>&1
grep -E "^(test|sanitize) " "$OUT/suite/log.txt" | tail -2
grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/suite/sanitize.txt" | head -4
grep -E "FAILED|Failure" "$OUT/suite/log.txt" | head -10
BENCH_ARGS="--family gdn --preset qwen35-122b --batch 64,128,256,512 --L 16 --state bf16 --modes replay --target-ms 2;\
--family gdn --preset qwen35-122b --batch 256 --L 16 --state fp32 --modes dual --read bf16 --target-ms 2;\
--family kda --preset kimi --batch 256 --L 16 --state bf16 --modes replay --target-ms 2" \
  PACK=gpubin-x/t44d.tar.xz REPS=2 OUT=$OUT/cmp timeout ${T_CMP:-120} bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "cmp rc $?"
sed -n '/^µs per step/,$p' "$OUT/cmp/log.txt"
