/* recipes: reading the recipes file and mapping its settings (rules in
 * recipes.h). */
#include "recipes.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "config.h"
#include "csv.h"

/* ------------------------------------------------------------ the table */

/* How a Megatron Bridge setting parsim's key table lacks (or spells
 * differently) is treated.  First match wins; `when` is another setting of
 * the same row ("key=glob") that must be present for the rule to hold.
 * APPLY rules rename (to) or take the number after `extract` from the raw
 * value; SAME / CHANGES rules are the verdict on a setting parsim does
 * not apply.  The verdicts: SAME when parsim's model already behaves as
 * the setting says, CHANGES when the measured run did something parsim
 * does not simulate. */
typedef struct recipe_rule {
    const char *key, *value, *when;
    recipe_action action;
    const char *to, *extract, *why;
} recipe_rule;

/* Spelling: rules that make a setting one of parsim's keys (looked up in
 * the key table afterwards). */
static const recipe_rule spelling[] = {
    { "comm_overlap.tp_comm_overlap", "*", NULL, RECIPE_APPLY, "model.tp_comm_overlap", NULL, "" },
    { "comm_overlap.overlap_p2p_comm", "*", NULL, RECIPE_APPLY, "model.overlap_p2p_comm", NULL, "" },
    { "comm_overlap.overlap_moe_expert_parallel_comm", "*", NULL, RECIPE_APPLY,
      "model.overlap_moe_expert_parallel_comm", NULL, "" },
    { "comm_overlap.delay_wgrad_compute", "*", NULL, RECIPE_APPLY, "model.delay_wgrad_compute", NULL, "" },
    { "tokenizer.vocab_size", "*", NULL, RECIPE_APPLY, "model.vocab_size", NULL, "" },
    /* Bridge's mixed-precision config sets the DDP reduce precision */
    { "mixed_precision.grad_reduce_in_fp32", "*", NULL, RECIPE_APPLY, "ddp.grad_reduce_in_fp32",
      NULL, "" },
    { "tokenizer", "*(vocab [0-9]*", NULL, RECIPE_APPLY, "model.vocab_size", "(vocab ", "" },
    /* NeMo's DGX Cloud recipes give the bucket in bytes ("75MB"); parsim's
     * key counts parameters, as Megatron Core's */
    { "ddp.bucket_size", "*[A-Za-z]", NULL, RECIPE_CHANGES, NULL, NULL,
      "a size in bytes, where ddp.bucket_size counts parameters" },
};

