#include "microbench.h"

#include <libconfig.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "infile.h"
#include "lookup.h"
#include "units.h"

/* A number of a list element, as int or float. */
static bool member_num(const config_setting_t *item, const char *name, double *out)
{
    const config_setting_t *s = config_setting_get_member(item, name);
    if (!s)
        return false;
    int type = config_setting_type(s);
    if (type == CONFIG_TYPE_INT || type == CONFIG_TYPE_INT64)
        *out = (double)config_setting_get_int64(s);
    else if (type == CONFIG_TYPE_FLOAT)
        *out = config_setting_get_float(s);
    else
        return false;
    return isfinite(*out);
}

static int bad_item(sim_err *err, const char *path, const config_setting_t *item, const char *list,
                    const char *what)
{
    return sim_err_set_at(err, SIM_EINVAL, path, (int)config_setting_source_line(item), NULL,
                          "microbench.%s: %s", list, what);
}

static int cmp_attn(const void *a, const void *b)
{
    const microbench_attn *x = a, *y = b;
    if (x->head_dim != y->head_dim)
        return x->head_dim < y->head_dim ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

static int read_gemm(const config_setting_t *g, const char *name, const char *path, microbench_gemm *pts,
                     int *n, sim_err *err)
{
    const config_setting_t *list = config_setting_get_member(g, name);
    if (!list)
        return SIM_OK;
    int count = config_setting_length(list);
    if (count > MICROBENCH_MAX_GEMM)
        return bad_item(err, path, list, name, "more GEMM shapes than parsim keeps (1024)");
    for (int i = 0; i < count; i++) {
        const config_setting_t *it = config_setting_get_elem(list, (unsigned)i);
        double m, nn, k, e;
        if (!member_num(it, "m", &m) || !member_num(it, "n", &nn) || !member_num(it, "k", &k) ||
            !member_num(it, "efficiency", &e))
            return bad_item(err, path, it, name, "each entry needs numbers m, n, k and efficiency");
        if (m < 1 || nn < 1 || k < 1 || !(e > 0 && e <= 1))
            return bad_item(err, path, it, name, "m, n, k must be >= 1 and efficiency in (0, 1]");
        pts[i] = (microbench_gemm){ (float)log(m), (float)log(nn), (float)log(k), (float)e };
    }
    *n = count;
    return SIM_OK;
}

static int read_attn(const config_setting_t *g, const char *name, const char *path, microbench_attn *pts,
                     int *n, sim_err *err)
{
    const config_setting_t *list = config_setting_get_member(g, name);
    if (!list)
        return SIM_OK;
    int count = config_setting_length(list);
    if (count > MICROBENCH_MAX_ATTN)
        return bad_item(err, path, list, name, "more attention cases than parsim keeps (128)");
    for (int i = 0; i < count; i++) {
        const config_setting_t *it = config_setting_get_elem(list, (unsigned)i);
        double s, d, e;
        if (!member_num(it, "seq", &s) || !member_num(it, "head_dim", &d) || !member_num(it, "efficiency", &e))
            return bad_item(err, path, it, name, "each entry needs numbers seq, head_dim and efficiency");
        if (s < 1 || d < 1 || !(e > 0 && e <= 1))
            return bad_item(err, path, it, name, "seq and head_dim must be >= 1 and efficiency in (0, 1]");
        pts[i] = (microbench_attn){ (float)s, (float)d, (float)e };
    }
    qsort(pts, (size_t)count, sizeof *pts, cmp_attn);
    *n = count;
    return SIM_OK;
}

int microbench_load(const char *path, microbench_table *out, sim_err *err)
{
    memset(out, 0, sizeof *out);
    config_t lc;
    int rc = infile_read_libconfig(&lc, path, err);
    if (rc != SIM_OK)
        return rc;
    const config_setting_t *g = config_lookup(&lc, "microbench");
    if (!g || !config_setting_is_group(g)) {
        rc = sim_err_set_at(err, SIM_EINVAL, path, 0, NULL,
                            "no `microbench` group (write the table with bench/gpu_microbench.py --format cfg)");
    }
    if (rc == SIM_OK)
        rc = read_gemm(g, "gemm_bf16", path, out->gemm[0], &out->n_gemm[0], err);
    if (rc == SIM_OK)
        rc = read_gemm(g, "gemm_fp8", path, out->gemm[1], &out->n_gemm[1], err);
    if (rc == SIM_OK)
        rc = read_attn(g, "attention_fwd_bf16", path, out->attn[0], &out->n_attn[0], err);
    if (rc == SIM_OK)
        rc = read_attn(g, "attention_bwd_bf16", path, out->attn[1], &out->n_attn[1], err);
    const config_setting_t *hbm = rc == SIM_OK ? config_setting_get_member(g, "hbm_copy_uint8") : NULL;
    if (hbm && config_setting_length(hbm) > 0) {
        const config_setting_t *it = config_setting_get_elem(hbm, 0);
        double gb;
        if (!member_num(it, "gbytes_per_s", &gb) || !(gb > 0))
            rc = bad_item(err, path, it, "hbm_copy_uint8", "needs a positive gbytes_per_s");
        else
            out->hbm_bytes_per_s = gb * GB;
    }
    config_destroy(&lc);
    if (rc != SIM_OK)
        memset(out, 0, sizeof *out);
    return rc;
}

bool microbench_gemm_efficiency(const microbench_table *t, int dtype, double m, double n, double k,
                                double *efficiency)
{
    if (dtype < 0 || dtype > 1 || t->n_gemm[dtype] == 0 || m <= 0 || n <= 0 || k <= 0)
        return false;
    const float q[3] = { (float)log(m), (float)log(n), (float)log(k) };
    size_t i = lookup_nearest(t->gemm[dtype], (size_t)t->n_gemm[dtype], sizeof t->gemm[dtype][0], q, 3);
    *efficiency = t->gemm[dtype][i].efficiency;
    return true;
}

bool microbench_attention_efficiency(const microbench_table *t, bool backward, double kv_tokens, double head_dim,
                                     double *efficiency)
{
    const int b = backward ? 1 : 0, n = t->n_attn[b];
    if (n == 0 || kv_tokens <= 0 || head_dim <= 0)
        return false;
    const microbench_attn *pts = t->attn[b];
    /* the measured head dimension nearest in log space */
    double best = INFINITY, dim = pts[0].head_dim;
    for (int i = 0; i < n; i++) {
        double d = fabs(log(head_dim) - log(pts[i].head_dim));
        if (d < best) {
            best = d;
            dim = pts[i].head_dim;
        }
    }
    double xs[MICROBENCH_MAX_ATTN], ys[MICROBENCH_MAX_ATTN];
    size_t m = 0;
    for (int i = 0; i < n; i++)
        if (pts[i].head_dim == dim && (m == 0 || log2(pts[i].seq) > xs[m - 1])) {
            xs[m] = log2(pts[i].seq);
            ys[m++] = pts[i].efficiency;
        }
    *efficiency = lookup_curve(xs, ys, m, log2(kv_tokens));
    return true;
}
