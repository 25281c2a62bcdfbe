#!/usr/bin/env bash
# Build the CUDA binaries here (sm_90a) and pack them into ./gpubin, a folder
# the device tool can carry; scripts/gpu_check.sh then skips its build stage:
#   bash scripts/pack_gpubin.sh && <device> BUILD_DIR=gpubin bash scripts/gpu_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build-gpu}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DREPLAYSSM_CUDA=ON >/dev/null
ninja -C "$build" -j"${JOBS:-2}" replayssm_cli replayssm_tests replayssm_gpu_tests
rm -rf gpubin && mkdir gpubin
cp "$build"/replayssm "$build"/replayssm_tests "$build"/replayssm_gpu_tests gpubin/
strip gpubin/* 2>/dev/null || true
touch gpubin/PREBUILT
du -sh gpubin
