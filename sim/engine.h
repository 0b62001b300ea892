/* engine: the discrete-event core.  It knows streams, tasks, dependencies
 * and counters; nothing about transformers.
 *
 * Model: a stream is an in-order queue (a CUDA stream): tasks run one at a
 * time in the order they were added to it.  A task starts when it is at the
 * head of its stream and every task it depends on has ended; it then runs
 * for its duration.  Counters (e.g. activation bytes of a stage) change by a
 * delta when a task starts and another when it ends; the engine keeps their
 * peaks, applying all ends at an instant before any start at that instant.
 *
 * Time is integer picoseconds.  A task starts at the latest end among its
 * stream predecessor and its dependencies, so eng_run computes every start
 * in one sweep in dependency order, and counter peaks from the changes in
 * time order; runs are deterministic.  Tasks, dependency edges and counter deltas live in
 * arrays sized once from the hints given to eng_create (growing by doubling
 * only if a hint was short); there is no allocation per event.
 *
 * Ownership: eng_create allocates, eng_destroy frees (NULL is a no-op).
 * Usage: create, add tasks/deps/counter deltas, eng_run once, read results.
 */
#ifndef PARSIM_ENGINE_H
#define PARSIM_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "units.h"

typedef struct engine engine_t;
typedef int32_t eng_task;   /* index of a task, 0..eng_num_tasks-1 */

/* When a task ran: [a, b), its start and end. */
typedef struct eng_span {
    sim_time_ps a, b;
} eng_span;

engine_t *eng_create(int n_streams, int n_counters, size_t task_hint, size_t dep_hint);
void eng_destroy(engine_t *e);

/* Adds a task at the tail of a stream.  Returns its id, or -1 when out of
 * memory.  tag is an opaque caller value kept with the task (e.g. an index
 * into the caller's own description of it). */
eng_task eng_add_task(engine_t *e, int stream, sim_time_ps duration_ps, int32_t tag);

/* `after` cannot start before `before` has ended.  Returns SIM_OK or
 * SIM_ENOMEM. */
int eng_add_dep(engine_t *e, eng_task before, eng_task after);

/* Counter `counter` changes by at_start when t starts and by at_end when it
 * ends.  Several deltas per task are allowed. */
int eng_add_counter_delta(engine_t *e, eng_task t, int counter, int64_t at_start, int64_t at_end);

/* The same in blocks: what n calls of eng_add_task, eng_add_dep or
 * eng_add_counter_delta would add, in that order, with one check for room
 * and tight loops instead of a call each (a graph builder that knows how
 * many ids it has given out can keep its additions and hand them over in
 * blocks).  eng_add_tasks puts task i at the tail of stream[i], duration[i]
 * long, tagged first_tag + i, and returns the first one's id (the others
 * follow it), or -1 with none added (out of memory, past the task limit,
 * a stream out of range, or a tag past INT32_MAX).  eng_add_deps and
 * eng_add_counter_deltas return SIM_OK, or SIM_ENOMEM with none added when
 * there is no room, or else the first failure a single call would have
 * had, with the ones before it added. */
typedef struct eng_dep {
    eng_task before, after;
} eng_dep;
typedef struct eng_delta {
    eng_task task;
    int32_t counter;
    int64_t at_start, at_end;
} eng_delta;
eng_task eng_add_tasks(engine_t *e, size_t n, const int32_t *stream, const sim_time_ps *duration, int32_t first_tag);
int eng_add_deps(engine_t *e, size_t n, const eng_dep *deps);
int eng_add_counter_deltas(engine_t *e, size_t n, const eng_delta *deltas);

/* Dependencies with a lag: deps[k].after cannot start before lag_ps[k]
 * after deps[k].before has ended, as if a task lag_ps[k] long ran between
 * them on a stream of its own (it ends in the first phase of its end
 * instant); a lag of 0 is a plain dependency.  For a transfer that never
 * waits for the one before it (a pipeline send that never queues), the
 * edges out of its producer carry it instead of a task.  Returns as
 * eng_add_deps, or SIM_ENOMEM past INT32_MAX lags and releases together. */
int eng_add_lagged_deps(engine_t *e, size_t n, const eng_dep *deps, const sim_time_ps *lag_ps);

