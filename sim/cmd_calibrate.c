/* parsim calibrate: fit cost-model parameters to validation rows or to
 * nccl-tests output and write them as a parameter file (calibrate.h). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "calibrate.h"
#include "cli.h"
#include "csv.h"
#include "frameworks.h"
#include "numparse.h"
#include "opts.h"
#include "validate.h"
#include "vsetup.h"

typedef struct params_out {
    const calib_result *res;
    time_t when;
} params_out;

static int params_writer(FILE *out, void *ctx, sim_err *err)
{
    (void)err;
    const params_out *po = ctx;
    calibrate_write_params(out, po->res, po->when);
    return SIM_OK;
}

/* The date of the parameter file: SOURCE_DATE_EPOCH when set (the
 * reproducible-builds convention: a decimal count of seconds since 1970,
 * read as UTC), so the same inputs give the same bytes; else now.  A
 * malformed value is bad input. */
static int file_date(time_t *when)
{
    const char *s = getenv("SOURCE_DATE_EPOCH");
    if (!s) {
        *when = time(NULL);
        return 0;
    }
    /* up to the end of year 9999, what a four-digit date prints */
    const int64_t max = 253402300799LL;
    int64_t v = 0;
    if (!s[0] || strspn(s, "0123456789") != strlen(s) || !num_parse_int(s, &v) || v > max) {
        sim_err err;
        sim_err_clear(&err);
        sim_err_set_at(&err, SIM_EINVAL, NULL, 0, "SOURCE_DATE_EPOCH",
                       "'%s' is not a decimal count of seconds since 1970 in 0..%lld", s,
                       (long long)max);
        return cli_fail(&err);
    }
    *when = (time_t)v;
    return 0;
}

