#!/usr/bin/env bash
# One-shot GPU check for the device machine: build, info, tests, sanitizers,
# benchmarks, verify. Run from the repository root:
#
#   bash scripts/gpu_check.sh                 # build info test sanitize bench-quick verify
#   bash scripts/gpu_check.sh all             # the above plus bench-full
#   bash scripts/gpu_check.sh build bench-full
#
# Stages: build info test sanitize bench-quick bench-spec bench-dual bench-full verify cpu-bench python
# profile. A failing
# stage does not stop later ones; the exit code is 1 when any stage failed.
# Everything lands in $OUT (default ./gpu_check_out), in few files:
#   log.txt          every stage's full output, with headers and timings
#   gpu_tests.json   GoogleTest JSON of the GPU tests (cpu_tests.json: CPU tests)
#   sanitize.txt     compute-sanitizer memcheck + racecheck output
#   bench.jsonl      benchmark rows (design/replay.md §7); bench.md its table
#
# Environment (all optional):
#   BUILD_DIR          build directory (default build); reused when configured for this checkout
#   PACK_LABEL, PACK   the label of one build in a pack of prebuilt binaries
#                      (scripts/pack_builds.sh, .tar.xz): with PACK_LABEL set the pack is
#                      extracted to a temporary folder, its build becomes BUILD_DIR, marked
#                      PREBUILT (no build stage)
#   CUDA_ARCHS         REPLAYSSM_CUDA_ARCHS (default 90a)
#   DEADLINE_S         wall-clock budget of the whole script; later stages are
#                      skipped past it and stage timeouts shrink to fit (default 540)
#   BENCH_BUDGET_S     budget of bench-full's measurement loop (default 200)
#   BENCH_FULL_ARGS    extra arguments of bench-full (e.g. "--family gdn --L 16")
#   BENCH_QUICK_ARGS   extra arguments of bench-quick (e.g. "--batch 1,64,256")
#   BENCH_SPEC_ARGS    arguments of bench-spec (default "--quick --T 5 --batch 64,256
#                      --state fp32,bf16 --target-ms 10")
#   BENCH_DUAL_ARGS    arguments of bench-dual (default "--quick --modes baseline,replay,dual,shared
#                      --state fp32 --read fp8,nvfp4,bf16 --batch 64,256,512 --target-ms 10")
#   SANITIZE_FILTER    gtest filter for the sanitizer runs
#   SANITIZE_TIMEOUT_S per sanitizer tool (default 120)
#   VERIFY_ARGS        arguments of `replayssm verify` (default "--backend cuda --quick")
#   PROFILE_KERNEL     profile: kernel name regex (default replay1)
#   PROFILE_ARGS       profile: the bench run profiled (default: Mamba-2 replay, B = 256, L = 16, fp32)
#   PROFILE_SKIP       profile: launches of the kernel skipped first (default 20)
#   PROFILE_NCU_ARGS   profile: more ncu arguments (e.g. "--cache-control none": warm caches)
#   REPLAYSSM_COMMIT   commit recorded in benchmark rows (default: git, else unknown)
set -u -o pipefail
# shellcheck disable=SC2317  # stage functions are invoked indirectly

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 2
OUT=${OUT:-$ROOT/gpu_check_out}
mkdir -p "$OUT"
BUILD_DIR=${BUILD_DIR:-build}
if [[ -n ${PACK_LABEL:-} ]]; then
  [[ -f ${PACK:-} ]] || { echo "gpu_check.sh: PACK_LABEL needs PACK, a pack file" >&2; exit 2; }
  PACK_DIR=$(mktemp -d)
  xz -dc "$PACK" | tar -C "$PACK_DIR" -x || { echo "gpu_check.sh: cannot extract $PACK" >&2; exit 2; }
  BUILD_DIR=$PACK_DIR/$PACK_LABEL
  [[ -x $BUILD_DIR/replayssm_gpu_tests || -x $BUILD_DIR/replayssm ]] \
    || { echo "gpu_check.sh: no build '$PACK_LABEL' in $PACK" >&2; exit 2; }
  touch "$BUILD_DIR/PREBUILT"
