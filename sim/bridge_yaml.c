/* bridge_yaml: reading a Megatron Bridge run_config.yaml (rules in
 * bridge_yaml.h).
 *
 * Two passes over the text with libyaml: the event parser first, counting
 * nodes and nesting against the limits (the document loader nests as deep
 * as the text does, and an alias is one event however much it repeats),
 * then the document loader, whose tree is walked into leaves (one per
 * field, with its line).  An alias shares its node, so the walk counts
 * every field it visits and stops at the limits as well (a node that
 * contains its own alias is a cycle the depth limit ends).  The leaves are
 * then judged by the rule table and the mapped ones set on the cfg in
 * rank order: fallbacks first, so the fields that are the effective values
 * win.
 */
#include "bridge_yaml.h"

#include <fnmatch.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "bounds.h"
#include "infile.h"

#define PATH_LEN 256

/* ------------------------------------------------------------------ notes */

bool bridge_yaml_is_path(const char *path)
{
    size_t n = strlen(path);
    return (n > 5 && !strcmp(path + n - 5, ".yaml")) || (n > 4 && !strcmp(path + n - 4, ".yml"));
}

bridge_notes *bridge_notes_create(void) { return calloc(1, sizeof(bridge_notes)); }

void bridge_notes_destroy(bridge_notes *n)
{
    if (!n)
        return;
    for (size_t k = 0; k < n->n; k++) {
        free(n->f[k].path);
        free(n->f[k].detail);
    }
    free(n->f);
    free(n);
}

static int note_add(bridge_notes *n, const char *path, int line, bridge_verdict v, const char *detail,
                    sim_err *err)
{
    if (n->n == n->cap) {
        size_t cap = n->cap ? 2 * n->cap : 256;
        bridge_field *f = realloc(n->f, cap * sizeof *f);
        if (!f)
            return sim_err_set(err, SIM_ENOMEM, "out of memory reading %s", n->file);
        n->f = f;
        n->cap = cap;
    }
    bridge_field *f = &n->f[n->n];
    f->path = strdup(path);
    f->detail = strdup(detail);
    if (!f->path || !f->detail) {
        free(f->path);
        free(f->detail);
        return sim_err_set(err, SIM_ENOMEM, "out of memory reading %s", n->file);
    }
    f->line = line;
    f->verdict = v;
    n->n++;
    return SIM_OK;
}

const char *bridge_notes_provider(const bridge_notes *n)
{
    const char *dot = n ? strrchr(n->provider, '.') : NULL;
    return !n ? "" : dot ? dot + 1 : n->provider;
}

/* Text as one line of bounded length: control characters as '?'. */
static void put_clean(FILE *out, const char *s, size_t max)
{
    size_t k = 0;
    for (; s[k] && k < max; k++)
        fputc((unsigned char)s[k] < 0x20 || s[k] == 0x7f ? '?' : s[k], out);
    if (s[k])
        fputs("...", out);
}

void bridge_notes_explain(const bridge_notes *n, FILE *out)
{
    static const char *const verdict[] = { "mapped to ", "null: Megatron's default (", "ignored (",
                                           "not modeled: " };
    static const char *const close[] = { "", ")", ")", "" };
    for (size_t k = 0; n && k < n->n; k++) {
        const bridge_field *f = &n->f[k];
        fprintf(out, "%s:%d: ", n->file, f->line);
        put_clean(out, f->path, PATH_LEN);
        fprintf(out, ": %s", verdict[f->verdict]);
        put_clean(out, f->detail, 200);
        fprintf(out, "%s\n", close[f->verdict]);
    }
}

int bridge_notes_warn(const bridge_notes *n, FILE *out)
{
    int count = 0;
    for (size_t k = 0; n && k < n->n; k++) {
        const bridge_field *f = &n->f[k];
        if (f->verdict != BRIDGE_NOT_MODELED)
            continue;
        fprintf(out, "parsim: warning: %s:%d: ", n->file, f->line);
        put_clean(out, f->path, PATH_LEN);
        fputc('=', out);
        put_clean(out, f->detail, 200);
        fputs("; the result may differ\n", out);
        count++;
    }
    return count;
}

/* ----------------------------------------------------------------- leaves */

typedef enum { LV_NULL, LV_SCALAR, LV_LIST, LV_SYMBOL, LV_COMPLEX } leaf_kind;

/* One field: its value as text (LV_NULL: "null"; LV_LIST: override
 * syntax; LV_SYMBOL: a dtype, function or enum name; LV_COMPLEX: what it
 * is, e.g. "a mapping"). */
typedef struct leaf {
    char *path;
    int line;
    leaf_kind kind;
    char *text;
    bool quoted;       /* LV_SCALAR written quoted: a string */
} leaf;

typedef struct reader {
    const char *file;
    yaml_document_t *doc;
    leaf *lv;
    size_t n, cap;
    long long visits;
    bridge_notes *notes;
    const bridge_sink *sink;
    sim_err *err;
} reader;

static int no_memory(const reader *r) { return sim_err_set(r->err, SIM_ENOMEM, "out of memory reading %s", r->file); }