/* Verdicts on settings parsim's key table does not have. */
static const recipe_rule verdicts[] = {
    { "dataset", "*", NULL, RECIPE_SAME, NULL, NULL, "no data loading is simulated" },
    { "dataset.*", "*", NULL, RECIPE_SAME, NULL, NULL, "no data loading is simulated" },
    { "tokenizer", "*", NULL, RECIPE_SAME, NULL, NULL, "the vocabulary is the model preset's" },
    { "tokenizer.tokenizer_model", "*", NULL, RECIPE_SAME, NULL, NULL,
      "the vocabulary is the model preset's" },
    { "train.manual_gc", "true", NULL, RECIPE_SAME, NULL, NULL,
      "no garbage-collection pauses are simulated" },
    { "train.manual_gc_interval", "*", "train.manual_gc=true", RECIPE_SAME, NULL, NULL,
      "no garbage-collection pauses are simulated" },
    { "model.should_pad_vocab", "true", NULL, RECIPE_SAME, NULL, NULL,
      "the vocabulary is padded (model.make_vocab_size_divisible_by)" },
    { "model.cuda_graph_impl", "none", NULL, RECIPE_SAME, NULL, NULL, "no CUDA graphs" },
    { "model.enable_cuda_graph", "false", NULL, RECIPE_SAME, NULL, NULL, "no CUDA graphs" },
    { "model.cuda_graph_scope", "*", "model.cuda_graph_impl=none", RECIPE_SAME, NULL, NULL,
      "no CUDA graphs" },
    { "ddp.use_megatron_fsdp", "false", NULL, RECIPE_SAME, NULL, NULL, "no Megatron-FSDP" },
    /* sharding strategies are read only by Megatron-FSDP */
    { "ddp.data_parallel_sharding_strategy", "*", "ddp.use_megatron_fsdp=false", RECIPE_SAME, NULL,
      NULL, "read only with Megatron-FSDP" },
    /* the kernel tables are of the fused kernels */
    { "model.*fusion", "true", NULL, RECIPE_SAME, NULL, NULL, "fused kernels are simulated" },
    { "model.cross_entropy_fusion_impl", "*", NULL, RECIPE_SAME, NULL, NULL,
      "fused kernels are simulated" },
    /* the FP8 / FP4 recipe is the one mixed_precision names */
    { "mixed_precision.fp8", "*", NULL, RECIPE_SAME, NULL, NULL, "mixed_precision names the recipe" },
    { "mixed_precision.fp8_recipe", "*", NULL, RECIPE_SAME, NULL, NULL,
      "mixed_precision names the recipe" },
    { "mixed_precision.fp4_recipe", "*", NULL, RECIPE_SAME, NULL, NULL,
      "mixed_precision names the recipe" },
    { "mixed_precision.fp8_amax_*", "*", NULL, RECIPE_SAME, NULL, NULL,
      "mixed_precision names the recipe" },
    { "mixed_precision.fp8_param_gather", "false", NULL, RECIPE_SAME, NULL, NULL,
      "parameters are gathered in bf16" },
    { "mixed_precision.first_last_layers_bf16", "false", NULL, RECIPE_SAME, NULL, NULL,
      "every layer in the row's precision" },
    { "model.use_te_rng_tracker", "*", NULL, RECIPE_SAME, NULL, NULL, "no cost simulated" },
    { "rng.te_rng_tracker", "*", NULL, RECIPE_SAME, NULL, NULL, "no cost simulated" },
    { "dist.enable_megatron_core_experimental", "*", NULL, RECIPE_SAME, NULL, NULL,
      "no cost simulated" },
    { "model.init_model_with_meta_device", "*", NULL, RECIPE_SAME, NULL, NULL,
      "initialization is outside the step" },
    { "model.moe_router_force_load_balancing", "true", NULL, RECIPE_SAME, NULL, NULL,
      "routing is balanced" },
    { "model.moe_grouped_gemm", "true", NULL, RECIPE_SAME, NULL, NULL, "experts run as grouped GEMMs" },
    { "model.moe_aux_loss_coeff", "*", NULL, RECIPE_SAME, NULL, NULL, "a loss weight" },
    { "comm_overlap.defer_embedding_wgrad_compute", "false", NULL, RECIPE_SAME, NULL, NULL,
      "weight gradients follow their data gradients" },
};

static bool when_holds(const recipe_row *row, const char *when)
{
    if (!when)
        return true;
    const char *eq = strchr(when, '=');
    size_t kl = (size_t)(eq - when);
    for (int i = 0; i < row->n; i++)
        if (strlen(row->set[i].key) == kl && !strncmp(row->set[i].key, when, kl))
            return fnmatch(eq + 1, row->set[i].value, 0) == 0;
    return false;
}

static const recipe_rule *find_rule(const recipe_rule *rules, size_t n, const recipe_row *row,
                                    const char *key, const char *value)
{
    for (size_t k = 0; k < n; k++)
        if (!fnmatch(rules[k].key, key, 0) && !fnmatch(rules[k].value, value, 0) &&
            when_holds(row, rules[k].when))
            return &rules[k];
    return NULL;
}

/* value without a trailing parenthesized comment: "auto (TE ...)" ->
 * "auto". */
static void strip_comment(const char *value, char *out, size_t len)
{
    size_t n = strlen(value);
    const char *open = strstr(value, " (");
    if (open && n && value[n - 1] == ')')
        n = (size_t)(open - value);
    snprintf(out, len, "%.*s", (int)n, value);
}