fi
CUDA_ARCHS=${CUDA_ARCHS:-90a}
DEADLINE_S=${DEADLINE_S:-540}
BENCH_BUDGET_S=${BENCH_BUDGET_S:-200}
BENCH_FULL_ARGS=${BENCH_FULL_ARGS:-}
BENCH_QUICK_ARGS=${BENCH_QUICK_ARGS:-}
BENCH_SPEC_ARGS=${BENCH_SPEC_ARGS:---quick --T 5 --batch 64,256 --state fp32,bf16 --target-ms 10}
BENCH_DUAL_ARGS=${BENCH_DUAL_ARGS:---quick --modes baseline,replay,dual,shared --state fp32 --read fp8,nvfp4,bf16 --batch 64,256,512 --target-ms 10}
SANITIZE_FILTER=${SANITIZE_FILTER:-*DeviceStatus*:Mamba2Gpu.SlotOperations:Mamba2Gpu.ReplayShortRunN128:Mamba2Gpu.ReplayManyItems:Mamba2Gpu.SpecShortRunN128:DeltaGpu.ReplayBulkSmall:DeltaGpu.SpecMmaSmall:Conv1dGpu.ScheduleBf16W3:QuantGpu.*}
SANITIZE_TIMEOUT_S=${SANITIZE_TIMEOUT_S:-120}
VERIFY_ARGS=${VERIFY_ARGS:---backend cuda --quick}
if [[ -z "${REPLAYSSM_COMMIT:-}" ]]; then
  REPLAYSSM_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
  if [[ $REPLAYSSM_COMMIT != unknown ]] && ! git diff --quiet HEAD -- 2>/dev/null; then
    REPLAYSSM_COMMIT+="-dirty"
  fi
fi
export REPLAYSSM_COMMIT

LOG=$OUT/log.txt
: > "$LOG"
START=$(date +%s)
CLI=$BUILD_DIR/replayssm
declare -a SUMMARY=()
FAILED=0

remaining() { echo $(( DEADLINE_S - ($(date +%s) - START) )); }
# Timeout for a stage: min(wanted, remaining - 5), at least 1.
fit() { local r; r=$(( $(remaining) - 5 )); (( r < 1 )) && r=1; (( $1 < r )) && echo "$1" || echo "$r"; }
log() { echo "$*" | tee -a "$LOG"; }

# run_stage NAME FUNCTION: times it, records status, never aborts the script.
run_stage() {
  local name=$1 fn=$2 t0 rc note
  if (( $(remaining) < 10 )); then
    SUMMARY+=("$(printf '%-12s %-8s %6s  %s' "$name" SKIPPED - 'deadline reached')")
    log "=== $name: skipped (deadline)"
    return
  fi
  log "=== $name ($(date -u +%H:%M:%S), $(remaining) s left)"
  t0=$(date +%s)
  STAGE_NOTE=""
  "$fn"
  rc=$?
  note=$STAGE_NOTE
  local dt=$(( $(date +%s) - t0 ))
  if (( rc == 0 )); then
    SUMMARY+=("$(printf '%-12s %-8s %5ss  %s' "$name" ok "$dt" "$note")")
  else
    (( rc == 124 )) && note="timeout; $note"
    SUMMARY+=("$(printf '%-12s %-8s %5ss  %s' "$name" "FAIL($rc)" "$dt" "$note")")
    FAILED=1
  fi
  log "=== $name: rc=$rc in ${dt}s $note"
}

# Runs a command, appending its output to the log; shows the last lines on failure.
logged() {
  local tmp rc
  tmp=$(mktemp)
  "$@" > "$tmp" 2>&1
  rc=$?
  cat "$tmp" >> "$LOG"
  if (( rc != 0 )); then
    echo "--- last lines of: $*"
    tail -n 25 "$tmp"
  fi
  rm -f "$tmp"
  return $rc
}

