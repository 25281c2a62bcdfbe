#!/bin/bash
# t55, device call 2 (carry gpubin-x/t53r.tar.xz, see t53-call4.sh for the
# pack): the REC16 build's (`rec`, c97a465, landed as b37d274) speculative
# delta tests in 8 shards with every shard's summary, then memcheck and
# racecheck on launches 5-12 of delta_replay_kernel in
# DeltaGpu.SpecRecordsByCopiesMatchLoads (REC16 on and off, flushing steps).
# Call 2 ran it with t53-call4's `--kernel-name regex:...`, which
# compute-sanitizer rejects; call 3 reran the two tools with `kns=` as here.
#   run: bash experiments/2026-12-06_t55/t55-call2.sh
set -u
cd "$(dirname "$0")/../.."
d=$(mktemp -d)
xz -dc gpubin-x/t53r.tar.xz | tar -C "$d" -x
R=$d/rec
F='DeltaGpu.Spec*:DeltaGpu.GraphReplayChangingAcceptances:Part/DeltaGpuSpec*:Part/DeltaGpuSpeculative*:DeltaGpuArena.SpeculativeWindows:DeltaGpuArena.PaddedRows:DeltaGpuArena.MisalignedRowsRejected:Part/DualDeltaGpuSpeculativeWindows*:Part/DualDeltaGpuArena*'
bash scripts/gpu_shard_tests.sh "$R/replayssm_gpu_tests" "$F" "$OUT/tests" 8 170 > "$OUT/shards.txt" 2>&1
grep -h "PASSED\|FAILED\|tests from.*ran" "$OUT/shards.txt" | sort | uniq -c
for tool in memcheck racecheck; do
  timeout 120 compute-sanitizer --tool $tool --kernel-name kns=delta_replay --launch-skip 4 --launch-count 8 \
    "$R/replayssm_gpu_tests" --gtest_brief=1 --gtest_filter='DeltaGpu.SpecRecordsByCopiesMatchLoads' > "$OUT/$tool.txt" 2>&1
  echo "$tool rc=$?"
  tail -n 4 "$OUT/$tool.txt"
done
