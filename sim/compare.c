#include "compare.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frameworks.h"
#include "validate.h"

static const char *result_names[] = {
    "predicted_value", "ape_percent", "skip_reason", "assumed", "overrides", "index",
    "rank", "fits", "error", "mfu",
};
static const char *result_suffixes[] = {
    "_s", "_bytes", "_fraction", "_percent", "_per_gpu", "_hours", "_flops", "_tflops",
};
/* Result columns holding text: listed when they change, never "moved". */
static const char *text_results[] = { "skip_reason", "error", "assumed", "overrides" };

bool compare_is_result_column(const char *name)
{
    for (size_t k = 0; k < sizeof result_names / sizeof result_names[0]; k++)
        if (!strcmp(name, result_names[k]))
            return true;
    size_t n = strlen(name);
    for (size_t k = 0; k < sizeof result_suffixes / sizeof result_suffixes[0]; k++) {
        size_t m = strlen(result_suffixes[k]);
        if (n > m && !strcmp(name + n - m, result_suffixes[k]))
            return true;
    }
    return strncmp(name, "exposed_", 8) == 0;
}

static bool is_text_result(const char *name)
{
    for (size_t k = 0; k < sizeof text_results / sizeof text_results[0]; k++)
        if (!strcmp(name, text_results[k]))
            return true;
    return false;
}

/* A finite number, or false for an empty, non-numeric or non-finite cell
 * ("nan", "inf"): such a value where the other file has a number is a
 * change of status, never a quiet match. */
static bool num(const char *s, double *out)
{
    return csv_num_double(s, out);
}

/* ------------------------------------------------------------- keys */

typedef struct keyed {
    char *key;     /* key cells joined by \x1f, plus "\x1e<n>" for repeats */
    size_t row;
} keyed;

static int keyed_cmp(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    if (c)
        return c;
    return x->row < y->row ? -1 : x->row > y->row;
}

static void keyed_free(keyed *k, size_t n)
{
    if (!k)
        return;
    for (size_t i = 0; i < n; i++)
        free(k[i].key);
    free(k);
}

/* Builds the sorted keys of t over columns cols[0..nc) (indices into t). */
static int build_keys(const csv_table *t, const int *cols, int nc, keyed **out)
{
    keyed *k = calloc(t->nrows ? t->nrows : 1, sizeof *k);
    if (!k)
        return SIM_ENOMEM;
    for (size_t r = 0; r < t->nrows; r++) {
        size_t len = 16;
        for (int c = 0; c < nc; c++)
            len += strlen(csv_cell(t, r, cols[c])) + 1;
        k[r].row = r;
        k[r].key = malloc(len);
        if (!k[r].key) {
            keyed_free(k, r);
            return SIM_ENOMEM;
        }
        size_t n = 0;
        for (int c = 0; c < nc; c++)
            n += (size_t)snprintf(k[r].key + n, len - n, "%s%s", c ? "\x1f" : "",
                                  csv_cell(t, r, cols[c]));
    }
    qsort(k, t->nrows, sizeof *k, keyed_cmp);
    /* repeated keys: the m-th repeat (in file order) gets "\x1e<m>"; the
     * first of a run keeps its key, so the comparison below is stable */
    for (size_t i = 0; i < t->nrows;) {
        size_t j = i + 1;
        while (j < t->nrows && !strcmp(k[j].key, k[i].key))
            j++;
        for (size_t m = i + 1; m < j; m++) {
            size_t base = strlen(k[m].key);
            char *nk = realloc(k[m].key, base + 24);
            if (!nk) {
                keyed_free(k, t->nrows);
                return SIM_ENOMEM;
            }
            snprintf(nk + base, 24, "\x1e%zu", m - i);
            k[m].key = nk;
        }
        i = j;
    }
    qsort(k, t->nrows, sizeof *k, keyed_cmp);
    *out = k;
    return SIM_OK;
}

/* -------------------------------------------------------- per row */

typedef struct rowdiff {
    size_t old_row, new_row;
    double score;        /* max |change| percent; INFINITY for a status change */
    bool moved, status, text;
} rowdiff;

static int rowdiff_cmp(const void *a, const void *b)
{
    const rowdiff *x = a, *y = b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    return x->old_row < y->old_row ? -1 : x->old_row > y->old_row;
}