static int node_line(const yaml_node_t *n) { return (int)n->start_mark.line + 1; }

static int leaf_add(reader *r, const char *path, int line, leaf_kind kind, const char *text, bool quoted)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 256;
        leaf *lv = realloc(r->lv, cap * sizeof *lv);
        if (!lv)
            return no_memory(r);
        r->lv = lv;
        r->cap = cap;
    }
    leaf *l = &r->lv[r->n];
    l->path = strdup(path);
    l->text = strdup(text);
    if (!l->path || !l->text) {
        free(l->path);
        free(l->text);
        return no_memory(r);
    }
    l->line = line;
    l->kind = kind;
    l->quoted = quoted;
    r->n++;
    return SIM_OK;
}

static const char *scalar(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static bool plain(const yaml_node_t *n)
{
    return n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

/* YAML's null: a plain null, Null, NULL, ~ or nothing. */
static bool is_null(const yaml_node_t *n)
{
    const char *s = scalar(n);
    return s && plain(n) && (!s[0] || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL") || !strcmp(s, "~"));
}

static yaml_node_t *map_get(yaml_document_t *d, const yaml_node_t *m, const char *key)
{
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        const char *k = scalar(yaml_document_get_node(d, p->key));
        if (k && !strcmp(k, key))
            return yaml_document_get_node(d, p->value);
    }
    return NULL;
}

/* Megatron Core's enums that the file writes by value only. */
static const struct {
    const char *cls;
    const char *names[8]; /* by value, from 0 */
} enum_values[] = {
    { "AttnBackend", { NULL, "flash", "fused", "unfused", "local", "auto" } },
};

/* The name of an enum object {_target_: Class, _call_: true, _args_: [v]}:
 * _name_ if there, a string value as it is, a known class's number by the
 * table; NULL otherwise. */
static const char *enum_name(yaml_document_t *d, const yaml_node_t *m, const char *cls)
{
    const char *name = scalar(map_get(d, m, "_name_"));
    if (name)
        return name;
    const yaml_node_t *args = map_get(d, m, "_args_");
    if (!args || args->type != YAML_SEQUENCE_NODE || args->data.sequence.items.top == args->data.sequence.items.start)
        return NULL;
    const yaml_node_t *a0 = yaml_document_get_node(d, *args->data.sequence.items.start);
    const char *v = scalar(a0);
    if (!v)
        return NULL;
    if (!plain(a0) || (v[0] < '0' || v[0] > '9'))
        return v;
    const char *dot = strrchr(cls, '.');
    const char *base = dot ? dot + 1 : cls;
    char *end = NULL;
    long num = strtol(v, &end, 10);
    for (size_t k = 0; k < sizeof enum_values / sizeof enum_values[0]; k++)
        if (!strcmp(base, enum_values[k].cls) && !*end && num >= 0 && num < 8)
            return enum_values[k].names[num];
    return NULL;
}

/* Only fields beginning with '_' (an enum or symbol object has no others). */
static bool only_private(yaml_document_t *d, const yaml_node_t *m)
{
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        const char *k = scalar(yaml_document_get_node(d, p->key));
        if (!k || k[0] != '_')
            return false;
    }
    return true;
}

/* What an object value stands for: a symbol or enum name (returned), or
 * NULL for a dataclass (or other object) whose fields are read one by one.
 * *unreadable: an enum whose value this file does not name. */
static const char *object_symbol(yaml_document_t *d, const yaml_node_t *m, bool *unreadable)
{
    *unreadable = false;
    const char *target = scalar(map_get(d, m, "_target_"));
    if (!target)
        return NULL;
    const char *call = scalar(map_get(d, m, "_call_"));
    const char *partial = scalar(map_get(d, m, "_partial_"));
    if ((partial && !strcmp(partial, "true")) || (call && !strcmp(call, "false")))
        return target;
    if (call && !strcmp(call, "true") && map_get(d, m, "_args_") && only_private(d, m)) {
        const char *name = enum_name(d, m, target);
        *unreadable = name == NULL;
        return name;
    }
    return NULL;
}

static bool needs_quotes(const char *s)
{
    return !s[0] || strpbrk(s, ",[]()\"' \t\\") != NULL;
}

/* s as a quoted string of override syntax. */
static void put_quoted(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static int walk(reader *r, const yaml_node_t *n, const char *path, int depth, bool mapped_section);

/* A sequence: a list of scalars (or enum names) in override syntax, else
 * LV_COMPLEX. */
static int walk_list(reader *r, const yaml_node_t *n, const char *path)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return no_memory(r);
    bool complex = false;
    fputc('[', f);
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top && !complex; it++) {
        const yaml_node_t *e = yaml_document_get_node(r->doc, *it);
        if (++r->visits > LIMIT_YAML_NODES)
            break;
        const char *s = scalar(e);
        bool quoted = s && !plain(e);
        bool unreadable = false;
        if (e->type == YAML_MAPPING_NODE) {
            s = object_symbol(r->doc, e, &unreadable);
            quoted = true;
        }
        if (!s || is_null(e)) {
            complex = true;
            break;
        }
        if (it != n->data.sequence.items.start)
            fputc(',', f);
        if (quoted || needs_quotes(s))
            put_quoted(f, s);
        else
            fputs(s, f);
    }
    fputc(']', f);
    if (fclose(f) != 0) {
        free(buf);
        return no_memory(r);
    }
    int rc = r->visits > LIMIT_YAML_NODES
                 ? sim_err_set_at(r->err, SIM_EINVAL, r->file, node_line(n), path,
                                  "aliases repeat more than %lld nodes (LIMIT_YAML_NODES)", LIMIT_YAML_NODES)
             : complex ? leaf_add(r, path, node_line(n), LV_COMPLEX, "a list of lists or mappings", false)
                       : leaf_add(r, path, node_line(n), LV_LIST, buf, false);
    free(buf);
    return rc;
}

