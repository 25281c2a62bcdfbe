#!/bin/bash
# t49, device call 5 (about 120 s; carry gpubin-x/t49c.tar.xz): whether the
# split preparation needs its tail to run beside the stream for the step to
# finish. Call 4's memcheck / racecheck of `replayssm verify` (16-bit KDA,
# persistent step forced) ran out of 280 s. Here the same verify with the
# split (default 80 %) and without (REPLAYSSM_P1_SPLIT=100), plainly and
# with CUDA_LAUNCH_BLOCKING=1 (each launch returns only when its kernel has
# finished: the tail, the stream's dependent, cannot start beside it), and
# memcheck without the split.
#   run: bash experiments/2026-12-06_t49/t49-call5.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader
d=$(mktemp -d)
xz -dc gpubin-x/t49c.tar.xz | tar -C "$d" -x
v() { timeout "$1" "${@:2}" "$d/land/replayssm" verify --backend cuda --family kda --quick --state bf16 --act bf16 --no-dual 2>&1 | tail -n 1; echo "rc=${PIPESTATUS[0]}"; }
export REPLAYSSM_R1P=1
for s in 80 100; do
  echo "== split $s, plain";                 REPLAYSSM_P1_SPLIT=$s v 30 env
  echo "== split $s, CUDA_LAUNCH_BLOCKING=1"; REPLAYSSM_P1_SPLIT=$s v 30 env CUDA_LAUNCH_BLOCKING=1
done
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
echo "== split 100, memcheck"; REPLAYSSM_P1_SPLIT=100 v 150 "$cs" --tool memcheck --error-exitcode 3
