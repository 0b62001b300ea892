/* Tests of the discrete-event engine: dependency and stream semantics,
 * zero-duration tasks, equal-time determinism, counter peaks under the
 * ends-before-starts rule, stall detection, and a large random DAG checked
 * against an O(n^2) reference scheduler. */
#include <criterion/criterion.h>

#include <gsl/gsl_rng.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

#define NEVER UINT64_MAX

#define SIM_ASSERT_OK(expr)                                                        \
    do {                                                                           \
        int rc_ = (expr);                                                          \
        cr_assert_eq(rc_, SIM_OK, "%s -> %d (%s)", #expr, rc_, sim_strerror(rc_)); \
    } while (0)

static int run(engine_t *e)
{
    sim_err err;
    sim_err_clear(&err);
    int rc = eng_run(e, &err);
    if (rc != SIM_OK)
        cr_log_info("eng_run: %s", err.msg);
    return rc;
}

Test(engine, empty_graph_runs)
{
    engine_t *e = eng_create(2, 1, 0, 0);
    cr_assert_not_null(e);
    SIM_ASSERT_OK(run(e));
    cr_assert_eq(eng_makespan(e), 0);
    cr_assert_eq(eng_events(e), 0);
    cr_assert_eq(eng_counter_peak(e, 0), 0);
    eng_destroy(e);
    eng_destroy(NULL);
}

Test(engine, chain_across_streams_adds_durations)
{
    engine_t *e = eng_create(3, 0, 4, 4);
    eng_task a = eng_add_task(e, 0, 10, 100);
    eng_task b = eng_add_task(e, 1, 20, 101);
    eng_task c = eng_add_task(e, 2, 5, 102);
    SIM_ASSERT_OK(eng_add_dep(e, a, b));
    SIM_ASSERT_OK(eng_add_dep(e, b, c));
    SIM_ASSERT_OK(run(e));
    cr_assert_eq(eng_task_start(e, a), 0);
    cr_assert_eq(eng_task_end(e, a), 10);
    cr_assert_eq(eng_task_start(e, b), 10);
    cr_assert_eq(eng_task_start(e, c), 30);
    cr_assert_eq(eng_task_end(e, c), 35);
    cr_assert_eq(eng_makespan(e), 35);
    cr_assert_eq(eng_events(e), 6);
    cr_assert_eq(eng_task_tag(e, b), 101);
    cr_assert_eq(eng_task_stream(e, c), 2);
    cr_assert_eq(eng_num_tasks(e), 3);
    cr_assert_eq(eng_num_streams(e), 3);
    eng_destroy(e);
}

Test(engine, diamond_waits_for_slowest_branch)
{
    /* a -> {b, c} -> d, b and c on their own streams. */
    engine_t *e = eng_create(4, 0, 4, 4);
    eng_task a = eng_add_task(e, 0, 3, 0);
    eng_task b = eng_add_task(e, 1, 7, 0);
    eng_task c = eng_add_task(e, 2, 11, 0);
    eng_task d = eng_add_task(e, 3, 1, 0);
    SIM_ASSERT_OK(eng_add_dep(e, a, b));
    SIM_ASSERT_OK(eng_add_dep(e, a, c));
    SIM_ASSERT_OK(eng_add_dep(e, b, d));
    SIM_ASSERT_OK(eng_add_dep(e, c, d));
    SIM_ASSERT_OK(run(e));
    cr_assert_eq(eng_task_start(e, b), 3);
    cr_assert_eq(eng_task_start(e, c), 3);
    cr_assert_eq(eng_task_start(e, d), 14);
    cr_assert_eq(eng_makespan(e), 15);
    eng_destroy(e);
}

Test(engine, stream_is_in_order_even_when_later_task_is_ready)
{
    /* Stream 0 holds x then y.  x waits for a slow task on stream 1; y has
     * no dependencies but must still wait for x to end. */
    engine_t *e = eng_create(2, 0, 4, 4);
    eng_task slow = eng_add_task(e, 1, 50, 0);
    eng_task x = eng_add_task(e, 0, 5, 0);
    eng_task y = eng_add_task(e, 0, 5, 0);
    SIM_ASSERT_OK(eng_add_dep(e, slow, x));
    SIM_ASSERT_OK(run(e));
    cr_assert_eq(eng_task_start(e, x), 50);
    cr_assert_eq(eng_task_start(e, y), 55);
    cr_assert_eq(eng_makespan(e), 60);

    eng_task ids[4];
    cr_assert_eq(eng_stream_tasks(e, 0, ids, 4), 2);
    cr_assert_eq(ids[0], x);
    cr_assert_eq(ids[1], y);
    cr_assert_eq(eng_stream_tasks(e, 1, ids, 0), 1);
    eng_destroy(e);
}

Test(engine, stream_runs_one_task_at_a_time)
{
    engine_t *e = eng_create(1, 0, 8, 0);
    eng_task t[5];
    for (int i = 0; i < 5; i++)
        t[i] = eng_add_task(e, 0, (sim_time_ps)(i + 1), i);
    SIM_ASSERT_OK(run(e));
    sim_time_ps at = 0;
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(eng_task_start(e, t[i]), at);
        at += (sim_time_ps)(i + 1);
    }
    cr_assert_eq(eng_makespan(e), 15);
    eng_destroy(e);
}

