/* Fuzz target: the CSV reader and validate's row mapping, as `parsim
 * validate` uses them.
 *
 * The input is written to the scratch directory and read with
 * csv_read_file.  When it has validate's columns, the first FUZZ_CSV_ROWS
 * rows are mapped (validate_case, validate_number_runs, a --rows filter),
 * the first row that maps to a run and resolves to a small strategy is
 * simulated (validate_predict), and the summary and the --out table are
 * written to a scratch file.  Simulating every row would spend the fuzzer's time
 * in the simulator instead of the reader and the mapping.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "config.h"
#include "csv.h"
#include "validate.h"

#include "fuzz_common.h"

#define FUZZ_CSV_ROWS 32

/* True when the case's overrides resolve to a strategy small enough to
 * simulate here. */
static bool fuzz_case_small(const vcase *c)
{
    cfg_t *cfg = cfg_create(NULL);
    if (!cfg)
        return false;
    sim_err err;
    sim_err_clear(&err);
    int rc = SIM_OK;
    for (int k = 0; k < c->n_over && rc == SIM_OK; k++)
        rc = cfg_set_override(cfg, c->over[k], &err);
    run_inputs in;
    strategy_t s;
    if (rc == SIM_OK)
        rc = cfg_resolve_all(cfg, &in, &s, &err);
    fuzz_check_err(rc, &err);
    bool small = rc == SIM_OK && fuzz_step_small(&in, &s);
    cfg_destroy(cfg);
    return small;
}

int fuzz_csv(const uint8_t *data, size_t size)
{
    char path[512];
    fuzz_write("rows.csv", data, size, path, sizeof path);
    sim_err err;
    sim_err_clear(&err);
    csv_table t;
    int rc = csv_read_file(path, &t, &err);
    fuzz_check_err(rc, &err);
    fuzz_scratch_remove();
    if (rc != SIM_OK)
        return 0;
    for (size_t r = 0; r < t.nrows; r++)
        for (int k = 0; k < t.ncols; k++)
            (void)strlen(csv_cell(&t, r, k)); /* every cell is a string (ASan checks) */
    rc = validate_check_columns(&t, path, &err);
    fuzz_check_err(rc, &err);
    static const char filter[] = "gpu_type=H*,family!=memory,run=even";
    if (rc == SIM_OK) {
        rc = validate_filter_check(&t, filter, &err);
        fuzz_check_err(rc, &err);
    }
    size_t n = t.nrows < FUZZ_CSV_ROWS ? t.nrows : FUZZ_CSV_ROWS;
    vcase *cases = calloc(n ? n : 1, sizeof *cases);
    vpred *preds = calloc(n ? n : 1, sizeof *preds);
    if (rc == SIM_OK && cases && preds) {
        for (size_t r = 0; r < n; r++)
            validate_case(&t, r, NULL, &cases[r]);
        validate_number_runs(cases, n);
        bool simulated = false;
        for (size_t r = 0; r < n; r++) {
            (void)validate_filter_match(&t, &cases[r], filter);
            if (!simulated && !cases[r].skip[0] && fuzz_case_small(&cases[r])) {
                simulated = true;
                if (validate_predict(&cases[r], NULL, NULL, &preds[r]) != SIM_OK)
                    snprintf(preds[r].skip, sizeof preds[r].skip, "out of memory");
            } else {
                snprintf(preds[r].skip, sizeof preds[r].skip, "not simulated");
            }
        }
        /* validate_write_csv writes every row of the table */
        csv_table head = t;
        head.nrows = n;
        FILE *out = fuzz_out();
        validate_write_csv(out, &head, cases, preds);
        validate_summary(out, cases, preds, n);
        fclose(out);
    }
    free(cases);
    free(preds);
    csv_free(&t);
    fuzz_scratch_remove();
    return 0;
}

FUZZ_ENTRY(fuzz_csv)
