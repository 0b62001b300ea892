/* frameworks: reading the framework-defaults file (rules in frameworks.h). */
#include "frameworks.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "csv.h"

static const char *conv_names[FC_COUNT] = {
    "megatron", "nemo-full-attention", "sc21-hardware", "hardware", "unknown",
};

const char *flop_conv_name(flop_conv f) { return (unsigned)f < FC_COUNT ? conv_names[f] : "?"; }

#ifndef PARSIM_DEFAULT_DATA_DIR
#define PARSIM_DEFAULT_DATA_DIR "."
#endif

enum {
    C_PREFIX, C_MODEL, C_NAME, C_FAMILY, C_SP, C_DIST, C_RECOMPUTE, C_PRECISION, C_OVERLAP_DP,
    C_TP_OVERLAP, C_ETP1, C_DISPATCHER, C_CONV, C_CONV_WHY, C_ATTN, C_ATTN_WHY, C_SPLIT,
    C_LORA, C_LORA_ASSUMED, C_VOCAB, C_ASSUMED, C_FLAGGED, C_COUNT
};

static const char *const vfw_columns[C_COUNT] = {
    "prefix", "model", "name", "family", "sp_when_tp", "distributed_optimizer", "recompute",
    "precision", "overlap_dp", "tp_comm_overlap", "moe_etp1", "moe_dispatcher", "flop_convention",
    "flop_convention_why", "attention_backend", "attention_why", "split_counts_embedding",
    "lora_target_modules", "lora_assumed", "vocab_size", "assumed", "flops_flagged",
};

static const char *const family_names[VFW_COUNT] = { "bridge", "nemo", "megatron-lm", "deepspeed",
                                                     "mcore" };

/* The config key a cell's value must be valid for, or NULL. */
static const char *const cell_keys[C_COUNT] = {
    [C_RECOMPUTE] = "model.recompute_granularity", [C_PRECISION] = "mixed_precision",
    [C_DISPATCHER] = "model.moe_token_dispatcher_type", [C_ATTN] = "model.attention_backend",
    [C_LORA] = "peft.target_modules", [C_VOCAB] = "model.vocab_size",
};

/* Cells a model exception may set. */
static const bool rule_cell[C_COUNT] = {
    [C_MODEL] = true, [C_FAMILY] = true, [C_DISPATCHER] = true, [C_VOCAB] = true,
    [C_ASSUMED] = true, [C_FLAGGED] = true,
};

const char *vfw_default_path(void)
{
    return PARSIM_DEFAULT_DATA_DIR "/bench/validation/frameworks.csv";
}

void vfw_free(vfw_table *t)
{
    free(t->fw);
    free(t->rules);
    memset(t, 0, sizeof *t);
}

typedef struct vfw_reader {
    const char *path;
    const csv_table *t;
    int col[C_COUNT];
    size_t r;
    sim_err *err;
} vfw_reader;

static const char *cell(const vfw_reader *rd, int c)
{
    return csv_cell(rd->t, rd->r, rd->col[c]);
}

static int bad(const vfw_reader *rd, int c, const char *rule)
{
    return sim_err_set_at(rd->err, SIM_EINVAL, rd->path, rd->t->line[rd->r], vfw_columns[c],
                          "%s '%s': %s", vfw_columns[c], cell(rd, c), rule);
}

static int text(const vfw_reader *rd, int c, char *dst, size_t len, bool required)
{
    const char *s = cell(rd, c);
    if (strlen(s) >= len)
        return bad(rd, c, "too long");
    if (required && !s[0])
        return bad(rd, c, "required for a framework");
    /* a value of a config key: what that key accepts */
    if (s[0] && cell_keys[c]) {
        char kv[320];
        snprintf(kv, sizeof kv, "%s=%s", cell_keys[c], s);
        sim_err inner;
        sim_err_clear(&inner);
        if (cfg_check_setting(kv, &inner) != SIM_OK) {
            char why[sizeof inner.msg + 64];
            snprintf(why, sizeof why, "not a value of %s (%s)", cell_keys[c], inner.msg);
            return bad(rd, c, why);
        }
    }
    snprintf(dst, len, "%s", s);
    return SIM_OK;
}

static int boolean(const vfw_reader *rd, int c, bool *out)
{
    const char *s = cell(rd, c);
    if (!strcmp(s, "true") || !strcmp(s, "false")) {
        *out = !strcmp(s, "true");
        return SIM_OK;
    }
    return bad(rd, c, "must be true or false");
}

