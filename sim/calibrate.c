/* calibrate: parameters fitted to measurements with GSL's nonlinear least
 * squares (see calibrate.h for the model of the fit). */
#include "calibrate.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gsl/gsl_blas.h>
#include <gsl/gsl_errno.h>
#include <gsl/gsl_matrix.h>
#include <gsl/gsl_multifit_nlinear.h>
#include <gsl/gsl_vector.h>

#include "config.h"
#include "bounds.h"
#include "net.h"
#include "numparse.h"
#include "progress.h"
#include "strategy.h"

/* Fitted by default from validation rows: the one factor that scales every
 * GEMM and attention kernel (the share of the benchmarked ceilings a
 * training job sustains).  Step times constrain it well; the efficiencies
 * one by one are not told apart by them (forward and backward attention,
 * bf16 and fp8 GEMMs where a GPU has few rows of one precision), and fits
 * of several drift to their bounds.  --params fits any others. */
static const char *default_row_params[] = {
    "cluster.compute.sustained_fraction",
};

/* Residual given to a row or point the model cannot evaluate at a trial
 * point: a factor e^3 ~ 20 off, so the solver backs away from it. */
#define BAD_RESIDUAL 3.0

/* Finite-difference step of the Jacobian, relative to the transformed
 * parameter.  GSL's default (sqrt(eps)) is below what a simulation with
 * picosecond time stamps resolves cleanly. */
#define FD_STEP 1e-4

/* ------------------------------------------------------------ helpers */

/* Room for the settings of every parameter. */
#define CALIB_MAX_OVERRIDES (CALIB_MAX_PARAMS * CALIB_MAX_SUB)

/* "key=value" with a value libconfig reads as a float. */
static void fmt_override(char *buf, size_t len, const char *key, double v)
{
    int n = snprintf(buf, len, "%s=%.12g", key, v);
    if (n > 0 && (size_t)n < len && !strpbrk(buf + strlen(key) + 1, ".eEn"))
        snprintf(buf + n, len - (size_t)n, ".0");
}

/* Value of a numeric key in a resolved cfg, read from cfg_dump (which
 * prints every key the table knows with its resolved value): a number, or
 * a list of numbers into list[0..*nlist).  False if the key is absent or
 * not numeric. */
static bool resolved_value(const cfg_t *cfg, const char *key, double *out, double *list,
                           int *nlist)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (!mem)
        return false;
    cfg_dump(cfg, mem);
    fclose(mem);
    bool found = false;
    size_t kl = strlen(key);
    *nlist = 0;
    for (char *line = buf; line && *line;) {
        char *next = strchr(line, '\n');
        if (!strncmp(line, key, kl) && !strncmp(line + kl, " = ", 3)) {
            char *s = line + kl + 3, *end;
            if (*s == '[') {
                found = true;
                for (s++; *s && *s != ']';) {
                    errno = 0;
                    double v = strtod(s, &end);
                    if (end == s || errno || *nlist >= CALIB_MAX_LIST) {
                        found = false;
                        break;
                    }
                    list[(*nlist)++] = v;
                    s = end;
                    while (*s == ',' || *s == ' ')
                        s++;
                }
                found = found && *nlist > 0;
                *out = 1.0;
            } else {
                errno = 0;
                double v = strtod(s, &end);
                found = end != s && errno == 0 && (*end == ';' || *end == ' ');
                if (found)
                    *out = v;
            }
            break;
        }
        line = next ? next + 1 : NULL;
    }
    free(buf);
    return found;
}

/* Whether a resolved cfg has a numeric key that is not 0 (0 = the system
 * has no such path: no NVLS on A100, say). */
static bool has_key(const cfg_t *cfg, const char *key)
{
    double v, list[CALIB_MAX_LIST];
    int n;
    if (!resolved_value(cfg, key, &v, list, &n))
        return false;
    for (int i = 0; i < n; i++)
        if (list[i] != 0)
            return true;
    return n == 0 && v != 0;
}

/* The "key=value" settings of parameter cp at value v into buf[0..*n):
 * its own value for a plain key, the start values times v for a scale. */
static void param_overrides(const calib_param *cp, double v, char buf[][512], int *n)
{
    if (cp->fixed)
        return; /* left as the topology has it */
    for (int j = 0; j < cp->nsub; j++) {
        const calib_sub *sb = &cp->sub[j];
        char *o = buf[(*n)++];
        if (!cp->is_scale) {
            fmt_override(o, 512, sb->key, v);
            continue;
        }
        if (sb->nlist == 0) {
            fmt_override(o, 512, sb->key, sb->scalar * v);
            continue;
        }
        size_t len = (size_t)snprintf(o, 512, "%s=[", sb->key);
        for (int i = 0; i < sb->nlist && len < 512; i++) {
            char num[48];
            snprintf(num, sizeof num, "%.9g", sb->list[i] * v);
            if (!strpbrk(num, ".eEn"))
                strcat(num, ".0");
            len += (size_t)snprintf(o + len, 512 - len, "%s%s", i ? "," : "", num);
        }
        if (len < 512)
            snprintf(o + len, 512 - len, "]");
    }
}

/* Adds parameter `spec` (KEY or KEY1+KEY2+...) to res (keys only). */
static int add_param(calib_result *res, const char *spec, size_t n, sim_err *err)
{
    if (res->n_params >= CALIB_MAX_PARAMS)
        return sim_err_set(err, SIM_EINVAL, "--params: at most %d parameters", CALIB_MAX_PARAMS);
    if (n >= sizeof res->p[0].key)
        return sim_err_set(err, SIM_EINVAL, "--params: '%.*s' is too long", (int)n, spec);
    calib_param *cp = &res->p[res->n_params];
    memset(cp, 0, sizeof *cp);
    memcpy(cp->key, spec, n);
    cp->key[n] = '\0';
    for (const char *s = cp->key; *s;) {
        size_t m = strcspn(s, "+");
        if (m == 0 || m >= sizeof cp->sub[0].key || cp->nsub >= CALIB_MAX_SUB)
            return sim_err_set(err, SIM_EINVAL,
                               "--params: '%s' is not KEY or KEY+KEY (at most %d keys)", cp->key,
                               CALIB_MAX_SUB);
        memcpy(cp->sub[cp->nsub].key, s, m);
        cp->sub[cp->nsub++].key[m] = '\0';
        s += m;
        if (*s == '+')
            s++;
    }
    for (size_t k = 0; k < res->n_params; k++)
        for (int i = 0; i < res->p[k].nsub; i++)
            for (int j = 0; j < cp->nsub; j++)
                if (!strcmp(res->p[k].sub[i].key, cp->sub[j].key))
                    return sim_err_set(err, SIM_EINVAL, "--params: %s given twice",
                                       cp->sub[j].key);
    res->n_params++;
    return SIM_OK;
}

/* Splits a comma-separated parameter list into res->p (keys only). */
static int parse_param_list(const char *list, calib_result *res, sim_err *err)
{
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ", ");
        if (n > 0) {
            int rc = add_param(res, p, n, err);
            if (rc)
                return rc;
        }
        p += n;
        while (*p == ',' || *p == ' ')
            p++;
    }
    if (res->n_params == 0)
        return sim_err_set(err, SIM_EINVAL, "--params: no key given");
    return SIM_OK;
}

/* Each parameter's range: its key's (cfg_key_range); for a scale factor
 * the factors that keep every non-zero entry of every key in its range. */
static int read_range(calib_param *cp, sim_err *err)
{
    cp->lo = 0.0;
    cp->hi = INFINITY;
    cp->lo_open = cp->is_scale; /* a factor is > 0; a key's own range replaces this */
    for (int j = 0; j < cp->nsub; j++) {
        const calib_sub *sb = &cp->sub[j];
        double lo, hi;
        bool open;
        if (!cfg_key_range(sb->key, &lo, &open, &hi))
            return sim_err_set(err, SIM_EINVAL,
                               "--params: '%s' has no bounded range in the key table: not "
                               "fittable",
                               sb->key);
        if (!cp->is_scale) {
            cp->lo = lo;
            cp->hi = hi;
            cp->lo_open = open;
            return SIM_OK;
        }
        int ne = sb->nlist > 0 ? sb->nlist : 1;
        for (int i = 0; i < ne; i++) {
            double e = sb->nlist > 0 ? sb->list[i] : sb->scalar;
            if (!(e > 0))
                continue; /* 0 stays 0 at every factor */
            if (lo / e > cp->lo || (lo / e == cp->lo && !open)) {
                cp->lo = lo / e;
                cp->lo_open = open;
            }
            cp->hi = fmin(cp->hi, hi / e);
        }
    }
    if (!isfinite(cp->hi))
        return sim_err_set(err, SIM_EINVAL, "--params: every entry of '%s' is 0: nothing to scale",
                           cp->key);
    return SIM_OK;
}

