/* search_print: a search_result as the text report (`parsim search`), its
 * timing line (stderr) and the CSV (`--out`), every candidate's row with
 * the overrides that rerun it (handover_overrides).
 */
#ifndef PARSIM_SEARCH_PRINT_H
#define PARSIM_SEARCH_PRINT_H

#include <stdio.h>

#include "search.h"

/* The report people read: header, top N table with the baseline row, why
 * the best beats the runner-up, the rules of thumb and how the best
 * compares, the Pareto front if asked, and the counts.  Deterministic:
 * no wall-clock figures (search_print_timing writes those). */
void search_print(FILE *out, const run_inputs *base, const search_opts *o, const search_result *r);

/* One line: simulated count, wall time and configurations per second. */
void search_print_timing(FILE *out, const search_opts *o, const search_result *r);

/* Every simulated candidate as CSV, ranked, with the baseline as the last
 * row (kind "baseline"). */
void search_write_csv(FILE *out, const run_inputs *base, const search_opts *o, const search_result *r);

#endif