/* Release times: task[k] cannot start before at_ps[k], as if it depended
 * on a task at_ps[k] long that starts at 0 on a stream of its own (it ends
 * in the first phase of that instant); the latest of a task's releases
 * holds, and 0 adds nothing.  For a stream whose tasks wait for nothing
 * but each other (so run at fixed times), the tasks that wait for one of
 * them may wait for its end instead.  SIM_OK, SIM_EINVAL for a task out
 * of range (those before it taken), or SIM_ENOMEM (out of memory, or past
 * INT32_MAX lags and releases together). */
int eng_add_releases(engine_t *e, size_t n, const eng_task *task, const sim_time_ps *at_ps);

/* Runs to completion.  Fails with SIM_ESIM if tasks remain that can never
 * start (a dependency cycle or an inconsistent stream order). */
int eng_run(engine_t *e, sim_err *err);

/* The same run by the event loop the sweep of eng_run replaces (engine.c's
 * note): every result bit for bit as eng_run's, slower.  The reference the
 * tests hold eng_run to. */
int eng_run_event_loop(engine_t *e, sim_err *err);

size_t eng_num_tasks(const engine_t *e);
int eng_num_streams(const engine_t *e); /* as eng_create was given */
int eng_task_stream(const engine_t *e, eng_task t);
int32_t eng_task_tag(const engine_t *e, eng_task t);
/* Start and end of a task; UINT64_MAX for a task that never started (after
 * a failed run). */
sim_time_ps eng_task_start(const engine_t *e, eng_task t);
sim_time_ps eng_task_end(const engine_t *e, eng_task t);
/* Every task's start, end (as eng_task_start, eng_task_end) and stream at
 * once into arrays of eng_num_tasks entries (stream may be NULL). */
void eng_task_times(const engine_t *e, sim_time_ps *start, sim_time_ps *end, int32_t *stream);
sim_time_ps eng_makespan(const engine_t *e);      /* latest end */
int64_t eng_counter_peak(const engine_t *e, int counter);
int64_t eng_counter_final(const engine_t *e, int counter);
uint64_t eng_events(const engine_t *e);           /* events processed by eng_run:
                                                     task starts + task ends */

/* Dependency successors of t after eng_run (stream order not included:
 * eng_stream_tasks has it), in the order eng_add_dep saw them: sets *succ
 * and returns how many. */
size_t eng_task_succs(const engine_t *e, eng_task t, const eng_task **succ);

/* Every task's dependency successors at once, the rows of what
 * eng_task_succs returns (t's are succ[off[t] .. off[t + 1])): true after
 * eng_run, else false with both NULL (no task has any then). */
bool eng_succ_rows(const engine_t *e, const uint32_t **off, const eng_task **succ);
/* The lags of those rows' edges, entry for entry, after eng_run: NULL
 * when no edge was added with a lag (every lag is 0 then). */
const sim_time_ps *eng_succ_lags(const engine_t *e);
/* Every task's release time (eng_add_releases; 0: none), the engine's
 * own array (valid until the next add or eng_destroy): NULL when no task
 * has one. */
const sim_time_ps *eng_task_releases(const engine_t *e);

/* Tasks of a stream in their run order: fills ids (capacity cap), returns
 * how many the stream has. */
size_t eng_stream_tasks(const engine_t *e, int stream, eng_task *ids, size_t cap);

/* The same tasks without a copy: after a successful eng_run, sets *ids to
 * the engine's own run-order slice of the stream (valid until
 * eng_destroy) and returns its length; before, sets *ids to NULL and
 * returns 0 (eng_stream_tasks reads them then). */
size_t eng_stream_view(const engine_t *e, int stream, const eng_task **ids);

/* The spans of a stream's tasks in their run order (eng_stream_view's
 * order), as eng_task_start and eng_task_end give them: after eng_run
 * sets *spans to the engine's own slice (valid until eng_destroy) and
 * returns its length; before, NULL and 0. */
size_t eng_stream_spans(const engine_t *e, int stream, const eng_span **spans);

/* Every counter's net change by the tasks t with sel[t] == value (their
 * deltas at start and at end together) into net (one per counter): false
 * when one would overflow. */
bool eng_counter_nets(const engine_t *e, const int32_t *sel, int32_t value, int64_t *net);

/* Every task's tag at once (eng_task_tag of t is its entry t), the
 * engine's own array (valid until the next add or eng_destroy): a reader
 * of many tasks' tags makes no call per task. */
const int32_t *eng_task_tags(const engine_t *e);

#endif
