/* recipes: the settings each published run's performance recipe used
 * (bench/validation/recipes.csv), read, checked and mapped onto parsim's
 * config keys for validate.
 *
 * File: a CSV (sim/csv.h) with the columns source, model, gpu_type,
 * precision, num_gpus, release, settings (further columns, such as
 * recipe_ref and notes, are kept for readers and not used).  A row names one
 * configuration; settings are `;`-separated `key=value` in Megatron Bridge
 * names.  A `;` inside parentheses belongs to the value: a value may end in
 * a parenthesized comment ("mock (no sequence packing)"), which is dropped.
 *
 * Rules (file:line and the rule on every violation, SIM_EINVAL):
 *  - the seven columns above present; num_gpus an integer in 1..LIMIT_GPUS;
 *    source, model, gpu_type, precision, release not empty;
 *  - every setting has a key before `=`; a key occurs once per row;
 *  - two rows of the same configuration must have the same settings (the
 *    same twice is accepted);
 *  - a setting parsim applies has a value its key accepts (type, range,
 *    names: cfg_check_setting), after the value mappings below.
 *  An unknown key is not an error: it is ignored, and reported.
 *
 * Mapping of one setting (recipes_map), in order:
 *  1. a rule of the table in recipes.c whose key and value match (globs)
 *     may rename the key (comm_overlap.tp_comm_overlap ->
 *     model.tp_comm_overlap), take a number out of the value ("... (vocab
 *     128256)" -> model.vocab_size=128256) or mark the setting ignored with
 *     a verdict: `same` (parsim behaves so anyway: dataset=mock,
 *     train.manual_gc=true) or `changes` (parsim does not model it and the
 *     result would move);
 *  2. a key parsim's key table has (cfg_key_known) is applied; `null` is
 *     Megatron's default, i.e. the key table's default (the setting unsets
 *     the key);
 *  3. any other key is ignored, verdict `changes` unless a rule says
 *     `same`.
 * Keys added to the key table later are picked up by step 2 without a
 * change here.
 *
 * A row matches a validation row on source (= the id's prefix), model,
 * gpu_type, precision, num_gpus and release, all exact.  A validation row's
 * release: the notes' `release=VALUE` (up to `;`, a trailing " container"
 * dropped), else for a source tagged `@ vTAG` "<id prefix> vTAG"
 * (validate_row_release in validate.c).
 */
#ifndef PARSIM_RECIPES_H
#define PARSIM_RECIPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* Longest key and value of one setting; longer ones are an error. */
#define RECIPE_KEY_LEN 96
#define RECIPE_VALUE_LEN 256
/* Settings of one row at most (the bundled file has up to 60); all rows
 * together at most LIMIT_RECIPE_SETTINGS. */
#define RECIPE_MAX_SETTINGS 128

typedef struct recipe_setting {
    const char *key;              /* into the row's text */
    const char *value;            /* as written (comment and all) */
} recipe_setting;

typedef struct recipe_row {
    char source[48], model[64], gpu[24], precision[24], release[64];
    int64_t num_gpus;
    int line;                     /* where the row starts in the file */
    int n;
    recipe_setting *set;          /* n settings, in file order */
    char *text;                   /* the settings cell, split in place */
} recipe_row;

typedef struct recipes {
    char file[512];
    size_t n;
    recipe_row *rows;
    const recipe_row **sorted;    /* by configuration, for recipes_match */
} recipes_t;

/* Reads and checks a recipes file (rules above).  SIM_EINVAL naming
 * file:line and the rule, SIM_EIO if it cannot be read, SIM_ENOMEM.  On
 * error *out is empty. */
int recipes_read(const char *path, recipes_t *out, sim_err *err);
void recipes_free(recipes_t *r);

/* The row of a configuration, or NULL; O(log n). */
const recipe_row *recipes_match(const recipes_t *r, const char *source, const char *model,
                                const char *gpu, const char *precision, int64_t num_gpus,
                                const char *release);

typedef enum {
    RECIPE_APPLY = 0,   /* key is parsim's; value in override syntax */
    RECIPE_UNSET,       /* `null`: the key table's default */
    RECIPE_SAME,        /* ignored: parsim behaves so anyway */
    RECIPE_CHANGES,     /* ignored: parsim does not model it */
} recipe_action;

/* One setting of row (which the rules' conditions read) mapped onto
 * parsim: the action, the parsim key (RECIPE_APPLY, RECIPE_UNSET) and
 * value, and for the ignored ones why (may be ""). */
typedef struct recipe_mapped {
    recipe_action action;
    char key[RECIPE_KEY_LEN];
    char value[RECIPE_VALUE_LEN];
    const char *why;
} recipe_mapped;

void recipes_map(const recipe_row *row, const recipe_setting *s, recipe_mapped *out);

#endif
