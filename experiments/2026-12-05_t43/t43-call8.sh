#!/bin/bash
# t43, device call 8 (one GPU; about 30 s; carry gpubin-x/t43d.tar.xz, `dev`:
# Tensor::device_index checked against the current device): the rejection
# test (an Error naming the argument, nothing written) and a short subset.
#   run: bash experiments/2026-12-05_t43/t43-call8.sh
set -u
cd "$(dirname "$0")/../.."
d=$(mktemp -d) && xz -dc gpubin-x/t43d.tar.xz | tar -x -C "$d" || exit 2
timeout 40 "$d/dev/replayssm_gpu_tests" --gtest_brief=1 \
  --gtest_filter='Mamba2Gpu.TensorOnAnotherDeviceRejected:*EachDevice*:Mamba2Gpu.DeviceStatusOnBadRows:DeltaGpu.ReplayBulkSmall' \
  > "$OUT/device_index_tests.txt" 2>&1
echo "rc $?"; tail -n 8 "$OUT/device_index_tests.txt"