/* Relative change in percent; INFINITY from zero to nonzero. */
static double rel_change(double o, double n)
{
    if (o == n)
        return 0.0;
    if (o == 0.0)
        return INFINITY;
    return 100.0 * (n - o) / fabs(o);
}

typedef struct cmpctx {
    const csv_table *a, *b;      /* old, new */
    int ncmp;                    /* compared columns */
    int *cmp_a, *cmp_b;          /* their indices in a and b */
    bool *cmp_text;
    int nlabel;                  /* columns naming a row in the listing */
    int *label_a;
    const compare_opts *o;
} cmpctx;

static void diff_row(const cmpctx *x, rowdiff *d)
{
    d->score = 0.0;
    d->moved = d->status = d->text = false;
    for (int c = 0; c < x->ncmp; c++) {
        const char *so = csv_cell(x->a, d->old_row, x->cmp_a[c]);
        const char *sn = csv_cell(x->b, d->new_row, x->cmp_b[c]);
        if (x->cmp_text[c]) {
            if (strcmp(so, sn))
                d->text = true;
            continue;
        }
        double vo = 0.0, vn = 0.0;
        bool ho = num(so, &vo), hn = num(sn, &vn);
        if (ho != hn) {
            d->status = true;
            d->score = INFINITY;
            continue;
        }
        if (!ho) {
            if (strcmp(so, sn))
                d->text = true;
            continue;
        }
        double ch = fabs(rel_change(vo, vn));
        if (ch > d->score)
            d->score = ch;
    }
    d->moved = d->status || d->score > x->o->fail_above_pct;
}

static void print_label(FILE *out, const cmpctx *x, const csv_table *t, size_t row)
{
    for (int k = 0; k < x->nlabel; k++) {
        int c = x->label_a[k];
        /* label columns are indices into the old table; look the name up
         * in t for rows of the new one */
        int ct = t == x->a ? c : csv_col(t, x->a->header[c]);
        fprintf(out, "%s%s=%s", k ? " " : "", x->a->header[c], csv_cell(t, row, ct));
    }
    if (x->nlabel == 0)
        fprintf(out, "row %zu", row + 1);
}

static void print_row_changes(FILE *out, const cmpctx *x, const rowdiff *d)
{
    fputs("  ", out);
    print_label(out, x, x->a, d->old_row);
    fputc('\n', out);
    for (int c = 0; c < x->ncmp; c++) {
        const char *so = csv_cell(x->a, d->old_row, x->cmp_a[c]);
        const char *sn = csv_cell(x->b, d->new_row, x->cmp_b[c]);
        if (!strcmp(so, sn))
            continue;
        const char *name = x->a->header[x->cmp_a[c]];
        double vo = 0.0, vn = 0.0;
        bool ho = num(so, &vo), hn = num(sn, &vn);
        if (!x->cmp_text[c] && ho && hn) {
            double ch = rel_change(vo, vn);
            if (isinf(ch))
                fprintf(out, "      %-24s %14.6g -> %-14.6g (from zero)\n", name, vo, vn);
            else
                fprintf(out, "      %-24s %14.6g -> %-14.6g %+9.3f%%\n", name, vo, vn, ch);
        } else
            fprintf(out, "      %-24s \"%.60s\" -> \"%.60s\"%s\n", name, so[0] ? so : "(empty)",
                    sn[0] ? sn : "(empty)",
                    x->cmp_text[c] || ho == hn ? ""
                    : ho                       ? " (no longer a finite number)"
                                               : " (now a finite number)");
    }
}

/* The rows of t in one file only (at most o->max_listed of them). */
static void print_only(FILE *out, const cmpctx *x, const csv_table *t, const char *which,
                       const size_t *rows, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        if (x->o->max_listed && k >= x->o->max_listed) {
            fprintf(out, "  ... and %zu more only in %s\n", n - k, which);
            break;
        }
        fprintf(out, k == 0 ? "\nonly in %s\n  " : "  ", which);
        print_label(out, x, t, rows[k]);
        fputc('\n', out);
    }
}

/* ------------------------------------------- validate error change */