void recipes_map(const recipe_row *row, const recipe_setting *s, recipe_mapped *out)
{
    memset(out, 0, sizeof *out);
    out->why = "";
    char value[RECIPE_VALUE_LEN];
    strip_comment(s->value, value, sizeof value);
    snprintf(out->key, sizeof out->key, "%s", s->key);
    snprintf(out->value, sizeof out->value, "%s", value);
    const recipe_rule *r =
        find_rule(spelling, sizeof spelling / sizeof spelling[0], row, s->key, s->value);
    if (r && r->action != RECIPE_APPLY) {
        out->action = r->action;
        out->why = r->why;
        return;
    }
    if (r) {
        snprintf(out->key, sizeof out->key, "%s", r->to);
        if (r->extract) {
            const char *p = strstr(s->value, r->extract) + strlen(r->extract);
            snprintf(out->value, sizeof out->value, "%.*s", (int)strspn(p, "0123456789"), p);
        }
    }
    if (cfg_key_known(out->key, NULL)) {
        out->action = strcmp(out->value, "null") ? RECIPE_APPLY : RECIPE_UNSET;
        return;
    }
    r = find_rule(verdicts, sizeof verdicts / sizeof verdicts[0], row, s->key, s->value);
    out->action = r ? r->action : RECIPE_CHANGES;
    out->why = r ? r->why : "";
}

/* ------------------------------------------------------------ the file */

static const char *const columns[] = { "source", "model", "gpu_type", "precision", "num_gpus",
                                       "release", "settings" };

void recipes_free(recipes_t *r)
{
    for (size_t i = 0; r->rows && i < r->n; i++) {
        free(r->rows[i].set);
        free(r->rows[i].text);
    }
    free(r->rows);
    free(r->sorted);
    memset(r, 0, sizeof *r);
}

/* Copies a cell into a fixed buffer; false if it is empty or too long. */
static bool copy_cell(char *dst, size_t len, const char *cell)
{
    size_t n = strlen(cell);
    if (n == 0 || n >= len)
        return false;
    memcpy(dst, cell, n + 1);
    return true;
}

/* The end of the setting at p: the next ';' outside parentheses. */
static size_t setting_len(const char *p)
{
    size_t n = 0;
    int depth = 0;
    while (p[n] && (p[n] != ';' || depth > 0)) {
        depth += p[n] == '(' ? 1 : p[n] == ')' && depth > 0 ? -1 : 0;
        n++;
    }
    return n;
}

/* Splits the settings text into row->set, pointing into a copy of it;
 * *total counts the settings of the file so far. */
static int parse_settings(const char *path, int line, const char *text, recipe_row *row,
                          long long *total, sim_err *err)
{
    int count = 0;
    for (const char *p = text; *p; count++) {
        p += setting_len(p);
        p += *p == ';';
    }
    if (count > RECIPE_MAX_SETTINGS)
        return sim_err_set_at(err, SIM_EINVAL, path, line, "settings",
                              "more than %d settings in a row", RECIPE_MAX_SETTINGS);
    *total += count;
    if (*total > LIMIT_RECIPE_SETTINGS)
        return sim_err_set_at(err, SIM_EINVAL, path, line, "settings",
                              "more than %lld settings in the file (LIMIT_RECIPE_SETTINGS)",
                              LIMIT_RECIPE_SETTINGS);
    row->text = strdup(text);
    row->set = calloc(count ? (size_t)count : 1, sizeof *row->set);
    if (!row->text || !row->set)
        return sim_err_set(err, SIM_ENOMEM, "out of memory reading %s", path);
    char *p = row->text;
    while (*p) {
        size_t n = setting_len(p);
        char *next = p[n] ? p + n + 1 : p + n;
        p[n] = '\0';
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '\0') { /* empty between two ';' or at the end */
            p = next;
            continue;
        }
        char *eq = strchr(p, '=');
        if (!eq || eq == p)
            return sim_err_set_at(err, SIM_EINVAL, path, line, "settings",
                                  "setting \"%.60s\" is not key=value", p);
        *eq = '\0';
        if (strlen(p) >= RECIPE_KEY_LEN || strlen(eq + 1) >= RECIPE_VALUE_LEN)
            return sim_err_set_at(err, SIM_EINVAL, path, line, "settings",
                                  "setting \"%.40s...\" is longer than %d characters (key) or %d "
                                  "(value)", p, RECIPE_KEY_LEN - 1, RECIPE_VALUE_LEN - 1);
        for (int i = 0; i < row->n; i++)
            if (!strcmp(row->set[i].key, p))
                return sim_err_set_at(err, SIM_EINVAL, path, line, "settings",
                                      "key '%s' given twice", p);
        row->set[row->n++] = (recipe_setting){ p, eq + 1 };
        p = next;
    }
    return SIM_OK;
}

