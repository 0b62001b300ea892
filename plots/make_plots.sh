#!/bin/sh
# Renders parsim's pictures as PNG with gnuplot (pngcairo).
#
#   plots/make_plots.sh OUTDIR
#       runs parsim on the bundled examples and draws all four into OUTDIR:
#       timeline.png    the pipeline schedule of one step (Llama 3 8B, TP 2, PP 4,
#                       VP 2, 8 microbatches), a Gantt per stage and stream
#       pareto.png      step time vs memory of configs/sweep-llama3-70b.cfg, with
#                       the Pareto front of the configurations that fit in the GPU's
#                       memory as parsim counts it (74.5 GiB of an 80 GB H100)
#       scaling.png     tokens/s per GPU vs GPUs from configs/sweep-scaling.cfg
#       validation.png  predicted vs measured over bench/validation/public.csv
#
#   plots/make_plots.sh --timeline   TRACE.json     OUT.png [T0:T1]  (parsim run --trace;
#                                                      T0:T1 a window in ms)
#   plots/make_plots.sh --pareto     SWEEP.csv      OUT.png [GPU_MEMORY_GIB]
#   plots/make_plots.sh --scaling    SWEEP.csv      OUT.png [SERIES_COLUMN]
#   plots/make_plots.sh --validation VALIDATE.csv   OUT.png   (parsim validate --out)
#       draws one picture from your own parsim output.
#
# Environment: PARSIM (the binary; default build/parsim), JOBS (sweep threads;
# default: all cores).  Needs gnuplot (Debian: gnuplot-nox) and a POSIX awk.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
PARSIM=${PARSIM:-$root/build/parsim}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 1)}

die() { echo "make_plots.sh: $*" >&2; exit 2; }
command -v gnuplot >/dev/null || die "gnuplot not found (apt-get install gnuplot-nox)"

tmpdir=$(mktemp -d)
trap 'rm -rf "$tmpdir"' EXIT

cols() { awk -f "$here/csvcols.awk" -v cols="$1" "$2"; }

timeline() { # TRACE.json OUT.png [T0:T1] [TITLE]
    win=""; awin=""
    if [ -n "${3:-}" ]; then
        t0=${3%%:*}; t1=${3#*:}
        printf '%s\n%s\n' "$t0" "$t1" | grep -qvE '^[0-9]+([.][0-9]+)?$' && die "window '$3': want T0:T1 in ms, e.g. 0:2000"
        awk -v a="$t0" -v b="$t1" 'BEGIN { exit !(b + 0 > a + 0) }' || die "window '$3': T1 must be after T0"
        win="; t0=$t0; t1=$t1"; awin="-v t0=$t0 -v t1=$t1"
    fi
    # shellcheck disable=SC2086 # $awin is two awk options or nothing
    awk -f "$here/trace2gantt.awk" -v out="$tmpdir/tl" $awin "$1"
    [ -s "$tmpdir/tl.boxes" ] || die "$1: no events${3:+ in the window $3} (is it a parsim trace?)"
    gnuplot -e "in='$tmpdir/tl'; out='$2'; title='${4:-pipeline timeline: $(basename "$1")${3:+, $3 ms}}'$win" "$here/timeline.gp"
}

pareto() { # SWEEP.csv OUT.png [GPU_MEMORY_GIB]
    cols peak_bytes,step_time_s,tp "$1" | grep -v '^#' | sort -k1,1g -k2,2g > "$tmpdir/points.dat"
    [ -s "$tmpdir/points.dat" ] || die "$1: no valid configurations to draw"
    # the front: in order of memory, each point faster than all smaller ones
    # (among those that fit, when the GPU memory is given)
    awk -v hbm="${3:-0}" 'BEGIN { best = -1 }
        hbm > 0 && $1 > hbm * 2^30 { next }
        best < 0 || $2 < best { best = $2; print }' "$tmpdir/points.dat" > "$tmpdir/front.dat"
    tps=$(awk '{ print $3 }' "$tmpdir/points.dat" | sort -n -u | tr '\n' ' ')
    hbm=""
    [ -n "${3:-}" ] && hbm="hbm=$3;"
    gnuplot -e "in='$tmpdir/points.dat'; front='$tmpdir/front.dat'; out='$2'; tps='$tps'; $hbm title='step time vs memory: $(basename "$1")'" \
        "$here/pareto.gp"
}

scaling() { # SWEEP.csv OUT.png [SERIES_COLUMN]
    series=${3:-model}
    # one block per series, in order of first appearance, sorted by GPUs
    cols "$series,world_size,tokens_per_s_per_gpu" "$1" | grep -v '^#' | awk '
        !($1 in seen) { seen[$1] = ++n; name[n] = $1 }
        { rows[$1] = rows[$1] $2 " " $3 "\n" }
        END { for (i = 1; i <= n; i++) {
                  printf("%s%s\n", i > 1 ? "\n\n" : "", name[i])
                  cmd = "sort -n"; printf("%s", rows[name[i]]) | cmd; close(cmd) } }' \
        > "$tmpdir/scaling.dat"
    n=$(grep -c '^[^0-9]' "$tmpdir/scaling.dat" || true)
    [ "$n" -gt 0 ] || die "$1: no valid configurations to draw"
    gnuplot -e "in='$tmpdir/scaling.dat'; out='$2'; nseries=$n; title='tokens/s per GPU vs GPUs: $(basename "$1")'" \
        "$here/scaling.gp"
}

validation() { # VALIDATE.csv OUT.png
    cols metric_name,metric_value,predicted_value "$1" | grep -v '^#' > "$tmpdir/validation.dat"
    [ -s "$tmpdir/validation.dat" ] || die "$1: no predicted rows to draw"
    metrics=$(awk '{ print $1 }' "$tmpdir/validation.dat" | sort -u | tr '\n' ' ')
    npts=$(wc -l < "$tmpdir/validation.dat")
    gnuplot -e "in='$tmpdir/validation.dat'; out='$2'; metrics='$metrics'; title='validation: predicted vs measured ($npts rows)'" \
        "$here/validation.gp"
}

case "${1:-}" in
--timeline) [ $# -ge 3 ] || die "usage: --timeline TRACE.json OUT.png [T0:T1]"; timeline "$2" "$3" "${4:-}"; exit ;;
--pareto) [ $# -ge 3 ] || die "usage: --pareto SWEEP.csv OUT.png [GPU_MEMORY_GIB]"; pareto "$2" "$3" "${4:-}"; exit ;;
--scaling) [ $# -ge 3 ] || die "usage: --scaling SWEEP.csv OUT.png [SERIES_COLUMN]"; scaling "$2" "$3" "${4:-}"; exit ;;
--validation) [ $# -ge 3 ] || die "usage: --validation VALIDATE.csv OUT.png"; validation "$2" "$3"; exit ;;
""|-*) die "usage: make_plots.sh OUTDIR, or --timeline|--pareto|--scaling|--validation INPUT OUT.png" ;;
esac

