#!/usr/bin/env bash
# Runs several device-call scripts (experiments/*/…-callN.sh) in one device
# command and returns all their files as one archive: the device tool brings
# back at most 8 files from $OUT, and each extra call costs a machine start.
#
#   bash scripts/run_calls.sh experiments/2026-12-05_t41/t41-call5.sh experiments/2026-12-05_t41/t41-call4.sh
#
# Each script runs with OUT=<a folder of its own> (named after the script),
# its output to stdout as usual, then "<name> rc N". Everything they wrote
# lands in $OUT/calls.tar.gz (extract here: tar -xzf calls.tar.gz), each
# file at <script name>/<its path under the script's OUT>.
set -u -o pipefail
final=${OUT:?"OUT: the folder whose files come back"}
(( $# > 0 )) || { echo "usage: $0 CALL.sh [CALL.sh ...]" >&2; exit 2; }
work=$(mktemp -d)
rc=0
for s in "$@"; do
  [[ -f $s ]] || { echo "run_calls.sh: no $s" >&2; rc=2; continue; }
  name=$(basename "$s" .sh)
  mkdir -p "$work/$name"
  echo "== $name"
  OUT=$work/$name bash "$s"
  r=$?
  echo "$name rc $r"
  (( r == 0 )) || rc=1
done
mkdir -p "$final"
tar -C "$work" -czf "$final/calls.tar.gz" . && ls -l "$final/calls.tar.gz"
exit $rc