Test(engine, zero_duration_tasks_start_and_end)
{
    /* A chain of zero-duration tasks across streams, then a real one. */
    engine_t *e = eng_create(3, 1, 8, 8);
    eng_task a = eng_add_task(e, 0, 10, 0);
    eng_task z1 = eng_add_task(e, 1, 0, 0);
    eng_task z2 = eng_add_task(e, 2, 0, 0);
    eng_task z3 = eng_add_task(e, 1, 0, 0);   /* stream order after z1 */
    eng_task b = eng_add_task(e, 0, 4, 0);
    SIM_ASSERT_OK(eng_add_dep(e, a, z1));
    SIM_ASSERT_OK(eng_add_dep(e, z1, z2));
    SIM_ASSERT_OK(eng_add_dep(e, z2, z3));
    SIM_ASSERT_OK(eng_add_dep(e, z3, b));
    SIM_ASSERT_OK(eng_add_counter_delta(e, z2, 0, 7, -7));
    SIM_ASSERT_OK(run(e));
    cr_assert_eq(eng_task_start(e, z1), 10);
    cr_assert_eq(eng_task_end(e, z1), 10);
    cr_assert_eq(eng_task_start(e, z2), 10);
    cr_assert_eq(eng_task_start(e, z3), 10);
    cr_assert_eq(eng_task_start(e, b), 10);
    cr_assert_eq(eng_makespan(e), 14);
    cr_assert_eq(eng_events(e), 10);
    /* A zero-duration task's start delta is visible at its instant. */
    cr_assert_eq(eng_counter_peak(e, 0), 7);
    cr_assert_eq(eng_counter_final(e, 0), 0);
    eng_destroy(e);
}

Test(engine, zero_duration_only_graph)
{
    engine_t *e = eng_create(2, 0, 0, 0);
    eng_task prev = -1;
    for (int i = 0; i < 100; i++) {
        eng_task t = eng_add_task(e, i % 2, 0, i);
        if (prev >= 0)
            SIM_ASSERT_OK(eng_add_dep(e, prev, t));
        prev = t;
    }
    SIM_ASSERT_OK(run(e));
    cr_assert_eq(eng_makespan(e), 0);
    cr_assert_eq(eng_events(e), 200);
    for (eng_task t = 0; t < 100; t++)
        cr_assert_eq(eng_task_end(e, t), 0);
    eng_destroy(e);
}

/* A graph with many ties: fan-outs and fan-ins of equal durations. */
static engine_t *build_tie_graph(void)
{
    engine_t *e = eng_create(8, 2, 64, 128);
    eng_task root = eng_add_task(e, 0, 5, 0);
    eng_task mid[16];
    for (int i = 0; i < 16; i++) {
        mid[i] = eng_add_task(e, 1 + i % 7, (sim_time_ps)(i % 3) * 5, i);
        eng_add_dep(e, root, mid[i]);
        eng_add_counter_delta(e, mid[i], i % 2, 3, -3);
    }
    for (int i = 0; i < 16; i++) {
        eng_task t = eng_add_task(e, i % 8, 5, 100 + i);
        eng_add_dep(e, mid[i], t);
        eng_add_dep(e, mid[(i + 5) % 16], t);
        eng_add_counter_delta(e, t, 0, 1, -1);
    }
    return e;
}

