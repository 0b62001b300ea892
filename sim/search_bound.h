/* search_bound: a lower bound of the step time of a layout, from its
 * workload alone (no simulation), for search's time pruning (search.h:
 * "Pruning, time").
 *
 * For every stage: the pipeline fill before its first forward (the
 * critical paths of chunk 0's forward passes and the sends on the stages
 * before it) + for every pass it runs, the least time from its first to
 * its last compute op (dependencies and in-order streams: the compute
 * stream runs passes one after another, so the gaps inside a pass stay
 * idle; with the EP all-to-all overlap only the compute work) + the larger
 * of its optimizer step and the drain after its last backward (not for
 * schedules that split the backward: their deferred W passes fill it).
 * The bound is the largest over stages.  It leans on how step.c builds a
 * step; tests/test_search.c checks it against simulating everything.
 */
#ifndef PARSIM_SEARCH_BOUND_H
#define PARSIM_SEARCH_BOUND_H

#include "config.h"
#include "err.h"
#include "strategy.h"
#include "wl_cache.h"
#include "workload.h"

/* The step-time lower bound (*lb_s) and the compute-stream work of the
 * busiest stage, optimizer included (*compute_s), both in seconds.
 * SIM_OK, SIM_EINVAL for a stage duration beyond LIMIT_DURATION_S (naming
 * the stage), SIM_ENOMEM, or workload_build's error. */
int search_time_bound(const run_inputs *in, const strategy_t *s, double *lb_s, double *compute_s,
                      sim_err *err);

/* The same from a workload already built for (in, s) (search shares it
 * with the step), with the pass figures kept in cache (NULL: none) across
 * layouts. */
int search_time_bound_of(const workload_t *wl, const strategy_t *s, wl_cache *cache, double *lb_s,
                         double *compute_s, sim_err *err);

#endif
