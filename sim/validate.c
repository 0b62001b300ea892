/* validate: rows of published measurements -> parsim runs -> errors.
 * The rules are documented in validate.h; the tables below are the data
 * they use, one place to read and change them. */
#include "validate.h"

#include <ctype.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>

#include "bounds.h"
#include "filecache.h"
#include "frameworks.h"
#include "model.h"
#include "numparse.h"
#include "pool.h"
#include "progress.h"
#include "recipes.h"
#include "step.h"
#include "strategy.h"
#include "units.h"

/* ------------------------------------------------------------ the tables */

/* gpu_type -> topology preset (bench/validation/README.md, "Which GPU is
 * which system"). */
/* A layout string for L decoder layers over nv virtual stages, counting
 * the embedding and the loss as a layer each: every stage holds
 * floor((L+2)/nv) units, the remainder goes to the middle stages.  False
 * when it does not fit the buffer or a stage would hold no layer. */
static bool balanced_layout(int64_t L, int64_t nv, char *out, size_t cap)
{
    int64_t units = L + 2, base = units / nv, rem = units % nv;
    size_t n = 0;
    out[0] = '\0';
    for (int64_t vs = 0; vs < nv; vs++) {
        /* Extra units go to middle stages first, then to the last, then
         * to the first stage. */
        int64_t middle = nv - 2 > 0 ? nv - 2 : 0, spill = rem > middle ? rem - middle : 0;
        int64_t u = base + ((vs > 0 && vs < nv - 1 && vs <= rem) ? 1 : 0);
        if ((vs == nv - 1 && spill >= 1 && nv > 1) || (vs == 0 && spill >= (nv > 1 ? 2 : 1)))
            u += 1;
        int64_t t = u - (vs == 0) - (vs == nv - 1);
        if (t < 0)
            return false;
        int w = snprintf(out + n, cap - n, "%s%s", vs ? "|" : "", vs == 0 ? "E" : "");
        if (w < 0 || (size_t)w >= cap - n)
            return false;
        n += (size_t)w;
        if (t > 0) {
            w = snprintf(out + n, cap - n, "t*%lld", (long long)t);
            if (w < 0 || (size_t)w >= cap - n)
                return false;
            n += (size_t)w;
        }
        if (vs == nv - 1) {
            w = snprintf(out + n, cap - n, "L");
            if (w < 0 || (size_t)w >= cap - n)
                return false;
            n += (size_t)w;
        }
    }
    return true;
}

static const struct {
    const char *gpu;
    const char *topology;
} gpu_topologies[] = {
    { "A100", "dgx-a100" },       { "A100-80GB", "dgx-a100" }, { "H100", "dgx-h100" },
    { "H200", "dgx-h200" },       { "H800", "h800" },          { "B200", "dgx-b200" },
    { "B300", "dgx-b300" },       { "GB200", "gb200-nvl72" },  { "GB300", "gb300-nvl72" },
};

static const char *metric_names[VM_COUNT] = {
    "step_time_s", "tokens_per_s_per_gpu", "tflops_per_gpu", "mfu", "memory_gb",
};

static const char *family_names[VFAM_COUNT] = { "time", "memory", "tflops-flagged" };

static const char *feature_names[VFEAT_COUNT] = { "PP>1", "VP", "CP", "EP", "FP8", "Mamba", "MoE" };

/* Columns validate reads. */
static const char *needed_columns[] = {
    "id", "gpu_type", "num_gpus", "model", "seq_len", "gbs", "mbs", "tp", "pp", "vp", "cp", "ep",
    "etp", "dp", "sp", "recompute", "precision", "distributed_optimizer", "metric_name",
    "metric_value", "notes", "flop_convention",
};

const char *vmetric_name(vmetric m) { return (unsigned)m < VM_COUNT ? metric_names[m] : "?"; }
const char *vfamily_name(vfamily f) { return (unsigned)f < VFAM_COUNT ? family_names[f] : "?"; }

/* ------------------------------------------------------------- helpers */

int validate_check_columns(const csv_table *t, const char *name, sim_err *err)
{
    if (t->nrows > (size_t)LIMIT_VALIDATE_ROWS)
        return sim_err_set_at(err, SIM_EINVAL, name, t->line[LIMIT_VALIDATE_ROWS], NULL,
                              "more than %lld rows to run (LIMIT_VALIDATE_ROWS)",
                              LIMIT_VALIDATE_ROWS);
    for (size_t k = 0; k < sizeof needed_columns / sizeof needed_columns[0]; k++)
        if (csv_col(t, needed_columns[k]) < 0)
            return sim_err_set_at(err, SIM_EINVAL, name, 1, NULL,
                                  "no column '%s' (validate reads the columns of "
                                  "bench/validation/public.csv)",
                                  needed_columns[k]);
    return SIM_OK;
}

void validate_id_prefix(const char *id, char *out, size_t len)
{
    size_t n = strlen(id);
    while (n > 0 && isdigit((unsigned char)id[n - 1]))
        n--;
    if (n > 0 && n < strlen(id) && (id[n - 1] == '-' || id[n - 1] == '_'))
        n--;
    if (n == 0)
        n = strlen(id);
    snprintf(out, len, "%.*s", (int)n, id);
}

static const char *topology_for(const char *gpu)
{
    for (size_t k = 0; k < sizeof gpu_topologies / sizeof gpu_topologies[0]; k++)
        if (strcmp(gpu, gpu_topologies[k].gpu) == 0)
            return gpu_topologies[k].topology;
    return NULL;
}

