#!/bin/bash
# t49, device call 6 (about 120 s; carry gpubin-x/t47k.tar.xz and
# gpubin-x/t49c.tar.xz): gpu_check.sh's verify stage, which now also runs
# verify with CUDA_LAUNCH_BLOCKING=1 and the persistent step forced, on
# main's kernels (`k3` of t47k) — it must pass — and, as the negative
# control, on t49-split's landing candidate (`land` of t49c) for 16-bit KDA
# with a 60 s deadline — it must fail (the split's hang, t49-call5).
#   run: bash experiments/2026-12-06_t49/t49-call6.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader
PACK=gpubin-x/t47k.tar.xz PACK_LABEL=k3 OUT=$OUT/k3 bash scripts/gpu_check.sh verify 2>&1 | tail -n 16
echo "k3 rc=${PIPESTATUS[0]}"
PACK=gpubin-x/t49c.tar.xz PACK_LABEL=land OUT=$OUT/land DEADLINE_S=60 \
  VERIFY_ARGS="--backend cuda --quick --family kda --state bf16 --act bf16 --no-dual" \
  bash scripts/gpu_check.sh verify 2>&1 | tail -n 10
echo "land rc=${PIPESTATUS[0]}"
(cd "$OUT" && tar czf res.tgz k3 land && rm -rf k3 land)
