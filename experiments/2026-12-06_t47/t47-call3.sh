#!/bin/bash
# t47, device call 3 (about 200 s on any H100 / H200; carry
# gpubin-x/t47k.tar.xz = branch t47-kda-stages' build `k3`, CLI and GPU
# tests): KDA's persistent step at three stages and four result buffers by
# default (heuristics.h R1P_KDA_STAGES, not on nvfp4 copies). First the
# persistent GPU tests of that build in 8 parallel shards (its defaults are
# the new counts; DeltaGpu.PersistentLaunchChoice checks them), then, two
# rounds, the new default against the old counts on the same binary
# (`old`: REPLAYSSM_R1P_NB=8 and REPLAYSSM_R1P_NST=99, i.e. as many stages as
# fit, which is what the old rule gave on the H200) at B = 128 / 256 / 512,
# on whichever card came (the card is in the log).
#   run: bash experiments/2026-12-06_t47/t47-call3.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader
d=$(mktemp -d)
xz -dc gpubin-x/t47k.tar.xz | tar -C "$d" -x
pids=()
for i in 0 1 2 3 4 5 6 7; do
  GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$i timeout 170 "$d/k3/replayssm_gpu_tests" --gtest_brief=1 \
    --gtest_filter='DeltaGpu.Persistent*:DeltaGpuArena.PersistentStep:Part/DualDeltaGpuPersistentStep.*:DualDeltaGpu.GraphReplayT1PersistentWorkspace' \
    > "$OUT/tests$i.txt" 2>&1 &
  pids+=($!)
done
rc=0; for p in "${pids[@]}"; do wait "$p" || rc=1; done
echo "tests rc=$rc"; cat "$OUT"/tests?.txt | grep -E "FAILED|PASSED|tests from" | tail -n 12
ENVS="new:X=0;old:REPLAYSSM_R1P_NB=8,REPLAYSSM_R1P_NST=99" BENCH_ARGS="\
--family kda --preset kimi --batch 128,256,512 --L 16 --state bf16,fp32 --modes replay --target-ms 2;\
--family kda --preset kimi --batch 128,256,512 --L 16 --state fp32 --modes dual --read fp8 --target-ms 2" \
  PACK=gpubin-x/t47k.tar.xz REPS=2 OUT=$OUT/cmp timeout 150 bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "compare rc=$?"
sed -n '/^µs per step/,$p' "$OUT/cmp/log.txt"