static void add_over(vcase *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_over(vcase *c, const char *fmt, ...)
{
    if (c->n_over >= VCASE_MAX_OVER) {
        snprintf(c->skip, sizeof c->skip, "internal: more than %d settings", VCASE_MAX_OVER);
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->over[c->n_over++], VCASE_OVER_LEN, fmt, ap);
    va_end(ap);
}

/* What a case is built from, beyond the case itself: the assumed settings
 * (each with the key it stands for, so that a recipe setting of that key
 * replaces it), which overrides are framework defaults, and values the row
 * states without an override (sp=0, recompute none). */
#define VB_MAX_ITEMS 48
#define VB_MAX_STATED 24
#define VB_KEY_LEN 96

typedef struct vbuild {
    vcase *c;
    int n_items;
    char item_key[VB_MAX_ITEMS][VB_KEY_LEN]; /* "" = about no single key */
    char item[VB_MAX_ITEMS][VCASE_OVER_LEN];
    bool over_default[VCASE_MAX_OVER];
    int n_stated;
    char stated_key[VB_MAX_STATED][VB_KEY_LEN];
    char stated_val[VB_MAX_STATED][VCASE_OVER_LEN];
} vbuild;

static void add_assumed(vbuild *b, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void add_assumed(vbuild *b, const char *key, const char *fmt, ...)
{
    if (b->n_items >= VB_MAX_ITEMS)
        return;
    snprintf(b->item_key[b->n_items], VB_KEY_LEN, "%s", key ? key : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->item[b->n_items++], VCASE_OVER_LEN, fmt, ap);
    va_end(ap);
}

/* An override that is a framework default (a recipe setting replaces it). */
static void add_default(vbuild *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_default(vbuild *b, const char *fmt, ...)
{
    vcase *c = b->c;
    if (c->n_over >= VCASE_MAX_OVER) {
        snprintf(c->skip, sizeof c->skip, "internal: more than %d settings", VCASE_MAX_OVER);
        return;
    }
    b->over_default[c->n_over] = true;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->over[c->n_over++], VCASE_OVER_LEN, fmt, ap);
    va_end(ap);
}

/* A value the row states that needs no override. */
static void row_states(vbuild *b, const char *key, const char *value)
{
    if (b->n_stated >= VB_MAX_STATED)
        return;
    snprintf(b->stated_key[b->n_stated], VB_KEY_LEN, "%s", key);
    snprintf(b->stated_val[b->n_stated++], VCASE_OVER_LEN, "%s", value);
}

/* Appends s to a "; "-separated list in buf[0..len); an item that does
 * not fit ends the list with "(more)" instead of being cut. */
static void list_append(char *buf, size_t len, const char *s)
{
    static const char more[] = "(more)";
    size_t n = strlen(buf), sep = n ? 2 : 0;
    if (n >= sizeof more - 1 && !strcmp(buf + n - (sizeof more - 1), more))
        return;
    const char *item = n + sep + strlen(s) < len ? s : more;
    if (n + sep + strlen(item) >= len)
        return; /* not even the marker fits: the list is as full as it gets */
    snprintf(buf + n, len - n, "%s%s", sep ? "; " : "", item);
}

/* The assumed items into c->assumed, in the order they were found. */
static void finish_assumed(vbuild *b)
{
    for (int i = 0; i < b->n_items; i++) {
        list_append(b->c->assumed, sizeof b->c->assumed, b->item[i]);
        b->c->n_assumed++;
    }
}

static void set_skip(vcase *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_skip(vcase *c, const char *fmt, ...)
{
    if (c->skip[0])
        return; /* the first reason is the one reported */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->skip, sizeof c->skip, fmt, ap);
    va_end(ap);
}

/* The run of digits at q as an integer: *out, or -1 when it does not fit
 * in int64. */
static void digits_value(const char *q, int64_t *out)
{
    char buf[24];
    size_t n = strspn(q, "0123456789");
    if (n >= sizeof buf) {
        *out = -1;
        return;
    }
    memcpy(buf, q, n);
    buf[n] = '\0';
    if (!num_parse_int(buf, out))
        *out = -1;
}

/* Finds "key=<int>" or "key <int>" in notes; false if absent.  *out is
 * -1 for digits that do not fit in int64. */
static bool note_int(const char *notes, const char *key, int64_t *out)
{
    for (const char *p = strstr(notes, key); p; p = strstr(p + 1, key)) {
        const char *q = p + strlen(key);
        if (!isdigit((unsigned char)*q))
            continue;
        digits_value(q, out);
        return true;
    }
    return false;
}

/* A layout the notes give for rows that leave it out ("... uses TP8 PP6
 * for 177B"): the number after `what` (TP or PP) in the text after
 * "uses ".  1 with *out set, 0 if the notes give none, -1 if the number
 * is not a size in 1..LIMIT_GPUS (*out is left then). */
static int note_layout(const char *notes, const char *what, int64_t *out)
{
    const char *u = strstr(notes, "uses ");
    if (!u)
        return 0;
    const char *p = strstr(u, what);
    if (!p || !isdigit((unsigned char)p[strlen(what)]))
        return 0;
    int64_t v;
    digits_value(p + strlen(what), &v);
    if (v < 1 || v > LIMIT_GPUS)
        return -1;
    *out = v;
    return 1;
}

/* A GPU count or parallel size: an integer in 1..LIMIT_GPUS into *out;
 * otherwise the row is skipped, naming the column, and *out is left. */
static bool size_cell(vcase *c, const char *col, const char *cell, int64_t *out)
{
    int64_t v;
    if (!csv_num_int(cell, &v) || v < 1 || v > LIMIT_GPUS) {
        set_skip(c, "%s '%s' is not an integer in 1..%lld", col, cell, LIMIT_GPUS);
        return false;
    }
    *out = v;
    return true;
}

static bool is_fp8_family(const char *prec)
{
    return strstr(prec, "fp8") || strstr(prec, "fp4");
}


/* The model of a row, resolved from its preset on the row's topology (a
 * probe: one GPU, one sequence). */
static int probe_model(const char *data_dir, const char *model, const char *topology,
                       model_spec *out, sim_err *err)
{
    cfg_t *cfg = cfg_create(data_dir);
    if (!cfg)
        return sim_err_set(err, SIM_ENOMEM, "out of memory");
    char kv[3][128];
    snprintf(kv[0], sizeof kv[0], "model.name=%s", model);
    snprintf(kv[1], sizeof kv[1], "cluster.topology=%s", topology);
    snprintf(kv[2], sizeof kv[2], "cluster.num_gpus=1");
    int rc = SIM_OK;
    for (int k = 0; k < 3 && rc == SIM_OK; k++)
        rc = cfg_set_override(cfg, kv[k], err);
    if (rc == SIM_OK)
        rc = cfg_set_override(cfg, "train.global_batch_size=1", err);
    run_inputs in;
    if (rc == SIM_OK)
        rc = cfg_resolve(cfg, &in, err);
    if (rc == SIM_OK)
        *out = in.model;
    cfg_destroy(cfg);
    return rc;
}

/* Models probed for the rows of one table: a table holds a few dozen
 * (model, topology) pairs, and loading their presets is most of the cost
 * of a row that is not simulated.  The first VPROBE_CACHE pairs are kept. */
#define VPROBE_CACHE 64

typedef struct vprobe {
    char model[64];
    const char *topology;        /* a static name: compared by address */
    int rc;
    sim_err err;
    model_spec m;
} vprobe;

typedef struct vprobe_cache {
    size_t n;
    vprobe e[VPROBE_CACHE];
} vprobe_cache;

/* probe_model through the cache pc (may be NULL). */
static int probe_cached(vprobe_cache *pc, const char *data_dir, const char *model,
                        const char *topology, model_spec *out, sim_err *err)
{
    for (size_t k = 0; pc && k < pc->n; k++) {
        const vprobe *e = &pc->e[k];
        if (e->topology == topology && !strcmp(e->model, model)) {
            if (e->rc == SIM_OK)
                *out = e->m;
            *err = e->err;
            return e->rc;
        }
    }
    int rc = probe_model(data_dir, model, topology, out, err);
    if (pc && pc->n < VPROBE_CACHE && rc != SIM_ENOMEM) {
        vprobe *e = &pc->e[pc->n++];
        snprintf(e->model, sizeof e->model, "%s", model);
        e->topology = topology;
        e->rc = rc;
        e->err = *err;
        if (rc == SIM_OK)
            e->m = *out;
    }
    return rc;
}

/* Writes model.moe_layer_freq for the first L layers of m's pattern: the
 * frequency f if the pattern is "every f-th layer", else the 0/1 list. */
static void moe_pattern_override(vcase *c, const model_spec *m, int64_t L)
{
    for (int64_t f = 1; f <= L; f++) {
        bool same = true;
        for (int64_t i = 0; i < L && same; i++)
            same = (m->layers[i].mlp == MODEL_MLP_MOE) == (i % f == 0);
        if (same) {
            add_over(c, "model.moe_layer_freq=%" PRId64, f);
            return;
        }
    }
    char list[VCASE_OVER_LEN];
    size_t n = (size_t)snprintf(list, sizeof list, "model.moe_layer_freq=[");
    for (int64_t i = 0; i < L && n + 4 < sizeof list; i++)
        n += (size_t)snprintf(list + n, sizeof list - n, "%s%d", i ? "," : "",
                              m->layers[i].mlp == MODEL_MLP_MOE ? 1 : 0);
    if (n + 2 >= sizeof list) {
        set_skip(c, "layers_override=%" PRId64 ": MoE layer pattern too long to write", L);
        return;
    }
    snprintf(list + n, sizeof list - n, "]");
    add_over(c, "%s", list);
}

/* ------------------------------------------------------------ the case */

void validate_case_labels(const csv_table *t, size_t r, const struct vfw_table *fws, vcase *c)
{
    memset(c, 0, sizeof *c);
    c->row = r;
    c->conv = FC_UNKNOWN;
    c->mem_unit_bytes = GB;
#define CELL(name) csv_cell(t, r, csv_col(t, name))
    snprintf(c->id, sizeof c->id, "%s", CELL("id"));
    validate_id_prefix(c->id, c->prefix, sizeof c->prefix);
    snprintf(c->gpu, sizeof c->gpu, "%s", CELL("gpu_type"));
    snprintf(c->model, sizeof c->model, "%s", CELL("model"));
    const char *notes = CELL("notes");

    const char *mname = CELL("metric_name");
    c->metric = VM_COUNT;
    for (int k = 0; k < VM_COUNT; k++)
        if (strcmp(mname, metric_names[k]) == 0)
            c->metric = (vmetric)k;
    if (c->metric == VM_COUNT) {
        set_skip(c, "unknown metric_name '%s'", mname);
        c->metric = VM_STEP_TIME;
    }

    c->family = VFAM_TIME;
    if (c->metric == VM_MEMORY)
        c->family = VFAM_MEMORY;
    else if (c->metric == VM_TFLOPS || c->metric == VM_MFU) {
        if (strstr(notes, "task=sft") || strstr(notes, "task=lora") ||
            vfw_flops_flagged(fws, c->model))
            c->family = VFAM_TFLOPS_FLAGGED;
    }

    /* features as the cells state them (validate_case replaces them with
     * the sizes it runs) */
    static const char *fcols[] = { "pp", "vp", "cp", "ep" };
    for (int k = 0; k < 4; k++) {
        int64_t v = 1;
        c->feat[k] = csv_num_int(CELL(fcols[k]), &v) && v > 1;
    }
    c->feat[VFEAT_FP8] = is_fp8_family(CELL("precision"));
#undef CELL
}

/* A validation row's release, to match a recipe (rule in recipes.h). */
static void row_release(const char *notes, const char *source, const char *prefix, char *out,
                        size_t len)
{
    out[0] = '\0';
    const char *p = strstr(notes, "release=");
    if (p) {
        p += strlen("release=");
        size_t n = strcspn(p, ";");
        while (n > 0 && p[n - 1] == ' ')
            n--;
        static const char tail[] = " container";
        if (n >= sizeof tail - 1 && !strncmp(p + n - (sizeof tail - 1), tail, sizeof tail - 1))
            n -= sizeof tail - 1;
        snprintf(out, len, "%.*s", (int)n, p);
    } else if ((p = strstr(source, "@ v")) != NULL) {
        p += 2;
        snprintf(out, len, "%s %.*s", prefix, (int)strcspn(p, " "), p);
    }
}

/* Index of the override of key in c (the first), or -1. */
static int over_index(const vcase *c, const char *key)
{
    size_t kl = strlen(key);
    for (int i = 0; i < c->n_over; i++)
        if (!strncmp(c->over[i], key, kl) && c->over[i][kl] == '=')
            return i;
    return -1;
}

static void drop_over(vbuild *b, int i)
{
    vcase *c = b->c;
    for (int k = i; k + 1 < c->n_over; k++) {
        memcpy(c->over[k], c->over[k + 1], VCASE_OVER_LEN);
        b->over_default[k] = b->over_default[k + 1];
    }
    c->n_over--;
    b->over_default[c->n_over] = false;
}

/* What the row itself says of key (a cell or the notes), or NULL. */
static const char *row_value(const vbuild *b, const char *key)
{
    int i = over_index(b->c, key);
    if (i >= 0 && !b->over_default[i])
        return b->c->over[i] + strlen(key) + 1;
    for (int k = 0; k < b->n_stated; k++)
        if (!strcmp(b->stated_key[k], key))
            return b->stated_val[k];
    return NULL;
}

/* Whether a recipe value and the row's say the same.  Precision names are
 * compared as precisions, and the row's bare "fp8" (any FP8 recipe) is
 * refined by the recipe's (*refines).  `null` is the key's default. */
static bool same_value(const char *key, const char *recipe, const char *row, bool *refines)
{
    *refines = false;
    if (!strcmp(recipe, "null") && cfg_key_known(key, &recipe) && recipe) {
        size_t n = strlen(recipe);
        if (n >= 2 && recipe[0] == '"')
            return strlen(row) == n - 2 && !strncmp(recipe + 1, row, n - 2);
    }
    precision_kind a, r;
    if (!strcmp(key, "mixed_precision") && precision_from_name(recipe, &a) &&
        precision_from_name(row, &r)) {
        *refines = !strcmp(row, "fp8") && a != r && strstr(precision_name(a), "fp8");
        return a == r || *refines;
    }
    return !strcasecmp(recipe, row);
}

/* Megatron turns off at run time what a recipe asks for but the layout
 * cannot do (Bridge warns): sequence parallelism and TP communication
 * overlap without TP > 1, TP communication overlap without sequence
 * parallelism.  Reported with the settings parsim treats as its own. */
static void runtime_off(vbuild *b, int64_t tp)
{
    vcase *c = b->c;
    int i = over_index(c, "model.sequence_parallel");
    if (i >= 0 && tp == 1 && !strcmp(c->over[i], "model.sequence_parallel=true")) {
        drop_over(b, i);
        list_append(c->ignored_same, sizeof c->ignored_same,
                    "model.sequence_parallel=true (TP 1: off at run time)");
    }
    bool sp = (i = over_index(c, "model.sequence_parallel")) >= 0 &&
              !strcmp(c->over[i], "model.sequence_parallel=true");
    i = over_index(c, "model.tp_comm_overlap");
    if (i >= 0 && !sp && !strcmp(c->over[i], "model.tp_comm_overlap=true")) {
        drop_over(b, i);
        list_append(c->ignored_same, sizeof c->ignored_same,
                    tp == 1 ? "model.tp_comm_overlap=true (TP 1: off at run time)"
                            : "model.tp_comm_overlap=true (no sequence parallelism: off at run "
                              "time)");
    }
}

/* The recipe's settings over the framework defaults; the row's own values
 * win over the recipe's (noted as assumed). */
static void apply_recipe(vbuild *b, const recipe_row *row, int64_t tp)
{
    vcase *c = b->c;
    c->recipe_line = row->line;
    for (int s = 0; s < row->n; s++) {
        recipe_mapped m;
        recipes_map(row, &row->set[s], &m);
        char text[RECIPE_KEY_LEN + RECIPE_VALUE_LEN + 128];
        snprintf(text, sizeof text, "%s=%s%s%s%s", row->set[s].key, m.value, m.why[0] ? " (" : "",
                 m.why, m.why[0] ? ")" : "");
        if (m.action == RECIPE_SAME) {
            list_append(c->ignored_same, sizeof c->ignored_same, text);
            continue;
        }
        if (m.action == RECIPE_CHANGES) {
            list_append(c->ignored, sizeof c->ignored, text);
            c->n_ignored++;
            continue;
        }
        const char *mine = row_value(b, m.key);
        bool refines = false;
        if (mine && !same_value(m.key, m.value, mine, &refines)) {
            add_assumed(b, NULL, "recipe %s=%s not applied: the row gives %s", m.key, m.value,
                        mine);
            continue;
        }
        /* the recipe states the key: what was assumed of it is not */
        for (int i = 0; i < b->n_items; i++)
            if (!strcmp(b->item_key[i], m.key)) {
                for (int k = i; k + 1 < b->n_items; k++) {
                    memcpy(b->item_key[k], b->item_key[k + 1], VB_KEY_LEN);
                    memcpy(b->item[k], b->item[k + 1], VCASE_OVER_LEN);
                }
                b->n_items--;
                i--;
            }
        if (mine && !refines)
            continue;
        for (int i; (i = over_index(c, m.key)) >= 0;)
            drop_over(b, i);
        if (m.action == RECIPE_APPLY)
            add_over(c, "%s=%s", m.key, m.value);
    }
    runtime_off(b, tp);
}

static void build_case(const csv_table *t, size_t r, const char *data_dir, vprobe_cache *pc,
                       const vsetup *setup, vcase *c)
{
    validate_case_labels(t, r, setup->frameworks, c);
#define CELL(name) csv_cell(t, r, csv_col(t, name))
    const char *notes = CELL("notes");
    const vframework *fw = vfw_for_prefix(setup->frameworks, c->prefix);
    const recipes_t *recipes = setup->recipes;
    vbuild *b = calloc(1, sizeof *b);
    if (!b) {
        set_skip(c, "out of memory building the case");
        return;
    }
    b->c = c;

    if (!csv_num_double(CELL("metric_value"), &c->measured) || c->measured <= 0)
        set_skip(c, "metric_value '%s' is not a positive number", CELL("metric_value"));
    if (strstr(notes, "GiB"))
        c->mem_unit_bytes = GIB;

    /* FLOP convention (TFLOP/s and MFU rows only) */
    if (c->metric == VM_TFLOPS || c->metric == VM_MFU) {
        const char *conv = CELL("flop_convention");
        c->conv = FC_COUNT;
        for (int k = 0; k < FC_COUNT; k++)
            if (strcmp(conv, flop_conv_name((flop_conv)k)) == 0)
                c->conv = (flop_conv)k;
        if (c->conv == FC_COUNT || !conv[0]) {
            set_skip(c, "unknown flop_convention '%s'", conv);
            c->conv = FC_UNKNOWN;
        } else if (c->conv == FC_UNKNOWN) {
            if (fw->infer == FC_UNKNOWN)
                set_skip(c, "flop_convention unknown and not inferable for source '%s'",
                         c->prefix);
            else {
                c->conv = (flop_conv)fw->infer;
                c->conv_inferred = true;
                add_assumed(b, NULL, "flop_convention inferred as %s (%s)", flop_conv_name(c->conv),
                            fw->infer_why);
            }
        }
    }

    const char *topology = topology_for(c->gpu);
    if (!topology) {
        set_skip(c, "unknown gpu_type '%s' (no topology preset for it)", c->gpu);
        topology = "dgx-h100"; /* keeps the probe below meaningful */
    }

    /* the model, to know whether it has experts */
    model_spec m;
    sim_err err;
    sim_err_clear(&err);
    bool have_model = false;
    if (probe_cached(pc, data_dir, c->model, topology, &m, &err) == SIM_OK)
        have_model = true;
    else {
        char buf[600];
        sim_err_format(&err, buf, sizeof buf);
        set_skip(c, "model '%s': %s", c->model, buf);
    }
    bool moe = have_model && model_is_moe(&m);
    bool mamba = have_model && model_has_mamba(&m);

    add_over(c, "model.name=%s", c->model);
    add_over(c, "cluster.topology=%s", topology);

    /* GPU counts and parallel sizes are bounded (LIMIT_GPUS), so that the
     * products of up to three of them below cannot overflow; a row with
     * one out of range is skipped and nothing is computed from them. */
    int64_t world = 0, gbs = 0, v = 0;
    bool sizes_ok = size_cell(c, "num_gpus", CELL("num_gpus"), &world);
    add_over(c, "cluster.num_gpus=%" PRId64, world);

    /* LoRA rows: the adapters of the source's release.  NeMo 1.x (the
     * 24.07 tables) tunes attention_qkv at rank 32 by default; Megatron
     * Bridge's LoRA all four linear layers at rank 32. */
    if (strstr(notes, "task=lora")) {
        add_over(c, "peft.scheme=lora");
        if (fw->lora_target_modules[0])
            add_default(b, "peft.target_modules=%s", fw->lora_target_modules);
        add_assumed(b, "peft.target_modules", "%s", fw->lora_assumed);
    }

    if (csv_num_int(CELL("seq_len"), &v) && v > 0)
        add_over(c, "model.seq_length=%" PRId64, v);
    else if (CELL("seq_len")[0])
        set_skip(c, "seq_len '%s' is not a positive integer", CELL("seq_len"));
    else
        add_assumed(b, NULL, "seq_len: the preset's");

    if (!csv_num_int(CELL("gbs"), &gbs) || gbs < 1)
        set_skip(c, "gbs '%s' is not a positive integer", CELL("gbs"));
    add_over(c, "train.global_batch_size=%" PRId64, gbs);

    int64_t mbs = 1;
    if (CELL("mbs")[0]) {
        if (!csv_num_int(CELL("mbs"), &mbs) || mbs < 1)
            set_skip(c, "mbs '%s' is not a positive integer", CELL("mbs"));
        add_over(c, "train.micro_batch_size=%" PRId64, mbs);
    } else {
        add_assumed(b, "train.micro_batch_size", "mbs=1 (%s default)", fw->name);
        add_default(b, "train.micro_batch_size=%" PRId64, mbs);
    }

    /* parallel sizes: empty = 1 */
    static const struct {
        const char *col, *key;
    } sizes[] = {
        { "tp", "model.tensor_model_parallel_size" },
        { "pp", "model.pipeline_model_parallel_size" },
        { "cp", "model.context_parallel_size" },
        { "ep", "model.expert_model_parallel_size" },
    };
    int64_t sz[4];
    for (int k = 0; k < 4; k++) {
        const char *cell = CELL(sizes[k].col);
        sz[k] = 1;
        int from_notes = cell[0] || k >= 2 ? 0 : note_layout(notes, k == 0 ? "TP" : "PP", &sz[k]);
        if (cell[0]) {
            sizes_ok = size_cell(c, sizes[k].col, cell, &sz[k]) && sizes_ok;
            row_states(b, sizes[k].key, cell);
        }
        else if (from_notes > 0)
            add_assumed(b, NULL, "%s=%" PRId64 " (from the notes: %s)", sizes[k].col, sz[k],
                        "the source's table uses this layout for the model");
        else if (from_notes < 0) {
            set_skip(c, "notes: the %s size is not an integer in 1..%lld", k == 0 ? "TP" : "PP",
                     LIMIT_GPUS);
            sizes_ok = false;
        } else if (k < 3 || moe)
            add_assumed(b, sizes[k].key, "%s=1 (not stated)", sizes[k].col);
        if (sz[k] > 1)
            add_over(c, "%s=%" PRId64, sizes[k].key, sz[k]);
    }
    int64_t tp = sz[0], pp = sz[1], cp = sz[2], ep = sz[3];

    int64_t vp = 1;
    if (CELL("vp")[0])
        sizes_ok = size_cell(c, "vp", CELL("vp"), &vp) && sizes_ok;
    else if (pp > 1)
        add_assumed(b, "model.virtual_pipeline_model_parallel_size",
                    "vp: no interleaving (not stated)");
    if (vp > 1 && pp == 1) {
        /* Tables copied from a README list VP for every row; Megatron
         * rejects interleaving without a pipeline, so the run had none. */
        add_assumed(b, NULL, "VP %" PRId64 " listed with PP 1: Megatron interleaves only with PP > 1; "
                       "run without", vp);
        vp = 1;
    }
    if (vp > 1)
        add_over(c, "model.virtual_pipeline_model_parallel_size=%" PRId64, vp);

    if (moe) {
        int64_t etp = 0;
        if (CELL("etp")[0])
            sizes_ok = size_cell(c, "etp", CELL("etp"), &etp) && sizes_ok;
        else if (fw->moe_etp1) {
            etp = 1;
            add_assumed(b, "model.expert_tensor_parallel_size", "etp=1 (%s MoE recipes)", fw->name);
        } else if (sizes_ok && world % (pp * ep * tp) != 0) {
            etp = 1;
            add_assumed(b, "model.expert_tensor_parallel_size",
                        "etp=1 (Megatron's default etp=tp does not fit %" PRId64 " GPUs)", world);
        } else
            add_assumed(b, "model.expert_tensor_parallel_size", "etp=tp (Megatron default)");
        if (etp > 0 && CELL("etp")[0])
            add_over(c, "model.expert_tensor_parallel_size=%" PRId64, etp);
        else if (etp > 0)
            add_default(b, "model.expert_tensor_parallel_size=%" PRId64, etp);
    }

    /* sequence parallel */
    bool sp = false;
    const char *sp_cell = CELL("sp");
    if (!strcmp(sp_cell, "1") || !strcmp(sp_cell, "true"))
        sp = true;
    else if (!strcmp(sp_cell, "0") || !strcmp(sp_cell, "false"))
        sp = false;
    else if (sp_cell[0])
        set_skip(c, "sp '%s' is not 0 or 1", sp_cell);
    else if (tp > 1) {
        sp = fw->sp_when_tp;
        add_assumed(b, "model.sequence_parallel", "sp=%d (%s default with TP>1)", sp ? 1 : 0,
                    fw->name);
    }
    if (sp_cell[0])
        row_states(b, "model.sequence_parallel", sp ? "true" : "false");
    if (sp && tp > 1 && sp_cell[0])
        add_over(c, "model.sequence_parallel=true");
    else if (sp && tp > 1)
        add_default(b, "model.sequence_parallel=true");

    /* recompute */
    const char *rec = CELL("recompute");
    bool rec_default = !rec[0];
    if (rec[0])
        row_states(b, "model.recompute_granularity", rec);
    else {
        rec = fw->recompute;
        add_assumed(b, "model.recompute_granularity", "recompute=%s (%s default)", rec, fw->name);
    }
    if (strcmp(rec, "none") && strcmp(rec, "selective") && strcmp(rec, "full"))
        set_skip(c, "recompute '%s' is not none, selective or full", rec);
    else if (strcmp(rec, "none") && !rec_default)
        add_over(c, "model.recompute_granularity=%s", rec);
    else if (strcmp(rec, "none"))
        add_default(b, "model.recompute_granularity=%s", rec);
    const char *mods = strstr(notes, "recompute_modules=");
    if (mods && !strcmp(rec, "selective")) {
        mods += strlen("recompute_modules=");
        char list[160];
        size_t n = strcspn(mods, "; (");
        if (n >= sizeof list)
            n = sizeof list - 1;
        memcpy(list, mods, n);
        list[n] = '\0';
        if (list[0] == '[')
            add_over(c, "model.recompute_modules=%s", list);
        else
            add_over(c, "model.recompute_modules=[%s]", list);
    }

    /* precision */
    const char *prec = CELL("precision");
    if (!prec[0]) {
        prec = fw->precision;
        add_assumed(b, "mixed_precision", "precision=%s (%s default)", prec, fw->name);
        add_default(b, "mixed_precision=%s", prec);
    } else
        add_over(c, "mixed_precision=%s", prec);

    /* optimizer and DP overlap */
    bool dist = fw->dist_opt;
    const char *dcell = CELL("distributed_optimizer");
    if (!strcmp(dcell, "1") || !strcmp(dcell, "true"))
        dist = true;
    else if (!strcmp(dcell, "0") || !strcmp(dcell, "false"))
        dist = false;
    else if (dcell[0])
        set_skip(c, "distributed_optimizer '%s' is not 0 or 1", dcell);
    else
        add_assumed(b, "ddp.use_distributed_optimizer", "distributed_optimizer=%d (%s default)",
                    dist ? 1 : 0, fw->name);
    if (strstr(notes, "Megatron-FSDP used")) {
        /* ZeRO-3, as every Megatron Bridge FSDP recipe runs (a recipe's own
         * setting of these keys replaces them) */
        dist = true;
        add_default(b, "ddp.use_megatron_fsdp=true");
        add_default(b, "ddp.data_parallel_sharding_strategy=optim_grads_params");
        add_assumed(b, "ddp.use_megatron_fsdp", "Megatron-FSDP as Bridge's FSDP recipes run it "
                    "(optim_grads_params)");
    }
    bool dist_stated = dcell[0] || strstr(notes, "Megatron-FSDP used");
    if (dist_stated)
        row_states(b, "ddp.use_distributed_optimizer", dist ? "true" : "false");
    if (dist && dist_stated)
        add_over(c, "ddp.use_distributed_optimizer=true");
    else if (dist)
        add_default(b, "ddp.use_distributed_optimizer=true");
    if (fw->overlap_dp) {
        add_default(b, "ddp.overlap_grad_reduce=true");
        if (dist)
            add_default(b, "ddp.overlap_param_gather=true");
    }
    if (fw->tp_comm_overlap && sp && tp > 1)
        add_default(b, "model.tp_comm_overlap=true");
    if (fw->attention_backend[0]) {
        add_default(b, "model.attention_backend=%s", fw->attention_backend);
        add_assumed(b, "model.attention_backend", "attention %s (%s %s)", fw->attention_backend,
                    fw->name, fw->attention_why);
    }
    /* MoE: the framework's recipes' dispatcher (Megatron Bridge and NeMo:
     * all-to-all, not Megatron Core's allgather), or a model exception's
     * (flex = DeepEP / HybridEP for DeepSeek-architecture models). */
    if (moe && fw->moe_dispatcher[0]) {
        const vmodel_rule *mr = vfw_model_rule(setup->frameworks, fw, c->model, true);
        add_default(b, "model.moe_token_dispatcher_type=%s",
                    mr ? mr->moe_dispatcher : fw->moe_dispatcher);
        if (mr && mr->assumed[0])
            add_assumed(b, "model.moe_token_dispatcher_type", "%s", mr->assumed);
    }

    /* notes: layers, vocabulary, MTP, routing */
    int64_t layers = 0;
    if (note_int(notes, "layers_override=", &layers)) {
        if (layers < 1 || layers > MODEL_MAX_LAYERS) {
            set_skip(c, "notes: layers_override is not a layer count in 1..%d", MODEL_MAX_LAYERS);
            layers = 0; /* nothing below is computed from it */
        } else {
            add_over(c, "model.num_layers=%" PRId64, layers);
            if (moe)
                moe_pattern_override(c, &m, layers);
        }
    }
    int64_t vocab = 0;
    const vmodel_rule *vr;
    bool vocab_note = note_int(notes, "vocab ", &vocab);
    if (vocab_note && vocab < 1)
        set_skip(c, "notes: vocab is not a positive integer that fits in 64 bits");
    else if (vocab_note)
        add_over(c, "model.vocab_size=%" PRId64, vocab);
    else if (strstr(notes, "GPT2BPETokenizer"))
        add_over(c, "model.vocab_size=50257"); /* GPT-2 BPE */
    else if ((vr = vfw_model_rule(setup->frameworks, fw, c->model, false)) != NULL) {
        add_default(b, "model.vocab_size=%" PRId64, vr->vocab_size);
        if (vr->assumed[0])
            add_assumed(b, "model.vocab_size", "%s", vr->assumed);
    }
    /* Uneven pipelines: Megatron Bridge and NeMo recipes whose layers do not split
     * evenly over PP x VP (Llama 3.1 405B's 126 on PP 8, Qwen3 235B's 94)
     * count the embedding and the loss as a layer each
     * (account_for_embedding/loss_in_pipeline_split).  Used once parsim has
     * the keys; until then strategy rejects the row and says why. */
    int64_t L = !sizes_ok ? 0 : layers > 0 ? layers : have_model ? m.num_layers : 0;
    bool recipe_split = fw->split_counts_embedding;
    if (L > 0 && L % (pp * vp) != 0 && (L + 2) % (pp * vp) == 0 && recipe_split) {
        add_default(b, "model.account_for_embedding_in_pipeline_split=true");
        add_default(b, "model.account_for_loss_in_pipeline_split=true");
        add_assumed(b, "model.account_for_embedding_in_pipeline_split",
                    "uneven pipeline: embedding and loss counted as layers (%s recipes)",
                    fw->name);
    } else if (L > 0 && L % (pp * vp) != 0 && pp * vp <= L) {
        /* Neither splits (DeepSeek-V3's 61 layers on Bridge, BLOOM's 70 on
         * Megatron-DeepSpeed's 12 stages): a layout in Megatron's grammar
         * with the embedding and the loss each counted as a layer and the
         * remainder on middle stages, as such runs are laid out by hand. */
        char layout[512];
        if (balanced_layout(L, pp * vp, layout, sizeof layout)) {
            add_default(b, "model.pipeline_model_parallel_layout=%s", layout);
            add_assumed(b, "model.pipeline_model_parallel_layout",
                        "uneven pipeline: layout %s (embedding and loss counted as layers)", layout);
        }
    }
    if (strstr(notes, "w/o MTP"))
        add_over(c, "model.mtp_num_layers=0");
    if (strstr(notes, "variant: tokendrop"))
        add_assumed(b, "model.moe_expert_capacity_factor",
                    "token-drop routing without a stated capacity: run as balanced dropless");

    /* DP column vs the GPU count */
    int64_t dp_cell = 0;
    if (sizes_ok && csv_num_int(CELL("dp"), &dp_cell) && dp_cell != world / (tp * pp * cp))
        add_assumed(b, NULL, "dp column %" PRId64 " ignored: num_gpus/(tp*pp*cp) = %" PRId64, dp_cell,
                    world / (tp * pp * cp));

    /* features */
    c->feat[VFEAT_PP] = pp > 1;
    c->feat[VFEAT_VP] = vp > 1;
    c->feat[VFEAT_CP] = cp > 1;
    c->feat[VFEAT_EP] = ep > 1;
    c->feat[VFEAT_FP8] = is_fp8_family(prec);
    c->feat[VFEAT_MAMBA] = mamba;
    c->feat[VFEAT_MOE] = moe;

    if (recipes) {
        char release[64];
        row_release(notes, CELL("source"), c->prefix, release, sizeof release);
        const recipe_row *row =
            recipes_match(recipes, c->prefix, c->model, c->gpu, CELL("precision"), world, release);
        if (row)
            apply_recipe(b, row, tp);
    }
    finish_assumed(b);
    free(b);
#undef CELL
}

/* Every case skipped for a frameworks file that cannot be read. */
static void skip_all(const csv_table *t, size_t r0, size_t n, const sim_err *err, vcase *cases)
{
    char buf[600];
    sim_err_format(err, buf, sizeof buf);
    for (size_t r = r0; r < r0 + n; r++) {
        validate_case_labels(t, r, NULL, &cases[r - r0]);
        set_skip(&cases[r - r0], "frameworks file: %s", buf);
    }
}

void validate_case(const csv_table *t, size_t r, const char *data_dir, vcase *c)
{
    vfw_table fws;
    sim_err err;
    sim_err_clear(&err);
    if (vfw_read(vfw_default_path(), &fws, &err) != SIM_OK) {
        skip_all(t, r, 1, &err, c);
        return;
    }
    vsetup setup = { .frameworks = &fws };
    build_case(t, r, data_dir, NULL, &setup, c);
    vfw_free(&fws);
}

int validate_cases(const csv_table *t, const char *data_dir, vcase *cases)
{
    vfw_table fws;
    sim_err err;
    sim_err_clear(&err);
    int rc = vfw_read(vfw_default_path(), &fws, &err);
    if (rc == SIM_ENOMEM)
        return rc;
    if (rc != SIM_OK) {
        skip_all(t, 0, t->nrows, &err, cases);
        return validate_number_runs(cases, t->nrows);
    }
    vsetup setup = { .frameworks = &fws };
    rc = validate_cases_setup(t, data_dir, &setup, cases);
    vfw_free(&fws);
    return rc;
}

int validate_cases_setup(const csv_table *t, const char *data_dir, const vsetup *setup,
                         vcase *cases)
{
    vprobe_cache *pc = calloc(1, sizeof *pc);
    if (!pc)
        return SIM_ENOMEM;
    for (size_t r = 0; r < t->nrows; r++)
        build_case(t, r, data_dir, pc, setup, &cases[r]);
    free(pc);
    return validate_number_runs(cases, t->nrows);
}

/* ---------------------------------------------------------- FLOPs */

/* Core-attention FLOPs per step as Megatron counts them (causal, half):
 * the part of model_flops_per_step that grows with s^2, recovered as
 * (F(2s) - 2 F(s)) / 2 so it follows model.c exactly. */
static double core_attention_flops(const model_spec *m, int64_t batch, int64_t tp)
{
    model_spec m2 = *m;
    m2.seq_length = 2 * m->seq_length;
    return (model_flops_per_step(&m2, batch, tp) - 2.0 * model_flops_per_step(m, batch, tp)) / 2.0;
}

double validate_conv_flops(flop_conv conv, const run_inputs *in, int64_t tp)
{
    const model_spec *m = &in->model;
    int64_t B = in->train.global_batch_size;
    double F = model_flops_per_step(m, B, tp);
    double core = core_attention_flops(m, B, tp);
    double full = F + core; /* core attention counted in full */
    double s = (double)m->seq_length, h = (double)m->hidden_size, L = (double)m->num_layers;
    double V = (double)model_padded_vocab(m, tp);
    switch (conv) {
    case FC_MEGATRON:
        return F;
    case FC_NEMO_FULL:
        return full;
    case FC_SC21_HW:
        return 96.0 * (double)B * s * L * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * L * h));
    case FC_HARDWARE: {
        /* One more forward of what is recomputed.  Logits (3 x 2 B s h V
         * per output head) are never recomputed. */
        double logits = 6.0 * (double)B * s * h * V * (double)(m->mtp_num_layers + 1);
        if (in->par.recompute_granularity == RECOMPUTE_FULL)
            return full + (full - logits) / 3.0;
        if (in->par.recompute_granularity == RECOMPUTE_SELECTIVE &&
            (in->par.recompute_modules & RECOMPUTE_MOD_CORE_ATTN))
            return full + 2.0 * core / 3.0; /* a third of the full core term */
        return full;
    }
    default:
        return NAN;
    }
}

