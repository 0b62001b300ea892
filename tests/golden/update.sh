#!/bin/sh
# Re-pins the golden cases: reruns every tests/golden/*.cfg with the current cost models,
# rewrites tests/golden/expected.csv and shows what moved (parsim compare, old -> new).
# Usage: tests/golden/update.sh [BUILD_DIR]      (default: build)
# Then review the listed changes and commit expected.csv with the change that caused them.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-"$root/build"}
case $build in /*) ;; *) build="$root/$build" ;; esac
[ -x "$build/test_golden" ] || { echo "update.sh: build first ($build/test_golden not found)" >&2; exit 2; }
old=$(mktemp)
trap 'rm -f "$old"' EXIT
if [ -f "$root/tests/golden/expected.csv" ]; then cp "$root/tests/golden/expected.csv" "$old"; else : > "$old"; fi
PARSIM_FITTED=none PARSIM_UPDATE_GOLDEN=1 "$build/test_golden" --jobs 1 >/dev/null 2>&1 || true
[ -f "$root/tests/golden/expected.csv" ] || { echo "update.sh: expected.csv was not written" >&2; exit 1; }
if [ -s "$old" ]; then
  "$build/parsim" compare "$old" "$root/tests/golden/expected.csv" --key case --list 0 || true
else
  echo "update.sh: wrote $(($(wc -l < "$root/tests/golden/expected.csv") - 1)) cases to tests/golden/expected.csv"
fi