Test(engine, equal_times_are_deterministic)
{
    engine_t *a = build_tie_graph(), *b = build_tie_graph();
    SIM_ASSERT_OK(run(a));
    SIM_ASSERT_OK(run(b));
    cr_assert_eq(eng_num_tasks(a), eng_num_tasks(b));
    for (eng_task t = 0; t < (eng_task)eng_num_tasks(a); t++) {
        cr_assert_eq(eng_task_start(a, t), eng_task_start(b, t), "task %d", t);
        cr_assert_eq(eng_task_end(a, t), eng_task_end(b, t), "task %d", t);
    }
    cr_assert_eq(eng_events(a), eng_events(b));
    cr_assert_eq(eng_counter_peak(a, 0), eng_counter_peak(b, 0));
    cr_assert_eq(eng_counter_peak(a, 1), eng_counter_peak(b, 1));
    eng_destroy(a);
    eng_destroy(b);
}

/* a (stream 0) holds 5 over [0, 10).  b (stream 1) waits on c, which takes
 * c_ps, and then holds 5 too.  b is added first so that its completion
 * would be ordered first if starts were interleaved with ends.  Returns
 * the counter's peak. */
static int64_t peak_after(sim_time_ps c_ps)
{
    engine_t *e = eng_create(3, 1, 4, 4);
    eng_task c = eng_add_task(e, 2, c_ps, 0);
    eng_task b = eng_add_task(e, 1, 10, 0);
    eng_task a = eng_add_task(e, 0, 10, 0);
    SIM_ASSERT_OK(eng_add_dep(e, c, b));
    SIM_ASSERT_OK(eng_add_counter_delta(e, b, 0, 5, -5));
    SIM_ASSERT_OK(eng_add_counter_delta(e, a, 0, 5, -5));
    SIM_ASSERT_OK(run(e));
    cr_assert_eq(eng_task_start(e, b), c_ps);
    cr_assert_eq(eng_counter_final(e, 0), 0);
    int64_t peak = eng_counter_peak(e, 0);
    eng_destroy(e);
    return peak;
}

Test(engine, counter_peak_applies_ends_before_starts)
{
    /* b starts at 10, the instant a frees its 5: the peak is 5, not 10. */
    cr_assert_eq(peak_after(10), 5);
}

Test(engine, counter_peak_counts_overlap)
{
    /* b starts at 9: both are held at once. */
    cr_assert_eq(peak_after(9), 10);
}

Test(engine, counter_peak_with_several_deltas_and_end_allocations)
{
    /* x: +4 at start, +6 at end (a buffer that outlives it: final 10);
     * y ends at 10 freeing 8 it took at 0, z starts at 10 taking 2.
     * Values: [0,10): 4 + 8 = 12; after the ends at 10: 12 + 6 - 8 = 10;
     * after the start at 10: 12.  Peak 12, final 10 + 0. */
    engine_t *e = eng_create(3, 2, 4, 4);
    eng_task x = eng_add_task(e, 0, 10, 0);
    eng_task y = eng_add_task(e, 1, 10, 0);
    eng_task z = eng_add_task(e, 2, 3, 0);
    SIM_ASSERT_OK(eng_add_dep(e, y, z));
    SIM_ASSERT_OK(eng_add_counter_delta(e, x, 0, 4, 6));
    SIM_ASSERT_OK(eng_add_counter_delta(e, y, 0, 8, -8));
    SIM_ASSERT_OK(eng_add_counter_delta(e, z, 0, 2, -2));
    SIM_ASSERT_OK(eng_add_counter_delta(e, z, 1, 1, 0));
    SIM_ASSERT_OK(eng_add_counter_delta(e, z, 1, 2, -3));
    SIM_ASSERT_OK(run(e));
    cr_assert_eq(eng_counter_peak(e, 0), 12);
    cr_assert_eq(eng_counter_final(e, 0), 10);
    cr_assert_eq(eng_counter_peak(e, 1), 3);
    cr_assert_eq(eng_counter_final(e, 1), 0);
    eng_destroy(e);
}

Test(engine, counter_peak_is_taken_after_the_ends_of_an_instant)
{
    /* x allocates 4 at start and 6 more at its end (a buffer that outlives
     * it); y on the same stream then frees 9 at its start.  The peak, 10,
     * exists only between the ends and the starts of instant 10. */
    engine_t *e = eng_create(1, 1, 4, 4);
    eng_task x = eng_add_task(e, 0, 10, 0);
    eng_task y = eng_add_task(e, 0, 10, 0);
    SIM_ASSERT_OK(eng_add_counter_delta(e, x, 0, 4, 6));
    SIM_ASSERT_OK(eng_add_counter_delta(e, y, 0, -9, 0));
    SIM_ASSERT_OK(run(e));
    cr_assert_eq(eng_counter_peak(e, 0), 10);
    cr_assert_eq(eng_counter_final(e, 0), 1);
    eng_destroy(e);
}

