/* sweep: spec loading, one row per configuration, the threaded runner with
 * its reorder buffer, and resuming an output file.  The format and the
 * ordering contract are in sweep.h.
 *
 * Cost.  Each configuration builds a fresh cfg_t (reading the base file and
 * the presets again) and simulates one step: the files are a few KiB, so
 * parsing costs tens of microseconds against milliseconds of simulation.
 * Sharing one parsed base between threads would need a cfg_clone; it is not
 * worth it at these ratios.
 */
#include "sweep.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <libconfig.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "filecache.h"
#include "bounds.h"
#include "handover.h"
#include "infile.h"
#include "outfile.h"
#include "report.h"
#include "step.h"
#include "strategy.h"

/* Rows each worker may run ahead of the oldest unwritten one. */
#define REORDER_PER_JOB 4

#define CMDLINE_ORIGIN "command line" /* what config.c names overrides */

typedef struct sweep_value {
    char *ovr;  /* "key=value" as an override */
    char *cell; /* the CSV cell, escaped */
} sweep_value;

typedef struct sweep_axis {
    int nkeys;      /* keys varied together (1 for a key axis) */
    int first_col;  /* index of its first key in sweep.keys */
    int64_t n;      /* values (or rows) */
    bool range;     /* values made from a range: numbers in one syntax */
    sweep_value *v; /* n * nkeys, row-major */
} sweep_axis;

struct sweep {
    char *path;       /* the spec file */
    char *data_dir;   /* NULL = cfg_create's default */
    char *base;       /* run config to start from, NULL if none */
    char **set;       /* fixed overrides */
    int nset;
    char **keys;      /* swept keys, in column order */
    int *key_lines;   /* spec line of each swept key */
    int nkeys;
    sweep_axis *axes;
    int naxes;
    int64_t total;
    int report_cols;  /* columns of report_csv_row */
    char *header;
    uint64_t spec_hash; /* what line 2 of an output names the spec by */
};

/* --------------------------------------------------------------- strings */

/* Writes s as one CSV cell (RFC 4180: quoted when it holds a comma, quote,
 * newline or edge space). */
static bool cell_needs_quotes(const char *s)
{
    size_t n = strlen(s);
    return strpbrk(s, ",\"\r\n") != NULL || (n && (isspace((unsigned char)s[0]) || isspace((unsigned char)s[n - 1])));
}

static void csv_cell(FILE *out, const char *s)
{
    if (!cell_needs_quotes(s)) {
        fputs(s, out);
        return;
    }
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', out);
        fputc(*s == '\n' || *s == '\r' ? ' ' : *s, out);
    }
    fputc('"', out);
}

/* Builds a string with a memstream writer; NULL when out of memory. */
typedef struct strbuf {
    FILE *f;
    char *buf;
    size_t len;
} strbuf;

static bool sb_open(strbuf *sb)
{
    sb->buf = NULL;
    sb->len = 0;
    sb->f = open_memstream(&sb->buf, &sb->len);
    return sb->f != NULL;
}

/* Closes the stream and returns the string (caller frees), NULL on failure. */
static char *sb_close(strbuf *sb)
{
    int bad = ferror(sb->f);
    if (fclose(sb->f) != 0 || bad) {
        free(sb->buf);
        return NULL;
    }
    return sb->buf;
}

/* Shortest decimal text that reads back as v, always with a '.' or an
 * exponent so it stays a float. */
static void fmt_float(char *buf, size_t len, double v)
{
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, len, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    if (!strpbrk(buf, ".eE"))
        snprintf(buf + strlen(buf), len - strlen(buf), ".0");
}

/* Writes a string in override syntax: quoted, with \" and \\ escaped. */
static void ovr_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', out);
        fputc(*s, out);
    }
    fputc('"', out);
}

/* ------------------------------------------------------------ spec values */

