#!/bin/bash
# t44, device call 6 (about 120 s; carry gpubin-x/t44g.tar.xz: `tc` =
# b395a18, whose kernels main's are): compute-sanitizer memcheck of the
# persistent dual step's GDN part (DualDeltaGpuPersistentStep part 0: GDN
# HV64, 40 rows, every copy format, the fp8 copy's sweeps on tensor cores).
#   run: bash experiments/2026-12-05_t44/t44-call6.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader
d=$(mktemp -d)
xz -dc gpubin-x/t44g.tar.xz | tar -C "$d" -x
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout "${T_SAN:-110}" "$cs" --tool memcheck --error-exitcode 3 "$d/tc/replayssm_gpu_tests" \
  --gtest_filter='Part/DualDeltaGpuPersistentStep.MatchCpu/0' --gtest_brief=1 > "$OUT/memcheck.txt" 2>&1
echo "memcheck rc=$?"
tail -n 6 "$OUT/memcheck.txt"