static double peak_for(const run_inputs *in)
{
    switch (in->par.precision) {
    case PREC_BF16:
    case PREC_FP16:
        return in->cluster.gpu.peak_bf16_flops_per_s;
    case PREC_NVFP4:
        return in->cluster.gpu.peak_fp4_flops_per_s;
    default:
        return in->cluster.gpu.peak_fp8_flops_per_s;
    }
}

/* ---------------------------------------------------------- predict */

static int pred_skip(vpred *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int pred_skip(vpred *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->skip, sizeof p->skip, fmt, ap);
    va_end(ap);
    p->ok = false;
    return SIM_OK;
}

/* validate_predict with the input files from files (NULL: each read as
 * named; filecache.h). */
static int predict_with(const vcase *c, const char *data_dir, const char *const *extra, filecache *files,
                        vpred *p)
{
    memset(p, 0, sizeof *p);
    p->value = p->ape = p->bias = NAN;
    if (c->skip[0])
        return pred_skip(p, "%s", c->skip);
    cfg_t *cfg = cfg_create(data_dir);
    if (!cfg)
        return SIM_ENOMEM;
    cfg_use_filecache(cfg, files);
    sim_err err;
    sim_err_clear(&err);
    char buf[700];
    int rc = SIM_OK;
    for (int k = 0; k < c->n_over && rc == SIM_OK; k++)
        rc = cfg_set_override(cfg, c->over[k], &err);
    for (const char *const *e = extra; e && *e && rc == SIM_OK; e++)
        rc = cfg_set_override(cfg, *e, &err);
    run_inputs in;
    strategy_t s;
    if (rc == SIM_OK)
        rc = cfg_resolve_all(cfg, &in, &s, &err);
    if (rc != SIM_OK) {
        cfg_destroy(cfg);
        if (rc == SIM_ENOMEM)
            return rc;
        sim_err_format(&err, buf, sizeof buf);
        return pred_skip(p, "rejected: %s", buf);
    }
    step_t *st = NULL;
    rc = step_run(&st, &in, &s, &err);
    if (rc != SIM_OK) {
        cfg_destroy(cfg);
        if (rc == SIM_ENOMEM)
            return rc;
        sim_err_format(&err, buf, sizeof buf);
        return pred_skip(p, "simulation failed: %s", buf);
    }
    const step_result *r = step_result_get(st);
    p->step_time_s = r->step_time_s;
    p->peak_bytes = r->peak_bytes;
    p->hbm_bytes = in.cluster.gpu.hbm_capacity_bytes;
    double world = (double)s.world;
    switch (c->metric) {
    case VM_STEP_TIME:
        p->value = r->step_time_s;
        break;
    case VM_TOKENS:
        p->value = r->tokens_per_s_per_gpu;
        break;
    case VM_TFLOPS:
        p->value = validate_conv_flops(c->conv, &in, s.tp) / r->step_time_s / world / 1e12;
        break;
    case VM_MFU: {
        double peak = peak_for(&in);
        if (!(peak > 0)) {
            step_destroy(st);
            cfg_destroy(cfg);
            return pred_skip(p, "no dense peak for %s on %s", precision_name(in.par.precision),
                             in.cluster.name);
        }
        p->value = validate_conv_flops(c->conv, &in, s.tp) / r->step_time_s / world / peak;
        break;
    }
    case VM_MEMORY:
        p->value = r->peak_bytes / c->mem_unit_bytes;
        break;
    default:
        break;
    }
    step_destroy(st);
    cfg_destroy(cfg);
    if (!isfinite(p->value) || p->value <= 0)
        return pred_skip(p, "prediction is not a positive number (%g)", p->value);
    p->ok = true;
    p->ape = 100.0 * fabs(p->value - c->measured) / c->measured;
    /* A shorter step is the optimistic side of a step-time row. */
    p->bias = 100.0 * (c->metric == VM_STEP_TIME ? c->measured - p->value : p->value - c->measured) / c->measured;
    return SIM_OK;
}