/* Reads each parameter's start value and range from a resolved cfg.  An
 * unknown or non-numeric key is an error. */
static int read_starts(const cfg_t *cfg, calib_result *res, sim_err *err)
{
    for (size_t k = 0; k < res->n_params; k++) {
        calib_param *cp = &res->p[k];
        for (int j = 0; j < cp->nsub; j++) {
            calib_sub *sb = &cp->sub[j];
            if (!resolved_value(cfg, sb->key, &sb->scalar, sb->list, &sb->nlist))
                return sim_err_set(err, SIM_EINVAL,
                                   "--params: '%s' is not a numeric config key (parsim "
                                   "--help-config lists them)",
                                   sb->key);
        }
        cp->is_scale = cp->nsub > 1 || cp->sub[0].nlist > 0;
        int rc = read_range(cp, err);
        if (rc)
            return rc;
        double v = cp->is_scale ? 1.0 : cp->sub[0].scalar;
        /* a start of 0 moves in steps of one unit of the key */
        cp->step = v > 0 ? v : 1.0;
        cp->fixed = false;
        cp->at_bound = 0;
        cp->start = cp->value = v;
        cp->sigma = NAN;
    }
    return SIM_OK;
}

/* The smallest value a parameter may take: lo, or just above an open lo. */
static double lowest(const calib_param *cp)
{
    return cp->lo_open ? cp->lo + 1e-6 * cp->step : cp->lo;
}

/* x folded into [lo, hi] (mirrored at the ends, period 2 (hi - lo)). */
static double fold(const calib_param *cp, double x)
{
    double lo = cp->lo, w = cp->hi - cp->lo;
    if (isfinite(w) && w > 0) {
        double r = fmod(x - lo, 2.0 * w);
        if (r < 0)
            r += 2.0 * w;
        x = lo + (r <= w ? r : 2.0 * w - r);
    } else if (x < lo)
        x = 2.0 * lo - x;
    return fmax(x, lowest(cp));
}

static double to_value(const calib_param *cp, double u)
{
    return fold(cp, cp->start + cp->step * (u - 1.0));
}

/* The solver starts at u = 1, so that GSL's finite-difference step
 * (FD_STEP times |u|) is FD_STEP of the parameter's step. */
static double to_u(const calib_param *cp, double v)
{
    return 1.0 + (v - cp->start) / cp->step;
}

/* Which bound a fitted value ends at: within 1e-3 of a step of it. */
static int bound_of(const calib_param *cp, double v)
{
    double tol = 1e-3 * cp->step;
    if (v <= lowest(cp) + tol)
        return -1;
    if (isfinite(cp->hi) && v >= cp->hi - tol)
        return 1;
    return 0;
}

