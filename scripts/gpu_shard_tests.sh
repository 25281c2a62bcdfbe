#!/usr/bin/env bash
# Run a GPU test binary's tests in parallel GoogleTest shards (one process
# each, all on the one GPU) and print a summary; a shard that runs past its
# limit is cut and shows no PASSED line (a hang shows so).
#
#   bash scripts/gpu_shard_tests.sh BIN FILTER OUTDIR [SHARDS] [LIMIT_S]
#
# BIN: replayssm_gpu_tests; FILTER: --gtest_filter; OUTDIR: where
# testsN.txt land, tarred into tests.tgz at the end; SHARDS (default 8);
# LIMIT_S per shard (default 170). The environment passes through (e.g.
# REPLAYSSM_P1_SPLIT=50). Exit status 0 when every shard passed.
set -u
bin=$1 filter=$2 out=$3 shards=${4:-8} limit=${5:-170}
mkdir -p "$out"
pids=()
for ((i = 0; i < shards; ++i)); do
  GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i timeout "$limit" "$bin" --gtest_brief=1 --gtest_filter="$filter" \
    > "$out/tests$i.txt" 2>&1 &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
echo "tests rc=$rc"
for ((i = 0; i < shards; ++i)); do
  grep -qE "PASSED" "$out/tests$i.txt" || echo "shard $i: no PASSED line (failed or cut at ${limit} s)"
done
cat "$out"/tests*.txt | grep -E "FAILED|PASSED|tests from" | tail -n $((2 * shards))
(cd "$out" && tar czf tests.tgz tests*.txt && rm -f tests[0-9]*.txt)
exit $rc
