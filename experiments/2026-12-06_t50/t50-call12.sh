#!/bin/bash
# t50, device call 12 (about 60 s; carry gpubin-x/t50p.tar.xz: `main` = the
# final build, G = 2 by items per SM): the launch-choice test, and the
# default GDN HV32 bf16 step at B = 64 / 96 / 128 against the blocks
# (REPLAYSSM_R1P=0), with R1P_TIMING (a dump only when the persistent step
# ran).
#   run: bash experiments/2026-12-06_t50/t50-call12.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader
d=$(mktemp -d)
xz -dc gpubin-x/t50p.tar.xz | tar -C "$d" -x
M=$d/main
timeout 60 "$M/replayssm_gpu_tests" --gtest_brief=1 --gtest_filter='DeltaGpu.PersistentLaunchChoice:DeltaGpu.PersistentStep' 2>&1 | tail -n 1
for B in 64 96 128; do
  rm -f "$OUT/tl.bin"
  echo "default $(R1P_TIMING=$OUT/tl.bin timeout 40 "$M/replayssm" bench --backend cuda --family gdn --preset qwen35 --batch $B \
    --L 16 --state bf16 --modes replay --target-ms 2 2>&1 | grep -m1 " replay") persistent=$([[ -s $OUT/tl.bin ]] && echo yes || echo no)"
  echo "blocks  $(REPLAYSSM_R1P=0 timeout 40 "$M/replayssm" bench --backend cuda --family gdn --preset qwen35 --batch $B \
    --L 16 --state bf16 --modes replay --target-ms 2 2>&1 | grep -m1 " replay")"
done
rm -f "$OUT/tl.bin"
