#!/bin/bash
# t48, device call 2 (about 250 s on any H100 / H200; carry
# gpubin-x/t48a.tar.xz: `k3` = main's kernels, `p1b` = branch
# t48-prep-batches): the preparation's record loops in larger guarded
# batches (fewer round trips per preparing warp). The p1b build's persistent
# GPU tests in 8 shards (PersistentMatchesBlockKernel: bytes equal to the
# block kernel's), then both builds alternating, two rounds, B = 128 / 256 /
# 512, L = 16, and p1b's per-item timelines (GDN bf16, KDA bf16 at B = 256).
#   run: bash experiments/2026-12-06_t48/t48-call2.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader
d=$(mktemp -d)
xz -dc gpubin-x/t48a.tar.xz | tar -C "$d" -x
pids=()
for i in 0 1 2 3 4 5 6 7; do
  GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$i timeout 170 "$d/p1b/replayssm_gpu_tests" --gtest_brief=1 \
    --gtest_filter='DeltaGpu.Persistent*:DeltaGpuArena.PersistentStep:Part/DualDeltaGpuPersistentStep.*:DualDeltaGpu.GraphReplayT1PersistentWorkspace' \
    > "$OUT/tests$i.txt" 2>&1 &
  pids+=($!)
done
rc=0; for p in "${pids[@]}"; do wait "$p" || rc=1; done
echo "tests rc=$rc"; cat "$OUT"/tests?.txt | grep -E "FAILED|PASSED|tests from" | tail -n 12
(cd "$OUT" && tar czf tests.tgz tests?.txt && rm -f tests?.txt)
BENCH_ARGS="\
--family gdn,kda --preset qwen35-122b,kimi --batch 128,256,512 --L 16 --state bf16 --modes replay --target-ms 2;\
--family kda --preset kimi --batch 256 --L 16 --state fp32 --modes replay --target-ms 2;\
--family gdn,kda --preset qwen35-122b,kimi --batch 256 --L 16 --state fp32 --modes dual --read fp8 --target-ms 2" \
  PACK=gpubin-x/t48a.tar.xz REPS=2 OUT=$OUT/cmp timeout 240 bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "compare rc=$?"
sed -n '/^µs per step/,$p' "$OUT/cmp/log.txt"
mkdir -p "$OUT/tl"
for n in gdn:qwen35-122b kda:kimi; do
  f=${n%%:*}
  R1P_TIMING=$OUT/tl/$f.r1p timeout 60 "$d/p1b/replayssm" bench --backend cuda --family $f --preset ${n#*:} --batch 256 \
    --L 16 --state bf16 --modes replay --target-ms 2 > /dev/null 2>&1
  echo "== $f bf16 (p1b)"; python3 scripts/r1p_timeline.py "$OUT/tl/$f.r1p" 2>&1 | grep -E "prep|stream|SM end|launch" | tee "$OUT/tl/$f.txt"
done
rm -f "$OUT"/tl/*.r1p
(cd "$OUT" && tar czf res.tgz cmp tl && rm -rf cmp tl)
