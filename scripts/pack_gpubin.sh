#!/usr/bin/env bash
# Build the CUDA binaries here (sm_90a) and pack them into ./gpubin, a folder
# the device tool can carry; scripts/gpu_check.sh then skips its build stage:
#   bash scripts/pack_gpubin.sh && <device> BUILD_DIR=gpubin bash scripts/gpu_check.sh
# BUILD (default build-gpu), DEST (default gpubin), TARGETS and JOBS override.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build-gpu}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DREPLAYSSM_CUDA=ON >/dev/null
dest=${DEST:-gpubin}
targets=${TARGETS:-replayssm_cli replayssm_tests replayssm_gpu_tests}
# shellcheck disable=SC2086  # word-split target list
ninja -C "$build" -j"${JOBS:-2}" $targets
rm -rf "$dest" && mkdir -p "$dest"
for t in $targets; do
  f=$t; [[ $t == replayssm_cli ]] && f=replayssm
  cp "$build/$f" "$dest/"
done
strip "$dest"/* 2>/dev/null || true
touch "$dest/PREBUILT"
du -sh "$dest"
