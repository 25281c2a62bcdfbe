#!/bin/bash
# t58, device call 1: t57-call1 (t56-call1's short form, carry
# gpubin-x/t57.tar.xz) with a3pf0 in place of a3r0: A3 with the block-ahead
# record prefetch off (REPLAYSSM_SPEC_REC_PF=0). With REC16 a block's
# records come in one round of cp.async, and the prefetch's one warp was
# 3.3 % of the instructions in v54's profile. ~200 s (ROUNDS=1: ~120 s).
#   run: bash experiments/2026-12-07_t58/t58-call1.sh
VARIANTS=${VARIANTS:-main split a3 a3pf0} exec bash "$(dirname "$0")/../2026-12-07_t57/t57-call1.sh"
