#!/bin/bash
# t49, device call 7 (about 100 s; carry gpubin-x/t49d.tar.xz: `dl` = main
# with Mamba-2's launcher on cuda/runtime's device_limits, one query per
# device for every family, and the H200-class bandwidth rule in
# core/device_class.h): verify (both runs of gpu_check.sh's stage) and the
# Mamba-2 GPU tests that launch quickly, with the launch rules' tests.
#   run: bash experiments/2026-12-06_t49/t49-call7.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader
PACK=gpubin-x/t49d.tar.xz PACK_LABEL=dl OUT=$OUT/v DEADLINE_S=60 bash scripts/gpu_check.sh verify 2>&1 | grep -E "PASS|FAIL|rc=" | tail -n 14
d=$(mktemp -d)
xz -dc gpubin-x/t49d.tar.xz | tar -C "$d" -x
bash scripts/gpu_shard_tests.sh "$d/dl/replayssm_gpu_tests" \
  'Mamba2Gpu.SlotOperations:Mamba2Gpu.ReplaySmallBatchTiles:Mamba2Gpu.EagerSmallBatch:Mamba2Gpu.ReplayManyItems:Mamba2Gpu.ReplayShortRunN128:Mamba2Gpu.SpecShortRunN128:Mamba2Gpu.*Rule:Mamba2Gpu.SpecSmallBatchTiles:Mamba2Gpu.DeviceStatusOnBadRows:DeltaGpu.PersistentLaunchChoice:DualMamba2Gpu.BulkCopyProductionTiles' \
  "$OUT" 8 90
(cd "$OUT" && tar czf res.tgz v && rm -rf v)
