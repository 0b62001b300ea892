/* validate: parsim against published measurements.
 *
 * Each row of a validation CSV (columns of bench/validation/public.csv, see
 * bench/validation/README.md) becomes a vcase: the KEY=VALUE overrides that
 * describe its run to parsim, the settings that had to be assumed, the
 * metric to predict and how the source counted FLOPs.  validate_predict()
 * simulates the case and turns the step into the row's metric; the summary
 * gives the absolute percent error (APE) overall and per group.
 *
 * Where a row's settings come from, first to last:
 *  1. the row itself (its cells and notes): always wins;
 *  2. its configuration's recipe (sim/recipes.h; bench/validation/
 *     recipes.csv), when one matches: each setting parsim's key table has
 *     replaces the framework default of that key, and that default is no
 *     longer counted as assumed; a recipe value the row contradicts is not
 *     applied (noted in `assumed`); settings parsim does not model go to
 *     the `ignored` (would change the result) and `ignored_same` (parsim
 *     behaves so anyway) columns, and Megatron's run-time switches apply
 *     (SP and TP comm overlap off with TP 1, TP comm overlap off without
 *     SP: listed in ignored_same);
 *  3. the framework defaults of the row's source (sim/frameworks.h;
 *     bench/validation/frameworks.csv), counted as assumed;
 *  4. parsim's key-table defaults.
 *
 * Rules (the documentation of record; bench/validation/ERRORS.md repeats
 * them):
 *  - gpu_type -> topology: A100, A100-80GB -> dgx-a100; H100 -> dgx-h100;
 *    H200 -> dgx-h200; H800 -> h800; B200 -> dgx-b200; B300 -> dgx-b300;
 *    GB200 -> gb200-nvl72; GB300 -> gb300-nvl72.
 *  - model -> model.name (models/<model>.cfg).  Notes: `layers_override=N`
 *    sets model.num_layers (a MoE layer pattern given as a list keeps its
 *    first N entries); `vocab N` sets the vocabulary; "GPT2BPETokenizer used
 *    as proxy" sets it to 50257; "w/o MTP" sets model.mtp_num_layers=0.
 *  - Empty cells take the documented default of the source's framework,
 *    chosen by the id prefix (the frameworks file; its model exceptions
 *    give the flex dispatcher of DeepSeek-architecture models and the
 *    Bridge gpt-oss vocabulary), and the row counts as assumed: Megatron Bridge and NeMo rows (mbridge*, nemo*,
 *    dgxc) SP when TP > 1, the distributed optimizer, no recompute, mbs 1,
 *    bf16, DP overlap on and TP comm overlap with SP; Megatron-LM 2021-22
 *    rows (sc21, korthikanti, mtnlg) full recompute, fp16, no SP, no
 *    distributed optimizer; the 2024 Megatron-LM table (mlm-h100) bf16, SP
 *    with TP, distributed optimizer, overlaps on (its notes); unset TP, PP,
 *    CP, EP 1 (or the layout the notes give: "... uses TP8 PP6"), no
 *    interleaving; ETP 1 for Megatron Bridge MoE recipes, Megatron's
 *    default (= TP) elsewhere; MoE rows of Bridge and NeMo recipes (dgxc
 *    included) the all-to-all dispatcher (flex, DeepEP / HybridEP, for
 *    DeepSeek-architecture models), Megatron Core's allgather elsewhere.
 *    The framework is a field of the file (family), never read from its
 *    display name.  A VP > 1 listed with PP 1 (a README
 *    table's column) is dropped: Megatron interleaves only with PP > 1,
 *    so the run had no interleaving (assumed, with a note).  Bridge and NeMo rows whose layers do not
 *    split evenly over PP x VP count the embedding and the loss as layers
 *    (model.account_for_embedding/loss_in_pipeline_split), as their
 *    recipes do.  A note that parsim can only
 *    approximate (Megatron-FSDP run as the distributed optimizer, token-drop
 *    routing run as balanced dropless, the Bridge gpt-oss vocabulary
 *    128256) counts as assumed too.
 *  - World size is num_gpus.  A dp cell that contradicts
 *    num_gpus/(tp*pp*cp) is ignored (and the row counted as assumed): the
 *    sources state GPU counts more reliably than derived DP sizes.
 *  - Cells are numbers as sim/numparse.h reads them (finite, whole cell,
 *    blanks around trimmed).  Skipped, with the reason: LoRA rows (not
 *    modeled), unknown gpu_type or metric, unparsable numbers, a num_gpus
 *    or parallel size (tp, pp, vp, cp, ep, etp, or TP/PP of the notes)
 *    outside 1..LIMIT_GPUS, a layers_override outside 1..MODEL_MAX_LAYERS,
 *    a vocab that does not fit in 64 bits, a flop_convention of `unknown` on a
 *    TFLOP/s or MFU row whose source's convention cannot be inferred, rows
 *    parsim's strategy check rejects (uneven pipeline layouts, ...), rows
 *    whose model has no preset.
 *  - FLOPs for tflops_per_gpu / mfu rows, per flop_convention:
 *    megatron = model_flops_per_step (causal attention at half);
 *    nemo-full-attention = the same with the core-attention term counted in
 *    full; sc21-hardware = 96 B s L h^2 (1 + s/6h + V/16Lh) with the padded
 *    vocabulary; hardware = full-attention model FLOPs plus the recomputed
 *    forward (full recompute: a third of the layer FLOPs, i.e. everything
 *    but the logits; selective: a third of the core-attention FLOPs).
 *    `unknown` is inferred per framework where the source's code is known:
 *    mlm-h100 (Megatron-LM r0.8 counted full attention) and korthikanti (its
 *    MFU is 72 B s L h^2 (1 + s/6h + V/12Lh), full attention) ->
 *    nemo-full-attention; mbridge-meas (Bridge's logger) -> megatron.
 *  - MFU uses the dense peak of the row's precision family, as the sources
 *    do (DGX Cloud READMEs: "vs BF16 989" for bf16 rows, "vs FP8 1979" for
 *    fp8 rows): bf16/fp16 -> peak_bf16, fp8 variants -> peak_fp8, nvfp4 ->
 *    peak_fp4, from the topology preset.
 *  - memory_gb: the max over stages of the simulated peak bytes, in GB
 *    (1e9) or GiB when the notes say so.
 *
 * Groups of the summary: overall, per metric family (time = step time,
 * tokens/s, TFLOP/s and MFU; memory; `tflops-flagged` = TFLOP/s and MFU
 * rows of models whose published tokens/s and TFLOP/s disagree with the
 * convention: the models the frameworks file flags (qwen3-30b-a3b,
 * gpt-oss-120b), SFT and LoRA rows, per the README), per metric, per source prefix (id without its trailing
 * number), per GPU type and per feature (PP>1, VP, CP, EP, FP8 = any fp8 or
 * fp4 precision).
 */