static void stats_of(const double *ape, const bool *use, size_t n, vstats *st)
{
    double *tmp = malloc((n ? n : 1) * sizeof *tmp);
    size_t k = 0;
    if (!tmp) {
        st->n = 0;
        st->median = st->p90 = st->mean = NAN;
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (use[i] && isfinite(ape[i]))
            tmp[k++] = ape[i];
    validate_stats(tmp, k, st);
    free(tmp);
}

/* ------------------------------------------------------- generic fit */

/* Residuals of the n measurements at parameter values v (one per
 * parameter, in its unit). */
typedef int (*resid_fn)(const double *v, double *resid, void *ctx);

typedef struct fitprob {
    size_t n;              /* residuals */
    calib_result *res;     /* parameters (start in, value and sigma out) */
    resid_fn fn;
    void *ctx;
    FILE *log;
    int max_iter;
    double huber;          /* the loss turns from quadratic to linear here; 0: squares */
    size_t act[CALIB_MAX_PARAMS]; /* parameters being fitted (the others fixed) */
    size_t nact;
    int rc;                /* first failure of fn */
} fitprob;

/* Parameter values for the solver's point x (fixed ones at their value). */
static void values_at(const fitprob *fp, const gsl_vector *x, double *v)
{
    for (size_t k = 0; k < fp->res->n_params; k++)
        v[k] = fp->res->p[k].value;
    for (size_t a = 0; a < fp->nact; a++)
        v[fp->act[a]] = to_value(&fp->res->p[fp->act[a]], gsl_vector_get(x, a));
}

/* The residual the solver squares: r itself for squares, else
 * sign(r) sqrt(2 rho(r)) with Huber's rho (r^2 / 2 up to delta, then
 * delta |r| - delta^2 / 2), continuous with its first derivative. */
static double loss_residual(double r, double delta)
{
    if (!(delta > 0) || fabs(r) <= delta)
        return r;
    return copysign(sqrt(2.0 * delta * fabs(r) - delta * delta), r);
}

static double loss_delta(calib_loss loss)
{
    return loss == CALIB_LOSS_SQUARED ? 0.0 : CALIB_HUBER_DELTA;
}

static int gsl_f(const gsl_vector *x, void *params, gsl_vector *f)
{
    fitprob *fp = params;
    double v[CALIB_MAX_PARAMS];
    values_at(fp, x, v);
    /* f may be a strided view (a column of the finite-difference
     * Jacobian): fill it element by element */
    double *r = malloc(f->size * sizeof *r);
    int rc = r ? fp->fn(v, r, fp->ctx) : SIM_ENOMEM;
    if (rc != SIM_OK) {
        free(r);
        if (fp->rc == SIM_OK)
            fp->rc = rc;
        return GSL_EBADFUNC;
    }
    for (size_t i = 0; i < f->size; i++)
        gsl_vector_set(f, i, loss_residual(r[i], fp->huber));
    free(r);
    return GSL_SUCCESS;
}

static void gsl_iter_log(const size_t iter, void *params, const gsl_multifit_nlinear_workspace *w)
{
    fitprob *fp = params;
    if (!fp->log)
        return;
    double v[CALIB_MAX_PARAMS];
    values_at(fp, gsl_multifit_nlinear_position(w), v);
    fprintf(fp->log, "calibrate: iteration %2zu  |r| = %.6g ", iter,
            gsl_blas_dnrm2(gsl_multifit_nlinear_residual(w)));
    for (size_t a = 0; a < fp->nact; a++) {
        const calib_param *cp = &fp->res->p[fp->act[a]];
        const char *dot = strrchr(cp->sub[0].key, '.');
        fprintf(fp->log, " %s%s=%.6g", dot ? dot + 1 : cp->sub[0].key, cp->nsub > 1 ? "+" : "",
                v[fp->act[a]]);
    }
    fputc('\n', fp->log);
    fflush(fp->log);
}

/* One solve over the active parameters; fills value and sigma of them,
 * and zero_col[a] for those the data do not constrain at the solution. */
static int fit_once(fitprob *fp, bool *zero_col, sim_err *err)
{
    calib_result *res = fp->res;
    size_t p = fp->nact, n = fp->n;
    gsl_multifit_nlinear_parameters fdf_params = gsl_multifit_nlinear_default_parameters();
    fdf_params.h_df = FD_STEP;
    gsl_multifit_nlinear_fdf fdf = { .f = gsl_f, .df = NULL, .fvv = NULL, .n = n, .p = p,
                                     .params = fp };
    gsl_multifit_nlinear_workspace *w =
        gsl_multifit_nlinear_alloc(gsl_multifit_nlinear_trust, &fdf_params, n, p);
    gsl_vector *x0 = gsl_vector_alloc(p);
    gsl_matrix *covar = gsl_matrix_alloc(p, p);
    if (!w || !x0 || !covar) {
        if (w)
            gsl_multifit_nlinear_free(w);
        gsl_vector_free(x0);
        gsl_matrix_free(covar);
        return sim_err_set(err, SIM_ENOMEM, "out of memory");
    }
    for (size_t a = 0; a < p; a++) {
        const calib_param *cp = &res->p[fp->act[a]];
        gsl_vector_set(x0, a, to_u(cp, cp->start));
    }
    int rc = SIM_OK;
    int status = gsl_multifit_nlinear_init(x0, &fdf, w);
    int info = 0;
    /* xtol 1e-4: parameters to about 1e-4 relative, well below what the
     * data determine; each iteration costs p+1 passes over the rows */
    if (status == GSL_SUCCESS)
        status = gsl_multifit_nlinear_driver((size_t)fp->max_iter, 1e-4, 1e-6, 1e-8, gsl_iter_log,
                                             fp, &info, w);
    if (fp->rc != SIM_OK) {
        rc = fp->rc == SIM_ENOMEM ? sim_err_set(err, SIM_ENOMEM, "out of memory")
                                  : sim_err_set(err, fp->rc, "the model could not be evaluated");
        goto out;
    }
    if (status != GSL_SUCCESS && status != GSL_EMAXITER && status != GSL_ENOPROG) {
        rc = sim_err_set(err, SIM_ESIM, "the solver failed: %s", gsl_strerror(status));
        goto out;
    }
    res->gsl_status = status;
    res->iterations += gsl_multifit_nlinear_niter(w);
    gsl_vector *x = gsl_multifit_nlinear_position(w);
    double chi = gsl_blas_dnrm2(gsl_multifit_nlinear_residual(w));
    res->chi2 = chi * chi;
    res->dof = (double)n - (double)p;
    gsl_matrix *J = gsl_multifit_nlinear_jac(w);
    int cstatus = gsl_multifit_nlinear_covar(J, 0.0, covar);
    double scale = res->dof > 0 ? res->chi2 / res->dof : NAN;
    double maxnorm = 0.0, norm[CALIB_MAX_PARAMS];
    for (size_t a = 0; a < p; a++) {
        norm[a] = 0.0;
        for (size_t i = 0; i < n; i++)
            norm[a] += fabs(gsl_matrix_get(J, i, a));
        maxnorm = fmax(maxnorm, norm[a]);
    }
    for (size_t a = 0; a < p; a++) {
        calib_param *cp = &res->p[fp->act[a]];
        double u = gsl_vector_get(x, a);
        cp->value = to_value(cp, u);
        /* at a bound the value is the bound: the data want it beyond */
        cp->at_bound = bound_of(cp, cp->value);
        if (cp->at_bound)
            cp->value = cp->at_bound < 0 ? lowest(cp) : cp->hi;
        double var = gsl_matrix_get(covar, a, a);
        cp->sigma = !cp->at_bound && cstatus == GSL_SUCCESS && isfinite(var) && var >= 0 &&
                            isfinite(scale)
                        ? sqrt(var * scale) * cp->step
                        : NAN;
        zero_col[a] = !cp->at_bound && (!(norm[a] > 1e-12 * maxnorm) || maxnorm == 0.0);
    }
out:
    gsl_multifit_nlinear_free(w);
    gsl_vector_free(x0);
    gsl_matrix_free(covar);
    return rc;
}

/* Fits every parameter; one the data do not constrain at the solution is
 * put back to its start and the rest fitted again without it. */
static int run_fit(fitprob *fp, sim_err *err)
{
    calib_result *res = fp->res;
    if (fp->n < res->n_params)
        return sim_err_set(err, SIM_EINVAL,
                           "%zu measurements cannot determine %zu parameters: select more rows "
                           "or fewer --params",
                           fp->n, res->n_params);
    res->iterations = 0;
    for (;;) {
        fp->nact = 0;
        for (size_t k = 0; k < res->n_params; k++) {
            if (!res->p[k].fixed)
                fp->act[fp->nact++] = k;
            else {
                res->p[k].value = res->p[k].start;
                res->p[k].sigma = NAN;
                res->p[k].at_bound = 0;
            }
        }
        if (fp->nact == 0)
            return SIM_OK;
        bool zero[CALIB_MAX_PARAMS] = { false };
        int rc = fit_once(fp, zero, err);
        if (rc != SIM_OK)
            return rc;
        bool again = false;
        for (size_t a = 0; a < fp->nact; a++)
            if (zero[a]) {
                res->p[fp->act[a]].fixed = true;
                again = true;
                if (fp->log)
                    fprintf(fp->log, "calibrate: %s is not constrained by the data: kept at %g, "
                                     "fitting the others again\n",
                            res->p[fp->act[a]].key, res->p[fp->act[a]].start);
            }
        if (!again)
            return SIM_OK;
    }
}

/* --------------------------------------------------------- rows mode */

typedef struct rowfit {
    const vcase *cases;    /* all rows of the table */
    size_t ncases;
    bool *use;             /* rows in the current evaluation */
    vpred *preds;
    size_t *train;         /* indices of the fitted rows */
    size_t ntrain;
    calib_result *res;
    const char *data_dir;
    int jobs;
    double huber;          /* fitprob's */
} rowfit;

/* Predicts the rows of rf->use at parameter values v. */
static int predict_at(rowfit *rf, const double *v)
{
    char kv[CALIB_MAX_OVERRIDES][512];
    const char *extra[CALIB_MAX_OVERRIDES + 1];
    int n = 0;
    for (size_t k = 0; k < rf->res->n_params; k++)
        param_overrides(&rf->res->p[k], v[k], kv, &n);
    for (int i = 0; i < n; i++)
        extra[i] = kv[i];
    extra[n] = NULL;
    return validate_predict_many(rf->cases, rf->use, rf->ncases, rf->data_dir, extra, rf->preds,
                                 rf->jobs, NULL);
}

static int row_resid(const double *v, double *resid, void *ctx)
{
    rowfit *rf = ctx;
    memset(rf->use, 0, rf->ncases * sizeof *rf->use);
    for (size_t i = 0; i < rf->ntrain; i++)
        rf->use[rf->train[i]] = true;
    int rc = predict_at(rf, v);
    if (rc != SIM_OK)
        return rc;
    for (size_t i = 0; i < rf->ntrain; i++) {
        const vpred *p = &rf->preds[rf->train[i]];
        const vcase *c = &rf->cases[rf->train[i]];
        resid[i] = p->ok ? log(p->value / c->measured) : BAD_RESIDUAL;
    }
    return SIM_OK;
}

static const char *case_topology(const vcase *c)
{
    for (int k = 0; k < c->n_over; k++)
        if (!strncmp(c->over[k], "cluster.topology=", 17))
            return c->over[k] + 17;
    return "";
}

/* The configurations (distinct runs) among the rows of idx[0..n). */
static size_t count_configs(const vcase *cases, const size_t *idx, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = cases[idx[j]].run == cases[idx[i]].run;
        k += !seen;
    }
    return k;
}

/* APE statistics and median signed error of the rows `use` of preds. */
static void err_of(const vpred *preds, const bool *use, size_t n, calib_err *e)
{
    double *ape = malloc((n ? n : 1) * sizeof *ape), *bias = malloc((n ? n : 1) * sizeof *bias);
    bool *ok = malloc((n ? n : 1) * sizeof *ok);
    if (!ape || !bias || !ok) {
        e->ape = (vstats){ 0, NAN, NAN, NAN };
        e->bias = NAN;
    } else {
        for (size_t i = 0; i < n; i++) {
            ok[i] = use[i] && preds[i].ok;
            ape[i] = preds[i].ape;
            bias[i] = preds[i].bias;
        }
        stats_of(ape, ok, n, &e->ape);
        vstats b;
        stats_of(bias, ok, n, &b);
        e->bias = b.median;
    }
    free(ape);
    free(bias);
    free(ok);
}

/* Fits the parameters of res to the selected rows of configuration parity
 * `parity` (-1: all) from their start values. */
static int fit_rows(rowfit *rf, const bool *sel, int parity, FILE *log, int max_iter,
                    sim_err *err)
{
    rf->ntrain = 0;
    for (size_t r = 0; r < rf->ncases; r++)
        if (sel[r] && (parity < 0 || (int)(rf->cases[r].run % 2) == parity))
            rf->train[rf->ntrain++] = r;
    for (size_t k = 0; k < rf->res->n_params; k++) {
        calib_param *cp = &rf->res->p[k];
        cp->value = cp->start;
        cp->fixed = false;
        cp->at_bound = 0;
        cp->sigma = NAN;
    }
    fitprob fp = { .n = rf->ntrain, .res = rf->res, .fn = row_resid, .ctx = rf, .log = log,
                   .max_iter = max_iter, .huber = rf->huber, .rc = SIM_OK };
    return run_fit(&fp, err);
}

/* Predicts the rows `rows` at the current values of res into rf->preds. */
static int predict_rows(rowfit *rf, const bool *rows, sim_err *err)
{
    double v[CALIB_MAX_PARAMS];
    for (size_t k = 0; k < rf->res->n_params; k++)
        v[k] = rf->res->p[k].value;
    memcpy(rf->use, rows, rf->ncases * sizeof *rf->use);
    int rc = predict_at(rf, v);
    return rc == SIM_OK ? SIM_OK : sim_err_set(err, rc, "out of memory");
}

/* The held-out check of one direction: fit on parity h of the selected
 * rows, predict the other parity into heldout[]. */
