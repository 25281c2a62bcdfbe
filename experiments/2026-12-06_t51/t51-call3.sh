#!/bin/bash
# t51, device call 3 (about 330 s; carry gpubin-x/t51f.tar.xz: `main` = main's
# build, `fin` = the landing form: an fp8 copy's T = 1 history terms in the
# stream's epilogue, so its block takes a group's 16 heads; nvfp4 / bf16
# copies and every other kernel as on main). The whole GPU suite of fin in
# 16 shards; memcheck and racecheck of the bulk-copy tests; then main
# against fin, two rounds alternating: Mamba-2 dual copies (fp32
# checkpoint) H128 at B = 64, 128, 256, 512 and H256 fp8 at B = 64, 256; the
# single-precision T = 1 rows at B = 256.
#   run: bash experiments/2026-12-06_t51/t51-call3.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader
d=$(mktemp -d)
xz -dc gpubin-x/t51f.tar.xz | tar -C "$d" -x
M=$d/main F=$d/fin
JSON=$OUT/gpu_tests.json bash scripts/gpu_shard_tests.sh "$F/replayssm_gpu_tests" '*' "$OUT/shards" 16 220 | tail -n 3
for tool in memcheck racecheck; do
  echo "== $tool"
  timeout 100 compute-sanitizer --tool $tool --error-exitcode 1 "$F/replayssm_gpu_tests" --gtest_brief=1 \
    --gtest_filter='DualMamba2Gpu.BulkCopySmall:DualMamba2Gpu.BulkCopyWholeGroupTiles' 2>&1 | tail -n 2
done
A="--backend cuda --family mamba2 --L 16 --target-ms 2"
for r in 1 2; do
  echo "== round $r"
  timeout 90 $M/replayssm bench $A --out $OUT/r${r}_main_h128.jsonl --preset nemotron3 --batch 64,128,256,512 --state fp32 --modes dual --read fp8,nvfp4,bf16 2>&1 | grep "dual/" | sed 's/^/main /'
  timeout 90 $F/replayssm bench $A --out $OUT/r${r}_fin_h128.jsonl --preset nemotron3 --batch 64,128,256,512 --state fp32 --modes dual --read fp8,nvfp4,bf16 2>&1 | grep "dual/" | sed 's/^/fin /'
  timeout 90 $M/replayssm bench $A --out $OUT/r${r}_main_h256.jsonl --preset nemotron-ultra --batch 64,256 --state fp32 --modes dual --read fp8 2>&1 | grep "dual/" | sed 's/^/main /'
  timeout 90 $F/replayssm bench $A --out $OUT/r${r}_fin_h256.jsonl --preset nemotron-ultra --batch 64,256 --state fp32 --modes dual --read fp8 2>&1 | grep "dual/" | sed 's/^/fin /'
  timeout 90 $M/replayssm bench $A --out $OUT/r${r}_main_t1.jsonl --preset nemotron3 --batch 256 --state fp32,bf16 --modes replay 2>&1 | grep " replay" | sed 's/^/main /'
  timeout 90 $F/replayssm bench $A --out $OUT/r${r}_fin_t1.jsonl --preset nemotron3 --batch 256 --state fp32,bf16 --modes replay 2>&1 | grep " replay" | sed 's/^/fin /'
done
(cd "$OUT" && cat r*_*.jsonl > rows.jsonl && rm -f r*_*.jsonl && tar czf shards.tgz shards && rm -rf shards)
# (each bench --out file holds its own invocation's rows: the CLI rewrites it)
