#!/bin/bash
# t50, device call 2 (about 500 s; carry gpubin-x/t50b.tar.xz: `k3` = main's
# kernels, `rec` = branch t50-hist with per-buffer record areas (the fold's
# or the history's d records), the records' copies one per loader lane,
# GDN at three result buffers). rec's whole GPU suite in 16 shards beside
# racecheck of a forced persistent KDA bf16 verify on k3 and on rec (the
# first hazards printed); gpu_check.sh's verify stage on rec; k3 against rec
# at B = 256, two rounds; per-item timelines of both (GDN bf16, KDA bf16,
# KDA fp32).
#   run: bash experiments/2026-12-06_t50/t50-call2.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader
d=$(mktemp -d)
xz -dc gpubin-x/t50b.tar.xz | tar -C "$d" -x
N=$d/rec
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
(for b in k3 rec; do
   REPLAYSSM_R1P=1 timeout 100 "$cs" --tool racecheck --racecheck-report hazard --print-limit 6 --error-exitcode 3 \
     "$d/$b/replayssm" verify --backend cuda --quick --family kda --state bf16 --act bf16 --no-dual 2>&1 |
     grep -v "^=========     \(Saved\|#\)" | head -n 40
   echo "racecheck $b rc=${PIPESTATUS[0]}"
 done > "$OUT/racecheck.txt" 2>&1) &
bash scripts/gpu_shard_tests.sh "$N/replayssm_gpu_tests" '*' "$OUT/shards" 16 230 | tail -n 4
wait
grep "rc=" "$OUT/racecheck.txt"
PACK=gpubin-x/t50b.tar.xz PACK_LABEL=rec OUT=$OUT/ver DEADLINE_S=80 bash scripts/gpu_check.sh verify 2>&1 | tail -n 3
echo "verify rc=${PIPESTATUS[0]}"
BENCH_ARGS="\
--family gdn,kda --preset qwen35-122b,kimi --batch 256 --L 16 --state bf16,fp32 --modes replay --target-ms 2;\
--family gdn,kda --preset qwen35-122b,kimi --batch 256 --L 16 --state fp32 --modes dual --read fp8 --target-ms 2" \
  BENCH_TIMEOUT_S=100 PACK=gpubin-x/t50b.tar.xz REPS=2 OUT=$OUT/cmp timeout 200 bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "compare rc=$?"
sed -n '/^µs per step/,$p' "$OUT/cmp/log.txt"
for b in k3 rec; do
  for c in "gdn qwen35-122b bf16" "kda kimi bf16" "kda kimi fp32"; do
    set -- $c
    echo "== $b $1 $3"
    R1P_TIMING=$OUT/tl.bin timeout 40 "$d/$b/replayssm" bench --backend cuda --family $1 --preset $2 --batch 256 \
      --L 16 --state $3 --modes replay --target-ms 2 2>&1 | grep replay
    python3 scripts/r1p_timeline.py "$OUT/tl.bin"
  done
done
rm -f "$OUT/tl.bin"
(cd "$OUT" && tar czf res.tgz cmp ver shards racecheck.txt && rm -rf cmp ver shards)
