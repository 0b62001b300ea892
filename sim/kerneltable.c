#include "kerneltable.h"

#include <libconfig.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bounds.h"
#include "infile.h"
#include "lookup.h"
#include "units.h"

static const char *const prec_names[KT_PRECISIONS] = { "bf16", "fp8_tensor", "fp8_block", "mxfp8", "nvfp4" };
static const char *const family_names[KT_FAMILIES] = { "cudnn", "fa2", "fa3", "fa4" };
static const char *const flex_names[KT_FLEX_BACKENDS] = { "deepep", "hybridep" };

const char *kerneltable_family_name(kt_family f)
{
    return f >= 0 && f < KT_FAMILIES ? family_names[f] : "?";
}

/* What a reader needs to name the place of an error. */
typedef struct rd {
    const char *path;
    sim_err *err;
} rd;

__attribute__((format(printf, 4, 5))) static int fail(const rd *r, const config_setting_t *s, const char *key,
                                                      const char *fmt, ...)
{
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return sim_err_set_at(r->err, SIM_EINVAL, r->path, s ? (int)config_setting_source_line(s) : 0, key, "%s",
                          msg);
}

/* The key path of an entry's member, e.g. kernels.gemm.bf16[2].tflops. */
static void member_key(char *buf, size_t len, const char *list, int i, const char *name)
{
    if (i >= 0)
        snprintf(buf, len, "kernels.%s[%d].%s", list, i, name);
    else
        snprintf(buf, len, list[0] ? "kernels.%s.%s" : "kernels%s.%s", list, name);
}

/* A finite number member (int or float) in [lo, hi]. */
static int get_num(const rd *r, const config_setting_t *item, const char *list, int i, const char *name, double lo,
                   double hi, bool lo_open, double *out)
{
    char key[160];
    member_key(key, sizeof key, list, i, name);
    const config_setting_t *s = config_setting_get_member(item, name);
    if (!s)
        return fail(r, item, key, "required number missing");
    int type = config_setting_type(s);
    if (type == CONFIG_TYPE_INT || type == CONFIG_TYPE_INT64)
        *out = (double)config_setting_get_int64(s);
    else if (type == CONFIG_TYPE_FLOAT)
        *out = config_setting_get_float(s);
    else
        return fail(r, s, key, "must be a number");
    if (!isfinite(*out) || *out < lo || (lo_open && *out <= lo) || *out > hi) {
        return fail(r, s, key, "out of range (must be in %s%g, %g])", lo_open ? "(" : "[", lo, hi);
    }
    return SIM_OK;
}

static int get_bool(const rd *r, const config_setting_t *item, const char *list, int i, const char *name,
                    bool *out)
{
    char key[160];
    member_key(key, sizeof key, list, i, name);
    const config_setting_t *s = config_setting_get_member(item, name);
    if (!s)
        return fail(r, item, key, "required true/false missing (decide whether the figure needs the "
                                  "clock derate)");
    if (config_setting_type(s) != CONFIG_TYPE_BOOL)
        return fail(r, s, key, "must be true or false");
    *out = config_setting_get_bool(s) != 0;
    return SIM_OK;
}

/* A string member that must be one of names[0..n); *out its index. */
static int get_name(const rd *r, const config_setting_t *item, const char *list, int i, const char *name,
                    const char *const *names, int n, int *out)
{
    char key[160];
    member_key(key, sizeof key, list, i, name);
    const config_setting_t *s = config_setting_get_member(item, name);
    if (!s)
        return fail(r, item, key, "required name missing");
    const char *v = config_setting_get_string(s);
    if (!v)
        return fail(r, s, key, "must be a string");
    for (int j = 0; j < n; j++)
        if (strcmp(v, names[j]) == 0) {
            *out = j;
            return SIM_OK;
        }
    return fail(r, s, key, "unknown name \"%s\"", v);
}

