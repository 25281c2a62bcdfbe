#!/bin/bash
# t43, device call 7 (one GPU; about 120 s; nothing to carry): the Python
# package built on the GPU machine from this tree (2b7d1b6: per-device
# runtime state, the direct path on torch's stream and the tensors' device)
# and tests/python with torch.
#   run: bash experiments/2026-12-05_t43/t43-call7.sh
set -u
cd "$(dirname "$0")/../.."
DEADLINE_S=${T_PY:-200} OUT=$OUT/py bash scripts/gpu_check.sh python > /dev/null 2>&1
grep -E "^python " "$OUT/py/log.txt" | tail -1
