#!/bin/bash
# t43, device call 6 (one GPU; about 200 s; carry gpubin-x/t43c.tar.xz):
# no two-GPU machine was lent for call 5, so `fix` (per-device shared-memory
# limits and device attributes, c8dc1d4) runs its whole GPU suite and the
# sanitizer subset on one GPU (every Mamba-2 launch passes through
# cuda_util::SmemLimit; the *EachDevice tests skip there).
#   run: bash experiments/2026-12-05_t43/t43-call6.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
PACK=gpubin-x/t43c.tar.xz PACK_LABEL=fix SKIP_CPU_TESTS=1 TEST_SHARDS=16 DEADLINE_S=${T_SUITE:-260} OUT=$OUT/suite \
  bash scripts/gpu_check.sh test sanitize > /dev/null 2>&1
grep -E "^(test|sanitize) " "$OUT/suite/log.txt" | tail -2