static int spec_err(sim_err *err, const sweep_t *sw, int line, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int spec_err(sim_err *err, const sweep_t *sw, int line, const char *key, const char *fmt, ...)
{
    char msg[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return sim_err_set_at(err, SIM_EINVAL, sw->path, line, key, "%s", msg);
}

static int line_of(const config_setting_t *s)
{
    return (int)config_setting_source_line(s);
}

static bool is_int(const config_setting_t *s)
{
    int t = config_setting_type(s);
    return t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64;
}

/* Makes value (override and cell) for key from text in override syntax. */
static int value_set(sweep_value *v, const char *key, const char *ovr_text, const char *cell_text)
{
    size_t n = strlen(key) + strlen(ovr_text) + 2;
    v->ovr = malloc(n);
    if (!v->ovr)
        return SIM_ENOMEM;
    snprintf(v->ovr, n, "%s=%s", key, ovr_text);
    /* most cells (numbers, names) need no quotes: no stream for them */
    strbuf sb;
    if (!cell_needs_quotes(cell_text))
        v->cell = strdup(cell_text);
    else if (sb_open(&sb)) {
        csv_cell(sb.f, cell_text);
        v->cell = sb_close(&sb);
    }
    return v->cell ? SIM_OK : SIM_ENOMEM;
}

/* Converts one libconfig value (scalar, or an array/list of integers or of
 * strings for a list-valued key) into a sweep value. */
static int value_from_setting(const sweep_t *sw, const config_setting_t *s, const char *key, sweep_value *v,
                              sim_err *err)
{
    char num[64];
    switch (config_setting_type(s)) {
    case CONFIG_TYPE_INT:
    case CONFIG_TYPE_INT64:
        snprintf(num, sizeof num, "%lld", config_setting_get_int64(s));
        return value_set(v, key, num, num);
    case CONFIG_TYPE_FLOAT:
        fmt_float(num, sizeof num, config_setting_get_float(s));
        return value_set(v, key, num, num);
    case CONFIG_TYPE_BOOL:
        return value_set(v, key, config_setting_get_bool(s) ? "true" : "false",
                         config_setting_get_bool(s) ? "true" : "false");
    case CONFIG_TYPE_STRING: {
        strbuf sb;
        if (!sb_open(&sb))
            return SIM_ENOMEM;
        ovr_string(sb.f, config_setting_get_string(s));
        char *o = sb_close(&sb);
        if (!o)
            return SIM_ENOMEM;
        int rc = value_set(v, key, o, config_setting_get_string(s));
        free(o);
        return rc;
    }
    case CONFIG_TYPE_ARRAY:
    case CONFIG_TYPE_LIST: {
        /* override text ["a", "b"]; the cell shows [a, b] */
        strbuf sb, cb;
        if (!sb_open(&sb))
            return SIM_ENOMEM;
        if (!sb_open(&cb)) {
            free(sb_close(&sb));
            return SIM_ENOMEM;
        }
        fputc('[', sb.f);
        fputc('[', cb.f);
        int n = config_setting_length(s);
        int rc = SIM_OK;
        for (int k = 0; k < n && rc == SIM_OK; k++) {
            const config_setting_t *el = config_setting_get_elem(s, (unsigned)k);
            if (k) {
                fputs(", ", sb.f);
                fputs(", ", cb.f);
            }
            if (is_int(el)) {
                fprintf(sb.f, "%lld", config_setting_get_int64(el));
                fprintf(cb.f, "%lld", config_setting_get_int64(el));
            } else if (config_setting_type(el) == CONFIG_TYPE_STRING) {
                ovr_string(sb.f, config_setting_get_string(el));
                fputs(config_setting_get_string(el), cb.f);
            } else {
                rc = spec_err(err, sw, line_of(el), key, "a list value holds integers or strings only");
            }
        }
        fputc(']', sb.f);
        fputc(']', cb.f);
        char *o = sb_close(&sb), *c = sb_close(&cb);
        if (rc == SIM_OK)
            rc = (o && c) ? value_set(v, key, o, c) : SIM_ENOMEM;
        free(o);
        free(c);
        return rc;
    }
    default:
        return spec_err(err, sw, line_of(s), key, "a value is a number, true/false, a string or a list");
    }
}

/* ------------------------------------------------------------ spec checks */

/* True if the key is in parsim's key table.  Asks config itself: a scratch
 * cfg holding only this override is resolved and must not fail with
 * "unknown key" on it (config.h has no lookup of its own yet).  msg gets
 * config's message, with its "did you mean". */
static bool key_known(const sweep_t *sw, const char *ovr, const char *key, char *msg, size_t len)
{
    cfg_t *c = cfg_create(sw->data_dir);
    if (!c)
        return true; /* out of memory: the run will say so */
    sim_err e;
    sim_err_clear(&e);
    run_inputs in;
    bool ok = true;
    if (cfg_set_override(c, ovr, &e) == SIM_OK && cfg_resolve(c, &in, &e) != SIM_OK &&
        !strcmp(e.key, key) && !strncmp(e.msg, "unknown key", 11)) {
        ok = false;
        snprintf(msg, len, "%s", e.msg);
    }
    cfg_destroy(c);
    return ok;
}

/* Checks that an override parses (config's own syntax rules). */
static int check_override(const sweep_t *sw, const char *ovr, int line, const char *key, sim_err *err)
{
    cfg_t *c = cfg_create(sw->data_dir);
    if (!c)
        return sim_err_set(err, SIM_ENOMEM, "out of memory");
    sim_err e;
    sim_err_clear(&e);
    int rc = cfg_set_override(c, ovr, &e);
    cfg_destroy(c);
    if (rc == SIM_ENOMEM)
        return sim_err_set(err, SIM_ENOMEM, "out of memory");
    if (rc != SIM_OK)
        return spec_err(err, sw, line, e.key[0] ? e.key : key, "%s", e.msg);
    return SIM_OK;
}

static int add_key(sweep_t *sw, const char *key, int line, sim_err *err)
{
    /* a key is the part of an override before its '=' */
    if (strchr(key, '='))
        return spec_err(err, sw, line, key, "a key name cannot hold '='");
    for (int k = 0; k < sw->nkeys; k++)
        if (!strcmp(sw->keys[k], key))
            return spec_err(err, sw, line, key, "swept twice (first at line %d)", sw->key_lines[k]);
    for (int k = 0; k < sw->nset; k++) {
        size_t n = strlen(key);
        if (!strncmp(sw->set[k], key, n) && sw->set[k][n] == '=')
            return spec_err(err, sw, line, key, "both fixed in `set` and swept");
    }
    char **keys = realloc(sw->keys, (size_t)(sw->nkeys + 1) * sizeof *keys);
    if (keys)
        sw->keys = keys;
    int *lines = realloc(sw->key_lines, (size_t)(sw->nkeys + 1) * sizeof *lines);
    if (lines)
        sw->key_lines = lines;
    if (!keys || !lines || !(sw->keys[sw->nkeys] = strdup(key)))
        return sim_err_set(err, SIM_ENOMEM, "out of memory");
    sw->key_lines[sw->nkeys++] = line;
    return SIM_OK;
}

/* ------------------------------------------------------------------ axes */

/* A `from`/`to`/`step`|`mul` range, read and counted. */
typedef struct range {
    bool ints, mul;
    int64_t fi, ti, si, mi; /* integer range: from, to, step, mul */
    double fd, td, sd, md;  /* the same as numbers */
    int64_t n;              /* values, 1..LIMIT_SWEEP_CONFIGS */
} range;

static int too_many(const sweep_t *sw, int line, const char *key, sim_err *err)
{
    return spec_err(err, sw, line, key, "range has more than %lld values (the limit of a sweep)",
                    LIMIT_SWEEP_CONFIGS);
}

/* Counts an integer range without overflowing: the distance from `from`
 * to `to` is taken unsigned (it may exceed INT64_MAX), and a mul range
 * stops before the product that would overflow. */
static int int_range_count(const sweep_t *sw, int line, const char *key, range *r, sim_err *err)
{
    if (r->mul) {
        if (r->mi < 2 || r->fi < 1 || r->fi > r->ti)
            return spec_err(err, sw, line, key, "a mul range needs mul >= 2 and 1 <= from <= to");
        r->n = 1;
        for (int64_t x = r->fi, y; !__builtin_mul_overflow(x, r->mi, &y) && y <= r->ti; x = y)
            r->n++;
        return SIM_OK;
    }
    if (r->si == 0 || (r->si > 0 && r->fi > r->ti) || (r->si < 0 && r->fi < r->ti))
        return spec_err(err, sw, line, key, "step must be nonzero and lead from `from` to `to`");
    uint64_t span = r->si > 0 ? (uint64_t)r->ti - (uint64_t)r->fi : (uint64_t)r->fi - (uint64_t)r->ti;
    uint64_t mag = r->si > 0 ? (uint64_t)r->si : 0 - (uint64_t)r->si;
    if (span / mag >= (uint64_t)LIMIT_SWEEP_CONFIGS)
        return too_many(sw, line, key, err);
    r->n = (int64_t)(span / mag) + 1;
    return SIM_OK;
}

static int float_range_count(const sweep_t *sw, int line, const char *key, range *r, sim_err *err)
{
    double n;
    if (r->mul) {
        if (!(r->md > 1) || !(r->fd > 0) || r->fd > r->td)
            return spec_err(err, sw, line, key, "a mul range needs mul > 1 and 0 < from <= to");
        n = floor(log(r->td / r->fd) / log(r->md) + 1e-9) + 1;
    } else {
        if (r->sd == 0 || (r->sd > 0 && r->fd > r->td) || (r->sd < 0 && r->fd < r->td))
            return spec_err(err, sw, line, key, "step must be nonzero and lead from `from` to `to`");
        n = floor((r->td - r->fd) / r->sd + 1e-9) + 1;
    }
    /* n is NaN or infinite when to - from or to / from overflows */
    if (!(n >= 1 && n <= (double)LIMIT_SWEEP_CONFIGS))
        return too_many(sw, line, key, err);
    r->n = (int64_t)n;
    return SIM_OK;
}

/* Reads and counts the range of axis group g (key for messages). */
static int range_read(const sweep_t *sw, const config_setting_t *g, const char *key, range *r, sim_err *err)
{
    memset(r, 0, sizeof *r);
    int line = line_of(g);
    const config_setting_t *from = config_setting_get_member(g, "from");
    const config_setting_t *to = config_setting_get_member(g, "to");
    const config_setting_t *step = config_setting_get_member(g, "step");
    const config_setting_t *mul = config_setting_get_member(g, "mul");
    if (!from || !to)
        return spec_err(err, sw, line, key, "an axis needs `values` or a range (from, to, step|mul)");
    if (step && mul)
        return spec_err(err, sw, line, key, "give `step` or `mul`, not both");
    const config_setting_t *parts[] = { from, to, step, mul };
    r->ints = true;
    for (int k = 0; k < 4; k++) {
        if (!parts[k])
            continue;
        int t = config_setting_type(parts[k]);
        if (t != CONFIG_TYPE_INT && t != CONFIG_TYPE_INT64 && t != CONFIG_TYPE_FLOAT)
            return spec_err(err, sw, line_of(parts[k]), key, "range bounds and steps are numbers");
        r->ints = r->ints && t != CONFIG_TYPE_FLOAT;
    }
    r->mul = mul != NULL;
    int64_t *iv[] = { &r->fi, &r->ti, &r->si, &r->mi };
    double *dv[] = { &r->fd, &r->td, &r->sd, &r->md };
    r->si = 1;
    r->sd = 1;
    for (int k = 0; k < 4; k++) {
        if (!parts[k])
            continue;
        if (is_int(parts[k])) {
            *iv[k] = config_setting_get_int64(parts[k]);
            *dv[k] = (double)*iv[k];
        } else {
            *dv[k] = config_setting_get_float(parts[k]);
        }
    }
    return r->ints ? int_range_count(sw, line, key, r, err) : float_range_count(sw, line, key, r, err);
}

/* Value k of a counted range (k < r->n). */
static int range_value(const sweep_t *sw, int line, const char *key, const range *r, int64_t k, char *num,
                       size_t len, sim_err *err)
{
    if (r->ints) {
        int64_t x = r->fi;
        if (r->mul) {
            for (int64_t j = 0; j < k; j++)
                x *= r->mi; /* <= to by the count: no overflow */
        } else {
            /* from + k*step lies between from and to; the unsigned sum
             * wraps where the signed one would overflow on the way */
            x = (int64_t)((uint64_t)r->fi + (uint64_t)k * (uint64_t)r->si);
        }
        snprintf(num, len, "%" PRId64, x);
        return SIM_OK;
    }
    /* from + k*step (or from * mul^k), not a running sum: no drift */
    double x = r->mul ? r->fd * pow(r->md, (double)k) : r->fd + (double)k * r->sd;
    if (!isfinite(x))
        return spec_err(err, sw, line, key, "range value %" PRId64 " overflows", k);
    fmt_float(num, len, x);
    return SIM_OK;
}

/* Fills an axis of one key from `values` or a range. */
static int axis_from_key(sweep_t *sw, const config_setting_t *g, sweep_axis *ax, sim_err *err)
{
    const char *key = NULL;
    config_setting_lookup_string(g, "key", &key);
    int line = line_of(g);
    const config_setting_t *vals = config_setting_get_member(g, "values");
    int rc = add_key(sw, key, line, err);
    if (rc)
        return rc;
    ax->nkeys = 1;
    ax->first_col = sw->nkeys - 1;

    if (vals) {
        if (config_setting_get_member(g, "from") || config_setting_get_member(g, "to") ||
            config_setting_get_member(g, "step") || config_setting_get_member(g, "mul"))
            return spec_err(err, sw, line, key, "give `values` or a range (from, to, step|mul), not both");
        int t = config_setting_type(vals);
        if (t != CONFIG_TYPE_ARRAY && t != CONFIG_TYPE_LIST)
            return spec_err(err, sw, line_of(vals), key, "`values` is a list: [1, 2, 4]");
        ax->n = config_setting_length(vals);
        if (ax->n == 0)
            return spec_err(err, sw, line_of(vals), key, "`values` is empty");
        ax->v = calloc((size_t)ax->n, sizeof *ax->v);
        if (!ax->v)
            return sim_err_set(err, SIM_ENOMEM, "out of memory");
        for (int64_t k = 0; k < ax->n; k++) {
            const config_setting_t *el = config_setting_get_elem(vals, (unsigned)k);
            if ((rc = value_from_setting(sw, el, key, &ax->v[k], err)))
                return rc == SIM_ENOMEM ? sim_err_set(err, rc, "out of memory") : rc;
        }
        return SIM_OK;
    }
    range r;
    if ((rc = range_read(sw, g, key, &r, err)))
        return rc;
    ax->range = true;
    ax->n = r.n;
    ax->v = calloc((size_t)ax->n, sizeof *ax->v);
    if (!ax->v)
        return sim_err_set(err, SIM_ENOMEM, "out of memory");
    for (int64_t k = 0; k < ax->n; k++) {
        char num[64];
        if ((rc = range_value(sw, line, key, &r, k, num, sizeof num, err)))
            return rc;
        if (value_set(&ax->v[k], key, num, num))
            return sim_err_set(err, SIM_ENOMEM, "out of memory");
    }
    return SIM_OK;
}

/* The length of axis group g from its settings alone, before anything is
 * expanded; 0 if it is malformed (its expansion then says why). */
static int64_t axis_length(const sweep_t *sw, const config_setting_t *g)
{
    if (config_setting_type(g) != CONFIG_TYPE_GROUP)
        return 0;
    const config_setting_t *list = config_setting_get_member(g, "values");
    if (!list)
        list = config_setting_get_member(g, "rows");
    if (list) {
        int t = config_setting_type(list);
        return (t == CONFIG_TYPE_ARRAY || t == CONFIG_TYPE_LIST) ? config_setting_length(list) : 0;
    }
    range r;
    sim_err scratch;
    sim_err_clear(&scratch);
    return range_read(sw, g, NULL, &r, &scratch) == SIM_OK ? r.n : 0;
}

/* Fills a zipped axis (a listed set) from `keys` and `rows`. */
static int axis_from_rows(sweep_t *sw, const config_setting_t *g, sweep_axis *ax, sim_err *err)
{
    const config_setting_t *keys = config_setting_get_member(g, "keys");
    const config_setting_t *rows = config_setting_get_member(g, "rows");
    int line = line_of(g);
    if (config_setting_get_member(g, "values") || config_setting_get_member(g, "from") ||
        config_setting_get_member(g, "to") || config_setting_get_member(g, "step") ||
        config_setting_get_member(g, "mul"))
        return spec_err(err, sw, line, NULL, "an axis with `keys` takes `rows`, not values or a range");
    if (!rows)
        return spec_err(err, sw, line, NULL, "`keys` needs `rows`, e.g. rows = ( (8, 4), (4, 8) );");
    int kt = config_setting_type(keys), rt = config_setting_type(rows);
    int nk = (kt == CONFIG_TYPE_ARRAY || kt == CONFIG_TYPE_LIST) ? config_setting_length(keys) : 0;
    if (nk == 0)
        return spec_err(err, sw, line_of(keys), NULL, "`keys` is a non-empty list of key names");
    if (rt != CONFIG_TYPE_LIST && rt != CONFIG_TYPE_ARRAY)
        return spec_err(err, sw, line_of(rows), NULL, "`rows` is a list of rows, e.g. ( (8, 4), (4, 8) )");
    ax->nkeys = nk;
    ax->first_col = sw->nkeys;
    for (int k = 0; k < nk; k++) {
        const config_setting_t *ks = config_setting_get_elem(keys, (unsigned)k);
        if (config_setting_type(ks) != CONFIG_TYPE_STRING)
            return spec_err(err, sw, line_of(ks), NULL, "`keys` holds key names (strings)");
        int rc = add_key(sw, config_setting_get_string(ks), line_of(ks), err);
        if (rc)
            return rc;
    }
    ax->n = config_setting_length(rows);
    if (ax->n == 0)
        return spec_err(err, sw, line_of(rows), NULL, "`rows` is empty");
    ax->v = calloc((size_t)(ax->n * nk), sizeof *ax->v);
    if (!ax->v)
        return sim_err_set(err, SIM_ENOMEM, "out of memory");
    for (int64_t r = 0; r < ax->n; r++) {
        const config_setting_t *row = config_setting_get_elem(rows, (unsigned)r);
        int t = config_setting_type(row);
        if ((t != CONFIG_TYPE_LIST && t != CONFIG_TYPE_ARRAY) || config_setting_length(row) != nk)
            return spec_err(err, sw, line_of(row), NULL, "row %" PRId64 " must hold %d values, one per key", r,
                            nk);
        for (int k = 0; k < nk; k++) {
            const char *key = sw->keys[ax->first_col + k];
            int rc = value_from_setting(sw, config_setting_get_elem(row, (unsigned)k), key,
                                        &ax->v[r * nk + k], err);
            if (rc)
                return rc == SIM_ENOMEM ? sim_err_set(err, rc, "out of memory") : rc;
        }
    }
    return SIM_OK;
}

/* Rejects settings of a group that are not in names (a typo is an error). */
static int check_members(const sweep_t *sw, const config_setting_t *g, const char *const *names, const char *what,
                         sim_err *err)
{
    int n = config_setting_length(g);
    for (int k = 0; k < n; k++) {
        const config_setting_t *s = config_setting_get_elem(g, (unsigned)k);
        const char *name = config_setting_name(s);
        bool ok = false;
        for (const char *const *p = names; *p && !ok; p++)
            ok = name && !strcmp(name, *p);
        if (!ok)
            return spec_err(err, sw, line_of(s), NULL, "unknown setting `%s` in %s", name ? name : "?", what);
    }
    return SIM_OK;
}

/* The base config: relative to the spec's folder (as @include is), else to
 * the working directory. */
static int find_base(sweep_t *sw, const char *base, int line, sim_err *err)
{
    char cand[2][1024];
    int nc = 0;
    const char *slash = strrchr(sw->path, '/');
    if (base[0] != '/' && slash)
        snprintf(cand[nc++], sizeof cand[0], "%.*s/%s", (int)(slash - sw->path), sw->path, base);
    snprintf(cand[nc++], sizeof cand[0], "%s", base);
    for (int k = 0; k < nc; k++) {
        if (access(cand[k], R_OK) == 0) {
            sw->base = strdup(cand[k]);
            return sw->base ? SIM_OK : sim_err_set(err, SIM_ENOMEM, "out of memory");
        }
    }
    return spec_err(err, sw, line, "base", "cannot open \"%s\" (looked for %s%s%s)", base, cand[0],
                    nc > 1 ? " and " : "", nc > 1 ? cand[1] : "");
}

static int build_header(sweep_t *sw, sim_err *err)
{
    strbuf rep, sb;
    if (!sb_open(&rep))
        return sim_err_set(err, SIM_ENOMEM, "out of memory");
    report_csv_header(rep.f);
    char *r = sb_close(&rep);
    if (!r || !sb_open(&sb)) {
        free(r);
        return sim_err_set(err, SIM_ENOMEM, "out of memory");
    }
    size_t n = strlen(r);
    if (n && r[n - 1] == '\n')
        r[--n] = '\0';
    sw->report_cols = 1;
    for (const char *p = r; *p; p++)
        sw->report_cols += *p == ',';
    fputs("index", sb.f);
    for (int k = 0; k < sw->nkeys; k++) {
        fputc(',', sb.f);
        csv_cell(sb.f, sw->keys[k]);
    }
    fprintf(sb.f, ",%s,overrides,error\n", r);
    free(r);
    sw->header = sb_close(&sb);
    return sw->header ? SIM_OK : sim_err_set(err, SIM_ENOMEM, "out of memory");
}

static int load_spec(sweep_t *sw, config_t *lc, sim_err *err)
{
    const config_setting_t *root = config_root_setting(lc);
    static const char *const top[] = { "sweep", NULL };
    int rc = check_members(sw, root, top, "the spec (everything goes in `sweep: { ... };`)", err);
    if (rc)
        return rc;
    const config_setting_t *g = config_setting_get_member(root, "sweep");
    if (!g || config_setting_type(g) != CONFIG_TYPE_GROUP)
        return spec_err(err, sw, g ? line_of(g) : 1, NULL,
                        "a sweep spec is a group `sweep: { base = ...; set = [...]; vary = (...); };`");
    static const char *const members[] = { "base", "set", "vary", NULL };
    if ((rc = check_members(sw, g, members, "`sweep`", err)))
        return rc;

    const config_setting_t *base = config_setting_get_member(g, "base");
    if (base) {
        if (config_setting_type(base) != CONFIG_TYPE_STRING)
            return spec_err(err, sw, line_of(base), "base", "`base` is the name of a run config file");
        if ((rc = find_base(sw, config_setting_get_string(base), line_of(base), err)))
            return rc;
        cfg_t *c = cfg_create(sw->data_dir);
        if (!c)
            return sim_err_set(err, SIM_ENOMEM, "out of memory");
        rc = cfg_load_file(c, sw->base, CFG_PRIO_FILE, err);
        cfg_destroy(c);
        if (rc)
            return rc;
    }

    const config_setting_t *set = config_setting_get_member(g, "set");
    if (set) {
        int t = config_setting_type(set);
        if (t != CONFIG_TYPE_ARRAY && t != CONFIG_TYPE_LIST)
            return spec_err(err, sw, line_of(set), "set", "`set` is a list of \"KEY=VALUE\" strings");
        int n = config_setting_length(set);
        sw->set = calloc((size_t)n + 1, sizeof *sw->set);
        if (!sw->set)
            return sim_err_set(err, SIM_ENOMEM, "out of memory");
        for (int k = 0; k < n; k++) {
            const config_setting_t *el = config_setting_get_elem(set, (unsigned)k);
            const char *s = config_setting_type(el) == CONFIG_TYPE_STRING ? config_setting_get_string(el) : NULL;
            if (!s || !strchr(s, '='))
                return spec_err(err, sw, line_of(el), "set", "`set` holds \"KEY=VALUE\" strings");
            if ((rc = check_override(sw, s, line_of(el), NULL, err)))
                return rc;
            char key[256];
            snprintf(key, sizeof key, "%.*s", (int)(strchr(s, '=') - s), s);
            char msg[512];
            if (!key_known(sw, s, key, msg, sizeof msg))
                return spec_err(err, sw, line_of(el), key, "%s", msg);
            for (int j = 0; j < k; j++)
                if (!strncmp(sw->set[j], s, strlen(key) + 1))
                    return spec_err(err, sw, line_of(el), key, "set twice");
            if (!(sw->set[sw->nset++] = strdup(s)))
                return sim_err_set(err, SIM_ENOMEM, "out of memory");
        }
    }

    sw->total = 1;
    const config_setting_t *vary = config_setting_get_member(g, "vary");
    if (!vary)
        return SIM_OK;
    if (config_setting_type(vary) != CONFIG_TYPE_LIST)
        return spec_err(err, sw, line_of(vary), "vary",
                        "`vary` is a list of axes: ( { key = \"...\"; values = [...]; }, ... )");
    int na = config_setting_length(vary);
    /* the product of the axes within the limit before any is expanded, so
     * a typo (to = 1e9) is an error, not a sweep that never ends */
    int64_t total = 1;
    for (int a = 0; a < na; a++) {
        int64_t n = axis_length(sw, config_setting_get_elem(vary, (unsigned)a));
        if (n > 0 && (__builtin_mul_overflow(total, n, &total) || total > LIMIT_SWEEP_CONFIGS))
            return spec_err(err, sw, line_of(vary), "vary",
                            "the axes make more than %lld configurations (the limit of a sweep)",
                            LIMIT_SWEEP_CONFIGS);
    }
    sw->axes = calloc((size_t)na + 1, sizeof *sw->axes);
    if (!sw->axes)
        return sim_err_set(err, SIM_ENOMEM, "out of memory");
    static const char *const axis_members[] = { "key", "values", "from", "to", "step", "mul", "keys", "rows", NULL };
    for (int a = 0; a < na; a++) {
        const config_setting_t *ag = config_setting_get_elem(vary, (unsigned)a);
        if (config_setting_type(ag) != CONFIG_TYPE_GROUP)
            return spec_err(err, sw, line_of(ag), "vary", "an axis is a group: { key = \"...\"; values = [...]; }");
        if ((rc = check_members(sw, ag, axis_members, "an axis", err)))
            return rc;
        const config_setting_t *key = config_setting_get_member(ag, "key");
        const config_setting_t *keys = config_setting_get_member(ag, "keys");
        sweep_axis *ax = &sw->axes[sw->naxes++];
        if (key && keys)
            return spec_err(err, sw, line_of(ag), NULL, "an axis has `key` or `keys`, not both");
        if (key && config_setting_type(key) != CONFIG_TYPE_STRING)
            return spec_err(err, sw, line_of(key), NULL, "`key` is a key name (a string)");
        if (key)
            rc = axis_from_key(sw, ag, ax, err);
        else if (keys)
            rc = axis_from_rows(sw, ag, ax, err);
        else
            rc = spec_err(err, sw, line_of(ag), NULL, "an axis needs `key` (or `keys` with `rows`)");
        if (rc)
            return rc;
        /* every value must parse as an override (a range's first stands for
         * all: they are numbers written alike) and every key be known */
        for (int k = 0; k < ax->nkeys; k++) {
            const char *kname = sw->keys[ax->first_col + k];
            int kline = sw->key_lines[ax->first_col + k];
            for (int64_t j = 0; j < (ax->range ? 1 : ax->n); j++)
                if ((rc = check_override(sw, ax->v[j * ax->nkeys + k].ovr, kline, kname, err)))
                    return rc;
            char msg[512];
            if (!key_known(sw, ax->v[k].ovr, kname, msg, sizeof msg))
                return spec_err(err, sw, kline, kname, "%s", msg);
        }
        sw->total *= ax->n;
    }
    return SIM_OK;
}

/* FNV-1a 64: short, fast and the same on every machine. */
#define FNV_OFFSET 0xcbf29ce484222325ULL
#define FNV_PRIME 0x100000001b3ULL

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t k = 0; k < n; k++) {
        h ^= b[k];
        h *= FNV_PRIME;
    }
    return h;
}

