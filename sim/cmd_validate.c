/* parsim validate: predict every row of a validation CSV and report the
 * error (rules in validate.h). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "csv.h"
#include "frameworks.h"
#include "opts.h"
#include "progress.h"
#include "validate.h"
#include "vsetup.h"

typedef struct vout {
    const csv_table *t;
    const vcase *cases;
    const vpred *preds;
} vout;

static int out_writer(FILE *out, void *ctx, sim_err *err)
{
    (void)err;
    const vout *o = ctx;
    validate_write_csv(out, o->t, o->cases, o->preds);
    return SIM_OK;
}

int cmd_validate(int argc, char **argv)
{
    const char *in_path = NULL, *out_path = NULL, *rows = NULL, *recipes_path = NULL;
    const char *frameworks_path = vfw_default_path();
    int jobs = validate_default_jobs();
    /* KEY=VALUE settings applied to every row after its own, e.g.
     * sim.params=PARAMS.cfg from parsim calibrate */
    enum { MAX_EXTRA = 64 };
    const char *extra[MAX_EXTRA + 1] = { NULL };
    int nextra = 0;
    enum { O_OUT, O_ROWS, O_JOBS, O_RECIPES, O_FRAMEWORKS };
    static const opts_def defs[] = {
        [O_OUT] = {"--out", "a value"},         [O_ROWS] = {"--rows", "a value"},
        [O_JOBS] = {"--jobs", "a value"},       [O_RECIPES] = {"--recipes", "a value"},
        [O_FRAMEWORKS] = {"--frameworks", "a value"},
    };
    opts_iter it = opts_start(argc, argv, 0, defs, sizeof defs / sizeof defs[0], NULL, NULL);
    const char *a;
    for (int opt; (opt = opts_next(&it, &a)) != OPTS_END;) {
        if (opt == OPTS_FAIL)
            return EXIT_BAD_INPUT;
        if (opt == O_OUT)
            out_path = a;
        else if (opt == O_RECIPES)
            recipes_path = a;
        else if (opt == O_FRAMEWORKS)
            frameworks_path = a;
        else if (opt == O_ROWS)
            rows = a;
        else if (opt == O_JOBS) {
            int rc = cli_jobs_arg("--jobs", a, &jobs);
            if (rc)
                return rc;
        } else if (strchr(a, '=')) {
            if (nextra >= MAX_EXTRA)
                return cli_usage_error("at most %d KEY=VALUE settings", MAX_EXTRA);
            extra[nextra++] = a;
        } else if (in_path)
            return cli_usage_error("validate takes one CSV file, got '%s' and '%s'", in_path, a);
        else
            in_path = a;
    }
    if (!in_path)
        return cli_usage_error("validate needs a CSV file (e.g. bench/validation/public.csv)");

    sim_err err;
    sim_err_clear(&err);
    /* The recipes: --recipes FILE, none, or recipes.csv in the input's
     * folder when there is one (bench/validation/ for public.csv). */
    vsetup_files vs;
    if (vsetup_open(&vs, in_path, recipes_path, frameworks_path, &err) != SIM_OK)
        return cli_fail(&err);
    csv_table t;
    if (csv_read_file(in_path, &t, &err) != SIM_OK) {
        vsetup_close(&vs);
        return cli_fail(&err);
    }
    int rc = EXIT_SUCCESS;
    vcase *cases = NULL;
    vpred *preds = NULL;
    bool *select = NULL;
    if (validate_check_columns(&t, in_path, &err) != SIM_OK ||
        validate_filter_check(&t, rows, &err) != SIM_OK) {
        rc = cli_fail(&err);
        goto out;
    }
    if (csv_col(&t, "predicted_value") >= 0) {
        rc = cli_usage_error("%s already holds predictions (a validate --out file): give the "
                             "input rows",
                             in_path);
        goto out;
    }
    cases = calloc(t.nrows ? t.nrows : 1, sizeof *cases);
    preds = calloc(t.nrows ? t.nrows : 1, sizeof *preds);
    if (!cases || !preds) {
        fputs("parsim: out of memory\n", stderr);
        rc = EXIT_FAILURE;
        goto out;
    }
    /* A filtered run summarises the matching rows only and writes the
     * others as skipped ("not selected") in --out. */
    select = calloc(t.nrows ? t.nrows : 1, sizeof *select);
    if (!select) {
        fputs("parsim: out of memory\n", stderr);
        rc = EXIT_FAILURE;
        goto out;
    }
    size_t nsel = 0;
    if (validate_cases_setup(&t, NULL, &vs.setup, cases) != SIM_OK) {
        fputs("parsim: out of memory\n", stderr);
        rc = EXIT_FAILURE;
        goto out;
    }
    for (size_t r = 0; r < t.nrows; r++) {
        select[r] = validate_filter_match(&t, &cases[r], rows);
        nsel += select[r];
        if (!select[r])
            snprintf(preds[r].skip, sizeof preds[r].skip, "not selected by --rows %s", rows);
    }
    if (validate_check_extra(cases, t.nrows, NULL, extra, &err) != SIM_OK) {
        rc = cli_fail(&err);
        goto out;
    }
    progress_t prog;
    progress_start(&prog, (long)nsel, 0, "validate");
    int prc = validate_predict_many(cases, select, t.nrows, NULL, extra, preds, jobs, &prog);
    progress_end(&prog);
    if (prc != SIM_OK) {
        fputs("parsim: out of memory\n", stderr);
        rc = EXIT_FAILURE;
        goto out;
    }
    if (out_path) {
        vout o = { &t, cases, preds };
        if (cli_write_file(out_path, out_writer, &o, &err) != SIM_OK)
            rc = cli_fail(&err);
    }
    /* the summary sees the selected rows only */
    size_t k = 0;
    for (size_t r = 0; r < t.nrows; r++) {
        if (!select[r])
            continue;
        if (k != r) {
            cases[k] = cases[r];
            preds[k] = preds[r];
        }
        k++;
    }
    validate_summary(stdout, cases, preds, nsel);
    if (fflush(stdout) != 0) {
        fputs("parsim: cannot write the summary\n", stderr);
        rc = EXIT_FAILURE;
    }
out:
    free(cases);
    free(preds);
    free(select);
    csv_free(&t);
    vsetup_close(&vs);
    return rc;
}
