/* engine: the discrete-event core (contract in engine.h).
 *
 * Storage.  Everything lives in a handful of flat arrays owned by the
 * engine_t, sized from the hints of eng_create and grown by doubling (with
 * overflow-checked sizes) when a hint was short:
 *   tasks   a struct of arrays, one entry per task in each: duration,
 *           stream, the next task of its stream, tag, its successor count,
 *           and what a run reads and writes of a task it releases, side by
 *           side in one 16-byte record (hot: start, the count of
 *           predecessors not yet ended, the sweep's round), so that
 *           releasing a successor touches one cache line and the loops over
 *           every task read only the fields they use.  A task's end is
 *           start + duration, so it is not stored.
 *   edges   (before, after) pairs in the order eng_add_dep saw them.
 *   deltas  (task, counter, at_start, at_end) records in the order added.
 * Streams are intrusive singly linked lists threaded through the tasks
 * (stream_next), with a head and a tail per stream.  eng_run
 * groups the task ids by stream (ids are in run order within a stream;
 * the sweep puts each where its stream's slice is at when it takes it, the
 * event loop's run a counting sort after), with every task's span (start,
 * end) in that order beside it, so that the measurements that read every stream back
 * read a slice instead of chasing stream_next through the records.
 *
 * Lags.  An edge may carry a lag (eng_add_lagged_deps): its successor
 * is released that long after the predecessor ends, as a task of that
 * duration on a stream of its own would release it (so in round 1 of
 * the instant the lag ends; a lag of 0 is a plain edge).  The lags live
 * beside the edges (edge_lag, allocated with the first one) and the CSR
 * (succ_lag); the sweep adds them to the release times, and the event
 * loop pushes an event at the lag's end (a negative task id, never
 * counted as a task's event) that does the release.  A graph without
 * lags keeps the lag-free loops.
 *
 * Releases.  A task may have a release time (eng_add_releases): it starts
 * no earlier, as behind a task that long from 0 on a stream of its own.
 * The release counts as one predecessor more in pending; the sweep seeds
 * the task's start with it (round 1) and takes that predecessor at once,
 * the event loop has an event at the release (as a lag's end) that takes
 * it.
 *
 * Dependencies: CSR built at eng_run start.  While the graph is being
 * built, eng_add_dep only appends to the edge list (O(1), no per-task
 * bookkeeping beyond the predecessor count of `after` and the successor
 * count of `before`).  eng_run then turns the counts into offsets and the
 * list into compressed sparse rows (successors contiguous in one array)
 * with a stable counting sort whose counting was done by the add calls:
 * one pass over the edges.  The event loop then walks each ended task's successors as one
 * contiguous slice instead of chasing pointers through a pool, which is
 * what the hot path wants; the price is a second copy of the edges (4 bytes
 * each), which stays after the run for eng_task_succs, and that edges cannot be added after eng_run (they
 * cannot anyway: eng_run runs once).  Counter deltas are sorted by task
 * the same way when they were not added in task order (the add calls note
 * whether they were); the event loop also gets their rows.
 *
 * Streams as dependencies.  Stream order is folded into the predecessor
 * count: every task but the first of its stream counts its stream
 * predecessor as one more unfinished predecessor, released when that
 * predecessor ends.  "Head of its stream and all deps ended" is then just
 * "pending == 0", and at most one task per stream is ready or running at a
 * time, so the ready list never holds more than n_streams entries and the
 * event heap no more than those and one per lag and release (an event
 * each, below): both are allocated once per run.
 *
 * The loop.  Only completions are events; a start happens at the instant
 * its last predecessor ends.  Each instant t is processed in rounds:
 *   ends phase    pop every completion with time t (in (time, seq) order),
 *                 apply the end deltas, release successors and the stream
 *                 successor; those whose count drops to 0 join the ready
 *                 list in that order;
 *   starts phase  start every ready task at t, apply the start deltas, push
 *                 its completion at t + duration with the next seq.
 * A zero-duration task started in a starts phase pushes a completion at t
 * itself, which the next round at the same instant ends; so zero-duration
 * tasks start and end properly and ordering among them is by seq.
 *
 * Counter peaks.  Within a phase the changes happen at the same instant,
 * so no intermediate value is observable.  Peaks are therefore taken at
 * phase boundaries only: after all the ends of a round and after all its
 * starts (through a small list of counters touched in the phase).  With the
 * usual allocate-at-start / free-at-end deltas this is the rule of
 * engine.h: a buffer freed at t and another allocated at t never count
 * together.  Peaks include the initial value 0.
 *
 * Events: eng_events counts task starts plus task ends, so a run that
 * completes has exactly 2 * eng_num_tasks events.
 *
 * The sweep (what eng_run runs; the loop above stays as
 * eng_run_event_loop, and runs whatever the sweep declines).  Streams never
 * contend, so nothing in the loop depends on the order of events but the
 * counter peaks: a task starts at the latest end among its predecessors (0
 * without any).  One pass in topological order (Kahn: a FIFO of tasks
 * whose predecessor count reached 0, the stream successor counted as one)
 * makes each start final when its last predecessor is taken, and records
 * the round the loop would start it in: round 0 at time 0 for a task
 * without predecessors, else the latest end round among the predecessors
 * that end at its start, where a task of positive duration ends in round 1
 * of its end instant and a zero-duration one in the round after its start.
 * The peaks then replay every counter change at (instant, phase), phase 2k
 * for the starts of round k and 2k - 1 for its ends, a peak after each
 * (instant, phase): exactly the loop's phase boundaries.  Tasks in id order
 * are in stream order and (instant, phase) never decreases along a stream,
 * so a counter whose changes come from one stream is already in order; the
 * rest are sorted.  A cycle or a time overflow sends the run to the loop,
 * after undoing the sweep, so that failures (which tasks started, the
 * message) are the loop's too.
 */
#include "engine.h"

#include <assert.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define NEVER UINT64_MAX            /* start of a task that never started */
#define MAX_TASKS ((size_t)INT32_MAX)
#define MAX_EDGES ((size_t)UINT32_MAX - 1)  /* CSR offsets are uint32_t */
#define MAX_DELTAS ((size_t)UINT32_MAX - 1)

/* What a run reads and writes of a task when a predecessor ends: one
 * record, so that releasing a successor is one cache line. */
typedef struct eng__hot {
    sim_time_ps start_ps;   /* NEVER until the task starts */
    int32_t pending;        /* predecessors not ended, stream predecessor included */
    uint32_t round;         /* the sweep's: the event loop's round it starts in */
} eng__hot;