static int cross_fit(rowfit *rf, const bool *sel, int h, const vpred *pred0, vpred *heldout,
                     bool *scratch, FILE *log, int max_iter, calib_half *hf, sim_err *err)
{
    calib_result *res = rf->res;
    size_t n = rf->ncases;
    memset(hf, 0, sizeof *hf);
    size_t ntr = 0;
    for (size_t r = 0; r < n; r++) {
        bool tr = sel[r] && (int)(rf->cases[r].run % 2) == h;
        scratch[r] = sel[r] && !tr;
        ntr += tr;
        hf->n_eval += scratch[r];
    }
    hf->n_train = ntr;
    if (ntr < res->n_params || hf->n_eval == 0) {
        snprintf(hf->why, sizeof hf->why, "%zu rows to fit, %zu to evaluate", ntr, hf->n_eval);
        return SIM_OK;
    }
    if (log)
        fprintf(log, "calibrate: held-out check, fitting the %s configurations\n",
                h == 0 ? "even" : "odd");
    int rc = fit_rows(rf, sel, h, log, max_iter, err);
    if (rc != SIM_OK)
        return rc;
    hf->fitted = true;
    hf->n_configs = count_configs(rf->cases, rf->train, rf->ntrain);
    for (size_t k = 0; k < res->n_params; k++) {
        hf->value[k] = res->p[k].value;
        hf->at_bound[k] = res->p[k].at_bound;
    }
    err_of(pred0, scratch, n, &hf->before);
    if ((rc = predict_rows(rf, scratch, err)) != SIM_OK)
        return rc;
    err_of(rf->preds, scratch, n, &hf->after);
    for (size_t r = 0; r < n; r++)
        if (scratch[r])
            heldout[r] = rf->preds[r];
    return SIM_OK;
}

bool calibrate_half_result(const calib_result *res, int h, calib_result *out)
{
    const calib_half *hf = &res->half[h];
    if (!hf->fitted)
        return false;
    *out = *res;
    out->cases = NULL;
    out->heldout = NULL;
    out->ncases = 0;
    for (size_t k = 0; k < res->n_params; k++) {
        out->p[k].value = hf->value[k];
        out->p[k].at_bound = hf->at_bound[k];
        out->p[k].sigma = NAN;
    }
    out->n_train = hf->n_train;
    out->n_configs = hf->n_configs;
    out->n_eval = hf->n_eval;
    out->train_before = out->train_after = (vstats){ 0, NAN, NAN, NAN };
    out->eval_before = hf->before.ape;
    out->eval_after = hf->after.ape;
    size_t l = strlen(out->source);
    snprintf(out->source + l, sizeof out->source - l, "; this file: the fit of the %s half only",
             h == 0 ? "even" : "odd");
    return true;
}

void calibrate_result_free(calib_result *res)
{
    if (!res)
        return;
    free(res->cases);
    free(res->heldout);
    res->cases = NULL;
    res->heldout = NULL;
    res->ncases = 0;
}