stage_build() {
  local cfg=()
  # Binaries built elsewhere (scripts/pack_gpubin.sh) and carried in: no build.
  if [[ -f $BUILD_DIR/PREBUILT ]]; then
    STAGE_NOTE="prebuilt binaries in $BUILD_DIR"
    return 0
  fi
  if [[ -f $BUILD_DIR/CMakeCache.txt ]]; then
    local home
    home=$(grep '^CMAKE_HOME_DIRECTORY:' "$BUILD_DIR/CMakeCache.txt" | cut -d= -f2)
    if [[ $home != "$ROOT" || ! -f $BUILD_DIR/build.ninja ]]; then
      log "build: $BUILD_DIR was configured for '$home'; reconfiguring"
      rm -rf "$BUILD_DIR"
    fi
  fi
  if [[ ! -f $BUILD_DIR/build.ninja ]]; then
    if ! logged timeout "$(fit 120)" cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DREPLAYSSM_CUDA=ON -DREPLAYSSM_CUDA_ARCHS="$CUDA_ARCHS" "${cfg[@]}"; then
      log "build: configure failed; retrying without tests"
      rm -rf "$BUILD_DIR"
      logged timeout "$(fit 120)" cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DREPLAYSSM_CUDA=ON -DREPLAYSSM_CUDA_ARCHS="$CUDA_ARCHS" -DREPLAYSSM_TESTS=OFF "${cfg[@]}" || return 1
      STAGE_NOTE="tests off (GTest missing?)"
    fi
  else
    STAGE_NOTE="reused $BUILD_DIR"
  fi
  logged timeout "$(fit 400)" ninja -C "$BUILD_DIR" -j16
}

stage_info() {
  {
    nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem,driver_version,power.limit \
      --format=csv 2>&1
    nvidia-smi -q -d CLOCK,PERFORMANCE 2>&1 | grep -E 'SM|Memory|Throttle|Active' | head -n 12
    nvcc --version 2>&1 | grep -i release
    cmake --version | head -n 1
    echo "commit $REPLAYSSM_COMMIT, $(nproc) cores"
  } | tee -a "$LOG"
  [[ -x $CLI ]] || { echo "no $CLI"; return 1; }
  timeout "$(fit 60)" "$CLI" bench --backend cuda --copy-only 2>&1 | tee -a "$LOG"
  local rc=${PIPESTATUS[0]}
  STAGE_NOTE=$(grep -oE 'copy bandwidth: [0-9.]+ GB/s' "$LOG" | tail -n 1)
  return "$rc"
}

# "passed/total pass, F fail, S skipped" of a GoogleTest JSON report.
gtest_counts() {
  python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
tests = [t for s in d.get("testsuites", []) for t in s.get("testsuite", [])]
skipped = sum(1 for t in tests if t.get("result") == "SKIPPED")
failed = sum(1 for t in tests if t.get("failures"))
print(f"{len(tests) - failed}/{len(tests)} pass, {failed} fail, {skipped} skipped", end="")
' "$1" 2>/dev/null || echo "unreadable report"
}

# Runs one gtest binary with JSON output; notes "passed/total".
gtest_run() {
  local bin=$1 json=$2 secs=$3 rc
  [[ -x $bin ]] || { echo "missing $bin"; return 1; }
  logged timeout "$(fit "$secs")" "$bin" --gtest_output="json:$json" --gtest_brief=1
  rc=$?
  if [[ -f $json ]]; then
    STAGE_NOTE+="$(basename "$bin"): $(gtest_counts "$json"); "
  fi
  return $rc
}