/* The sections parsim reads; a field of one whose path is a parsim key is
 * mapped unless a rule says otherwise. */
static const char *const mapped_sections[] = { "model", "train", "ddp", "mixed_precision", "tokenizer",
                                               "comm_overlap", "peft" };

static bool is_mapped_section(const char *name)
{
    for (size_t k = 0; k < sizeof mapped_sections / sizeof mapped_sections[0]; k++)
        if (!strcmp(name, mapped_sections[k]))
            return true;
    return false;
}

/* The fields of a mapping, each under path. */
static int walk_fields(reader *r, const yaml_node_t *m, const char *path, int depth, bool mapped_section)
{
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        const yaml_node_t *kn = yaml_document_get_node(r->doc, p->key);
        const yaml_node_t *vn = yaml_document_get_node(r->doc, p->value);
        const char *k = scalar(kn);
        if (!k || !k[0])
            return sim_err_set_at(r->err, SIM_EINVAL, r->file, node_line(kn), path[0] ? path : NULL,
                                  "a field name must be a non-empty scalar");
        if (strlen(k) != kn->data.scalar.length)
            return sim_err_set_at(r->err, SIM_EINVAL, r->file, node_line(kn), path[0] ? path : NULL,
                                  "a NUL character in a field name");
        char sub[PATH_LEN];
        int w = snprintf(sub, sizeof sub, "%s%s%s", path, path[0] ? "." : "", k);
        if (w < 0 || (size_t)w >= sizeof sub)
            return sim_err_set_at(r->err, SIM_EINVAL, r->file, node_line(kn), NULL,
                                  "field path longer than %d characters: %.60s...", PATH_LEN - 1, sub);
        if (k[0] == '_') {
            /* private fields are not written; _target_ names the class */
            const char *cls = scalar(vn);
            if (!strcmp(k, "_target_") && cls) {
                if (!strcmp(path, "model"))
                    snprintf(r->notes->provider, sizeof r->notes->provider, "%s", cls);
                int rc = leaf_add(r, sub, node_line(vn), LV_SYMBOL, cls, false);
                if (rc)
                    return rc;
            }
            continue;
        }
        bool section = depth == 0;
        int rc = walk(r, vn, sub, depth + 1, section ? is_mapped_section(k) : mapped_section);
        if (rc)
            return rc;
    }
    return SIM_OK;
}

static int walk(reader *r, const yaml_node_t *n, const char *path, int depth, bool mapped_section)
{
    if (++r->visits > LIMIT_YAML_NODES)
        return sim_err_set_at(r->err, SIM_EINVAL, r->file, node_line(n), path,
                              "aliases repeat more than %lld nodes (LIMIT_YAML_NODES)", LIMIT_YAML_NODES);
    if (depth > LIMIT_YAML_DEPTH)
        return sim_err_set_at(r->err, SIM_EINVAL, r->file, node_line(n), path,
                              "nested deeper than %d (LIMIT_YAML_DEPTH; an alias inside itself?)", LIMIT_YAML_DEPTH);
    const int line = node_line(n);
    bool section = depth == 1;
    /* mixed_precision may be a recipe name: the mixed_precision key */
    bool recipe_name = n->type == YAML_SCALAR_NODE && !strcmp(path, "mixed_precision");
    if (section && mapped_section && n->type != YAML_MAPPING_NODE && !is_null(n) && !recipe_name)
        return sim_err_set_at(r->err, SIM_EINVAL, r->file, line, path,
                              "expected a mapping (a ConfigContainer section) or null, got %s",
                              n->type == YAML_SCALAR_NODE ? "a scalar" : "a list");
    switch (n->type) {
    case YAML_SCALAR_NODE:
        if (strlen(scalar(n)) != n->data.scalar.length)
            return sim_err_set_at(r->err, SIM_EINVAL, r->file, line, path, "a NUL character in a value");
        if (is_null(n))
            return leaf_add(r, path, line, LV_NULL, "null", false);
        return leaf_add(r, path, line, LV_SCALAR, scalar(n), !plain(n));
    case YAML_SEQUENCE_NODE:
        return walk_list(r, n, path);
    case YAML_MAPPING_NODE: {
        bool unreadable = false;
        const char *sym = object_symbol(r->doc, n, &unreadable);
        if (sym)
            return leaf_add(r, path, line, LV_SYMBOL, sym, false);
        if (unreadable)
            return leaf_add(r, path, line, LV_COMPLEX, "an enum without _name_", false);
        if (!section && mapped_section && r->sink->key_known(path))
            return sim_err_set_at(r->err, SIM_EINVAL, r->file, line, path,
                                  "expected a value, got a mapping");
        return walk_fields(r, n, path, depth, mapped_section);
    }
    default:
        return leaf_add(r, path, line, LV_NULL, "null", false);
    }
}

