#!/bin/bash
# t59, device call 2 (~270 s; carry gpubin-x/t59.tar.xz): the three shards
# of t59-call1's GPU suite that ran past its 200 s limit (0, 5, 7 of 8),
# whole, at 420 s. Files: tests<i>.json, tests<i>.txt.
#   run: bash experiments/2026-12-07_t59/t59-call2.sh
d=$(mktemp -d); xz -dc gpubin-x/t59.tar.xz | tar -C $d -x; B=$d/ae4f02f/replayssm_gpu_tests; for i in 0 5 7; do GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$i timeout 420 $B --gtest_brief=1 --gtest_output=json:$OUT/tests$i.json > $OUT/tests$i.txt 2>&1 & done; wait; for i in 0 5 7; do echo "shard $i"; grep -E "FAILED|PASSED|tests from|Failure" $OUT/tests$i.txt | tail -5; done
