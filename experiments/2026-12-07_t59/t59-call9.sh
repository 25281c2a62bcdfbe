#!/bin/bash
# t59, device call 9 (~150 s; carry gpubin-x/t59m2f8.tar.xz: `main` = main's
# build at 22b8ca2's code (t59-call7's tc3), `m2f8` = branch t59-m2fp8tc:
# the Mamba-2 fp8 copy's T = 1 bulk stream on tensor cores too). The dual
# Mamba-2 suite of m2f8 (4 shards), memcheck of its packed precision test;
# then Mamba-2 H128 dual fp8 / nvfp4 at B = 256 / 512, builds alternating,
# two rounds. Files: log.txt, tests.json, rows.jsonl.
#   run: bash experiments/2026-12-07_t59/t59-call9.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tee "$OUT/log.txt"
d=$(mktemp -d)
xz -dc gpubin-x/t59m2f8.tar.xz | tar -C "$d" -x
T=$d/m2f8/replayssm_gpu_tests
JSON=$OUT/tests.json bash scripts/gpu_shard_tests.sh "$T" '*DualMamba2*' "$d/t" 4 ${TEST_LIMIT:-100} 2>&1 | tee -a "$OUT/log.txt"
grep -h -B2 -A12 'Failure' "$d"/t/tests*.txt 2>/dev/null | head -30 | tee -a "$OUT/log.txt"
echo "== memcheck" | tee -a "$OUT/log.txt"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 1 "$T" \
  --gtest_filter='DualMamba2Gpu.PackedCopyReadsMatchCpuBeforeAFlush' --gtest_brief=1 2>&1 | tail -n 3 | tee -a "$OUT/log.txt"
for r in 1 2; do
  for b in main m2f8; do
    timeout 40 "$d/$b/replayssm" bench --backend cuda --family mamba2 --preset nemotron3 --batch 256,512 --L 16 --state fp32 \
      --modes dual --read fp8,nvfp4 --target-ms 2 --out "$d/${b}_r$r.jsonl" 2>&1 | grep "dual/" | sed "s/^/$b r$r /" | tee -a "$OUT/log.txt"
  done
done
for f in "$d"/*_r[12].jsonl; do
  b=$(basename "$f" .jsonl); python3 -c "
import json,sys
for l in open(sys.argv[1]):
    if l.strip(): r=json.loads(l); r['variant'],r['round']=sys.argv[2].split('_')[0],sys.argv[2][-1]; print(json.dumps(r))" "$f" "$b"
done > "$OUT/rows.jsonl"