/* Every figure names where it comes from. */
static int need_src(const rd *r, const config_setting_t *item, const char *list, int i)
{
    char key[160];
    member_key(key, sizeof key, list, i, "src");
    const config_setting_t *s = config_setting_get_member(item, "src");
    const char *v = s ? config_setting_get_string(s) : NULL;
    if (!v || !v[0])
        return fail(r, s ? s : item, key, "every figure needs its source (a non-empty string)");
    return SIM_OK;
}

/* A list of entries `name` in group grp, if present: its length in *count
 * (at most max), its key path without and with the "kernels." prefix. */
static int open_list(const rd *r, const config_setting_t *grp, const char *prefix, const char *name, int max,
                     const config_setting_t **list, int *count, char *lname, char *key_l)
{
    *list = config_setting_get_member(grp, name);
    *count = 0;
    if (!*list)
        return SIM_OK;
    snprintf(lname, 64, "%s.%s", prefix, name);
    snprintf(key_l, 80, "kernels.%s", lname);
    if (!config_setting_is_list(*list))
        return fail(r, *list, key_l, "must be a list of ( { ... } ) entries");
    *count = config_setting_length(*list);
    if (*count > max)
        return fail(r, *list, key_l, "more entries than parsim keeps (%d)", max);
    return SIM_OK;
}

static int read_gemms(const rd *r, const config_setting_t *grp, const char *gname, bool grouped, double clock,
                      kernel_table *t)
{
    if (!grp)
        return SIM_OK;
    for (int p = 0; p < KT_PRECISIONS; p++) {
        const config_setting_t *list;
        char lname[64], key_l[80];
        int count, rc0 = open_list(r, grp, gname, prec_names[p], KT_MAX_GEMM, &list, &count, lname, key_l);
        if (rc0)
            return rc0;
        for (int i = 0; i < count; i++) {
            const config_setting_t *it = config_setting_get_elem(list, (unsigned)i);
            kt_gemm g = { .groups = 1 };
            double tf = 0;
            bool derate = false;
            int rc = config_setting_is_group(it) ? SIM_OK : fail(r, it, key_l, "entries are groups");
            if (!rc && grouped)
                rc = get_num(r, it, lname, i, "groups", 1, (double)LIMIT_HEADS, false, &g.groups);
            if (!rc)
                rc = get_num(r, it, lname, i, "m", 1, 1e9, false, &g.m);
            if (!rc)
                rc = get_num(r, it, lname, i, "n", 1, 1e9, false, &g.n);
            if (!rc)
                rc = get_num(r, it, lname, i, "k", 1, 1e9, false, &g.k);
            if (!rc)
                rc = get_num(r, it, lname, i, "tflops", 0, LIMIT_TFLOPS, true, &tf);
            if (!rc)
                rc = get_bool(r, it, lname, i, "derate", &derate);
            if (!rc)
                rc = need_src(r, it, lname, i);
            if (!rc && config_setting_get_member(it, "best_shape"))
                rc = get_bool(r, it, lname, i, "best_shape", &g.best_shape);
            if (rc)
                return rc;
            g.log_m = (float)log(g.m);
            g.log_n = (float)log(g.n);
            g.log_k = (float)log(g.k);
            g.log_groups = (float)log(g.groups);
            g.flops_per_s = tf * TFLOPS * (derate ? clock : 1.0);
            if (grouped)
                t->grouped[p][t->n_grouped[p]++] = g;
            else
                t->gemm[p][t->n_gemm[p]++] = g;
        }
    }
    return SIM_OK;
}

