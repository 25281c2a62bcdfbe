#!/usr/bin/env bash
# Build replayssm: install missing build dependencies (cmake, ninja-build, g++,
# libgtest-dev) with apt-get when running as root or with passwordless sudo,
# then configure and build in ./build (the CUDA backend too when nvcc is found)
# with all cores.
#
# Environment: BUILD_DIR (default build), JOBS (default nproc),
# REPLAYSSM_NO_INSTALL=1 (never call apt-get), CMAKE_ARGS (extra cmake options,
# e.g. -DREPLAYSSM_CUDA=OFF).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}

have_gtest() {
  [ -f /usr/include/gtest/gtest.h ] || [ -f /usr/local/include/gtest/gtest.h ]
}

missing=()
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v ninja >/dev/null 2>&1 || missing+=(ninja-build)
command -v g++ >/dev/null 2>&1 || missing+=(g++)
have_gtest || missing+=(libgtest-dev)

if [ ${#missing[@]} -gt 0 ]; then
  sudo_cmd=()
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo_cmd=(sudo); else sudo_cmd=(none); fi
  fi
  if [ "${REPLAYSSM_NO_INSTALL:-0}" = 1 ] || ! command -v apt-get >/dev/null 2>&1 || [ "${sudo_cmd[*]-}" = none ]; then
    echo "setup: missing build dependencies: ${missing[*]}" >&2
    echo "setup: install them (Debian/Ubuntu: apt-get install -y ${missing[*]}) and re-run" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}" >&2
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# CUDA: nvcc on PATH or in the usual place.
cuda_args=()
nvcc_path=$(command -v nvcc 2>/dev/null || true)
if [ -z "$nvcc_path" ] && [ -x /usr/local/cuda/bin/nvcc ]; then nvcc_path=/usr/local/cuda/bin/nvcc; fi
if [ -n "$nvcc_path" ]; then
  echo "setup: building the CUDA backend with $nvcc_path" >&2
  cuda_args=(-DCMAKE_CUDA_COMPILER="$nvcc_path")
else
  echo "setup: nvcc not found; building the CPU backends only" >&2
fi

# shellcheck disable=SC2086
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "${cuda_args[@]}" ${CMAKE_ARGS:-}
cmake --build "$BUILD_DIR" -j "$JOBS"
echo "setup: built $BUILD_DIR/replayssm" >&2
