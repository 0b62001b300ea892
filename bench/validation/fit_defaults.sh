#!/bin/sh
# Fits the shipped cost-model defaults to the published measurements, one GPU type at a time.
#
#   bench/validation/fit_defaults.sh [--build DIR] [--rows FILTER] [--params KEY]
#
# For each GPU type of public.csv: parsim calibrate on the rows of that type that --rows selects
# (default: all), fitting cluster.compute.sustained_fraction and one more key (--params KEY,
# default cluster.host.launch_us; --params '' fits the fraction alone; calibrate refuses more
# than two per GPU type). Dense rows determine the sustained fraction, MoE rows the host's time
# per launch and framework op. A second key the rows of a type do not determine (1 sigma >= its
# value, e.g. the host cost of a type without MoE rows) is dropped for that type and kept at
# its physical default. The loss is calibrate's default, the absolute log error (Huber below 2%):
# with squares, one row 60-77% off for physics parsim lacks (gpt-oss-120b at EP 8 on B200) set the
# fraction of every row of its type. calibrate refuses a type with fewer than 20 configurations (distinct
# runs); such a type keeps the physical defaults of its topology preset. Each fit is made from
# the presets' physical values (no fitted file loaded).
#
# Writes:
#   topologies/fitted/TOPOLOGY.cfg  the values fitted on ALL selected rows of the type, with the
#                                   command, commit and date, and the held-out errors of both
#                                   halves; the preset loads it (cluster.fitted). Files of
#                                   topologies not fitted by this run are removed.
#   bench/validation/ERRORS.md      its calibrated section: default vs in-sample on all rows,
#                                   and default vs held-out on the odd configurations (fitted
#                                   on the even ones) and on the even ones (fitted on the odd),
#                                   every group of validate's summary; then run.sh remakes the
#                                   rest of ERRORS.md and predictions.csv with the fitted values.
#
# Measured: one sustained fraction per GPU type fitted on dense rows generalises. Before the host
# was modeled, fits on MoE rows absorbed the missing host physics and made unseen MoE rows worse,
# and fits of several parameters drifted to unphysical values (fractions above 1, 110-266 us per
# kernel); with the host stream the held-out MoE error falls instead (ERRORS.md), though the
# fitted time per host op (25-55 us) is well above a bare launch (a few us): it also carries
# the Python and autograd time of each op. A fit that ends at a bound of its key's range says
# so in the file.
# Two GPU types on one topology preset (A100, A100-80GB on dgx-a100) share its fitted file: this
# script stops if both would be fitted.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build="$root/build"
rows=""
extra="cluster.host.launch_us"
args="$*"
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --rows) rows=$2; shift 2 ;;
    --params) extra=$2; shift 2 ;;
    -h|--help) sed -n '2,35p' "$0"; exit 0 ;;
    *) echo "fit_defaults.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