int validate_predict(const vcase *c, const char *data_dir, const char *const *extra, vpred *p)
{
    return predict_with(c, data_dir, extra, NULL, p);
}

/* ---------------------------------------------------------- summary */

void validate_stats(double *ape, size_t n, vstats *st)
{
    st->n = n;
    if (n == 0) {
        st->median = st->p90 = st->mean = NAN;
        return;
    }
    gsl_sort(ape, 1, n);
    st->median = gsl_stats_median_from_sorted_data(ape, 1, n);
    st->p90 = gsl_stats_quantile_from_sorted_data(ape, 1, n, 0.9);
    st->mean = gsl_stats_mean(ape, 1, n);
}

enum { G_ALL, G_FAMILY, G_METRIC, G_PREFIX, G_GPU, G_FEATURE, G_PRECISION, G_ARCH };

/* The precision a case runs at (its mixed_precision setting), "" before
 * the case has one. */
/* The row's precision by parsim's canonical name (a recipe may spell it as
 * Megatron Bridge does: bf16_with_fp8_delayed_scaling_mixed is fp8-delayed). */
static const char *case_precision(const vcase *c)
{
    const char *p = "";
    for (int k = 0; k < c->n_over; k++)
        if (!strncmp(c->over[k], "mixed_precision=", 16))
            p = c->over[k] + 16;
    precision_kind kind;
    return p[0] && precision_from_name(p, &kind) ? precision_name(kind) : p;
}

