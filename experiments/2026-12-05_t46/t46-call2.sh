#!/bin/bash
# t46, device call 2 (about 300 s; any H100 / H200; carry gpubin-x/t46m.tar.xz
# = main 5223504's build as `m5223`, CLI and GPU tests): main's whole GPU suite
# in 16 shards. Main's kernels are identical in SASS to ce9aa8c's; what
# changed is host code at every launch (the shared-memory limit kept per
# kernel and device, cuda_util::SmemLimit, and the supported-device probe),
# which only a GPU run exercises.
#   run: bash experiments/2026-12-05_t46/t46-call2.sh
#   (PACK and PACK_LABEL run another packed build: t47 runs dae621d's,
#   PACK=gpubin-x/t47m.tar.xz PACK_LABEL=dae621d)
set -u
cd "$(dirname "$0")/../.."
PACK=${PACK:-gpubin-x/t46m.tar.xz} PACK_LABEL=${PACK_LABEL:-m5223} SKIP_CPU_TESTS=1 TEST_SHARDS=16 DEADLINE_S=${DEADLINE_S:-290} \
  OUT=$OUT/suite bash scripts/gpu_check.sh test > /dev/null 2>&1
echo "gpu_check rc=$?"
grep -E "^test |FAILED|Failure" "$OUT/suite/log.txt" | head -n 30