/* seq and tflops lists of one curve: same length, seq strictly increasing. */
static int read_curve_lists(const rd *r, const config_setting_t *it, int i, double scale, kt_curve *cv)
{
    char kseq[160], ktf[160];
    member_key(kseq, sizeof kseq, "attention.curves", i, "seq");
    member_key(ktf, sizeof ktf, "attention.curves", i, "tflops");
    const config_setting_t *seq = config_setting_get_member(it, "seq");
    const config_setting_t *tf = config_setting_get_member(it, "tflops");
    if (!seq || !config_setting_is_array(seq) || config_setting_length(seq) < 1)
        return fail(r, seq ? seq : it, kseq, "required list of sequence lengths, e.g. [2048, 4096]");
    if (!tf || !config_setting_is_array(tf) || config_setting_length(tf) != config_setting_length(seq))
        return fail(r, tf ? tf : it, ktf, "required list of TFLOPS, one per seq entry");
    int n = config_setting_length(seq);
    if (n > KT_MAX_SEQ)
        return fail(r, seq, kseq, "more points than parsim keeps (12)");
    for (int j = 0; j < n; j++) {
        const config_setting_t *a = config_setting_get_elem(seq, (unsigned)j);
        const config_setting_t *b = config_setting_get_elem(tf, (unsigned)j);
        int ta = config_setting_type(a), tb = config_setting_type(b);
        bool na = ta == CONFIG_TYPE_INT || ta == CONFIG_TYPE_INT64 || ta == CONFIG_TYPE_FLOAT;
        bool nb = tb == CONFIG_TYPE_INT || tb == CONFIG_TYPE_INT64 || tb == CONFIG_TYPE_FLOAT;
        if (!na)
            return fail(r, a, kseq, "must be numbers");
        if (!nb)
            return fail(r, b, ktf, "must be numbers");
        double s = ta == CONFIG_TYPE_FLOAT ? config_setting_get_float(a) : (double)config_setting_get_int64(a);
        double f = tb == CONFIG_TYPE_FLOAT ? config_setting_get_float(b) : (double)config_setting_get_int64(b);
        if (!(s >= 1 && s <= (double)LIMIT_SEQ_TOKENS))
            return fail(r, a, kseq, "out of range (must be in [1, 16777216])");
        if (j > 0 && !(log2(s) > cv->log2_seq[j - 1]))
            return fail(r, a, kseq, "sequence lengths must increase strictly");
        if (!(f > 0 && f <= LIMIT_TFLOPS))
            return fail(r, b, ktf, "out of range (must be in (0, 1e+06])");
        cv->log2_seq[j] = log2(s);
        cv->flops_per_s[j] = f * TFLOPS * scale;
    }
    cv->n = n;
    return SIM_OK;
}

