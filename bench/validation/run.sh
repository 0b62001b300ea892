#!/bin/sh
# Accuracy benchmark: parsim validate over the published measurements of public.csv.
#
#   bench/validation/run.sh [--build DIR] [--calibrate GPU_TYPE] [KEY=VALUE ...]
#
# Writes bench/validation/predictions.csv (validate --out: every input row plus
# predicted_value, ape_percent, skip_reason, assumed, overrides, peak_gib, hbm_gib, fits) and
# bench/validation/ERRORS.md (the error table, with the commit and date it was made at).
# If predictions.csv already existed, first shows what moved (parsim compare old -> new), so a
# cost-model change can be judged before committing the new table.
#
# --calibrate GPU[,GPU...] also fits the sustained compute fraction to the even configurations of
# each GPU type (parsim calibrate --train-half even; both metrics of a run fall in the same
# half), reports the error on the odd configurations it did not see, per GPU type and over
# the whole set, writes that as the calibrated section of ERRORS.md (with the commit and date
# it was made at) and keeps the parameters in bench/validation/calibrated-GPU.cfg.
# Without --calibrate the calibrated section of the existing ERRORS.md is kept as it is (the
# lines between its two "calibrated section" markers), still naming the commit it was made at.
# KEY=VALUE settings apply to every row (e.g. sim.params=PARAMS.cfg).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build="$root/build"
calib=""
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --calibrate) calib=$2; shift 2 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) break ;;
  esac
done
parsim="$build/parsim"
[ -x "$parsim" ] || { echo "run.sh: $parsim not found (build first: cmake --build build)" >&2; exit 2; }
cd "$root"
# The commit the tables are made at, before this script rewrites its own outputs (which would
# make every run look like one with uncommitted changes).
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null | head -1)
[ -n "$dirty" ] && commit="$commit (with uncommitted changes)"
today=$(date -u +%Y-%m-%d)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$parsim" validate bench/validation/public.csv --out "$tmp/predictions.csv" "$@" > "$tmp/summary.txt"
if [ -f "$here/predictions.csv" ]; then
  echo "== what moved since the last run (parsim compare, old -> new)"
  "$parsim" compare "$here/predictions.csv" "$tmp/predictions.csv" --list 20 || true
  echo
fi
cp "$tmp/predictions.csv" "$here/predictions.csv"

# The parameter calibration fits: the share of the benchmarked GEMM and attention ceilings a
# training job sustains (calibrate's default). Fits of the efficiencies one by one drift to
# their bounds on the Blackwell types, whose rows are nearly all of one precision.
params=cluster.compute.sustained_fraction
for g in $(echo "$calib" | tr ',' ' '); do
  "$parsim" calibrate bench/validation/public.csv --rows "gpu_type=$g" --train-half even \
      --params "$params" --out "$here/calibrated-$g.cfg" --quiet | grep -v '^wrote ' > "$tmp/calibrate-$g.txt"
done
# The whole set's held-out half: odd configurations, each GPU type with its own fitted
# parameters (defaults for the types not calibrated), against the default predictions.
if [ -n "$calib" ]; then
  "$parsim" validate bench/validation/public.csv --rows run=odd --out "$tmp/odd-default.csv" "$@" > /dev/null
  others="run=odd"
  for g in $(echo "$calib" | tr ',' ' '); do
    "$parsim" validate bench/validation/public.csv --rows "run=odd,gpu_type=$g" --out "$tmp/odd-$g.csv" \
        sim.params="$here/calibrated-$g.cfg" "$@" > /dev/null
    others="$others,gpu_type!=$g"
  done
  "$parsim" validate bench/validation/public.csv --rows "$others" --out "$tmp/odd-rest.csv" "$@" \
      > /dev/null
  # one row per id: the calibrated prediction where the row's GPU type was calibrated
  {
    head -1 "$tmp/odd-default.csv"
    for f in "$tmp"/odd-*.csv; do
      case $f in *odd-default.csv) continue ;; esac
      awk -F, 'NR > 1 && $0 !~ /not selected by --rows/' "$f"
    done
  } > "$tmp/heldout-calibrated.csv"
  "$parsim" compare "$tmp/odd-default.csv" "$tmp/heldout-calibrated.csv" --list 0 | sed -n '/^error change/,$p' \
      > "$tmp/heldout.txt"
fi


# The calibrated section lies between these two lines of ERRORS.md; a run without --calibrate
# copies it from the ERRORS.md it replaces.
cal_begin='<!-- calibrated section: written by run.sh --calibrate, kept by runs without it -->'
cal_end='<!-- end of the calibrated section -->'
if [ -z "$calib" ]; then
  : > "$tmp/calibrated.md"
  if [ -f "$here/ERRORS.md" ]; then
    awk -v b="$cal_begin" -v e="$cal_end" '$0 == b { on = 1 } on { print } $0 == e { on = 0 }' \
        "$here/ERRORS.md" > "$tmp/calibrated.md"
  fi
  if ! grep -qxF "$cal_end" "$tmp/calibrated.md"; then
    : > "$tmp/calibrated.md"
    echo "run.sh: ERRORS.md has no calibrated section to keep (run.sh --calibrate GPU,... writes one)" >&2
  fi
