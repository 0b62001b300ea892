/* engine: the discrete-event core (contract in engine.h).
 *
 * Storage.  Everything lives in a handful of flat arrays owned by the
 * engine_t, sized from the hints of eng_create and grown by doubling (with
 * overflow-checked sizes) when a hint was short:
 *   tasks   one 32-byte record per task: duration, start, the count of
 *           predecessors not yet ended, the next task of its stream, stream
 *           and tag.  A task's end is start + duration, so it is not stored.
 *   edges   (before, after) pairs in the order eng_add_dep saw them.
 *   deltas  (task, counter, at_start, at_end) records in the order added.
 * Streams are intrusive singly linked lists threaded through the task
 * records (stream_next), with a head and a tail per stream.  eng_run
 * groups the task ids by stream (ids are in run order within a stream;
 * the sweep puts each where its stream's slice is at when it takes it, the
 * event loop's run a counting sort after), with every task's span (start,
 * end) in that order beside it, so that the measurements that read every stream back
 * read a slice instead of chasing stream_next through the records.
 *
 * Dependencies: CSR built at eng_run start.  While the graph is being
 * built, eng_add_dep only appends to the edge list (O(1), no per-task
 * bookkeeping beyond the predecessor count).  eng_run then turns the list
 * into compressed sparse rows (an offset per task, successors contiguous in
 * one array) with a stable counting sort: two sequential passes over the
 * edges.  The event loop then walks each ended task's successors as one
 * contiguous slice instead of chasing pointers through a pool, which is
 * what the hot path wants; the price is a second copy of the edges (4 bytes
 * each), which stays after the run for eng_task_succs, and that edges cannot be added after eng_run (they
 * cannot anyway: eng_run runs once).  Counter deltas get the same treatment
 * so that a task's deltas are contiguous.
 *
 * Streams as dependencies.  Stream order is folded into the predecessor
 * count: every task but the first of its stream counts its stream
 * predecessor as one more unfinished predecessor, released when that
 * predecessor ends.  "Head of its stream and all deps ended" is then just
 * "pending == 0", and at most one task per stream is ready or running at a
 * time, so the event heap and the ready list never hold more than n_streams
 * entries: both are allocated once per run, and the heap stays shallow.
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

typedef struct eng__task {
    sim_time_ps duration_ps;
    sim_time_ps start_ps;   /* NEVER until the task starts */
    int32_t pending;        /* predecessors not ended, stream predecessor included */
    int32_t stream_next;    /* next task of the same stream, -1 at the tail */
    int32_t stream;
    int32_t tag;
} eng__task;

typedef struct eng__edge {
    int32_t before, after;
} eng__edge;

typedef struct eng__delta {
    int32_t task;           /* owner (the deltas are sorted by it in eng_run) */
    int32_t counter;
    int64_t at_start, at_end;
} eng__delta;

/* A pending completion.  seq is taken from a per-run counter when the task
 * starts; every task starts at most once, so it fits 32 bits. */
typedef struct eng__event {
    sim_time_ps time_ps;
    uint32_t seq;
    int32_t task;
} eng__event;

struct engine {
    int n_streams;
    int n_counters;

    eng__task *tasks;
    size_t n_tasks, cap_tasks;
    eng__edge *edges;       /* freed by eng_run once the CSR exists */
    size_t n_edges, cap_edges;
    eng__delta *deltas;     /* sorted by task by eng_run */
    size_t n_deltas, cap_deltas;

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
    /* After eng_run: the CSR of dependency successors (eng_task_succs). */
    uint32_t *succ_off;
    int32_t *succ;
    int64_t *counter_value; /* current (after eng_run: final) value */
    int64_t *counter_peak;

    sim_time_ps makespan_ps;
    uint64_t events;
    bool ran;
};

/* Grows *p (an array of *cap elements of size elem) to at least need
 * elements, doubling, never past limit.  Returns SIM_OK or SIM_ENOMEM; *p is
 * untouched on failure. */
