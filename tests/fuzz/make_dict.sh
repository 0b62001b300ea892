#!/bin/sh
# Writes the libFuzzer dictionaries config.dict, sweep.dict and csv.dict of
# tests/fuzz from parsim itself: the key table (`parsim --help-config`: every
# key, its last component as a libconfig file names it, its group, the
# names an enum key takes and string defaults) and validate's columns (the
# header of bench/validation/public.csv and the values the mapping knows).
# nccl.dict is written by hand.  Rerun after the key table changes:
#   tests/fuzz/make_dict.sh [PARSIM]          (default ./build/parsim)
set -eu
cd "$(dirname "$0")/../.."
parsim=${1:-./build/parsim}
out=tests/fuzz
keys=$("$parsim" --help-config | awk 'NR > 1 { print $1 }')

# one dictionary entry per distinct word, in the order first seen
entries() { awk '!seen[$0]++ && $0 != "" { gsub(/\\/, "\\\\"); gsub(/"/, "\\\""); printf "\"%s\"\n", $0 }'; }

config_words() {
  for k in $keys; do
    echo "$k"
    echo "$k" | tr '.' '\n'
  done
  # enum names ("a | b | c" in the meaning column) and quoted string defaults
  "$parsim" --help-config | awk 'NR > 1 {
      for (i = 2; i <= NF; i++) if ($i == "|") { print $(i - 1); print $(i + 1) }
      if ($3 ~ /^".+"$/) print substr($3, 2, length($3) - 2)
    }' | sed 's/[,:()]*$//'
  # libconfig syntax and the target's override marker
  printf '%s\n' '@include "' ' = ' '; ' ': { ' ' }; ' '[ ' ' ]' '( ' ' )' ', ' 'true' 'false' '0x' 'L' \
    '1e300' '1e400' '-1' '9223372036854775807' '9223372036854775807L' '4611686018427387904' '2147483648'
  # preset names (model.name, cluster.topology)
  for f in models/*.cfg topologies/*.cfg; do basename "$f" .cfg; done
}

{
  echo "# config.dict: written by tests/fuzz/make_dict.sh from parsim --help-config"
  config_words | entries
  printf '%s\n' '"\x0A#overrides\x0A"'
} >"$out/config.dict"

{
  echo "# sweep.dict: written by tests/fuzz/make_dict.sh (sweep spec members, then the keys)"
  {
    printf '%s\n' sweep base set vary key keys values from to step mul rows '=' '"' '9223372036854775807L' \
      llama3-70b-h100x64.cfg sweep-scaling.cfg
    for k in $keys; do echo "$k"; echo "$k="; done
  } | entries
} >"$out/sweep.dict"

{
  echo "# csv.dict: written by tests/fuzz/make_dict.sh (validate's columns and cell values)"
  {
    head -n 1 bench/validation/public.csv | tr -d '\r' | tr ',' '\n'
    printf '%s\n' step_time_s tokens_per_s_per_gpu tflops_per_gpu mfu memory_gb \
      megatron nemo-full-attention sc21-hardware hardware unknown \
      A100 A100-80GB H100 H200 H800 B200 B300 GB200 GB300 \
      none selective full bf16 fp16 fp8 mxfp8 nvfp4 true false \
      layers_override= 'vocab ' 'GPT2BPETokenizer used as proxy' 'w/o MTP' GiB 'uses TP8 PP6' \
      mbridge- nemo- dgxc- sc21- korthikanti- mtnlg- mlm-h100- bloom- \
      ',' '"' '""'
  } | entries
  printf '%s\n' '"\x0D\x0A"'
} >"$out/csv.dict"