# The GPU tests spend most of their time in the fp64 CPU reference, so they
# run as TEST_SHARDS parallel GoogleTest shards (one process each;
# scripts/gpu_shard_tests.sh).
stage_test() {
  local rc=0 bin=$BUILD_DIR/replayssm_gpu_tests shards=${TEST_SHARDS:-16}
  [[ -x $bin ]] || { echo "missing $bin"; return 1; }
  JSON=$OUT/gpu_tests.json LOG=$LOG bash "$ROOT/scripts/gpu_shard_tests.sh" "$bin" '*' "$OUT" "$shards" "$(fit 300)" \
    | grep -E '^(tests rc|shard )'
  (( PIPESTATUS[0] == 0 )) || rc=1
  STAGE_NOTE+="replayssm_gpu_tests ($shards shards): $(gtest_counts "$OUT/gpu_tests.json"); "
  grep -E '^\[  FAILED  \]' "$LOG" | sort -u | head -n 20
  if [[ ${SKIP_CPU_TESTS:-0} != 1 ]]; then
    gtest_run "$BUILD_DIR/replayssm_tests" "$OUT/cpu_tests.json" 240 || rc=1
  fi
  return $rc
}

stage_sanitize() {
  local cs rc=0 bin=$BUILD_DIR/replayssm_gpu_tests
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  [[ -x $cs ]] || { echo "compute-sanitizer not found" | tee -a "$OUT/sanitize.txt"; return 1; }
  [[ -x $bin ]] || { echo "missing $bin"; return 1; }
  : > "$OUT/sanitize.txt"
  for tool in memcheck racecheck; do
    echo "### $tool --gtest_filter=$SANITIZE_FILTER" >> "$OUT/sanitize.txt"
    timeout "$(fit "$SANITIZE_TIMEOUT_S")" "$cs" --tool "$tool" --error-exitcode 3 \
      "$bin" --gtest_filter="$SANITIZE_FILTER" --gtest_brief=1 >> "$OUT/sanitize.txt" 2>&1
    local r=$?
    echo "### $tool rc=$r" >> "$OUT/sanitize.txt"
    local ran
    ran=$(grep -oE '\[==========\] [0-9]+ tests? from' "$OUT/sanitize.txt" | tail -n 1 | grep -oE '[0-9]+')
    STAGE_NOTE+="$tool rc=$r (${ran:-0} tests) "
    (( r != 0 )) && rc=1
  done
  grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|Invalid|Race reported' "$OUT/sanitize.txt" | sort | uniq -c | head -n 10
  return $rc
}

stage_bench_quick() {
  [[ -x $CLI ]] || { echo "no $CLI"; return 1; }
  # shellcheck disable=SC2086
  timeout "$(fit 120)" "$CLI" bench --backend cuda --quick $BENCH_QUICK_ARGS --out "$OUT/bench.jsonl" --append 2>&1 | tee -a "$LOG"
  return "${PIPESTATUS[0]}"
}

# Speculative rows (design §3): snapshot_spec vs replay_spec.
stage_bench_spec() {
  [[ -x $CLI ]] || { echo "no $CLI"; return 1; }
  # shellcheck disable=SC2086
  timeout "$(fit 300)" "$CLI" bench --backend cuda $BENCH_SPEC_ARGS --out "$OUT/bench.jsonl" --append 2>&1 | tee -a "$LOG"
  return "${PIPESTATUS[0]}"
}

stage_bench_dual() {
  [[ -x $CLI ]] || { echo "no $CLI"; return 1; }
  # shellcheck disable=SC2086  # word splitting of the argument list is intended
  timeout "$(fit 300)" "$CLI" bench --backend cuda $BENCH_DUAL_ARGS --out "$OUT/bench.jsonl" --append 2>&1 | tee -a "$LOG"
  return "${PIPESTATUS[0]}"
}

