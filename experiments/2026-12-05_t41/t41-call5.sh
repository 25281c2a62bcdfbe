#!/bin/bash
# t41, device call 5 (about 200 s; carry gpubin-x/t41pf.tar.xz): the Mamba-2
# T = 1 stream's sweep-ahead L2 prefetch with its distance at run time
# (branch t41-m2pf, t41-m2pf.patch: Params::t1_l2pf, on by default from 16
# blocks per SM on fp32 states, REPLAYSSM_M2_T1_L2PF overrides) against
# `main` (9744c67's CLI), alternating, two rounds, L = 16:
#   m2pf:def  the rule (H128: on at B = 256 / 512, off at 64 / 128)
#   m2pf:d0   forced off (the new SASS with no prefetch: the branch's cost)
#   m2pf:d1   forced on at every batch
#   m2pf:d2   two sweeps ahead
# Mamba-2 H128 fp32 B = 64 / 128 / 256 / 512, H64 and H96 (nemotron3-h64,
# -nano) fp32 B = 256; then m2pf's Mamba-2 T = 1 GPU tests, memcheck on the
# forced-prefetch test.
#   run: bash experiments/2026-12-05_t41/t41-call5.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader
M="--L 16 --target-ms 2 --modes replay --state fp32"
BENCH_ARGS="--family mamba2 --preset nemotron3 $M --batch 64,128,256,512;\
--family mamba2 --preset nemotron3-h64,nemotron3-nano $M --batch 256" \
ENVS="def:X=0;d0:REPLAYSSM_M2_T1_L2PF=0;d1:REPLAYSSM_M2_T1_L2PF=1;d2:REPLAYSSM_M2_T1_L2PF=2" \
ONLY="main m2pf" PACK=gpubin-x/t41pf.tar.xz REPS=2 OUT=$OUT/pf timeout 200 \
  bash scripts/gpu_compare.sh > /dev/null 2>&1
echo "pf rc $?"
tail -n 10 "$OUT/pf/log.txt"
GTEST_FILTER='Mamba2Gpu.Replay*:DualMamba2Gpu.*:Mamba2GpuArena.*:Mamba2Gpu.GraphReplay*' \
  SANITIZE_FILTER='Mamba2Gpu.ReplaySweepPrefetch:Mamba2Gpu.ReplayShortRunN128' SANITIZE_TIMEOUT_S=90 \
  PACK=gpubin-x/t41pf.tar.xz PACK_LABEL=m2pf SKIP_CPU_TESTS=1 TEST_SHARDS=8 DEADLINE_S=200 OUT=$OUT/tests \
  bash scripts/gpu_check.sh test sanitize > /dev/null 2>&1
grep -E "^(test|sanitize) " "$OUT/tests/log.txt" | tail -2