static size_t add_group(vgroup *g, size_t n, size_t max, int kind, int arg, const char *value,
                        const char *label)
{
    if (n >= max)
        return n;
    for (size_t k = 0; k < n; k++)
        if (g[k].kind == kind && g[k].arg == arg && !strcmp(g[k].value, value))
            return n;
    g[n].kind = kind;
    g[n].arg = arg;
    snprintf(g[n].value, sizeof g[n].value, "%s", value);
    snprintf(g[n].label, sizeof g[n].label, "%s", label);
    return n + 1;
}

size_t validate_groups(const vcase *cases, size_t n, vgroup *groups, size_t max)
{
    size_t k = 0;
    char label[64];
    k = add_group(groups, k, max, G_ALL, 0, "", "all");
    for (int f = 0; f < VFAM_COUNT; f++) {
        snprintf(label, sizeof label, "family %s", family_names[f]);
        k = add_group(groups, k, max, G_FAMILY, f, "", label);
    }
    for (int m = 0; m < VM_COUNT; m++) {
        snprintf(label, sizeof label, "metric %s", metric_names[m]);
        k = add_group(groups, k, max, G_METRIC, m, "", label);
    }
    for (size_t i = 0; i < n; i++) {
        snprintf(label, sizeof label, "source %s", cases[i].prefix);
        k = add_group(groups, k, max, G_PREFIX, 0, cases[i].prefix, label);
    }
    for (size_t i = 0; i < n; i++) {
        snprintf(label, sizeof label, "gpu %s", cases[i].gpu);
        k = add_group(groups, k, max, G_GPU, 0, cases[i].gpu, label);
    }
    for (int f = 0; f < VFEAT_MOE; f++) {
        snprintf(label, sizeof label, "feature %s", feature_names[f]);
        k = add_group(groups, k, max, G_FEATURE, f, "", label);
    }
    for (size_t i = 0; i < n; i++) {
        const char *prec = case_precision(&cases[i]);
        if (!prec[0])
            continue;
        snprintf(label, sizeof label, "precision %.40s", prec);
        k = add_group(groups, k, max, G_PRECISION, 0, prec, label);
    }
    k = add_group(groups, k, max, G_ARCH, 0, "", "arch dense");
    k = add_group(groups, k, max, G_ARCH, 1, "", "arch moe");
    return k;
}

