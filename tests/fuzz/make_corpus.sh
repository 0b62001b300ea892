#!/bin/sh
# Writes the seed corpora tests/fuzz/corpus/<target>/ from the repository's
# own files; files named hand-* are written by hand and kept.  Rerun when
# the configs, presets or tables change:
#   tests/fuzz/make_corpus.sh [PARSIM]        (default ./build/parsim)
#  config  configs/*.cfg and tests/golden/*.cfg as they are, a few with
#          overrides; models/ and topologies/ presets (comment lines cut)
#          with the overrides that make a run of them
#  csv     bench/validation/public.csv cut to its first rows and to the
#          first rows of each source; tests/data/validate_*.csv
#  sweep   configs/sweep-*.cfg
#  nccl    tests/data/*.log and `parsim net` tables of three collectives
#  yaml    tests/data/bridge_*.yaml (Megatron Bridge run_config.yaml)
set -eu
cd "$(dirname "$0")/../.."
parsim=${1:-./build/parsim}
c=tests/fuzz/corpus
for t in config csv sweep nccl yaml; do
  mkdir -p "$c/$t"
  find "$c/$t" -type f ! -name 'hand-*' -delete
done

# presets without their comment lines and trailing comments: the fuzzer
# mutates settings, not prose
strip() { grep -v '^[[:space:]]*#' "$1" | sed 's/;[[:space:]]*#.*$/;/' | grep -v '^[[:space:]]*$'; }

for f in configs/*.cfg; do
  case $f in */sweep-*) cp "$f" "$c/sweep/$(basename "$f")" ;; *) cp "$f" "$c/config/configs-$(basename "$f")" ;; esac
done
for f in tests/golden/*.cfg; do cp "$f" "$c/config/golden-$(basename "$f")"; done
printf '#overrides\nmodel.pipeline_model_parallel_size=2\nmodel.virtual_pipeline_model_parallel_size=2\ntrain.micro_batch_size=2\n' |
  cat tests/golden/dense-1f1b.cfg - >"$c/config/over-dense-1f1b.cfg"
printf '#overrides\nmodel.context_parallel_size=4\nmodel.cp_comm_type="a2a+p2p"\nmodel.hierarchical_context_parallel_sizes=[2,2]\n' |
  cat tests/golden/cp-a2a-p2p.cfg - >"$c/config/over-cp-a2a-p2p.cfg"
printf '#overrides\nmodel.recompute_granularity=full\nmodel.recompute_num_layers=2\nmixed_precision=fp8\n' |
  cat tests/golden/moe-ep-etp.cfg - >"$c/config/over-moe-ep-etp.cfg"
for f in models/*.cfg; do
  { strip "$f"; printf '#overrides\ncluster.topology=dgx-h100\ncluster.num_gpus=8\ntrain.global_batch_size=8\n'; } \
    >"$c/config/models-$(basename "$f")"
done
for f in topologies/*.cfg; do
  { strip "$f"; printf '#overrides\nmodel.name=llama3-8b\ncluster.num_gpus=8\ntrain.global_batch_size=8\n'; } \
    >"$c/config/topologies-$(basename "$f")"
done

csv=bench/validation/public.csv
head -n 5 "$csv" >"$c/csv/public-head.csv"
for p in $(tail -n +2 "$csv" | cut -d, -f1 | sed 's/-[0-9]*$//' | sort -u); do
  { head -n 1 "$csv"; grep "^$p-[0-9]" "$csv" | head -n 3; } >"$c/csv/public-$p.csv"
done
cp tests/data/validate_*.csv "$c/csv/"

for f in tests/data/bridge_*.yaml; do cp "$f" "$c/yaml/$(basename "$f")"; done
for f in tests/data/*.log; do cp "$f" "$c/nccl/$(basename "$f")"; done
"$parsim" net all_reduce cluster.topology=dgx-h100 cluster.num_gpus=16 --max-bytes 1M >"$c/nccl/net-all_reduce.log"
"$parsim" net all_gather cluster.topology=dgx-a100 cluster.num_gpus=8 --max-bytes 64K >"$c/nccl/net-all_gather.log"
"$parsim" net all_to_all cluster.topology=gb200-nvl72 cluster.num_gpus=72 --max-bytes 64K >"$c/nccl/net-all_to_all.log"