static void error_change(FILE *out, const csv_table *a, const csv_table *b, const size_t *pair_a,
                         const size_t *pair_b, size_t npairs)
{
    int ape_a = csv_col(a, "ape_percent"), ape_b = csv_col(b, "ape_percent");
    if (ape_a < 0 || ape_b < 0)
        return;
    vcase *cases = calloc(npairs ? npairs : 1, sizeof *cases);
    double *ea = malloc((npairs ? npairs : 1) * sizeof *ea);
    double *eb = malloc((npairs ? npairs : 1) * sizeof *eb);
    double *oa = malloc((npairs ? npairs : 1) * sizeof *oa);
    double *ob = malloc((npairs ? npairs : 1) * sizeof *ob);
    bool *both = calloc(npairs ? npairs : 1, sizeof *both);
    if (!cases || !ea || !eb || !oa || !ob || !both)
        goto done;
    /* the models whose TFLOP/s rows are reported apart (family
     * tflops-flagged) are data of the frameworks file */
    vfw_table fws;
    sim_err ferr;
    bool have_fws = vfw_read(vfw_default_path(), &fws, &ferr) == SIM_OK;
    size_t pa = 0, pb = 0;
    for (size_t i = 0; i < npairs; i++) {
        validate_case_labels(b, pair_b[i], have_fws ? &fws : NULL, &cases[i]);
        double x, y;
        bool hx = num(csv_cell(a, pair_a[i], ape_a), &x);
        bool hy = num(csv_cell(b, pair_b[i], ape_b), &y);
        pa += hx;
        pb += hy;
        both[i] = hx && hy;
        oa[i] = hx ? x : NAN;
        ob[i] = hy ? y : NAN;
    }
    if (have_fws)
        vfw_free(&fws);
    else {
        char why[700];
        sim_err_format(&ferr, why, sizeof why);
        fprintf(out, "\n(family tflops-flagged by task only: %s)", why);
    }
    fprintf(out, "\nerror change (APE %%): %zu rows predicted in OLD, %zu in NEW; statistics over "
                 "the rows predicted in both\n",
            pa, pb);
    fprintf(out, "%-28s %6s %17s %17s %17s\n", "group", "rows", "median old -> new",
            "p90 old -> new", "mean old -> new");
    vgroup groups[128];
    size_t ng = validate_groups(cases, npairs, groups, sizeof groups / sizeof groups[0]);
    for (size_t g = 0; g < ng; g++) {
        size_t n = 0;
        for (size_t i = 0; i < npairs; i++) {
            if (!both[i] || !validate_in_group(&groups[g], &cases[i]))
                continue;
            ea[n] = oa[i];
            eb[n] = ob[i];
            n++;
        }
        if (n == 0)
            continue;
        vstats sa, sb;
        validate_stats(ea, n, &sa);
        validate_stats(eb, n, &sb);
        fprintf(out, "%-28s %6zu %7.1f -> %-7.1f %7.1f -> %-7.1f %7.1f -> %-7.1f\n",
                groups[g].label, n, sa.median, sb.median, sa.p90, sb.p90, sa.mean, sb.mean);
    }
done:
    free(cases);
    free(ea);
    free(eb);
    free(oa);
    free(ob);
    free(both);
}

/* ------------------------------------------------------------ main */

typedef struct pairidx {
    size_t a, b;   /* old row, new row */
} pairidx;

static int pairidx_cmp(const void *x, const void *y)
{
    const pairidx *p = x, *q = y;
    return p->b < q->b ? -1 : p->b > q->b;
}

