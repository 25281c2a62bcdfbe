#!/bin/bash
# t38, device call 1 (about 450 s; carry gpubin-x/t38.tar.xz): `kl`
# (host-computed block layouts for KDA's replay kernels and the persistent
# step's preparation only) against `land` (4d41a37's build).
# 1. kl's delta GPU tests (every test naming Delta, 16 shards) and a
#    sanitizer subset;
# 2. both builds alternating, two rounds: KDA T = 1 replay fp32 B = 64 / 256,
#    bf16 B = 256, T = 5 fp32 / bf16, dual fp8 / nvfp4; GDN HV64 T = 1 fp32
#    (SASS-identical: a control) and bf16 (persistent), T = 5 bf16 (its
#    16-bit tensor-core instance's SASS moved), dual fp8 / nvfp4; Mamba-2
#    H128 T = 1 fp32 / bf16 (identical code: not measured since 4d41a37).
#   run: bash experiments/2026-12-05_t38/t38-call1.sh
set -u
cd "$(dirname "$0")/../.."
q=$(mktemp -d)
xz -dc gpubin-x/t38.tar.xz | tar -C "$q" -x
touch "$q/kl/PREBUILT"
GTEST_FILTER='*Delta*' SANITIZE_FILTER='DeltaGpu.ReplayBulkSmall:DeltaGpu.SpecMmaSmall:DeltaGpu.PersistentMatchesBlockKernel' \
  BUILD_DIR=$q/kl SKIP_CPU_TESTS=1 TEST_SHARDS=16 DEADLINE_S=240 OUT=$OUT/tests \
  bash scripts/gpu_check.sh test sanitize > /dev/null 2>&1
grep -E "^(test|sanitize) " "$OUT/tests/log.txt" | tail -2
K="--family kda --preset kimi --L 16 --target-ms 2"
G="--family gdn --preset qwen35-122b --L 16 --target-ms 2"
BENCH_ARGS="$K --modes replay --batch 64,256 --state fp32;\
$K --modes replay --batch 256 --state bf16;\
$K --modes replay --T 5 --batch 256 --state fp32,bf16;\
$K --modes dual --batch 256 --state fp32 --read fp8,nvfp4;\
$G --modes replay --batch 256 --state fp32,bf16;\
$G --modes replay --T 5 --batch 256 --state bf16;\
$G --modes dual --batch 256 --state fp32 --read fp8,nvfp4;\
--family mamba2 --preset nemotron3 --L 16 --target-ms 2 --modes replay --batch 256 --state fp32,bf16" \
ONLY="land kl" PACK=gpubin-x/t38.tar.xz REPS=2 OUT=$OUT/bench timeout 330 \
  bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "bench rc $?"
tail -n 45 "$OUT/bench/log.txt"
