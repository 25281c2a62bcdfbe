#!/bin/bash
# t50, device call 9 (about 90 s; carry gpubin-x/t50n.tar.xz: `main` = the
# rule with G, the landing build): the launch-choice and persistent tests,
# gpu_check.sh's verify stage, and the default step against the blocks
# (REPLAYSSM_R1P=0) at B = 256, L = 16, two rounds, with R1P_TIMING (a dump
# is written only when the persistent step ran): GDN HV32 bf16 and its dual
# bf16 copy (persistent by default here), GDN HV64 bf16 (the blocks).
#   run: bash experiments/2026-12-06_t50/t50-call9.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader
d=$(mktemp -d)
xz -dc gpubin-x/t50n.tar.xz | tar -C "$d" -x
M=$d/main
timeout 200 "$M/replayssm_gpu_tests" --gtest_brief=1 \
  --gtest_filter='DeltaGpu.Persistent*:DeltaGpuArena.PersistentStep:DualDeltaGpu.GraphReplayT1PersistentWorkspace' 2>&1 | tail -n 3
PACK=gpubin-x/t50n.tar.xz PACK_LABEL=main OUT=$OUT/ver DEADLINE_S=80 bash scripts/gpu_check.sh verify 2>&1 | tail -n 2
for c in "qwen35 bf16 replay" "qwen35 fp32 dual --read bf16" "qwen35-122b bf16 replay"; do
  set -- $c
  p=$1 st=$2 m=$3; shift 3
  for r in 1 2; do
    rm -f "$OUT/tl.bin"
    echo "default $(R1P_TIMING=$OUT/tl.bin timeout 40 "$M/replayssm" bench --backend cuda --family gdn --preset $p --batch 256 \
      --L 16 --state $st --modes $m "$@" --target-ms 2 2>&1 | grep -m1 " $m") persistent=$([[ -s $OUT/tl.bin ]] && echo yes || echo no)"
    echo "blocks  $(REPLAYSSM_R1P=0 timeout 40 "$M/replayssm" bench --backend cuda --family gdn --preset $p --batch 256 \
      --L 16 --state $st --modes $m "$@" --target-ms 2 2>&1 | grep -m1 " $m")"
  done
done
rm -f "$OUT/tl.bin"; rm -rf "$OUT/ver"
