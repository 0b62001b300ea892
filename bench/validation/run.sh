#!/bin/sh
# Accuracy benchmark: parsim validate over the published measurements of public.csv.
#
#   bench/validation/run.sh [--build DIR] [KEY=VALUE ...]
#
# Writes bench/validation/predictions.csv (validate --out: every input row plus
# predicted_value, ape_percent, skip_reason, assumed, overrides, peak_gib, hbm_gib, fits, ignored,
# ignored_same; each run with its recipe, recipes.csv) and bench/validation/ERRORS.md (the error
# table, with the commit and date it was made at).
# If predictions.csv already existed, first shows what moved (parsim compare old -> new), so a
# cost-model change can be judged before committing the new table.
#
# The presets load their fitted files (topologies/fitted/, cluster.fitted) when they are there:
# bench/validation/fit_defaults.sh writes them and the calibrated section of ERRORS.md (default,
# in-sample and held-out errors), which this script keeps as it is (the lines between its two
# "calibrated section" markers), still naming the commit it was made at.
# KEY=VALUE settings apply to every row (e.g. sim.params=PARAMS.cfg).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build="$root/build"
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --calibrate) echo "run.sh: --calibrate is now bench/validation/fit_defaults.sh" >&2; exit 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) break ;;
  esac
done
parsim="$build/parsim"
[ -x "$parsim" ] || { echo "run.sh: $parsim not found (build first: cmake --build build)" >&2; exit 2; }
cd "$root"
# The commit the tables are made at, before this script rewrites its own outputs (which would
# make every run look like one with uncommitted changes).
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git -C "$root" status --porcelain --untracked-files=no -- sim models topologies kernels bench/validation/recipes.csv \
        bench/validation/frameworks.csv 2>/dev/null | grep -v ' topologies/fitted/' | head -1 || true)
[ -n "$dirty" ] && commit="$commit (with uncommitted changes)"
today=$(date -u +%Y-%m-%d)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Each published run with its recipe's settings (validate's default for public.csv, named here
# so the tables say which file made them).
"$parsim" validate bench/validation/public.csv --recipes "$here/recipes.csv" --out "$tmp/predictions.csv" "$@" > "$tmp/summary.txt"
if [ -f "$here/predictions.csv" ]; then
  echo "== what moved since the last run (parsim compare, old -> new)"
  "$parsim" compare "$here/predictions.csv" "$tmp/predictions.csv" --list 20 || true
  echo
fi
cp "$tmp/predictions.csv" "$here/predictions.csv"

# The calibrated section lies between these two lines of ERRORS.md (fit_defaults.sh writes it);
# this script copies it from the ERRORS.md it replaces.
cal_end='<!-- end of the calibrated section -->'
{
  : > "$tmp/calibrated.md"
  if [ -f "$here/ERRORS.md" ]; then
    awk -v e="$cal_end" '/^<!-- calibrated section:/ { on = 1 } on { print } $0 == e { on = 0 }' \
        "$here/ERRORS.md" > "$tmp/calibrated.md"
  fi
  if ! grep -qxF "$cal_end" "$tmp/calibrated.md"; then
    : > "$tmp/calibrated.md"
    echo "run.sh: ERRORS.md has no calibrated section to keep (bench/validation/fit_defaults.sh writes one)" >&2
  fi
}
{
  cat <<HDR
# parsim against published measurements

Made by \`bench/validation/run.sh\` at commit $commit on $today, with the
default parameters of the topology presets (their fitted files in \`topologies/fitted/\`
included: the section "Fitted defaults" below gives the error before the fit and held out
from it)$( [ $# -gt 0 ] && printf ' and %s' "$*" ).
Rows, their sources and columns: \`bench/validation/README.md\`; per-row predictions, skip
reasons and the settings each row was run with: \`bench/validation/predictions.csv\`.
Compare a later run with \`parsim compare bench/validation/predictions.csv NEW.csv\`.

How rows become runs (the full rules are in \`sim/validate.h\`):

- gpu_type -> topology: A100, A100-80GB -> dgx-a100; H100 -> dgx-h100; H200 -> dgx-h200;
  H800 -> h800; B200 -> dgx-b200; B300 -> dgx-b300; GB200 -> gb200-nvl72; GB300 -> gb300-nvl72.
- Settings come from the row's own cells first, then from its configuration's recipe
  (\`recipes.csv\`: what the release's performance recipe set; settings parsim does not
  model are listed in the \`ignored\` / \`ignored_same\` columns), then from the framework
  defaults of its source (\`frameworks.csv\`).
- Empty cells no recipe covers take the defaults of the source's framework and the row counts as *assumed*:
  Megatron Bridge / NeMo / DGX Cloud rows SP with TP > 1, distributed optimizer, no
  recompute, mbs 1, bf16, overlapped DP and TP communication, ETP 1 for Bridge MoE recipes;
  Megatron-LM 2021-22 rows (sc21, korthikanti, mtnlg) full recompute, fp16, no SP, no
  distributed optimizer; the 2024 Megatron-LM table (mlm-h100) bf16, SP, distributed
  optimizer, overlaps (its notes). Rows whose notes say Megatron-FSDP and whose recipe does
  not set it run as Bridge's FSDP recipes (optim_grads_params), and token-drop rows without a recipe as balanced dropless routing (assumed). World size is num_gpus. MoE rows of
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
  if [ -s "$tmp/calibrated.md" ]; then
    echo
    cat "$tmp/calibrated.md"
  fi
  echo
  cat "$here/GAPS.md"
} > "$here/ERRORS.md"
cat "$tmp/summary.txt"
echo
echo "run.sh: wrote bench/validation/predictions.csv and bench/validation/ERRORS.md"