int calibrate_rows(const csv_table *t, const char *name, const calib_opts *o,
                   calib_result *res, sim_err *err)
{
    memset(res, 0, sizeof *res);
    int rc = validate_check_columns(t, name, err);
    if (rc == SIM_OK)
        rc = validate_filter_check(t, o->rows, err);
    if (rc != SIM_OK)
        return rc;
    size_t n = t->nrows;
    vcase *cases = calloc(n ? n : 1, sizeof *cases);
    vpred *preds = calloc(n ? n : 1, sizeof *preds);
    vpred *pred0 = calloc(n ? n : 1, sizeof *pred0);
    vpred *heldout = calloc(n ? n : 1, sizeof *heldout);
    bool *sel = calloc(n ? n : 1, sizeof *sel), *use = calloc(n ? n : 1, sizeof *use);
    bool *is_train = calloc(n ? n : 1, sizeof *is_train);
    bool *is_eval = calloc(n ? n : 1, sizeof *is_eval);
    bool *scratch = calloc(n ? n : 1, sizeof *scratch);
    size_t *train = calloc(n ? n : 1, sizeof *train);
    cfg_t *cfg = NULL;
    if (!cases || !preds || !pred0 || !heldout || !sel || !use || !is_train || !is_eval ||
        !scratch || !train) {
        rc = sim_err_set(err, SIM_ENOMEM, "out of memory");
        goto out;
    }

    /* the rows: selected, simulable, a time or throughput metric */
    size_t nsel = 0;
    const char *topo = NULL;
    char topo2[64] = "";
    int vrc = o->setup ? validate_cases_setup(t, o->data_dir, o->setup, cases)
                       : validate_cases(t, o->data_dir, cases);
    if (vrc != SIM_OK) {
        rc = sim_err_set(err, SIM_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t r = 0; r < n; r++) {
        const vcase *c = &cases[r];
        snprintf(heldout[r].skip, sizeof heldout[r].skip, "not selected by calibrate");
        if (c->skip[0] || c->family != VFAM_TIME || !validate_filter_match(t, c, o->rows))
            continue;
        if (!topo)
            topo = case_topology(c);
        else if (strcmp(topo, case_topology(c)) && !topo2[0])
            snprintf(topo2, sizeof topo2, "%s", case_topology(c));
        sel[r] = true;
        nsel++;
    }
    if (nsel == 0) {
        rc = sim_err_set(err, SIM_EINVAL,
                         "%s: no time or throughput row to fit%s%s (memory rows and skipped rows "
                         "are left out)",
                         name, o->rows ? " matches --rows " : "", o->rows ? o->rows : "");
        goto out;
    }
    if (topo2[0]) {
        rc = sim_err_set(err, SIM_EINVAL,
                         "the selected rows run on several topologies (%s, %s, ...): a parameter "
                         "file holds for one; select one with --rows gpu_type=...",
                         topo, topo2);
        goto out;
    }
    snprintf(res->topology, sizeof res->topology, "%s", topo);
    res->loss = o->loss;

    /* parameters and their start values (the topology's) */
    if (o->params)
        rc = parse_param_list(o->params, res, err);
    else {
        for (size_t k = 0; k < sizeof default_row_params / sizeof default_row_params[0]; k++)
            add_param(res, default_row_params[k], strlen(default_row_params[k]), err);
    }
    if (rc == SIM_OK && res->n_params > CALIB_MAX_ROW_PARAMS)
        rc = sim_err_set_at(err, SIM_EINVAL, NULL, 0, "--params",
                            "%zu parameters for one GPU type, at most %d "
                            "(CALIB_MAX_ROW_PARAMS): fits of more drift to unphysical values",
                            res->n_params, CALIB_MAX_ROW_PARAMS);
    if (rc != SIM_OK)
        goto out;
    size_t first = 0;
    while (!sel[first])
        first++;
    cfg = cfg_create(o->data_dir);
    if (!cfg) {
        rc = sim_err_set(err, SIM_ENOMEM, "out of memory");
        goto out;
    }
    for (int k = 0; k < cases[first].n_over && rc == SIM_OK; k++)
        rc = cfg_set_override(cfg, cases[first].over[k], err);
    run_inputs in;
    if (rc == SIM_OK)
        rc = cfg_resolve(cfg, &in, err);
    if (rc == SIM_OK)
        rc = read_starts(cfg, res, err);
    if (rc != SIM_OK)
        goto out;

    rowfit rf = { cases, n, use, preds, train, 0, res, o->data_dir, o->jobs, loss_delta(o->loss) };

    /* before: every selected row at the start values; rows that cannot be
     * predicted are dropped */
    if ((rc = predict_rows(&rf, sel, err)) != SIM_OK)
        goto out;
    for (size_t r = 0; r < n; r++) {
        pred0[r] = preds[r];
        if (sel[r] && !preds[r].ok)
            sel[r] = false;
        if (!sel[r])
            continue;
        /* Halves are whole configurations (run parity), so a held-out row
         * is never the other metric of a fitted run. */
        bool tr = o->train_half < 0 || (int)(cases[r].run % 2) == o->train_half;
        is_train[r] = tr;
        is_eval[r] = !tr;
        if (tr)
            train[res->n_train++] = r;
        res->n_eval += !tr;
    }
    res->n_configs = count_configs(cases, train, res->n_train);
    if (res->n_configs < CALIB_MIN_CONFIGS) {
        rc = sim_err_set(err, SIM_EINVAL,
                         "%s: %zu configurations (distinct runs) to fit%s%s; a fit needs at "
                         "least %d (CALIB_MIN_CONFIGS): left to the physical defaults",
                         name, res->n_configs, o->rows ? " among --rows " : "",
                         o->rows ? o->rows : "", CALIB_MIN_CONFIGS);
        goto out;
    }
    snprintf(res->source, sizeof res->source,
             "%s, %zu time/throughput rows%s%s (%s%s), %zu configurations fitted", name,
             res->n_train + res->n_eval, o->rows ? " selected by --rows " : "",
             o->rows ? o->rows : "",
             o->train_half < 0 ? "all fitted"
                               : o->train_half == 0 ? "fitted on the even configurations"
                                                    : "fitted on the odd configurations",
             o->train_half < 0 ? "" : ", the other half held out", res->n_configs);

    /* the held-out check, both ways */
    for (int h = 0; h < 2; h++)
        if ((rc = cross_fit(&rf, sel, h, pred0, heldout, scratch, o->log, o->max_iter,
                            &res->half[h], err)) != SIM_OK)
            goto out;

    /* the fit that is written */
    if (o->log && o->train_half < 0)
        fprintf(o->log, "calibrate: fitting all selected configurations\n");
    if ((rc = fit_rows(&rf, sel, o->train_half, o->log, o->max_iter, err)) != SIM_OK)
        goto out;
    if ((rc = predict_rows(&rf, sel, err)) != SIM_OK)
        goto out;
    calib_err e;
    err_of(pred0, is_train, n, &e);
    res->train_before = e.ape;
    res->train_bias_before = e.bias;
    err_of(preds, is_train, n, &e);
    res->train_after = e.ape;
    res->train_bias_after = e.bias;
    err_of(pred0, is_eval, n, &e);
    res->eval_before = e.ape;
    err_of(preds, is_eval, n, &e);
    res->eval_after = e.ape;
    res->ncases = n;
    res->cases = cases;
    res->heldout = heldout;
    cases = NULL;
    heldout = NULL;

out:
    cfg_destroy(cfg);
    free(cases);
    free(preds);
    free(pred0);
    free(heldout);
    free(sel);
    free(use);
    free(is_train);
    free(is_eval);
    free(scratch);
    free(train);
    return rc;
}

/* ------------------------------------------------------- nccl-tests */

void nccl_log_free(nccl_log *l)
{
    if (l) {
        free(l->pts);
        memset(l, 0, sizeof *l);
    }
}

/* Splits s (modified) into whitespace-separated tokens. */
static int tokenize(char *s, char **tok, int max)
{
    int n = 0;
    for (char *p = strtok_r(s, " \t\r", &s); p && n < max; p = strtok_r(NULL, " \t\r", &s))
        tok[n++] = p;
    return n;
}

static bool push_point(nccl_log *l, size_t *cap, double bytes, double time_s, bool in_place)
{
    if (l->n == *cap) {
        size_t nc = *cap ? 2 * *cap : 64;
        nccl_point *p = realloc(l->pts, nc * sizeof *p);
        if (!p)
            return false;
        l->pts = p;
        *cap = nc;
    }
    l->pts[l->n++] = (nccl_point){ bytes, time_s, in_place };
    return true;
}

/* Largest message size read: whole bytes stay exact in a double below
 * 2^53 (9 PB; nccl-tests' largest sizes are GBs). */
#define NCCL_MAX_BYTES 0x1p53

/* The fields of a data row.  A size: whole bytes in 0..NCCL_MAX_BYTES; a
 * time: microseconds, > 0 and at most LIMIT_DURATION_S.  SIM_EINVAL names
 * the line and the field. */
static int row_size(const char *tok, const char *name, int line_no, double *out, sim_err *err)
{
    if (!num_parse_double(tok, out) || *out < 0 || *out > NCCL_MAX_BYTES || *out != floor(*out))
        return sim_err_set_at(err, SIM_EINVAL, name, line_no, "size",
                              "'%s' is not a whole number of bytes in 0..2^53", tok);
    return SIM_OK;
}

static int row_time_us(const char *tok, const char *name, int line_no, double *out,
                       sim_err *err)
{
    if (!num_parse_double(tok, out) || !(*out > 0) || *out > LIMIT_DURATION_S * 1e6)
        return sim_err_set_at(err, SIM_EINVAL, name, line_no, "time",
                              "'%s' is not a time in microseconds, > 0 and at most %.3g "
                              "(LIMIT_DURATION_S)",
                              tok, LIMIT_DURATION_S * 1e6);
    return SIM_OK;
}

int nccl_log_parse(const char *text, size_t len, const char *name, const char *op_hint,
                   nccl_log *out, sim_err *err)
{
    memset(out, 0, sizeof *out);
    char hosts[64][64];
    int nhosts = 0;
    int col_size = -1, col_time[2] = { -1, -1 }, hdr_cols = 0;
    size_t cap = 0;
    long long line_no = 0;
    bool parsim_net = false; /* ranks taken from a parsim net header */
    /* the line as written, and a copy that tokenize cuts up */
    char *buf = NULL;
    size_t buf_cap = 0;
    int rc = SIM_OK;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t ll = nl ? (size_t)(nl - p) : (size_t)(end - p);
        if (++line_no > LIMIT_LOG_LINES) {
            rc = sim_err_set_at(err, SIM_EINVAL, name, (int)line_no, NULL,
                                "more than %lld lines (LIMIT_LOG_LINES)", LIMIT_LOG_LINES);
            goto fail;
        }
        if (memchr(p, '\0', ll)) {
            rc = sim_err_set_at(err, SIM_EINVAL, name, (int)line_no, NULL,
                                "a NUL byte: not a text log");
            goto fail;
        }
        if (2 * (ll + 1) > buf_cap) {
            char *nb = realloc(buf, 2 * (ll + 1));
            if (!nb)
                goto nomem;
            buf = nb;
            buf_cap = 2 * (ll + 1);
        }
        char *line = buf, *work = buf + ll + 1;
        memcpy(line, p, ll);
        line[ll] = '\0';
        memcpy(work, line, ll + 1);
        p = nl ? nl + 1 : end;
        char *tok[64];
        if (line[0] == '#') {
            /* the collective, from a "<op>_perf" word anywhere in a comment */
            char *perf = strstr(line, "_perf");
            if (perf && !out->op[0]) {
                char *b = perf;
                while (b > line && (isalnum((unsigned char)b[-1]) || b[-1] == '_'))
                    b--;
                snprintf(out->op, sizeof out->op, "%.*s", (int)(perf - b), b);
            }
            int nt = tokenize(work + 1, tok, 64);
            /* parsim's own table: "# parsim net: all_reduce on 8 GPUs of ..." */
            if (nt >= 6 && !strcmp(tok[0], "parsim") && !strcmp(tok[1], "net:") &&
                !strcmp(tok[3], "on") && !strcmp(tok[5], "GPUs")) {
                if (!out->op[0])
                    snprintf(out->op, sizeof out->op, "%s", tok[2]);
                int64_t r = 0;
                if (!num_parse_int(tok[4], &r) || r < 1 || r > LIMIT_GPUS) {
                    rc = sim_err_set_at(err, SIM_EINVAL, name, (int)line_no, "GPUs",
                                        "'%s' is not a GPU count in 1..%lld (LIMIT_GPUS)",
                                        tok[4], LIMIT_GPUS);
                    goto fail;
                }
                if (out->ranks == 0)
                    out->ranks = (int)r;
                parsim_net = true;
            }
            /* "#  Rank  0 Group  0 Pid 123 on host device  0 [0x..] NVIDIA H100 ..." */
            if (nt >= 7 && !strcmp(tok[0], "Rank")) {
                if (parsim_net) {
                    parsim_net = false;
                    out->ranks = 0;
                }
                if (out->ranks >= LIMIT_GPUS) {
                    rc = sim_err_set_at(err, SIM_EINVAL, name, (int)line_no, "Rank",
                                        "more than %lld ranks (LIMIT_GPUS)", LIMIT_GPUS);
                    goto fail;
                }
                out->ranks++;
                for (int k = 0; k + 1 < nt; k++)
                    if (!strcmp(tok[k], "on")) {
                        bool seen = false;
                        for (int h = 0; h < nhosts && !seen; h++)
                            seen = !strcmp(hosts[h], tok[k + 1]);
                        if (!seen && nhosts < 64)
                            snprintf(hosts[nhosts++], sizeof hosts[0], "%s", tok[k + 1]);
                        break;
                    }
                const char *br = strchr(line, ']');
                if (out->ranks == 1 && br) {
                    while (*++br == ' ')
                        ;
                    snprintf(out->gpu, sizeof out->gpu, "%s", br);
                }
            }
            /* the column header */
            bool has_size = false, has_time = false;
            for (int k = 0; k < nt; k++) {
                has_size = has_size || !strcmp(tok[k], "size");
                has_time = has_time || !strcmp(tok[k], "time");
            }
            if (has_size && has_time) {
                col_size = -1;
                col_time[0] = col_time[1] = -1;
                for (int k = 0; k < nt; k++) {
                    if (!strcmp(tok[k], "size"))
                        col_size = k;
                    else if (!strcmp(tok[k], "time"))
                        col_time[col_time[0] < 0 ? 0 : 1] = k;
                }
                hdr_cols = nt;
            }
            continue;
        }
        int nt = tokenize(work, tok, 64);
        if (nt == 0)
            continue;
        /* a row of the table starts with what strtod takes for a number,
         * "nan" and "-inf" included: those are rejected below, not passed
         * over */
        char *e;
        (void)strtod(tok[0], &e);
        if (*e || e == tok[0] || col_size < 0)
            continue; /* not a row of the table */
        if (nt < col_time[0] + 1 || col_size >= nt) {
            rc = sim_err_set_at(err, SIM_EINVAL, name, (int)line_no, NULL,
                                "row has %d columns, the header has %d", nt, hdr_cols);
            goto fail;
        }
        double size;
        if ((rc = row_size(tok[col_size], name, (int)line_no, &size, err)))
            goto fail;
        for (int k = 0; k < 2; k++) {
            if (col_time[k] < 0 || col_time[k] >= nt)
                continue;
            double us;
            if ((rc = row_time_us(tok[col_time[k]], name, (int)line_no, &us, err)))
                goto fail;
            if (!push_point(out, &cap, size, us * 1e-6, k == 1))
                goto nomem;
        }
    }
    free(buf);
    buf = NULL;
    out->nodes = nhosts;
    if (op_hint && *op_hint)
        snprintf(out->op, sizeof out->op, "%s", op_hint);
    if (col_size < 0 || col_time[0] < 0) {
        rc = sim_err_set_at(err, SIM_EINVAL, name, 0, NULL,
                            "no nccl-tests table (a '#  size  count  type ... time  algbw  busbw' "
                            "header) found");
        goto fail;
    }
    if (out->n == 0) {
        rc = sim_err_set_at(err, SIM_EINVAL, name, 0, NULL, "the table has no rows");
        goto fail;
    }
    return SIM_OK;
nomem:
    rc = sim_err_set(err, SIM_ENOMEM, "out of memory");
fail:
    free(buf);
    nccl_log_free(out);
    return rc;
}