Test(engine, dependency_cycle_is_reported)
{
    engine_t *e = eng_create(3, 0, 4, 4);
    eng_task a = eng_add_task(e, 0, 1, 0);
    eng_task b = eng_add_task(e, 1, 1, 41);
    eng_task c = eng_add_task(e, 2, 1, 42);
    SIM_ASSERT_OK(eng_add_dep(e, b, c));
    SIM_ASSERT_OK(eng_add_dep(e, c, b));
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(eng_run(e, &err), SIM_ESIM);
    cr_assert_eq(err.code, SIM_ESIM);
    cr_assert_not_null(strstr(err.msg, "2 of 3 tasks"), "%s", err.msg);
    cr_assert_not_null(strstr(err.msg, "task 1 "), "%s", err.msg);
    cr_assert_eq(eng_task_end(e, a), 1);
    cr_assert_eq(eng_task_start(e, b), NEVER);
    cr_assert_eq(eng_task_end(e, c), NEVER);
    eng_destroy(e);
}

Test(engine, inconsistent_stream_order_is_reported)
{
    /* Stream 0 runs p then q, but p depends on q. */
    engine_t *e = eng_create(1, 0, 4, 4);
    eng_task p = eng_add_task(e, 0, 1, 0);
    eng_task q = eng_add_task(e, 0, 1, 0);
    SIM_ASSERT_OK(eng_add_dep(e, q, p));
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(eng_run(e, &err), SIM_ESIM);
    cr_assert_not_null(strstr(err.msg, "2 of 2 tasks"), "%s", err.msg);
    eng_destroy(e);
}

Test(engine, second_run_is_refused)
{
    engine_t *e = eng_create(1, 0, 1, 0);
    eng_add_task(e, 0, 1, 0);
    SIM_ASSERT_OK(run(e));
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(eng_run(e, &err), SIM_EINVAL);
    eng_destroy(e);
}

Test(engine, short_hints_grow)
{
    /* Hints of 1 for 200k tasks and 400k edges. */
    engine_t *e = eng_create(4, 1, 1, 1);
    const int n = 200000;
    for (int i = 0; i < n; i++) {
        eng_task t = eng_add_task(e, i % 4, 1, i);
        cr_assert_eq(t, i);
        if (i >= 4)
            SIM_ASSERT_OK(eng_add_dep(e, i - 3, t));
        if (i >= 5)
            SIM_ASSERT_OK(eng_add_dep(e, i - 5, t));
        SIM_ASSERT_OK(eng_add_counter_delta(e, t, 0, 1, -1));
    }
    SIM_ASSERT_OK(run(e));
    cr_assert_eq(eng_events(e), 2 * (uint64_t)n);
    cr_assert_eq(eng_counter_final(e, 0), 0);
    cr_assert_leq(eng_counter_peak(e, 0), 4);
    eng_destroy(e);
}

/* ---- random DAG vs a reference scheduler ------------------------------ */

typedef struct rdag {
    int n, n_streams, n_counters;
    int *stream;
    sim_time_ps *dur;
    int *n_pred, **pred;
    int *n_delta, (*delta_counter)[2];
    int64_t (*delta_start)[2], (*delta_end)[2];
} rdag;