/* family: one name (framework) or '|'-separated names (exception). */
static int families(const vfw_reader *rd, bool many, unsigned *mask)
{
    const char *s = cell(rd, C_FAMILY);
    *mask = 0;
    while (*s) {
        size_t n = strcspn(s, "|");
        int f = 0;
        while (f < VFW_COUNT && (strlen(family_names[f]) != n || strncmp(family_names[f], s, n)))
            f++;
        if (f == VFW_COUNT)
            return bad(rd, C_FAMILY, "families are bridge, nemo, megatron-lm, deepspeed, mcore");
        *mask |= 1u << f;
        s += n + (s[n] == '|');
    }
    if (!many && (*mask == 0 || (*mask & (*mask - 1))))
        return bad(rd, C_FAMILY, "a framework has one family");
    return SIM_OK;
}

static int read_framework(const vfw_reader *rd, vframework *fw)
{
    fw->line = rd->t->line[rd->r];
    unsigned mask;
    int rc = text(rd, C_PREFIX, fw->prefix, sizeof fw->prefix, true);
    rc = rc ? rc : text(rd, C_NAME, fw->name, sizeof fw->name, true);
    rc = rc ? rc : families(rd, false, &mask);
    for (int f = 0; rc == SIM_OK && f < VFW_COUNT; f++)
        if (mask == 1u << f)
            fw->family = (vfw_family)f;
    rc = rc ? rc : boolean(rd, C_SP, &fw->sp_when_tp);
    rc = rc ? rc : boolean(rd, C_DIST, &fw->dist_opt);
    rc = rc ? rc : text(rd, C_RECOMPUTE, fw->recompute, sizeof fw->recompute, true);
    rc = rc ? rc : text(rd, C_PRECISION, fw->precision, sizeof fw->precision, true);
    rc = rc ? rc : boolean(rd, C_OVERLAP_DP, &fw->overlap_dp);
    rc = rc ? rc : boolean(rd, C_TP_OVERLAP, &fw->tp_comm_overlap);
    rc = rc ? rc : boolean(rd, C_ETP1, &fw->moe_etp1);
    rc = rc ? rc : text(rd, C_DISPATCHER, fw->moe_dispatcher, sizeof fw->moe_dispatcher, false);
    rc = rc ? rc : text(rd, C_CONV_WHY, fw->infer_why, sizeof fw->infer_why, false);
    rc = rc ? rc : text(rd, C_ATTN, fw->attention_backend, sizeof fw->attention_backend, false);
    rc = rc ? rc : text(rd, C_ATTN_WHY, fw->attention_why, sizeof fw->attention_why, false);
    rc = rc ? rc : boolean(rd, C_SPLIT, &fw->split_counts_embedding);
    rc = rc ? rc : text(rd, C_LORA, fw->lora_target_modules, sizeof fw->lora_target_modules, false);
    rc = rc ? rc : text(rd, C_LORA_ASSUMED, fw->lora_assumed, sizeof fw->lora_assumed, true);
    if (rc)
        return rc;
    fw->infer = FC_COUNT;
    for (int k = 0; k < FC_COUNT; k++)
        if (!strcmp(cell(rd, C_CONV), flop_conv_name((flop_conv)k)))
            fw->infer = k;
    if (fw->infer == FC_COUNT)
        return bad(rd, C_CONV, "not a flop_convention name (megatron, nemo-full-attention, "
                               "sc21-hardware, hardware, unknown)");
    if (fw->infer != FC_UNKNOWN && !fw->infer_why[0])
        return bad(rd, C_CONV_WHY, "an inferred convention says why");
    for (int c = 0; c < C_COUNT; c++)
        if ((c == C_VOCAB || c == C_ASSUMED || c == C_FLAGGED) && cell(rd, c)[0])
            return bad(rd, c, "only a model exception sets it");
    return SIM_OK;
}