/* ------------------------------------------------------------------ rules */

typedef enum {
    R_MAP,        /* set key `to` (NULL: the path) to the value (or `as`) */
    R_IGNORE,     /* ignored: why */
    R_CHANGES,    /* not modeled: why (a warning) */
    R_PRECISION,  /* one of the fields the mixed_precision key is made of */
    R_PEFT,       /* the PEFT class: peft.scheme */
} rule_action;

/* A rule holds for a field whose path and value (the leaf's text; "null"
 * for null) match the globs, and, if `when` is given, another field:
 * "PATH=GLOB" (its value matches) or "PATH==" (its value is this one's). */
typedef struct rule {
    const char *path, *value, *when;
    rule_action act;
    const char *to, *as;
    int rank;          /* R_MAP: order of application; a later rank wins */
    const char *why;
} rule;

/* Ranks: fallbacks (0), the sections' own fields (1), the length the data
 * loader feeds (2). */
#define RANK_FALLBACK 0
#define RANK_OWN 1
#define RANK_DATA 2

static const rule rules[] = {
    /* the architecture is the file's: never a preset */
    { "model.name", "*", NULL, R_IGNORE, NULL, NULL, 0, "a parsim preset name; the file gives the architecture" },
    { "model._target_", "*", NULL, R_IGNORE, NULL, NULL, 0, "the provider class, named in the report" },
    { "peft._target_", "*", NULL, R_PEFT, NULL, NULL, 0, "" },
    { "*_target_", "*", NULL, R_IGNORE, NULL, NULL, 0, "the class of the section" },
    /* applied first; the model's and ddp's own fields are the values in effect */
    { "tokenizer.vocab_size", "*", NULL, R_MAP, "model.vocab_size", NULL, RANK_FALLBACK, "" },
    { "comm_overlap.tp_comm_overlap", "*", NULL, R_MAP, "model.tp_comm_overlap", NULL, RANK_FALLBACK, "" },
    { "comm_overlap.overlap_p2p_comm", "*", NULL, R_MAP, "model.overlap_p2p_comm", NULL, RANK_FALLBACK, "" },
    { "comm_overlap.overlap_grad_reduce", "*", NULL, R_MAP, "ddp.overlap_grad_reduce", NULL, RANK_FALLBACK, "" },
    { "comm_overlap.overlap_param_gather", "*", NULL, R_MAP, "ddp.overlap_param_gather", NULL, RANK_FALLBACK, "" },
    { "comm_overlap.bucket_size", "*", NULL, R_MAP, "ddp.bucket_size", NULL, RANK_FALLBACK, "" },
    { "comm_overlap.overlap_moe_expert_parallel_comm", "*", NULL, R_MAP, "model.overlap_moe_expert_parallel_comm", NULL,
      RANK_FALLBACK, "" },
    { "comm_overlap.delay_wgrad_compute", "*", NULL, R_MAP, "model.delay_wgrad_compute", NULL, RANK_FALLBACK, "" },
    /* Bridge's mixed-precision config sets the DDP reduce precision */
    { "mixed_precision.grad_reduce_in_fp32", "*", NULL, R_MAP, "ddp.grad_reduce_in_fp32", NULL, RANK_FALLBACK, "" },
    /* the length the data loader feeds is the length trained on */
    { "dataset.sequence_length", "*", NULL, R_MAP, "model.seq_length", NULL, RANK_DATA, "" },
    { "dataset.seq_length", "*", NULL, R_MAP, "model.seq_length", NULL, RANK_DATA, "" },
    /* resolved defaults the file writes out: kept as defaults, so that a
     * search or sweep that changes PP or TP keeps Megatron's rule */
    { "model.microbatch_group_size_per_vp_stage", "*", "model.pipeline_model_parallel_size==", R_IGNORE, NULL, NULL,
      0, "Megatron's default, pipeline_model_parallel_size" },
    { "model.expert_tensor_parallel_size", "*", "model.tensor_model_parallel_size==", R_IGNORE, NULL, NULL, 0,
      "Megatron's default, tensor_model_parallel_size" },
    /* older Megatron: the scope "full" is the whole layer */
    { "model.cuda_graph_scope", "full", NULL, R_MAP, NULL, "[]", RANK_OWN, "" },
    /* the precision */
    { "mixed_precision.bf16", "*", NULL, R_PRECISION, NULL, NULL, 0, "" },
    { "mixed_precision.fp16", "*", NULL, R_PRECISION, NULL, NULL, 0, "" },
    { "mixed_precision.fp8", "*", NULL, R_PRECISION, NULL, NULL, 0, "" },
    { "mixed_precision.fp8_recipe", "*", NULL, R_PRECISION, NULL, NULL, 0, "" },
    { "mixed_precision.fp4", "*", NULL, R_PRECISION, NULL, NULL, 0, "" },
    { "mixed_precision.fp4_recipe", "*", NULL, R_PRECISION, NULL, NULL, 0, "" },
    { "model.bf16", "*", NULL, R_PRECISION, NULL, NULL, 0, "" },
    { "model.fp16", "*", NULL, R_PRECISION, NULL, NULL, 0, "" },
    { "model.fp8", "*", NULL, R_PRECISION, NULL, NULL, 0, "" },
    { "model.fp8_recipe", "*", NULL, R_PRECISION, NULL, NULL, 0, "" },
    { "model.fp4", "*", NULL, R_PRECISION, NULL, NULL, 0, "" },
    { "model.fp4_recipe", "*", NULL, R_PRECISION, NULL, NULL, 0, "" },
    /* LoRA's fields only with LoRA (another method names its modules otherwise) */
    { "peft.dim", "*", "peft._target_=*.[LD]oRA", R_MAP, NULL, NULL, RANK_OWN, "" },
    { "peft.target_modules", "*", "peft._target_=*.[LD]oRA", R_MAP, NULL, NULL, RANK_OWN, "" },
    { "peft.*", "*", NULL, R_IGNORE, NULL, NULL, 0, "not part of parsim's LoRA model" },
    /* sharding strategies are read only by Megatron-FSDP (the other
     * Megatron-FSDP fields are keys of their own) */
    { "dist.use_megatron_fsdp", "*", NULL, R_MAP, "ddp.use_megatron_fsdp", NULL, RANK_FALLBACK, "" },
    { "dist.use_torch_fsdp2", "true", NULL, R_CHANGES, NULL, NULL, 0, "PyTorch FSDP2 is not modeled" },
    { "ddp.*sharding_strategy", "*", "ddp.use_megatron_fsdp=true", R_MAP, NULL, NULL, RANK_OWN, "" },
    { "ddp.*sharding_strategy", "*", NULL, R_IGNORE, NULL, NULL, 0, "read only with ddp.use_megatron_fsdp" },
    /* functions are symbols: Megatron's activations by their last name */
    { "model.activation_func", "*squared_relu", NULL, R_MAP, NULL, "squared_relu", RANK_OWN, "" },
    { "model.activation_func", "*.silu", NULL, R_MAP, NULL, "silu", RANK_OWN, "" },
    { "model.activation_func", "*.relu", NULL, R_MAP, NULL, "relu", RANK_OWN, "" },
    { "model.activation_func", "*gelu", NULL, R_MAP, NULL, "gelu", RANK_OWN, "" },
    { "model.activation_func", "*", NULL, R_IGNORE, NULL, NULL, 0,
      "an activation parsim costs as any other (one elementwise pass)" },
    /* would change the step; parsim does not simulate them */
    { "model.recompute_method", "block", NULL, R_CHANGES, NULL, NULL, 0,
      "block recompute is not modeled (full recompute is uniform)" },
    { "*.defer_embedding_wgrad_compute", "true", NULL, R_CHANGES, NULL, NULL, 0,
      "deferred embedding weight gradients are not modeled" },
    { "model.fp8_param", "true", NULL, R_CHANGES, NULL, NULL, 0, "fp8 parameters are not modeled (bf16)" },
    { "*.first_last_layers_bf16", "true", NULL, R_CHANGES, NULL, NULL, 0,
      "bf16 first and last layers are not modeled (every layer in one precision)" },
};

