#!/bin/bash
# t40, device call 2 (about 330 s; carry gpubin-x/t40.tar.xz): the landed
# build (`land`, 9744c67) as one binary: the whole GPU suite (16 shards) and
# gpu_check.sh's sanitizer subset, then racecheck of the persistent step and
# the KDA / Mamba-2 speculative kernels with a longer limit.
#   run: bash experiments/2026-12-05_t40/t40-call2.sh
set -u
cd "$(dirname "$0")/../.."
export PACK=gpubin-x/t40.tar.xz PACK_LABEL=land
SKIP_CPU_TESTS=1 TEST_SHARDS=16 DEADLINE_S=${DEADLINE_S:-300} OUT=$OUT/suite \
  bash scripts/gpu_check.sh test sanitize > /dev/null 2>&1
grep -E "^(test|sanitize) " "$OUT/suite/log.txt" | tail -2
SANITIZE_FILTER='DeltaGpu.PersistentStep:DeltaGpu.SpecMmaSmall:Mamba2Gpu.SpecShortRunN128' SANITIZE_TIMEOUT_S=120 \
  SKIP_CPU_TESTS=1 DEADLINE_S=260 OUT=$OUT/race \
  bash scripts/gpu_check.sh sanitize > /dev/null 2>&1
grep -E "^sanitize " "$OUT/race/log.txt" | tail -1
