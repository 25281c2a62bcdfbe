#!/bin/bash
# t59, device call 4 (~200 s; carry gpubin-x/t59.tar.xz, main at ae4f02f):
# ncu with per-line instruction and stall counts of the dual fold kernel
# (delta_dual_fold_mma_kernel; t59-call3: 133.7 µs and 35.9 M warp
# instructions per launch for GDN HV64 fp8, 205.6 µs / 71.0 M for nvfp4,
# B = 256, L = 16) and of the GDN nvfp4 persistent stream
# (delta_replay1p_kernel: 188.1 µs / 122.1 M against fp8's 112.5 / 44.0).
#   run: bash experiments/2026-12-07_t59/t59-call4.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader | head -1
prof() {  # name kernel args
  PACK=gpubin-x/t59.tar.xz PACK_LABEL=ae4f02f OUT=$OUT/$1 DEADLINE_S=100 PROFILE_KERNEL=$2 PROFILE_SKIP=${SKIP:-20} \
    PROFILE_ARGS="$3" bash scripts/gpu_check.sh profile > /dev/null 2>&1
  echo "== $1: $(grep -E '^profile ' "$OUT/$1/log.txt" | tail -1)"
  grep -E "Duration|Registers Per|Executed Ipc Active|Issue Slots Busy|DRAM Throughput|Executed Instructions  |Achieved Occupancy|Block Limit" \
    "$OUT/$1/profile.txt" | tr -s ' ' | head -12
  head -n 45 "$OUT/$1/profile_lines.txt"
  xz -9 "$OUT/$1/sass.csv" 2>/dev/null
  rm -f "$OUT/$1"/*.ncu-rep "$OUT/$1/sass.txt" "$OUT/$1/sass_gi.txt"
}
A="--batch 256 --L 16 --state fp32 --target-ms 1 --modes dual"
prof fold_gdn_fp8 delta_dual_fold_mma_kernel "--family gdn --preset qwen35-122b $A --read fp8"
prof fold_gdn_nvfp4 delta_dual_fold_mma_kernel "--family gdn --preset qwen35-122b $A --read nvfp4"
prof r1p_gdn_nvfp4 delta_replay1p_kernel "--family gdn --preset qwen35-122b $A --read nvfp4"