/* A setting parsim applies must have a value its key accepts. */
static int check_applied(const char *path, const recipe_row *row, sim_err *err)
{
    for (int i = 0; i < row->n; i++) {
        recipe_mapped m;
        recipes_map(row, &row->set[i], &m);
        if (m.action != RECIPE_APPLY)
            continue;
        char kv[RECIPE_KEY_LEN + RECIPE_VALUE_LEN + 2];
        snprintf(kv, sizeof kv, "%s=%s", m.key, m.value);
        sim_err inner;
        sim_err_clear(&inner);
        if (cfg_check_setting(kv, &inner) != SIM_OK)
            return sim_err_set_at(err, SIM_EINVAL, path, row->line, "settings",
                                  "%s=%s: %s (as %s)", row->set[i].key, row->set[i].value,
                                  inner.msg, m.key);
    }
    return SIM_OK;
}

static bool same_config(const recipe_row *a, const recipe_row *b)
{
    return !strcmp(a->source, b->source) && !strcmp(a->model, b->model) &&
           !strcmp(a->gpu, b->gpu) && !strcmp(a->precision, b->precision) &&
           a->num_gpus == b->num_gpus && !strcmp(a->release, b->release);
}

static bool same_settings(const recipe_row *a, const recipe_row *b)
{
    if (a->n != b->n)
        return false;
    for (int i = 0; i < a->n; i++)
        if (strcmp(a->set[i].key, b->set[i].key) || strcmp(a->set[i].value, b->set[i].value))
            return false;
    return true;
}

static int check_duplicates(const char *path, recipes_t *r, sim_err *err);

/* The rows of t into out (a csv_convert_fn), then the duplicate check. */
static int read_rows(const char *path, const csv_table *t, void *ctx, sim_err *err)
{
    recipes_t *out = ctx;
    int col[sizeof columns / sizeof columns[0]];
    for (size_t k = 0; k < sizeof columns / sizeof columns[0]; k++)
        if ((col[k] = csv_col(t, columns[k])) < 0)
            return sim_err_set_at(err, SIM_EINVAL, path, 1, NULL,
                                  "no column '%s' (a recipes file has source, model, gpu_type, "
                                  "precision, num_gpus, release, settings)",
                                  columns[k]);
    long long total = 0;
    out->rows = calloc(t->nrows ? t->nrows : 1, sizeof *out->rows);
    if (!out->rows)
        return sim_err_set(err, SIM_ENOMEM, "out of memory reading %s", path);
    for (size_t r = 0; r < t->nrows; r++) {
        recipe_row *row = &out->rows[r];
        row->line = t->line[r];
        out->n = r + 1;
        char *dst[] = { row->source, row->model, row->gpu, row->precision };
        size_t len[] = { sizeof row->source, sizeof row->model, sizeof row->gpu,
                         sizeof row->precision };
        for (int k = 0; k < 4; k++)
            if (!copy_cell(dst[k], len[k], csv_cell(t, r, col[k])))
                return sim_err_set_at(err, SIM_EINVAL, path, row->line, columns[k],
                                      "%s is empty or longer than %zu characters", columns[k],
                                      len[k] - 1);
        if (!copy_cell(row->release, sizeof row->release, csv_cell(t, r, col[5])))
            return sim_err_set_at(err, SIM_EINVAL, path, row->line, "release",
                                  "release is empty or longer than %zu characters",
                                  sizeof row->release - 1);
        if (!csv_num_int(csv_cell(t, r, col[4]), &row->num_gpus) || row->num_gpus < 1 ||
            row->num_gpus > LIMIT_GPUS)
            return sim_err_set_at(err, SIM_EINVAL, path, row->line, "num_gpus",
                                  "num_gpus '%s' is not an integer in 1..%lld",
                                  csv_cell(t, r, col[4]), LIMIT_GPUS);
        int rc = parse_settings(path, row->line, csv_cell(t, r, col[6]), row, &total, err);
        if (rc == SIM_OK)
            rc = check_applied(path, row, err);
        if (rc != SIM_OK)
            return rc;
    }
    return check_duplicates(path, out, err);
}