stage_bench_full() {
  [[ -x $CLI ]] || { echo "no $CLI"; return 1; }
  local budget=$BENCH_BUDGET_S left
  left=$(( $(remaining) - 40 ))  # room to finish the configuration in flight
  (( left < budget )) && budget=$left
  (( budget < 10 )) && { STAGE_NOTE="no time left"; return 1; }
  # shellcheck disable=SC2086
  logged timeout "$(fit $(( budget + 35 )))" "$CLI" bench --backend cuda --budget-s "$budget" \
    --out "$OUT/bench.jsonl" --append $BENCH_FULL_ARGS
  local rc=$?
  STAGE_NOTE=$(grep -E '^bench: [0-9]+ rows' "$LOG" | tail -n 1)
  return $rc
}

# verify, then verify again with every launch finishing before the next
# starts (CUDA_LAUNCH_BLOCKING=1) and the persistent T = 1 step forced
# (REPLAYSSM_R1P=1): no kernel may wait for work of a launch after it (a
# programmatic dependent need not run beside its primary: t49's split
# preparation hung so, experiments/2026-12-06_t49/README.md).
stage_verify() {
  [[ -x $CLI ]] || { echo "no $CLI"; return 1; }
  local rc=0
  # shellcheck disable=SC2086
  logged timeout "$(fit 150)" "$CLI" verify $VERIFY_ARGS || rc=1
  # shellcheck disable=SC2086
  logged timeout "$(fit 150)" env CUDA_LAUNCH_BLOCKING=1 REPLAYSSM_R1P=1 "$CLI" verify $VERIFY_ARGS || rc=1
  tail -n 12 "$LOG"
  return $rc
}

# The CPU backend's bench on this machine's (quiet, many-core) processor.
stage_cpu_bench() {
  [[ -x $CLI ]] || { echo "no $CLI"; return 1; }
  logged timeout "$(fit 150)" "$CLI" bench --backend cpu --preset all --out "$OUT/cpu_bench.jsonl"
  local rc=$?
  grep -E 'replay|baseline|copy bandwidth' "$LOG" | tail -n 8
  return $rc
}

# The Python package: pip install . (CUDA build) and its tests, torch included.
# Wheels for missing test packages can be carried in .whl/.
stage_python() {
  if compgen -G ".whl/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl &&
      export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  fi
  CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) logged timeout "$(fit 300)" \
    python3 -m pip install --no-build-isolation --no-deps -q . || return 1
  (cd /tmp && logged timeout "$(fit 200)" python3 -m pytest -q -rs "$ROOT/tests/python")
  local rc=$?
  STAGE_NOTE=$(grep -E '[0-9]+ (passed|failed)' "$LOG" | tail -n 1)
  return $rc
}

