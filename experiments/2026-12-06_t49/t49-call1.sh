#!/bin/bash
# t49, device call 1 (about 300 s; carry gpubin-x/t49a.tar.xz: `k3` = main's
# kernels, `s1` = branch t49-split: the split preparation's tail in an
# instance of its own with a register cap per family, heuristics.h
# p1_tail_min_blocks, so that GDN's 16-bit and KDA's fp32 streams take it
# too; the stream gives up stages for the tail's shared memory). s1's
# persistent GPU tests with the split forced (REPLAYSSM_P1_SPLIT=50), then
# the shares 100 / 60 / 70 / 80 / 90, two rounds, and per-item
# timelines of GDN bf16 at 70 %.
#   run: bash experiments/2026-12-06_t49/t49-call1.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader
d=$(mktemp -d)
xz -dc gpubin-x/t49a.tar.xz | tar -C "$d" -x
REPLAYSSM_P1_SPLIT=50 bash scripts/gpu_shard_tests.sh "$d/s1/replayssm_gpu_tests" \
  'DeltaGpu.Persistent*:DeltaGpu.PrepSplitRule:DeltaGpuArena.PersistentStep:Part/DualDeltaGpuPersistentStep.*:DualDeltaGpu.GraphReplayT1PersistentWorkspace' \
  "$OUT"
ENVS="p100:X=0;s60:REPLAYSSM_P1_SPLIT=60;s70:REPLAYSSM_P1_SPLIT=70;s80:REPLAYSSM_P1_SPLIT=80;s90:REPLAYSSM_P1_SPLIT=90" BENCH_ARGS="\
--family gdn,kda --preset qwen35-122b,kimi --batch 64,128,256,512 --L 16 --state bf16 --modes replay --target-ms 2;\
--family kda --preset kimi --batch 128,256,512 --L 16 --state fp32 --modes replay --target-ms 2" \
  BENCH_TIMEOUT_S=90 ONLY=s1 PACK=gpubin-x/t49a.tar.xz REPS=2 OUT=$OUT/cmp timeout 420 bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "compare rc=$?"
sed -n '/^µs per step/,$p' "$OUT/cmp/log.txt"
mkdir -p "$OUT/tl"
for n in gdn:qwen35-122b:bf16 kda:kimi:fp32; do
  IFS=: read -r f p s <<< "$n"
  REPLAYSSM_P1_SPLIT=70 R1P_TIMING=$OUT/tl/$f.r1p timeout 60 "$d/s1/replayssm" bench --backend cuda --family $f \
    --preset $p --batch 256 --L 16 --state $s --modes replay --target-ms 2 > /dev/null 2>&1
  echo "== $f $s (s1, split 70 %)"; python3 scripts/r1p_timeline.py "$OUT/tl/$f.r1p" 2>&1 | grep -E "prep|stream|SM end|launch" | tee "$OUT/tl/$f.txt"
done
rm -f "$OUT"/tl/*.r1p
(cd "$OUT" && tar czf res.tgz cmp tl && rm -rf cmp tl)
