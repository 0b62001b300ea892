/* parsim compare: what moved between two outputs of validate, sweep or
 * search (rules in compare.h). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "compare.h"
#include "csv.h"
#include "numparse.h"
#include "opts.h"

int cmd_compare(int argc, char **argv)
{
    const char *paths[2] = { NULL, NULL };
    int npaths = 0;
    compare_opts o = { .fail_above_pct = 0.0, .key_cols = NULL, .max_listed = 50 };
    enum { O_FAIL_ABOVE, O_KEY, O_LIST };
    static const opts_def defs[] = {
        [O_FAIL_ABOVE] = {"--fail-above", "a value"}, [O_KEY] = {"--key", "a value"}, [O_LIST] = {"--list", "a value"},
    };
    opts_iter it = opts_start(argc, argv, 0, defs, sizeof defs / sizeof defs[0], NULL, NULL);
    const char *v;
    for (int opt; (opt = opts_next(&it, &v)) != OPTS_END;) {
        if (opt == OPTS_FAIL)
            return EXIT_BAD_INPUT;
        if (opt >= 0) {
            if (opt == O_KEY)
                o.key_cols = v;
            else if (opt == O_FAIL_ABOVE) {
                /* a finite decimal, optionally followed by one '%' */
                char num[64];
                size_t n = strlen(v);
                if (n > 0 && v[n - 1] == '%')
                    n--;
                bool ok = n < sizeof num;
                if (ok) {
                    memcpy(num, v, n);
                    num[n] = '\0';
                    ok = num_parse_double(num, &o.fail_above_pct) && o.fail_above_pct >= 0;
                }
                if (!ok)
                    return cli_usage_error("--fail-above needs a finite percentage >= 0, got '%s'", v);
            } else {
                long long n = 0; /* 0 = all */
                int rc = cli_int_arg("--list", v, 0, INT64_MAX, &n);
                if (rc)
                    return rc;
                o.max_listed = (size_t)n;
            }
        } else if (npaths < 2)
            paths[npaths++] = v;
        else
            return cli_usage_error("compare takes two CSV files, got a third: '%s'", v);
    }
    if (npaths != 2)
        return cli_usage_error("compare needs OLD.csv and NEW.csv");

    sim_err err;
    sim_err_clear(&err);
    csv_table t[2];
    memset(t, 0, sizeof t);
    int rc = EXIT_SUCCESS;
    for (int k = 0; k < 2; k++) {
        if (csv_read_file(paths[k], &t[k], &err) != SIM_OK) {
            /* unreadable or malformed input is bad input here */
            err.code = SIM_EINVAL;
            rc = cli_fail(&err);
            goto out;
        }
    }
    /* The report is built in memory and written in one piece. */
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (!mem) {
        fputs("parsim: out of memory\n", stderr);
        rc = EXIT_FAILURE;
        goto out;
    }
    compare_summary sum;
    int crc = compare_tables(&t[0], paths[0], &t[1], paths[1], &o, mem, &sum, &err);
    fclose(mem);
    if (crc != SIM_OK) {
        free(buf);
        rc = cli_fail(&err);
        goto out;
    }
    if (fwrite(buf, 1, len, stdout) != len || fflush(stdout) != 0) {
        fputs("parsim: cannot write the report\n", stderr);
        free(buf);
        rc = EXIT_FAILURE;
        goto out;
    }
    free(buf);
    rc = sum.moved || sum.only_old || sum.only_new ? EXIT_FAILURE : EXIT_SUCCESS;
out:
    csv_free(&t[0]);
    csv_free(&t[1]);
    return rc;
}