/* Edges are eng_dep (before, after) and deltas eng_delta (the deltas are
 * sorted by task in eng_run), as the block calls take them. */
typedef eng_dep eng__edge;
typedef eng_delta eng__delta;

/* A pending completion (or a lag's or release's end: task < 0).  seq is
 * taken from a per-run counter when the task starts or the lag begins;
 * every task starts at most once and every lag and release begins once,
 * and those together are held to MAX_TASKS, so it fits 32 bits. */
typedef struct eng__event {
    sim_time_ps time_ps;
    uint32_t seq;
    int32_t task;
} eng__event;

struct engine {
    int n_streams;
    int n_counters;

    /* The tasks, cap_tasks entries in each array. */
    size_t n_tasks, cap_tasks;
    sim_time_ps *duration;
    eng__hot *hot;
    int32_t *stream_next;   /* next task of the same stream, -1 at the tail */
    int32_t *stream;
    int32_t *tag;
    /* Until eng_run: [t] counts the dependency successors of t (cap_tasks
     * + 1 entries); eng_run turns it into the CSR's offsets in place. */
    uint32_t *succ_off;
    eng__edge *edges;       /* freed by eng_run once the CSR exists */
    size_t n_edges, cap_edges;
    /* Per edge its lag (eng_add_lagged_deps), cap_edges entries; NULL
     * while no edge has one.  Freed by eng_run, which leaves succ_lag. */
    sim_time_ps *edge_lag;
    size_t n_lagged;        /* edges with a lag > 0 */
    /* Per task its release time (eng_add_releases), cap_tasks entries;
     * NULL while no task has one.  A release > 0 counts as one more
     * predecessor in pending until the run takes it. */
    sim_time_ps *release;
    size_t n_released;      /* tasks with a release > 0 */
    eng__delta *deltas;     /* sorted by task by eng_run */
    size_t n_deltas, cap_deltas;
    bool deltas_sorted;     /* every delta added for a task no earlier than the last */

    int32_t *stream_head;   /* first task of each stream, -1 if empty */
    int32_t *stream_tail;   /* last task of each stream, -1 if empty */
    /* After eng_run: the tasks of stream s are by_stream[stream_off[s] ..
     * stream_off[s+1]), so that reading a stream back is a copy rather
     * than a walk along stream_next (NULL: walk).  Until then
     * stream_off[s+1] counts the tasks of stream s. */
    int32_t *by_stream;
    uint32_t *stream_off;
    /* After eng_run, beside by_stream: every task's span in its order, for
     * the measurements that read whole streams (NULL until then). */
    eng_span *stream_spans;
    /* After eng_run: the successors of the CSR (eng_task_succs) and,
     * where any edge has a lag, each one's beside it (else NULL). */
    int32_t *succ;
    sim_time_ps *succ_lag;
    int64_t *counter_value; /* current (after eng_run: final) value */
    int64_t *counter_peak;

    sim_time_ps makespan_ps;
    uint64_t events;
    bool ran;
};

/* The capacity to grow an array of cap elements to for need, doubling,
 * never past limit; 0 when need is past limit. */
static size_t grown_cap(size_t cap, size_t need, size_t limit)
{
    if (need > limit)
        return 0;
    size_t nc = cap < 16 ? 16 : cap;
    while (nc < need)
        nc = nc > limit / 2 ? limit : nc * 2;
    return nc;
}

/* *p resized to n elements of size elem.  SIM_OK or SIM_ENOMEM (*p
 * untouched then). */
static int resize(void **p, size_t n, size_t elem)
{
    if (n > SIZE_MAX / elem)
        return SIM_ENOMEM;
    void *q = realloc(*p, n * elem);
    if (!q)
        return SIM_ENOMEM;
    *p = q;
    return SIM_OK;
}

/* Grows *p (an array of *cap elements of size elem) to at least need
 * elements, doubling, never past limit.  Returns SIM_OK or SIM_ENOMEM; *p is
 * untouched on failure. */
static int grow(void **p, size_t *cap, size_t need, size_t elem, size_t limit)
{
    if (need <= *cap)
        return SIM_OK;
    size_t nc = grown_cap(*cap, need, limit);
    if (nc == 0 || resize(p, nc, elem) != SIM_OK)
        return SIM_ENOMEM;
    *cap = nc;
    return SIM_OK;
}

/* Every task array grown to room for need tasks.  An array that grew
 * before another failed keeps its room (cap_tasks stays the least). */
static int grow_tasks(engine_t *e, size_t need)
{
    if (need <= e->cap_tasks)
        return SIM_OK;
    size_t nc = grown_cap(e->cap_tasks, need, MAX_TASKS);
    if (nc == 0)
        return SIM_ENOMEM;
    if (resize((void **)&e->duration, nc, sizeof *e->duration) != SIM_OK ||
        resize((void **)&e->hot, nc, sizeof *e->hot) != SIM_OK ||
        resize((void **)&e->stream_next, nc, sizeof *e->stream_next) != SIM_OK ||
        resize((void **)&e->stream, nc, sizeof *e->stream) != SIM_OK ||
        resize((void **)&e->tag, nc, sizeof *e->tag) != SIM_OK ||
        resize((void **)&e->succ_off, nc + 1, sizeof *e->succ_off) != SIM_OK ||
        (e->release && resize((void **)&e->release, nc, sizeof *e->release) != SIM_OK))
        return SIM_ENOMEM;
    e->cap_tasks = nc;
    return SIM_OK;
}

engine_t *eng_create(int n_streams, int n_counters, size_t task_hint, size_t dep_hint)
{
    if (n_streams < 0 || n_counters < 0)
        return NULL;
    engine_t *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->n_streams = n_streams;
    e->n_counters = n_counters;
    e->deltas_sorted = true;
    size_t ns = n_streams > 0 ? (size_t)n_streams : 1;
    size_t nc = n_counters > 0 ? (size_t)n_counters : 1;
    e->stream_head = malloc(ns * sizeof *e->stream_head);
    e->stream_tail = malloc(ns * sizeof *e->stream_tail);
    e->counter_value = calloc(nc, sizeof *e->counter_value);
    e->counter_peak = calloc(nc, sizeof *e->counter_peak);
    e->stream_off = calloc(ns + 1, sizeof *e->stream_off);
    if (!e->stream_head || !e->stream_tail || !e->counter_value || !e->counter_peak || !e->stream_off)
        goto fail;
    for (size_t s = 0; s < ns; s++)
        e->stream_head[s] = e->stream_tail[s] = -1;
    /* At least one entry: eng_run turns succ_off into n + 1 offsets. */
    if (grow_tasks(e, task_hint < 1 ? 1 : task_hint < MAX_TASKS ? task_hint : MAX_TASKS) != SIM_OK)
        goto fail;
    if (grow((void **)&e->edges, &e->cap_edges, dep_hint < MAX_EDGES ? dep_hint : MAX_EDGES,
             sizeof *e->edges, MAX_EDGES) != SIM_OK)
        goto fail;
    /* No hint for the counter deltas: room for one per two tasks (a step
     * has about 0.4) spares the doublings from 16, which copied the array
     * ten times over.  Pages never written cost no memory. */
    size_t delta_hint = task_hint / 2 < MAX_DELTAS ? task_hint / 2 : MAX_DELTAS;
    if (grow((void **)&e->deltas, &e->cap_deltas, delta_hint, sizeof *e->deltas, MAX_DELTAS) != SIM_OK)
        goto fail;
    return e;
fail:
    eng_destroy(e);
    return NULL;
}

