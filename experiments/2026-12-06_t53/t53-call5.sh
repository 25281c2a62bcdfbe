#!/bin/bash
# t53, device call 5: t53-call4 cut to the device time left (~240 s).
# carry gpubin-x/t53r.tar.xz (`main` = 7d4e3ac, `rec` = branch t53-rec16).
# rec's speculative delta tests (8 shards, 75 s), memcheck on eight launches
# of the new equality test, then T = 5 fp32 B = 256 GDN HV64 / KDA: main,
# rec, rec with REPLAYSSM_SPEC_REC16=0, builds alternating, two rounds.
# The pack is git-ignored and does not outlive the session's checkout; to
# remake it: build 7d4e3ac and this branch (cmake -S . -B DIR -G Ninja
# -DCMAKE_BUILD_TYPE=Release -DREPLAYSSM_CUDA=ON && ninja -C DIR), then
# DEST=gpubin-x/t53r.tar.xz bash scripts/pack_builds.sh main=MAIN_DIR rec=BRANCH_DIR
#   run: bash experiments/2026-12-06_t53/t53-call5.sh
set -u
cd "$(dirname "$0")/../.."
exec > >(tee "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
d=$(mktemp -d)
xz -dc gpubin-x/t53r.tar.xz | tar -C "$d" -x
R=$d/rec
F='DeltaGpu.SpecRecordsByCopies*:DeltaGpu.SpecProductionTiles:DeltaGpu.SpecMmaSmall:DeltaGpu.SpecSmallBatchTiles:DeltaGpu.GraphReplayChangingAcceptances:Part/DeltaGpuSpecTensorCores*:Part/DeltaGpuSpeculativeWindows*:DeltaGpuArena.SpeculativeWindows:Part/DualDeltaGpuSpeculativeWindows*'
bash scripts/gpu_shard_tests.sh "$R/replayssm_gpu_tests" "$F" "$OUT/tests" 8 75 2>&1 | tail -n 10
tar -xzOf "$OUT/tests/tests.tgz" | grep "tests from\|FAILED\|Failure" | head -20
timeout 25 compute-sanitizer --tool memcheck --kernel-name kns=delta_replay_kernel --launch-skip 4 --launch-count 6 \
  "$R/replayssm_gpu_tests" --gtest_brief=1 --gtest_filter='DeltaGpu.SpecRecordsByCopiesMatchLoads' 2>&1 | tail -n 3
A="--backend cuda --L 16 --target-ms 2 --family kda,gdn --preset kimi,qwen35-122b --modes replay --batch 256 --T 5 --state fp32"
for r in 1 2; do
  for b in main rec rec0; do
    bin=$d/${b%0}/replayssm
    [[ $b == rec0 ]] && export REPLAYSSM_SPEC_REC16=0 || unset REPLAYSSM_SPEC_REC16
    timeout 40 $bin bench $A --out $OUT/r${r}_$b.jsonl 2>&1 | grep " replay" | sed "s/^/$b r$r /"
  done
done
unset REPLAYSSM_SPEC_REC16
(cd "$OUT" && cat r*.jsonl > rows.txt && rm -f r*.jsonl && mv rows.txt rows.jsonl)
rm -rf "$OUT/tests"
