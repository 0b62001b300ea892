/* Tests of what the measurement reads off a run: the engine's per-stream
 * spans (eng_stream_spans, against eng_task_start / eng_task_end in
 * eng_stream_view's order, before a run, after a failed one) and the
 * interval arithmetic of step_measure.h (skip_ended, uncovered on unmerged
 * stream spans, exposed_lists) against a plain reference: every list
 * sorted together and merged, and a walk instead of a search. */
#include <criterion/criterion.h>

#include <gsl/gsl_rng.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "step_measure.h"

static int run(engine_t *e)
{
    sim_err err;
    sim_err_clear(&err);
    return eng_run(e, &err);
}

/* A random graph of n tasks on ns streams (some zero-length, random
 * dependencies on earlier tasks), run. */
static engine_t *random_run(gsl_rng *g, int ns, size_t n)
{
    engine_t *e = eng_create(ns, 0, n, 2 * n);
    cr_assert_not_null(e);
    for (size_t t = 0; t < n; t++) {
        sim_time_ps d = gsl_rng_uniform_int(g, 4) == 0 ? 0 : 1 + gsl_rng_uniform_int(g, 1000);
        eng_task id = eng_add_task(e, (int)gsl_rng_uniform_int(g, (unsigned long)ns), d, (int32_t)t);
        cr_assert_eq(id, (eng_task)t);
        for (int k = 0; k < 2 && t > 0; k++)
            if (gsl_rng_uniform_int(g, 3) == 0)
                cr_assert_eq(eng_add_dep(e, (eng_task)gsl_rng_uniform_int(g, t), id), SIM_OK);
    }
    cr_assert_eq(run(e), SIM_OK);
    return e;
}

Test(engine_spans, each_stream_in_run_order_as_its_tasks)
{
    gsl_rng *g = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(g, 7);
    for (int rep = 0; rep < 20; rep++) {
        const int ns = 1 + (int)gsl_rng_uniform_int(g, 6);
        engine_t *e = random_run(g, ns, 1 + gsl_rng_uniform_int(g, 400));
        size_t total = 0;
        for (int s = 0; s < ns; s++) {
            const eng_task *ids;
            const eng_span *sp;
            size_t n = eng_stream_view(e, s, &ids);
            cr_assert_eq(eng_stream_spans(e, s, &sp), n);
            cr_assert(n == 0 || sp != NULL);
            for (size_t i = 0; i < n; i++) {
                cr_assert_eq(sp[i].a, eng_task_start(e, ids[i]), "stream %d task %zu", s, i);
                cr_assert_eq(sp[i].b, eng_task_end(e, ids[i]), "stream %d task %zu", s, i);
                /* In order and one at a time: sorted, disjoint. */
                if (i > 0)
                    cr_assert_geq(sp[i].a, sp[i - 1].b);
            }
            total += n;
        }
        cr_assert_eq(total, eng_num_tasks(e));
        eng_destroy(e);
    }
    gsl_rng_free(g);
}

Test(engine_spans, none_before_a_run_nor_after_a_failed_one)
{
    engine_t *e = eng_create(1, 0, 2, 2);
    eng_task a = eng_add_task(e, 0, 5, 0), b = eng_add_task(e, 0, 5, 1);
    const eng_span *sp = (const eng_span *)&sp; /* not NULL: the call must set it */
    cr_assert_eq(eng_stream_spans(e, 0, &sp), 0);
    cr_assert_null(sp);
    /* b waits for a on the stream, a for b: a cycle. */
    cr_assert_eq(eng_add_dep(e, b, a), SIM_OK);
    cr_assert_neq(run(e), SIM_OK);
    sp = (const eng_span *)&sp;
    size_t n = eng_stream_spans(e, 0, &sp);
    const eng_task *ids;
    cr_assert_eq(n, eng_stream_view(e, 0, &ids));
    /* Whatever it holds matches the tasks, which never started. */
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(sp[i].a, eng_task_start(e, ids[i]));
    eng_destroy(e);
}

/* n intervals sorted and disjoint, touching at most, some empty. */
static size_t random_list(gsl_rng *g, interval *out, size_t n)
{
    sim_time_ps t = gsl_rng_uniform_int(g, 50);
    for (size_t i = 0; i < n; i++) {
        t += gsl_rng_uniform_int(g, 3) == 0 ? 0 : gsl_rng_uniform_int(g, 60);
        sim_time_ps len = gsl_rng_uniform_int(g, 5) == 0 ? 0 : 1 + gsl_rng_uniform_int(g, 80);
        out[i] = (interval){t, t + len};
        t += len;
    }
    return n;
}

static sim_time_ps reference_uncovered(const interval *u, size_t nu, const interval *c, size_t nc)
{
    sim_time_ps total = 0;
    for (size_t i = 0; i < nu; i++) {
        sim_time_ps covered = 0;
        for (size_t k = 0; k < nc; k++) {
            sim_time_ps lo = c[k].a > u[i].a ? c[k].a : u[i].a, hi = c[k].b < u[i].b ? c[k].b : u[i].b;
            covered += hi > lo ? hi - lo : 0;
        }
        total += u[i].b - u[i].a - covered;
    }
    return total;
}

#define ROOM 256

Test(engine_spans, interval_arithmetic_matches_the_merged_reference)
{
    gsl_rng *g = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(g, 11);
    static interval lists[STREAM_KINDS][ROOM], comp[ROOM], cm[ROOM], all[STREAM_KINDS * ROOM];
    for (int rep = 0; rep < 2000; rep++) {
        size_t nc = random_list(g, comp, gsl_rng_uniform_int(g, ROOM));
        /* skip_ended: the first that ends after a, as a walk finds it. */
        for (int q = 0; q < 8; q++) {
            sim_time_ps a = gsl_rng_uniform_int(g, 20000);
            size_t from = nc ? gsl_rng_uniform_int(g, nc) : 0, walk = from;
            while (walk < nc && comp[walk].b <= a)
                walk++;
            cr_assert_eq(skip_ended(comp, from, nc, a), walk);
        }
        /* The merged compute spans and the unmerged ones leave the same
         * part of each list, and of their union, uncovered. */
        memcpy(cm, comp, nc * sizeof *cm);
        size_t ncm = merge(cm, nc);
        const int n = 1 + (int)gsl_rng_uniform_int(g, STREAM_KINDS);
        const interval *u[STREAM_KINDS];
        size_t nu[STREAM_KINDS], n_all = 0;
        for (int k = 0; k < n; k++) {
            nu[k] = random_list(g, lists[k], gsl_rng_uniform_int(g, ROOM));
            u[k] = lists[k];
            cr_assert_eq(uncovered(lists[k], nu[k], comp, nc), reference_uncovered(lists[k], nu[k], cm, ncm));
            memcpy(all + n_all, lists[k], nu[k] * sizeof *all);
            n_all += nu[k];
        }
        qsort(all, n_all, sizeof *all, interval_cmp);
        n_all = merge(all, n_all);
        sim_time_ps tot[STREAM_KINDS], unc[STREAM_KINDS];
        cr_assert_eq(exposed_lists(u, nu, n, comp, nc, tot, unc), reference_uncovered(all, n_all, cm, ncm), "rep %d", rep);
    }
    gsl_rng_free(g);
}
