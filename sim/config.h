/* config: libconfig input files, presets, KEY=VALUE overrides and the table
 * of every key parsim accepts.
 *
 * A cfg_t holds flattened settings ("model.hidden_size" -> value) with the
 * file and line each came from and its priority: a preset (models/<name>.cfg
 * named by model.name, topologies/<name>.cfg named by cluster.topology,
 * a parameter file named by sim.params) < the run config file < command-line
 * overrides.  cfg_resolve() loads the presets, then checks every key against
 * the key table (unknown keys and wrong types are errors with file:line) and
 * fills run_inputs.  Nothing falls back silently: a misspelled key is an
 * error, never a default.  Every numeric key has a range (bounds.h), from
 * files and overrides alike; a preset name is a plain name, not a path.
 *
 * Ownership: cfg_create() allocates, cfg_destroy() frees (NULL is a no-op).
 * Strings returned by accessors live as long as the cfg.
 */
#ifndef PARSIM_CONFIG_H
#define PARSIM_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cluster.h"
#include "err.h"
#include "model.h"
#include "strategy.h"

typedef struct cfg cfg_t;

typedef enum { CFG_PRIO_PRESET = 0, CFG_PRIO_FILE = 1, CFG_PRIO_CLI = 2 } cfg_prio;

typedef struct sim_opts {
    bool ideal_pipeline;   /* zero comm, identical work per stage and chunk */
    int64_t seed;          /* for any randomness; printed with results */
    char params_file[512]; /* sim.params: parameter file loaded as a preset */
    bool steady_extension; /* a long step from two short samples where verified periodic (step_period.h) */
    bool keep_ops;         /* not a key: keep every kernel a task (for a trace)
                              instead of fusing chains on one stream */
    bool period_check;     /* not a key: a step from one sample takes the
                              second as well and compares the two
                              (step_period_checked) */
    bool plain_graph;      /* not a key: every pipeline send and host issue
                              a task, even where a lag or a release time
                              would do (step.c, "Sends", "The host"): the
                              reference those are checked against */
    bool graph_only;       /* not a key: every step simulated on its graph,
                              none walked directly (step_direct.h): the
                              reference that path is checked against */
} sim_opts;

/* CUDA graphs (Megatron's cuda_graph_impl / cuda_graph_modules). */
typedef enum { GRAPH_NONE = 0, GRAPH_LOCAL, GRAPH_TE, GRAPH_FULL_ITERATION } graph_impl_kind;
enum {
    GRAPH_MOD_ATTN = 1u << 0,
    GRAPH_MOD_MLP = 1u << 1,
    GRAPH_MOD_MOE = 1u << 2,
    GRAPH_MOD_MOE_ROUTER = 1u << 3,
    GRAPH_MOD_MOE_PREPROCESS = 1u << 4,
    GRAPH_MOD_MAMBA = 1u << 5,
    GRAPH_MOD_FULL_ITERATION = 1u << 6, /* legacy: local + [full_iteration] */
};
typedef struct graph_spec {
    graph_impl_kind impl;  /* after check: FULL_ITERATION also for the legacy scope */
    unsigned modules;      /* GRAPH_MOD_* bits; 0 = the whole layer (after check:
                              model.cuda_graph_modules, else cuda_graph_scope) */
    unsigned scope;        /* model.cuda_graph_scope as given */
    bool enable_local;     /* model.enable_cuda_graph: the legacy switch for local graphs */
} graph_spec;

/* Everything one simulation needs, as plain data. */
typedef struct run_inputs {
    model_spec model;
    parallel_spec par;
    train_spec train;
    peft_spec peft;
    ddp_spec ddp;
    cluster_spec cluster;
    graph_spec graphs;
    sim_opts sim;
} run_inputs;

/* data_dir: folder holding models/ and topologies/ (NULL = PARSIM_DATA_DIR
 * env var, else the source tree the binary was built from). */
cfg_t *cfg_create(const char *data_dir);
void cfg_destroy(cfg_t *c);