done
case $extra in *,*) echo "fit_defaults.sh: --params takes one key (at most two are fitted per GPU type)" >&2; exit 2 ;; esac
params=cluster.compute.sustained_fraction${extra:+,$extra}
parsim="$build/parsim"
[ -x "$parsim" ] || { echo "fit_defaults.sh: $parsim not found (build first)" >&2; exit 2; }
cd "$root"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git status --porcelain --untracked-files=no -- sim models topologies 2>/dev/null | grep -v ' topologies/fitted/' | head -1 || true)
[ -n "$dirty" ] && commit="$commit (with uncommitted changes)"
today=$(date -u +%Y-%m-%d)
csv=bench/validation/public.csv
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Data folders: the presets with no fitted file (the physical defaults), and one per set of fitted
# files (even-half fits, odd-half fits, all-row fits), as PARSIM_DATA_DIR for calibrate/validate.
mkdata() {
  mkdir -p "$tmp/$1/topologies/fitted"
  ln -s "$root/models" "$tmp/$1/models"
  ln -s "$root/kernels" "$tmp/$1/kernels"
  for f in "$root"/topologies/*; do
    [ "$(basename "$f")" = fitted ] || ln -s "$f" "$tmp/$1/topologies/"
  done
}
for d in phys even odd all; do mkdata $d; done

fitted=""
: > "$tmp/refused.txt"
: > "$tmp/undetermined.txt"
for g in $(PARSIM_DATA_DIR="$tmp/phys" "$parsim" validate $csv | awk '$1 == "gpu" { print $2 }'); do
  sel="gpu_type=$g${rows:+,$rows}"
  p=$params
  fit() {
    set +e
    PARSIM_DATA_DIR="$tmp/phys" "$parsim" calibrate $csv --rows "$sel" --params "$p" --quiet \
        --out "$tmp/fit-$g.cfg" --out-halves "$tmp/fit-$g" > "$tmp/report-$g.txt" 2> "$tmp/err-$g.txt"
    st=$?
    set -e
  }
  fit
  # A second parameter the rows of this type do not determine (its 1-sigma as large as its
  # value: e.g. a host cost on a type without MoE rows) is not fitted; it keeps its
  # physical default and the type is refitted with the sustained fraction alone.
  if [ $st -eq 0 ] && [ -n "$extra" ]; then
    key=${extra##*.}
    if awk -v k="$key" '$1 == k && $2 == "=" { v = $3; sub(/;$/, "", v); s = $6; sub(/;$/, "", s);
         if (v < 0) v = -v; if (s + 0 >= v + 0) bad = 1 } END { exit !bad }' "$tmp/fit-$g.cfg"; then
      sig=$(awk -v k="$key" '$1 == k && $2 == "=" { v = $3; sub(/;$/, "", v); s = $6; sub(/;$/, "", s); print v " +- " s }' "$tmp/fit-$g.cfg")
      echo "$g: $extra = $sig is not determined by its rows (1 sigma >= value): kept at the physical default" >> "$tmp/undetermined.txt"
      p=cluster.compute.sustained_fraction
      fit
    fi
  fi
  if [ $st -eq 2 ]; then
    # the preset its rows run on, to say whether another type's fit covers them
    PARSIM_DATA_DIR="$tmp/phys" "$parsim" validate $csv --rows "gpu_type=$g" --out "$tmp/rows-$g.csv" > /dev/null
    topo=$(grep -v 'not selected by --rows' "$tmp/rows-$g.csv" | grep -o 'cluster\.topology=[A-Za-z0-9._-]*' |
           head -1 | cut -d= -f2)
    echo "$g $topo $(sed 's/^parsim: //' "$tmp/err-$g.txt")" >> "$tmp/refused.txt"
    continue
  fi
  [ $st -eq 0 ] || { cat "$tmp/err-$g.txt" >&2; exit 1; }
  topo=$(awk '$1 == "topology" { sub(/;$/, "", $2); print $2; exit }' "$tmp/report-$g.txt")
  if [ -f "$tmp/all/topologies/fitted/$topo.cfg" ]; then
    echo "fit_defaults.sh: $g and another GPU type both fit topology $topo: select one with --rows" >&2
    exit 1
  fi
  {
    echo "# Written by: bench/validation/fit_defaults.sh${args:+ $args} at commit $commit on $today"
    echo "#   = PARSIM_FITTED=none parsim calibrate $csv --rows '$sel' --params $p"
    echo "# Loaded by topologies/$topo.cfg (cluster.fitted) for every run on it ($g rows fitted)."
    cat "$tmp/fit-$g.cfg"
  } > "$tmp/all/topologies/fitted/$topo.cfg"
  for h in even odd; do
    if [ -f "$tmp/fit-$g-$h.cfg" ]; then cp "$tmp/fit-$g-$h.cfg" "$tmp/$h/topologies/fitted/$topo.cfg"; fi
  done
  fitted="$fitted $g:$topo"
done

# validate's summary of the rows of filter $2 with the fitted files of folder $1
summ() {
  PARSIM_DATA_DIR="$tmp/$1" "$parsim" validate $csv ${2:+--rows "$2"} > "$tmp/summary.txt"
  awk '/^group/ { on = 1; next } on && NF == 0 { exit } on' "$tmp/summary.txt"
}
summ phys "" > "$tmp/s-def-all.txt"
summ all "" > "$tmp/s-in-all.txt"
summ phys run=odd > "$tmp/s-def-odd.txt"
summ even run=odd > "$tmp/s-ho-odd.txt"
summ phys run=even > "$tmp/s-def-even.txt"
summ odd run=even > "$tmp/s-ho-even.txt"
# two summaries side by side: group, rows, then median, p90, signed of each
join2() {
  awk -v t1="$3" -v t2="$4" '
    function lab(s) { s = substr(s, 1, 28); sub(/ +$/, "", s); return s }
    function nums(s,  a) { split(substr(s, 29), a, " "); return sprintf("%7s %7s %7s", a[4], a[5], a[7]) }
    FNR == NR { r[lab($0)] = nums($0); next }
    FNR == 1 { printf "%-28s %5s  %-23s   %-23s\n%-28s %5s  %7s %7s %7s   %7s %7s %7s\n", "", "", t1, t2,
               "group", "pred", "median%", "p90%", "signed%", "median%", "p90%", "signed%" }
    { split(substr($0, 29), a, " "); printf "%-28s %5s  %s   %s\n", lab($0), a[2], nums($0), (lab($0) in r ? r[lab($0)] : "") }
  ' "$2" "$1"
}

cal_begin='<!-- calibrated section: written by fit_defaults.sh, kept by run.sh -->'
cal_end='<!-- end of the calibrated section -->'
{
  echo "$cal_begin"
  echo
  echo "## Fitted defaults: default, in-sample and held-out errors"
  echo
  echo "Made by \`bench/validation/fit_defaults.sh${args:+ $args}\` at commit $commit on $today: per GPU type,"
  if [ -n "$rows" ]; then rows_text="the rows \`$rows\` of"; else rows_text="all rows of"; fi
  echo "\`parsim calibrate\` of \`$params\` on $rows_text the type, from the physical"
  echo "defaults; the values fitted on all of them are in \`topologies/fitted/\`. Halves are whole"
  echo "configurations (\`run\` parity). \"signed\" is the median signed error (+ = optimistic). Every"
  echo "group covers all rows of public.csv (also those not fitted: other --rows, other GPU types)."
  echo
  echo "Fitted (GPU type:topology):${fitted:- none}"
  echo
  if [ -s "$tmp/refused.txt" ]; then
    echo "Not fitted:"
    echo
    while read -r g topo why; do
      if [ -f "$tmp/all/topologies/fitted/$topo.cfg" ]; then
        echo "- $g: $why; its rows run on $topo, so they take the fit of that preset (another GPU type's rows)"
      else
        echo "- $g ($topo keeps its physical defaults): $why"
      fi
    done < "$tmp/refused.txt"
    echo
  fi
  if [ -s "$tmp/undetermined.txt" ]; then
    echo "Second parameter not fitted:"
    echo
    sed 's/^/- /' "$tmp/undetermined.txt"
    echo
  fi
  echo "### All rows: default -> in-sample (the fitted values)"
  echo
  echo '```'
  join2 "$tmp/s-def-all.txt" "$tmp/s-in-all.txt" "default" "in-sample"
  echo '```'
  echo
  echo "### Odd configurations: default -> held out (fitted on the even configurations)"
  echo
  echo '```'
  join2 "$tmp/s-def-odd.txt" "$tmp/s-ho-odd.txt" "default" "held out"
  echo '```'
  echo
  echo "### Even configurations: default -> held out (fitted on the odd configurations)"
  echo
  echo '```'
  join2 "$tmp/s-def-even.txt" "$tmp/s-ho-even.txt" "default" "held out"
  echo '```'
  echo
  for gt in $fitted; do
    g=${gt%%:*}
    echo "### $g: the fit"
    echo
    echo '```'
    awk '/^  held out: the/ { exit } { print }' "$tmp/report-$g.txt"
    echo '```'
    echo
  done
  echo "$cal_end"
} > "$tmp/calibrated.md"

# the fitted files, replacing those of the last run
mkdir -p "$root/topologies/fitted"
rm -f "$root"/topologies/fitted/*.cfg
for f in "$tmp"/all/topologies/fitted/*.cfg; do
  [ -f "$f" ] && cp "$f" "$root/topologies/fitted/"
done
# the calibrated section of ERRORS.md, then run.sh remakes the rest (keeping it)
errors="$here/ERRORS.md"
if [ -f "$errors" ] && grep -qxF "$cal_end" "$errors"; then
  awk -v e="$cal_end" -v f="$tmp/calibrated.md" '
    /^<!-- calibrated section:/ { while ((getline l < f) > 0) print l; skip = 1; next }
    skip && $0 == e { skip = 0; next }
    !skip' "$errors" > "$tmp/errors.md"
else
  { [ -f "$errors" ] && cat "$errors"; echo; cat "$tmp/calibrated.md"; } > "$tmp/errors.md"
fi
cp "$tmp/errors.md" "$errors"
"$here/run.sh" --build "$build" > "$tmp/run.txt"
cat "$tmp/calibrated.md"
echo
echo "fit_defaults.sh: wrote topologies/fitted/ (${fitted:- nothing fitted}) and bench/validation/ERRORS.md"
