#!/bin/bash
# t58, device call 3 (~150 s; carry gpubin-x/t57.tar.xz): t53-call2's ncu
# profile of one KDA T = 5 fp32 launch (delta_replay_kernel, B = 256,
# L = 16) on the branch build `a3` with A3 on (REPLAYSSM_SPEC_A3=1: three
# blocks per SM), per source line; against v54's (main, two blocks per SM:
# IPC 1.56, 0.58 eligible warps per scheduler). A3=0 profiles the same
# build with A3 off.
#   run: bash experiments/2026-12-07_t58/t58-call3.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
export PACK=gpubin-x/t57.tar.xz PACK_LABEL=a3 DEADLINE_S=300 REPLAYSSM_SPEC_A3=${A3:-1}
export PROFILE_KERNEL=delta_replay_kernel
export PROFILE_ARGS="--family kda --preset kimi --modes replay --batch 256 --L 16 --T 5 --state fp32 --target-ms 1"
bash scripts/gpu_check.sh profile
head -n 60 "$OUT/profile_callers.txt"
grep -E "Duration|Executed Ipc|Issue Slots|Eligible|Registers|Shared Memory|Occupancy|Executed Instructions|DRAM Through|Grid Size|Block Size|Local" "$OUT/profile.txt" | head -40
xz -T4 "$OUT/sass.csv" "$OUT/sass_gi.txt" "$OUT/sass.txt"
rm -f "$OUT/profile.ncu-rep"
ls -la "$OUT"