/* Reads a whole file (the nccl-tests log). */
static char *slurp(const char *path, size_t *len, sim_err *err)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) {
        sim_err_set_at(err, SIM_EIO, path, 0, NULL, "cannot open: %s", strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    size_t cap = 0;
    *len = 0;
    for (;;) {
        if (cap - *len < 4096) {
            size_t nc = cap ? 2 * cap : 65536;
            char *nb = realloc(buf, nc);
            if (!nb) {
                free(buf);
                if (f != stdin)
                    fclose(f);
                sim_err_set(err, SIM_ENOMEM, "out of memory");
                return NULL;
            }
            buf = nb;
            cap = nc;
        }
        size_t n = fread(buf + *len, 1, cap - *len, f);
        *len += n;
        if (n == 0)
            break;
    }
    int bad = ferror(f);
    if (bad)
        sim_err_set_at(err, SIM_EIO, path, 0, NULL, "cannot read: %s", strerror(errno));
    if (f != stdin)
        fclose(f);
    if (bad) {
        free(buf);
        return NULL;
    }
    return buf;
}

int cmd_calibrate(int argc, char **argv)
{
    const char *in_path = NULL, *out_path = NULL, *nccl_path = NULL, *op = NULL;
    const char *halves_prefix = NULL;
    const char *recipes_path = NULL, *frameworks_path = vfw_default_path();
    calib_opts o = { .params = NULL, .rows = NULL, .train_half = -1,
                     .jobs = validate_default_jobs(), .max_iter = 50, .data_dir = NULL,
                     .log = stderr };
    const char **overrides = calloc((size_t)argc + 1, sizeof *overrides);
    int nover = 0;
    if (!overrides) {
        fputs("parsim: out of memory\n", stderr);
        return EXIT_FAILURE;
    }
    int rc = EXIT_SUCCESS;
    enum {
        O_OUT, O_PARAMS, O_ROWS, O_TRAIN_HALF, O_JOBS, O_MAX_ITER, O_NCCL_TESTS, O_OP, O_OUT_HALVES,
        O_RECIPES, O_FRAMEWORKS, O_QUIET, O_LOSS
    };
    static const opts_def defs[] = {
        [O_OUT] = {"--out", "a value"},           [O_PARAMS] = {"--params", "a value"},
        [O_ROWS] = {"--rows", "a value"},         [O_TRAIN_HALF] = {"--train-half", "a value"},
        [O_JOBS] = {"--jobs", "a value"},         [O_MAX_ITER] = {"--max-iter", "a value"},
        [O_NCCL_TESTS] = {"--nccl-tests", "a value"}, [O_OP] = {"--op", "a value"},
        [O_OUT_HALVES] = {"--out-halves", "a value"}, [O_RECIPES] = {"--recipes", "a value"},
        [O_FRAMEWORKS] = {"--frameworks", "a value"}, [O_QUIET] = {"--quiet", NULL},
        [O_LOSS] = {"--loss", "a value"},
    };
    opts_iter it = opts_start(argc, argv, 0, defs, sizeof defs / sizeof defs[0], NULL, NULL);
    const char *v;
    for (int opt; (opt = opts_next(&it, &v)) != OPTS_END;) {
        if (opt == OPTS_FAIL) {
            rc = EXIT_BAD_INPUT;
            goto out;
        }
        const char *a = v;
        if (opt >= 0 && opt != O_QUIET) {
            if (opt == O_OUT)
                out_path = v;
            else if (opt == O_PARAMS)
                o.params = v;
            else if (opt == O_ROWS)
                o.rows = v;
            else if (opt == O_NCCL_TESTS)
                nccl_path = v;
            else if (opt == O_OP)
                op = v;
            else if (opt == O_OUT_HALVES)
                halves_prefix = v;
            else if (opt == O_RECIPES)
                recipes_path = v;
            else if (opt == O_FRAMEWORKS)
                frameworks_path = v;
            else if (opt == O_LOSS) {
                if (!strcmp(v, "absolute"))
                    o.loss = CALIB_LOSS_ABSOLUTE;
                else if (!strcmp(v, "squared"))
                    o.loss = CALIB_LOSS_SQUARED;
                else {
                    rc = cli_usage_error("--loss is absolute or squared, got '%s'", v);
                    goto out;
                }
            } else if (opt == O_TRAIN_HALF) {
                if (!strcmp(v, "even"))
                    o.train_half = 0;
                else if (!strcmp(v, "odd"))
                    o.train_half = 1;
                else {
                    rc = cli_usage_error("--train-half is even or odd, got '%s'", v);
                    goto out;
                }
            } else if (opt == O_JOBS) {
                if ((rc = cli_jobs_arg("--jobs", v, &o.jobs)))
                    goto out;
            } else {
                long long n = 0;
                if ((rc = cli_int_arg("--max-iter", v, 1, 10000, &n)))
                    goto out;
                o.max_iter = (int)n;
            }
        } else if (opt == O_QUIET)
            o.log = NULL;
        else if (strchr(a, '='))
            overrides[nover++] = a;
        else if (in_path) {
            rc = cli_usage_error("calibrate takes one CSV file, got '%s' and '%s'", in_path, a);
            goto out;
        } else
            in_path = a;
    }
    if (!!in_path == !!nccl_path) {
        rc = cli_usage_error("calibrate needs a validation CSV or --nccl-tests LOG (one of them)");
        goto out;
    }
    if (halves_prefix && !in_path) {
        rc = cli_usage_error("--out-halves goes with a validation CSV");
        goto out;
    }
    /* room for "-even.cfg" in the path buffer below */
    if (halves_prefix && (!halves_prefix[0] || strlen(halves_prefix) > 4000)) {
        rc = cli_usage_error("--out-halves is a path prefix of 1..4000 characters");
        goto out;
    }
    if (in_path && nover) {
        rc = cli_usage_error("KEY=VALUE settings go with --nccl-tests; rows carry their own "
                             "(got '%s')",
                             overrides[0]);
        goto out;
    }

    params_out po;
    if ((rc = file_date(&po.when)))
        goto out;
    sim_err err;
    sim_err_clear(&err);
    calib_result res;
    po.res = &res;
    if (in_path) {
        /* the rows run as validate runs them: recipes and framework defaults */
        vsetup_files vs;
        if (vsetup_open(&vs, in_path, recipes_path, frameworks_path, &err) != SIM_OK) {
            rc = cli_fail(&err);
            goto out;
        }
        csv_table t;
        if (csv_read_file(in_path, &t, &err) != SIM_OK) {
            vsetup_close(&vs);
            rc = cli_fail(&err);
            goto out;
        }
        o.setup = &vs.setup;
        int crc = calibrate_rows(&t, in_path, &o, &res, &err);
        o.setup = NULL;
        csv_free(&t);
        vsetup_close(&vs);
        if (crc != SIM_OK) {
            rc = cli_fail(&err);
            goto out;
        }
    } else {
        size_t len = 0;
        char *text = slurp(nccl_path, &len, &err);
        if (!text) {
            rc = cli_fail(&err);
            goto out;
        }
        nccl_log log;
        int prc = nccl_log_parse(text, len, nccl_path, op, &log, &err);
        free(text);
        if (prc != SIM_OK) {
            rc = cli_fail(&err);
            goto out;
        }
        int crc = calibrate_nccl(&log, overrides, &o, &res, &err);
        nccl_log_free(&log);
        if (crc != SIM_OK) {
            rc = cli_fail(&err);
            goto out;
        }
    }
    calibrate_report(stdout, &res);
    if (out_path) {
        if (cli_write_file(out_path, params_writer, &po, &err) != SIM_OK) {
            calibrate_result_free(&res);
            rc = cli_fail(&err);
            goto out;
        }
        printf("\nwrote %s (use: parsim run ... sim.params=%s)\n", out_path, out_path);
    } else {
        fputs("\n", stdout);
        calibrate_write_params(stdout, &res, po.when);
    }
    /* the two held-out fits, PREFIX-even.cfg and PREFIX-odd.cfg */
    for (int h = 0; halves_prefix && h < 2; h++) {
        calib_result *half = malloc(sizeof *half);
        char path[4096];
        snprintf(path, sizeof path, "%s-%s.cfg", halves_prefix, h == 0 ? "even" : "odd");
        if (half && calibrate_half_result(&res, h, half)) {
            params_out ho = { half, po.when };
            if (cli_write_file(path, params_writer, &ho, &err) != SIM_OK) {
                free(half);
                calibrate_result_free(&res);
                rc = cli_fail(&err);
                goto out;
            }
        }
        free(half);
    }
    calibrate_result_free(&res);
    if (fflush(stdout) != 0) {
        fputs("parsim: cannot write the report\n", stderr);
        rc = EXIT_FAILURE;
    }
out:
    free(overrides);
    return rc;
}
