#!/usr/bin/env bash
# Run a GPU test binary's tests in parallel GoogleTest shards (one process
# each, all on the one GPU) and print a summary; a shard that runs past its
# limit is cut and shows no PASSED line (a hang shows so). gpu_check.sh's
# test stage runs the GPU suite through it.
#
#   bash scripts/gpu_shard_tests.sh BIN FILTER OUTDIR [SHARDS] [LIMIT_S]
#
# BIN: replayssm_gpu_tests; FILTER: --gtest_filter; OUTDIR: where testsN.txt
# land, tarred into tests.tgz at the end; SHARDS (default 8); LIMIT_S per
# shard (default 170). The environment passes through (e.g.
# REPLAYSSM_P1_SPLIT=50). JSON=FILE also writes the shards' GoogleTest JSON
# reports merged into FILE; LOG=FILE appends the shards' output to FILE
# instead of tarring it. Exit status 0 when every shard passed.
set -u
bin=$1 filter=$2 out=$3 shards=${4:-8} limit=${5:-170}
mkdir -p "$out"
pids=()
for ((i = 0; i < shards; ++i)); do
  json=()
  [[ -n ${JSON:-} ]] && json=(--gtest_output="json:$out/tests$i.json")
  GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i timeout "$limit" "$bin" --gtest_brief=1 --gtest_filter="$filter" \
    "${json[@]}" > "$out/tests$i.txt" 2>&1 &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
echo "tests rc=$rc"
for ((i = 0; i < shards; ++i)); do
  grep -qE "PASSED" "$out/tests$i.txt" || echo "shard $i: no PASSED line (failed or cut at ${limit} s)"
done
cat "$out"/tests[0-9]*.txt | grep -E "FAILED|PASSED|tests from" | tail -n $((2 * shards))
if [[ -n ${JSON:-} ]]; then
  python3 - "$out" "$shards" "$JSON" <<'PY'
import json, os, sys
out, n, dest = sys.argv[1], int(sys.argv[2]), sys.argv[3]
merged = {"testsuites": []}
for i in range(n):
    p = os.path.join(out, f"tests{i}.json")
    if os.path.exists(p):
        merged["testsuites"] += json.load(open(p)).get("testsuites", [])
        os.remove(p)
with open(dest + ".tmp", "w") as f:
    json.dump(merged, f, indent=1)
os.replace(dest + ".tmp", dest)
PY
fi
if [[ -n ${LOG:-} ]]; then
  for ((i = 0; i < shards; ++i)); do cat "$out/tests$i.txt" >> "$LOG"; done
  rm -f "$out"/tests[0-9]*.txt
else
  (cd "$out" && tar czf tests.tgz tests[0-9]*.txt && rm -f tests[0-9]*.txt)
fi
exit $rc
