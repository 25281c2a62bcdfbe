#!/bin/bash
# t39, device call 3 (about 240 s per build; carry gpubin-x/t39.tar.xz): the
# T = 1 streams' (and Mamba-2's T > 1) GPU tests of the builds named in BUILDS (default "rel2"),
# 16 shards, then memcheck / racecheck on four of them. rel2's counters
# may make racecheck report the bulk writes against the stage reads, as it
# does for the persistent step's mbarriers (perf_notes_delta.md v34).
# PACK, GTEST_F and SAN_F override the pack and the two filters (t40-call4.sh).
#   run: BUILDS="rel1 late" bash experiments/2026-12-05_t39/t39-call3.sh
set -u
cd "$(dirname "$0")/../.."
export PACK=${PACK:-gpubin-x/t39.tar.xz}
F=${GTEST_F:-'*Mamba2Gpu*:*DeltaGpu*:-*DeltaGpu.Spec*:*DeltaGpuSpec*:*DeltaGpuArena.Spec*'}
S=${SAN_F:-'Mamba2Gpu.ReplayShortRunN128:Mamba2Gpu.SpecShortRunN128:DeltaGpu.ReplayBulkSmall:DeltaGpu.PersistentMatchesBlockKernel'}
for v in ${BUILDS:-rel2}; do
  GTEST_FILTER="$F" SANITIZE_FILTER="$S" SANITIZE_TIMEOUT_S=60 \
    PACK_LABEL=$v SKIP_CPU_TESTS=1 TEST_SHARDS=16 DEADLINE_S=${DEADLINE_S:-240} OUT=$OUT/tests-$v \
    bash scripts/gpu_check.sh test sanitize > /dev/null 2>&1
  echo "$v:"; grep -E "^(test|sanitize) " "$OUT/tests-$v/log.txt" | tail -2
done
