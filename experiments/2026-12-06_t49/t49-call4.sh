#!/bin/bash
# t49, device call 4 (about 300 s; carry gpubin-x/t49c.tar.xz): call 3's
# shard 0 (its ten tests) was cut at its 300 s limit beside memcheck, with no
# output; here each of those tests in a process of its own, beside memcheck
# and racecheck on `replayssm verify` for 16-bit KDA with the persistent step
# forced (REPLAYSSM_R1P=1; the headline shape at TP = 8: 16 items, a first
# preparation of 12 and a tail of 4).
#   run: bash experiments/2026-12-06_t49/t49-call4.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader
d=$(mktemp -d)
xz -dc gpubin-x/t49c.tar.xz | tar -C "$d" -x
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck; do
  (REPLAYSSM_R1P=1 timeout 280 "$cs" --tool $tool --error-exitcode 3 "$d/land/replayssm" verify --backend cuda \
    --family kda --quick --state bf16 --act bf16 --no-dual > "$OUT/$tool.txt" 2>&1; echo "$tool rc=$?" >> "$OUT/$tool.txt") &
done
pids=()
i=0
for t in Conv1dGpu.RequireSupportedDevice DeltaGpuArena.DecodeAndSnapshot DeltaGpu.ReplayBulkLongRing \
  DeltaGpu.DeviceStatusBadSlot DualMamba2Gpu.BulkCopyProductionTiles Mamba2Gpu.ReplayLongRun \
  Mamba2Gpu.ReplayProductionTilesBf16Wide SharedGpu.Mamba2LongRun 'Part/DualDeltaGpuArena.Pools/1' \
  'Part/Mamba2GpuSpecTensorCores.AllShapesAndDtypes/1'; do
  timeout 290 "$d/land/replayssm_gpu_tests" --gtest_brief=1 --gtest_filter="$t" > "$OUT/t$i.txt" 2>&1 &
  pids+=($!); i=$((i + 1))
done
for p in "${pids[@]}"; do wait "$p"; echo "test rc=$?"; done
wait
for ((j = 0; j < i; ++j)); do echo "t$j: $(grep -E 'PASSED|FAILED|SKIPPED' "$OUT/t$j.txt" | tr '\n' ' ')"; done
tail -n 5 "$OUT/memcheck.txt" "$OUT/racecheck.txt"
(cd "$OUT" && tar czf res.tgz t*.txt memcheck.txt racecheck.txt && rm -f t[0-9]*.txt memcheck.txt racecheck.txt)