int compare_tables(const csv_table *a, const char *an, const csv_table *b, const char *bn,
                   const compare_opts *o, FILE *out, compare_summary *sum, sim_err *err)
{
    memset(sum, 0, sizeof *sum);
    int na = a->ncols;
    int *key_a = calloc((size_t)na + 1, sizeof *key_a), *key_b = calloc((size_t)na + 1, sizeof *key_b);
    int *cmp_a = calloc((size_t)na + 1, sizeof *cmp_a), *cmp_b = calloc((size_t)na + 1, sizeof *cmp_b);
    bool *cmp_text = calloc((size_t)na + 1, sizeof *cmp_text);
    int *label_a = calloc((size_t)na + 1, sizeof *label_a);
    keyed *ka = NULL, *kb = NULL;
    size_t *pair_a = NULL, *pair_b = NULL;
    rowdiff *diffs = NULL;
    int rc = SIM_OK, nkey = 0, ncmp = 0, nlabel = 0;
    if (!key_a || !key_b || !cmp_a || !cmp_b || !cmp_text || !label_a) {
        rc = sim_err_set(err, SIM_ENOMEM, "out of memory");
        goto out;
    }

    sum->validate_kind = !o->key_cols && csv_col(a, "id") >= 0 && csv_col(b, "id") >= 0 &&
                         csv_col(a, "predicted_value") >= 0 && csv_col(b, "predicted_value") >= 0;

    /* key columns */
    if (sum->validate_kind) {
        key_a[0] = csv_col(a, "id");
        key_b[0] = csv_col(b, "id");
        nkey = 1;
    } else if (o->key_cols) {
        const char *p = o->key_cols;
        while (*p) {
            size_t n = strcspn(p, ",");
            char name[256];
            snprintf(name, sizeof name, "%.*s", (int)(n < 255 ? n : 255), p);
            int ca = csv_col(a, name), cb = csv_col(b, name);
            if (ca < 0 || cb < 0) {
                rc = sim_err_set(err, SIM_EINVAL, "--key: no column '%s' in %s", name,
                                 ca < 0 ? an : bn);
                goto out;
            }
            if (nkey < na) {
                key_a[nkey] = ca;
                key_b[nkey++] = cb;
            }
            p += n;
            if (*p == ',')
                p++;
        }
    } else {
        for (int c = 0; c < na; c++) {
            int cb = csv_col(b, a->header[c]);
            if (cb < 0 || compare_is_result_column(a->header[c]))
                continue;
            key_a[nkey] = c;
            key_b[nkey++] = cb;
        }
    }
    if (nkey == 0) {
        rc = sim_err_set(err, SIM_EINVAL,
                         "%s and %s share no configuration column to line rows up by (give "
                         "--key COLS)",
                         an, bn);
        goto out;
    }

    /* compared columns: result columns in both (validate: predicted_value
     * and skip_reason; APE is reported as the error change) */
    for (int c = 0; c < na; c++) {
        const char *name = a->header[c];
        int cb = csv_col(b, name);
        if (cb < 0 || !compare_is_result_column(name))
            continue;
        if (sum->validate_kind && strcmp(name, "predicted_value") && strcmp(name, "skip_reason"))
            continue;
        if (!strcmp(name, "index") || !strcmp(name, "rank"))
            continue; /* positions, not results of a configuration */
        cmp_a[ncmp] = c;
        cmp_b[ncmp] = cb;
        cmp_text[ncmp++] = is_text_result(name);
    }

    /* listing labels: validate id and metric; else the key columns whose
     * value is not the same in every row */
    if (sum->validate_kind) {
        label_a[nlabel++] = csv_col(a, "id");
        if (csv_col(a, "metric_name") >= 0)
            label_a[nlabel++] = csv_col(a, "metric_name");
    } else {
        for (int k = 0; k < nkey; k++) {
            bool varies = false;
            const char *first = csv_cell(a, 0, key_a[k]);
            for (size_t r = 1; r < a->nrows && !varies; r++)
                varies = strcmp(first, csv_cell(a, r, key_a[k])) != 0;
            for (size_t r = 0; r < b->nrows && !varies; r++)
                varies = strcmp(first, csv_cell(b, r, key_b[k])) != 0;
            if (varies)
                label_a[nlabel++] = key_a[k];
        }
    }

    if (build_keys(a, key_a, nkey, &ka) != SIM_OK || build_keys(b, key_b, nkey, &kb) != SIM_OK) {
        rc = sim_err_set(err, SIM_ENOMEM, "out of memory");
        goto out;
    }
    size_t maxp = a->nrows < b->nrows ? a->nrows : b->nrows;
    pair_a = malloc((maxp ? maxp : 1) * sizeof *pair_a);
    pair_b = malloc((maxp ? maxp : 1) * sizeof *pair_b);
    diffs = malloc((maxp ? maxp : 1) * sizeof *diffs);
    if (!pair_a || !pair_b || !diffs) {
        rc = sim_err_set(err, SIM_ENOMEM, "out of memory");
        goto out;
    }

    /* merge join */
    size_t i = 0, j = 0, np = 0;
    size_t *only_a = calloc(a->nrows ? a->nrows : 1, sizeof *only_a);
    size_t *only_b = calloc(b->nrows ? b->nrows : 1, sizeof *only_b);
    if (!only_a || !only_b) {
        free(only_a);
        free(only_b);
        rc = sim_err_set(err, SIM_ENOMEM, "out of memory");
        goto out;
    }
    while (i < a->nrows || j < b->nrows) {
        int c = i >= a->nrows ? 1 : j >= b->nrows ? -1 : strcmp(ka[i].key, kb[j].key);
        if (c == 0) {
            pair_a[np] = ka[i++].row;
            pair_b[np++] = kb[j++].row;
        } else if (c < 0)
            only_a[sum->only_old++] = ka[i++].row;
        else
            only_b[sum->only_new++] = kb[j++].row;
    }
    sum->matched = np;

    cmpctx x = { a, b, ncmp, cmp_a, cmp_b, cmp_text, nlabel, label_a, o };
    size_t nmoved = 0;
    for (size_t p = 0; p < np; p++) {
        rowdiff d = { .old_row = pair_a[p], .new_row = pair_b[p] };
        diff_row(&x, &d);
        if (isfinite(d.score) && d.score > sum->max_abs_change_pct)
            sum->max_abs_change_pct = d.score;
        if (d.moved) {
            sum->moved++;
            sum->status_changed += d.status;
            diffs[nmoved++] = d;
        } else if (d.text || d.score > 0) {
            sum->text_changed += d.score == 0;
            diffs[nmoved++] = d; /* listed after the moved rows */
        }
    }
    qsort(diffs, nmoved, sizeof *diffs, rowdiff_cmp);

    /* the report */
    fprintf(out, "compare: %s (%zu rows) -> %s (%zu rows), %s\n", an, a->nrows, bn, b->nrows,
            sum->validate_kind ? "validate outputs matched by id"
                               : "rows matched by their configuration columns");
    if (!sum->validate_kind) {
        fputs("  key columns:", out);
        for (int k = 0; k < nkey; k++)
            fprintf(out, " %s", a->header[key_a[k]]);
        fputs("\n  compared:", out);
        for (int c = 0; c < ncmp; c++)
            fprintf(out, " %s", a->header[cmp_a[c]]);
        if (ncmp == 0)
            fputs(" (no result column in both files)", out);
        fputc('\n', out);
    }
    fprintf(out, "  %zu matched, %zu only in OLD, %zu only in NEW; %zu moved more than %g%%", np,
            sum->only_old, sum->only_new, sum->moved, o->fail_above_pct);
    if (sum->status_changed)
        fprintf(out, " (%zu of them gained or lost a value)", sum->status_changed);
    fprintf(out, "; largest change %.3g%%\n", sum->max_abs_change_pct);

    size_t listed = 0;
    for (size_t p = 0; p < nmoved; p++) {
        if (o->max_listed && listed >= o->max_listed) {
            fprintf(out, "  ... and %zu more changed rows\n", nmoved - listed);
            break;
        }
        if (p == 0)
            fprintf(out, "\nchanged rows, largest change first%s\n",
                    o->fail_above_pct > 0 ? " (below the threshold too)" : "");
        print_row_changes(out, &x, &diffs[p]);
        listed++;
    }
    print_only(out, &x, a, "OLD", only_a, sum->only_old);
    print_only(out, &x, b, "NEW", only_b, sum->only_new);
    free(only_a);
    free(only_b);

    if (sum->validate_kind) {
        /* groups in the order their rows appear in NEW, as validate prints
         * them: the pairs sorted by their NEW row (each NEW row is in one
         * pair), O(n log n) */
        pairidx *pi = malloc((np ? np : 1) * sizeof *pi);
        if (!pi) {
            rc = sim_err_set(err, SIM_ENOMEM, "out of memory");
            goto out;
        }
        for (size_t p = 0; p < np; p++)
            pi[p] = (pairidx){ pair_a[p], pair_b[p] };
        qsort(pi, np, sizeof *pi, pairidx_cmp);
        for (size_t p = 0; p < np; p++) {
            pair_a[p] = pi[p].a;
            pair_b[p] = pi[p].b;
        }
        free(pi);
        error_change(out, a, b, pair_a, pair_b, np);
    }

out:
    keyed_free(ka, ka ? a->nrows : 0);
    keyed_free(kb, kb ? b->nrows : 0);
    free(key_a);
    free(key_b);
    free(cmp_a);
    free(cmp_b);
    free(cmp_text);
    free(label_a);
    free(pair_a);
    free(pair_b);
    free(diffs);
    return rc;
}
