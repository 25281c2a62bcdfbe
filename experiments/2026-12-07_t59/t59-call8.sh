#!/bin/bash
# t59, device call 8 (~330 s; carry gpubin-x/t59scan.tar.xz: `main` =
# ae4f02f, `scan` = branch t59-nv4tc with the dual fold's scan geometry
# (REPLAYSSM_FOLD_SCAN = blocks per SM; 0, the default: a block per (row,
# head group) as before, in the restructured kernel). The dual delta suites
# of `scan` with REPLAYSSM_FOLD_SCAN=0 and =2 side by side (6 shards each),
# memcheck and racecheck of DualDeltaGpu.BulkCopySmall at =2; then the dual
# GDN fp8 / nvfp4 and KDA fp8 rows at B = 256 / 512: main, scan at 0 / 1 /
# 2, alternating, two rounds. Files: log.txt, tests_s0.json, tests_s2.json,
# rows.jsonl.
#   run: bash experiments/2026-12-07_t59/t59-call8.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tee "$OUT/log.txt"
d=$(mktemp -d)
xz -dc gpubin-x/t59scan.tar.xz | tar -C "$d" -x
T=$d/scan/replayssm_gpu_tests
for v in 0 2; do
  REPLAYSSM_FOLD_SCAN=$v JSON=$OUT/tests_s$v.json bash scripts/gpu_shard_tests.sh "$T" '*DualDelta*' "$d/t$v" 6 ${TEST_LIMIT:-200} > "$d/sum$v.txt" 2>&1 &
done
wait
for v in 0 2; do echo "== tests FOLD_SCAN=$v"; cat "$d/sum$v.txt"; grep -h -B2 -A12 'Failure' "$d"/t$v/tests*.txt 2>/dev/null | head -30; done | tee -a "$OUT/log.txt"
for tool in memcheck racecheck; do
  echo "== $tool FOLD_SCAN=2" | tee -a "$OUT/log.txt"
  REPLAYSSM_FOLD_SCAN=2 timeout 90 compute-sanitizer --tool $tool --error-exitcode 1 "$T" \
    --gtest_filter='DualDeltaGpu.BulkCopySmall' --gtest_brief=1 2>&1 | tail -n 3 | tee -a "$OUT/log.txt"
done
A="--backend cuda --L 16 --state fp32 --modes dual --target-ms 2 --batch 256,512"
run() {  # label, binary, env...
  local lab=$1 bin=$2; shift 2
  env "$@" timeout 80 "$bin" bench $A --family gdn --preset qwen35-122b --read fp8,nvfp4 --out "$d/${lab}_g_r$r.jsonl" 2>&1 | grep "dual/" | sed "s/^/$lab r$r /" | tee -a "$OUT/log.txt"
  env "$@" timeout 60 "$bin" bench $A --family kda --preset kimi --read fp8 --out "$d/${lab}_k_r$r.jsonl" 2>&1 | grep "dual/" | sed "s/^/$lab r$r /" | tee -a "$OUT/log.txt"
}
for r in 1 2; do
  run main "$d/main/replayssm" X=0
  run scan0 "$d/scan/replayssm" REPLAYSSM_FOLD_SCAN=0
  run scan1 "$d/scan/replayssm" REPLAYSSM_FOLD_SCAN=1
  run scan2 "$d/scan/replayssm" REPLAYSSM_FOLD_SCAN=2
done
for f in "$d"/*_r[12].jsonl; do
  b=$(basename "$f" .jsonl); python3 -c "
import json,sys
for l in open(sys.argv[1]):
    if l.strip(): r=json.loads(l); r['variant'],r['round']=sys.argv[2].split('_')[0],sys.argv[2][-1]; print(json.dumps(r))" "$f" "$b"
done > "$OUT/rows.jsonl"