bool validate_in_group(const vgroup *g, const vcase *c)
{
    switch (g->kind) {
    case G_ALL: return true;
    case G_FAMILY: return (int)c->family == g->arg;
    case G_METRIC: return (int)c->metric == g->arg;
    case G_PREFIX: return !strcmp(c->prefix, g->value);
    case G_GPU: return !strcmp(c->gpu, g->value);
    case G_FEATURE: return c->feat[g->arg];
    case G_PRECISION: return !strncmp(case_precision(c), g->value, sizeof g->value - 1);
    case G_ARCH: return c->feat[VFEAT_MOE] == (g->arg == 1);
    }
    return false;
}

static void print_num(FILE *out, double v)
{
    if (isnan(v))
        fprintf(out, " %8s", "-");
    else
        fprintf(out, " %8.1f", v);
}

/* A skipped row, for grouping by reason. */
typedef struct vskip {
    const char *reason;
    size_t row;
} vskip;

static int vskip_cmp(const void *x, const void *y)
{
    const vskip *a = x, *b = y;
    int c = strcmp(a->reason, b->reason);
    return c ? c : a->row < b->row ? -1 : a->row > b->row;
}

/* A group of the same reason: its first row, where it starts in the
 * sorted rows. */
typedef struct vskipgroup {
    size_t row, start;
} vskipgroup;

