#!/bin/bash
# t40, device call 4 (about 150 s per build; carry gpubin-x/t40pf.tar.xz):
# the T = 1 GPU tests (Mamba-2, delta, dual; not the speculative ones) of the
# builds named in BUILDS (default "pf1"), 16 shards, memcheck / racecheck on
# four: t39-call3.sh with this pack and these filters.
#   run: BUILDS="pf2" bash experiments/2026-12-05_t40/t40-call4.sh
cd "$(dirname "$0")/../.."
PACK=gpubin-x/t40pf.tar.xz BUILDS=${BUILDS:-pf1} \
GTEST_F='*Mamba2Gpu*:*DeltaGpu*:-*DeltaGpu.Spec*:*DeltaGpuSpec*:*DeltaGpuArena.Spec*:*Mamba2Gpu*Spec*' \
SAN_F='Mamba2Gpu.ReplayShortRunN128:DeltaGpu.ReplayBulkSmall:DeltaGpu.ReplayBulkLongRing:Mamba2Gpu.ReplayProductionTiles' \
  exec bash experiments/2026-12-05_t39/t39-call3.sh
