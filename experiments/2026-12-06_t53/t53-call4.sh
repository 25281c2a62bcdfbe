#!/bin/bash
# t53, device call 4 (carry gpubin-x/t53r.tar.xz; `main` = main's build at
# 7d4e3ac, `rec` = the working tree: the KDA tensor-core T > 1 kernel's old
# records and window gates loaded at once (REC16, REPLAYSSM_SPEC_REC16=0
# turns it off)
# and the window solve's rounding hoisted (both tensor-core kernels, GDN
# and KDA)). First rec's speculative delta tests (8 shards), memcheck and
# racecheck on the new equality test (launches 5-12 of the replay kernel:
# flushing steps, REC16 off and on), then T = 5 / 8 rows: main, rec, rec
# with REC16 off, builds alternating, two rounds (T = 8 in the first).
# The pack is git-ignored and does not outlive the session's checkout; to
# remake it: build 7d4e3ac and this branch (cmake -S . -B DIR -G Ninja
# -DCMAKE_BUILD_TYPE=Release -DREPLAYSSM_CUDA=ON && ninja -C DIR), then
# DEST=gpubin-x/t53r.tar.xz bash scripts/pack_builds.sh main=MAIN_DIR rec=BRANCH_DIR
#   run: bash experiments/2026-12-06_t53/t53-call4.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
d=$(mktemp -d)
xz -dc gpubin-x/t53r.tar.xz | tar -C "$d" -x
M=$d/main R=$d/rec
F='DeltaGpu.Spec*:DeltaGpu.GraphReplayChangingAcceptances:Part/DeltaGpuSpec*:Part/DeltaGpuSpeculative*:DeltaGpuArena.SpeculativeWindows:DeltaGpuArena.PaddedRows:DeltaGpuArena.MisalignedRowsRejected:Part/DualDeltaGpuSpeculativeWindows*:Part/DualDeltaGpuArena*'
bash scripts/gpu_shard_tests.sh "$R/replayssm_gpu_tests" "$F" "$OUT/tests" 8 170 2>&1 | tail -n 12
tar -xzOf "$OUT/tests/tests.tgz" | grep "FAILED\|Failure" | head -20
for tool in memcheck racecheck; do
  timeout 60 compute-sanitizer --tool $tool --kernel-name kns=delta_replay_kernel --launch-skip 4 --launch-count 8 "$R/replayssm_gpu_tests" --gtest_brief=1 \
    --gtest_filter='DeltaGpu.SpecRecordsByCopiesMatchLoads' --gtest_break_on_failure 2>&1 | tail -n 3 | sed "s/^/$tool /"
done
A="--backend cuda --L 16 --target-ms 2 --family kda,gdn --preset kimi,qwen35-122b --modes replay"
for r in 1 2; do
  for b in main rec rec0; do
    bin=$d/${b%0}/replayssm
    [[ $b == rec0 ]] && export REPLAYSSM_SPEC_REC16=0 || unset REPLAYSSM_SPEC_REC16
    timeout 120 $bin bench $A --out $OUT/r${r}_$b.jsonl --batch 64,256,512 --T 5 --state fp32 2>&1 | grep " replay" | sed "s/^/$b r$r /"
    [[ $r == 1 ]] && timeout 60 $bin bench $A --out $OUT/r${r}_${b}_x.jsonl --batch 256 --T 8 --state fp32 2>&1 | grep " replay" | sed "s/^/$b r$r /"
  done
done
unset REPLAYSSM_SPEC_REC16
(cd "$OUT" && cat r*.jsonl > rows.txt && rm -f r*.jsonl && mv rows.txt rows.jsonl)
rm -rf "$OUT/tests"