# ncu of one launch (--set full) and its instructions and stall samples per
# source line (scripts/ncu_lines.py): profile.txt (details page),
# profile_lines.txt (innermost lines: a helper's own), profile_callers.txt
# (the kernel's own lines, helpers counted where they are called), and the
# raw sass.csv / sass.txt / sass_gi.txt.
stage_profile() {
  local kern=${PROFILE_KERNEL:-replay1} args=${PROFILE_ARGS:---quick --family mamba2 --modes replay --batch 256 --L 16 --state fp32 --target-ms 1}
  command -v ncu > /dev/null || { log "profile: ncu not found"; return 1; }
  [[ -x $CLI ]] || { log "profile: no $CLI"; return 1; }
  # shellcheck disable=SC2086  # word-split args and PROFILE_NCU_ARGS
  logged timeout "$(fit 240)" ncu --clock-control none --set full --import-source yes -k "regex:$kern" \
    --launch-skip "${PROFILE_SKIP:-20}" --launch-count 1 ${PROFILE_NCU_ARGS:-} -f -o "$OUT/profile" \
    "$CLI" bench --backend cuda $args || return 1
  ncu -i "$OUT/profile.ncu-rep" --page details > "$OUT/profile.txt" 2>&1
  ncu -i "$OUT/profile.ncu-rep" --page source --csv --print-source sass --print-kernel-base mangled \
    > "$OUT/sass.csv" 2>&1
  local tmp name cubin
  tmp=$(mktemp -d)
  name=$(grep -m1 -oE '"Kernel Name","[A-Za-z0-9_]+' "$OUT/sass.csv" | sed -E 's/.*","//')
  local bin=$CLI
  [[ $bin == /* ]] || bin=$ROOT/$CLI
  (cd "$tmp" && cuobjdump -xelf all "$bin" > /dev/null 2>&1)
  # (cubins extract under their translation unit's base name: .cu names are
  # unique across src/*, the delta ones carry a delta_ prefix)
  local scanned=0
  for cubin in "$tmp"/*sm_90a*.cubin; do
    [[ -e $cubin ]] || continue
    scanned=$((scanned + 1))
    nvdisasm -g -c "$cubin" > "$tmp/all.txt" 2>> "$LOG" || log "nvdisasm failed on $(basename "$cubin")"
    if grep -q "$name" "$tmp/all.txt"; then
      cp "$tmp/all.txt" "$OUT/sass.txt"
      nvdisasm -gi -c "$cubin" > "$OUT/sass_gi.txt" 2>> "$LOG" || log "nvdisasm -gi failed"
      break
    fi
  done
  rm -rf "$tmp"
  [[ -s $OUT/sass.txt ]] || { log "profile: no sm_90a cubin of $bin holds $name ($scanned scanned)"; return 1; }
  python3 scripts/ncu_lines.py "$OUT/sass.csv" "$OUT/sass.txt" --kernel "$name" --top 40 > "$OUT/profile_lines.txt"
  [[ -s $OUT/sass_gi.txt ]] && python3 scripts/ncu_lines.py "$OUT/sass.csv" "$OUT/sass_gi.txt" --kernel "$name" --top 60 \
    > "$OUT/profile_callers.txt"
  head -n 12 "$OUT/profile_lines.txt"
  STAGE_NOTE=$(grep -E 'Duration' "$OUT/profile.txt" | head -n 1 | tr -s ' ')
}

STAGES=("$@")
(( ${#STAGES[@]} == 0 )) && STAGES=(build info test sanitize bench-quick verify)
[[ ${STAGES[*]} == all ]] && STAGES=(build info test sanitize bench-quick bench-spec bench-full verify)
[[ " ${STAGES[*]} " == *" bench-"* ]] && : > "$OUT/bench.jsonl"
for s in "${STAGES[@]}"; do
  case $s in
    build) run_stage build stage_build ;;
    info) run_stage info stage_info ;;
    test) run_stage test stage_test ;;
    sanitize) run_stage sanitize stage_sanitize ;;
    bench-quick) run_stage bench-quick stage_bench_quick ;;
    bench-spec) run_stage bench-spec stage_bench_spec ;;
    bench-dual) run_stage bench-dual stage_bench_dual ;;
    bench-full) run_stage bench-full stage_bench_full ;;
    verify) run_stage verify stage_verify ;;
    cpu-bench) run_stage cpu-bench stage_cpu_bench ;;
    python) run_stage python stage_python ;;
    profile) run_stage profile stage_profile ;;
    *) echo "unknown stage '$s' (build info test sanitize bench-quick bench-spec bench-dual bench-full verify cpu-bench python profile all)"; FAILED=1 ;;
  esac
done

if [[ -s $OUT/bench.jsonl ]] && command -v python3 > /dev/null; then
  python3 scripts/bench_table.py "$OUT/bench.jsonl" > "$OUT/bench.md" 2>> "$LOG"
  echo
  echo "## bench (B = 256, L = 16; full table in bench.md)"
  python3 scripts/bench_table.py "$OUT/bench.jsonl" --batch 256 --L 16 2>&1 | head -n 40
fi
echo
echo "## gpu_check summary ($(( $(date +%s) - START )) s, commit $REPLAYSSM_COMMIT, files in $OUT)"
printf '%s\n' "${SUMMARY[@]}" | tee -a "$LOG"
exit $FAILED
