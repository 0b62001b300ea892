/* Lagged dependencies (eng_add_lagged_deps) and release times
 * (eng_add_releases): on random graphs, a lag on an edge runs exactly as a
 * task of that duration between its ends on a stream of its own, and a
 * release as a task of that duration from 0 on a stream of its own that
 * the task waits for (every start, end, counter peak and final value of
 * the other tasks the same), under the sweep and the event loop alike; a
 * lag of 0 is a plain edge and a release of 0 none; the rows read back
 * carry each edge's lag, the releases each task's latest; and a lag that
 * takes time past 2^64 ps fails the same under both. */
#include <criterion/criterion.h>

#include <gsl/gsl_rng.h>
#include <stdint.h>
#include <string.h>

#include "engine.h"

enum { N = 200, NS = 4, NC = 2, MAX_DEPS = 3 * N, MAX_DELTAS = N };

typedef struct graph {
    int n;
    int32_t stream[N];
    sim_time_ps d[N];
    eng_dep dep[MAX_DEPS];
    sim_time_ps lag[MAX_DEPS];
    size_t n_deps;
    eng_delta delta[MAX_DELTAS];
    size_t n_deltas;
    eng_task rel_task[2 * N];
    sim_time_ps rel_at[2 * N];
    size_t n_rel;
} graph;

/* A DAG in id order: durations 0..30 (a fifth 0), edges from earlier
 * tasks with a lag of 0 (a third) or 1..30, deltas at start and end. */
static void random_graph(gsl_rng *g, graph *x)
{
    x->n = 2 + (int)gsl_rng_uniform_int(g, N - 1);
    x->n_deps = x->n_deltas = x->n_rel = 0;
    for (int t = 0; t < x->n; t++) {
        x->stream[t] = (int32_t)gsl_rng_uniform_int(g, NS);
        x->d[t] = gsl_rng_uniform_int(g, 5) == 0 ? 0 : 1 + gsl_rng_uniform_int(g, 30);
        for (int k = 0; t > 0 && k < 2 && x->n_deps < MAX_DEPS; k++)
            if (gsl_rng_uniform_int(g, 2) == 0) {
                x->dep[x->n_deps] = (eng_dep){(eng_task)gsl_rng_uniform_int(g, (unsigned long)t), (eng_task)t};
                x->lag[x->n_deps++] = gsl_rng_uniform_int(g, 3) == 0 ? 0 : 1 + gsl_rng_uniform_int(g, 30);
            }
        /* A release now and then (0 too), a second one for some. */
        for (int k = 0; k < 2 && gsl_rng_uniform_int(g, 4) == 0; k++) {
            x->rel_task[x->n_rel] = (eng_task)t;
            x->rel_at[x->n_rel++] = gsl_rng_uniform_int(g, 6) == 0 ? 0 : 1 + gsl_rng_uniform_int(g, 120);
        }
        if (gsl_rng_uniform_int(g, 2) == 0 && x->n_deltas < MAX_DELTAS)
            x->delta[x->n_deltas++] = (eng_delta){(eng_task)t, (int32_t)gsl_rng_uniform_int(g, NC),
                                                  (int64_t)gsl_rng_uniform_int(g, 7), -(int64_t)gsl_rng_uniform_int(g, 7)};
    }
}

static engine_t *tasks_of(const graph *x, int n_streams)
{
    engine_t *e = eng_create(n_streams, NC, 4, 4);
    cr_assert_not_null(e);
    cr_assert_eq(eng_add_tasks(e, (size_t)x->n, x->stream, x->d, 0), 0);
    return e;
}

/* The graph with its lags as lags, half the edges added one block at a
 * time and half as plain edges where their lag is 0. */
static engine_t *with_lags(const graph *x)
{
    engine_t *e = tasks_of(x, NS);
    for (size_t k = 0; k < x->n_deps; k++) {
        if (x->lag[k] == 0 && k % 2)
            cr_assert_eq(eng_add_deps(e, 1, &x->dep[k]), SIM_OK);
        else
            cr_assert_eq(eng_add_lagged_deps(e, 1, &x->dep[k], &x->lag[k]), SIM_OK);
    }
    cr_assert_eq(eng_add_counter_deltas(e, x->n_deltas, x->delta), SIM_OK);
    cr_assert_eq(eng_add_releases(e, x->n_rel, x->rel_task, x->rel_at), SIM_OK);
    return e;
}