static rdag rdag_make(gsl_rng *rng, int n, int n_streams, int n_counters, unsigned long min_dur)
{
    rdag g = {.n = n, .n_streams = n_streams, .n_counters = n_counters};
    g.stream = calloc((size_t)n, sizeof *g.stream);
    g.dur = calloc((size_t)n, sizeof *g.dur);
    g.n_pred = calloc((size_t)n, sizeof *g.n_pred);
    g.pred = calloc((size_t)n, sizeof *g.pred);
    g.n_delta = calloc((size_t)n, sizeof *g.n_delta);
    g.delta_counter = calloc((size_t)n, sizeof *g.delta_counter);
    g.delta_start = calloc((size_t)n, sizeof *g.delta_start);
    g.delta_end = calloc((size_t)n, sizeof *g.delta_end);
    for (int i = 0; i < n; i++) {
        g.stream[i] = (int)gsl_rng_uniform_int(rng, (unsigned long)n_streams);
        /* Small durations make plenty of equal times. */
        g.dur[i] = min_dur + gsl_rng_uniform_int(rng, 6);
        int k = i == 0 ? 0 : (int)gsl_rng_uniform_int(rng, 4);
        g.pred[i] = calloc((size_t)(k ? k : 1), sizeof **g.pred);
        for (int j = 0; j < k; j++) {
            /* Mostly recent predecessors, sometimes far ones; duplicates
             * are allowed and must count twice harmlessly. */
            unsigned long span = gsl_rng_uniform(rng) < 0.8 ? 20 : (unsigned long)i;
            if (span > (unsigned long)i)
                span = (unsigned long)i;
            g.pred[i][j] = i - 1 - (int)gsl_rng_uniform_int(rng, span);
        }
        g.n_pred[i] = k;
        g.n_delta[i] = (int)gsl_rng_uniform_int(rng, 3);
        for (int j = 0; j < g.n_delta[i]; j++) {
            g.delta_counter[i][j] = (int)gsl_rng_uniform_int(rng, (unsigned long)n_counters);
            g.delta_start[i][j] = (int64_t)gsl_rng_uniform_int(rng, 10) - 2;
            g.delta_end[i][j] = (int64_t)gsl_rng_uniform_int(rng, 10) - 7;
        }
    }
    return g;
}

static void rdag_free(rdag *g)
{
    for (int i = 0; i < g->n; i++)
        free(g->pred[i]);
    free(g->stream);
    free(g->dur);
    free(g->n_pred);
    free(g->pred);
    free(g->n_delta);
    free(g->delta_counter);
    free(g->delta_start);
    free(g->delta_end);
}

static engine_t *rdag_engine(const rdag *g)
{
    engine_t *e = eng_create(g->n_streams, g->n_counters, 16, 16);
    for (int i = 0; i < g->n; i++) {
        cr_assert_eq(eng_add_task(e, g->stream[i], g->dur[i], i), i);
        for (int j = 0; j < g->n_pred[i]; j++)
            SIM_ASSERT_OK(eng_add_dep(e, g->pred[i][j], i));
        for (int j = 0; j < g->n_delta[i]; j++)
            SIM_ASSERT_OK(eng_add_counter_delta(e, i, g->delta_counter[i][j],
                                                g->delta_start[i][j], g->delta_end[i][j]));
    }
    return e;
}

/* Reference: start(t) = max(end of its predecessors, end of the task
 * before it on its stream), found by sweeping until nothing is left,
 * O(n^2) in the worst case and obviously right for an in-order stream
 * model. */
static void reference_starts(const rdag *g, sim_time_ps *start)
{
    int *prev = malloc((size_t)g->n * sizeof *prev);
    int *last = malloc((size_t)g->n_streams * sizeof *last);
    for (int s = 0; s < g->n_streams; s++)
        last[s] = -1;
    for (int i = 0; i < g->n; i++) {
        prev[i] = last[g->stream[i]];
        last[g->stream[i]] = i;
        start[i] = NEVER;
    }
    int left = g->n;
    while (left > 0) {
        int progress = 0;
        for (int i = 0; i < g->n; i++) {
            if (start[i] != NEVER)
                continue;
            sim_time_ps at = 0;
            int ok = 1;
            if (prev[i] >= 0) {
                if (start[prev[i]] == NEVER)
                    ok = 0;
                else if (start[prev[i]] + g->dur[prev[i]] > at)
                    at = start[prev[i]] + g->dur[prev[i]];
            }
            for (int j = 0; ok && j < g->n_pred[i]; j++) {
                int q = g->pred[i][j];
                if (start[q] == NEVER)
                    ok = 0;
                else if (start[q] + g->dur[q] > at)
                    at = start[q] + g->dur[q];
            }
            if (ok) {
                start[i] = at;
                left--;
                progress = 1;
            }
        }
        cr_assert(progress, "reference scheduler stalled");
    }
    free(prev);
    free(last);
}

/* Reference peak of counter c for durations >= 1: at each instant t the
 * value after the ends at t counts starts before t and ends at or before t;
 * after the starts at t it counts starts at or before t.  O(n^2). */
