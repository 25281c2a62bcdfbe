#!/bin/bash
# t43, device call 1 (at most ~450 s; carry gpubin-x/t43.tar.xz, one build
# `land`: main 2551ab4 plus the persistent step's stage cap, branch
# t42-r1p-cap): land's GPU tests of the paths changed since the last GPU
# run of the whole suite (the persistent T = 1 step and the dual steps it
# serves, at the device's stage cap and at two stages; Mamba-2 replay /
# eager / arena), then each change against its own switch in the same
# binary, alternating, two rounds, L = 16: the Mamba-2 T = 1 sweep-ahead
# prefetch (REPLAYSSM_M2_T1_L2PF=0 takes it off; H128 fp32 B = 256 / 512),
# the 6 MiB eager rule for 16-bit states (REPLAYSSM_EAGER_ROWS=2 sends
# B = 3 to the replay kernel as before; H128 / H96 bf16), the stage cap
# (REPLAYSSM_R1P_NST=99: as many stages as fit, as before; the persistent
# rows at B = 256); then the Python package built on the GPU machine with
# tests/python and torch. T_TEST, T_CMP (each comparison), T_PY: limits in
# seconds; FILTER: the tests.
#   run: bash experiments/2026-12-05_t43/t43-call1.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name,memory.total,clocks.max.memory --format=csv,noheader
GTEST_FILTER=${FILTER:-'DeltaGpu.Persistent*:DeltaGpuArena.PersistentStep:DualDeltaGpu.*:DeltaGpu.ProductionTiles:Mamba2Gpu.Replay*:Mamba2Gpu.Eager*:Mamba2GpuArena.*'} \
  PACK=gpubin-x/t43.tar.xz PACK_LABEL=land SKIP_CPU_TESTS=1 TEST_SHARDS=16 DEADLINE_S=${T_TEST:-170} OUT=$OUT/tests \
  bash scripts/gpu_check.sh test > /dev/null 2>&1
grep -E "^test " "$OUT/tests/log.txt" | tail -1
cmp() {  # NAME ENVS BENCH_ARGS
  BENCH_ARGS=$3 ENVS="on:REPLAYSSM_UNSET=0;$2" PACK=gpubin-x/t43.tar.xz REPS=2 OUT=$OUT/$1 \
    timeout "${T_CMP:-90}" bash scripts/gpu_compare.sh > /dev/null 2>&1
  echo "$1 rc $?"
  sed -n '/^µs per step/,$p' "$OUT/$1/log.txt"
}
cmp pf "pf0:REPLAYSSM_M2_T1_L2PF=0" \
  "--family mamba2 --preset nemotron3 --L 16 --target-ms 2 --modes replay --state fp32 --batch 256,512"
cmp eager "e2:REPLAYSSM_EAGER_ROWS=2" \
  "--family mamba2 --preset nemotron3,nemotron3-nano --L 16 --target-ms 2 --modes baseline,replay --state bf16 --batch 3"
G="--family gdn --preset qwen35-122b --L 16 --target-ms 2 --batch 256"
K="--family kda --preset kimi --L 16 --target-ms 2 --batch 256"
cmp cap "nst99:REPLAYSSM_R1P_NST=99" \
  "$G --modes replay --state bf16;$K --modes replay --state fp32,bf16;$G --modes dual --state fp32 --read fp8,nvfp4;$K --modes dual --state fp32 --read fp8,nvfp4"
DEADLINE_S=${T_PY:-100} OUT=$OUT/py bash scripts/gpu_check.sh python > /dev/null 2>&1
grep -E "^python " "$OUT/py/log.txt" | tail -1