/* A string and its NUL, which separates it from the next. */
static uint64_t fnv1a_str(uint64_t h, const char *s)
{
    return fnv1a(h, s, strlen(s) + 1);
}

/* Hashes what the rows depend on: the base file's bytes, `set`, and every
 * axis's overrides in order (which fix every configuration's KEY=VALUE
 * list); not the spec's comments or layout. */
static int hash_spec(sweep_t *sw, sim_err *err)
{
    uint64_t h = FNV_OFFSET;
    if (sw->base) {
        FILE *f = NULL;
        int rc = infile_open(sw->base, &f, err);
        if (rc)
            return rc;
        char buf[8192];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, f)) > 0)
            h = fnv1a(h, buf, n);
        int bad = ferror(f);
        fclose(f);
        if (bad)
            return sim_err_set_at(err, SIM_EIO, sw->base, 0, NULL, "cannot read");
    }
    h = fnv1a_str(h, "set");
    for (int k = 0; k < sw->nset; k++)
        h = fnv1a_str(h, sw->set[k]);
    for (int a = 0; a < sw->naxes; a++) {
        const sweep_axis *ax = &sw->axes[a];
        char shape[64];
        snprintf(shape, sizeof shape, "axis %d x %" PRId64, ax->nkeys, ax->n);
        h = fnv1a_str(h, shape);
        for (int64_t k = 0; k < ax->n * ax->nkeys; k++)
            h = fnv1a_str(h, ax->v[k].ovr);
    }
    sw->spec_hash = h;
    return SIM_OK;
}