static int grow(void **p, size_t *cap, size_t need, size_t elem, size_t limit)
{
    if (need <= *cap)
        return SIM_OK;
    if (need > limit)
        return SIM_ENOMEM;
    size_t nc = *cap < 16 ? 16 : *cap;
    while (nc < need)
        nc = nc > limit / 2 ? limit : nc * 2;
    if (nc > SIZE_MAX / elem)
        return SIM_ENOMEM;
    void *q = realloc(*p, nc * elem);
    if (!q)
        return SIM_ENOMEM;
    *p = q;
    *cap = nc;
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
    if (grow((void **)&e->tasks, &e->cap_tasks, task_hint < MAX_TASKS ? task_hint : MAX_TASKS,
             sizeof *e->tasks, MAX_TASKS) != SIM_OK)
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
    free(e->tasks);
    free(e->edges);
    free(e->deltas);
    free(e->stream_head);
    free(e->stream_tail);
    free(e->by_stream);
    free(e->stream_off);
    free(e->stream_spans);
    free(e->succ_off);
    free(e->succ);
    free(e->counter_value);
    free(e->counter_peak);
    free(e);
}

eng_task eng_add_task(engine_t *e, int stream, sim_time_ps duration_ps, int32_t tag)
{
    assert(!e->ran && "eng_add_task after eng_run");
    assert(stream >= 0 && stream < e->n_streams);
    if (e->ran || (uint32_t)stream >= (uint32_t)e->n_streams) /* n_streams >= 0: a negative one too */
        return -1;
    if (e->n_tasks == e->cap_tasks && grow((void **)&e->tasks, &e->cap_tasks, e->n_tasks + 1, sizeof *e->tasks,
                                           MAX_TASKS) != SIM_OK)
        return -1;
    eng_task id = (eng_task)e->n_tasks++;
    int32_t tail = e->stream_tail[stream];
    e->tasks[id] = (eng__task){
        .duration_ps = duration_ps,
        .start_ps = NEVER,
        .pending = tail >= 0 ? 1 : 0,
        .stream_next = -1,
        .stream = stream,
        .tag = tag,
    };
    if (tail >= 0)
        e->tasks[tail].stream_next = id;
    else
        e->stream_head[stream] = id;
    e->stream_tail[stream] = id;
    e->stream_off[stream + 1]++;
    return id;
}

static bool valid_task(const engine_t *e, eng_task t)
{
    return (uint32_t)t < e->n_tasks; /* a negative t is past MAX_TASKS */
}

int eng_add_dep(engine_t *e, eng_task before, eng_task after)
{
    assert(!e->ran && "eng_add_dep after eng_run");
    assert(valid_task(e, before) && valid_task(e, after));
    if (e->ran || !valid_task(e, before) || !valid_task(e, after))
        return SIM_EINVAL;
    if (e->tasks[after].pending == INT32_MAX)
        return SIM_ENOMEM;
    if (e->n_edges == e->cap_edges && grow((void **)&e->edges, &e->cap_edges, e->n_edges + 1, sizeof *e->edges,
                                           MAX_EDGES) != SIM_OK)
        return SIM_ENOMEM;
    e->edges[e->n_edges++] = (eng__edge){before, after};
    e->tasks[after].pending++;
    return SIM_OK;
}

int eng_add_counter_delta(engine_t *e, eng_task t, int counter, int64_t at_start, int64_t at_end)
{
    assert(!e->ran && "eng_add_counter_delta after eng_run");
    assert(valid_task(e, t) && counter >= 0 && counter < e->n_counters);
    if (e->ran || !valid_task(e, t) || (uint32_t)counter >= (uint32_t)e->n_counters)
        return SIM_EINVAL;
    if (e->n_deltas == e->cap_deltas && grow((void **)&e->deltas, &e->cap_deltas, e->n_deltas + 1,
                                             sizeof *e->deltas, MAX_DELTAS) != SIM_OK)
        return SIM_ENOMEM;
    e->deltas[e->n_deltas++] = (eng__delta){t, counter, at_start, at_end};
    return SIM_OK;
}

/* ---- the run ---------------------------------------------------------- */

