#!/usr/bin/env bash
# Pack several builds for one device run (scripts/gpu_compare.sh): the CLI
# (and the GPU test binary where the folder has one) of each, stripped, in one
# xz stream with a 256 MiB dictionary, so the code the builds share is stored
# once (four builds of this library: ~19 MB, against ~13 MB each packed
# alone; the device tool carries 64 MiB with the tracked tree).
#
#   bash scripts/pack_builds.sh 9570522=/tmp/old a6b8cc6=build-gpu
#   # device: bash scripts/gpu_compare.sh  (BENCH_ARGS=..., TEST_BUILD=a6b8cc6, ...)
#
# LABEL=DIR: LABEL names the build in the rows (`commit`), DIR holds replayssm
# and optionally replayssm_gpu_tests. CLI_ONLY="label ..." packs only the CLI
# of those builds. DEST (default gpubin-x/builds.tar.xz; gpubin-x is git-ignored).
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${DEST:-gpubin-x/builds.tar.xz}
(( $# > 0 )) || { echo "usage: $0 LABEL=DIR [LABEL=DIR ...]" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
order=()
for spec in "$@"; do
  label=${spec%%=*} dir=${spec#*=}
  [[ $label =~ ^[A-Za-z0-9._-]+$ && $label != "$spec" ]] || { echo "bad build '$spec' (LABEL=DIR)" >&2; exit 2; }
  [[ -x $dir/replayssm ]] || { echo "no $dir/replayssm" >&2; exit 2; }
  # A Ninja build folder must know every object's headers: an object whose
  # dependencies ninja lost (#deps 0) is not rebuilt when a header changes,
  # and the build then mixes old and new kernels (t60: five delta objects).
  if [[ -f $dir/build.ninja ]]; then
    stale=$(ninja -C "$dir" -t deps 2>/dev/null | grep -E '\.cu\.o: #deps 0' || true)
    [[ -z $stale ]] || { echo "$dir: objects without header dependencies (delete them and rebuild):" >&2; echo "$stale" >&2; exit 2; }
  fi
  mkdir -p "$tmp/$label"
  cp "$dir/replayssm" "$tmp/$label/"
  if [[ -x $dir/replayssm_gpu_tests && " ${CLI_ONLY:-} " != *" $label "* ]]; then
    cp "$dir/replayssm_gpu_tests" "$tmp/$label/"
  fi
  strip "$tmp/$label"/* 2>/dev/null || true
  order+=("$label")
done
printf '%s\n' "${order[@]}" > "$tmp/BUILDS"
mkdir -p "$(dirname "$dest")"
tar -C "$tmp" -cf - BUILDS "${order[@]}" | xz -T1 --lzma2=preset=6,dict=256MiB > "$dest"
ls -l "$dest"