int sweep_load(sweep_t **out, const char *path, const char *data_dir, sim_err *err)
{
    *out = NULL;
    sweep_t *sw = calloc(1, sizeof *sw);
    if (!sw || !(sw->path = strdup(path)) || (data_dir && !(sw->data_dir = strdup(data_dir)))) {
        sweep_destroy(sw);
        return sim_err_set(err, SIM_ENOMEM, "out of memory");
    }
    config_t lc;
    int rc = infile_read_libconfig(&lc, path, err);
    if (rc == SIM_OK) {
        rc = load_spec(sw, &lc, err);
        config_destroy(&lc);
    }
    if (rc == SIM_OK)
        rc = build_header(sw, err);
    if (rc == SIM_OK)
        rc = hash_spec(sw, err);
    if (rc) {
        sweep_destroy(sw);
        return rc;
    }
    *out = sw;
    return SIM_OK;
}

void sweep_destroy(sweep_t *sw)
{
    if (!sw)
        return;
    for (int a = 0; a < sw->naxes; a++) {
        sweep_axis *ax = &sw->axes[a];
        if (ax->v)
            for (int64_t k = 0; k < ax->n * ax->nkeys; k++) {
                free(ax->v[k].ovr);
                free(ax->v[k].cell);
            }
        free(ax->v);
    }
    free(sw->axes);
    for (int k = 0; k < sw->nkeys; k++)
        free(sw->keys[k]);
    free(sw->keys);
    free(sw->key_lines);
    if (sw->set)
        for (int k = 0; k < sw->nset; k++)
            free(sw->set[k]);
    free(sw->set);
    free(sw->base);
    free(sw->header);
    free(sw->data_dir);
    free(sw->path);
    free(sw);
}