static const leaf *find_leaf(const reader *r, const char *path)
{
    for (size_t k = 0; k < r->n; k++)
        if (!strcmp(r->lv[k].path, path))
            return &r->lv[k];
    return NULL;
}

static bool when_holds(const reader *r, const leaf *l, const char *when)
{
    if (!when)
        return true;
    char path[PATH_LEN];
    const char *eq = strchr(when, '=');
    snprintf(path, sizeof path, "%.*s", (int)(eq - when), when);
    const leaf *o = find_leaf(r, path);
    if (!o)
        return false;
    if (eq[1] == '=')
        return l->kind == LV_SCALAR && o->kind == LV_SCALAR && !strcmp(l->text, o->text);
    return fnmatch(eq + 1, o->text, 0) == 0;
}

static const rule *find_rule(const reader *r, const leaf *l)
{
    for (size_t k = 0; k < sizeof rules / sizeof rules[0]; k++)
        /* the first character first: fnmatch for every rule and field of a
         * big file is most of its reading time */
        if ((rules[k].path[0] == '*' || rules[k].path[0] == l->path[0]) && !fnmatch(rules[k].path, l->path, 0) && !fnmatch(rules[k].value, l->text, 0) &&
            when_holds(r, l, rules[k].when))
            return &rules[k];
    return NULL;
}

/* The mixed_precision key from the fields under prefix ("mixed_precision"
 * or "model"): NULL with *why when no name of parsim's fits. */
