#!/bin/bash
# t49, device call 3 (about 420 s; carry gpubin-x/t49c.tar.xz: `k3` = main's
# kernels before this session, `land` = the landing build of t49-split: 16-bit
# KDA's persistent step splits its preparation at 80 % by default). land's
# whole GPU suite in 16 shards beside memcheck on DeltaGpu.PersistentStep,
# then k3 against land, two rounds: KDA bf16 / f16 at B = 64 / 128 / 256 /
# 512 and rows the split leaves alone (GDN bf16, KDA fp32, KDA dual fp8 at
# B = 256).
#   run: bash experiments/2026-12-06_t49/t49-call3.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader
d=$(mktemp -d)
xz -dc gpubin-x/t49c.tar.xz | tar -C "$d" -x
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
(timeout 280 "$cs" --tool memcheck --error-exitcode 3 "$d/land/replayssm_gpu_tests" --gtest_brief=1 \
  --gtest_filter='DeltaGpu.PersistentStep' > "$OUT/memcheck.txt" 2>&1; echo "memcheck rc=$?" >> "$OUT/memcheck.txt") &
bash scripts/gpu_shard_tests.sh "$d/land/replayssm_gpu_tests" '*' "$OUT" 16 300 | tail -n 8
wait
tail -n 4 "$OUT/memcheck.txt"
BENCH_ARGS="\
--family kda --preset kimi --batch 64,128,256,512 --L 16 --state bf16,f16 --modes replay --target-ms 2;\
--family gdn,kda --preset qwen35-122b,kimi --batch 256 --L 16 --state bf16,fp32 --modes replay --target-ms 2;\
--family kda --preset kimi --batch 256 --L 16 --state fp32 --modes dual --read fp8 --target-ms 2" \
  BENCH_TIMEOUT_S=120 PACK=gpubin-x/t49c.tar.xz REPS=2 OUT=$OUT/cmp timeout 300 bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "compare rc=$?"
sed -n '/^µs per step/,$p' "$OUT/cmp/log.txt"
(cd "$OUT" && tar czf res.tgz cmp memcheck.txt && rm -rf cmp memcheck.txt)
