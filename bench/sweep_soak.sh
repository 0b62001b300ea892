#!/bin/sh
# bench/sweep_soak.sh [JOBS] [SHARD]: a sweep's memory over many
# configurations.  Runs bench/sweep-soak.cfg (921,600 configurations of
# Llama 3 70B; SHARD K/N runs every N-th) with its rows going through a
# pipe, and prints every 50,000 rows the sweep's resident memory (VmRSS)
# and its peak so far (VmHWM), then the rate and the highest RSS of each
# half of the run.  Memory follows the largest steps simulated so far;
# anything kept per configuration would show as a second half far above the
# first (460,800 configurations at 100 bytes each: 44 MiB).  PARSIM=path picks the binary (default build/parsim).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${PARSIM:-$root/build/parsim}
jobs=${1:-1}
shard=${2:-1/1}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkfifo "$tmp/rows"
"$bin" sweep "$root/bench/sweep-soak.cfg" --jobs "$jobs" --shard "$shard" > "$tmp/rows" &
pid=$!
echo "sweep_soak: $bin, --jobs $jobs --shard $shard"
awk -v pid="$pid" -v every=50000 '
function now(   t) { "date +%s.%N" | getline t; close("date +%s.%N"); return t + 0 }
function sample(   f, line, a) {
    f = "/proc/" pid "/status"
    rss = hwm = -1
    while ((getline line < f) > 0) {
        split(line, a, /[ \t]+/)
        if (a[1] == "VmRSS:") rss = a[2] / 1024
        if (a[1] == "VmHWM:") hwm = a[2] / 1024
    }
    close(f)
}
BEGIN { t0 = now() }
/^#/ || FNR == 1 { next }
{
    rows++
    if ($0 ~ /,$/) simulated++
    if (rows % every == 0) {
        sample()
        if (rss < 0) next
        n++; at[n] = rows; r[n] = rss; peak = hwm
        printf "  %8d rows  %6.0f s  RSS %7.1f MiB  peak %7.1f MiB\n", rows, now() - t0, rss, hwm
    }
}
END {
    t = now() - t0
    printf "sweep_soak: %d rows (%d simulated, %d rejected with a reason) in %.0f s: %.0f rows/s\n",
           rows, simulated, rows - simulated, t, rows / (t > 0 ? t : 1)
    # the highest RSS sampled in each half of the run: growth per
    # configuration would make the second clearly higher
    for (i = 1; i <= n; i++) {
        if (i <= n / 2 && r[i] > h1) h1 = r[i]
        if (i > n / 2 && r[i] > h2) h2 = r[i]
    }
    if (n >= 2)
        printf "sweep_soak: highest RSS in the first half %.1f MiB, in the second %.1f MiB (%+.1f MiB); peak %.1f MiB\n",
               h1, h2, h2 - h1, peak
}' < "$tmp/rows"
wait "$pid"