/* Order of configurations, then of lines. */
static int config_cmp(const recipe_row *a, const recipe_row *b)
{
    int c = strcmp(a->source, b->source);
    c = c ? c : strcmp(a->model, b->model);
    c = c ? c : strcmp(a->gpu, b->gpu);
    c = c ? c : strcmp(a->precision, b->precision);
    c = c ? c : (a->num_gpus > b->num_gpus) - (a->num_gpus < b->num_gpus);
    return c ? c : strcmp(a->release, b->release);
}

static int cfg_order(const void *x, const void *y)
{
    const recipe_row *a = *(const recipe_row *const *)x, *b = *(const recipe_row *const *)y;
    int c = config_cmp(a, b);
    return c ? c : (a->line > b->line) - (a->line < b->line);
}

/* Sorts the rows into r->sorted; rows of one configuration must agree. */
static int check_duplicates(const char *path, recipes_t *r, sim_err *err)
{
    const recipe_row **by = malloc((r->n ? r->n : 1) * sizeof *by);
    if (!by)
        return sim_err_set(err, SIM_ENOMEM, "out of memory reading %s", path);
    r->sorted = by;
    for (size_t i = 0; i < r->n; i++)
        by[i] = &r->rows[i];
    qsort(by, r->n, sizeof *by, cfg_order);
    int rc = SIM_OK;
    for (size_t i = 1; i < r->n && rc == SIM_OK; i++)
        if (same_config(by[i - 1], by[i]) && !same_settings(by[i - 1], by[i]))
            rc = sim_err_set_at(err, SIM_EINVAL, path, by[i]->line, "settings",
                                "configuration of line %d again, with other settings",
                                by[i - 1]->line);
    return rc;
}

int recipes_read(const char *path, recipes_t *out, sim_err *err)
{
    memset(out, 0, sizeof *out);
    snprintf(out->file, sizeof out->file, "%s", path);
    int rc = csv_read_convert(path, read_rows, out, err);
    if (rc != SIM_OK)
        recipes_free(out);
    return rc;
}

const recipe_row *recipes_match(const recipes_t *r, const char *source, const char *model,
                                const char *gpu, const char *precision, int64_t num_gpus,
                                const char *release)
{
    recipe_row key = { .num_gpus = num_gpus };
    snprintf(key.source, sizeof key.source, "%s", source);
    snprintf(key.model, sizeof key.model, "%s", model);
    snprintf(key.gpu, sizeof key.gpu, "%s", gpu);
    snprintf(key.precision, sizeof key.precision, "%s", precision);
    snprintf(key.release, sizeof key.release, "%s", release);
    /* the first row of the configuration in the sorted order */
    size_t lo = 0, hi = r ? r->n : 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (config_cmp(r->sorted[mid], &key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return r && lo < r->n && same_config(r->sorted[lo], &key) ? r->sorted[lo] : NULL;
}