static int read_attention(const rd *r, const config_setting_t *a, double clock, kernel_table *t)
{
    if (!a)
        return SIM_OK;
    int fam;
    int rc = get_name(r, a, "attention", -1, "auto", family_names, KT_FAMILIES, &fam);
    if (rc)
        return rc;
    t->auto_family = (kt_family)fam;
    if ((rc = get_name(r, a, "attention", -1, "flash", family_names, KT_FAMILIES, &fam)))
        return rc;
    t->flash_family = (kt_family)fam;
    const config_setting_t *sinks = config_setting_get_member(a, "sinks");
    if (sinks) {
        if (!config_setting_is_array(sinks))
            return fail(r, sinks, "kernels.attention.sinks", "must be a list of family names");
        for (int j = 0; j < config_setting_length(sinks); j++) {
            const char *v = config_setting_get_string_elem(sinks, (unsigned)j);
            int k = 0;
            while (k < KT_FAMILIES && !(v && strcmp(v, family_names[k]) == 0))
                k++;
            if (k == KT_FAMILIES)
                return fail(r, config_setting_get_elem(sinks, (unsigned)j), "kernels.attention.sinks",
                            "unknown family \"%s\" (cudnn, fa2, fa3, fa4)", v ? v : "(not a string)");
            t->sinks[k] = true;
        }
    }
    const config_setting_t *list = config_setting_get_member(a, "curves");
    if (!list || !config_setting_is_list(list))
        return fail(r, list ? list : a, "kernels.attention.curves", "required list of ( { ... } ) curves");
    int count = config_setting_length(list);
    if (count > KT_MAX_CURVES)
        return fail(r, list, "kernels.attention.curves", "more curves than parsim keeps (48)");
    static const char *const passes[] = { "fwd", "bwd" };
    for (int i = 0; i < count; i++) {
        const config_setting_t *it = config_setting_get_elem(list, (unsigned)i);
        kt_curve *cv = &t->curves[i];
        int f = 0, pass = 0;
        bool derate = false;
        rc = config_setting_is_group(it) ? SIM_OK
                                         : fail(r, it, "kernels.attention.curves", "entries are groups");
        if (!rc)
            rc = get_name(r, it, "attention.curves", i, "family", family_names, KT_FAMILIES, &f);
        if (!rc)
            rc = get_name(r, it, "attention.curves", i, "pass", passes, 2, &pass);
        if (!rc)
            rc = get_bool(r, it, "attention.curves", i, "causal", &cv->causal);
        if (!rc)
            rc = get_num(r, it, "attention.curves", i, "window", 0, (double)LIMIT_SEQ_TOKENS, false, &cv->window);
        if (!rc)
            rc = get_num(r, it, "attention.curves", i, "head_dim", 1, (double)LIMIT_WIDTH, false, &cv->head_dim);
        if (!rc)
            rc = get_bool(r, it, "attention.curves", i, "derate", &derate);
        if (!rc)
            rc = need_src(r, it, "attention.curves", i);
        if (!rc)
            rc = read_curve_lists(r, it, i, derate ? clock : 1.0, cv);
        if (rc)
            return rc;
        cv->family = (kt_family)f;
        cv->backward = pass == 1;
        t->n_curves = i + 1;
    }
    /* a family the backends or sinks may run needs both passes */
    for (int f = 0; f < KT_FAMILIES; f++) {
        if (f != (int)t->auto_family && f != (int)t->flash_family && f != KT_CUDNN && !t->sinks[f])
            continue;
        bool pass[2] = { false, false };
        for (int i = 0; i < t->n_curves; i++)
            if (t->curves[i].family == (kt_family)f)
                pass[t->curves[i].backward] = true;
        if (!pass[0] || !pass[1])
            return sim_err_set_at(r->err, SIM_EINVAL, r->path, (int)config_setting_source_line(list),
                                  "kernels.attention.curves",
                                  "family %s (run by auto, flash, fused or sinks) needs a fwd and a bwd curve",
                                  family_names[f]);
    }
    return SIM_OK;
}

static int read_flex(const rd *r, const config_setting_t *fx, kernel_table *t)
{
    if (!fx)
        return SIM_OK;
    static const char *const scopes[] = { "nvlink", "network" };
    for (int b = 0; b < KT_FLEX_BACKENDS; b++) {
        const config_setting_t *list;
        char lname[64], key_l[80];
        int count, rc0 = open_list(r, fx, "flex", flex_names[b], KT_MAX_FLEX, &list, &count, lname, key_l);
        if (rc0)
            return rc0;
        for (int i = 0; i < count; i++) {
            const config_setting_t *it = config_setting_get_elem(list, (unsigned)i);
            kt_flex p;
            int scope = 0;
            int rc = config_setting_is_group(it) ? SIM_OK : fail(r, it, key_l, "entries are groups");
            if (!rc)
                rc = get_name(r, it, lname, i, "scope", scopes, 2, &scope);
            if (!rc)
                rc = get_num(r, it, lname, i, "ranks", 1, (double)LIMIT_GPUS, false, &p.ranks);
            if (!rc)
                rc = get_num(r, it, lname, i, "dispatch_gbytes_per_s", 0, LIMIT_BW_GBPS, true,
                             &p.dispatch_bytes_per_s);
            if (!rc)
                rc = get_num(r, it, lname, i, "combine_gbytes_per_s", 0, LIMIT_BW_GBPS, true,
                             &p.combine_bytes_per_s);
            p.sms = 0.0;
            if (!rc && config_setting_get_member(it, "sms"))
                rc = get_num(r, it, lname, i, "sms", 1, (double)LIMIT_SM_COUNT, false, &p.sms);
            if (!rc)
                rc = need_src(r, it, lname, i);
            if (rc)
                return rc;
            p.network = scope == 1;
            p.dispatch_bytes_per_s *= GB;
            p.combine_bytes_per_s *= GB;
            const kt_flex *prev = i > 0 ? &t->flex[b][i - 1] : NULL;
            bool same = prev && prev->network == p.network && prev->sms == p.sms;
            if (prev && (prev->network > p.network || (prev->network == p.network && prev->sms > p.sms) ||
                         (same && !(p.ranks > prev->ranks)))) {
                char key[160];
                member_key(key, sizeof key, lname, i, "ranks");
                return fail(r, it, key, "list the nvlink points, then the network points, each by strictly "
                                        "increasing ranks (by increasing sms first where they state it)");
            }
            t->flex[b][t->n_flex[b]++] = p;
        }
    }
    return SIM_OK;
}

