#!/bin/bash
# t43, device call 5 (two GPUs, nvidia-h100-x2; about 200 s; carry
# gpubin-x/t43c.tar.xz: `fix`, the kernels' shared-memory limits and the
# device attributes kept per device (cuda_util::SmemLimit,
# device_sm_count / device_peak_gbps), and `bug`, the same with the Mamba-2
# hot kernels' limit raised once per process as before): the *EachDevice
# tests (one process, each GPU in turn: Mamba-2 decode / replay /
# speculative / eager, the dual Mamba-2 pack, GDN / KDA blocks, persistent
# step, T = 5) on both builds (bug should fail Mamba2Gpu.EachDevice on the
# second GPU), then fix's whole GPU suite with both GPUs visible.
#   run: bash experiments/2026-12-05_t43/t43-call5.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
d=$(mktemp -d) && xz -dc gpubin-x/t43c.tar.xz | tar -x -C "$d" || exit 2
for b in fix bug; do
  timeout 150 "$d/$b/replayssm_gpu_tests" --gtest_filter='*EachDevice*' > "$OUT/each_device_$b.txt" 2>&1
  echo "== $b rc $?"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |OK \]|FAILED  \]|Error|error" "$OUT/each_device_$b.txt" | head -12
done
PACK=gpubin-x/t43c.tar.xz PACK_LABEL=fix SKIP_CPU_TESTS=1 TEST_SHARDS=16 DEADLINE_S=${T_SUITE:-240} OUT=$OUT/suite \
  bash scripts/gpu_check.sh test > /dev/null 2>&1
grep -E "^test " "$OUT/suite/log.txt" | tail -1
