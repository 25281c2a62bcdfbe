#!/bin/bash
# t50, device call 7 (about 300 s; carry gpubin-x/t50m.tar.xz: `main` = the
# landing build, heuristics.h's persistent-step rule by the device's
# bandwidth). Its whole GPU suite in 16 shards; gpu_check.sh's verify stage;
# the default step at B = 256, L = 16 for the rows the rule moves (GDN HV64
# bf16, KDA fp32, GDN dual bf16 copy) and one it keeps (KDA bf16), each with
# R1P_TIMING (a dump is written only when the persistent step ran), and the
# same rows with REPLAYSSM_R1P=0 beside them.
#   run: bash experiments/2026-12-06_t50/t50-call7.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader
d=$(mktemp -d)
xz -dc gpubin-x/t50m.tar.xz | tar -C "$d" -x
M=$d/main
bash scripts/gpu_shard_tests.sh "$M/replayssm_gpu_tests" '*' "$OUT/shards" 16 230 | tail -n 4
PACK=gpubin-x/t50m.tar.xz PACK_LABEL=main OUT=$OUT/ver DEADLINE_S=80 bash scripts/gpu_check.sh verify 2>&1 | tail -n 3
echo "verify rc=${PIPESTATUS[0]}"
for c in "gdn qwen35-122b bf16 replay" "kda kimi fp32 replay" "gdn qwen35-122b fp32 dual --read bf16" "kda kimi bf16 replay"; do
  set -- $c
  f=$1 p=$2 st=$3 m=$4; shift 4
  for r in 1 2; do
    rm -f "$OUT/tl.bin"
    echo "default $(R1P_TIMING=$OUT/tl.bin timeout 40 "$M/replayssm" bench --backend cuda --family $f --preset $p --batch 256 \
      --L 16 --state $st --modes $m "$@" --target-ms 2 2>&1 | grep -m1 " $m") persistent=$([[ -s $OUT/tl.bin ]] && echo yes || echo no)"
    echo "blocks  $(REPLAYSSM_R1P=0 timeout 40 "$M/replayssm" bench --backend cuda --family $f --preset $p --batch 256 \
      --L 16 --state $st --modes $m "$@" --target-ms 2 2>&1 | grep -m1 " $m")"
  done
done
rm -f "$OUT/tl.bin"
(cd "$OUT" && tar czf res.tgz ver shards && rm -rf ver shards)