out=$1
mkdir -p "$out"
[ -x "$PARSIM" ] || die "no parsim binary at $PARSIM (build it: ./setup.sh, or set PARSIM)"
cd "$root"
status=0

echo "timeline:   $out/timeline.png"
"$PARSIM" run model.name=llama3-8b cluster.topology=dgx-h100 cluster.num_gpus=8 \
    model.tensor_model_parallel_size=2 model.pipeline_model_parallel_size=4 \
    model.virtual_pipeline_model_parallel_size=2 train.global_batch_size=8 train.micro_batch_size=1 \
    --trace "$out/timeline.json" > "$out/timeline.txt"
timeline "$out/timeline.json" "$out/timeline.png" "" \
    "Llama 3 8B, 8 H100: TP 2, PP 4, interleaved VP 2, 8 microbatches (numbered from 0, as in the trace)"

echo "pareto:     $out/pareto.png"
rm -f "$out/sweep-llama3-70b.csv"
"$PARSIM" sweep configs/sweep-llama3-70b.cfg --jobs "$JOBS" --out "$out/sweep-llama3-70b.csv"
# the GPU memory parsim fits against (74.5 GiB of an 80 GB H100), from the sweep's base config
hbm=$("$PARSIM" run configs/llama3-70b-h100x64.cfg --format json | tr ',{' '\n\n' |
    awk -F: '/"hbm_capacity_bytes"/ { printf("%.1f", $2 / 2^30); exit }')
[ -n "$hbm" ] || die "no hbm_capacity_bytes in parsim's JSON report"
pareto "$out/sweep-llama3-70b.csv" "$out/pareto.png" "$hbm"

echo "scaling:    $out/scaling.png"
rm -f "$out/sweep-scaling.csv"
"$PARSIM" sweep configs/sweep-scaling.cfg --jobs "$JOBS" --out "$out/sweep-scaling.csv"
scaling "$out/sweep-scaling.csv" "$out/scaling.png"

echo "validation: $out/validation.png"
if "$PARSIM" validate bench/validation/public.csv --out "$out/validation.csv" > "$out/validation.txt"; then
    validation "$out/validation.csv" "$out/validation.png"
else
    echo "make_plots.sh: parsim validate failed; no validation.png" >&2
    status=1
fi
exit $status
