#!/bin/bash
# t50, device call 4 (about 420 s; carry gpubin-x/t50d.tar.xz: `k3` = main's
# kernels, `hw2` = branch t50-hist: the history warp copies the records of
# every item whose header is known into three record areas (apart from the
# result buffers, GDN back at six). hw2's whole GPU suite in 16 shards
# beside memcheck of forced persistent verifies; gpu_check.sh's verify stage
# on hw2; k3 / hw2 at B = 128 / 256 / 512, two rounds; hw2's GDN bf16 at
# 3 / 4 / 8 result buffers; per-item timelines of hw2.
#   run: bash experiments/2026-12-06_t50/t50-call4.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader
d=$(mktemp -d)
xz -dc gpubin-x/t50d.tar.xz | tar -C "$d" -x
N=$d/hw2
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
(for fam in kda gdn; do
   REPLAYSSM_R1P=1 timeout 100 "$cs" --tool memcheck --error-exitcode 3 "$N/replayssm" verify --backend cuda --quick \
     --family $fam --state bf16 --act bf16 --no-dual 2>&1 | tail -n 2
   echo "memcheck $fam rc=${PIPESTATUS[0]}"
 done > "$OUT/memcheck.txt" 2>&1) &
bash scripts/gpu_shard_tests.sh "$N/replayssm_gpu_tests" '*' "$OUT/shards" 16 230 | tail -n 4
wait
grep "rc=" "$OUT/memcheck.txt"
PACK=gpubin-x/t50d.tar.xz PACK_LABEL=hw2 OUT=$OUT/ver DEADLINE_S=80 bash scripts/gpu_check.sh verify 2>&1 | tail -n 3
echo "verify rc=${PIPESTATUS[0]}"
BENCH_ARGS="\
--family gdn,kda --preset qwen35-122b,kimi --batch 128,256,512 --L 16 --state bf16,fp32 --modes replay --target-ms 2;\
--family gdn,kda --preset qwen35-122b,kimi --batch 256 --L 16 --state fp32 --modes dual --read fp8,nvfp4 --target-ms 2" \
  BENCH_TIMEOUT_S=100 PACK=gpubin-x/t50d.tar.xz REPS=2 OUT=$OUT/cmp timeout 300 bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "compare rc=$?"
sed -n '/^µs per step/,$p' "$OUT/cmp/log.txt"
for nb in 3 4 8; do
  echo "== hw2 gdn bf16 REPLAYSSM_R1P_NB=$nb"
  REPLAYSSM_R1P_NB=$nb timeout 40 "$N/replayssm" bench --backend cuda --family gdn --preset qwen35-122b --batch 256 \
    --L 16 --state bf16 --modes replay --target-ms 2 2>&1 | grep replay
done
for c in "gdn qwen35-122b bf16" "kda kimi fp32"; do
  set -- $c
  echo "== hw2 $1 $3"
  R1P_TIMING=$OUT/tl.bin timeout 40 "$N/replayssm" bench --backend cuda --family $1 --preset $2 --batch 256 \
    --L 16 --state $3 --modes replay --target-ms 2 2>&1 | grep replay
  python3 scripts/r1p_timeline.py "$OUT/tl.bin" | grep -v "^loader: header\|items per SM\|flushing items per"
done
rm -f "$OUT/tl.bin"
(cd "$OUT" && tar czf res.tgz cmp ver shards memcheck.txt && rm -rf cmp ver shards)