int64_t sweep_total(const sweep_t *sw)
{
    return sw->total;
}

const char *sweep_header(const sweep_t *sw)
{
    return sw->header;
}

#define META_FORMAT "# parsim sweep spec=%016" PRIx64 " configurations=%" PRId64 " shard=%" PRId64 "/%" PRId64 " rows=%" PRId64 "\n"

sweep_meta sweep_meta_of(const sweep_t *sw, int64_t k, int64_t n)
{
    sweep_meta m = { sw->spec_hash, sw->total, k, n, sweep_shard_span(sw, k, n).count };
    return m;
}

void sweep_meta_format(const sweep_meta *m, char *buf, size_t len)
{
    snprintf(buf, len, META_FORMAT, m->spec, m->total, m->shard_k, m->shard_n, m->rows);
}

bool sweep_meta_parse(const char *line, sweep_meta *m)
{
    sweep_meta r;
    if (sscanf(line, "# parsim sweep spec=%16" SCNx64 " configurations=%" SCNd64 " shard=%" SCNd64 "/%" SCNd64
                     " rows=%" SCNd64,
               &r.spec, &r.total, &r.shard_k, &r.shard_n, &r.rows) != 5)
        return false;
    /* only the form sweep_meta_format writes: no signs, blanks or zeros */
    char again[192];
    sweep_meta_format(&r, again, sizeof again);
    size_t n = strlen(line);
    if (n && line[n - 1] == '\n')
        n--;
    if (n != strlen(again) - 1 || strncmp(line, again, n) != 0)
        return false;
    /* what a sweep can have written: a file's word is not trusted further */
    if (r.total < 0 || r.total > LIMIT_SWEEP_CONFIGS || r.shard_k < 1 || r.shard_k > r.shard_n ||
        r.shard_n > LIMIT_SWEEP_CONFIGS || r.rows < 0 || r.rows > r.total)
        return false;
    *m = r;
    return true;
}

