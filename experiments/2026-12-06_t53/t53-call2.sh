#!/bin/bash
# t53, device call 2 (carry gpubin-x/t53m.tar.xz): ncu --set full of one
# KDA T = 5 fp32 replay_spec launch (delta_replay_kernel, B = 256, L = 16)
# on main's build, per source line (scripts/ncu_lines.py, innermost lines
# and -gi callers); the SASS CSV and nvdisasm -gi text come back xz'd.
# PACK / PACK_LABEL: another pack's build (t58-call3).
#   run: bash experiments/2026-12-06_t53/t53-call2.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
export PACK=${PACK:-gpubin-x/t53m.tar.xz} PACK_LABEL=${PACK_LABEL:-main} DEADLINE_S=300
export PROFILE_KERNEL=delta_replay_kernel
export PROFILE_ARGS="--family kda --preset kimi --modes replay --batch 256 --L 16 --T 5 --state fp32 --target-ms 1"
bash scripts/gpu_check.sh profile
head -n 60 "$OUT/profile_callers.txt"
grep -E "Duration|Executed Ipc|Issue Slots|Eligible|Registers|Shared Memory|Occupancy|Executed Instructions|DRAM Through|Grid Size|Block Size" "$OUT/profile.txt" | head -30
xz -T4 "$OUT/sass.csv" "$OUT/sass_gi.txt" "$OUT/sass.txt"
rm -f "$OUT/profile.ncu-rep"
ls -la "$OUT"
