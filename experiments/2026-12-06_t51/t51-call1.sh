#!/bin/bash
# t51, device call 1 (about 480 s; carry gpubin-x/t51m.tar.xz: `main` = main's
# build, 6c72d8e's code). The whole GPU suite of main in 16 shards (t50's final
# persistent-step rule, 0322513, and 6f12a4d never ran on a GPU); gpu_check.sh
# verify; the default step against the blocks (REPLAYSSM_R1P=0) for GDN HV32
# bf16 at B = 64 / 96 / 128 (the G = 2 threshold) and the target rows at
# B = 256; then ncu of one dual fp8 step each of Mamba-2 H128 and GDN HV64
# (every kernel of the step: duration, warp instructions, DRAM) and of one
# Mamba-2 T = 5 fp32 step.
#   run: bash experiments/2026-12-06_t51/t51-call1.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
d=$(mktemp -d)
xz -dc gpubin-x/t51m.tar.xz | tar -C "$d" -x
M=$d/main
JSON=$OUT/gpu_tests.json bash scripts/gpu_shard_tests.sh "$M/replayssm_gpu_tests" '*' "$OUT/shards" 16 220 | tail -n 4
PACK=gpubin-x/t51m.tar.xz PACK_LABEL=main OUT=$OUT/ver DEADLINE_S=80 bash scripts/gpu_check.sh verify 2>&1 | tail -n 3
echo "verify rc=${PIPESTATUS[0]}"
b() { timeout 40 "$M/replayssm" bench --backend cuda --L 16 --target-ms 2 --out "$OUT/bench.jsonl" "$@" 2>&1 | grep -E "^ *(gdn|kda|mamba2) " ; }
for B in 64 96 128; do
  echo "== gdn HV32 bf16 B=$B default / blocks"
  b --family gdn --preset qwen35 --batch $B --state bf16 --modes replay
  REPLAYSSM_R1P=0 b --family gdn --preset qwen35 --batch $B --state bf16 --modes replay
done
echo "== B = 256 targets (default)"
b --family gdn,kda,mamba2 --preset qwen35-122b,kimi,nemotron3 --batch 256 --state fp32,bf16 --modes baseline,replay
b --family gdn,mamba2 --preset qwen35-122b,nemotron3 --batch 256 --state fp32 --modes dual --read fp8
n() {  # ncu: every kernel of launches [skip, skip + count)
  local tag=$1 skip=$2 cnt=$3; shift 3
  timeout 120 ncu --clock-control none --launch-skip "$skip" --launch-count "$cnt" \
    --metrics gpu__time_duration.sum,smsp__inst_executed.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size \
    "$M/replayssm" bench --backend cuda --L 16 --batch 256 --target-ms 1 "$@" > "$OUT/ncu_$tag.txt" 2>&1
  echo "ncu $tag rc=$?"
}
n m2dual 40 8 --family mamba2 --preset nemotron3 --state fp32 --modes dual --read fp8
n gdndual 40 8 --family gdn --preset qwen35-122b --state fp32 --modes dual --read fp8
n m2t5 40 6 --family mamba2 --preset nemotron3 --state fp32 --modes replay --T 5
(cd "$OUT" && tar czf res.tgz ver shards && rm -rf ver shards)