sweep_span sweep_shard_span(const sweep_t *sw, int64_t k, int64_t n)
{
    sweep_span sp = { k - 1, n, 0 };
    if (sw->total > k - 1)
        sp.count = (sw->total - k) / n + 1; /* ceil((total - (k-1)) / n) without overflow */
    return sp;
}

/* ------------------------------------------------------------------- rows */

/* The value of each axis at configuration index (last axis fastest). */
static void decompose(const sweep_t *sw, int64_t index, int64_t *pick)
{
    for (int a = sw->naxes - 1; a >= 0; a--) {
        pick[a] = index % sw->axes[a].n;
        index /= sw->axes[a].n;
    }
}

/* Builds, resolves and simulates one configuration; the failure of an
 * invalid one is left in e.  cache (NULL: none): the worker's pass
 * summaries, kept across its configurations as in search (wl_cache.h);
 * files (NULL: none): the input files the run has parsed (filecache.h). */
static int simulate(const sweep_t *sw, const int64_t *pick, wl_cache *cache, filecache *files, FILE *rep,
                    sim_err *e)
{
    cfg_t *c = cfg_create(sw->data_dir);
    if (!c)
        return sim_err_set(e, SIM_ENOMEM, "out of memory");
    cfg_use_filecache(c, files);
    int rc = sw->base ? cfg_load_file(c, sw->base, CFG_PRIO_FILE, e) : SIM_OK;
    for (int k = 0; k < sw->nset && rc == SIM_OK; k++)
        rc = cfg_set_override(c, sw->set[k], e);
    for (int a = 0; a < sw->naxes && rc == SIM_OK; a++) {
        const sweep_axis *ax = &sw->axes[a];
        for (int k = 0; k < ax->nkeys && rc == SIM_OK; k++)
            rc = cfg_set_override(c, ax->v[pick[a] * ax->nkeys + k].ovr, e);
    }
    run_inputs in;
    strategy_t s;
    if (rc == SIM_OK)
        rc = cfg_resolve_all(c, &in, &s, e);
    step_t *st = NULL;
    if (rc == SIM_OK)
        rc = step_run_reuse(&st, &in, &s, NULL, cache, e);
    if (rc == SIM_OK)
        report_csv_row(rep, &in, &s, step_result_get(st));
    step_destroy(st);
    if (cache) /* the step's workload is gone */
        wl_cache_forget(cache);
    cfg_destroy(c);
    return rc;
}

static int row_with(const sweep_t *sw, int64_t index, wl_cache *cache, filecache *files, char **row, size_t *len,
                    sim_err *err);

int sweep_row(const sweep_t *sw, int64_t index, char **row, size_t *len, sim_err *err)
{
    return row_with(sw, index, NULL, NULL, row, len, err);
}

static int row_with(const sweep_t *sw, int64_t index, wl_cache *cache, filecache *files, char **row, size_t *len,
                    sim_err *err)
{
    *row = NULL;
    *len = 0;
    int64_t pick[sw->naxes + 1];
    decompose(sw, index, pick);

    sim_err e;
    sim_err_clear(&e);
    strbuf rep, sb;
    if (!sb_open(&rep))
        return sim_err_set(err, SIM_ENOMEM, "out of memory");
    int rc = simulate(sw, pick, cache, files, rep.f, &e);
    char *r = sb_close(&rep);
    if (rc == SIM_ENOMEM || !r || !sb_open(&sb)) {
        free(r);
        return sim_err_set(err, SIM_ENOMEM, "out of memory");
    }

    /* the overrides cell: what reruns the row (parsim run BASE <these>) */
    strbuf ob;
    char *ovr = NULL;
    if (sb_open(&ob)) {
        for (int k = 0; k < sw->nset; k++) {
            fputs(k ? " " : "", ob.f);
            handover_shell_word(ob.f, sw->set[k]);
        }
        for (int a = 0; a < sw->naxes; a++) {
            const sweep_axis *ax = &sw->axes[a];
            for (int k = 0; k < ax->nkeys; k++) {
                fputs(sw->nset || a || k ? " " : "", ob.f);
                handover_shell_word(ob.f, ax->v[pick[a] * ax->nkeys + k].ovr);
            }
        }
        ovr = sb_close(&ob);
    }
    if (!ovr) {
        free(r);
        fclose(sb.f);
        free(sb.buf);
        return sim_err_set(err, SIM_ENOMEM, "out of memory");
    }
    fprintf(sb.f, "%" PRId64, index);
    for (int a = 0; a < sw->naxes; a++) {
        const sweep_axis *ax = &sw->axes[a];
        for (int k = 0; k < ax->nkeys; k++)
            fprintf(sb.f, ",%s", ax->v[pick[a] * ax->nkeys + k].cell);
    }
    if (rc == SIM_OK) {
        size_t n = strlen(r);
        fprintf(sb.f, ",%.*s,", (int)(n && r[n - 1] == '\n' ? n - 1 : n), r);
        csv_cell(sb.f, ovr);
        fputs(",\n", sb.f);
    } else {
        /* the sweep's own settings are "command line" to config: drop that */
        if (!strcmp(e.file, CMDLINE_ORIGIN)) {
            e.file[0] = '\0';
            e.line = 0;
        }
        char msg[1024];
        sim_err_format(&e, msg, sizeof msg);
        for (int k = 0; k < sw->report_cols; k++)
            fputc(',', sb.f);
        fputc(',', sb.f);
        csv_cell(sb.f, ovr);
        fputc(',', sb.f);
        csv_cell(sb.f, msg);
        fputc('\n', sb.f);
    }
    free(r);
    free(ovr);
    size_t n = 0;
    fflush(sb.f);
    n = sb.len;
    *row = sb_close(&sb);
    if (!*row)
        return sim_err_set(err, SIM_ENOMEM, "out of memory");
    *len = n;
    return SIM_OK;
}

