#!/bin/bash
# t42, device call 1 (about 330 s; carry gpubin-x/t42.tar.xz: `main`, the
# CLI of 9744c67 (SASS-identical to cd94694), and `land`, the landing build:
# branch t41-m2pf's Mamba-2 T = 1 sweep-ahead L2 prefetch on fp32 states,
# the Mamba-2 eager rule's 6 MiB for 16-bit states, and the persistent T = 1
# step's stage cap on devices of less bandwidth than the H200): the landing
# build as one binary, the whole GPU suite (16 shards) and gpu_check.sh's
# sanitizer subset (DeltaGpu.PersistentStep among it).
#   run: bash experiments/2026-12-05_t42/t42-call1.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
PACK=gpubin-x/t42.tar.xz PACK_LABEL=land SKIP_CPU_TESTS=1 TEST_SHARDS=16 DEADLINE_S=${DEADLINE_S:-330} \
  OUT=$OUT/suite bash scripts/gpu_check.sh test sanitize > /dev/null 2>&1
grep -E "^(test|sanitize) " "$OUT/suite/log.txt" | tail -2
