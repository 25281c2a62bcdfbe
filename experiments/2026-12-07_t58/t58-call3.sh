#!/bin/bash
# t58, device call 3 (~150 s; carry gpubin-x/t57.tar.xz): t53-call2's ncu
# profile of one KDA T = 5 fp32 launch (delta_replay_kernel, B = 256,
# L = 16) on the branch build `a3` with A3 on (REPLAYSSM_SPEC_A3=1: three
# blocks per SM), per source line; against v54's (main, two blocks per SM:
# IPC 1.56, 0.58 eligible warps per scheduler). A3=0 profiles the same
# build with A3 off. (Not run in t58.)
#   run: bash experiments/2026-12-07_t58/t58-call3.sh
export REPLAYSSM_SPEC_A3=${A3:-1}
PACK=gpubin-x/t57.tar.xz PACK_LABEL=a3 exec bash "$(dirname "$0")/../2026-12-06_t53/t53-call2.sh"
