/* pool: one function over many independent items on a fixed number of
 * threads, the calling thread one of them.
 *
 * pool_run starts min(jobs, items, POOL_MAX_WORKERS) - 1 threads (fewer if
 * the system refuses some: the others take their share), hands out the
 * items in order from one atomic counter, and joins them before it
 * returns.  Each call of the function gets the number of the worker that
 * runs it (0 .. pool_workers - 1), so a caller can keep per-worker state
 * in an array of that size without locks; results go into the caller's
 * per-item slots.  Nothing is allocated per item (nor by the pool at all).
 *
 * Completion is unordered: items finish in any order, and on_done (if
 * set) is called once per finished item, one call at a time, with its
 * number and how many have finished so far (a progress meter).  Callers that need order
 * read their slots after pool_run returns: search and validate do.
 * sweep's ordered window is a different thing and keeps its own threads:
 * it writes rows in order while workers still run and stops them from
 * running ahead of what is written (bounded memory over sweeps of any
 * size), which a run-to-completion pool cannot do.
 *
 * Errors: a function returns SIM_OK or a SIM_E* code, filling the sim_err
 * it is given.  pool_run returns the error of the failed item that comes
 * first in hand-out order (not in time), so the error does not depend on
 * the number of jobs; with stop_on_error no item after a failure is
 * handed out (those before it all run, so it is still the first).
 */
#ifndef PARSIM_POOL_H
#define PARSIM_POOL_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"

#define POOL_MAX_WORKERS 256 /* threads of one run, the caller's included */

/* Runs item `item` on worker `worker`. */
typedef int (*pool_fn)(void *ctx, int worker, size_t item, sim_err *err);

typedef struct pool_job {
    int jobs;                 /* threads wanted, the caller's included (< 1: 1) */
    size_t n;                 /* items to run */
    const size_t *items;      /* their numbers, or NULL for 0 .. n-1 */
    pool_fn fn;
    void *ctx;
    bool stop_on_error;       /* hand out nothing after a failure */
    void (*on_done)(void *ctx, size_t item, size_t done); /* NULL for none */
} pool_job;

/* The threads pool_run uses for j (at least 1): the size of an array of
 * per-worker state. */
int pool_workers(const pool_job *j);

/* Runs j->fn over the items.  Returns SIM_OK or the first failed item's
 * code with its error in err (err may be NULL). */
int pool_run(const pool_job *j, sim_err *err);

#endif