#ifndef PARSIM_VALIDATE_H
#define PARSIM_VALIDATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "config.h"
#include "csv.h"
#include "err.h"
#include "frameworks.h"

typedef enum { VM_STEP_TIME = 0, VM_TOKENS, VM_TFLOPS, VM_MFU, VM_MEMORY, VM_COUNT } vmetric;

typedef enum { VFAM_TIME = 0, VFAM_MEMORY, VFAM_TFLOPS_FLAGGED, VFAM_COUNT } vfamily;

/* VFEAT_MAMBA: the model's layer pattern has Mamba-2 mixers (hybrid models).
 * VFEAT_MOE: the model has experts (the summary's "arch" groups and the
 * --rows name `arch`, rather than a feature line). */
typedef enum { VFEAT_PP = 0, VFEAT_VP, VFEAT_CP, VFEAT_EP, VFEAT_FP8, VFEAT_MAMBA, VFEAT_MOE, VFEAT_COUNT } vfeature;

#define VCASE_MAX_OVER 40
#define VCASE_OVER_LEN 320

typedef struct vcase {
    size_t row;                  /* data row index in the table (0-based) */
    size_t run;                  /* configuration index (validate_number_runs) */
    char id[64];
    char prefix[48];             /* id without its trailing "-<number>" */
    char gpu[24];                /* gpu_type cell */
    char model[64];
    vmetric metric;
    vfamily family;
    double measured;             /* metric_value, in the metric's unit */
    flop_conv conv;              /* after inference; only for TFLOP/s, MFU */
    bool conv_inferred;          /* the row said `unknown` */
    double mem_unit_bytes;       /* memory rows: 1e9 (GB) or 2^30 (GiB) */
    bool feat[VFEAT_COUNT];
    int n_over;                  /* overrides that describe the run */
    char over[VCASE_MAX_OVER][VCASE_OVER_LEN];
    int n_assumed;               /* settings filled from defaults */
    char assumed[1024];          /* what was assumed, "; "-separated */
    char skip[320];              /* non-empty: not simulated, and why */
    int recipe_line;             /* line of the recipes file applied; 0: none */
    int n_ignored;               /* recipe settings parsim does not model */
    char ignored[1024];          /* those, "; "-separated */
    char ignored_same[2048];     /* recipe settings not applied that parsim
                                    follows anyway */
} vcase;