void eng_destroy(engine_t *e)
{
    if (!e)
        return;
    free(e->duration);
    free(e->hot);
    free(e->stream_next);
    free(e->stream);
    free(e->tag);
    free(e->succ_off);
    free(e->edges);
    free(e->edge_lag);
    free(e->release);
    free(e->deltas);
    free(e->stream_head);
    free(e->stream_tail);
    free(e->by_stream);
    free(e->stream_off);
    free(e->stream_spans);
    free(e->succ);
    free(e->succ_lag);
    free(e->counter_value);
    free(e->counter_peak);
    free(e);
}

/* The single adds are blocks of one. */
eng_task eng_add_task(engine_t *e, int stream, sim_time_ps duration_ps, int32_t tag)
{
    const int32_t s = stream;
    return eng_add_tasks(e, 1, &s, &duration_ps, tag);
}

static bool valid_task(const engine_t *e, eng_task t)
{
    return (uint32_t)t < e->n_tasks; /* a negative t is past MAX_TASKS */
}

int eng_add_dep(engine_t *e, eng_task before, eng_task after)
{
    return eng_add_deps(e, 1, &(eng_dep){before, after});
}

int eng_add_counter_delta(engine_t *e, eng_task t, int counter, int64_t at_start, int64_t at_end)
{
    return eng_add_counter_deltas(e, 1, &(eng_delta){t, counter, at_start, at_end});
}

eng_task eng_add_tasks(engine_t *e, size_t n, const int32_t *stream, const sim_time_ps *duration, int32_t first_tag)
{
    assert(!e->ran && "eng_add_tasks after eng_run");
    if (e->ran || n > MAX_TASKS - e->n_tasks || (int64_t)first_tag + (int64_t)n - 1 > INT32_MAX)
        return -1;
    bool streams_ok = true;
    for (size_t i = 0; i < n; i++)
        streams_ok &= (uint32_t)stream[i] < (uint32_t)e->n_streams;
    assert(streams_ok);
    if (!streams_ok || grow_tasks(e, e->n_tasks + n) != SIM_OK)
        return -1;
    const size_t base = e->n_tasks;
    if (n == 0)
        return (eng_task)base;
    memcpy(e->duration + base, duration, n * sizeof *duration);
    memcpy(e->stream + base, stream, n * sizeof *stream);
    memset(e->succ_off + base, 0, n * sizeof *e->succ_off);
    if (e->release)
        memset(e->release + base, 0, n * sizeof *e->release);
    int32_t *head = e->stream_head, *tail = e->stream_tail, *next = e->stream_next;
    for (size_t i = 0; i < n; i++) {
        const int32_t id = (int32_t)(base + i), s = stream[i], last = tail[s];
        e->hot[id] = (eng__hot){.start_ps = NEVER, .pending = last >= 0, .round = 0};
        e->tag[id] = (int32_t)((int64_t)first_tag + (int64_t)i);
        next[id] = -1;
        if (last >= 0)
            next[last] = id;
        else
            head[s] = id;
        tail[s] = id;
        e->stream_off[s + 1]++;
    }
    e->n_tasks = base + n;
    return (eng_task)base;
}

/* Room for n more edges (and their lags where edges have them). */
static int room_edges(engine_t *e, size_t n)
{
    const size_t cap = e->cap_edges;
    if (n > MAX_EDGES - e->n_edges ||
        grow((void **)&e->edges, &e->cap_edges, e->n_edges + n, sizeof *e->edges, MAX_EDGES) != SIM_OK)
        return SIM_ENOMEM;
    if (e->edge_lag && e->cap_edges != cap && resize((void **)&e->edge_lag, e->cap_edges, sizeof *e->edge_lag) != SIM_OK) {
        e->cap_edges = cap; /* the edges' room is kept; the lags' says how much is usable */
        return SIM_ENOMEM;
    }
    return SIM_OK;
}

int eng_add_deps(engine_t *e, size_t n, const eng_dep *deps)
{
    assert(!e->ran && "eng_add_deps after eng_run");
    if (e->ran)
        return SIM_EINVAL;
    if (room_edges(e, n) != SIM_OK)
        return SIM_ENOMEM;
    if (e->edge_lag)
        memset(e->edge_lag + e->n_edges, 0, n * sizeof *e->edge_lag);
    eng__hot *hot = e->hot;
    uint32_t *outs = e->succ_off;
    eng__edge *to = e->edges + e->n_edges;
    for (size_t k = 0; k < n; k++) {
        const eng_dep d = deps[k];
        assert(valid_task(e, d.before) && valid_task(e, d.after));
        if (!valid_task(e, d.before) || !valid_task(e, d.after)) {
            e->n_edges += k;
            return SIM_EINVAL;
        }
        if (hot[d.after].pending == INT32_MAX) {
            e->n_edges += k;
            return SIM_ENOMEM;
        }
        to[k] = d;
        hot[d.after].pending++;
        outs[d.before]++;
    }
    e->n_edges += n;
    return SIM_OK;
}

/* A per-edge or per-task array of times made when first needed: room
 * for cap, the used entries so far 0 (those to come write theirs). */
static int lazy_times(sim_time_ps **p, size_t cap, size_t used)
{
    if (*p)
        return SIM_OK;
    *p = malloc((cap ? cap : 1) * sizeof **p);
    if (!*p)
        return SIM_ENOMEM;
    memset(*p, 0, used * sizeof **p);
    return SIM_OK;
}

