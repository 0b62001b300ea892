/* bridge_yaml: a Megatron Bridge saved config (run_config.yaml, the
 * ConfigContainer that Bridge writes into every checkpoint) read as parsim's
 * config file, with libyaml.
 *
 * The file is a YAML mapping of sections (model, train, ddp, ...), each a
 * dataclass written as a mapping with `_target_: <module.Class>`.  Values
 * that are objects: a dtype or a function `{_target_: torch.bfloat16,
 * _call_: false}` (a symbol), an enum `{_target_: ...AttnBackend, _call_:
 * true, _args_: [5]}` (read by `_name_`, else by its value), a partial
 * `{_target_, _partial_: true, ...}` (a symbol).  Private fields (`_...`)
 * are skipped.
 *
 * Every field (leaf) gets one verdict, from the rule table in
 * bridge_yaml.c (first match wins), else by default:
 *   mapped       set as a parsim key (at the file's priority, origin
 *                file:line), the key table checks the value at resolve;
 *   default      `null`: Megatron's default, i.e. the key table's;
 *   ignored      parsim does not use it (listed by --explain-config);
 *   not modeled  it would change the result and parsim does not simulate
 *                it: a warning (bridge_notes_warn), the run goes on.
 * By default a field of the sections model, train, ddp, tokenizer,
 * comm_overlap and peft whose path is a parsim key is mapped; every other
 * field is ignored.  mixed_precision (a section or a recipe name) becomes
 * the one mixed_precision key.  Fallbacks (tokenizer.vocab_size,
 * comm_overlap.*, mixed_precision.grad_reduce_in_fp32) are applied before
 * the model's and ddp's own fields, which win; dataset.sequence_length, the
 * length the data loader feeds, wins over model.seq_length.  The file has
 * no world size and no system: cluster.* come from the command line or a
 * topology preset.  model._target_ is the provider class; the report names
 * it (as model.name is empty).
 *
 * Bad input is SIM_EINVAL naming file:line (and the field): YAML syntax,
 * non-UTF-8 text, more than one document, a root or section that is not a
 * mapping, a mapping where a parsim key wants a value, beyond
 * LIMIT_YAML_BYTES / LIMIT_YAML_NODES / LIMIT_YAML_DEPTH (bounds.h).
 */
#ifndef PARSIM_BRIDGE_YAML_H
#define PARSIM_BRIDGE_YAML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "err.h"

typedef enum {
    BRIDGE_MAPPED = 0,
    BRIDGE_DEFAULT,
    BRIDGE_IGNORED,
    BRIDGE_NOT_MODELED,
} bridge_verdict;

typedef struct bridge_field {
    char *path;             /* "model.num_layers" */
    int line;
    bridge_verdict verdict;
    char *detail;           /* mapped: "key=value"; not modeled: "value: why";
                               others: why */
} bridge_field;

typedef struct bridge_notes {
    char file[256];
    char provider[256];     /* model._target_, "" if none */
    bridge_field *f;        /* in file order */
    size_t n, cap;
} bridge_notes;

/* Whether path names a YAML file (ends in .yaml or .yml). */
bool bridge_yaml_is_path(const char *path);

bridge_notes *bridge_notes_create(void);
void bridge_notes_destroy(bridge_notes *n); /* NULL is a no-op */

/* Where the mapped fields go: parsim's key table seen through two calls
 * (config passes its own), so that the reader needs nothing of config.
 * key_known: whether a path is a parsim key; set: one key with its value
 * in override syntax and its origin (malformed: SIM_EINVAL at file:line). */
typedef struct bridge_sink {
    bool (*key_known)(const char *key);
    int (*set)(void *ctx, const char *key, const char *value, const char *file, int line, sim_err *err);
    void *ctx;
} bridge_sink;

/* Reads path into sink (rules above); notes gets every field's verdict.
 * SIM_EINVAL (file:line), SIM_ENOMEM. */
int bridge_yaml_load(const char *path, const bridge_sink *sink, bridge_notes *notes, sim_err *err);

/* The provider's class name without its module ("Llama31ModelProvider"),
 * "" if the file has none. */
const char *bridge_notes_provider(const bridge_notes *n);

/* --explain-config: one line a field, "file:line: path: verdict". */
void bridge_notes_explain(const bridge_notes *n, FILE *out);

/* One "parsim: warning: ..." line for each field not modeled; returns how
 * many. */
int bridge_notes_warn(const bridge_notes *n, FILE *out);

#endif
