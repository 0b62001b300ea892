/* trace: the simulated step as a Chrome trace (Perfetto).
 * {"traceEvents":[...]} with complete events ("ph":"X", times in µs),
 * pid = pipeline stage, tid = stream (compute, tp, cp, ep, dp, pp);
 * passes are events named by their kind ("F", "B", and "W" where the
 * schedule splits the backward) on the compute stream with
 * args.microbatch and args.chunk, their kernels nested inside them when
 * the step was run with in->sim.keep_ops (parsim run --trace does so);
 * otherwise identical passes were simulated as one task each and only
 * their spans appear.  Written through jsonout (valid JSON whatever the
 * names and times; one event per line).
 */
#ifndef PARSIM_TRACE_H
#define PARSIM_TRACE_H

#include <stdio.h>

#include "err.h"
#include "step.h"

/* SIM_OK, or the JSON writer's failure (err says which; the output is then
 * cut and must not be used). */
int trace_write(FILE *out, const step_t *st, sim_err *err);

#endif
