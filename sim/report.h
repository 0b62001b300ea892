/* report: the outputs people and programs read.
 * text (for people), json (DESIGN §3 contract fields and more) and csv
 * (one header + one row; the sweep format).  All write to a FILE the caller
 * owns (the caller writes to a temporary file or memory and publishes the
 * output when it is whole).
 *
 * No output holds "inf" or "nan": a value that is not a finite number (a
 * ratio over a zero time) is null in JSON (see jsonout.h), an empty cell in
 * CSV and "n/a" in text.  Text fields of a CSV row are quoted by
 * csv_write_field when they need it.
 */
#ifndef PARSIM_REPORT_H
#define PARSIM_REPORT_H

#include <stdio.h>

#include "config.h"
#include "err.h"
#include "step.h"
#include "strategy.h"

void report_text(FILE *out, const run_inputs *in, const strategy_t *s, const step_result *r);
/* SIM_OK, or the JSON writer's failure (err says which; the output is then
 * cut and must not be used). */
int report_json(FILE *out, const run_inputs *in, const strategy_t *s, const step_result *r, sim_err *err);
void report_csv_header(FILE *out);
void report_csv_row(FILE *out, const run_inputs *in, const strategy_t *s, const step_result *r);

#endif