/* The folder presets are read from (models/, topologies/, kernels/). */
const char *cfg_data_dir(const cfg_t *c);

/* Files c reads (cfg_load_file, the presets cfg_resolve loads, kernel
 * and measured tables) come from fc where it has them, and are kept there
 * when it has not (filecache.h); NULL: every file read as it is named.
 * fc outlives c. */
struct filecache;
void cfg_use_filecache(cfg_t *c, struct filecache *fc);

/* Loads a libconfig file at a priority.  Syntax errors name file and line.
 * A path ending in .yaml or .yml is a Megatron Bridge saved config instead
 * (bridge_yaml.h); what it did with each field is cfg_bridge_notes(). */
int cfg_load_file(cfg_t *c, const char *path, cfg_prio prio, sim_err *err);

/* One setting from a file of another format: key, value in override
 * syntax, its origin and priority (malformed: SIM_EINVAL at file:line). */
int cfg_set_at(cfg_t *c, const char *key, const char *value, const char *file, int line, cfg_prio prio,
               sim_err *err);

/* The notes of the Megatron Bridge config loaded into c, NULL if none. */
struct bridge_notes;
const struct bridge_notes *cfg_bridge_notes(const cfg_t *c);

/* Applies one "a.b.c=value" override (value: int, float, true/false, a
 * string with or without quotes, or a [list]). */
int cfg_set_override(cfg_t *c, const char *assignment, sim_err *err);

/* Loads presets, validates every key against the table and fills in. */
int cfg_resolve(cfg_t *c, run_inputs *in, sim_err *err);

/* cfg_resolve, then strategy_resolve on what it filled: every input of a
 * run checked, an error of strategy's rules with the file and line of its
 * key. */
int cfg_resolve_all(cfg_t *c, run_inputs *in, strategy_t *s, sim_err *err);

/* Adds the file and line where err->key was set to an error that names a
 * key but no file (one of strategy's); returns err->code. */
int cfg_err_locate(const cfg_t *c, sim_err *err);

/* The same for commands that need only the fabric (parsim net): fills
 * in->cluster and in->sim from cluster.* and sim.* keys.  Other keys are
 * neither required nor applied (in->model etc. stay zero), but an unknown
 * key anywhere is still an error. */
int cfg_resolve_cluster(cfg_t *c, run_inputs *in, sim_err *err);

/* Where a key was set: returns false if it was never set (defaulted). */
bool cfg_origin(const cfg_t *c, const char *key, const char **file, int *line);

/* Fills err with code, origin of key and message (origin empty if unset). */
int cfg_err_key(const cfg_t *c, sim_err *err, int code, const char *key,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Writes the resolved settings as "key = value;  # file:line" lines. */
void cfg_dump(const cfg_t *c, FILE *out);

/* The range of a numeric key (or of each element of a numeric list key),
 * in config units: [lo, hi], or (lo, hi] when *lo_open.  False for a key
 * that is not in the table or not a bounded number. */
bool cfg_key_range(const char *key, double *lo, bool *lo_open, double *hi);
/* Whether key is in the key table; *def (may be NULL) gets its default in
 * override syntax, NULL for a key without one. */
bool cfg_key_known(const char *key, const char **def);

/* Checks one KEY=VALUE against the key table alone (no presets, no other
 * keys): the key is known, the value has its type, a number is in its
 * range, a name is one the key accepts.  SIM_EINVAL naming the key. */
int cfg_check_setting(const char *assignment, sim_err *err);

/* Prints the key table (key, type, default, range, help) for --help-config. */
void cfg_print_keys(FILE *out);

/* Parses a mixed_precision name (bf16, fp8, mxfp8, ..., or a Megatron
 * Bridge recipe name such as "bf16_with_fp8_current_scaling_mixed"). */
bool precision_from_name(const char *name, precision_kind *out);
const char *precision_name(precision_kind p);
/* ddp.data_parallel_sharding_strategy's name of a dp_shard_kind. */
const char *dp_shard_name(int k);

#endif
