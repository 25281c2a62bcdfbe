#!/bin/bash
# t40, device call 4 (about 150 s per build; carry gpubin-x/t40pf.tar.xz):
# the T = 1 GPU tests (Mamba-2, delta, dual; not the speculative ones) of the
# builds named in BUILDS (default "pf1"), 16 shards, memcheck on four.
#   run: BUILDS="pf2" bash experiments/2026-12-05_t40/t40-call4.sh
set -u
cd "$(dirname "$0")/../.."
q=$(mktemp -d)
xz -dc gpubin-x/t40pf.tar.xz | tar -C "$q" -x
F='*Mamba2Gpu*:*DeltaGpu*:-*DeltaGpu.Spec*:*DeltaGpuSpec*:*DeltaGpuArena.Spec*:*Mamba2Gpu*Spec*'
S='Mamba2Gpu.ReplayShortRunN128:DeltaGpu.ReplayBulkSmall:DeltaGpu.ReplayBulkLongRing:Mamba2Gpu.ReplayProductionTiles'
for v in ${BUILDS:-pf1}; do
  touch "$q/$v/PREBUILT"
  GTEST_FILTER="$F" SANITIZE_FILTER="$S" SANITIZE_TIMEOUT_S=60 \
    BUILD_DIR=$q/$v SKIP_CPU_TESTS=1 TEST_SHARDS=16 DEADLINE_S=${DEADLINE_S:-240} OUT=$OUT/tests-$v \
    bash scripts/gpu_check.sh test sanitize > /dev/null 2>&1
  echo "$v:"; grep -E "^(test|sanitize) " "$OUT/tests-$v/log.txt" | tail -2
done