int eng_add_lagged_deps(engine_t *e, size_t n, const eng_dep *deps, const sim_time_ps *lag_ps)
{
    assert(!e->ran && "eng_add_lagged_deps after eng_run");
    if (e->ran)
        return SIM_EINVAL;
    size_t lagged = 0;
    for (size_t k = 0; k < n; k++)
        lagged += lag_ps[k] > 0;
    /* The event loop numbers a lag's event with the tasks' (eng__event). */
    if (lagged > MAX_TASKS - e->n_lagged - e->n_released)
        return SIM_ENOMEM;
    if (n > 0 && lazy_times(&e->edge_lag, e->cap_edges, e->n_edges) != SIM_OK)
        return SIM_ENOMEM;
    const size_t at = e->n_edges;
    int rc = eng_add_deps(e, n, deps);
    /* The edges added (all, or those before the first failure). */
    for (size_t k = at; k < e->n_edges; k++) {
        e->edge_lag[k] = lag_ps[k - at];
        e->n_lagged += lag_ps[k - at] > 0;
    }
    return rc;
}

int eng_add_releases(engine_t *e, size_t n, const eng_task *task, const sim_time_ps *at_ps)
{
    assert(!e->ran && "eng_add_releases after eng_run");
    if (e->ran)
        return SIM_EINVAL;
    if (n > 0 && lazy_times(&e->release, e->cap_tasks, e->n_tasks) != SIM_OK)
        return SIM_ENOMEM;
    for (size_t k = 0; k < n; k++) {
        const eng_task t = task[k];
        assert(valid_task(e, t));
        if (!valid_task(e, t))
            return SIM_EINVAL;
        if (at_ps[k] <= e->release[t])
            continue;
        if (e->release[t] == 0) {
            /* The event loop numbers a release's event with the tasks'. */
            if (e->hot[t].pending == INT32_MAX || e->n_lagged + e->n_released >= MAX_TASKS)
                return SIM_ENOMEM;
            e->hot[t].pending++;
            e->n_released++;
        }
        e->release[t] = at_ps[k];
    }
    return SIM_OK;
}

int eng_add_counter_deltas(engine_t *e, size_t n, const eng_delta *deltas)
{
    assert(!e->ran && "eng_add_counter_deltas after eng_run");
    if (e->ran)
        return SIM_EINVAL;
    if (n > MAX_DELTAS - e->n_deltas ||
        grow((void **)&e->deltas, &e->cap_deltas, e->n_deltas + n, sizeof *e->deltas, MAX_DELTAS) != SIM_OK)
        return SIM_ENOMEM;
    eng__delta *to = e->deltas + e->n_deltas;
    int32_t last = e->n_deltas > 0 ? e->deltas[e->n_deltas - 1].task : 0;
    for (size_t k = 0; k < n; k++) {
        const eng_delta d = deltas[k];
        assert(valid_task(e, d.task) && d.counter >= 0 && d.counter < e->n_counters);
        if (!valid_task(e, d.task) || (uint32_t)d.counter >= (uint32_t)e->n_counters) {
            e->n_deltas += k;
            return SIM_EINVAL;
        }
        e->deltas_sorted &= d.task >= last;
        last = d.task;
        to[k] = d;
    }
    e->n_deltas += n;
    return SIM_OK;
}

/* ---- the run ---------------------------------------------------------- */

/* State that exists only while eng_run runs. */
typedef struct run {
    uint32_t *succ_off;     /* CSR: successors of t are succ[succ_off[t] .. succ_off[t+1])
                               (the engine's array: it stays) */
    int32_t *succ;
    sim_time_ps *succ_lag;  /* beside succ, where edges have lags (else NULL) */
    uint32_t *delta_off;    /* deltas of t are e->deltas[delta_off[t] .. delta_off[t+1]) */
    /* the sweep: the topological order, seeded by run_prepare with the
     * tasks that have no predecessor (n_seeded of them) */
    int32_t *order;
    size_t n_seeded;
    /* the event loop */
    eng__event *heap;       /* completions, a binary min-heap on (time, seq) */
    size_t heap_n;
    int32_t *ready;         /* tasks that start at the current instant, in order */
    size_t ready_n;
    size_t cap;             /* of ready: one entry per stream at most */
    size_t heap_cap;        /* of heap: cap, and one per lag and release */
    int32_t *dirty;         /* counters changed in the current phase */
    size_t dirty_n;
    uint8_t *is_dirty;
} run;

static inline bool ev_before(const eng__event *a, const eng__event *b)
{
    return a->time_ps < b->time_ps || (a->time_ps == b->time_ps && a->seq < b->seq);
}

static inline void heap_push(run *r, eng__event ev)
{
    assert(r->heap_n < r->heap_cap);
    size_t i = r->heap_n++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!ev_before(&ev, &r->heap[up]))
            break;
        r->heap[i] = r->heap[up];
        i = up;
    }
    r->heap[i] = ev;
}

static inline eng__event heap_pop(run *r)
{
    eng__event top = r->heap[0];
    eng__event last = r->heap[--r->heap_n];
    size_t n = r->heap_n, i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && ev_before(&r->heap[c + 1], &r->heap[c]))
            c++;
        if (!ev_before(&r->heap[c], &last))
            break;
        r->heap[i] = r->heap[c];
        i = c;
    }
    if (n > 0)
        r->heap[i] = last;
    return top;
}

static inline void apply_deltas(engine_t *e, run *r, int32_t t, bool at_start)
{
    for (uint32_t k = r->delta_off[t], end = r->delta_off[t + 1]; k < end; k++) {
        const eng__delta *d = &e->deltas[k];
        e->counter_value[d->counter] += at_start ? d->at_start : d->at_end;
        if (!r->is_dirty[d->counter]) {
            r->is_dirty[d->counter] = 1;
            r->dirty[r->dirty_n++] = d->counter;
        }
    }
}

/* End of a phase: the values now are what the counters hold at this
 * instant, so this is where peaks are taken. */
static inline void flush_peaks(engine_t *e, run *r)
{
    for (size_t k = 0; k < r->dirty_n; k++) {
        int32_t c = r->dirty[k];
        if (e->counter_value[c] > e->counter_peak[c])
            e->counter_peak[c] = e->counter_value[c];
        r->is_dirty[c] = 0;
    }
    r->dirty_n = 0;
}

static void run_free(run *r)
{
    free(r->order);
    free(r->succ);
    free(r->succ_lag);
    free(r->delta_off);
    free(r->heap);
    free(r->ready);
    free(r->dirty);
    free(r->is_dirty);
}

