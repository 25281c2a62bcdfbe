#!/bin/bash
# t43, device call 2 (at most ~560 s; carry gpubin-x/t43.tar.xz, `land` now
# with the stage cap for 16-bit states and packed copies only, fp32 states
# keeping every stage that fits, after t43-call1's KDA fp32 row): land's
# persistent-step tests; the Python package built on the GPU machine with
# tests/python and torch (call 1's 100 s ran out at 82 %, every test so far
# passing); KDA fp32 / GDN bf16 at B = 256 against as many stages as fit
# (REPLAYSSM_R1P_NST=99); then why the Mamba-2 eager step at batch 1 trails
# the baseline decode (H200 7.17 / 6.86 µs fp32, 6.50 / 6.01 bf16): ncu
# (--set full, warm caches, the launch after PROFILE_SKIP, past the first
# visit of every slot set, whose eager steps fold the records the bench's
# cursors start with) of the decode kernel in baseline and in replay mode,
# H128 bf16 and fp32, B = 1, each with its per-line instruction and stall
# counts. T_TEST, T_PY: limits in seconds.
#   run: bash experiments/2026-12-05_t43/t43-call2.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name,memory.total,clocks.max.memory --format=csv,noheader
GTEST_FILTER='DeltaGpu.Persistent*:DeltaGpuArena.PersistentStep:*DualDeltaGpuPersistentStep*' \
  PACK=gpubin-x/t43.tar.xz PACK_LABEL=land SKIP_CPU_TESTS=1 TEST_SHARDS=16 DEADLINE_S=${T_TEST:-80} OUT=$OUT/tests \
  bash scripts/gpu_check.sh test > /dev/null 2>&1
grep -E "^test " "$OUT/tests/log.txt" | tail -1
DEADLINE_S=${T_PY:-230} OUT=$OUT/py bash scripts/gpu_check.sh python > /dev/null 2>&1
grep -E "^python " "$OUT/py/log.txt" | tail -1
grep -E "passed|failed|SKIPPED|FAILED" "$OUT/py/log.txt" | tail -8
BENCH_ARGS="--family kda --preset kimi --L 16 --target-ms 2 --batch 256 --modes replay --state fp32;\
--family gdn --preset qwen35-122b --L 16 --target-ms 2 --batch 256 --modes replay --state bf16" \
  ENVS="on:REPLAYSSM_UNSET=0;nst99:REPLAYSSM_R1P_NST=99" PACK=gpubin-x/t43.tar.xz REPS=2 OUT=$OUT/cap \
  timeout 60 bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "cap rc $?"
sed -n '/^µs per step/,$p' "$OUT/cap/log.txt"
for st in bf16 fp32; do
  for mode in baseline replay; do
    PACK=gpubin-x/t43.tar.xz PACK_LABEL=land OUT=$OUT/$st-$mode DEADLINE_S=60 PROFILE_KERNEL=mamba2_decode \
      PROFILE_SKIP=1500 PROFILE_NCU_ARGS="--cache-control none" \
      PROFILE_ARGS="--family mamba2 --preset nemotron3 --modes $mode --batch 1 --L 16 --state $st --target-ms 5" \
      bash scripts/gpu_check.sh profile > /dev/null 2>&1
    echo "== $st $mode: $(grep -E '^profile ' "$OUT/$st-$mode/log.txt" | tail -1)"
    grep -E "Duration|Registers Per|Elapsed Cycles|Dynamic Shared" "$OUT/$st-$mode/profile.txt" | tr -s ' ' | head -5
    rm -f "$OUT/$st-$mode"/*.ncu-rep "$OUT/$st-$mode/sass.csv" "$OUT/$st-$mode/sass.txt"
  done
done
