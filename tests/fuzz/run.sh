#!/bin/sh
# Runs every fuzz target of build-fuzz/ (./setup.sh fuzz) for a bounded time,
# one after the other, on a scratch copy of its seed corpus and its saved
# regressions (the repository is not modified), and fails if any target
# finds a crash, a leak, a timeout or runs out of memory.  What a target
# finds is written to build-fuzz/artifacts/<target>/ (or $FUZZ_ARTIFACTS).
#   tests/fuzz/run.sh [SECONDS_PER_TARGET] [TARGET ...]    (default 60, all)
set -eu
cd "$(dirname "$0")/../.."
root=$(pwd)
secs=${1:-60}
[ $# -gt 0 ] && shift
targets=${*:-config csv sweep nccl yaml}
art=${FUZZ_ARTIFACTS:-$root/build-fuzz/artifacts}
scratch=$(mktemp -d /tmp/parsim-fuzz-run-XXXXXX)
trap 'rm -rf "$scratch"' EXIT
status=0
total=0
for t in $targets; do
  bin=$root/build-fuzz/tests/fuzz/fuzz_$t
  [ -x "$bin" ] || { echo "fuzz: $bin missing (./setup.sh fuzz)" >&2; exit 1; }
  mkdir -p "$scratch/$t" "$art/$t"
  cp tests/fuzz/corpus/$t/* "$scratch/$t/"
  if [ -d tests/fuzz/regressions/$t ]; then cp tests/fuzz/regressions/$t/* "$scratch/$t/" 2>/dev/null || true; fi
  log=$scratch/$t.log
  if "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -dict="tests/fuzz/$t.dict" -artifact_prefix="$art/$t/" "$scratch/$t" >"$log" 2>&1; then
    rc=0
  else
    rc=$?
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  total=$((total + ${runs:-0}))
  if [ "$rc" -ne 0 ]; then
    status=1
    echo "fuzz_$t: FAILED after ${runs:-?} runs (status $rc); input in $art/$t/:" >&2
    grep -E 'ERROR|SUMMARY|runtime error|parsim fuzz:|Test unit written' "$log" | head -n 20 >&2
  else
    echo "fuzz_$t: ${runs:-?} runs in ${secs} s, nothing found"
  fi
done
echo "fuzz: $total runs in all"
exit $status