/* ----------------------------------------------------------------- runner */

/* Workers take positions in order and park finished rows in a ring of
 * `window` slots; the calling thread writes slot `written` as soon as it is
 * filled.  A worker never takes a position `window` or more ahead of
 * `written`, so memory stays bounded however slow one configuration is. */
typedef struct runner {
    const sweep_t *sw;
    sweep_span span;
    filecache *files;       /* the workers' input files, parsed once */
    pthread_mutex_t mu;
    pthread_cond_t filled;  /* a slot was filled (or a worker failed) */
    pthread_cond_t freed;   /* `written` advanced (or the run stops) */
    int64_t next;           /* next position to hand out */
    int64_t written;        /* positions emitted */
    int64_t window;
    char **row;             /* window slots; NULL = not done */
    size_t *len;
    bool stop;              /* emit failed: workers finish and leave */
    int fail;               /* a worker's fatal status */
    sim_err fail_err;
} runner;

static void *worker(void *arg)
{
    runner *r = arg;
    wl_cache *cache = wl_cache_create(WL_CACHE_BYTES);
    pthread_mutex_lock(&r->mu);
    for (;;) {
        while (!r->stop && r->next < r->span.count && r->next >= r->written + r->window)
            pthread_cond_wait(&r->freed, &r->mu);
        if (r->stop || r->next >= r->span.count)
            break;
        int64_t pos = r->next++;
        pthread_mutex_unlock(&r->mu);

        char *row;
        size_t len;
        sim_err e;
        sim_err_clear(&e);
        int rc = cache ? row_with(r->sw, r->span.first + pos * r->span.stride, cache, r->files, &row, &len, &e)
                       : sim_err_set(&e, SIM_ENOMEM, "out of memory");

        pthread_mutex_lock(&r->mu);
        if (rc) {
            if (!r->fail) {
                r->fail = rc;
                r->fail_err = e;
            }
            r->stop = true;
            pthread_cond_broadcast(&r->filled);
            pthread_cond_broadcast(&r->freed);
            break;
        }
        r->row[pos % r->window] = row;
        r->len[pos % r->window] = len;
        pthread_cond_broadcast(&r->filled);
    }
    pthread_mutex_unlock(&r->mu);
    wl_cache_destroy(cache);
    return NULL;
}

static int run_inline(const sweep_t *sw, sweep_span span, filecache *files, sweep_emit_fn emit, void *ctx,
                      sim_err *err)
{
    wl_cache *cache = wl_cache_create(WL_CACHE_BYTES);
    int rc = cache ? SIM_OK : sim_err_set(err, SIM_ENOMEM, "out of memory");
    for (int64_t pos = 0; pos < span.count && rc == SIM_OK; pos++) {
        char *row;
        size_t len;
        int64_t index = span.first + pos * span.stride;
        rc = row_with(sw, index, cache, files, &row, &len, err);
        if (rc == SIM_OK) {
            rc = emit(ctx, pos, index, row, len);
            free(row);
        }
    }
    wl_cache_destroy(cache);
    return rc;
}

static int run_jobs(const sweep_t *sw, sweep_span span, int jobs, filecache *files, sweep_emit_fn emit, void *ctx,
                    sim_err *err);

/* One filecache for the whole run: each input file is read once. */
int sweep_run(const sweep_t *sw, sweep_span span, int jobs, sweep_emit_fn emit, void *ctx, sim_err *err)
{
    filecache *files = filecache_create();
    if (!files)
        return sim_err_set(err, SIM_ENOMEM, "out of memory");
    if (jobs > span.count)
        jobs = (int)span.count;
    const int rc = jobs <= 1 ? run_inline(sw, span, files, emit, ctx, err)
                             : run_jobs(sw, span, jobs, files, emit, ctx, err);
    filecache_destroy(files);
    return rc;
}

static int run_jobs(const sweep_t *sw, sweep_span span, int jobs, filecache *files, sweep_emit_fn emit, void *ctx,
                    sim_err *err)
{
    runner r = { .sw = sw, .span = span, .files = files, .window = (int64_t)jobs * REORDER_PER_JOB };
    r.row = calloc((size_t)r.window, sizeof *r.row);
    r.len = calloc((size_t)r.window, sizeof *r.len);
    pthread_t *tid = calloc((size_t)jobs, sizeof *tid);
    if (!r.row || !r.len || !tid) {
        free(r.row);
        free(r.len);
        free(tid);
        return sim_err_set(err, SIM_ENOMEM, "out of memory");
    }
    pthread_mutex_init(&r.mu, NULL);
    pthread_cond_init(&r.filled, NULL);
    pthread_cond_init(&r.freed, NULL);
    int started = 0, rc = SIM_OK;
    for (; started < jobs; started++)
        if (pthread_create(&tid[started], NULL, worker, &r) != 0)
            break;
    if (started == 0)
        rc = sim_err_set(err, SIM_ENOMEM, "cannot start worker threads");

    pthread_mutex_lock(&r.mu);
    while (rc == SIM_OK && r.written < span.count) {
        int64_t slot = r.written % r.window;
        while (!r.row[slot] && !r.fail)
            pthread_cond_wait(&r.filled, &r.mu);
        if (r.fail) {
            rc = r.fail;
            *err = r.fail_err;
            break;
        }
        char *row = r.row[slot];
        size_t len = r.len[slot];
        r.row[slot] = NULL;
        int64_t pos = r.written;
        pthread_mutex_unlock(&r.mu);
        rc = emit(ctx, pos, span.first + pos * span.stride, row, len);
        free(row);
        pthread_mutex_lock(&r.mu);
        r.written++;
        if (rc)
            r.stop = true;
        pthread_cond_broadcast(&r.freed);
    }
    r.stop = true;
    pthread_cond_broadcast(&r.freed);
    pthread_mutex_unlock(&r.mu);
    for (int k = 0; k < started; k++)
        pthread_join(tid[k], NULL);
    for (int64_t k = 0; k < r.window; k++)
        free(r.row[k]);
    free(r.row);
    free(r.len);
    free(tid);
    pthread_mutex_destroy(&r.mu);
    pthread_cond_destroy(&r.filled);
    pthread_cond_destroy(&r.freed);
    return rc;
}

