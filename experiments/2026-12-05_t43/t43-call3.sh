#!/bin/bash
# t43, device call 3 (about 420 s; carry gpubin-x/t43.tar.xz, `land` as in
# call 2: main 2551ab4 plus the persistent step's stage cap for 16-bit
# states and packed copies): ncu of the Mamba-2 baseline decode at batch 1
# (call 2 skipped past the baseline's launches: 100 here; H128 bf16 and
# fp32, warm caches), then land's whole GPU suite (16 shards) and
# gpu_check.sh's sanitizer subset (its 14 tests; DeltaGpu.PersistentStep is
# not among them: call 4 runs memcheck on it).
#   run: bash experiments/2026-12-05_t43/t43-call3.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
for st in bf16 fp32; do
  PACK=gpubin-x/t43.tar.xz PACK_LABEL=land OUT=$OUT/$st-baseline DEADLINE_S=50 PROFILE_KERNEL=mamba2_decode \
    PROFILE_SKIP=100 PROFILE_NCU_ARGS="--cache-control none" \
    PROFILE_ARGS="--family mamba2 --preset nemotron3 --modes baseline --batch 1 --L 16 --state $st --target-ms 5" \
    bash scripts/gpu_check.sh profile > /dev/null 2>&1
  echo "== $st baseline: $(grep -E '^profile ' "$OUT/$st-baseline/log.txt" | tail -1)"
  rm -f "$OUT/$st-baseline"/*.ncu-rep "$OUT/$st-baseline/sass.csv" "$OUT/$st-baseline/sass.txt"
done
PACK=gpubin-x/t43.tar.xz PACK_LABEL=land SKIP_CPU_TESTS=1 TEST_SHARDS=16 DEADLINE_S=${DEADLINE_S:-330} \
  OUT=$OUT/suite bash scripts/gpu_check.sh test sanitize > /dev/null 2>&1
grep -E "^(test|sanitize) " "$OUT/suite/log.txt" | tail -2