static int read_rule(const vfw_reader *rd, vmodel_rule *m)
{
    m->line = rd->t->line[rd->r];
    for (int c = 0; c < C_COUNT; c++)
        if (!rule_cell[c] && c != C_PREFIX && cell(rd, c)[0])
            return bad(rd, c, "a model exception sets only family, moe_dispatcher, vocab_size, "
                              "assumed and flops_flagged");
    char vocab[32];
    int rc = text(rd, C_MODEL, m->model, sizeof m->model, true);
    rc = rc ? rc : families(rd, true, &m->families);
    rc = rc ? rc : text(rd, C_DISPATCHER, m->moe_dispatcher, sizeof m->moe_dispatcher, false);
    rc = rc ? rc : text(rd, C_VOCAB, vocab, sizeof vocab, false);
    rc = rc ? rc : text(rd, C_ASSUMED, m->assumed, sizeof m->assumed, false);
    if (rc)
        return rc;
    if (vocab[0] && !csv_num_int(vocab, &m->vocab_size))
        return bad(rd, C_VOCAB, "not an integer");
    if (cell(rd, C_FLAGGED)[0] && (rc = boolean(rd, C_FLAGGED, &m->flops_flagged)) != SIM_OK)
        return rc;
    if (!m->moe_dispatcher[0] && !m->vocab_size && !m->flops_flagged)
        return bad(rd, C_MODEL, "a model exception sets moe_dispatcher, vocab_size or "
                                "flops_flagged");
    return SIM_OK;
}

static int read_table(const char *path, const csv_table *t, void *ctx, sim_err *err)
{
    vfw_table *out = ctx;
    vfw_reader rd = { .path = path, .t = t, .err = err };
    for (int c = 0; c < C_COUNT; c++)
        if ((rd.col[c] = csv_col(t, vfw_columns[c])) < 0)
            return sim_err_set_at(err, SIM_EINVAL, path, 1, NULL,
                                  "no column '%s' (frameworks file, sim/frameworks.h)",
                                  vfw_columns[c]);
    out->fw = calloc(t->nrows ? t->nrows : 1, sizeof *out->fw);
    out->rules = calloc(t->nrows ? t->nrows : 1, sizeof *out->rules);
    if (!out->fw || !out->rules)
        return sim_err_set(err, SIM_ENOMEM, "out of memory reading %s", path);
    bool fallback = false;
    for (rd.r = 0; rd.r < t->nrows; rd.r++) {
        bool is_rule = cell(&rd, C_MODEL)[0] != '\0';
        if (is_rule && cell(&rd, C_PREFIX)[0])
            return bad(&rd, C_PREFIX, "a row is a framework (prefix) or a model exception "
                                      "(model), not both");
        int rc = is_rule ? read_rule(&rd, &out->rules[out->n_rules++])
                         : read_framework(&rd, &out->fw[out->n_fw++]);
        if (rc)
            return rc;
        fallback = fallback || (!is_rule && !strcmp(out->fw[out->n_fw - 1].prefix, "*"));
    }
    if (!fallback)
        return sim_err_set_at(err, SIM_EINVAL, path, 1, "prefix",
                              "no fallback framework (a row with prefix *)");
    return SIM_OK;
}

int vfw_read(const char *path, vfw_table *out, sim_err *err)
{
    memset(out, 0, sizeof *out);
    snprintf(out->file, sizeof out->file, "%s", path);
    int rc = csv_read_convert(path, read_table, out, err);
    if (rc != SIM_OK)
        vfw_free(out);
    return rc;
}

const vframework *vfw_for_prefix(const vfw_table *t, const char *prefix)
{
    const vframework *fallback = NULL;
    for (size_t k = 0; k < t->n_fw; k++) {
        if (!strcmp(t->fw[k].prefix, "*")) {
            fallback = fallback ? fallback : &t->fw[k];
            continue;
        }
        if (!strncmp(prefix, t->fw[k].prefix, strlen(t->fw[k].prefix)))
            return &t->fw[k];
    }
    return fallback;
}

bool vfw_flops_flagged(const vfw_table *t, const char *model)
{
    for (size_t k = 0; t && k < t->n_rules; k++)
        if (t->rules[k].flops_flagged && !fnmatch(t->rules[k].model, model, 0))
            return true;
    return false;
}

const vmodel_rule *vfw_model_rule(const vfw_table *t, const vframework *fw, const char *model,
                                  bool want_dispatcher)
{
    for (size_t k = 0; k < t->n_rules; k++) {
        const vmodel_rule *m = &t->rules[k];
        if ((m->families && !(m->families & (1u << fw->family))) || fnmatch(m->model, model, 0))
            continue;
        if (want_dispatcher ? m->moe_dispatcher[0] != '\0' : m->vocab_size > 0)
            return m;
    }
    return NULL;
}
