#!/usr/bin/env bash
# The main job: build, verify the replay invariants, then benchmark baseline
# against replay decode. Uses the CUDA backend when it is built and a GPU is
# present, else the CPU backend. The bench's JSON Lines go to
# bench/results/main-<backend>-<host>-<time>.jsonl (one file per run).
#
# Usage: scripts/run_main.sh [extra bench options...]
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
bin="$BUILD_DIR/replayssm"

backend=cpu
if "$bin" info | grep -q '^cuda_available: yes'; then backend=cuda; fi
echo "run_main: backend $backend" >&2

mkdir -p bench/results
out="bench/results/main-$backend-$(hostname -s 2>/dev/null || echo host)-$(date +%Y%m%d-%H%M%S).jsonl"

"$bin" verify --backend "$backend"
"$bin" bench --backend "$backend" --out "$out" "$@"
echo "run_main: results in $out" >&2