static const struct {
    const char *op;
    coll_kind kind;
} nccl_ops[] = {
    { "all_reduce", COLL_ALL_REDUCE },      { "all_gather", COLL_ALL_GATHER },
    { "reduce_scatter", COLL_REDUCE_SCATTER }, { "alltoall", COLL_ALL_TO_ALL },
    { "all_to_all", COLL_ALL_TO_ALL },      { "broadcast", COLL_BROADCAST },
    { "sendrecv", COLL_P2P },               { "hypercube", COLL_P2P },
};

typedef struct ncclfit {
    const nccl_log *log;
    const char *const *overrides;
    const calib_opts *o;
    calib_result *res;
    coll_kind kind;
    const size_t *pts;     /* points evaluated */
    size_t npts;
} ncclfit;

/* A resolved config of the tested system with the parameters at v (NULL:
 * as the topology has them).  *out is the caller's to destroy. */
static int nccl_cfg(const ncclfit *nf, const double *v, cfg_t **out, run_inputs *in, sim_err *err)
{
    cfg_t *cfg = cfg_create(nf->o->data_dir);
    if (!cfg)
        return sim_err_set(err, SIM_ENOMEM, "out of memory");
    /* a placeholder model and batch: cfg_resolve needs them, only the
     * cluster is used; the user's KEY=VALUE come after and win */
    char gpus[64];
    snprintf(gpus, sizeof gpus, "cluster.num_gpus=%d", nf->log->ranks > 0 ? nf->log->ranks : 1);
    const char *base[] = { "model.name=llama3-8b", "train.global_batch_size=1", gpus, NULL };
    int rc = SIM_OK;
    for (const char *const *b = base; *b && rc == SIM_OK; b++)
        rc = cfg_set_override(cfg, *b, err);
    for (const char *const *ov = nf->overrides; ov && *ov && rc == SIM_OK; ov++)
        rc = cfg_set_override(cfg, *ov, err);
    char kv[CALIB_MAX_OVERRIDES][512];
    int nkv = 0;
    for (size_t k = 0; v && k < nf->res->n_params; k++)
        param_overrides(&nf->res->p[k], v[k], kv, &nkv);
    for (int i = 0; i < nkv && rc == SIM_OK; i++)
        rc = cfg_set_override(cfg, kv[i], err);
    if (rc == SIM_OK)
        rc = cfg_resolve(cfg, in, err);
    if (rc != SIM_OK) {
        cfg_destroy(cfg);
        return rc;
    }
    *out = cfg;
    return SIM_OK;
}

/* The cluster with the parameters at v, and the tested group on it: every
 * rank, node by node, as nccl-tests runs with one process per GPU. */
static int nccl_system(const ncclfit *nf, const double *v, cluster_spec *c, group_span *g,
                       sim_err *err)
{
    cfg_t *cfg;
    run_inputs in;
    int rc = nccl_cfg(nf, v, &cfg, &in, err);
    if (rc != SIM_OK)
        return rc;
    *c = in.cluster;
    net_group_span(c, c->num_gpus, 1, g);
    cfg_destroy(cfg);
    return SIM_OK;
}

static int nccl_resid(const double *v, double *resid, void *ctx)
{
    ncclfit *nf = ctx;
    cluster_spec c;
    group_span g;
    sim_err err;
    int rc = nccl_system(nf, v, &c, &g, &err);
    if (rc == SIM_ENOMEM)
        return rc;
    for (size_t i = 0; i < nf->npts; i++) {
        const nccl_point *pt = &nf->log->pts[nf->pts[i]];
        double tm = rc == SIM_OK ? net_collective_s(&c, &g, nf->kind, pt->bytes) : NAN;
        resid[i] = isfinite(tm) && tm > 0 ? log(tm / pt->time_s) : BAD_RESIDUAL;
    }
    return SIM_OK;
}

/* APE of every point at v into ape[]. */
static int nccl_ape(ncclfit *nf, const double *v, double *ape, sim_err *err)
{
    cluster_spec c;
    group_span g;
    int rc = nccl_system(nf, v, &c, &g, err);
    if (rc != SIM_OK)
        return rc;
    for (size_t i = 0; i < nf->log->n; i++) {
        double tm = net_collective_s(&c, &g, nf->kind, nf->log->pts[i].bytes);
        ape[i] = 100.0 * fabs(tm - nf->log->pts[i].time_s) / nf->log->pts[i].time_s;
    }
    return SIM_OK;
}

