#!/bin/bash
# t48, device call 4 (about 150 s; carry gpubin-x/t47k.tar.xz, build `k3`,
# main's kernels): ncu (full set, --clock-control none) of one launch each of
# the persistent step's preparation kernel and its stream kernel, GDN HV64
# bf16 and KDA bf16, B = 256, L = 16. Under ncu the two kernels run one after
# the other, so each is measured alone: the preparation's IPC and stalls,
# and the stream without the preparation beside it.
#   run: bash experiments/2026-12-06_t48/t48-call4.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader
d=$(mktemp -d)
xz -dc gpubin-x/t47k.tar.xz | tar -C "$d" -x
mkdir -p "$OUT/ncu"
for c in gdn:qwen35-122b kda:kimi; do
  f=${c%%:*}
  for k in delta_prep1_kernel delta_replay1p_kernel; do
    timeout 120 ncu --clock-control none --set full --import-source yes -k "regex:$k" --launch-skip 20 --launch-count 1 \
      -f -o "$OUT/ncu/${f}_$k" "$d/k3/replayssm" bench --backend cuda --family $f --preset ${c#*:} --batch 256 --L 16 \
      --state bf16 --modes replay --target-ms 1 > /dev/null 2>&1
    echo "== $f $k rc=$?"
    ncu -i "$OUT/ncu/${f}_$k.ncu-rep" --page details > "$OUT/ncu/${f}_$k.txt" 2>&1
    grep -E "^\s+(Duration|Executed Ipc Active|Issue Slots Busy|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per Thread|Executed Instructions |No Eligible|Active Warps Per Scheduler|Eligible Warps Per Scheduler|Warp Cycles Per Issued Instruction)" "$OUT/ncu/${f}_$k.txt"
  done
done
(cd "$OUT" && tar czf ncu.tgz ncu && rm -rf ncu)