/* Builds the CSR of successors and sorts the deltas by task (both stable,
 * so per-task order is the order of the add calls).  Frees the edge list.
 * For the sweep (sweep), in the same pass over the tasks: every start at
 * 0 in round 0 (what release() raises) and the order seeded with the
 * tasks without predecessors. */
static int run_prepare(engine_t *e, run *r, bool sweep)
{
    size_t n = e->n_tasks;
    r->succ = malloc((e->n_edges ? e->n_edges : 1) * sizeof *r->succ);
    /* One entry more than tasks: release() writes at the tail before it
     * knows whether the task joins. */
    r->order = sweep ? malloc((n + 1) * sizeof *r->order) : NULL;
    r->succ_lag = e->edge_lag ? malloc((e->n_edges ? e->n_edges : 1) * sizeof *r->succ_lag) : NULL;
    if (!r->succ || (sweep && !r->order) || (e->edge_lag && !r->succ_lag))
        return SIM_ENOMEM;

    /* Counting sort of the edges by `before`, counted by eng_add_dep:
     * inclusive prefix sums make off[t] the end of t's row; placing the
     * edges from the last, each one before its row's end, leaves off[t]
     * the row's start and the row in the order of the add calls. */
    uint32_t *off = e->succ_off, sum = 0;
    if (sweep) {
        eng__hot *hot = e->hot;
        int32_t *order = r->order;
        size_t seeded = 0;
        const sim_time_ps *rel = e->release;
        for (size_t t = 0; t < n; t++) {
            sum += off[t];
            off[t] = sum;
            /* A release is a predecessor that ends at it, in round 1. */
            const sim_time_ps at = rel ? rel[t] : 0;
            hot[t].start_ps = at;
            hot[t].round = at > 0;
            hot[t].pending -= at > 0;
            order[seeded] = (int32_t)t;
            seeded += hot[t].pending == 0;
        }
        r->n_seeded = seeded;
    } else {
        for (size_t t = 0; t < n; t++) {
            sum += off[t];
            off[t] = sum;
        }
    }
    off[n] = sum;
    if (r->succ_lag)
        for (size_t k = e->n_edges; k-- > 0;) {
            const uint32_t at = --off[e->edges[k].before];
            r->succ[at] = e->edges[k].after;
            r->succ_lag[at] = e->edge_lag[k];
        }
    else
        for (size_t k = e->n_edges; k-- > 0;)
            r->succ[--off[e->edges[k].before]] = e->edges[k].after;
    r->succ_off = off;
    free(e->edges);
    e->edges = NULL;
    e->cap_edges = 0;
    free(e->edge_lag);
    e->edge_lag = NULL;

    /* The deltas sorted by task into a new array when they were not
     * added in task order (the usual way: nothing to do then). */
    if (e->n_deltas && !e->deltas_sorted) {
        uint32_t *doff = calloc(n + 1, sizeof *doff);
        eng__delta *sorted = malloc(e->n_deltas * sizeof *sorted);
        if (!doff || !sorted) {
            free(doff);
            free(sorted);
            return SIM_ENOMEM;
        }
        for (size_t k = 0; k < e->n_deltas; k++)
            doff[e->deltas[k].task + 1]++;
        for (size_t t = 0; t < n; t++)
            doff[t + 1] += doff[t];
        for (size_t k = 0; k < e->n_deltas; k++)
            sorted[doff[e->deltas[k].task]++] = e->deltas[k];
        free(doff);
        free(e->deltas);
        e->deltas = sorted;
        e->cap_deltas = e->n_deltas;
        e->deltas_sorted = true;
    }
    return SIM_OK;
}

/* ---- the event loop (reference; runs what the sweep declines) ---------- */

static int loop_alloc(engine_t *e, run *r)
{
    size_t ns = e->n_streams > 0 ? (size_t)e->n_streams : 1;
    size_t nc = e->n_counters > 0 ? (size_t)e->n_counters : 1;
    size_t n = e->n_tasks;
    r->cap = ns;
    /* A lag in flight or a release to come is an event too (run_loop). */
    r->heap_cap = ns + e->n_lagged + e->n_released;
    r->heap = malloc(r->heap_cap * sizeof *r->heap);
    r->ready = malloc(ns * sizeof *r->ready);
    r->dirty = malloc(nc * sizeof *r->dirty);
    r->is_dirty = calloc(nc, 1);
    /* The rows of the deltas (sorted by task by run_prepare). */
    r->delta_off = calloc(n + 1, sizeof *r->delta_off);
    if (!r->heap || !r->ready || !r->dirty || !r->is_dirty || !r->delta_off)
        return SIM_ENOMEM;
    for (size_t k = 0; k < e->n_deltas; k++)
        r->delta_off[e->deltas[k].task + 1]++;
    for (size_t t = 0; t < n; t++)
        r->delta_off[t + 1] += r->delta_off[t];
    return SIM_OK;
}