/* The same graph with every lag a task of its own stream between the
 * edge's ends (ids after the graph's, so those keep theirs). */
static engine_t *with_tasks(const graph *x)
{
    engine_t *e = tasks_of(x, NS + (int)(x->n_deps + x->n_rel));
    eng_task next = (eng_task)x->n;
    for (size_t k = 0; k < x->n_rel; k++) {
        if (x->rel_at[k] == 0)
            continue;
        cr_assert_eq(eng_add_task(e, NS + (int)(x->n_deps + k), x->rel_at[k], -1), next);
        cr_assert_eq(eng_add_dep(e, next, x->rel_task[k]), SIM_OK);
        next++;
    }
    for (size_t k = 0; k < x->n_deps; k++) {
        if (x->lag[k] == 0) {
            cr_assert_eq(eng_add_dep(e, x->dep[k].before, x->dep[k].after), SIM_OK);
            continue;
        }
        cr_assert_eq(eng_add_task(e, NS + (int)k, x->lag[k], -1), next);
        cr_assert_eq(eng_add_dep(e, x->dep[k].before, next), SIM_OK);
        cr_assert_eq(eng_add_dep(e, next, x->dep[k].after), SIM_OK);
        next++;
    }
    cr_assert_eq(eng_add_counter_deltas(e, x->n_deltas, x->delta), SIM_OK);
    return e;
}

static void expect_same_tasks(const engine_t *a, const engine_t *b, int n, unsigned long seed, const char *what)
{
    for (int t = 0; t < n; t++) {
        cr_assert_eq(eng_task_start(a, t), eng_task_start(b, t), "seed %lu, %s: task %d's start", seed, what, t);
        cr_assert_eq(eng_task_end(a, t), eng_task_end(b, t), "seed %lu, %s: task %d's end", seed, what, t);
    }
    for (int c = 0; c < NC; c++) {
        cr_assert_eq(eng_counter_peak(a, c), eng_counter_peak(b, c), "seed %lu, %s: counter %d's peak", seed, what, c);
        cr_assert_eq(eng_counter_final(a, c), eng_counter_final(b, c), "seed %lu, %s: counter %d", seed, what, c);
    }
    cr_assert_eq(eng_makespan(a), eng_makespan(b), "seed %lu, %s: makespan", seed, what);
}

Test(engine_lags, a_lag_runs_as_a_task_of_its_own_stream, .timeout = 120)
{
    gsl_rng *g = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(g, 20261203);
    graph *x = malloc(sizeof *x);
    for (unsigned long seed = 1; seed <= 300; seed++) {
        random_graph(g, x);
        engine_t *sweep = with_lags(x), *loop = with_lags(x), *tasks = with_tasks(x);
        sim_err err;
        sim_err_clear(&err);
        cr_assert_eq(eng_run(sweep, &err), SIM_OK, "seed %lu: %s", seed, err.msg);
        cr_assert_eq(eng_run_event_loop(loop, &err), SIM_OK, "seed %lu: %s", seed, err.msg);
        cr_assert_eq(eng_run(tasks, &err), SIM_OK, "seed %lu: %s", seed, err.msg);
        expect_same_tasks(sweep, tasks, x->n, seed, "sweep vs tasks");
        expect_same_tasks(loop, tasks, x->n, seed, "event loop vs tasks");
        cr_assert_eq(eng_events(sweep), 2 * (uint64_t)x->n);
        cr_assert_eq(eng_events(loop), 2 * (uint64_t)x->n);
        /* Each row's lags beside its successors, in the order added. */
        const uint32_t *off;
        const eng_task *succ;
        cr_assert(eng_succ_rows(sweep, &off, &succ));
        const sim_time_ps *lags = eng_succ_lags(sweep);
        bool lagged = false; /* with_lags added one through eng_add_lagged_deps */
        for (size_t k = 0; k < x->n_deps; k++)
            lagged = lagged || !(x->lag[k] == 0 && k % 2);
        cr_assert_eq(lags != NULL, lagged, "seed %lu", seed);
        size_t seen = 0;
        for (int t = 0; t < x->n && lags; t++) {
            uint32_t at = off[t];
            for (size_t k = 0; k < x->n_deps; k++)
                if (x->dep[k].before == t) {
                    cr_assert_eq(succ[at], x->dep[k].after, "seed %lu", seed);
                    cr_assert_eq(lags[at++], x->lag[k], "seed %lu", seed);
                    seen++;
                }
            cr_assert_eq(at, off[t + 1], "seed %lu", seed);
        }
        cr_assert_eq(seen, lags ? x->n_deps : 0);
        /* Each task's latest release. */
        const sim_time_ps *rel = eng_task_releases(sweep);
        for (int t = 0; t < x->n; t++) {
            sim_time_ps want = 0;
            for (size_t k = 0; k < x->n_rel; k++)
                if (x->rel_task[k] == t && x->rel_at[k] > want)
                    want = x->rel_at[k];
            cr_assert_eq(rel ? rel[t] : 0, want, "seed %lu, task %d", seed, t);
        }
        eng_destroy(sweep);
        eng_destroy(loop);
        eng_destroy(tasks);
    }
    free(x);
    gsl_rng_free(g);
}

