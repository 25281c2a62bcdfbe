#!/usr/bin/env bash
# A/B run on the device machine: the tests (and sanitizers) of a candidate
# build, then one benchmark of the reference build with its baseline modes
# and the same benchmark of the candidate with its modes only, one after the
# other in the same run (same GPU, same copy-bandwidth probe).
#
#   A_BUILD=/tmp/a B_BUILD=/tmp/b A_COMMIT=aadc468 B_COMMIT=2a5cd18 \
#   BENCH_ARGS="--quick --family gdn,kda --T 5,8 --batch 256 --state fp32,bf16 --target-ms 10" \
#   bash scripts/gpu_ab.sh
#
# Environment: A_BUILD / B_BUILD (folders with replayssm and
# replayssm_gpu_tests, as scripts/pack_gpubin.sh writes them), A_COMMIT /
# B_COMMIT (recorded in the rows), BENCH_ARGS (arguments of `replayssm bench
# --backend cuda`), A_MODES (default baseline,replay), B_MODES (default
# replay), B_TEST_FILTER (gtest filter of the candidate's tests, default all;
# empty string: none), B_SANITIZE_FILTER (memcheck + racecheck, default none),
# A_TEST_FILTER (tests of the reference build, default none). Output under
# $OUT, seven files at most (the device tool returns eight): bench_a.jsonl,
# bench_b.jsonl, their tables bench_a.txt, bench_b.txt, the check summaries
# b_check.txt, a_check.txt, and checks.tar.xz with gpu_check.sh's files of
# both builds (written under WORK, default /tmp/gpu_ab_work).
set -u -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-$ROOT/gpu_ab_out}
WORK=${WORK:-/tmp/gpu_ab_work}
mkdir -p "$OUT" "$WORK"
: "${A_BUILD:?} ${B_BUILD:?} ${BENCH_ARGS:?}"
A_COMMIT=${A_COMMIT:-a} B_COMMIT=${B_COMMIT:-b}
A_MODES=${A_MODES:-baseline,replay} B_MODES=${B_MODES:-replay}
B_TEST_FILTER=${B_TEST_FILTER-*} B_SANITIZE_FILTER=${B_SANITIZE_FILTER:-} A_TEST_FILTER=${A_TEST_FILTER:-}
START=$(date +%s)
elapsed() { echo "$(( $(date +%s) - START )) s"; }
rc=0
if [[ -n $B_TEST_FILTER ]]; then
  stages=(test)
  [[ -n $B_SANITIZE_FILTER ]] && stages+=(sanitize)
  REPLAYSSM_COMMIT=$B_COMMIT BUILD_DIR=$B_BUILD OUT=$WORK/b GTEST_FILTER=$B_TEST_FILTER SANITIZE_FILTER=$B_SANITIZE_FILTER \
    SKIP_CPU_TESTS=1 DEADLINE_S=${B_TEST_DEADLINE_S:-240} bash "$ROOT/scripts/gpu_check.sh" "${stages[@]}" > "$OUT/b_check.txt" 2>&1 || rc=1
  echo "candidate tests: $(grep -A3 'gpu_check summary' "$OUT/b_check.txt" | tail -n +2 | tr -s ' ')  [$(elapsed)]"
fi
if [[ -n $A_TEST_FILTER ]]; then
  REPLAYSSM_COMMIT=$A_COMMIT BUILD_DIR=$A_BUILD OUT=$WORK/a GTEST_FILTER=$A_TEST_FILTER SKIP_CPU_TESTS=1 DEADLINE_S=120 \
    bash "$ROOT/scripts/gpu_check.sh" test > "$OUT/a_check.txt" 2>&1 || rc=1
  echo "reference tests: $(grep -A2 'gpu_check summary' "$OUT/a_check.txt" | tail -n +2 | tr -s ' ')  [$(elapsed)]"
fi
# shellcheck disable=SC2086  # BENCH_ARGS is a word list
REPLAYSSM_COMMIT=$A_COMMIT "$A_BUILD/replayssm" bench --backend cuda $BENCH_ARGS --modes "$A_MODES" \
  --out "$OUT/bench_a.jsonl" > "$OUT/bench_a.txt" 2>&1 || rc=1
echo "reference bench done [$(elapsed)]"
# shellcheck disable=SC2086
REPLAYSSM_COMMIT=$B_COMMIT "$B_BUILD/replayssm" bench --backend cuda $BENCH_ARGS --modes "$B_MODES" \
  --out "$OUT/bench_b.jsonl" > "$OUT/bench_b.txt" 2>&1 || rc=1
echo "candidate bench done [$(elapsed)]"
grep -v '^#' "$OUT/bench_a.txt" | tail -n 40
grep -v '^#' "$OUT/bench_b.txt" | tail -n 40
if compgen -G "$WORK/*" > /dev/null; then
  tar -C "$WORK" -cf - . | xz -T0 -6 > "$OUT/checks.tar.xz" || rc=1
fi
exit $rc