static int run_loop(engine_t *e, run *r, sim_err *err)
{
    eng__hot *hot = e->hot;
    const sim_time_ps *dur = e->duration;
    size_t n = e->n_tasks, started = 0;
    uint64_t events = 0;
    uint32_t seq = 0;
    sim_time_ps now = 0;
    bool overflow = false;

    /* Tasks ready at time 0: stream heads without dependencies; each
     * release an event at its time (as a lag's). */
    for (size_t t = 0; t < n; t++) {
        if (hot[t].pending == 0)
            r->ready[r->ready_n++] = (int32_t)t;
        if (e->release && e->release[t] > 0)
            heap_push(r, (eng__event){e->release[t], seq++, -1 - (int32_t)t});
    }

    for (;;) {
        /* Starts phase. */
        for (size_t k = 0; k < r->ready_n; k++) {
            int32_t t = r->ready[k];
            if (dur[t] > NEVER - 1 - now) {
                overflow = true;
                break;
            }
            hot[t].start_ps = now;
            if (r->delta_off[t] != r->delta_off[t + 1])
                apply_deltas(e, r, t, true);
            heap_push(r, (eng__event){now + dur[t], seq++, t});
        }
        if (overflow)
            break;
        started += r->ready_n;
        events += r->ready_n;
        r->ready_n = 0;
        flush_peaks(e, r);

        if (r->heap_n == 0)
            break;

        /* Ends phase: every completion at the earliest pending instant,
         * and every lag that ends then (an event of task -1 - w: it
         * releases w, as a task of its own stream would). */
        now = r->heap[0].time_ps;
        do {
            int32_t t = heap_pop(r).task;
            if (t < 0) {
                const int32_t w = -1 - t;
                if (--hot[w].pending == 0)
                    r->ready[r->ready_n++] = w;
                continue;
            }
            events++;
            if (r->delta_off[t] != r->delta_off[t + 1])
                apply_deltas(e, r, t, false);
            for (uint32_t k = r->succ_off[t], end = r->succ_off[t + 1]; k < end; k++) {
                int32_t s = r->succ[k];
                const sim_time_ps lag = r->succ_lag ? r->succ_lag[k] : 0;
                if (lag > 0) {
                    if (lag > NEVER - 1 - now)
                        overflow = true;
                    else
                        heap_push(r, (eng__event){now + lag, seq++, -1 - s});
                } else if (--hot[s].pending == 0) {
                    r->ready[r->ready_n++] = s;
                }
            }
            int32_t s = e->stream_next[t];
            if (s >= 0 && --hot[s].pending == 0)
                r->ready[r->ready_n++] = s;
            assert(r->ready_n <= r->cap);
        } while (!overflow && r->heap_n > 0 && r->heap[0].time_ps == now);
        if (overflow)
            break;
        flush_peaks(e, r);
    }

    e->events = events;
    e->makespan_ps = now;
    if (overflow)
        return sim_err_set(err, SIM_ESIM,
                           "engine: simulated time overflows 2^64 ps at %llu ps",
                           (unsigned long long)now);
    if (started < n) {
        size_t first = 0;
        while (hot[first].start_ps != NEVER)
            first++;
        return sim_err_set(err, SIM_ESIM,
                           "engine: %zu of %zu tasks can never start (dependency cycle or "
                           "inconsistent stream order), e.g. task %zu (stream %d, tag %d) "
                           "with %d predecessors unfinished",
                           n - started, n, first, (int)e->stream[first], (int)e->tag[first],
                           (int)hot[first].pending);
    }
    return SIM_OK;
}

/* ---- the sweep --------------------------------------------------------- */

/* A counter change, placed in the event loop's order: at instant time_ps,
 * phase 2k for the starts of round k, 2k - 1 for the ends of round k. */
typedef struct eng__change {
    sim_time_ps time_ps;
    uint32_t phase;
    int32_t counter;
    int64_t delta;
} eng__change;

static inline bool change_before(const eng__change *a, const eng__change *b)
{
    return a->time_ps < b->time_ps || (a->time_ps == b->time_ps && a->phase < b->phase);
}

static int cmp_change(const void *x, const void *y)
{
    const eng__change *a = x, *b = y;
    return change_before(a, b) ? -1 : change_before(b, a) ? 1 : 0;
}

/* A predecessor of u ended at `end` in round end_round: u starts at the
 * latest end among its predecessors (0 without any), in the round after
 * the last of them ended there; u joins the order (at *tail, which has
 * room for one more) when it was the last.  Selects rather than branches:
 * which predecessor ends last follows no pattern. */
static inline void release(eng__hot *u, int32_t id, sim_time_ps end, uint32_t end_round, int32_t *order,
                           size_t *tail)
{
    const bool later = end > u->start_ps || (end == u->start_ps && end_round > u->round);
    u->start_ps = later ? end : u->start_ps;
    u->round = later ? end_round : u->round;
    order[*tail] = id;
    *tail += --u->pending == 0;
}

/* Where a counter's changes stand while sweep_counters reads them in task
 * order: the last change's (instant, phase), (0, 0) before the first (no
 * change comes before it, and a peak there is the initial 0), and whether
 * one came before the last (then they are sorted). */
typedef struct eng__ctr {
    sim_time_ps time_ps;
    uint32_t phase;
    bool unsorted;
} eng__ctr;

/* The i-th change (0: at start, 1: at end) of delta d as the loop places
 * it; false when that delta is 0 (no change). */
static inline bool change_of(const engine_t *e, const eng__delta *d, int i, eng__change *out)
{
    const eng__hot *h = &e->hot[d->task];
    const sim_time_ps dur = e->duration[d->task];
    if (i == 0) {
        *out = (eng__change){h->start_ps, 2 * h->round, d->counter, d->at_start};
        return d->at_start != 0;
    }
    *out = (eng__change){h->start_ps + dur, dur ? 1 : 2 * h->round + 1, d->counter, d->at_end};
    return d->at_end != 0;
}

/* Counter peaks and finals: every task's changes in the loop's order, a
 * peak after each phase.  Tasks in id order are in stream order, and along
 * a stream (time, phase) never decreases, so a counter whose changes come
 * from one stream comes in order: its value and peaks are taken as the
 * deltas are read (a peak when a later phase begins, and at the end).
 * The changes of a counter that come out of order are gathered and
 * sorted, then summed the same way. */
static int sweep_counters(engine_t *e)
{
    size_t nc = (size_t)e->n_counters;
    if (e->n_deltas == 0)
        return SIM_OK;
    eng__ctr *cs = calloc(nc, sizeof *cs);
    if (!cs)
        return SIM_ENOMEM;
    int64_t *value = e->counter_value, *peak = e->counter_peak;
    memset(value, 0, nc * sizeof *value);
    memset(peak, 0, nc * sizeof *peak);
    size_t n_late = 0; /* changes of counters out of order */
    for (size_t k = 0; k < e->n_deltas; k++) {
        const eng__delta *d = &e->deltas[k];
        eng__ctr *c = &cs[d->counter];
        for (int i = 0; i < 2; i++) {
            eng__change ch;
            if (!change_of(e, d, i, &ch))
                continue;
            n_late += c->unsorted;
            if (c->unsorted)
                continue;
            const eng__change last = {c->time_ps, c->phase, 0, 0};
            if (change_before(&ch, &last)) {
                c->unsorted = true;
                n_late++; /* even when it is the counter's last change */
                continue;
            }
            if (change_before(&last, &ch) && value[d->counter] > peak[d->counter])
                peak[d->counter] = value[d->counter];
            value[d->counter] += ch.delta;
            c->time_ps = ch.time_ps;
            c->phase = ch.phase;
        }
    }
    for (size_t c = 0; c < nc; c++)
        if (!cs[c].unsorted && value[c] > peak[c])
            peak[c] = value[c];
    if (n_late == 0) {
        free(cs);
        return SIM_OK;
    }
    /* The counters out of order: all their changes, sorted. */
    size_t *off = calloc(nc + 1, sizeof *off);
    if (!off) {
        free(cs);
        return SIM_ENOMEM;
    }
    size_t n_ch = 0;
    for (size_t k = 0; k < e->n_deltas; k++) {
        const eng__delta *d = &e->deltas[k];
        size_t m = cs[d->counter].unsorted ? (size_t)(d->at_start != 0) + (d->at_end != 0) : 0;
        off[d->counter + 1] += m;
        n_ch += m;
    }
    eng__change *ch = malloc((n_ch ? n_ch : 1) * sizeof *ch);
    if (!ch) {
        free(off);
        free(cs);
        return SIM_ENOMEM;
    }
    for (size_t c = 0; c < nc; c++)
        off[c + 1] += off[c];
    /* The deltas are sorted by task (run_prepare), so this visits the
     * tasks in id order without a pass over those that have none. */
    for (size_t k = 0; k < e->n_deltas; k++) {
        const eng__delta *d = &e->deltas[k];
        eng__change x;
        for (int i = 0; i < 2 && cs[d->counter].unsorted; i++)
            if (change_of(e, d, i, &x))
                ch[off[d->counter]++] = x;
    }
    memmove(off + 1, off, nc * sizeof *off);
    off[0] = 0;
    for (size_t c = 0; c < nc; c++) {
        if (!cs[c].unsorted)
            continue;
        eng__change *v = ch + off[c];
        size_t m = off[c + 1] - off[c];
        qsort(v, m, sizeof *v, cmp_change);
        int64_t val = 0, top = 0;
        for (size_t i = 0; i < m; i++) {
            val += v[i].delta;
            if ((i + 1 == m || change_before(&v[i], &v[i + 1])) && val > top)
                top = val;
        }
        value[c] = val;
        peak[c] = top;
    }
    free(off);
    free(ch);
    free(cs);
    return SIM_OK;
}

