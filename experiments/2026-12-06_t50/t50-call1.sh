#!/bin/bash
# t50, device call 1 (about 540 s; carry gpubin-x/t50a.tar.xz: `k3` = main's
# kernels (t47k, e6d5ea0), `hist` = branch t50-hist: the history rows in a
# history warp of the stream block). hist's whole GPU suite in 16 shards
# beside memcheck and racecheck of a forced persistent verify (KDA bf16,
# GDN bf16); gpu_check.sh's verify stage on hist (the second run with
# CUDA_LAUNCH_BLOCKING=1 and REPLAYSSM_R1P=1: forward progress); k3 against
# hist at B = 256 (GDN / KDA bf16 and fp32, dual fp8), two rounds; per-item
# timelines of hist (GDN bf16, KDA fp32).
#   run: bash experiments/2026-12-06_t50/t50-call1.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader
d=$(mktemp -d)
xz -dc gpubin-x/t50a.tar.xz | tar -C "$d" -x
H=$d/hist
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
(for fam in kda gdn; do for tool in memcheck racecheck; do
   REPLAYSSM_R1P=1 timeout 100 "$cs" --tool $tool --error-exitcode 3 "$H/replayssm" verify --backend cuda --quick \
     --family $fam --state bf16 --act bf16 --no-dual 2>&1 | tail -n 3
   echo "$tool $fam rc=${PIPESTATUS[0]}"
 done; done > "$OUT/sanitize.txt" 2>&1) &
bash scripts/gpu_shard_tests.sh "$H/replayssm_gpu_tests" '*' "$OUT/shards" 16 230 | tail -n 8
wait
cat "$OUT/sanitize.txt"
PACK=gpubin-x/t50a.tar.xz PACK_LABEL=hist OUT=$OUT/ver DEADLINE_S=80 bash scripts/gpu_check.sh verify 2>&1 | tail -n 12
echo "verify rc=${PIPESTATUS[0]}"
BENCH_ARGS="\
--family gdn,kda --preset qwen35-122b,kimi --batch 256 --L 16 --state bf16,fp32 --modes replay --target-ms 2;\
--family gdn,kda --preset qwen35-122b,kimi --batch 256 --L 16 --state fp32 --modes dual --read fp8 --target-ms 2" \
  BENCH_TIMEOUT_S=100 PACK=gpubin-x/t50a.tar.xz REPS=2 OUT=$OUT/cmp timeout 200 bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "compare rc=$?"
sed -n '/^µs per step/,$p' "$OUT/cmp/log.txt"
for c in "gdn qwen35-122b bf16" "kda kimi fp32"; do
  set -- $c
  R1P_TIMING=$OUT/tl_$1_$3.bin timeout 40 "$H/replayssm" bench --backend cuda --family $1 --preset $2 --batch 256 \
    --L 16 --state $3 --modes replay --target-ms 2 2>&1 | grep replay
  python3 scripts/r1p_timeline.py "$OUT/tl_$1_$3.bin"
done
(cd "$OUT" && rm -f tl_*.bin && tar czf res.tgz cmp ver shards sanitize.txt && rm -rf cmp ver shards sanitize.txt)
