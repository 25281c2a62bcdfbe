#!/bin/bash
# t51, device call 2 (about 300 s; carry gpubin-x/t51q.tar.xz: `main` = main's
# build, `q16` = branch t51-m2q16: the packed copy's T = 1 history terms in
# the stream's epilogue, so an fp8 copy's block takes a group's 16 heads;
# the fp8 copy's sweeps on tensor cores with REPLAYSSM_M2_FP8_TC=1
# (quant/fp8_tc.cuh, the delta copies' helpers); the pack's next item into
# L2 with REPLAYSSM_M2_PACK_PF=1).
# 1. q16's Mamba-2 GPU tests, the DualMamba2Gpu ones again with the
#    tensor-core sweeps, the delta fp8 copy's tests (its helpers moved);
#    memcheck of the bulk-copy tests with the tensor-core sweeps.
# 2. Two rounds, alternating: main, q16, q16 tc, q16 pf on Mamba-2 H128
#    dual copies (fp32 checkpoint) at B = 64, 256, 512; the single-precision
#    T = 1 rows at B = 256 (main, q16).
# 3. ncu of q16 tc's dual fp8 step (B = 256).
#   run: bash experiments/2026-12-06_t51/t51-call2.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader
d=$(mktemp -d)
xz -dc gpubin-x/t51q.tar.xz | tar -C "$d" -x
M=$d/main Q=$d/q16
t() { timeout 150 "$Q/replayssm_gpu_tests" --gtest_brief=1 --gtest_filter="$1" 2>&1 | grep -v '^  ' | tail -n 4; }
t 'Mamba2Gpu*:DualMamba2Gpu*:SharedGpu.Mamba2*' &
REPLAYSSM_M2_FP8_TC=1 t 'DualMamba2Gpu*' > "$OUT/tc_tests.txt" &
t 'DualDeltaGpu.BulkCopySmall:DualDeltaGpuPersistentStep*:DualDeltaGpu.PersistentStep*' > "$OUT/delta_tests.txt" &
wait
echo "== tc:"; cat "$OUT/tc_tests.txt"; echo "== delta fp8:"; cat "$OUT/delta_tests.txt"
REPLAYSSM_M2_FP8_TC=1 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 1 "$Q/replayssm_gpu_tests" --gtest_brief=1 \
  --gtest_filter='DualMamba2Gpu.BulkCopySmall:DualMamba2Gpu.BulkCopyWholeGroupTiles' 2>&1 | tail -n 2
bn() { local tag=$1 bin=$2; shift 2
  timeout 90 "$bin" bench --backend cuda --family mamba2 --preset nemotron3 --L 16 --target-ms 2 --out "$OUT/rows_$tag.jsonl" "$@" 2>&1 \
    | grep -E "^ *mamba2 " | sed "s/^/$tag /"; }
for r in 1 2; do
  echo "== round $r"
  bn main "$M" --batch 64,256,512 --state fp32 --modes dual --read fp8,nvfp4,bf16
  bn q16 "$Q" --batch 64,256,512 --state fp32 --modes dual --read fp8,nvfp4,bf16
  REPLAYSSM_M2_FP8_TC=1 bn tc "$Q" --batch 64,256,512 --state fp32 --modes dual --read fp8
  REPLAYSSM_M2_PACK_PF=1 bn pf "$Q" --batch 256 --state fp32 --modes dual --read fp8,nvfp4
  REPLAYSSM_M2_PACK_PF=1 REPLAYSSM_M2_FP8_TC=1 bn tcpf "$Q" --batch 256 --state fp32 --modes dual --read fp8
  bn main "$M" --batch 256 --state fp32,bf16 --modes replay
  bn q16 "$Q" --batch 256 --state fp32,bf16 --modes replay
done
REPLAYSSM_M2_FP8_TC=1 timeout 100 ncu --clock-control none --launch-skip 40 --launch-count 3 \
  --metrics gpu__time_duration.sum,smsp__inst_executed.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size \
  "$Q/replayssm" bench --backend cuda --L 16 --batch 256 --target-ms 1 --family mamba2 --preset nemotron3 --state fp32 --modes dual --read fp8 > "$OUT/ncu_tc.txt" 2>&1
echo "ncu rc=$?"