/* One pass in topological order (Kahn over stream order and dependency
 * edges): each task's start is final when its last predecessor is taken.
 * SIM_ESIM when a task can never start or a time overflows: the caller
 * then runs the event loop, which says which. */
static int run_sweep(engine_t *e, run *r)
{
    eng__hot *hot = e->hot;
    const sim_time_ps *dur = e->duration;
    const int32_t *stream = e->stream, *next = e->stream_next, *succ = r->succ;
    const sim_time_ps *lags = r->succ_lag;
    const uint32_t *off = r->succ_off;
    size_t n = e->n_tasks, head = 0, tail = r->n_seeded, ns = (size_t)e->n_streams;
    int32_t *order = r->order; /* seeded by run_prepare */
    uint32_t *at = malloc((ns ? ns : 1) * sizeof *at);
    if (!at)
        return SIM_ENOMEM;
    /* A task's start is final when it is taken, and a stream's tasks are
     * taken in its order: each goes to its stream's slice then
     * (index_streams' result, without a pass of its own). */
    memcpy(at, e->stream_off, ns * sizeof *at);
    int32_t *by_stream = e->by_stream;
    eng_span *spans = e->stream_spans;
    sim_time_ps makespan = 0;
    int rc = SIM_OK;
    while (head < tail) {
        const int32_t t = order[head++];
        const sim_time_ps a = hot[t].start_ps, d = dur[t];
        if (d > NEVER - 1 - a) {
            rc = SIM_ESIM;
            break;
        }
        const sim_time_ps end = a + d;
        const uint32_t end_round = d ? 1 : hot[t].round + 1;
        makespan = end > makespan ? end : makespan;
        const uint32_t k_at = at[stream[t]]++;
        by_stream[k_at] = t;
        spans[k_at] = (eng_span){a, end};
        if (lags) {
            /* A lag ends like a task of its own stream: in round 1 of
             * its end instant (0: the edge is plain). */
            for (uint32_t k = off[t], kend = off[t + 1]; k < kend; k++) {
                const sim_time_ps lag = lags[k];
                if (lag > NEVER - 1 - end) {
                    rc = SIM_ESIM;
                    break;
                }
                release(&hot[succ[k]], succ[k], end + lag, lag ? 1 : end_round, order, &tail);
            }
            if (rc != SIM_OK)
                break;
        } else {
            for (uint32_t k = off[t], kend = off[t + 1]; k < kend; k++)
                release(&hot[succ[k]], succ[k], end, end_round, order, &tail);
        }
        const int32_t s = next[t];
        if (s >= 0)
            release(&hot[s], s, end, end_round, order, &tail);
    }
    if (rc == SIM_OK && tail < n)
        rc = SIM_ESIM;
    if (rc == SIM_OK)
        rc = sweep_counters(e);
    free(at);
    if (rc == SIM_OK) {
        e->makespan_ps = makespan;
        e->events = 2 * (uint64_t)n;
    }
    return rc;
}

/* Undoes what a declined sweep changed: no task started, every
 * predecessor count whole again. */
static void sweep_undo(engine_t *e, const run *r)
{
    for (size_t t = 0; t < e->n_tasks; t++) {
        e->hot[t].start_ps = NEVER;
        e->hot[t].pending = (e->stream_head[e->stream[t]] == (int32_t)t ? 0 : 1) + (e->release && e->release[t] > 0);
    }
    for (uint32_t k = 0; k < r->succ_off[e->n_tasks]; k++)
        e->hot[r->succ[k]].pending++;
}

/* Room for the tasks grouped by stream (by_stream and stream_spans: each
 * stream in id order, which is its run order), with stream_off turned
 * from counts (eng_add_task counted) into the offsets of the slices. */
static int index_alloc(engine_t *e)
{
    size_t n = e->n_tasks, ns = (size_t)e->n_streams;
    e->by_stream = malloc((n ? n : 1) * sizeof *e->by_stream);
    e->stream_spans = malloc((n ? n : 1) * sizeof *e->stream_spans);
    if (!e->by_stream || !e->stream_spans) {
        free(e->by_stream);
        free(e->stream_spans);
        e->by_stream = NULL;
        e->stream_spans = NULL;
        return SIM_ENOMEM;
    }
    for (size_t k = 0; k < ns; k++)
        e->stream_off[k + 1] += e->stream_off[k];
    return SIM_OK;
}

/* The grouping after the event loop (the sweep fills it as it goes): a
 * counting sort by stream, with every task's span in that order beside
 * it. */
static void index_streams(engine_t *e)
{
    size_t n = e->n_tasks, ns = (size_t)e->n_streams;
    for (size_t t = 0; t < n; t++) {
        const sim_time_ps a = e->hot[t].start_ps;
        const eng_span sp = {a, a == NEVER ? NEVER : a + e->duration[t]};
        const uint32_t at = e->stream_off[e->stream[t]]++;
        e->by_stream[at] = (int32_t)t;
        e->stream_spans[at] = sp;
    }
    memmove(e->stream_off + 1, e->stream_off, ns * sizeof *e->stream_off);
    e->stream_off[0] = 0;
}