static const char *precision_of(const reader *r, const char *prefix, const char **why)
{
    static const struct {
        const char *recipe, *name;
    } fp8[] = { { "delayed", "fp8-delayed" }, { "tensorwise", "fp8-cs" }, { "mxfp8", "mxfp8" },
                { "blockwise", "fp8-blockwise" }, { "null", "fp8" } };
    char p[PATH_LEN];
    const char *v[6];
    static const char *const field[6] = { "bf16", "fp16", "fp8", "fp8_recipe", "fp4", "fp4_recipe" };
    for (int k = 0; k < 6; k++) {
        snprintf(p, sizeof p, "%s.%s", prefix, field[k]);
        const leaf *l = find_leaf(r, p);
        v[k] = l ? l->text : "null";
    }
    *why = "";
    if (strcmp(v[4], "null") && strcmp(v[4], "false")) {
        if (!strcmp(v[5], "nvfp4") || !strcmp(v[5], "null"))
            return "nvfp4";
        *why = "this FP4 recipe is not modeled (nvfp4 is)";
        return NULL;
    }
    if (strcmp(v[2], "null") && strcmp(v[2], "false")) {
        for (size_t k = 0; k < sizeof fp8 / sizeof fp8[0]; k++)
            if (!strcmp(v[3], fp8[k].recipe))
                return fp8[k].name;
        *why = "this FP8 recipe is not modeled (delayed, tensorwise, mxfp8, blockwise are)";
        return NULL;
    }
    if (!strcmp(v[1], "true"))
        return "fp16";
    if (!strcmp(v[0], "true"))
        return "bf16";
    *why = "fp32 training is not modeled (simulated as bf16)";
    return NULL;
}

/* A mapped field, set on the cfg once all are judged. */
typedef struct item {
    const char *key;
    char *value;
    const leaf *l;
    int rank;
    size_t order;      /* the leaf's place, and its note's */
} item;