int calibrate_nccl(const nccl_log *log, const char *const *overrides, const calib_opts *o,
                   calib_result *res, sim_err *err)
{
    memset(res, 0, sizeof *res);
    bool have_topo = false, have_gpus = false;
    for (const char *const *ov = overrides; ov && *ov; ov++) {
        have_topo = have_topo || !strncmp(*ov, "cluster.topology=", 17);
        have_gpus = have_gpus || !strncmp(*ov, "cluster.num_gpus=", 17);
    }
    if (!have_topo)
        return sim_err_set(err, SIM_EINVAL,
                           "--nccl-tests needs the system: cluster.topology=NAME (and "
                           "cluster.num_gpus=N if the log has no '# Rank' lines)");
    if (!have_gpus && log->ranks < 2)
        return sim_err_set(err, SIM_EINVAL,
                           "the log does not list its ranks: give cluster.num_gpus=N");
    ncclfit nf = { .log = log, .overrides = overrides, .o = o, .res = res };
    bool known = false;
    for (size_t k = 0; k < sizeof nccl_ops / sizeof nccl_ops[0]; k++)
        if (!strcmp(log->op, nccl_ops[k].op)) {
            nf.kind = nccl_ops[k].kind;
            known = true;
        }
    if (!known)
        return sim_err_set(err, SIM_EINVAL,
                           "collective '%s' of the log is not one parsim models (all_reduce, "
                           "all_gather, reduce_scatter, alltoall, broadcast, sendrecv): give "
                           "--op",
                           log->op[0] ? log->op : "(not stated)");

    /* the system as given, to know which tier the group uses */
    cluster_spec c;
    group_span g;
    int rc = nccl_system(&nf, NULL, &c, &g, err);
    if (rc != SIM_OK)
        return rc;
    snprintf(res->topology, sizeof res->topology, "%s", c.name);
    res->loss = o->loss;
    cfg_t *cfg;
    run_inputs in;
    if ((rc = nccl_cfg(&nf, NULL, &cfg, &in, err)) != SIM_OK)
        return rc;
    if (o->params)
        rc = parse_param_list(o->params, res, err);
    else {
        /* the tier the group runs on: its bandwidths and per-step latency,
         * the first key of each role that this topology has */
        static const char *const nvlink_roles[][3] = {
            { "cluster.nvlink.bw_gbytes_per_s", NULL },
            { "cluster.nvlink.nvls_bw_gbytes_per_s", NULL },
            { "cluster.nccl.nvlink_latency_us.ring+cluster.nccl.nvlink_latency_us.tree",
              "cluster.nvlink.latency_us", NULL },
        };
        static const char *const scaleout_roles[][3] = {
            { "cluster.scaleout.nic_bw_gbytes_per_s", "cluster.scaleout.bw_gbytes_per_s", NULL },
            { "cluster.nccl.net_latency_us.ring+cluster.nccl.net_latency_us.tree",
              "cluster.scaleout.latency_us", NULL },
            { NULL },
        };
        const char *const(*roles)[3] = g.in_nvlink_domain ? nvlink_roles : scaleout_roles;
        for (int r = 0; r < 3 && roles[r][0] && rc == SIM_OK; r++)
            for (int k = 0; k < 3 && roles[r][k]; k++) {
                /* every key of a KEY+KEY must exist */
                char keys[300];
                snprintf(keys, sizeof keys, "%s", roles[r][k]);
                bool all = true;
                for (char *save, *t = strtok_r(keys, "+", &save); t && all;
                     t = strtok_r(NULL, "+", &save))
                    all = has_key(cfg, t);
                if (all) {
                    rc = add_param(res, roles[r][k], strlen(roles[r][k]), err);
                    break;
                }
            }
        if (rc == SIM_OK && res->n_params == 0)
            rc = sim_err_set(err, SIM_EINVAL,
                             "topology %s has none of the bandwidth and latency keys calibrate "
                             "knows: name them with --params",
                             c.name);
    }
    if (rc == SIM_OK)
        rc = read_starts(cfg, res, err);
    cfg_destroy(cfg);
    if (rc != SIM_OK)
        return rc;

    size_t *pts = calloc(log->n ? log->n : 1, sizeof *pts);
    bool *is_train = calloc(log->n ? log->n : 1, sizeof *is_train);
    bool *is_eval = calloc(log->n ? log->n : 1, sizeof *is_eval);
    double *ape0 = calloc(log->n ? log->n : 1, sizeof *ape0);
    double *ape1 = calloc(log->n ? log->n : 1, sizeof *ape1);
    if (!pts || !is_train || !is_eval || !ape0 || !ape1) {
        rc = sim_err_set(err, SIM_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < log->n; i++) {
        bool tr = o->train_half < 0 || (int)(i % 2) == o->train_half;
        is_train[i] = tr;
        is_eval[i] = !tr;
        if (tr)
            pts[nf.npts++] = i;
        else
            res->n_eval++;
    }
    nf.pts = pts;
    res->n_train = nf.npts;
    snprintf(res->source, sizeof res->source,
             "nccl-tests %s, %lld ranks on %lld node%s%s%s, %zu measurements (%s)", log->op,
             (long long)c.num_gpus, (long long)g.nodes, g.nodes > 1 ? "s" : "",
             log->gpu[0] ? ", " : "", log->gpu, log->n,
             g.in_nvlink_domain ? "one NVLink domain" : "across the scale-out network");

    double v[CALIB_MAX_PARAMS];
    for (size_t k = 0; k < res->n_params; k++)
        v[k] = res->p[k].start;
    if ((rc = nccl_ape(&nf, v, ape0, err)) != SIM_OK)
        goto out;
    fitprob fp = { .n = nf.npts, .res = res, .fn = nccl_resid, .ctx = &nf, .log = o->log,
                   .max_iter = o->max_iter, .huber = loss_delta(o->loss), .rc = SIM_OK };
    if ((rc = run_fit(&fp, err)) != SIM_OK)
        goto out;
    for (size_t k = 0; k < res->n_params; k++)
        v[k] = res->p[k].value;
    if ((rc = nccl_ape(&nf, v, ape1, err)) != SIM_OK)
        goto out;
    stats_of(ape0, is_train, log->n, &res->train_before);
    stats_of(ape1, is_train, log->n, &res->train_after);
    stats_of(ape0, is_eval, log->n, &res->eval_before);
    stats_of(ape1, is_eval, log->n, &res->eval_after);
out:
    free(pts);
    free(is_train);
    free(is_eval);
    free(ape0);
    free(ape1);
    return rc;
}

/* ------------------------------------------------------------ output */

static void print_stats_line(FILE *out, const char *prefix, const char *what, const vstats *b,
                             const vstats *a)
{
    fprintf(out, "%s%-10s %4zu   median %6.2f -> %6.2f   p90 %6.2f -> %6.2f   mean %6.2f -> %6.2f\n",
            prefix, what, b->n, b->median, a->median, b->p90, a->p90, b->mean, a->mean);
}

/* "(0, 1]" or "[0, 1e+06]": the range of a parameter's value. */
static void range_str(const calib_param *p, char *buf, size_t len)
{
    snprintf(buf, len, "%s%.6g, %.6g]", p->lo_open ? "(" : "[", p->lo, p->hi);
}

/* "at the upper bound 1 of (0, 1]" for a parameter that ended at one; "". */
static void bound_str(const calib_param *p, int at, double value, char *buf, size_t len)
{
    char range[64];
    range_str(p, range, sizeof range);
    if (at == 0)
        buf[0] = '\0';
    else
        snprintf(buf, len, "at the %s bound %.6g of %s", at < 0 ? "lower" : "upper", value, range);
}

static void print_err_line(FILE *out, const char *what, size_t nrows, const calib_err *b,
                           const calib_err *a)
{
    fprintf(out, "  %-34s %4zu   median %6.2f -> %6.2f   p90 %6.2f -> %6.2f   signed %+7.2f -> %+7.2f\n",
            what, nrows, b->ape.median, a->ape.median, b->ape.p90, a->ape.p90, b->bias, a->bias);
}

/* Both held-out halves: one line each, then validate's summary groups of
 * the held-out rows of each. */
static void report_halves(FILE *out, const calib_result *res)
{
    fprintf(out, "\n  held out, both ways (APE %% and median signed error %%, start -> fitted; + = "
                 "optimistic)\n");
    for (int h = 0; h < 2; h++) {
        const calib_half *hf = &res->half[h];
        char what[96];
        snprintf(what, sizeof what, "%s, fitted on %s:", h == 0 ? "odd configs" : "even configs",
                 h == 0 ? "even" : "odd");
        if (!hf->fitted) {
            fprintf(out, "  %-34s not fitted (%s)\n", what, hf->why);
            continue;
        }
        print_err_line(out, what, hf->n_eval, &hf->before, &hf->after);
        fprintf(out, "  %34s %zu rows, %zu configurations fitted;", "", hf->n_train, hf->n_configs);
        for (size_t k = 0; k < res->n_params; k++) {
            const calib_param *p = &res->p[k];
            const char *dot = strrchr(p->sub[0].key, '.');
            char b[128];
            bound_str(p, hf->at_bound[k], hf->value[k], b, sizeof b);
            fprintf(out, " %s%s = %.6g%s%s", dot ? dot + 1 : p->key, p->nsub > 1 ? "+" : "",
                    hf->value[k], b[0] ? " " : "", b);
        }
        fputc('\n', out);
    }
    if (!res->cases)
        return;
    vcase *cs = malloc((res->ncases ? res->ncases : 1) * sizeof *cs);
    vpred *ps = malloc((res->ncases ? res->ncases : 1) * sizeof *ps);
    for (int h = 0; h < 2 && cs && ps; h++) {
        if (!res->half[h].fitted)
            continue;
        size_t k = 0;
        for (size_t r = 0; r < res->ncases; r++)
            if (res->heldout[r].ok && (int)(res->cases[r].run % 2) != h) {
                cs[k] = res->cases[r];
                ps[k++] = res->heldout[r];
            }
        fprintf(out, "\n  held out: the %s configurations, predicted with the fit of the %s "
                     "ones\n\n",
                h == 0 ? "odd" : "even", h == 0 ? "even" : "odd");
        validate_summary(out, cs, ps, k);
    }
    free(cs);
    free(ps);
}

void calibrate_report(FILE *out, const calib_result *res)
{
    fprintf(out, "calibrate: %s\n", res->source);
    fprintf(out, "  topology %s; %zu iterations (%s); chi^2 = %.6g over %.0f degrees of freedom\n",
            res->topology, res->iterations,
            res->gsl_status == GSL_SUCCESS ? "converged"
            : res->gsl_status == GSL_EMAXITER ? "stopped at --max-iter"
                                              : "no further progress",
            res->chi2, res->dof);
    fprintf(out, "\n  %-52s %10s %10s %12s\n", "parameter", "start", "fitted", "+- 1 sigma");
    for (size_t k = 0; k < res->n_params; k++) {
        const calib_param *p = &res->p[k];
        for (int j = 0; j < p->nsub; j++) {
            char name[200];
            snprintf(name, sizeof name, "%s%s", p->sub[j].key,
                     j + 1 < p->nsub ? " +" : p->is_scale ? " (scale)" : "");
            if (j + 1 < p->nsub) {
                fprintf(out, "  %s\n", name);
                continue;
            }
            fprintf(out, "  %-52s %10.6g %10.6g ", name, p->start, p->value);
            if (p->fixed)
                fprintf(out, "%12s\n", "(not constrained: kept)");
            else if (p->at_bound)
                fprintf(out, "%12s\n", "(at a bound)");
            else if (isnan(p->sigma))
                fprintf(out, "%12s\n", "(unknown)");
            else
                fprintf(out, "%12.3g\n", p->sigma);
        }
    }
    for (size_t k = 0; k < res->n_params; k++) {
        char b[128];
        bound_str(&res->p[k], res->p[k].at_bound, res->p[k].value, b, sizeof b);
        if (b[0])
            fprintf(out, "  %s ended %s: the data want a value the physics does not allow "
                         "(a missing effect, not this parameter)\n",
                    res->p[k].key, b);
    }
    fprintf(out, "\n  absolute percent error, before -> after\n");
    print_stats_line(out, "  ", "fitted", &res->train_before, &res->train_after);
    if (res->n_eval)
        print_stats_line(out, "  ", "held out", &res->eval_before, &res->eval_after);
    if (res->cases) {
        fprintf(out, "  median signed error of the fitted rows %+.2f -> %+.2f %%\n",
                res->train_bias_before, res->train_bias_after);
        report_halves(out, res);
    }
}

/* Writes v as a libconfig float. */
static void put_float(FILE *out, double v)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%.6g", v);
    if (!strpbrk(buf, ".eEn"))
        strcat(buf, ".0");
    fputs(buf, out);
}