int kerneltable_load(const char *path, kernel_table *out, sim_err *err)
{
    memset(out, 0, sizeof *out);
    config_t lc;
    int rc = infile_read_libconfig(&lc, path, err);
    if (rc != SIM_OK)
        return rc;
    rd r = { path, err };
    const config_setting_t *g = config_lookup(&lc, "kernels");
    if (!g || !config_setting_is_group(g))
        rc = sim_err_set_at(err, SIM_EINVAL, path, 0, "kernels", "no `kernels` group (see kernels/README.md)");
    double clock = 1.0;
    if (!rc && config_setting_get_member(g, "clock_fraction"))
        rc = get_num(&r, g, "", -1, "clock_fraction", 0, 1, true, &clock);
    if (!rc)
        rc = read_gemms(&r, config_setting_get_member(g, "gemm"), "gemm", false, clock, out);
    if (!rc)
        rc = read_gemms(&r, config_setting_get_member(g, "grouped_gemm"), "grouped_gemm", true, clock, out);
    if (!rc)
        rc = read_attention(&r, config_setting_get_member(g, "attention"), clock, out);
    if (!rc)
        rc = read_flex(&r, config_setting_get_member(g, "flex"), out);
    /* ssd = { efficiency = E; src = "..."; }: the Mamba-2 SSD scan's
     * share of the bf16 peak (kernels.md §5), as measured (no derate). */
    const config_setting_t *ssd = g ? config_setting_get_member(g, "ssd") : NULL;
    if (!rc && ssd)
        rc = config_setting_is_group(ssd) ? get_num(&r, ssd, "ssd", -1, "efficiency", 0, 1, true, &out->ssd_efficiency)
                                          : sim_err_set_at(err, SIM_EINVAL, path, config_setting_source_line(ssd),
                                                           "kernels.ssd", "must be a group { efficiency = E; src = \"...\"; }");
    config_destroy(&lc);
    if (rc != SIM_OK) {
        memset(out, 0, sizeof *out);
        return rc;
    }
    out->clock_fraction = clock;
    out->loaded = true;
    return SIM_OK;
}

kt_precision kerneltable_precision(precision_kind p)
{
    switch (p) {
    case PREC_BF16:
    case PREC_FP16:
        return KT_BF16;
    case PREC_FP8_DELAYED:
    case PREC_FP8_CS:
        return KT_FP8_TENSOR;
    case PREC_FP8_BLOCKWISE:
        return KT_FP8_BLOCK;
    case PREC_MXFP8:
        return KT_MXFP8;
    case PREC_NVFP4:
        return KT_NVFP4;
    }
    return KT_BF16;
}

/* The next wider format Transformer Engine would run instead. */
static kt_precision wider(kt_precision p)
{
    switch (p) {
    case KT_NVFP4:
        return KT_MXFP8;
    case KT_MXFP8:
        return KT_FP8_BLOCK;
    case KT_FP8_BLOCK:
        return KT_FP8_TENSOR;
    default:
        return KT_BF16;
    }
}

