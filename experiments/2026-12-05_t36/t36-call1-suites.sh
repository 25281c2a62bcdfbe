#!/bin/bash
# t36, device call 1 (about 560 s): the whole GPU suite and the sanitizer
# subset of `hk` (main + t36-host-layouts.patch + t36-kda-prep.patch: every
# line of main's code plus both patches), with memcheck / racecheck also on
# a delta subset; then, on `main` itself, the tests of the recurrent kernel
# that ce86877 changed (no whole-suite run since 7086a2e; the long runs
# never ran on it), and with PACK=gpubin-x/t37.tar.xz (whose main is
# c9fd113's tree and later: the same kernels, plus the slot-arena tests) the
# *Arena* tests (pools past 2^31 elements, experiments/2026-12-05_t37).
# PACK: gpubin-x/t36.tar.xz or t37.tar.xz (labels main, hl, kp, hk, tail, r1k).
#   run: bash experiments/2026-12-05_t36/t36-call1-suites.sh   (carry gpubin-x/t36.tar.xz)
set -u
cd "$(dirname "$0")/../.."
PACK=${PACK:-gpubin-x/t36.tar.xz}
q=$(mktemp -d)
xz -dc "$PACK" | tar -C "$q" -x || exit 2
for l in main hk; do touch "$q/$l/PREBUILT"; done
S='*DeviceStatus*:Mamba2Gpu.SlotOperations:Mamba2Gpu.ReplayShortRunN128:Mamba2Gpu.ReplayManyItems:Mamba2Gpu.SpecShortRunN128'
S+=':DeltaGpu.ReplayBulkSmall:DeltaGpu.SpecMmaSmall:DeltaGpu.EagerSmallBatch:Conv1dGpu.ScheduleBf16W3:QuantGpu.*'
SANITIZE_FILTER=$S SANITIZE_TIMEOUT_S=110 BUILD_DIR=$q/hk SKIP_CPU_TESTS=1 TEST_SHARDS=16 DEADLINE_S=340 \
  OUT=$OUT/hk bash scripts/gpu_check.sh test sanitize > "$OUT/hk.txt" 2>&1
echo "== hk: rc $?"; tail -n 12 "$OUT/hk.txt"
GTEST_FILTER='DeltaGpu.Decode:DeltaGpu.SnapshotDecode:DeltaGpu.Prefill*:*DeltaGpuSpeculativeLongRun*:DualDeltaGpu.SlotOperationsMatchCpu:DeltaGpu.EagerSmallBatch:*Arena*' \
  BUILD_DIR=$q/main SKIP_CPU_TESTS=1 TEST_SHARDS=16 DEADLINE_S=200 OUT=$OUT/main \
  bash scripts/gpu_check.sh test > "$OUT/main.txt" 2>&1
echo "== main: rc $?"; tail -n 12 "$OUT/main.txt"