static int vskipgroup_cmp(const void *x, const void *y)
{
    const vskipgroup *a = x, *b = y;
    return a->row < b->row ? -1 : a->row > b->row;
}

/* Most reasons listed: the --out file has every row's. */
#define VSKIP_MAX_LISTED 100

/* The skipped rows grouped by reason, in order of first appearance, with
 * the first ids of each; O(n log n). */
static void print_skipped(FILE *out, const vcase *cases, const vpred *preds, size_t n)
{
    fprintf(out, "\nskipped rows by reason\n");
    vskip *sk = malloc((n ? n : 1) * sizeof *sk);
    vskipgroup *starts = malloc((n ? n : 1) * sizeof *starts);
    if (!sk || !starts) {
        free(sk);
        free(starts);
        fprintf(out, "  (out of memory grouping them)\n");
        return;
    }
    size_t ns = 0, ng = 0;
    for (size_t i = 0; i < n; i++)
        if (!preds[i].ok)
            sk[ns++] = (vskip){ preds[i].skip, i };
    qsort(sk, ns, sizeof *sk, vskip_cmp);
    for (size_t k = 0; k < ns; k++)
        if (k == 0 || strcmp(sk[k].reason, sk[k - 1].reason))
            starts[ng++] = (vskipgroup){ sk[k].row, k };
    qsort(starts, ng, sizeof *starts, vskipgroup_cmp);
    for (size_t g = 0; g < ng && g < VSKIP_MAX_LISTED; g++) {
        size_t k0 = starts[g].start, count = 0;
        char ids[160] = "";
        for (size_t k = k0; k < ns && !strcmp(sk[k].reason, sk[k0].reason); k++, count++) {
            size_t len = strlen(ids);
            if (count < 4)
                snprintf(ids + len, sizeof ids - len, "%s%s", count ? " " : "",
                         cases[sk[k].row].id);
            else if (count == 4)
                snprintf(ids + len, sizeof ids - len, " ...");
        }
        fprintf(out, "  %4zu  %s  [%s]\n", count, sk[k0].reason, ids);
    }
    if (ng > VSKIP_MAX_LISTED)
        fprintf(out, "  ... and %zu more reasons (the skip_reason column of --out has each row's)\n",
                ng - VSKIP_MAX_LISTED);
    free(sk);
    free(starts);
}

/* Keys counted for the most frequent ignored settings. */
#define VIGN_KEYS 64
#define VIGN_LISTED 5

/* Rows with recipe settings parsim does not model, and the keys most rows
 * have; nothing when no recipe was applied. */
static void print_ignored(FILE *out, const vcase *cases, size_t n)
{
    size_t matched = 0, rows = 0, nk = 0;
    struct {
        char key[RECIPE_KEY_LEN];
        size_t rows;
    } keys[VIGN_KEYS];
    for (size_t i = 0; i < n; i++) {
        matched += cases[i].recipe_line > 0;
        rows += cases[i].n_ignored > 0;
        for (const char *p = cases[i].ignored; *p && strcmp(p, "(more)");) {
            size_t kl = strcspn(p, "=;");
            size_t k = 0;
            while (k < nk && (strlen(keys[k].key) != kl || strncmp(keys[k].key, p, kl)))
                k++;
            if (k == nk && nk < VIGN_KEYS && kl < RECIPE_KEY_LEN) {
                snprintf(keys[nk].key, sizeof keys[nk].key, "%.*s", (int)kl, p);
                keys[nk++].rows = 0;
            }
            if (k < nk)
                keys[k].rows++;
            p = strstr(p, "; ");
            p = p ? p + 2 : "";
        }
    }
    if (matched == 0)
        return;
    fprintf(out, "\n%zu rows run with their recipe's settings; %zu rows with settings parsim does not "
                 "model",
            matched, rows);
    for (size_t l = 0; l < VIGN_LISTED && nk > 0; l++) {
        size_t best = 0;
        for (size_t k = 1; k < nk; k++)
            if (keys[k].rows > keys[best].rows)
                best = k;
        if (keys[best].rows == 0)
            break;
        fprintf(out, "%s %s (%zu)", l ? "," : "; most frequent:", keys[best].key, keys[best].rows);
        keys[best].rows = 0;
    }
    fprintf(out, "\n  (the ignored column of --out has each row's)\n");
}

bool validate_pred_fits(const vpred *p)
{
    return p->peak_bytes <= p->hbm_bytes;
}

/* Most ids listed after the count of predicted rows that do not fit. */
#define VUNFIT_MAX_LISTED 12

/* A configuration that needs more memory than the GPU has did not run as
 * simulated: some setting parsim filled in (or the model) differs from
 * the measured run. */
static void print_unfit(FILE *out, const vcase *cases, const vpred *preds, size_t n)
{
    size_t unfit = 0;
    for (size_t i = 0; i < n; i++)
        unfit += preds[i].ok && !validate_pred_fits(&preds[i]);
    if (unfit == 0)
        return;
    fprintf(out, "\n%zu predicted row%s do%s not fit in HBM (peak > capacity): their assumed "
                 "settings are likely wrong\n ",
            unfit, unfit == 1 ? "" : "s", unfit == 1 ? "es" : "");
    size_t listed = 0;
    for (size_t i = 0; i < n && listed < VUNFIT_MAX_LISTED; i++)
        if (preds[i].ok && !validate_pred_fits(&preds[i])) {
            fprintf(out, " %s", cases[i].id);
            listed++;
        }
    if (unfit > listed)
        fprintf(out, " ... (the fits column of --out has every row's)");
    fputc('\n', out);
}

void validate_summary(FILE *out, const vcase *cases, const vpred *preds, size_t n)
{
    size_t predicted = 0, assumed = 0;
    for (size_t i = 0; i < n; i++) {
        predicted += preds[i].ok;
        assumed += cases[i].n_assumed > 0;
    }
    fprintf(out, "validate: %zu rows, %zu predicted, %zu skipped, %zu with assumed settings\n\n", n,
            predicted, n - predicted, assumed);
    fprintf(out, "absolute percent error (APE) of the predicted rows; bias: median signed error, + when\n"
                 "parsim predicts a faster step, more throughput or more memory than measured\n");
    fprintf(out, "%-28s %6s %6s %8s %8s %8s %8s %8s\n", "group", "rows", "pred", "assumed", "median%",
            "p90%", "mean%", "bias%");
    vgroup groups[128];
    size_t ng = validate_groups(cases, n, groups, sizeof groups / sizeof groups[0]);
    double *ape = malloc((n ? n : 1) * sizeof *ape), *bias = malloc((n ? n : 1) * sizeof *bias);
    if (!ape || !bias) {
        free(ape);
        free(bias);
        return;
    }
    for (size_t g = 0; g < ng; g++) {
        size_t rows = 0, na = 0, k = 0;
        for (size_t i = 0; i < n; i++) {
            if (!validate_in_group(&groups[g], &cases[i]))
                continue;
            rows++;
            na += cases[i].n_assumed > 0;
            if (preds[i].ok) {
                ape[k] = preds[i].ape;
                bias[k++] = preds[i].bias;
            }
        }
        if (rows == 0)
            continue;
        vstats st, sb;
        validate_stats(ape, k, &st);
        validate_stats(bias, k, &sb);
        fprintf(out, "%-28s %6zu %6zu %8zu", groups[g].label, rows, k, na);
        print_num(out, st.median);
        print_num(out, st.p90);
        print_num(out, st.mean);
        print_num(out, sb.median);
        fputc('\n', out);
    }
    free(ape);
    free(bias);

    print_unfit(out, cases, preds, n);
    print_ignored(out, cases, n);
    /* skipped rows, grouped by reason */
    if (predicted < n)
        print_skipped(out, cases, preds, n);
}

void validate_write_csv(FILE *out, const csv_table *t, const vcase *cases, const vpred *preds)
{
    fprintf(out, "%s,predicted_value,ape_percent,skip_reason,assumed,overrides,peak_gib,hbm_gib,fits,"
                 "ignored,ignored_same\n",
            t->header_raw);
    for (size_t r = 0; r < t->nrows; r++) {
        fputs(t->raw[r], out);
        if (preds[r].ok)
            fprintf(out, ",%.9g,%.6g,", preds[r].value, preds[r].ape);
        else {
            fputs(",,,", out);
            csv_write_field(out, preds[r].skip);
        }
        fputc(',', out);
        csv_write_field(out, cases[r].assumed);
        fputc(',', out);
        char ov[VCASE_MAX_OVER * (VCASE_OVER_LEN + 1)];
        size_t n = 0;
        ov[0] = '\0';
        for (int k = 0; k < cases[r].n_over; k++)
            n += (size_t)snprintf(ov + n, sizeof ov - n, "%s%s", k ? " " : "", cases[r].over[k]);
        csv_write_field(out, ov);
        if (preds[r].ok)
            fprintf(out, ",%.2f,%.2f,%s,", preds[r].peak_bytes / GIB, preds[r].hbm_bytes / GIB,
                    validate_pred_fits(&preds[r]) ? "yes" : "no");
        else
            fputs(",,,,", out);
        csv_write_field(out, cases[r].ignored);
        fputc(',', out);
        csv_write_field(out, cases[r].ignored_same);
        fputc('\n', out);
    }
}