typedef struct vpred {
    bool ok;                     /* predicted; else skip says why */
    double value;                /* in the metric's unit */
    double ape;                  /* 100 |value - measured| / measured */
    double bias;                 /* the same, signed: + when parsim predicts a
                                    faster step, more throughput or more memory */
    double step_time_s;
    double peak_bytes;           /* largest per-stage peak of the simulated step */
    double hbm_bytes;            /* the GPU's memory (topology preset) */
    char skip[320];
} vpred;

/* Whether a predicted row's simulated peak fits in its GPU's memory. */
bool validate_pred_fits(const vpred *p);

/* Checks that the columns validate needs are present and that the table
 * has at most LIMIT_VALIDATE_ROWS rows.  SIM_EINVAL names the first
 * missing column, or the first row beyond the limit. */
int validate_check_columns(const csv_table *t, const char *name, sim_err *err);

/* Builds the case of data row r.  Loads the row's model preset (from
 * data_dir, as for cfg_create) to know whether it is a MoE and to cut a
 * MoE layer pattern to a layer override.  Never fails: a row that cannot
 * be turned into a run gets a skip reason. */
void validate_case(const csv_table *t, size_t r, const char *data_dir, vcase *c);

/* validate_case for every row of t into cases[0..t->nrows), loading each
 * (model, topology) preset once, then validate_number_runs.  SIM_OK or
 * SIM_ENOMEM. */
int validate_cases(const csv_table *t, const char *data_dir, vcase *cases);

/* What rows become runs with: the framework defaults (sim/frameworks.h;
 * required) and the recipes (sim/recipes.h; NULL: none), whose settings
 * apply over the framework defaults. */
struct vfw_table;
struct recipes;
typedef struct vsetup {
    const struct vfw_table *frameworks;
    const struct recipes *recipes;
} vsetup;

/* validate_cases with an explicit setup.  validate_case and
 * validate_cases read the bundled frameworks file (vfw_default_path) and
 * apply no recipes; if that file cannot be read, every row is skipped
 * with the reason. */
int validate_cases_setup(const csv_table *t, const char *data_dir, const vsetup *setup,
                         vcase *cases);

/* Fills only what a row says about itself (id, prefix, gpu, model,
 * metric, family, features from the cells; no preset is read), for
 * grouping rows of a validate output (compare).  validate_case does this
 * first.  fws (may be NULL: none) flags models whose TFLOP/s rows are
 * reported apart (vfw_flops_flagged). */
struct vfw_table;
void validate_case_labels(const csv_table *t, size_t r, const struct vfw_table *fws, vcase *c);

/* Simulates c (unless it is skipped) with `extra` overrides applied after
 * the case's own (NULL-terminated list or NULL; calibrate passes the
 * parameters it fits there) and fills p.  data_dir as for cfg_create.
 * Returns SIM_OK whether or not the row could be predicted (p->ok says),
 * SIM_ENOMEM when out of memory. */
int validate_predict(const vcase *c, const char *data_dir, const char *const *extra, vpred *p);

/* validate_predict over cases[0..n) on `jobs` threads (<= 1: in the
 * calling thread); rows with select[i] false (select may be NULL = all)
 * are left untouched in preds.  prog (may be NULL) is advanced as rows
 * finish.  Returns SIM_OK, or SIM_ENOMEM if any row ran out of memory. */
struct progress;
int validate_predict_many(const vcase *cases, const bool *select, size_t n, const char *data_dir,
                          const char *const *extra, vpred *preds, int jobs,
                          struct progress *prog);

