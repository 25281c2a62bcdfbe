#!/usr/bin/env bash
# Every issue 3-5 target row (B = 256, L = 16, bf16 activations) and the
# issue 3 baseline rows at B = 64, fp32 states, one round, on one binary:
#   T = 1 baseline and replay, fp32 and bf16 states (GDN HV64, KDA, Mamba-2
#   H128); GDN HV64 fp32 with bf16 d; dual fp8 / nvfp4 copies over fp32;
#   T = 5 replay, fp32; B = 64 baselines of every model shape's fp32 state.
# Prints the rows' lines and writes them all to OUT_JSONL.
#   BIN=path/to/replayssm OUT_JSONL=$OUT/rows.jsonl [LOG=$OUT/log.txt] \
#     [SETS="t1 t1bd dual t5 b64"] bash scripts/target_rows.sh
# Device call scripts source nothing else for these rows, so their sets stay
# one definition (t59-call1, t61-call1 and t61-call3 each wrote their own).
set -u
: "${BIN:?}" "${OUT_JSONL:?}"
log=${LOG:-/dev/null}
tmp=$(mktemp -d)
A="--backend cuda --L 16 --target-ms 2"
run() {  # set, timeout (s), bench args...
  local s=$1 t=$2; shift 2
  # shellcheck disable=SC2086  # A is a word list
  timeout "$t" "$BIN" bench $A --out "$tmp/$s.jsonl" "$@" 2>&1 | grep -E " replay| baseline|dual/|copy" |
    sed "s/^/$s /" | tee -a "$log"
}
for s in ${SETS:-t1 t1bd dual t5 b64}; do
  case $s in
    t1) run t1 100 --batch 256 --family gdn,kda,mamba2 --preset qwen35-122b,kimi,nemotron3 --state fp32,bf16 --modes baseline,replay ;;
    t1bd) run t1bd 40 --batch 256 --family gdn --preset qwen35-122b --state fp32 --d-dtype bf16 --modes replay ;;
    dual) run dual 90 --batch 256 --family gdn,kda,mamba2 --preset qwen35-122b,kimi,nemotron3 --state fp32 --modes dual --read fp8,nvfp4 ;;
    t5) run t5 100 --batch 256 --family gdn,kda,mamba2 --preset qwen35-122b,kimi,nemotron3 --T 5 --state fp32 --modes replay ;;
    b64) run b64 60 --batch 64 --family gdn,kda,mamba2 --preset qwen35,qwen35-122b,kimi,nemotron3,nemotron3-h64,nemotron3-nano --state fp32 --modes baseline ;;
    *) echo "target_rows.sh: unknown set $s" >&2; exit 2 ;;
  esac
done
cat "$tmp"/*.jsonl > "$OUT_JSONL" 2>/dev/null
rm -rf "$tmp"
