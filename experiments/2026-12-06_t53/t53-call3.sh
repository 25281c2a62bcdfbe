#!/bin/bash
# t53, device call 3 (carry gpubin-x/t53m.tar.xz): on an H200 first the
# target rows of t53-call1 (run by it with SKIP_TESTS=1: its tests already
# passed on an H100), then on any card t53-call2's ncu profile of KDA T = 5.
#   run: bash experiments/2026-12-06_t53/t53-call3.sh
set -u
cd "$(dirname "$0")/../.."
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "$name"
[[ $name == *H200* ]] && SKIP_TESTS=1 bash experiments/2026-12-06_t53/t53-call1.sh | tail -n +2
bash experiments/2026-12-06_t53/t53-call2.sh | tail -n +2