/* State that exists only while eng_run runs. */
typedef struct run {
    uint32_t *succ_off;     /* CSR: successors of t are succ[succ_off[t] .. succ_off[t+1]) */
    int32_t *succ;
    uint32_t *delta_off;    /* deltas of t are e->deltas[delta_off[t] .. delta_off[t+1]) */
    /* the event loop */
    eng__event *heap;       /* completions, a binary min-heap on (time, seq) */
    size_t heap_n;
    int32_t *ready;         /* tasks that start at the current instant, in order */
    size_t ready_n;
    size_t cap;             /* of heap and ready: one entry per stream at most */
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
    assert(r->heap_n < r->cap);
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
    free(r->succ_off);
    free(r->succ);
    free(r->delta_off);
    free(r->heap);
    free(r->ready);
    free(r->dirty);
    free(r->is_dirty);
}

/* Builds the CSR of successors and sorts the deltas by task (both stable,
 * so per-task order is the order of the add calls).  Frees the edge list. */
static int run_prepare(engine_t *e, run *r)
{
    size_t n = e->n_tasks;
    r->succ_off = calloc(n + 1, sizeof *r->succ_off);
    r->succ = malloc((e->n_edges ? e->n_edges : 1) * sizeof *r->succ);
    r->delta_off = calloc(n + 1, sizeof *r->delta_off);
    if (!r->succ_off || !r->succ || !r->delta_off)
        return SIM_ENOMEM;

    /* Counting sort of the edges by `before`: count, prefix-sum, place. */
    for (size_t k = 0; k < e->n_edges; k++)
        r->succ_off[e->edges[k].before + 1]++;
    for (size_t t = 0; t < n; t++)
        r->succ_off[t + 1] += r->succ_off[t];
    for (size_t k = 0; k < e->n_edges; k++) {
        /* succ_off[t] serves as the fill cursor, then is shifted back. */
        int32_t b = e->edges[k].before;
        r->succ[r->succ_off[b]++] = e->edges[k].after;
    }
    memmove(r->succ_off + 1, r->succ_off, n * sizeof *r->succ_off);
    r->succ_off[0] = 0;
    free(e->edges);
    e->edges = NULL;
    e->cap_edges = 0;

    /* The same for the deltas, into a new array; deltas added in task
     * order (the usual way) are sorted already, and a stable sort would
     * leave them as they are: then only the offsets. */
    if (e->n_deltas) {
        bool in_order = true;
        for (size_t k = 0; k < e->n_deltas; k++) {
            r->delta_off[e->deltas[k].task + 1]++;
            in_order = in_order && (k == 0 || e->deltas[k].task >= e->deltas[k - 1].task);
        }
        for (size_t t = 0; t < n; t++)
            r->delta_off[t + 1] += r->delta_off[t];
        if (in_order)
            return SIM_OK;
        eng__delta *sorted = malloc(e->n_deltas * sizeof *sorted);
        if (!sorted)
            return SIM_ENOMEM;
        for (size_t k = 0; k < e->n_deltas; k++)
            sorted[r->delta_off[e->deltas[k].task]++] = e->deltas[k];
        memmove(r->delta_off + 1, r->delta_off, n * sizeof *r->delta_off);
        r->delta_off[0] = 0;
        free(e->deltas);
        e->deltas = sorted;
        e->cap_deltas = e->n_deltas;
    }
    return SIM_OK;
}

/* ---- the event loop (reference; runs what the sweep declines) ---------- */

static int loop_alloc(engine_t *e, run *r)
{
    size_t ns = e->n_streams > 0 ? (size_t)e->n_streams : 1;
    size_t nc = e->n_counters > 0 ? (size_t)e->n_counters : 1;
    r->cap = ns;
    r->heap = malloc(ns * sizeof *r->heap);
    r->ready = malloc(ns * sizeof *r->ready);
    r->dirty = malloc(nc * sizeof *r->dirty);
    r->is_dirty = calloc(nc, 1);
    return r->heap && r->ready && r->dirty && r->is_dirty ? SIM_OK : SIM_ENOMEM;
}