static int64_t reference_peak(const rdag *g, const sim_time_ps *start, int c)
{
    int64_t peak = 0;
    for (int i = 0; i < 2 * g->n; i++) {
        sim_time_ps t = i < g->n ? start[i] : start[i - g->n] + g->dur[i - g->n];
        int64_t after_ends = 0, after_starts = 0;
        for (int k = 0; k < g->n; k++) {
            sim_time_ps s = start[k], en = start[k] + g->dur[k];
            for (int j = 0; j < g->n_delta[k]; j++) {
                if (g->delta_counter[k][j] != c)
                    continue;
                if (s < t)
                    after_ends += g->delta_start[k][j];
                if (s <= t)
                    after_starts += g->delta_start[k][j];
                if (en <= t) {
                    after_ends += g->delta_end[k][j];
                    after_starts += g->delta_end[k][j];
                }
            }
        }
        if (after_ends > peak)
            peak = after_ends;
        if (after_starts > peak)
            peak = after_starts;
    }
    return peak;
}

static void check_random_dag(unsigned long seed, int n, int n_streams, unsigned long min_dur,
                             int check_peaks)
{
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, seed);
    rdag g = rdag_make(rng, n, n_streams, 3, min_dur);
    gsl_rng_free(rng);

    engine_t *e = rdag_engine(&g);
    SIM_ASSERT_OK(run(e));
    sim_time_ps *ref = malloc((size_t)n * sizeof *ref);
    reference_starts(&g, ref);
    sim_time_ps makespan = 0;
    for (int i = 0; i < n; i++) {
        cr_assert_eq(eng_task_start(e, i), ref[i], "seed %lu task %d: engine %llu, reference %llu",
                     seed, i, (unsigned long long)eng_task_start(e, i),
                     (unsigned long long)ref[i]);
        if (ref[i] + g.dur[i] > makespan)
            makespan = ref[i] + g.dur[i];
    }
    cr_assert_eq(eng_makespan(e), makespan);
    cr_assert_eq(eng_events(e), 2 * (uint64_t)n);
    for (int c = 0; c < 3; c++) {
        int64_t final = 0;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < g.n_delta[i]; j++)
                if (g.delta_counter[i][j] == c)
                    final += g.delta_start[i][j] + g.delta_end[i][j];
        cr_assert_eq(eng_counter_final(e, c), final);
        if (check_peaks)
            cr_assert_eq(eng_counter_peak(e, c), reference_peak(&g, ref, c),
                         "seed %lu counter %d", seed, c);
    }
    free(ref);
    eng_destroy(e);
    rdag_free(&g);
}

Test(engine, random_dag_matches_reference_with_zero_durations, .timeout = 120)
{
    for (unsigned long seed = 1; seed <= 4; seed++)
        check_random_dag(seed, 20000, 1 + (int)seed * 3, 0, 0);
}

Test(engine, random_dag_matches_reference_with_peaks, .timeout = 120)
{
    for (unsigned long seed = 11; seed <= 13; seed++)
        check_random_dag(seed, 1500, 6, 1, 1);
}

/* ---- the sweep against the event loop ---------------------------------- */

/* Builds g twice (plus `extra` edges from later to earlier tasks, which
 * may close cycles), runs one engine with eng_run (the sweep) and one with
 * eng_run_event_loop, and checks that everything they report is
 * identical, failures included, and that the streams read back after the
 * run as before it. */
