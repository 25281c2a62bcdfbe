#!/bin/bash
# t36, device call 1 (about 560 s): the whole GPU suite and the sanitizer
# subset of `main` (no whole-suite run since ce86877), then the delta suites
# of `hk` (t36-host-layouts.patch + t36-kda-prep.patch) with memcheck /
# racecheck on a delta subset. PACK: gpubin-x/t36.tar.xz (labels main, hl,
# kp, hk, tail, r1k).
#   run: bash experiments/2026-12-05_t36/t36-call1-suites.sh   (carry gpubin-x/t36.tar.xz)
set -u
cd "$(dirname "$0")/../.."
PACK=${PACK:-gpubin-x/t36.tar.xz}
q=$(mktemp -d)
xz -dc "$PACK" | tar -C "$q" -x || exit 2
for l in main hk; do touch "$q/$l/PREBUILT"; done
BUILD_DIR=$q/main SKIP_CPU_TESTS=1 TEST_SHARDS=16 DEADLINE_S=300 OUT=$OUT/main \
  bash scripts/gpu_check.sh test sanitize > "$OUT/main.txt" 2>&1
echo "== main: rc $?"; tail -n 12 "$OUT/main.txt"
GTEST_FILTER='*Delta*' SANITIZE_TIMEOUT_S=80 \
  SANITIZE_FILTER='DeltaGpu.ReplayBulkSmall:DeltaGpu.SpecMmaSmall:DeltaGpu.DeviceStatus*:DeltaGpu.EagerSmallBatch' \
  BUILD_DIR=$q/hk SKIP_CPU_TESTS=1 TEST_SHARDS=16 DEADLINE_S=240 OUT=$OUT/hk \
  bash scripts/gpu_check.sh test sanitize > "$OUT/hk.txt" 2>&1
echo "== hk: rc $?"; tail -n 12 "$OUT/hk.txt"