static int run_loop(engine_t *e, run *r, sim_err *err)
{
    eng__task *tasks = e->tasks;
    size_t n = e->n_tasks, started = 0;
    uint64_t events = 0;
    uint32_t seq = 0;
    sim_time_ps now = 0;
    bool overflow = false;

    /* Tasks ready at time 0: stream heads without dependencies. */
    for (size_t t = 0; t < n; t++)
        if (tasks[t].pending == 0)
            r->ready[r->ready_n++] = (int32_t)t;

    for (;;) {
        /* Starts phase. */
        for (size_t k = 0; k < r->ready_n; k++) {
            int32_t t = r->ready[k];
            eng__task *T = &tasks[t];
            if (T->duration_ps > NEVER - 1 - now) {
                overflow = true;
                break;
            }
            T->start_ps = now;
            if (r->delta_off[t] != r->delta_off[t + 1])
                apply_deltas(e, r, t, true);
            heap_push(r, (eng__event){now + T->duration_ps, seq++, t});
        }
        if (overflow)
            break;
        started += r->ready_n;
        events += r->ready_n;
        r->ready_n = 0;
        flush_peaks(e, r);

        if (r->heap_n == 0)
            break;

        /* Ends phase: every completion at the earliest pending instant. */
        now = r->heap[0].time_ps;
        do {
            int32_t t = heap_pop(r).task;
            events++;
            if (r->delta_off[t] != r->delta_off[t + 1])
                apply_deltas(e, r, t, false);
            for (uint32_t k = r->succ_off[t], end = r->succ_off[t + 1]; k < end; k++) {
                int32_t s = r->succ[k];
                if (--tasks[s].pending == 0)
                    r->ready[r->ready_n++] = s;
            }
            int32_t s = tasks[t].stream_next;
            if (s >= 0 && --tasks[s].pending == 0)
                r->ready[r->ready_n++] = s;
            assert(r->ready_n <= r->cap);
        } while (r->heap_n > 0 && r->heap[0].time_ps == now);
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
        while (tasks[first].start_ps != NEVER)
            first++;
        return sim_err_set(err, SIM_ESIM,
                           "engine: %zu of %zu tasks can never start (dependency cycle or "
                           "inconsistent stream order), e.g. task %zu (stream %d, tag %d) "
                           "with %d predecessors unfinished",
                           n - started, n, first, (int)tasks[first].stream,
                           (int)tasks[first].tag, (int)tasks[first].pending);
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

/* A task starts at the latest end among its predecessors (0 without any),
 * in the round after the last of them ended there. */
static inline void relax(eng__task *u, uint32_t *round_u, sim_time_ps end, uint32_t end_round)
{
    if (end > u->start_ps) {
        u->start_ps = end;
        *round_u = end_round;
    } else if (end == u->start_ps && end_round > *round_u) {
        *round_u = end_round;
    }
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
static inline bool change_of(const engine_t *e, const uint32_t *round, const eng__delta *d, int i, eng__change *out)
{
    const eng__task *T = &e->tasks[d->task];
    if (i == 0) {
        *out = (eng__change){T->start_ps, 2 * round[d->task], d->counter, d->at_start};
        return d->at_start != 0;
    }
    *out = (eng__change){T->start_ps + T->duration_ps, T->duration_ps ? 1 : 2 * round[d->task] + 1, d->counter,
                         d->at_end};
    return d->at_end != 0;
}

/* Counter peaks and finals: every task's changes in the loop's order, a
 * peak after each phase.  Tasks in id order are in stream order, and along
 * a stream (time, phase) never decreases, so a counter whose changes come
 * from one stream comes in order: its value and peaks are taken as the
 * deltas are read (a peak when a later phase begins, and at the end).
 * The changes of a counter that come out of order are gathered and
 * sorted, then summed the same way. */
static int sweep_counters(engine_t *e, const uint32_t *round)
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
            if (!change_of(e, round, d, i, &ch))
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
            if (change_of(e, round, d, i, &x))
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
    eng__task *tasks = e->tasks;
    size_t n = e->n_tasks, head = 0, tail = 0, ns = (size_t)e->n_streams;
    int32_t *order = malloc((n ? n : 1) * sizeof *order);
    uint32_t *round = malloc((n ? n : 1) * sizeof *round);
    uint32_t *at = malloc((ns ? ns : 1) * sizeof *at);
    if (!order || !round || !at) {
        free(order);
        free(round);
        free(at);
        return SIM_ENOMEM;
    }
    /* A task's start is final when it is taken, and a stream's tasks are
     * taken in its order: each goes to its stream's slice then
     * (index_streams' result, without a pass of its own). */
    memcpy(at, e->stream_off, ns * sizeof *at);
    int32_t *by_stream = e->by_stream;
    eng_span *spans = e->stream_spans;
    for (size_t t = 0; t < n; t++) {
        tasks[t].start_ps = 0;
        round[t] = 0;
        if (tasks[t].pending == 0)
            order[tail++] = (int32_t)t;
    }
    sim_time_ps makespan = 0;
    int rc = SIM_OK;
    while (head < tail) {
        int32_t t = order[head++];
        const eng__task *T = &tasks[t];
        if (T->duration_ps > NEVER - 1 - T->start_ps) {
            rc = SIM_ESIM;
            break;
        }
        sim_time_ps end = T->start_ps + T->duration_ps;
        uint32_t end_round = T->duration_ps ? 1 : round[t] + 1;
        if (end > makespan)
            makespan = end;
        const uint32_t k_at = at[T->stream]++;
        by_stream[k_at] = t;
        spans[k_at] = (eng_span){T->start_ps, end};
        for (uint32_t k = r->succ_off[t], kend = r->succ_off[t + 1]; k < kend; k++) {
            int32_t s = r->succ[k];
            relax(&tasks[s], &round[s], end, end_round);
            if (--tasks[s].pending == 0)
                order[tail++] = s;
        }
        int32_t s = T->stream_next;
        if (s >= 0) {
            relax(&tasks[s], &round[s], end, end_round);
            if (--tasks[s].pending == 0)
                order[tail++] = s;
        }
    }
    if (rc == SIM_OK && tail < n)
        rc = SIM_ESIM;
    if (rc == SIM_OK)
        rc = sweep_counters(e, round);
    free(order);
    free(round);
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
        eng__task *T = &e->tasks[t];
        T->start_ps = NEVER;
        T->pending = e->stream_head[T->stream] == (int32_t)t ? 0 : 1;
    }
    for (uint32_t k = 0; k < r->succ_off[e->n_tasks]; k++)
        e->tasks[r->succ[k]].pending++;
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
        const eng__task *T = &e->tasks[t];
        const eng_span sp = {T->start_ps, T->start_ps == NEVER ? NEVER : T->start_ps + T->duration_ps};
        const uint32_t at = e->stream_off[T->stream]++;
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
    int rc = run_prepare(e, &r);
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
    /* The successors stay for eng_task_succs. */
    e->succ_off = r.succ_off;
    e->succ = r.succ;
    r.succ_off = NULL;
    r.succ = NULL;
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

int eng_task_stream(const engine_t *e, eng_task t)
{
    assert(valid_task(e, t));
    return e->tasks[t].stream;
}

int32_t eng_task_tag(const engine_t *e, eng_task t)
{
    assert(valid_task(e, t));
    return e->tasks[t].tag;
}

sim_time_ps eng_task_start(const engine_t *e, eng_task t)
{
    assert(valid_task(e, t));
    return e->tasks[t].start_ps;
}

sim_time_ps eng_task_end(const engine_t *e, eng_task t)
{
    assert(valid_task(e, t));
    const eng__task *T = &e->tasks[t];
    return T->start_ps == NEVER ? NEVER : T->start_ps + T->duration_ps;
}

void eng_task_times(const engine_t *e, sim_time_ps *start, sim_time_ps *end, int32_t *stream)
{
    for (size_t t = 0; t < e->n_tasks; t++) {
        const eng__task *T = &e->tasks[t];
        start[t] = T->start_ps;
        end[t] = T->start_ps == NEVER ? NEVER : T->start_ps + T->duration_ps;
        if (stream)
            stream[t] = T->stream;
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
    if (!e->succ_off) {
        *succ = NULL;
        return 0;
    }
    *succ = e->succ + e->succ_off[t];
    return e->succ_off[t + 1] - e->succ_off[t];
}

bool eng_succ_rows(const engine_t *e, const uint32_t **off, const eng_task **succ)
{
    *off = e->succ_off;
    *succ = e->succ_off ? e->succ : NULL;
    return e->succ_off != NULL;
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
    for (int32_t t = e->stream_head[stream]; t >= 0; t = e->tasks[t].stream_next, k++)
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
