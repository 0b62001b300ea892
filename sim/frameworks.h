/* frameworks: what each source's framework did where a validation row
 * leaves a cell empty, and the per-model exceptions of its recipes, read
 * from a data file (bench/validation/frameworks.csv) so that validate.c
 * holds only the mechanism.
 *
 * File: a CSV (sim/csv.h) with the columns of vfw_columns in frameworks.c.
 * Two kinds of rows:
 *  - a framework: `prefix` set, `model` empty.  A row of validate belongs
 *    to the first framework whose prefix starts its id prefix (list
 *    "mbridge-meas" before "mbridge"); the framework with prefix `*` is
 *    the fallback and must be present.  name and family are required;
 *    booleans are true or false; recompute, precision, moe_dispatcher,
 *    attention_backend, lora_target_modules are values of the config keys
 *    model.recompute_granularity, mixed_precision,
 *    model.moe_token_dispatcher_type, model.attention_backend and
 *    peft.target_modules (checked with cfg_check_setting; empty:
 *    nothing set); flop_convention is what `unknown` means for the
 *    source (a convention name, or unknown: not inferable).
 *  - a model exception: `model` set (a shell glob), `prefix` empty;
 *    `family` lists the families it holds for ("bridge|nemo"; empty: all);
 *    it may set moe_dispatcher (replacing the framework's for MoE rows of
 *    a framework that sets one), vocab_size (where the notes give none)
 *    and the assumed text, or flag the model's TFLOP/s and MFU rows
 *    (flops_flagged = true).  Other cells stay empty.
 * Every violation is SIM_EINVAL naming file:line, the column and the rule.
 */
#ifndef PARSIM_FRAMEWORKS_H
#define PARSIM_FRAMEWORKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* The FLOP conventions of published TFLOP/s and MFU figures (a row's
 * flop_convention; validate.h says how each counts). */
typedef enum {
    FC_MEGATRON = 0, FC_NEMO_FULL, FC_SC21_HW, FC_HARDWARE, FC_UNKNOWN, FC_COUNT
} flop_conv;

/* The name a row writes, or "?". */
const char *flop_conv_name(flop_conv f);

/* Which framework a source used; rules keyed on it (model exceptions)
 * ask this, never the display name. */
typedef enum {
    VFW_BRIDGE = 0,   /* Megatron Bridge */
    VFW_NEMO,         /* NeMo 2.0 recipes, also the DGX Cloud benchmarks */
    VFW_MEGATRON_LM,  /* Megatron-LM's own scripts and tables */
    VFW_DEEPSPEED,    /* Megatron-DeepSpeed */
    VFW_MCORE,        /* none known: Megatron Core's defaults */
    VFW_COUNT
} vfw_family;

typedef struct vframework {
    char prefix[48];
    char name[64];               /* for the assumed text */
    vfw_family family;
    bool sp_when_tp;             /* sequence parallel when TP > 1 */
    bool dist_opt;               /* distributed optimizer */
    char recompute[16];          /* none | selective | full */
    char precision[48];
    bool overlap_dp;             /* overlap_grad_reduce (+ param gather with dist-opt) */
    bool tp_comm_overlap;        /* with SP and TP > 1 */
    bool moe_etp1;               /* MoE recipes set expert_tensor_parallel_size = 1 */
    char moe_dispatcher[16];     /* MoE recipes' dispatcher; "" = Megatron Core's */
    int infer;                   /* flop_conv `unknown` stands for */
    char infer_why[200];
    char attention_backend[16];  /* "" = Megatron's default */
    char attention_why[80];
    bool split_counts_embedding; /* uneven pipelines count embedding and loss as layers */
    char lora_target_modules[64];/* "" = parsim's default (all four) */
    char lora_assumed[160];
    int line;
} vframework;

typedef struct vmodel_rule {
    char model[64];              /* glob */
    unsigned families;           /* bit per vfw_family; 0 = all */
    char moe_dispatcher[16];
    int64_t vocab_size;          /* 0 = none */
    bool flops_flagged;          /* TFLOP/s and MFU rows reported apart */
    char assumed[200];
    int line;
} vmodel_rule;

typedef struct vfw_table {
    char file[512];
    size_t n_fw, n_rules;
    vframework *fw;
    vmodel_rule *rules;
} vfw_table;

/* The bundled file: bench/validation/frameworks.csv of the source tree. */
const char *vfw_default_path(void);

/* Reads and checks a frameworks file (rules above).  SIM_EINVAL naming
 * file:line, SIM_EIO, SIM_ENOMEM; on error *out is empty. */
int vfw_read(const char *path, vfw_table *out, sim_err *err);
void vfw_free(vfw_table *t);

/* The framework of an id prefix (the fallback when none matches). */
const vframework *vfw_for_prefix(const vfw_table *t, const char *prefix);

/* Whether a model exception flags model's TFLOP/s and MFU rows (whose
 * published tokens/s and TFLOP/s imply another FLOPs per token than the
 * stated convention; bench/validation/README.md): the family
 * tflops-flagged.  Any framework.  t may be NULL: none. */
bool vfw_flops_flagged(const vfw_table *t, const char *model);

/* The first model exception for model under framework fw with a
 * dispatcher (want_dispatcher) or a vocabulary, or NULL. */
const vmodel_rule *vfw_model_rule(const vfw_table *t, const vframework *fw, const char *model,
                                  bool want_dispatcher);

#endif