const kt_gemm *kerneltable_gemm(const kernel_table *t, kt_precision p, unsigned avail, double groups, double m,
                                double n, double k, kt_precision *used)
{
    if (!t->loaded || m <= 0 || n <= 0 || k <= 0 || groups <= 0)
        return NULL;
    const float q[4] = { (float)log(m), (float)log(n), (float)log(k), (float)log(groups) };
    for (;;) {
        *used = p;
        if (p != KT_BF16 && !(avail & (1u << p))) {
            p = wider(p);
            continue;
        }
        if (groups > 1 && t->n_grouped[p] > 0)
            return &t->grouped[p][lookup_nearest(t->grouped[p], (size_t)t->n_grouped[p], sizeof(kt_gemm), q, 4)];
        if (t->n_gemm[p] > 0)
            return &t->gemm[p][lookup_nearest(t->gemm[p], (size_t)t->n_gemm[p], sizeof(kt_gemm), q, 3)];
        if (p == KT_BF16)
            return NULL;
        p = wider(p);
    }
}

static bool has_curves(const kernel_table *t, kt_family f)
{
    for (int i = 0; i < t->n_curves; i++)
        if (t->curves[i].family == f)
            return true;
    return false;
}

kt_family kerneltable_family(const kernel_table *t, attention_backend_kind backend, bool sinks)
{
    kt_family f = backend == ATTN_FLASH ? t->flash_family : backend == ATTN_FUSED ? KT_CUDNN : t->auto_family;
    if (sinks && !t->sinks[f]) {
        if (t->sinks[t->auto_family])
            return t->auto_family;
        for (int k = 0; k < KT_FAMILIES; k++)
            if (t->sinks[k] && has_curves(t, (kt_family)k))
                return (kt_family)k;
    }
    return f;
}

double kerneltable_attention_rate(const kernel_table *t, kt_family family, bool backward, bool causal,
                                  double window, double head_dim, double seq)
{
    const kt_curve *best = NULL;
    double best_score = INFINITY;
    const double lw = window > 0 ? log2(window) : 0.0, ld = log2(head_dim > 0 ? head_dim : 128.0);
    for (int i = 0; i < t->n_curves; i++) {
        const kt_curve *cv = &t->curves[i];
        if (cv->family != family || cv->backward != backward)
            continue;
        /* full vs windowed outranks the mask, which outranks the sizes */
        double score = ((cv->window > 0) != (window > 0)) ? 1e6 : 0.0;
        score += cv->causal != causal ? 1e4 : 0.0;
        if (cv->window > 0 && window > 0)
            score += 100.0 * fabs(log2(cv->window) - lw);
        score += fabs(log2(cv->head_dim) - ld);
        if (score < best_score) {
            best_score = score;
            best = cv;
        }
    }
    if (!best)
        return 0.0;
    return lookup_curve(best->log2_seq, best->flops_per_s, (size_t)best->n, log2(seq > 1 ? seq : 1));
}

bool kerneltable_flex_rate(const kernel_table *t, kt_flex_backend backend, bool network, double ranks,
                           double sms, double *dispatch, double *combine)
{
    double xs[KT_MAX_FLEX], ds[KT_MAX_FLEX], cs[KT_MAX_FLEX];
    size_t n = 0;
    /* one curve: the points of the published SM count nearest sms in log
     * space (the lower on a tie), or of the largest without sms */
    double pick = 0.0, best = INFINITY;
    for (int i = 0; i < t->n_flex[backend]; i++) {
        const kt_flex *p = &t->flex[backend][i];
        if (p->network != network || !(p->sms > 0))
            continue;
        double d = sms > 0 ? fabs(log2(p->sms / sms)) : -p->sms;
        if (d < best) {
            best = d;
            pick = p->sms;
        }
    }
    for (int i = 0; i < t->n_flex[backend]; i++) {
        const kt_flex *p = &t->flex[backend][i];
        if (p->network != network || (pick > 0 && p->sms != pick))
            continue;
        xs[n] = log2(p->ranks);
        ds[n] = p->dispatch_bytes_per_s;
        cs[n++] = p->combine_bytes_per_s;
    }
    if (n == 0)
        return false;
    double x = log2(ranks > 1 ? ranks : 1);
    *dispatch = lookup_curve(xs, ds, n, x);
    *combine = lookup_curve(xs, cs, n, x);
    return true;
}