Test(engine_lags, no_lags_no_lag_rows)
{
    engine_t *e = eng_create(1, 0, 2, 1);
    eng_task a = eng_add_task(e, 0, 5, 0), b = eng_add_task(e, 0, 5, 1);
    cr_assert_eq(eng_add_dep(e, a, b), SIM_OK);
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(eng_run(e, &err), SIM_OK);
    cr_assert_null(eng_succ_lags(e));
    cr_assert_eq(eng_task_start(e, b), 5);
    eng_destroy(e);
}

/* A lag alone on a path: b starts lag after a ends, c (b's stream
 * successor) after b; a lag of 0 does not move b. */
Test(engine_lags, a_lag_delays_its_successor_only)
{
    for (sim_time_ps lag = 0; lag <= 7; lag += 7) {
        engine_t *e = eng_create(2, 0, 3, 1);
        eng_task a = eng_add_task(e, 0, 10, 0), b = eng_add_task(e, 1, 3, 1), c = eng_add_task(e, 1, 2, 2);
        eng_task d = eng_add_task(e, 0, 4, 3);
        cr_assert_eq(eng_add_lagged_deps(e, 1, &(eng_dep){a, b}, &lag), SIM_OK);
        sim_err err;
        sim_err_clear(&err);
        cr_assert_eq(eng_run(e, &err), SIM_OK);
        cr_assert_eq(eng_task_start(e, b), 10 + lag);
        cr_assert_eq(eng_task_start(e, c), 13 + lag);
        cr_assert_eq(eng_task_start(e, d), 10, "a's stream successor does not wait for the lag");
        cr_assert_eq(eng_makespan(e), 15 + lag);
        eng_destroy(e);
    }
}

/* A lag that takes a start past 2^64 ps: both runs fail alike. */
Test(engine_lags, a_lag_past_the_clock_fails_alike)
{
    engine_t *e[2];
    sim_err err[2];
    for (int w = 0; w < 2; w++) {
        e[w] = eng_create(1, 0, 2, 1);
        eng_task a = eng_add_task(e[w], 0, UINT64_MAX / 2, 0), b = eng_add_task(e[w], 0, 1, 1);
        const sim_time_ps lag = UINT64_MAX / 2 + 5;
        cr_assert_eq(eng_add_lagged_deps(e[w], 1, &(eng_dep){a, b}, &lag), SIM_OK);
        sim_err_clear(&err[w]);
    }
    cr_assert_eq(eng_run(e[0], &err[0]), SIM_ESIM);
    cr_assert_eq(eng_run_event_loop(e[1], &err[1]), SIM_ESIM);
    cr_assert_str_eq(err[0].msg, err[1].msg);
    cr_assert(strstr(err[0].msg, "overflows") != NULL, "%s", err[0].msg);
    eng_destroy(e[0]);
    eng_destroy(e[1]);
}