/* One key of the file: where it comes from and its fitted value. */
typedef struct outkey {
    const calib_param *p;
    const calib_sub *sub;
} outkey;

static int outkey_cmp(const void *a, const void *b)
{
    return strcmp(((const outkey *)a)->sub->key, ((const outkey *)b)->sub->key);
}

static void put_sub_value(FILE *out, const calib_param *p, const calib_sub *sb)
{
    if (!p->is_scale) {
        put_float(out, p->value);
        return;
    }
    if (sb->nlist == 0) {
        put_float(out, sb->scalar * p->value);
        return;
    }
    fputc('[', out);
    for (int i = 0; i < sb->nlist; i++) {
        if (i)
            fputs(", ", out);
        put_float(out, sb->list[i] * p->value);
    }
    fputc(']', out);
}

static void put_sub_start(FILE *out, const calib_param *p, const calib_sub *sb)
{
    if (!p->is_scale)
        fprintf(out, "%.6g", p->start);
    else if (sb->nlist == 0)
        fprintf(out, "%.6g", sb->scalar);
    else {
        fputc('[', out);
        for (int i = 0; i < sb->nlist; i++)
            fprintf(out, "%s%.6g", i ? ", " : "", sb->list[i]);
        fputc(']', out);
    }
}

void calibrate_write_params(FILE *out, const calib_result *res, time_t when)
{
    struct tm tmv;
    char date[32] = "";
    if (gmtime_r(&when, &tmv))
        strftime(date, sizeof date, "%Y-%m-%d", &tmv);
    fprintf(out, "# parsim calibrate, %s: cost-model parameters fitted to measurements.\n", date);
    fprintf(out, "#   data: %s\n", res->source);
    fprintf(out, "#   topology: %s -- load this file above it: parsim run ... "
                 "cluster.topology=%s sim.params=THIS_FILE\n",
            res->topology, res->topology);
    if (res->loss == CALIB_LOSS_SQUARED)
        fprintf(out, "#   fit: GSL multifit_nlinear (trust region, Levenberg-Marquardt), squares of "
                     "the residual log(predicted/measured),\n");
    else
        fprintf(out, "#   fit: GSL multifit_nlinear (trust region, Levenberg-Marquardt), absolute "
                     "residual log(predicted/measured)\n#        (Huber, quadratic below %g),\n",
                CALIB_HUBER_DELTA);
    fprintf(out, "#        %zu iterations, chi^2/dof = %.4g\n", res->iterations, res->dof > 0 ? res->chi2 / res->dof : NAN);
    fprintf(out, "#   error (APE %%) before -> after: fitted median %.2f -> %.2f, p90 %.2f -> %.2f",
            res->train_before.median, res->train_after.median, res->train_before.p90,
            res->train_after.p90);
    if (res->n_eval)
        fprintf(out, "; held out median %.2f -> %.2f, p90 %.2f -> %.2f", res->eval_before.median,
                res->eval_after.median, res->eval_before.p90, res->eval_after.p90);
    fputc('\n', out);
    for (int h = 0; h < 2 && res->cases; h++) {
        const calib_half *hf = &res->half[h];
        if (!hf->fitted)
            fprintf(out, "#   held out, %s configurations: not fitted (%s)\n",
                    h == 0 ? "odd" : "even", hf->why);
        else
            fprintf(out, "#   held out, %s configurations (fit of the %s, %zu configurations): "
                         "median %.2f -> %.2f, p90 %.2f -> %.2f, signed %+.2f -> %+.2f\n",
                    h == 0 ? "odd" : "even", h == 0 ? "even" : "odd", hf->n_configs,
                    hf->before.ape.median, hf->after.ape.median, hf->before.ape.p90,
                    hf->after.ape.p90, hf->before.bias, hf->after.bias);
    }
    fputs("# Uncertainties are 1 sigma from the fit's covariance scaled by chi^2/dof.\n", out);
    for (size_t k = 0; k < res->n_params; k++)
        if (res->p[k].fixed)
            fprintf(out, "# Not constrained by the data, left at the topology's value: %s\n",
                    res->p[k].key);

    outkey keys[CALIB_MAX_OVERRIDES];
    size_t nk = 0;
    for (size_t k = 0; k < res->n_params; k++)
        for (int j = 0; j < res->p[k].nsub && !res->p[k].fixed; j++)
            keys[nk++] = (outkey){ &res->p[k], &res->p[k].sub[j] };
    qsort(keys, nk, sizeof *keys, outkey_cmp);
    /* nested groups from the dotted keys */
    char open[8][64];
    int depth = 0;
    for (size_t k = 0; k < nk; k++) {
        char parts[8][64];
        int np = 0;
        for (const char *s = keys[k].sub->key; *s && np < 8;) {
            size_t n = strcspn(s, ".");
            snprintf(parts[np++], sizeof parts[0], "%.*s", (int)(n < 63 ? n : 63), s);
            s += n;
            if (*s == '.')
                s++;
        }
        int common = 0;
        while (common < depth && common < np - 1 && !strcmp(open[common], parts[common]))
            common++;
        while (depth > common) {
            depth--;
            fprintf(out, "%*s};\n", 2 * depth, "");
        }
        while (depth < np - 1) {
            fprintf(out, "%*s%s: {\n", 2 * depth, "", parts[depth]);
            snprintf(open[depth], sizeof open[0], "%s", parts[depth]);
            depth++;
        }
        const calib_param *cp = keys[k].p;
        fprintf(out, "%*s%s = ", 2 * depth, "", parts[np - 1]);
        put_sub_value(out, cp, keys[k].sub);
        fputs(";  # ", out);
        if (cp->is_scale)
            fprintf(out, "x %.4g of the start ", cp->value);
        char b[128];
        bound_str(cp, cp->at_bound, cp->value, b, sizeof b);
        if (b[0])
            fputs(b, out);
        else if (isnan(cp->sigma))
            fputs("(uncertainty unknown)", out);
        else
            fprintf(out, "+- %.3g", cp->sigma);
        fputs("; was ", out);
        put_sub_start(out, cp, keys[k].sub);
        fputc('\n', out);
    }
    while (depth > 0) {
        depth--;
        fprintf(out, "%*s};\n", 2 * depth, "");
    }
}
