/* step_direct: a whole step's figures straight from its schedule, with no
 * task graph (internal to the step module, not part of its contract in
 * step.h).
 *
 * The step's graph (step.c) is a max-plus system on in-order streams: a
 * task starts at the latest end among its stream predecessor, its
 * dependencies (a lag past them where a send is one) and its release
 * time.  For the steps whose passes all stand as step.c places them on
 * the common path (one task of a pass's span, its host stand-in folded
 * into release times or as lead and rest tasks, a tail op, a pass kept as
 * its ops), step_direct() walks every stage's order at once, each pass
 * as soon as its input from the neighbouring virtual stage has ended,
 * and times every task step.c would add, in the order it adds them (the
 * same task ids, so the same counter order: the engine's rounds and
 * phases are kept for the peaks), without storing an edge.  The figures
 * come off the same intervals step_measure() reads (the sets of the
 * compute and communication streams' spans, shifted passes' ops from
 * their templates, the summaries of the passes that stand as one task),
 * so they are the graph's bit for bit; tests/test_step_direct.c checks
 * that on layouts of every kind the path takes (sim.graph_only gives the
 * graph's).
 *
 * Declined (DIRECT_DECLINED, nothing changed but scratch): a trace, a
 * plain graph, overlapped pairs, a V schedule or split backward, a CUDA
 * graph of the whole iteration, a pass whose host waits for the GPU (a
 * sync), a pass that would stand as a chain, sends that are no lags or
 * would queue, a counter whose changes come out of order, sums near the
 * build's limits: the graph then simulates the step, errors included.
 */
#ifndef PARSIM_STEP_DIRECT_H
#define PARSIM_STEP_DIRECT_H
#include "config.h"
#include "step.h"
#include "step_period.h"
#include "strategy.h"

enum { DIRECT_DECLINED = 1 };

/* The figures of st's whole step (its workload and summaries made, st->M
 * microbatches) into ms: SIM_OK, DIRECT_DECLINED, or SIM_ENOMEM. */
int step_direct(step_t *st, const run_inputs *in, const strategy_t *s, step_meas *ms, sim_err *err);

#endif
