#!/bin/bash
# t48, device call 5 (about 250 s on any H100 / H200; carry
# gpubin-x/t48b.tar.xz: `k3` = main's kernels, `ps` = branch t48-prep-split):
# the persistent step's preparation split in two kernels, the tail beside the
# stream (REPLAYSSM_P1_SPLIT = the first kernel's share in percent; default
# 100, one kernel). The ps build's persistent GPU tests with the split forced
# (REPLAYSSM_P1_SPLIT=50; a deadlock would show as a shard cut at its
# limit), then the shares 100 / 30 / 50 / 70 alternating, two rounds, and
# per-item timelines at 50 %.
#   run: bash experiments/2026-12-06_t48/t48-call5.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader
d=$(mktemp -d)
xz -dc gpubin-x/t48b.tar.xz | tar -C "$d" -x
pids=()
for i in 0 1 2 3 4 5 6 7; do
  REPLAYSSM_P1_SPLIT=50 GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$i timeout 170 "$d/ps/replayssm_gpu_tests" --gtest_brief=1 \
    --gtest_filter='DeltaGpu.Persistent*:DeltaGpu.PrepSplitRule:DeltaGpuArena.PersistentStep:Part/DualDeltaGpuPersistentStep.*:DualDeltaGpu.GraphReplayT1PersistentWorkspace' \
    > "$OUT/tests$i.txt" 2>&1 &
  pids+=($!)
done
rc=0; for p in "${pids[@]}"; do wait "$p" || rc=1; done
echo "tests (split 50 %) rc=$rc"; cat "$OUT"/tests?.txt | grep -E "FAILED|PASSED|tests from" | tail -n 12
(cd "$OUT" && tar czf tests.tgz tests?.txt && rm -f tests?.txt)
ENVS="p100:X=0;s30:REPLAYSSM_P1_SPLIT=30;s50:REPLAYSSM_P1_SPLIT=50;s70:REPLAYSSM_P1_SPLIT=70" ONLY=ps BENCH_ARGS="\
--family gdn,kda --preset qwen35-122b,kimi --batch 128,256,512 --L 16 --state bf16 --modes replay --target-ms 2;\
--family kda --preset kimi --batch 256 --L 16 --state fp32 --modes replay --target-ms 2" \
  PACK=gpubin-x/t48b.tar.xz REPS=2 OUT=$OUT/cmp timeout 260 bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "compare rc=$?"
sed -n '/^µs per step/,$p' "$OUT/cmp/log.txt"
mkdir -p "$OUT/tl"
for n in gdn:qwen35-122b kda:kimi; do
  f=${n%%:*}
  REPLAYSSM_P1_SPLIT=50 R1P_TIMING=$OUT/tl/$f.r1p timeout 60 "$d/ps/replayssm" bench --backend cuda --family $f \
    --preset ${n#*:} --batch 256 --L 16 --state bf16 --modes replay --target-ms 2 > /dev/null 2>&1
  echo "== $f bf16 (ps, split 50 %)"; python3 scripts/r1p_timeline.py "$OUT/tl/$f.r1p" 2>&1 | grep -E "prep|stream|SM end|launch" | tee "$OUT/tl/$f.txt"
done
rm -f "$OUT"/tl/*.r1p
(cd "$OUT" && tar czf res.tgz cmp tl && rm -rf cmp tl)