static void check_sweep_matches_loop(const rdag *g, unsigned long seed, int extra)
{
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, seed);
    int *from = calloc((size_t)(extra ? extra : 1), sizeof *from);
    int *to = calloc((size_t)(extra ? extra : 1), sizeof *to);
    for (int k = 0; k < extra; k++) {
        to[k] = (int)gsl_rng_uniform_int(rng, (unsigned long)g->n);
        from[k] = to[k] + (int)gsl_rng_uniform_int(rng, (unsigned long)(g->n - to[k]));
    }
    engine_t *e[2];
    sim_err err[2];
    int rc[2];
    /* Each stream's tasks before the run (a walk along the stream) and
     * after it (the index eng_run builds). */
    eng_task *before = calloc((size_t)g->n + 1, sizeof *before), *after = calloc((size_t)g->n + 1, sizeof *after);
    size_t *n_before = calloc((size_t)g->n_streams, sizeof *n_before);
    for (int w = 0; w < 2; w++) {
        e[w] = rdag_engine(g);
        for (int k = 0; k < extra; k++)
            SIM_ASSERT_OK(eng_add_dep(e[w], from[k], to[k]));
        for (int st = 0, at = 0; w == 0 && st < g->n_streams; st++) {
            n_before[st] = eng_stream_tasks(e[w], st, before + at, (size_t)(g->n - at));
            at += (int)n_before[st];
        }
        sim_err_clear(&err[w]);
        rc[w] = w == 0 ? eng_run(e[w], &err[w]) : eng_run_event_loop(e[w], &err[w]);
    }
    cr_assert_eq(rc[0], rc[1], "seed %lu: rc %d vs %d", seed, rc[0], rc[1]);
    cr_assert_str_eq(err[0].msg, err[1].msg, "seed %lu", seed);
    cr_assert_eq(eng_events(e[0]), eng_events(e[1]), "seed %lu", seed);
    cr_assert_eq(eng_makespan(e[0]), eng_makespan(e[1]), "seed %lu", seed);
    for (int i = 0; i < g->n; i++) {
        cr_assert_eq(eng_task_start(e[0], i), eng_task_start(e[1], i), "seed %lu task %d", seed, i);
        cr_assert_eq(eng_task_end(e[0], i), eng_task_end(e[1], i), "seed %lu task %d", seed, i);
    }
    for (int st = 0, at = 0; st < g->n_streams; st++) {
        /* A short buffer gets the head of the stream and the full count. */
        size_t cap = n_before[st] > 1 ? n_before[st] - (size_t)(seed % 2) : n_before[st];
        cr_assert_eq(eng_stream_tasks(e[0], st, after + at, cap), n_before[st], "seed %lu stream %d", seed, st);
        for (size_t i = 0; i < cap; i++)
            cr_assert_eq(after[at + (int)i], before[at + (int)i], "seed %lu stream %d", seed, st);
        at += (int)n_before[st];
    }
    free(before);
    free(after);
    free(n_before);
    for (int c = 0; c < g->n_counters; c++) {
        cr_assert_eq(eng_counter_peak(e[0], c), eng_counter_peak(e[1], c), "seed %lu counter %d", seed, c);
        cr_assert_eq(eng_counter_final(e[0], c), eng_counter_final(e[1], c), "seed %lu counter %d", seed, c);
    }
    eng_destroy(e[0]);
    eng_destroy(e[1]);
    free(from);
    free(to);
    gsl_rng_free(rng);
}

Test(engine, sweep_matches_event_loop_on_random_graphs, .timeout = 120)
{
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 20261201);
    for (unsigned long seed = 1; seed <= 400; seed++) {
        int n = 1 + (int)gsl_rng_uniform_int(rng, 300);
        int streams = 1 + (int)gsl_rng_uniform_int(rng, 6);
        int counters = 1 + (int)gsl_rng_uniform_int(rng, 3);
        /* Half the graphs have zero-duration tasks (durations 0..5: many
         * ties, chains of zero-length rounds at one instant). */
        rdag g = rdag_make(rng, n, streams, counters, seed % 2 ? 0 : 1);
        check_sweep_matches_loop(&g, seed, 0);
        rdag_free(&g);
    }
    gsl_rng_free(rng);
}

Test(engine, sweep_matches_event_loop_with_cycles, .timeout = 120)
{
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 777);
    for (unsigned long seed = 1; seed <= 200; seed++) {
        int n = 2 + (int)gsl_rng_uniform_int(rng, 200);
        rdag g = rdag_make(rng, n, 1 + (int)gsl_rng_uniform_int(rng, 4), 2, 0);
        check_sweep_matches_loop(&g, seed, 1 + (int)(seed % 3));
        rdag_free(&g);
    }
    gsl_rng_free(rng);
}

Test(engine, sweep_matches_event_loop_when_time_overflows)
{
    gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(rng, 4242);
    for (unsigned long seed = 1; seed <= 100; seed++) {
        int n = 2 + (int)gsl_rng_uniform_int(rng, 150);
        rdag g = rdag_make(rng, n, 1 + (int)gsl_rng_uniform_int(rng, 4), 2, 0);
        /* Two tasks whose durations add past 2^64 ps if one follows the
         * other: some graphs overflow, some do not. */
        int a = (int)gsl_rng_uniform_int(rng, (unsigned long)n), b = (int)gsl_rng_uniform_int(rng, (unsigned long)n);
        g.dur[a] = UINT64_MAX / 2 + 7;
        g.dur[b] = UINT64_MAX / 2 + 11;
        check_sweep_matches_loop(&g, seed, 0);
        rdag_free(&g);
    }
    gsl_rng_free(rng);
}
