/* Counter peaks and finals of eng_run against the event loop
 * (eng_run_event_loop) where a counter's changes come from several
 * streams out of time order: the last change read being the one out of
 * order, and random graphs with counters shared between streams. */
#include <criterion/criterion.h>

#include <gsl/gsl_rng.h>

#include "engine.h"

/* The same graph twice: tasks (stream, duration) and their deltas. */
typedef struct spec {
    int stream;
    sim_time_ps d;
    int counter;
    int64_t at_start, at_end;
} spec;

static engine_t *made(const spec *s, size_t n, int ns, int nc)
{
    engine_t *e = eng_create(ns, nc, n, n);
    cr_assert_not_null(e);
    for (size_t t = 0; t < n; t++) {
        eng_task id = eng_add_task(e, s[t].stream, s[t].d, (int32_t)t);
        cr_assert_eq(id, (eng_task)t);
        if (s[t].at_start || s[t].at_end)
            cr_assert_eq(eng_add_counter_delta(e, id, s[t].counter, s[t].at_start, s[t].at_end), SIM_OK);
    }
    return e;
}

static void same_counters(engine_t *a, engine_t *b, int nc)
{
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(eng_run(a, &err), SIM_OK);
    cr_assert_eq(eng_run_event_loop(b, &err), SIM_OK);
    for (int c = 0; c < nc; c++) {
        cr_expect_eq(eng_counter_peak(a, c), eng_counter_peak(b, c), "counter %d: peak %lld, loop's %lld", c,
                     (long long)eng_counter_peak(a, c), (long long)eng_counter_peak(b, c));
        cr_expect_eq(eng_counter_final(a, c), eng_counter_final(b, c), "counter %d: final %lld, loop's %lld", c,
                     (long long)eng_counter_final(a, c), (long long)eng_counter_final(b, c));
    }
}

/* A on stream 0 holds 1 over [0, 10); B on stream 1, added after, takes 5
 * at 0 and keeps it: its change is before A's end, and the last one read. */
Test(engine_counters, last_change_out_of_order)
{
    const spec s[] = {{0, 10, 0, 1, -1}, {1, 1, 0, 5, 0}};
    engine_t *a = made(s, 2, 2, 1), *b = made(s, 2, 2, 1);
    same_counters(a, b, 1);
    cr_expect_eq(eng_counter_peak(a, 0), 6);
    cr_expect_eq(eng_counter_final(a, 0), 5);
    eng_destroy(a);
    eng_destroy(b);
}

/* Random graphs: tasks on three streams, random dependencies on earlier
 * tasks, deltas on two counters shared by every stream. */
Test(engine_counters, random_shared_counters)
{
    gsl_rng *g = gsl_rng_alloc(gsl_rng_mt19937);
    cr_assert_not_null(g);
    gsl_rng_set(g, 7);
    enum { N = 60, NS = 3, NC = 2 };
    for (int round = 0; round < 200; round++) {
        spec s[N];
        for (size_t t = 0; t < N; t++) {
            s[t] = (spec){(int)gsl_rng_uniform_int(g, NS),
                          gsl_rng_uniform_int(g, 4) == 0 ? 0 : 1 + gsl_rng_uniform_int(g, 50),
                          (int)gsl_rng_uniform_int(g, NC), (int64_t)gsl_rng_uniform_int(g, 7) - 3,
                          (int64_t)gsl_rng_uniform_int(g, 7) - 3};
        }
        engine_t *a = made(s, N, NS, NC), *b = made(s, N, NS, NC);
        for (size_t t = 1; t < N; t++)
            if (gsl_rng_uniform_int(g, 3) == 0) {
                eng_task before = (eng_task)gsl_rng_uniform_int(g, t);
                cr_assert_eq(eng_add_dep(a, before, (eng_task)t), SIM_OK);
                cr_assert_eq(eng_add_dep(b, before, (eng_task)t), SIM_OK);
            }
        same_counters(a, b, NC);
        eng_destroy(a);
        eng_destroy(b);
    }
    gsl_rng_free(g);
}
