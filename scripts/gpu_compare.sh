#!/usr/bin/env bash
# Compare builds in one device run (packed by scripts/pack_builds.sh): the
# tests (and sanitizers) of one build, then the same benchmarks of every build,
# the builds alternating, REPS times, all rows in one file with the build's
# label as `commit` and the repetition as `rep`.
#
#   BENCH_ARGS="--family gdn,kda --preset gdn/H16-HV64,kda --batch 256 --T 5 --L 16 --state fp32,bf16 --modes replay --target-ms 2" \
#   TEST_BUILD=a6b8cc6 TEST_FILTER='DeltaGpu.Spec*' SANITIZE_FILTER=DeltaGpu.SpecMmaSmall REPS=2 \
#   bash scripts/gpu_compare.sh
#
# BENCH_ARGS: arguments of `replayssm bench --backend cuda`; several sets
# separated by ';' run in turn. PACK (default gpubin-x/builds.tar.xz),
# ONLY (space-separated labels: benchmark only these of the packed builds),
# TEST_BUILD (default the last packed), TEST_FILTER (default none),
# SANITIZE_FILTER (memcheck and racecheck; default none), TEST_TIMEOUT_S
# (default 300), REPS (default 1). Output under $OUT: log.txt, compare.jsonl
# (the rows; relabel `commit` and drop the build folders from `command`
# before committing them under bench/results).
# BENCH_TIMEOUT_S: the limit of each benchmark invocation (default 300; a
# hung step is cut there, noted in the log, and the table still printed).
# ENVS: runtime variants of every build, ';'-separated LABEL:VAR=VALUE[,VAR=VALUE]
# entries (e.g. "pf0:REPLAYSSM_M2_PF=0;pf132:REPLAYSSM_M2_PF=132"); each
# variant's rows carry `commit` BUILD:LABEL and alternate like builds.
# ENVS replaces the builds' default runs: for a default column beside the
# variants give an empty first entry (ENVS=";h1:REPLAYSSM_FOLD_HPB=1", rows
# `commit` BUILD), as t61-call1 did not.
set -u -o pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 2
OUT=${OUT:-$ROOT/gpu_compare_out}
mkdir -p "$OUT"
: "${BENCH_ARGS:?}"
pack=${PACK:-gpubin-x/builds.tar.xz}
work=$(mktemp -d)
xz -dc "$pack" | tar -C "$work" -x || exit 2
mapfile -t builds < "$work/BUILDS"
[[ -n ${ONLY:-} ]] && read -r -a builds <<< "$ONLY"
test_build=${TEST_BUILD:-${builds[-1]}}
log=$OUT/log.txt
: > "$log"
rc=0
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader 2>&1 | tee -a "$log"
tb=$work/$test_build/replayssm_gpu_tests
if [[ -n ${TEST_FILTER:-} ]]; then
  echo "== tests of $test_build: $TEST_FILTER" | tee -a "$log"
  timeout "${TEST_TIMEOUT_S:-300}" "$tb" --gtest_filter="$TEST_FILTER" --gtest_brief=1 2>&1 | grep -v '^  ' | tail -n 30 | tee -a "$log"
  (( PIPESTATUS[0] == 0 )) || rc=1
fi
if [[ -n ${SANITIZE_FILTER:-} ]]; then
  for tool in memcheck racecheck; do
    echo "== $tool of $test_build: $SANITIZE_FILTER" | tee -a "$log"
    timeout 120 compute-sanitizer --tool "$tool" --error-exitcode 1 "$tb" --gtest_filter="$SANITIZE_FILTER" --gtest_brief=1 2>&1 |
      tail -n 3 | tee -a "$log"
    (( PIPESTATUS[0] == 0 )) || rc=1
  done
fi
rows=$OUT/compare.jsonl
: > "$rows"
IFS=';' read -r -a sets <<< "$BENCH_ARGS"
IFS=';' read -r -a envs <<< "${ENVS:-}"
(( ${#envs[@]} > 0 )) || envs=("")
runs=()  # BUILD or BUILD:LABEL, the labels of the rows
for b in "${builds[@]}"; do
  for e in "${envs[@]}"; do runs+=("$b${e:+:${e%%:*}}"); done
done
for (( rep = 1; rep <= ${REPS:-1}; ++rep )); do
  for args in "${sets[@]}"; do
    for run in "${runs[@]}"; do
      b=${run%%:*} vars=()
      if [[ $run == *:* ]]; then
        for e in "${envs[@]}"; do
          [[ ${e%%:*} == "${run#*:}" ]] && IFS=',' read -r -a vars <<< "${e#*:}"
        done
      fi
      # shellcheck disable=SC2086  # args is a word list
      timeout -k 10 "${BENCH_TIMEOUT_S:-300}" env "${vars[@]}" REPLAYSSM_COMMIT="$run" "$work/$b/replayssm" bench \
        --backend cuda $args --out "$work/x.jsonl" > "$work/x.txt" 2>&1
      brc=$?
      if (( brc != 0 )); then
        rc=1
        (( brc == 124 || brc == 137 )) && echo "bench cut at ${BENCH_TIMEOUT_S:-300} s: $run $args" | tee -a "$log"
        tail -n 5 "$work/x.txt" | tee -a "$log"
      fi
      [[ -s $work/x.jsonl ]] && python3 -c '
import json, sys
rep = int(sys.argv[1])
for line in open(sys.argv[2]):
    r = json.loads(line); r["rep"] = rep; print(json.dumps(r))' "$rep" "$work/x.jsonl" >> "$rows"
      rm -f "$work/x.jsonl"
    done
  done
done
python3 - "$rows" "${runs[@]}" <<'PY' | tee -a "$log"
import collections, json, sys
builds = sys.argv[2:]
t = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    r = json.loads(line)
    t[(r["family"], r["shape"], r["mode"], r["state_dtype"], r["read_dtype"], r["batch"], r["T"], r["L"])][r["commit"]].append(r["us_per_step"])
print("µs per step (each repetition); " + " | ".join(builds))
for k in sorted(t, key=str):
    print(" ".join(map(str, k)), " | ".join(",".join(f"{v:.1f}" for v in t[k].get(b, [])) or "-" for b in builds))
PY
rm -rf "$work"
exit $rc