static int item_cmp(const void *a, const void *b)
{
    const item *x = a, *y = b;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* By key, then in the order of application. */
static int item_key_cmp(const void *a, const void *b)
{
    const item *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : item_cmp(a, b);
}

/* Marks in the notes each mapped field a later one sets again. */
static int note_superseded(reader *r, item *items, size_t n)
{
    qsort(items, n, sizeof *items, item_key_cmp);
    for (size_t k = 0; k + 1 < n; k++) {
        if (strcmp(items[k].key, items[k + 1].key))
            continue;
        size_t last = k + 1;
        while (last + 1 < n && !strcmp(items[last + 1].key, items[k].key))
            last++;
        bridge_field *f = &r->notes->f[items[k].order]; /* one note a leaf, in order */
        char detail[768];
        snprintf(detail, sizeof detail, "%s (superseded by %s, line %d)", f->detail, items[last].l->path,
                 items[last].l->line);
        char *d = strdup(detail);
        if (!d)
            return no_memory(r);
        free(f->detail);
        f->detail = d;
    }
    qsort(items, n, sizeof *items, item_cmp);
    return SIM_OK;
}

/* The value of l in override syntax (malloc'ed). */
static char *override_value(const leaf *l)
{
    /* a plain scalar as it is, but not one override syntax would read as a
     * (list) */
    if (l->kind == LV_LIST || (l->kind == LV_SCALAR && !l->quoted && l->text[0] != '('))
        return strdup(l->text);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    put_quoted(f, l->text);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* Notes a verdict with "value: why" or a detail of its own. */
static int judge(reader *r, const leaf *l, bridge_verdict v, const char *why)
{
    char detail[512];
    if (v == BRIDGE_NOT_MODELED)
        snprintf(detail, sizeof detail, "%.200s: %s", l->text, why);
    else
        snprintf(detail, sizeof detail, "%s", why);
    return note_add(r->notes, l->path, l->line, v, detail, r->err);
}

/* A mapped field; noted as mapped unless the caller notes it otherwise. */
static int push_item(reader *r, item *items, size_t *n, const char *key, char *value, const leaf *l, int rank,
                     bool note)
{
    if (!value)
        return no_memory(r);
    char detail[512];
    snprintf(detail, sizeof detail, "%s=%.200s", key, value);
    items[*n] = (item){ key, value, l, rank, (size_t)(l - r->lv) };
    (*n)++;
    return note ? note_add(r->notes, l->path, l->line, BRIDGE_MAPPED, detail, r->err) : SIM_OK;
}

/* Judges every leaf, then sets the mapped ones through the sink in rank
 * order. */
static int apply_leaves(reader *r)
{
    item *items = calloc(r->n + 2, sizeof *items);
    if (!items)
        return no_memory(r);
    size_t ni = 0;
    /* the precision's source: the section, else the model's own fields */
    bool have_mp = false, mp_scalar = false;
    for (size_t k = 0; k < r->n; k++) {
        have_mp |= !strncmp(r->lv[k].path, "mixed_precision.", 16);
        mp_scalar |= !strcmp(r->lv[k].path, "mixed_precision") && r->lv[k].kind == LV_SCALAR;
    }
    const char *prec_src = mp_scalar ? NULL : have_mp ? "mixed_precision" : "model";
    const char *prec_why = "";
    const char *prec = prec_src ? precision_of(r, prec_src, &prec_why) : NULL;
    bool prec_set = false;
    bool model_prec = false;
    for (size_t k = 0; k < r->n && prec_src && !have_mp; k++)
        model_prec |= !strcmp(r->lv[k].path, "model.bf16") || !strcmp(r->lv[k].path, "model.fp16") ||
                      !strcmp(r->lv[k].path, "model.fp8");
    if (prec_src && !have_mp && !model_prec)
        prec_src = NULL; /* no precision fields at all: parsim's default */

    int rc = SIM_OK;
    for (size_t k = 0; k < r->n && rc == SIM_OK; k++) {
        const leaf *l = &r->lv[k];
        const rule *ru = find_rule(r, l);
        char section[PATH_LEN];
        snprintf(section, sizeof section, "%.*s", (int)strcspn(l->path, "."), l->path);
        rule dflt = { NULL, NULL, NULL, R_IGNORE, NULL, NULL, 0,
                      is_mapped_section(section) ? "not used by parsim" : "a section parsim does not read" };
        if (!ru && is_mapped_section(section) && r->sink->key_known(l->path))
            dflt = (rule){ NULL, NULL, NULL, R_MAP, NULL, NULL, RANK_OWN, "" };
        if (!ru)
            ru = &dflt;
        switch (ru->act) {
        case R_IGNORE:
            rc = judge(r, l, BRIDGE_IGNORED, ru->why);
            break;
        case R_CHANGES:
            rc = judge(r, l, BRIDGE_NOT_MODELED, ru->why);
            break;
        case R_PRECISION:
            if (!prec_src || strncmp(l->path, prec_src, strlen(prec_src)) || l->path[strlen(prec_src)] != '.')
                rc = judge(r, l, BRIDGE_IGNORED, "the mixed_precision section names the precision");
            else if (!prec)
                rc = judge(r, l, BRIDGE_NOT_MODELED, prec_why);
            else if (prec_set)
                rc = judge(r, l, BRIDGE_MAPPED, "mixed_precision (with the fields beside it)");
            else {
                rc = push_item(r, items, &ni, "mixed_precision", strdup(prec), l, RANK_OWN, true);
                prec_set = true;
            }
            break;
        case R_PEFT: {
            const char *dot = strrchr(l->text, '.');
            const char *cls = dot ? dot + 1 : l->text;
            if (!strcmp(cls, "LoRA") || !strcmp(cls, "DoRA"))
                rc = push_item(r, items, &ni, "peft.scheme", strdup("lora"), l, RANK_OWN, !strcmp(cls, "LoRA"));
            if (rc == SIM_OK && strcmp(cls, "LoRA"))
                rc = judge(r, l, BRIDGE_NOT_MODELED,
                           strcmp(cls, "DoRA") ? "this PEFT method is not modeled: simulated as full training"
                                               : "DoRA is simulated as LoRA (its magnitude vectors are not modeled)");
            break;
        }
        case R_MAP: {
            const char *key = ru->to ? ru->to : l->path;
            if (l->kind == LV_NULL) {
                char why[PATH_LEN + 32];
                snprintf(why, sizeof why, "the default of %s", key);
                rc = judge(r, l, BRIDGE_DEFAULT, why);
            } else if (l->kind == LV_COMPLEX) {
                char why[PATH_LEN + 48];
                snprintf(why, sizeof why, "not readable as %s", key);
                rc = judge(r, l, BRIDGE_NOT_MODELED, why);
            } else
                rc = push_item(r, items, &ni, key, ru->as ? strdup(ru->as) : override_value(l), l, ru->rank, true);
            break;
        }
        }
    }
    if (rc == SIM_OK)
        rc = note_superseded(r, items, ni);
    for (size_t k = 0; k < ni && rc == SIM_OK; k++)
        rc = r->sink->set(r->sink->ctx, items[k].key, items[k].value, r->file, items[k].l->line, r->err);
    for (size_t k = 0; k < ni; k++)
        free(items[k].value);
    free(items);
    return rc;
}

/* ------------------------------------------------------------------ files */

static int line_of_offset(const unsigned char *buf, size_t len, size_t off)
{
    int line = 1;
    for (size_t k = 0; k < off && k < len; k++)
        line += buf[k] == '\n';
    return line;
}

/* libyaml's error as file:line: what. */
static int yaml_fail(const yaml_parser_t *p, const char *path, const unsigned char *buf, size_t len, sim_err *err)
{
    if (p->error == YAML_MEMORY_ERROR)
        return sim_err_set(err, SIM_ENOMEM, "out of memory reading %s", path);
    int line = p->error == YAML_READER_ERROR ? line_of_offset(buf, len, p->problem_offset)
                                             : (int)p->problem_mark.line + 1;
    const char *what = p->problem ? p->problem : "malformed";
    if (p->error == YAML_READER_ERROR)
        return sim_err_set_at(err, SIM_EINVAL, path, line, NULL, "not YAML text: %s (byte %zu; UTF-8 expected)", what,
                              p->problem_offset);
    return sim_err_set_at(err, SIM_EINVAL, path, line, NULL, "YAML syntax error: %s%s%s", p->context ? p->context : "",
                          p->context ? ": " : "", what);
}

/* The event pass: syntax, one document, nodes and nesting within bounds. */
static int check_events(const char *path, const unsigned char *buf, size_t len, sim_err *err)
{
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p))
        return sim_err_set(err, SIM_ENOMEM, "out of memory reading %s", path);
    yaml_parser_set_input_string(&p, buf, len);
    int rc = SIM_OK, depth = 0, docs = 0;
    long long events = 0;
    for (bool done = false; !done && rc == SIM_OK;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) {
            rc = yaml_fail(&p, path, buf, len, err);
            break;
        }
        int line = (int)ev.start_mark.line + 1;
        switch (ev.type) {
        case YAML_MAPPING_START_EVENT:
        case YAML_SEQUENCE_START_EVENT:
            if (++depth > LIMIT_YAML_DEPTH)
                rc = sim_err_set_at(err, SIM_EINVAL, path, line, NULL, "nested deeper than %d (LIMIT_YAML_DEPTH)",
                                    LIMIT_YAML_DEPTH);
            break;
        case YAML_MAPPING_END_EVENT:
        case YAML_SEQUENCE_END_EVENT:
            depth--;
            break;
        case YAML_DOCUMENT_START_EVENT:
            if (++docs > 1)
                rc = sim_err_set_at(err, SIM_EINVAL, path, line, NULL,
                                    "a second YAML document (a Megatron Bridge config is one)");
            break;
        case YAML_STREAM_END_EVENT:
            done = true;
            break;
        default:
            break;
        }
        if (rc == SIM_OK && ++events > LIMIT_YAML_NODES)
            rc = sim_err_set_at(err, SIM_EINVAL, path, line, NULL, "more than %lld YAML nodes (LIMIT_YAML_NODES)",
                                LIMIT_YAML_NODES);
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    return rc;
}