fi
{
  cat <<HDR
# parsim against published measurements

Made by \`bench/validation/run.sh\` at commit $commit on $today, with the
default parameters of the topology presets$( [ $# -gt 0 ] && printf ' and %s' "$*" ).
Rows, their sources and columns: \`bench/validation/README.md\`; per-row predictions, skip
reasons and the settings each row was run with: \`bench/validation/predictions.csv\`.
Compare a later run with \`parsim compare bench/validation/predictions.csv NEW.csv\`.

How rows become runs (the full rules are in \`sim/validate.h\`):

- gpu_type -> topology: A100, A100-80GB -> dgx-a100; H100 -> dgx-h100; H200 -> dgx-h200;
  H800 -> h800; B200 -> dgx-b200; B300 -> dgx-b300; GB200 -> gb200-nvl72; GB300 -> gb300-nvl72.
- Empty cells take the defaults of the source's framework and the row counts as *assumed*:
  Megatron Bridge / NeMo / DGX Cloud rows SP with TP > 1, distributed optimizer, no
  recompute, mbs 1, bf16, overlapped DP and TP communication, ETP 1 for Bridge MoE recipes;
  Megatron-LM 2021-22 rows (sc21, korthikanti, mtnlg) full recompute, fp16, no SP, no
  distributed optimizer; the 2024 Megatron-LM table (mlm-h100) bf16, SP, distributed
  optimizer, overlaps (its notes). Megatron-FSDP rows run as the distributed optimizer and
  token-drop rows as balanced dropless routing (assumed). World size is num_gpus. MoE rows of
  Bridge, NeMo and DGX Cloud recipes dispatch with all-to-all (flex for DeepSeek-architecture
  models), others with Megatron Core's allgather. A VP listed with PP 1 is dropped (Megatron
  interleaves only with PP > 1; assumed).
- \`fits\` in predictions.csv: the simulated peak (\`peak_gib\`) within the GPU's memory
  (\`hbm_gib\`); the summary lists the predicted rows that do not fit, whose assumed settings
  are likely not those of the measured run.
- FLOPs of TFLOP/s and MFU rows follow the row's flop_convention: megatron (causal attention
  at half), nemo-full-attention (full attention), sc21-hardware (96 B s L h^2 (1 + s/6h +
  V/16Lh)), hardware (full-attention model FLOPs plus the recomputed forward). \`unknown\` is
  inferred where the source's code is known (mlm-h100 and korthikanti: full attention;
  mbridge-meas: megatron), else the row is skipped. MFU is against the dense peak of the
  row's precision (bf16/fp16, fp8, nvfp4) of the topology preset, as the sources do.
- memory_gb: the largest simulated per-stage peak, in GB (GiB where the notes say so).
- Families: *time* = step time, tokens/s, TFLOP/s, MFU; *memory*; *tflops-flagged* = TFLOP/s
  and MFU rows of models whose published tokens/s and TFLOP/s disagree with the stated
  convention (qwen3-30b-a3b, gpt-oss-120b, SFT and LoRA rows), reported apart as the README
  asks.

## Error table (absolute percent error, default parameters)

\`\`\`
HDR
  cat "$tmp/summary.txt"
  echo '```'
  if [ -n "$calib" ]; then
    echo
    echo "$cal_begin"
    cat <<CAL

## Calibrated on half of the configurations, evaluated on the other half

Made by \`bench/validation/run.sh --calibrate $calib\` at commit $commit on $today; a later
run without \`--calibrate\` keeps this section as it is, so it may be older than the table above.

Per GPU type: \`parsim calibrate bench/validation/public.csv --rows gpu_type=GPU --train-half even
--params $params\` (parameter files: \`bench/validation/calibrated-GPU.cfg\`). Halves are
whole configurations (\`run\` parity: the tokens/s and TFLOP/s rows of one run, or the same
setup measured in two releases, fall in the same half). "held out" is the error on the odd
configurations, which the fit did not see, before and after.

### All GPU types, held-out half

Odd configurations only; each calibrated GPU type ($calib) with its fitted parameters, the
others with the defaults (\`parsim compare\` of the two \`validate\` outputs, default -> calibrated):

\`\`\`
$(cat "$tmp/heldout.txt")
\`\`\`

CAL
    for g in $(echo "$calib" | tr ',' ' '); do
      echo "### $g"
      echo
      echo '```'
      sed -n '/parameter/,$p' "$tmp/calibrate-$g.txt"
      echo '```'
      echo
    done
    echo "$cal_end"
  elif [ -s "$tmp/calibrated.md" ]; then
    echo
    cat "$tmp/calibrated.md"
  fi
  echo
  cat "$here/GAPS.md"
} > "$here/ERRORS.md"
cat "$tmp/summary.txt"
echo
echo "run.sh: wrote bench/validation/predictions.csv and bench/validation/ERRORS.md"
