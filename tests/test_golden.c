/* Golden regression cases: every tests/golden/<case>.cfg is simulated and
 * its `parsim run --format csv` row compared, column by column, with the
 * pinned row of tests/golden/expected.csv.  A failure lists every field
 * that moved (case, column, old, new, relative change), so a cost-model
 * change shows exactly what it did.
 *
 * Update mode: PARSIM_UPDATE_GOLDEN=1 rewrites expected.csv from the
 * current model (tests/golden/update.sh does that and prints the diff with
 * parsim compare).  Each case file says what it covers. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "config.h"
#include "csv.h"
#include "report.h"
#include "step.h"

#define GOLDEN_DIR PARSIM_SOURCE_DIR "/tests/golden"
#define EXPECTED GOLDEN_DIR "/expected.csv"
#define MAX_CASES 64

/* Relative tolerance for numbers: the output is deterministic, so this
 * only absorbs printing and compiler differences in the last digits. */
#define REL_TOL 1e-7

typedef struct golden_case {
    char name[64];
    char *row;          /* "name,<csv row>" without newline */
} golden_case;

static int name_cmp(const void *a, const void *b)
{
    return strcmp(((const golden_case *)a)->name, ((const golden_case *)b)->name);
}

/* Lists the case names (file names without .cfg), sorted. */
static size_t list_cases(golden_case *cases)
{
    DIR *d = opendir(GOLDEN_DIR);
    cr_assert_not_null(d, "cannot open %s", GOLDEN_DIR);
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".cfg"))
            continue;
        cr_assert_lt(n, MAX_CASES);
        memset(&cases[n], 0, sizeof cases[n]);
        snprintf(cases[n].name, sizeof cases[n].name, "%.*s", (int)(len - 4), e->d_name);
        n++;
    }
    closedir(d);
    qsort(cases, n, sizeof *cases, name_cmp);
    return n;
}

/* Runs one case; returns the csv header (once, into *header) and row. */
static void run_case(golden_case *gc, char **header)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%.63s.cfg", GOLDEN_DIR, gc->name);
    sim_err err;
    sim_err_clear(&err);
    cfg_t *cfg = cfg_create(PARSIM_SOURCE_DIR);
    cr_assert_not_null(cfg);
    char msg[1024];
    int rc = cfg_load_file(cfg, path, CFG_PRIO_FILE, &err);
    run_inputs in;
    strategy_t s;
    if (rc == SIM_OK)
        rc = cfg_resolve_all(cfg, &in, &s, &err);
    step_t *st = NULL;
    if (rc == SIM_OK)
        rc = step_run(&st, &in, &s, &err);
    sim_err_format(&err, msg, sizeof msg);
    cr_assert_eq(rc, SIM_OK, "golden case %s: %s", gc->name, msg);

    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    cr_assert_not_null(mem);
    if (header && !*header) {
        fputs("case,", mem);
        report_csv_header(mem);
        fflush(mem);
        *header = strdup(buf);
        cr_assert_not_null(*header);
        rewind(mem);
        len = 0;
    }
    fprintf(mem, "%s,", gc->name);
    report_csv_row(mem, &in, &s, step_result_get(st));
    fclose(mem);
    buf[strcspn(buf, "\n")] = '\0';
    gc->row = buf;
    step_destroy(st);
    cfg_destroy(cfg);
}

static void write_expected(const char *header, const golden_case *cases, size_t n)
{
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", EXPECTED);
    FILE *f = fopen(tmp, "w");
    cr_assert_not_null(f, "cannot write %s", tmp);
    fputs(header, f);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s\n", cases[i].row);
    cr_assert_eq(fclose(f), 0);
    cr_assert_eq(rename(tmp, EXPECTED), 0, "cannot replace %s", EXPECTED);
}

/* Appends "fmt" to the report. */
static void say(char *rep, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *rep, size_t cap, const char *fmt, ...)
{
    size_t n = strlen(rep);
    if (n + 1 >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rep + n, cap - n, fmt, ap);
    va_end(ap);
}

static bool same_value(const char *a, const char *b, double *rel)
{
    *rel = 0.0;
    if (!strcmp(a, b))
        return true;
    char *ea, *eb;
    double x = strtod(a, &ea), y = strtod(b, &eb);
    if (*a && *b && !*ea && !*eb) {
        double scale = fmax(fabs(x), fabs(y));
        *rel = x != 0.0 ? (y - x) / fabs(x) : INFINITY;
        return fabs(y - x) <= REL_TOL * scale;
    }
    return false;
}