/* The whole file, at most LIMIT_YAML_BYTES. */
static int read_all(const char *path, unsigned char **buf, size_t *len, sim_err *err)
{
    FILE *f = NULL;
    int rc = infile_open(path, &f, err);
    if (rc)
        return rc;
    size_t cap = 1 << 16, n = 0;
    unsigned char *b = malloc(cap);
    while (b) {
        if (n == cap) {
            if (cap > (size_t)LIMIT_YAML_BYTES)
                break;
            unsigned char *nb = realloc(b, 2 * cap);
            if (!nb) {
                free(b);
                b = NULL;
                break;
            }
            b = nb;
            cap *= 2;
        }
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    bool failed = b && ferror(f);
    fclose(f);
    if (!b)
        return sim_err_set(err, SIM_ENOMEM, "out of memory reading %s", path);
    if (failed) {
        free(b);
        return sim_err_set_at(err, SIM_EIO, path, 0, NULL, "cannot read");
    }
    if (n > (size_t)LIMIT_YAML_BYTES) {
        free(b);
        return sim_err_set_at(err, SIM_EINVAL, path, 0, NULL, "larger than %lld bytes (LIMIT_YAML_BYTES)",
                              LIMIT_YAML_BYTES);
    }
    *buf = b;
    *len = n;
    return SIM_OK;
}

int bridge_yaml_load(const char *path, const bridge_sink *sink, bridge_notes *notes, sim_err *err)
{
    snprintf(notes->file, sizeof notes->file, "%s", path);
    unsigned char *buf = NULL;
    size_t len = 0;
    int rc = read_all(path, &buf, &len, err);
    if (rc == SIM_OK)
        rc = check_events(path, buf, len, err);
    if (rc) {
        free(buf);
        return rc;
    }
    yaml_parser_t p;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&p)) {
        free(buf);
        return sim_err_set(err, SIM_ENOMEM, "out of memory reading %s", path);
    }
    yaml_parser_set_input_string(&p, buf, len);
    if (!yaml_parser_load(&p, &doc)) {
        rc = yaml_fail(&p, path, buf, len, err);
        yaml_parser_delete(&p);
        free(buf);
        return rc;
    }
    reader r = { .file = path, .doc = &doc, .notes = notes, .sink = sink, .err = err };
    const yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root)
        rc = sim_err_set_at(err, SIM_EINVAL, path, 1, NULL, "empty: a Megatron Bridge config is a mapping of sections");
    else if (root->type != YAML_MAPPING_NODE)
        rc = sim_err_set_at(err, SIM_EINVAL, path, node_line(root), NULL,
                            "expected a mapping of sections (model, train, ...), got %s",
                            root->type == YAML_SCALAR_NODE ? "a scalar" : "a list");
    else
        rc = walk_fields(&r, root, "", 0, false);
    if (rc == SIM_OK)
        rc = apply_leaves(&r);
    for (size_t k = 0; k < r.n; k++) {
        free(r.lv[k].path);
        free(r.lv[k].text);
    }
    free(r.lv);
    yaml_document_delete(&doc);
    yaml_parser_delete(&p);
    free(buf);
    return rc;
}
