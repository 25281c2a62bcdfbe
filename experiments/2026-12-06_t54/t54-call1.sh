#!/bin/bash
# t54, device call 1: branch t53-rec16's t53-call5 reordered for a short
# device budget (~200 s), without its memcheck:
# one round of T = 5 fp32 B = 256 GDN HV64 / KDA rows (main, rec, rec with
# REPLAYSSM_SPEC_REC16=0), then rec's speculative delta tests (8 shards,
# 70 s), then the second round. carry gpubin-x/t53r.tar.xz (`main` =
# 7d4e3ac, `rec` = branch t53-rec16 at c97a465; the branch's t53-call4.sh
# says how to remake the pack). Runs from main's tree or the branch's: it
# needs only the pack and scripts/gpu_shard_tests.sh.
#   run: bash experiments/2026-12-06_t54/t54-call1.sh
set -u
cd "$(dirname "$0")/../.."
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
d=$(mktemp -d)
xz -dc gpubin-x/t53r.tar.xz | tar -C "$d" -x
R=$d/rec
A="--backend cuda --L 16 --target-ms 2 --family kda,gdn --preset kimi,qwen35-122b --modes replay --batch 256 --T 5 --state fp32"
rows() {
  for b in main rec rec0; do
    bin=$d/${b%0}/replayssm
    [[ $b == rec0 ]] && export REPLAYSSM_SPEC_REC16=0 || unset REPLAYSSM_SPEC_REC16
    timeout 30 $bin bench $A --out $OUT/r${1}_$b.jsonl 2>&1 | grep " replay" | sed "s/^/$b r$1 /"
  done
  unset REPLAYSSM_SPEC_REC16
}
rows 1
F='DeltaGpu.SpecRecordsByCopies*:DeltaGpu.SpecProductionTiles:DeltaGpu.SpecMmaSmall:DeltaGpu.SpecSmallBatchTiles:DeltaGpu.GraphReplayChangingAcceptances:Part/DeltaGpuSpecTensorCores*:Part/DeltaGpuSpeculativeWindows*:DeltaGpuArena.SpeculativeWindows:Part/DualDeltaGpuSpeculativeWindows*'
bash scripts/gpu_shard_tests.sh "$R/replayssm_gpu_tests" "$F" "$OUT/tests" 8 70 2>&1 | tail -n 10
tar -xzOf "$OUT/tests/tests.tgz" | grep "tests from\|FAILED\|Failure" | head -20
rows 2
(cd "$OUT" && cat r*.jsonl > rows.txt && rm -f r*.jsonl && mv rows.txt rows.jsonl)
rm -rf "$OUT/tests"
