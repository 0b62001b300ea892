/* report: the outputs people and programs read.
 * text (for people), json (DESIGN §3 contract fields and more) and csv
 * (one header + one row; the sweep format).  All write to a FILE the caller
 * owns; they never fail half-way on their own (the caller writes to a
 * temporary file and renames it when the whole output is written).
 */
#ifndef PARSIM_REPORT_H
#define PARSIM_REPORT_H

#include <stdio.h>

#include "config.h"
#include "step.h"
#include "strategy.h"

void report_text(FILE *out, const run_inputs *in, const strategy_t *s, const step_result *r);
void report_json(FILE *out, const run_inputs *in, const strategy_t *s, const step_result *r);
void report_csv_header(FILE *out);
void report_csv_row(FILE *out, const run_inputs *in, const strategy_t *s, const step_result *r);

#endif
