#!/bin/bash
# t48, device call 1 (about 60 s on any H100 / H200; carry
# gpubin-x/t47k.tar.xz, build `k3`, whose kernels are main's): per-item
# timelines of the persistent T = 1 step (R1P_TIMING, scripts/r1p_timeline.py)
# at B = 256, L = 16: GDN HV64 bf16, KDA bf16, KDA fp32 and GDN HV64 dual fp8
# (with the dual fold's FOLD_TIMING), to see where the preparation's chain
# goes now (its phases were last timed at 16d7e70 / d650413).
#   run: bash experiments/2026-12-06_t48/t48-call1.sh
set -u
cd "$(dirname "$0")/../.."
nvidia-smi --query-gpu=name --format=csv,noheader
d=$(mktemp -d)
xz -dc gpubin-x/t47k.tar.xz | tar -C "$d" -x
cli=$d/k3/replayssm
mkdir -p "$OUT/tl"
run() {  # name, bench args...
  local n=$1; shift
  R1P_TIMING=$OUT/tl/$n.r1p FOLD_TIMING=$OUT/tl/$n.fold timeout 60 "$cli" bench --backend cuda --batch 256 --L 16 \
    --target-ms 2 "$@" > "$OUT/tl/$n.txt" 2>&1
  echo "== $n (rc=$?)"; grep -E '^\s*(gdn|kda)' "$OUT/tl/$n.txt" | head -3
  python3 scripts/r1p_timeline.py "$OUT/tl/$n.r1p" 2>&1 | tee "$OUT/tl/$n.r1p.txt"
  [ -s "$OUT/tl/$n.fold" ] && python3 scripts/fold_timeline.py --r1p "$OUT/tl/$n.r1p" "$OUT/tl/$n.fold" 2>&1 | tail -n 25 | tee "$OUT/tl/$n.fold.txt"
}
run gdn_bf16 --family gdn --preset qwen35-122b --state bf16 --modes replay
run kda_bf16 --family kda --preset kimi --state bf16 --modes replay
run kda_f32 --family kda --preset kimi --state fp32 --modes replay
run gdn_dual_fp8 --family gdn --preset qwen35-122b --state fp32 --modes dual --read fp8
rm -f "$OUT"/tl/*.r1p "$OUT"/tl/*.fold
(cd "$OUT" && tar czf tl.tgz tl && rm -rf tl)
