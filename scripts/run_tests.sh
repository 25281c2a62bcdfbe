#!/usr/bin/env bash
# Build and run every test: the GoogleTest suites through ctest (GPU tests skip
# without a GPU), a quick `replayssm verify` on the CPU backend, a small CPU
# bench that must write JSON Lines, a short `replayssm drift` that must write
# its CSV, and pytest when a python/ directory exists. With SANITIZE_CPU=1
# (.ci/run sets it) the CPU backends are also built with AddressSanitizer and
# UndefinedBehaviorSanitizer (SAN_BUILD_DIR, default build-san; no CUDA) and
# the CPU test suite, a quick verify and the bench / drift smokes run under them.
#
# Environment: as scripts/setup.sh (BUILD_DIR, JOBS, CMAKE_ARGS, ...).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
bin="$BUILD_DIR/replayssm"

echo "== ctest" >&2
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS"

echo "== replayssm verify --backend cpu --quick" >&2
"$bin" verify --backend cpu --quick
if "$bin" info | grep -q '^cuda_available: yes'; then
  echo "== replayssm verify --backend cuda --quick" >&2
  "$bin" verify --backend cuda --quick
fi

echo "== replayssm bench (CPU smoke)" >&2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$bin" bench --preset all --batch 2 --L 4 --steps 4 --out "$tmp/bench.jsonl"
rows=$(wc -l < "$tmp/bench.jsonl")
if [ "$rows" -ne 6 ]; then
  echo "run_tests: expected 6 JSON rows from the bench smoke, got $rows" >&2
  exit 1
fi
if command -v python3 >/dev/null 2>&1; then
  python3 - "$tmp/bench.jsonl" <<'PY'
import json, sys
need = ["family", "shape", "batch", "state_dtype", "read_dtype", "record_dtype", "act_dtype", "L", "T",
        "mode", "us_per_step", "accept_mean", "flush_share", "bytes_per_step", "frac_of_copy",
        "copy_gbps", "mem_bytes_per_row", "device", "commit", "command"]
for line in open(sys.argv[1]):
    row = json.loads(line)
    missing = [k for k in need if k not in row]
    assert not missing, f"bench row lacks {missing}"
print("bench JSON rows ok")
PY
fi

echo "== replayssm drift (CPU smoke)" >&2
"$bin" drift --steps 64 --out "$tmp/drift.csv" >/dev/null
rows=$(($(wc -l < "$tmp/drift.csv") - 1))
if [ "$rows" -ne 294 ]; then  # 3 families x 14 arms x 7 log2 bins
  echo "run_tests: expected 294 CSV rows from the drift smoke, got $rows" >&2
  exit 1
fi

if [ -f pyproject.toml ]; then
  # The Python package: the CUDA code is already compiled and tested above, so
  # the extension is built CPU-only here to keep CI within its time budget
  # (PY_CUDA=AUTO builds it with CUDA when nvcc is present).
  echo "== pip install . && pytest tests/python" >&2
  python3 -m pip install -q nanobind scikit-build-core pytest numpy
  CMAKE_BUILD_PARALLEL_LEVEL=$JOBS python3 -m pip install -q --no-build-isolation . \
    -C cmake.define.REPLAYSSM_CUDA="${PY_CUDA:-OFF}"
  (cd /tmp && python3 -m pytest -q "$OLDPWD/tests/python")
fi
if [ "${SANITIZE_CPU:-0}" = 1 ]; then
  # The CPU oracle and fast backend, host-side validation included, under
  # ASan + UBSan (any report fails the run)
  echo "== CPU tests under AddressSanitizer + UndefinedBehaviorSanitizer" >&2
  san=${SAN_BUILD_DIR:-build-san}
  flags="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
  cmake -S . -B "$san" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DREPLAYSSM_CUDA=OFF \
    -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
  cmake --build "$san" -j "$JOBS" --target replayssm_tests replayssm_cli
  export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  "$san/replayssm_tests" --gtest_brief=1
  "$san/replayssm" verify --backend cpu --quick >/dev/null
  "$san/replayssm" bench --preset all --batch 2 --L 4 --steps 4 --state bf16 --out "$tmp/bench_san.jsonl" >/dev/null
  "$san/replayssm" drift --steps 64 --out "$tmp/drift_san.csv" >/dev/null
  echo "sanitized CPU run ok" >&2
fi
echo "run_tests: all passed" >&2
