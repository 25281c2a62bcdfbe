#!/bin/bash
# t42, device call 3 (at most ~420 s; carry gpubin-x/t42.tar.xz): calls 1 and
# 2 cut to what the session's remaining device time allows, after failed
# machine starts: the landing build's GPU tests of the changed paths (the
# persistent T = 1 step and the dual steps it serves, at whatever stage cap
# the device's bandwidth gives, and at two stages; Mamba-2 replay / eager /
# arena), then call 2's comparison (land against main), then call 2's
# Python package tests; T_TEST, T_CMP, T_PY: their limits in seconds;
# FILTER: the tests (default below).
#   run: bash experiments/2026-12-05_t42/t42-call3.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name,memory.total,clocks.max.memory --format=csv,noheader
GTEST_FILTER=${FILTER:-'DeltaGpu.Persistent*:DeltaGpuArena.PersistentStep:DualDeltaGpu.*:DeltaGpu.ProductionTiles:Mamba2Gpu.Replay*:Mamba2Gpu.Eager*:Mamba2GpuArena.*'} \
  PACK=gpubin-x/t42.tar.xz PACK_LABEL=land SKIP_CPU_TESTS=1 TEST_SHARDS=16 DEADLINE_S=${T_TEST:-170} OUT=$OUT/tests \
  bash scripts/gpu_check.sh test > /dev/null 2>&1
grep -E "^test " "$OUT/tests/log.txt" | tail -1
G="--family gdn --preset qwen35-122b --L 16 --target-ms 2 --batch 256"
K="--family kda --preset kimi --L 16 --target-ms 2 --batch 256"
BENCH_ARGS="--family mamba2 --preset nemotron3 --L 16 --target-ms 2 --modes replay --state fp32 --batch 64,256,512;\
--family mamba2 --preset nemotron3,nemotron3-nano --L 16 --target-ms 2 --modes baseline,replay --state bf16 --batch 3;\
$G --modes replay --state bf16;$K --modes replay --state fp32,bf16;\
$G --modes dual --state fp32 --read fp8,nvfp4;$K --modes dual --state fp32 --read fp8,nvfp4" \
ONLY="main land" PACK=gpubin-x/t42.tar.xz REPS=2 OUT=$OUT/cmp timeout ${T_CMP:-150} \
  bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "cmp rc $?"
tail -n 14 "$OUT/cmp/log.txt"
DEADLINE_S=${T_PY:-100} OUT=$OUT/py bash scripts/gpu_check.sh python > /dev/null 2>&1
grep -E "^python " "$OUT/py/log.txt" | tail -1