/* ---------------------------------------------------------- filters */

/* One condition of a filter: NAME=PAT or NAME!=PAT. */
typedef struct vcond {
    char name[256];
    char pat[256];
    bool negate;
} vcond;

/* Reads the next condition at *p into cd; false at the end.  *malformed
 * is set for a condition without '=' or longer than a vcond holds (cd->name
 * then holds its start). */
static bool next_cond(const char **p, vcond *cd, bool *malformed)
{
    *malformed = false;
    while (**p == ',' || **p == ' ')
        (*p)++;
    if (!**p)
        return false;
    size_t n = strcspn(*p, ",");
    char buf[256];
    if (n >= sizeof buf) {
        *malformed = true;
        snprintf(cd->name, sizeof cd->name, "%.40s...", *p);
        *p += n;
        return true;
    }
    memcpy(buf, *p, n);
    buf[n] = '\0';
    *p += n;
    char *eq = strchr(buf, '=');
    if (!eq || eq == buf) {
        *malformed = true;
        snprintf(cd->name, sizeof cd->name, "%s", buf);
        return true;
    }
    cd->negate = eq > buf && eq[-1] == '!';
    char *name_end = cd->negate ? eq - 1 : eq;
    *name_end = '\0';
    snprintf(cd->name, sizeof cd->name, "%s", buf);
    snprintf(cd->pat, sizeof cd->pat, "%s", eq + 1);
    return true;
}

/* Orders cases by their overrides (n_over, then each in turn); 0 for the
 * same setup. */
static int overrides_cmp(const vcase *a, const vcase *b)
{
    if (a->n_over != b->n_over)
        return a->n_over < b->n_over ? -1 : 1;
    for (int i = 0; i < a->n_over; i++) {
        int c = strcmp(a->over[i], b->over[i]);
        if (c)
            return c;
    }
    return 0;
}

/* qsort order of case pointers: by setup, then by place in the array. */
static int setup_cmp(const void *x, const void *y)
{
    const vcase *a = *(const vcase *const *)x, *b = *(const vcase *const *)y;
    int c = overrides_cmp(a, b);
    return c ? c : a < b ? -1 : a > b;
}

int validate_number_runs(vcase *cases, size_t n)
{
    /* Sorted by setup, the rows of one setup are adjacent, the first of
     * them in the array leading; O(n log n) comparisons. */
    vcase **by = malloc((n ? n : 1) * sizeof *by);
    size_t *first = malloc((n ? n : 1) * sizeof *first);
    if (!by || !first) {
        free(by);
        free(first);
        return SIM_ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        by[i] = &cases[i];
    qsort(by, n, sizeof *by, setup_cmp);
    for (size_t k = 0, lead = 0; k < n; k++) {
        if (overrides_cmp(by[lead], by[k]) != 0)
            lead = k;
        first[by[k] - cases] = (size_t)(by[lead] - cases);
    }
    /* numbered in order of first appearance */
    size_t next = 0;
    for (size_t i = 0; i < n; i++)
        cases[i].run = first[i] == i ? next++ : cases[first[i]].run;
    free(by);
    free(first);
    return SIM_OK;
}

int validate_filter_check(const csv_table *t, const char *filter, sim_err *err)
{
    if (!filter)
        return SIM_OK;
    const char *p = filter;
    vcond cd;
    bool bad;
    while (next_cond(&p, &cd, &bad)) {
        if (bad)
            return sim_err_set(err, SIM_EINVAL,
                               "--rows: '%s' is not NAME=PATTERN or NAME!=PATTERN (at most %zu "
                               "characters)",
                               cd.name, sizeof cd.name - 1);
        if (strcmp(cd.name, "prefix") && strcmp(cd.name, "family") && strcmp(cd.name, "arch") &&
            strcmp(cd.name, "row") && strcmp(cd.name, "run") && csv_col(t, cd.name) < 0)
            return sim_err_set(err, SIM_EINVAL,
                               "--rows: no column '%s' (columns of the file, or prefix, family, "
                               "arch, row, run)",
                               cd.name);
    }
    return SIM_OK;
}

bool validate_filter_match(const csv_table *t, const vcase *c, const char *filter)
{
    if (!filter)
        return true;
    const char *p = filter;
    vcond cd;
    bool bad;
    while (next_cond(&p, &cd, &bad)) {
        if (bad)
            return false;
        char num[32];
        const char *value;
        bool hit;
        if (!strcmp(cd.name, "row") || !strcmp(cd.name, "run")) {
            size_t idx = !strcmp(cd.name, "row") ? c->row : c->run;
            snprintf(num, sizeof num, "%zu", idx);
            if (!strcmp(cd.pat, "even"))
                hit = idx % 2 == 0;
            else if (!strcmp(cd.pat, "odd"))
                hit = idx % 2 == 1;
            else
                hit = fnmatch(cd.pat, num, 0) == 0;
        } else {
            if (!strcmp(cd.name, "prefix"))
                value = c->prefix;
            else if (!strcmp(cd.name, "family"))
                value = vfamily_name(c->family);
            else if (!strcmp(cd.name, "arch"))
                value = c->feat[VFEAT_MOE] ? "moe" : "dense";
            else
                value = csv_cell(t, c->row, csv_col(t, cd.name));
            hit = fnmatch(cd.pat, value, 0) == 0;
        }
        if (hit == cd.negate)
            return false;
    }
    return true;
}

/* ---------------------------------------------------------- settings */

int validate_check_extra(const vcase *cases, size_t n, const char *data_dir,
                         const char *const *extra, sim_err *err)
{
    if (!extra || !*extra)
        return SIM_OK;
    size_t i = 0;
    while (i < n && cases[i].skip[0])
        i++;
    if (i == n)
        return SIM_OK;
    cfg_t *cfg = cfg_create(data_dir);
    if (!cfg)
        return sim_err_set(err, SIM_ENOMEM, "out of memory");
    int rc = SIM_OK;
    for (int k = 0; k < cases[i].n_over && rc == SIM_OK; k++)
        rc = cfg_set_override(cfg, cases[i].over[k], err);
    if (rc != SIM_OK) { /* the row's own settings: reported per row later */
        cfg_destroy(cfg);
        return SIM_OK;
    }
    for (const char *const *e = extra; *e && rc == SIM_OK; e++)
        rc = cfg_set_override(cfg, *e, err);
    run_inputs in;
    if (rc == SIM_OK)
        rc = cfg_resolve(cfg, &in, err);
    cfg_destroy(cfg);
    if (rc == SIM_OK || rc == SIM_ENOMEM)
        return rc;
    /* blame the extra settings only when the error is about one of them */
    for (const char *const *e = extra; *e; e++) {
        size_t kl = strcspn(*e, "=");
        if (!err->key[0] || (strlen(err->key) == kl && !strncmp(err->key, *e, kl)))
            return rc;
    }
    return SIM_OK;
}

/* ---------------------------------------------------------- many rows */

typedef struct vpool {
    const vcase *cases;
    const bool *select;
    const char *data_dir;
    const char *const *extra;
    vpred *preds;
    progress_t *prog;
    filecache *files; /* the rows' input files, parsed once */
    long done;     /* selected rows finished (on_done runs one at a time) */
} vpool;

static int vpool_row(void *arg, int worker, size_t i, sim_err *err)
{
    (void)worker;
    (void)err; /* the row's message is in its vpred; the code travels */
    vpool *p = arg;
    if (p->select && !p->select[i])
        return SIM_OK;
    return predict_with(&p->cases[i], p->data_dir, p->extra, p->files, &p->preds[i]);
}

static void vpool_done(void *arg, size_t i, size_t done)
{
    (void)done; /* rows left out are not counted */
    vpool *p = arg;
    if (!p->select || p->select[i])
        progress_update(p->prog, ++p->done);
}

int validate_predict_many(const vcase *cases, const bool *select, size_t n, const char *data_dir,
                          const char *const *extra, vpred *preds, int jobs, progress_t *prog)
{
    vpool p = {.cases = cases, .select = select, .data_dir = data_dir, .extra = extra, .preds = preds,
               .prog = prog, .files = filecache_create()};
    if (!p.files)
        return SIM_ENOMEM;
    pool_job job = {.jobs = jobs, .n = n, .fn = vpool_row, .ctx = &p,
                    .stop_on_error = true, .on_done = prog ? vpool_done : NULL};
    const int rc = pool_run(&job, NULL);
    filecache_destroy(p.files);
    return rc;
}

int validate_default_jobs(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 64 ? 64 : (int)n;
}