/* Checks settings meant for every row (extra, NULL-terminated) on the
 * first row that is not skipped: a bad value, an unknown key or a missing
 * sim.params file is SIM_EINVAL naming the setting, instead of every row
 * being skipped for it.  SIM_OK when there is nothing to check. */
int validate_check_extra(const vcase *cases, size_t n, const char *data_dir,
                         const char *const *extra, sim_err *err);

/* Threads to use when the user does not say: the online CPUs. */
int validate_default_jobs(void);

/* FLOPs per step under a convention for a resolved run (global batch of
 * in->train, vocabulary padded for tp, recompute of in->par); exposed for
 * tests.  FC_UNKNOWN gives NAN. */
double validate_conv_flops(flop_conv conv, const run_inputs *in, int64_t tp);

/* Error statistics of a set of APEs (percent). */
typedef struct vstats {
    size_t n;                    /* values */
    double median, p90, mean;    /* NAN when n == 0 */
} vstats;

/* Sorts ape[0..n) in place and fills st (GSL quantiles: p90 is
 * gsl_stats_quantile_from_sorted_data at 0.9, linear interpolation). */
void validate_stats(double *ape, size_t n, vstats *st);

/* One group of the summary: a label and whether a case belongs to it. */
typedef struct vgroup {
    char label[64];              /* e.g. "source dgxc", "feature CP" */
    int kind;                    /* what it selects (validate.c) */
    int arg;                     /* family, metric or feature */
    char value[48];              /* prefix or GPU type */
} vgroup;

/* Fills groups (up to max) in summary order for these cases; returns the
 * number. */
size_t validate_groups(const vcase *cases, size_t n, vgroup *groups, size_t max);
bool validate_in_group(const vgroup *g, const vcase *c);

/* Prints the summary table: per group rows, predicted, assumed, median,
 * p90 and mean APE, and the median signed error (bias); then the number
 * of predicted rows whose peak exceeds the GPU's memory, with the first
 * ids; then, when recipes were applied, how many rows ran with one and how
 * many have settings parsim does not model, with the most frequent keys
 * (rows per key); then the skipped rows by reason. */
void validate_summary(FILE *out, const vcase *cases, const vpred *preds, size_t n);

/* Writes the input table with predicted_value, ape_percent, skip_reason,
 * assumed, overrides, peak_gib, hbm_gib and fits (yes/no: peak_gib <=
 * hbm_gib; these three empty for rows not predicted), ignored and
 * ignored_same (the recipe settings not applied, "; "-separated, with why
 * where the table of recipes.c says) appended (input rows byte for
 * byte). */
void validate_write_csv(FILE *out, const csv_table *t, const vcase *cases, const vpred *preds);

/* Numbers the configurations of cases[0..n) in order of first appearance:
 * rows whose overrides are the same (one run reported as tokens/s and
 * TFLOP/s, or the same setup measured in two releases) share a run index.
 * Calibration holds out whole configurations by its parity, so no held-out
 * row is a second metric of a run the fit has seen.  O(n log n)
 * comparisons.  SIM_OK or SIM_ENOMEM (the runs are then left as they
 * were). */
int validate_number_runs(vcase *cases, size_t n);

/* Row filters (--rows): comma-separated conditions, all of which must
 * hold, each `NAME=PATTERN` or `NAME!=PATTERN`; PATTERN is a shell glob
 * (fnmatch).  NAME is a column of the table or one of the derived names
 * `prefix` (source prefix of the id), `family` (time, memory,
 * tflops-flagged), `arch` (dense, moe: whether the model has experts),
 * `row` (0-based data row index) and `run` (configuration
 * index, validate_number_runs); for row and run PATTERN is even, odd or a
 * number.  Example: "gpu_type=H100,family=time,prefix!=mlm-h100".
 * validate_filter_check reports an unknown NAME or a malformed condition. */
int validate_filter_check(const csv_table *t, const char *filter, sim_err *err);
bool validate_filter_match(const csv_table *t, const vcase *c, const char *filter);

const char *vmetric_name(vmetric m);
const char *vfamily_name(vfamily f);

/* Source prefix of an id ("mbridge-meas-001" -> "mbridge-meas"). */
void validate_id_prefix(const char *id, char *out, size_t len);

#endif