static int run_with(engine_t *e, bool sweep, sim_err *err)
{
    if (e->ran)
        return sim_err_set(err, SIM_EINVAL, "engine: eng_run called twice on one engine");
    e->ran = true;

    run r = {0};
    int rc = run_prepare(e, &r, sweep);
    if (rc == SIM_OK)
        rc = index_alloc(e);
    if (rc == SIM_OK && sweep) {
        rc = run_sweep(e, &r);
        if (rc == SIM_ESIM) {
            sweep_undo(e, &r);
            sweep = false;
            rc = SIM_OK;
        }
    }
    if (rc == SIM_OK && !sweep)
        rc = loop_alloc(e, &r);
    if (rc != SIM_OK) {
        /* run_prepare may have set the starts for the sweep: no task ran. */
        if (sweep)
            for (size_t t = 0; t < e->n_tasks; t++)
                e->hot[t].start_ps = NEVER;
        run_free(&r);
        /* No grouping then: eng_stream_tasks walks the streams. */
        free(e->by_stream);
        free(e->stream_spans);
        e->by_stream = NULL;
        e->stream_spans = NULL;
        return sim_err_set(err, SIM_ENOMEM, "engine: out of memory preparing %zu tasks",
                           e->n_tasks);
    }
    if (!sweep) {
        rc = run_loop(e, &r, err);
        index_streams(e);
    }
    /* The successors stay for eng_task_succs (succ_off is the engine's),
     * their lags with them. */
    e->succ = r.succ;
    e->succ_lag = r.succ_lag;
    r.succ = NULL;
    r.succ_lag = NULL;
    run_free(&r);
    return rc;
}

int eng_run(engine_t *e, sim_err *err)
{
    return run_with(e, true, err);
}

int eng_run_event_loop(engine_t *e, sim_err *err)
{
    return run_with(e, false, err);
}

/* ---- results ---------------------------------------------------------- */

size_t eng_num_tasks(const engine_t *e) { return e->n_tasks; }

int eng_num_streams(const engine_t *e) { return e->n_streams; }

int eng_task_stream(const engine_t *e, eng_task t)
{
    assert(valid_task(e, t));
    return e->stream[t];
}

int32_t eng_task_tag(const engine_t *e, eng_task t)
{
    assert(valid_task(e, t));
    return e->tag[t];
}

sim_time_ps eng_task_start(const engine_t *e, eng_task t)
{
    assert(valid_task(e, t));
    return e->hot[t].start_ps;
}

sim_time_ps eng_task_end(const engine_t *e, eng_task t)
{
    assert(valid_task(e, t));
    const sim_time_ps a = e->hot[t].start_ps;
    return a == NEVER ? NEVER : a + e->duration[t];
}

void eng_task_times(const engine_t *e, sim_time_ps *start, sim_time_ps *end, int32_t *stream)
{
    if (stream && e->n_tasks)
        memcpy(stream, e->stream, e->n_tasks * sizeof *stream);
    for (size_t t = 0; t < e->n_tasks; t++) {
        const sim_time_ps a = e->hot[t].start_ps;
        start[t] = a;
        end[t] = a == NEVER ? NEVER : a + e->duration[t];
    }
}

sim_time_ps eng_makespan(const engine_t *e) { return e->makespan_ps; }

int64_t eng_counter_peak(const engine_t *e, int counter)
{
    assert(counter >= 0 && counter < e->n_counters);
    return e->counter_peak[counter];
}

int64_t eng_counter_final(const engine_t *e, int counter)
{
    assert(counter >= 0 && counter < e->n_counters);
    return e->counter_value[counter];
}

uint64_t eng_events(const engine_t *e) { return e->events; }

size_t eng_task_succs(const engine_t *e, eng_task t, const eng_task **succ)
{
    assert(valid_task(e, t));
    if (!e->succ) {
        *succ = NULL;
        return 0;
    }
    *succ = e->succ + e->succ_off[t];
    return e->succ_off[t + 1] - e->succ_off[t];
}

bool eng_succ_rows(const engine_t *e, const uint32_t **off, const eng_task **succ)
{
    *off = e->succ ? e->succ_off : NULL;
    *succ = e->succ;
    return e->succ != NULL;
}

const sim_time_ps *eng_succ_lags(const engine_t *e)
{
    return e->succ_lag;
}

const sim_time_ps *eng_task_releases(const engine_t *e)
{
    return e->release;
}

size_t eng_stream_view(const engine_t *e, int stream, const eng_task **ids)
{
    assert(stream >= 0 && stream < e->n_streams);
    if (!e->by_stream) {
        *ids = NULL;
        return 0;
    }
    *ids = e->by_stream + e->stream_off[stream];
    return e->stream_off[stream + 1] - e->stream_off[stream];
}

size_t eng_stream_spans(const engine_t *e, int stream, const eng_span **spans)
{
    assert(stream >= 0 && stream < e->n_streams);
    if (!e->stream_spans) {
        *spans = NULL;
        return 0;
    }
    *spans = e->stream_spans + e->stream_off[stream];
    return e->stream_off[stream + 1] - e->stream_off[stream];
}

size_t eng_stream_tasks(const engine_t *e, int stream, eng_task *ids, size_t cap)
{
    assert(stream >= 0 && stream < e->n_streams);
    if (e->by_stream) {
        size_t k = e->stream_off[stream + 1] - e->stream_off[stream];
        if (k && cap)
            memcpy(ids, e->by_stream + e->stream_off[stream], (k < cap ? k : cap) * sizeof *ids);
        return k;
    }
    size_t k = 0;
    for (int32_t t = e->stream_head[stream]; t >= 0; t = e->stream_next[t], k++)
        if (k < cap)
            ids[k] = t;
    return k;
}

bool eng_counter_nets(const engine_t *e, const int32_t *sel, int32_t value, int64_t *net)
{
    for (int c = 0; c < e->n_counters; c++)
        net[c] = 0;
    for (size_t i = 0; i < e->n_deltas; i++) {
        const eng__delta *d = &e->deltas[i];
        int64_t *x = &net[d->counter];
        if (sel[d->task] == value &&
            (__builtin_add_overflow(*x, d->at_start, x) || __builtin_add_overflow(*x, d->at_end, x)))
            return false;
    }
    return true;
}

const int32_t *eng_task_tags(const engine_t *e)
{
    return e->tag;
}
