#!/bin/bash
# t57, device call 1: t56-call1's short form for little device time (carry
# gpubin-x/t57.tar.xz: `main` = main's build at c97a465's code, `a3` =
# branch t56-kda3 at 8861ec0). A3's and REC16's byte-for-byte tests (the
# a3 build), then KDA fp32 T = 5, L = 16, B = 64 / 256 / 512 rows of main,
# split (the branch, A3 off), a3 and a3r0 (A3 without REC16), builds
# alternating, ROUNDS rounds (default 2), and T = 8 B = 256 of main / split
# / a3 in round 1. ~200 s. Rows: r<round>_<variant>_<part>.jsonl.
#   run: bash experiments/2026-12-07_t57/t57-call1.sh
PACK=gpubin-x/t57.tar.xz A3C=8861ec0 SHORT=1 SKIP_SAN=1 VARIANTS=${VARIANTS:-main split a3 a3r0} \
  exec bash "$(dirname "$0")/../2026-12-07_t56/t56-call1.sh"
