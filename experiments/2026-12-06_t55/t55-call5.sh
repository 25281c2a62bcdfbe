#!/bin/bash
# t55, device call 5 (carry gpubin-x/t53r.tar.xz): the REC16 build's whole
# GPU suite in 14 parallel shards, GoogleTest JSON merged into
# $OUT/gpu_tests_rec.json.
#   run: bash experiments/2026-12-06_t55/t55-call5.sh
set -u
cd "$(dirname "$0")/../.."
d=$(mktemp -d)
xz -dc gpubin-x/t53r.tar.xz | tar -C "$d" -x
JSON=$OUT/gpu_tests_rec.json bash scripts/gpu_shard_tests.sh "$d/rec/replayssm_gpu_tests" '*' "$OUT/tests" 14 270 2>&1 | tail -n 40
