#!/bin/bash
# t48, device call 6 (not run; about 400 s on any H100 / H200; carry
# gpubin-x/t48c.tar.xz: `k3` = main's kernels, `ps2` = branch t48-prep-split
# at b464663, whose fit counts registers per partition): the persistent
# step's preparation split in two kernels, the tail beside the stream
# (REPLAYSSM_P1_SPLIT = the first kernel's share in percent; default 100,
# one kernel). With the partition rule only 16-bit KDA takes the split (GDN
# bf16 and fp32 KDA fall back: call 5's hang). The ps2 build's persistent GPU
# tests with the split forced (REPLAYSSM_P1_SPLIT=50; a deadlock would show
# as a shard cut at its limit), then the shares 100 / 50 / 60 / 70 / 80
# alternating, two rounds, and per-item timelines at 60 %.
#   run: bash experiments/2026-12-06_t48/t48-call6.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader
d=$(mktemp -d)
xz -dc gpubin-x/t48c.tar.xz | tar -C "$d" -x
REPLAYSSM_P1_SPLIT=50 bash scripts/gpu_shard_tests.sh "$d/ps2/replayssm_gpu_tests" \
  'DeltaGpu.Persistent*:DeltaGpu.PrepSplitRule:DeltaGpuArena.PersistentStep:Part/DualDeltaGpuPersistentStep.*:DualDeltaGpu.GraphReplayT1PersistentWorkspace' \
  "$OUT"
ENVS="p100:X=0;s50:REPLAYSSM_P1_SPLIT=50;s60:REPLAYSSM_P1_SPLIT=60;s70:REPLAYSSM_P1_SPLIT=70;s80:REPLAYSSM_P1_SPLIT=80" ONLY=ps2 BENCH_ARGS="\
--family gdn,kda --preset qwen35-122b,kimi --batch 128,256,512 --L 16 --state bf16 --modes replay --target-ms 2;\
--family kda --preset kimi --batch 256 --L 16 --state fp32 --modes replay --target-ms 2" \
  BENCH_TIMEOUT_S=60 PACK=gpubin-x/t48c.tar.xz REPS=2 OUT=$OUT/cmp timeout 320 bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "compare rc=$?"
sed -n '/^µs per step/,$p' "$OUT/cmp/log.txt"
mkdir -p "$OUT/tl"
for n in gdn:qwen35-122b kda:kimi; do
  f=${n%%:*}
  REPLAYSSM_P1_SPLIT=60 R1P_TIMING=$OUT/tl/$f.r1p timeout 60 "$d/ps2/replayssm" bench --backend cuda --family $f \
    --preset ${n#*:} --batch 256 --L 16 --state bf16 --modes replay --target-ms 2 > /dev/null 2>&1
  echo "== $f bf16 (ps2, split 60 %)"; python3 scripts/r1p_timeline.py "$OUT/tl/$f.r1p" 2>&1 | grep -E "prep|stream|SM end|launch" | tee "$OUT/tl/$f.txt"
done
rm -f "$OUT"/tl/*.r1p
(cd "$OUT" && tar czf res.tgz cmp tl && rm -rf cmp tl)