/* ----------------------------------------------------------------- output */

bool sweep_row_index(const char *row, int64_t *index)
{
    if (!isdigit((unsigned char)row[0]))
        return false;
    char *end;
    errno = 0;
    long long v = strtoll(row, &end, 10);
    if (errno || (*end != ',' && *end != '\n' && *end != '\0'))
        return false;
    *index = v;
    return true;
}

/* Why line 2 of an existing output is not this run's. */
static int meta_mismatch(const char *path, const char *line, const sweep_meta *want, sim_err *err)
{
    sweep_meta old;
    if (!sweep_meta_parse(line, &old))
        return sim_err_set_at(err, SIM_EINVAL, path, 2, NULL,
                              "no `# parsim sweep` line: not this sweep's output (use another --out, or delete "
                              "the file)");
    if (old.spec != want->spec || old.total != want->total)
        return sim_err_set_at(err, SIM_EINVAL, path, 2, NULL,
                              "written by a different spec (%016" PRIx64 ", now %016" PRIx64
                              "): the sweep's values or settings changed since; use another --out, or delete "
                              "the file to start again",
                              old.spec, want->spec);
    return sim_err_set_at(err, SIM_EINVAL, path, 2, NULL,
                          "the output of shard %" PRId64 "/%" PRId64 ", not of %" PRId64 "/%" PRId64
                          " (use another --out)",
                          old.shard_k, old.shard_n, want->shard_k, want->shard_n);
}

/* Checks the lines of an existing output against this run's, leaving in
 * *kept the complete lines that stay and in *good where they end. */
static int check_existing(FILE *f, const char *path, const char *header, const char *mline, const sweep_meta *meta,
                          sweep_span span, int64_t *kept, off_t *good, sim_err *err)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int rc = SIM_OK;
    *kept = 0;
    *good = 0;
    /* a file that does not start like the header is refused before its
     * first line is read whole (it may be any size) */
    char start[512];
    size_t want1 = strlen(header) < sizeof start ? strlen(header) : sizeof start;
    size_t got = fread(start, 1, want1, f);
    if (memcmp(start, header, got) != 0)
        return sim_err_set_at(err, SIM_EINVAL, path, 1, NULL,
                              "not this sweep's output (use another --out, or delete the file)");
    if (fseeko(f, 0, SEEK_SET) != 0)
        return sim_err_set_at(err, SIM_EIO, path, 0, NULL, "cannot seek: %s", strerror(errno));
    while (rc == SIM_OK && (n = getline(&line, &cap, f)) > 0) {
        int64_t lineno = *kept + 1;
        const char *want = lineno == 1 ? header : lineno == 2 ? mline : NULL;
        if (line[n - 1] != '\n') {
            /* a line cut short by a kill is cut off below, if it was ours */
            if (want && strncmp(line, want, (size_t)n) != 0)
                rc = sim_err_set_at(err, SIM_EINVAL, path, (int)lineno, NULL,
                                    "not this sweep's output (use another --out, or delete the file)");
            break;
        }
        if (lineno == 1 && strcmp(line, header) != 0) {
            rc = sim_err_set_at(err, SIM_EINVAL, path, 1, NULL,
                                "the header differs from this sweep's: not its output (use another --out, "
                                "or delete the file)");
        } else if (lineno == 2 && strcmp(line, mline) != 0) {
            rc = meta_mismatch(path, line, meta, err);
        } else if (lineno > 2) {
            int64_t rows = lineno - 3, idx, at = span.first + rows * span.stride;
            if (rows >= span.count)
                rc = sim_err_set_at(err, SIM_EINVAL, path, (int)lineno, NULL, "more rows than this run has");
            else if (!sweep_row_index(line, &idx) || idx != at)
                rc = sim_err_set_at(err, SIM_EINVAL, path, (int)lineno, NULL,
                                    "row is not configuration %" PRId64 " as this run expects there: not this "
                                    "run's output",
                                    at);
        }
        if (rc == SIM_OK) {
            (*kept)++;
            *good += n;
        }
    }
    free(line);
    /* stopped short of the end (out of memory, a read error): nothing may
     * be cut off on that account */
    if (rc == SIM_OK && (ferror(f) || !feof(f)))
        rc = sim_err_set_at(err, SIM_EIO, path, 0, NULL, "cannot read: %s", strerror(errno ? errno : EIO));
    return rc;
}

int sweep_open_output(const char *path, const char *header, const sweep_meta *meta, sweep_span span, FILE **out,
                      int64_t *done, sim_err *err)
{
    *out = NULL;
    *done = 0;
    char mline[192];
    sweep_meta_format(meta, mline, sizeof mline);
    outfile_target t;
    int rc = outfile_resolve(path, &t, err);
    if (rc)
        return rc;
    FILE *f;
    if (t.kind == OUTFILE_STREAM)
        f = t.path ? outfile_open_stream(&t) : stdout; /* nothing to resume or cut */
    else
        f = fopen(t.path, t.kind == OUTFILE_NEW ? "w+" : "r+");
    bool stream = t.kind == OUTFILE_STREAM;
    outfile_target_free(&t);
    if (!f)
        return sim_err_set_at(err, SIM_EIO, path, 0, NULL, "cannot open: %s", strerror(errno));

    int64_t kept = 0;
    off_t good = 0;
    if (!stream) {
        rc = check_existing(f, path, header, mline, meta, span, &kept, &good, err);
        if (rc == SIM_OK && ftruncate(fileno(f), good) != 0)
            rc = sim_err_set_at(err, SIM_EIO, path, 0, NULL, "cannot truncate: %s", strerror(errno));
        if (rc == SIM_OK && fseeko(f, good, SEEK_SET) != 0)
            rc = sim_err_set_at(err, SIM_EIO, path, 0, NULL, "cannot seek: %s", strerror(errno));
    }
    if (rc == SIM_OK && ((kept < 1 && fputs(header, f) == EOF) || (kept < 2 && fputs(mline, f) == EOF) ||
                         fflush(f) != 0))
        rc = sim_err_set_at(err, SIM_EIO, path, 0, NULL, "cannot write: %s", strerror(errno));
    if (rc) {
        if (f != stdout)
            fclose(f);
        return rc;
    }
    *out = f;
    *done = kept > 2 ? kept - 2 : 0;
    return SIM_OK;
}
