#!/bin/bash
# t42, device call 3 (at most ~420 s; carry gpubin-x/t42.tar.xz: `main`,
# 9744c67's CLI, and `land`, branch t42-r1p-cap: main's Mamba-2 T = 1
# prefetch and 16-bit eager rule plus the persistent step's stage cap):
# land's GPU tests of the changed paths (the persistent T = 1 step and the
# dual steps it serves, at the stage cap the device's bandwidth gives and
# at two stages; Mamba-2 replay / eager / arena), then land against main,
# alternating, two rounds, L = 16 (Mamba-2 H128 fp32 replay B = 64 / 256 /
# 512; H128 / H96 bf16 B = 3 baseline and replay; the persistent step's
# rows at B = 256), then the Python package built on the GPU machine with
# tests/python and torch. T_TEST, T_CMP, T_PY: their limits in seconds;
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
