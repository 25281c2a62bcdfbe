#!/bin/bash
# t41, device call 6 (up to ~560 s, nothing to carry): the Python package
# on the GPU machine, built there from this tree (pip install ., CUDA for
# sm_90a on its 16 cores) and tests/python run with torch and the GPU
# (docs/status.md: last run on a GPU before the workspace change, 55 tests).
#   run: bash experiments/2026-12-05_t41/t41-call6.sh
set -u
cd "$(dirname "$0")/../.."
DEADLINE_S=${DEADLINE_S:-560} OUT=$OUT/py bash scripts/gpu_check.sh python > /dev/null 2>&1
grep -E "^python " "$OUT/py/log.txt" | tail -1
grep -E "passed|failed|skipped|SKIPPED|FAILED|Error" "$OUT/py/log.txt" | tail -15
