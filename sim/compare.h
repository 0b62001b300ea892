/* compare: two CSV outputs of parsim lined up row by row, and what moved.
 *
 * Kinds of input:
 *  - validate outputs (both files have `id` and `predicted_value`): rows are
 *    matched by id; the value compared is predicted_value, and the error
 *    change (median, p90 and mean APE, old vs new, over the rows predicted
 *    in both) is reported overall and per group, as validate groups them.
 *  - anything else (sweep, search, run --format csv, golden cases): rows
 *    are matched by their configuration, i.e. every column present in both
 *    files that is not a result column (or the columns given with --key);
 *    every numeric result column present in both is compared.
 *
 * Result columns (compare_is_result_column): predicted_value, ape_percent,
 * skip_reason, assumed, overrides, index, rank, fits, error, mfu, and any
 * name ending in _s, _bytes, _fraction, _percent, _per_gpu, _hours,
 * _flops, _tflops or starting with exposed_.  Everything else describes
 * the configuration.
 *
 * A row moved when a compared value changed by more than the threshold
 * (relative, percent of |old|; a change from or to zero is infinite), when
 * it went from a value to none or back (predicted <-> skipped, a run that
 * now fails), or when it is in one file only.  A value is a finite number
 * (blanks around it allowed); "nan", "inf" or any text where the other
 * file has a number is such a change of status, so it fails the gate.
 * Text result columns (skip_reason, error, assumed, overrides) that change
 * are listed but do not count as moved by themselves.
 */
#ifndef PARSIM_COMPARE_H
#define PARSIM_COMPARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "csv.h"
#include "err.h"

typedef struct compare_opts {
    double fail_above_pct;   /* a row moved if |change| > this, percent; >= 0 */
    const char *key_cols;    /* comma-separated key columns, NULL = derived */
    size_t max_listed;       /* changed rows listed in full, and rows listed
                                as in one file only (each), 0 = all */
} compare_opts;

typedef struct compare_summary {
    bool validate_kind;      /* matched by id as validate outputs */
    size_t matched;          /* rows in both */
    size_t only_old, only_new;
    size_t moved;            /* matched rows that moved (see above) */
    size_t status_changed;   /* of them: value <-> no value */
    size_t text_changed;     /* matched rows with only text changes */
    double max_abs_change_pct; /* largest finite |relative change|, percent */
} compare_summary;

/* True if the column holds a result (see the header comment). */
bool compare_is_result_column(const char *name);

/* Compares old and new (file names for the messages), writes the report
 * to out and fills sum.  Returns SIM_OK, SIM_EINVAL when the files cannot
 * be lined up (no key column, a --key column missing), SIM_ENOMEM. */
int compare_tables(const csv_table *old_t, const char *old_name, const csv_table *new_t,
                   const char *new_name, const compare_opts *o, FILE *out,
                   compare_summary *sum, sim_err *err);

#endif
