#!/bin/bash
# t50, device call 5 (about 150 s; carry gpubin-x/t50c.tar.xz and
# gpubin-x/t50d.tar.xz): GDN HV64 bf16 B = 256, L = 16, three rounds
# alternating: k3 (persistent, by default), k3 with REPLAYSSM_R1P=0 (the
# blocks), hw with REPLAYSSM_R1P_NB=6 (t50-call3's 257.6 µs), hw2 (six
# result buffers, three record areas); then hw at NB = 6 with R1P_TIMING.
#   run: bash experiments/2026-12-06_t50/t50-call5.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader
c=$(mktemp -d) e=$(mktemp -d)
xz -dc gpubin-x/t50c.tar.xz | tar -C "$c" -x
xz -dc gpubin-x/t50d.tar.xz | tar -C "$e" -x
args="bench --backend cuda --family gdn --preset qwen35-122b --batch 256 --L 16 --state bf16 --modes replay --target-ms 2"
for r in 1 2 3; do
  echo "k3 $(timeout 40 "$c/k3/replayssm" $args 2>&1 | grep ' replay ')"
  echo "k3-blocks $(REPLAYSSM_R1P=0 timeout 40 "$c/k3/replayssm" $args 2>&1 | grep ' replay ')"
  echo "hw-nb6 $(REPLAYSSM_R1P_NB=6 timeout 40 "$c/hw/replayssm" $args 2>&1 | grep ' replay ')"
  echo "hw2 $(timeout 40 "$e/hw2/replayssm" $args 2>&1 | grep ' replay ')"
done
R1P_TIMING=$OUT/tl.bin REPLAYSSM_R1P_NB=6 timeout 40 "$c/hw/replayssm" $args 2>&1 | grep ' replay '
python3 scripts/r1p_timeline.py "$OUT/tl.bin" | head -12
rm -f "$OUT/tl.bin"