Test(golden, cases_match_expected, .timeout = 300)
{
    golden_case cases[MAX_CASES];
    size_t n = list_cases(cases);
    cr_assert_geq(n, 12, "expected at least a dozen golden cases in %s", GOLDEN_DIR);
    char *header = NULL;
    for (size_t i = 0; i < n; i++)
        run_case(&cases[i], &header);

    if (getenv("PARSIM_UPDATE_GOLDEN") && getenv("PARSIM_UPDATE_GOLDEN")[0] == '1') {
        write_expected(header, cases, n);
        fprintf(stderr, "golden: wrote %zu cases to %s\n", n, EXPECTED);
    }

    /* the current rows as a table, to compare by column name */
    size_t cap = strlen(header) + 1;
    for (size_t i = 0; i < n; i++)
        cap += strlen(cases[i].row) + 1;
    char *text = malloc(cap);
    cr_assert_not_null(text);
    size_t pos = (size_t)snprintf(text, cap, "%s", header);
    for (size_t i = 0; i < n; i++)
        pos += (size_t)snprintf(text + pos, cap - pos, "%s\n", cases[i].row);
    sim_err err;
    csv_table now, exp;
    cr_assert_eq(csv_parse(text, pos, "current", &now, &err), SIM_OK, "%s", err.msg);
    int rc = csv_read_file(EXPECTED, &exp, &err);
    cr_assert_eq(rc, SIM_OK,
                 "%s: %s\n(create it with PARSIM_UPDATE_GOLDEN=1 ctest -R golden, or "
                 "tests/golden/update.sh)",
                 EXPECTED, err.msg);

    static char rep[65536];
    rep[0] = '\0';
    size_t moved = 0;
    int ccase = csv_col(&exp, "case");
    cr_assert_geq(ccase, 0, "%s has no 'case' column", EXPECTED);
    for (int c = 0; c < now.ncols; c++)
        if (csv_col(&exp, now.header[c]) < 0) {
            say(rep, sizeof rep, "  new column %s (not in expected.csv)\n", now.header[c]);
            moved++;
        }
    for (int c = 0; c < exp.ncols; c++)
        if (csv_col(&now, exp.header[c]) < 0) {
            say(rep, sizeof rep, "  column %s is gone\n", exp.header[c]);
            moved++;
        }
    for (size_t r = 0; r < now.nrows; r++) {
        const char *name = csv_cell(&now, r, 0);
        size_t er = exp.nrows;
        for (size_t k = 0; k < exp.nrows; k++)
            if (!strcmp(csv_cell(&exp, k, ccase), name))
                er = k;
        if (er == exp.nrows) {
            say(rep, sizeof rep, "  %s: new case, no expected row\n", name);
            moved++;
            continue;
        }
        for (int c = 1; c < now.ncols; c++) {
            int ce = csv_col(&exp, now.header[c]);
            if (ce < 0)
                continue;
            const char *o = csv_cell(&exp, er, ce), *v = csv_cell(&now, r, c);
            double rel;
            if (same_value(o, v, &rel))
                continue;
            moved++;
            if (rel != 0.0 && isfinite(rel))
                say(rep, sizeof rep, "  %-20s %-24s %16s -> %-16s (%+.4f%%)\n", name,
                    now.header[c], o, v, 100.0 * rel);
            else
                say(rep, sizeof rep, "  %-20s %-24s %16s -> %s\n", name, now.header[c], o, v);
        }
    }
    for (size_t k = 0; k < exp.nrows; k++) {
        bool found = false;
        for (size_t r = 0; r < now.nrows; r++)
            found = found || !strcmp(csv_cell(&exp, k, ccase), csv_cell(&now, r, 0));
        if (!found) {
            say(rep, sizeof rep, "  %s: expected row without a case file\n",
                csv_cell(&exp, k, ccase));
            moved++;
        }
    }
    csv_free(&now);
    csv_free(&exp);
    free(text);
    free(header);
    for (size_t i = 0; i < n; i++)
        free(cases[i].row);
    cr_assert_eq(moved, 0,
                 "%zu golden values moved (case, field, expected -> now):\n%s"
                 "If the change is intended, run tests/golden/update.sh (or "
                 "PARSIM_UPDATE_GOLDEN=1 ctest -R golden) and commit tests/golden/expected.csv.",
                 moved, rep);
}
