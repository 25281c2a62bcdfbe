#!/bin/bash
# t58, device call 5 (~80 s; carry gpubin-x/t57.tar.xz): the a3 build's
# speculative delta tests with A3 forced on and the block-ahead record
# prefetch off (the environment reaches every test: DeltaGpu.SpecThreeBlocksChoice,
# which checks the default, fails by design then), 8 shards.
#   run: bash experiments/2026-12-07_t58/t58-call5.sh
set -u
cd "$(dirname "$0")/../.."
d=$(mktemp -d); xz -dc gpubin-x/t57.tar.xz | tar -C $d -x
export REPLAYSSM_SPEC_A3=1 REPLAYSSM_SPEC_REC_PF=0
F='DeltaGpu.Spec*:DeltaGpu.GraphReplayChangingAcceptances:Part/DeltaGpuSpec*:Part/DeltaGpuSpeculative*:DeltaGpuArena.SpeculativeWindows:DeltaGpuArena.PaddedRows'
bash scripts/gpu_shard_tests.sh $d/a3/replayssm_gpu_tests "$F" $OUT/tests 8 130 > $OUT/shards.txt 2>&1
tar -xOzf $OUT/tests/tests.tgz 2>/dev/null | grep -h "PASSED\|FAILED\|tests from.*ran\|no PASSED" | sort | uniq -c
grep "no PASSED\|rc=" $OUT/shards.txt | head
