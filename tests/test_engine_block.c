/* The block calls of the engine (eng_add_tasks, eng_add_deps,
 * eng_add_counter_deltas) against the single ones: random graphs added
 * both ways, in blocks of random sizes with tasks, dependencies (forward
 * and backward in id order) and deltas (out of task order too) between
 * them, run both ways with every start, end, tag, stream, successor row,
 * stream slice and counter the same; and the refusals that add nothing.
 * Also the pass orders the step's graph is built from (sched_build walks
 * the virtual microbatch table in order). */
#include <criterion/criterion.h>

#include <gsl/gsl_rng.h>
#include <stdint.h>
#include <string.h>

#include "engine.h"
#include "schedule.h"

enum { N = 300, NS = 5, NC = 3, MAX_DEPS = 2 * N, MAX_DELTAS = N };

typedef struct graph {
    int32_t stream[N];
    sim_time_ps d[N];
    eng_dep dep[MAX_DEPS];
    size_t n_deps;
    eng_delta delta[MAX_DELTAS];
    size_t n_deltas;
    /* Where each block ends: tasks, deps and deltas added before the next. */
    size_t cut_task[N + 1], cut_dep[N + 1], cut_delta[N + 1];
    size_t n_cuts;
} graph;

/* Tasks in blocks of 1..12; after each block, edges into it from any
 * earlier task (a DAG in id order) plus, now and then, an edge from the
 * block's last task back to its first, which is then alone on the last
 * stream in the block (nothing of the block waits for it: still acyclic),
 * and deltas on tasks of the block from its last to its first. */
static void random_graph(gsl_rng *g, graph *x)
{
    size_t t = 0;
    x->n_deps = x->n_deltas = x->n_cuts = 0;
    while (t < N) {
        size_t k = 1 + gsl_rng_uniform_int(g, 12);
        if (k > N - t)
            k = N - t;
        const bool back = k > 1 && gsl_rng_uniform_int(g, 3) == 0;
        for (size_t i = 0; i < k; i++) {
            x->stream[t + i] = (int32_t)gsl_rng_uniform_int(g, NS - 1);
            x->d[t + i] = gsl_rng_uniform_int(g, 5) == 0 ? 0 : 1 + gsl_rng_uniform_int(g, 40);
        }
        if (back)
            x->stream[t] = NS - 1;
        for (size_t i = 0; i < k && t > 0; i++)
            if (gsl_rng_uniform_int(g, 2) == 0 && x->n_deps < MAX_DEPS)
                x->dep[x->n_deps++] = (eng_dep){(eng_task)gsl_rng_uniform_int(g, t), (eng_task)(t + i)};
        if (back && x->n_deps < MAX_DEPS)
            x->dep[x->n_deps++] = (eng_dep){(eng_task)(t + k - 1), (eng_task)t};
        for (size_t i = 0; i < k && x->n_deltas < MAX_DELTAS; i++)
            if (gsl_rng_uniform_int(g, 2) == 0)
                x->delta[x->n_deltas++] = (eng_delta){(eng_task)(t + k - 1 - i), (int32_t)gsl_rng_uniform_int(g, NC),
                                                      (int64_t)gsl_rng_uniform_int(g, 9) - 4,
                                                      (int64_t)gsl_rng_uniform_int(g, 9) - 4};
        t += k;
        x->cut_task[x->n_cuts] = t;
        x->cut_dep[x->n_cuts] = x->n_deps;
        x->cut_delta[x->n_cuts] = x->n_deltas;
        x->n_cuts++;
    }
}

static engine_t *by_singles(const graph *x)
{
    engine_t *e = eng_create(NS, NC, 4, 4); /* short hints: growth too */
    cr_assert_not_null(e);
    size_t t = 0, k = 0, m = 0;
    for (size_t c = 0; c < x->n_cuts; c++) {
        for (; t < x->cut_task[c]; t++)
            cr_assert_eq(eng_add_task(e, x->stream[t], x->d[t], (int32_t)(1000 + t)), (eng_task)t);
        for (; k < x->cut_dep[c]; k++)
            cr_assert_eq(eng_add_dep(e, x->dep[k].before, x->dep[k].after), SIM_OK);
        for (; m < x->cut_delta[c]; m++)
            cr_assert_eq(eng_add_counter_delta(e, x->delta[m].task, x->delta[m].counter, x->delta[m].at_start,
                                               x->delta[m].at_end),
                         SIM_OK);
    }
    return e;
}

static engine_t *by_blocks(const graph *x)
{
    engine_t *e = eng_create(NS, NC, 4, 4);
    cr_assert_not_null(e);
    size_t t = 0, k = 0, m = 0;
    for (size_t c = 0; c < x->n_cuts; c++) {
        cr_assert_eq(eng_add_tasks(e, x->cut_task[c] - t, x->stream + t, x->d + t, (int32_t)(1000 + t)), (eng_task)t);
        cr_assert_eq(eng_add_deps(e, x->cut_dep[c] - k, x->dep + k), SIM_OK);
        cr_assert_eq(eng_add_counter_deltas(e, x->cut_delta[c] - m, x->delta + m), SIM_OK);
        t = x->cut_task[c];
        k = x->cut_dep[c];
        m = x->cut_delta[c];
    }
    /* Empty blocks add nothing. */
    cr_assert_eq(eng_add_tasks(e, 0, NULL, NULL, 0), (eng_task)N);
    cr_assert_eq(eng_add_deps(e, 0, NULL), SIM_OK);
    cr_assert_eq(eng_add_counter_deltas(e, 0, NULL), SIM_OK);
    return e;
}

static void same_engines(engine_t *a, engine_t *b)
{
    cr_assert_eq(eng_num_tasks(a), eng_num_tasks(b));
    for (eng_task t = 0; t < (eng_task)eng_num_tasks(a); t++) {
        cr_assert_eq(eng_task_start(a, t), eng_task_start(b, t), "task %d", (int)t);
        cr_assert_eq(eng_task_end(a, t), eng_task_end(b, t), "task %d", (int)t);
        cr_assert_eq(eng_task_tag(a, t), eng_task_tag(b, t));
        cr_assert_eq(eng_task_stream(a, t), eng_task_stream(b, t));
        const eng_task *sa, *sb;
        size_t na = eng_task_succs(a, t, &sa), nb = eng_task_succs(b, t, &sb);
        cr_assert_eq(na, nb, "task %d: %zu successors, %zu by blocks", (int)t, na, nb);
        for (size_t i = 0; i < na; i++)
            cr_assert_eq(sa[i], sb[i]);
    }
    for (int s = 0; s < NS; s++) {
        const eng_task *ia, *ib;
        const eng_span *pa, *pb;
        size_t na = eng_stream_view(a, s, &ia), nb = eng_stream_view(b, s, &ib);
        cr_assert_eq(na, nb);
        cr_assert_eq(eng_stream_spans(a, s, &pa), eng_stream_spans(b, s, &pb));
        for (size_t i = 0; i < na; i++) {
            cr_assert_eq(ia[i], ib[i]);
            cr_assert_eq(pa[i].a, pb[i].a);
            cr_assert_eq(pa[i].b, pb[i].b);
        }
    }
    for (int c = 0; c < NC; c++) {
        cr_assert_eq(eng_counter_peak(a, c), eng_counter_peak(b, c), "counter %d", c);
        cr_assert_eq(eng_counter_final(a, c), eng_counter_final(b, c), "counter %d", c);
    }
    cr_assert_eq(eng_makespan(a), eng_makespan(b));
    cr_assert_eq(eng_events(a), eng_events(b));
}

Test(engine_block, blocks_run_as_single_adds)
{
    gsl_rng *g = gsl_rng_alloc(gsl_rng_mt19937);
    cr_assert_not_null(g);
    gsl_rng_set(g, 11);
    static graph x;
    for (int round = 0; round < 50; round++) {
        random_graph(g, &x);
        for (int loop = 0; loop < 2; loop++) {
            engine_t *a = by_singles(&x), *b = by_blocks(&x);
            sim_err err;
            sim_err_clear(&err);
            /* The sweep and the event loop, each both ways. */
            int (*runner)(engine_t *, sim_err *) = loop ? eng_run_event_loop : eng_run;
            cr_assert_eq(runner(a, &err), SIM_OK, "%s", err.msg);
            cr_assert_eq(runner(b, &err), SIM_OK, "%s", err.msg);
            same_engines(a, b);
            eng_destroy(a);
            eng_destroy(b);
        }
    }
    gsl_rng_free(g);
}

/* A block whose last tag would pass INT32_MAX is refused whole, and the
 * engine runs as if it had never been offered. */
Test(engine_block, tag_past_int32_max_adds_none)
{
    engine_t *e = eng_create(1, 0, 4, 4);
    cr_assert_not_null(e);
    const int32_t stream[3] = {0, 0, 0};
    const sim_time_ps d[3] = {5, 6, 7};
    cr_assert_eq(eng_add_tasks(e, 3, stream, d, INT32_MAX - 1), -1);
    cr_assert_eq(eng_num_tasks(e), 0);
    cr_assert_eq(eng_add_tasks(e, 2, stream, d, INT32_MAX - 1), 0);
    cr_assert_eq(eng_task_tag(e, 1), INT32_MAX);
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(eng_run(e, &err), SIM_OK);
    cr_assert_eq(eng_makespan(e), 11);
    eng_destroy(e);
}

/* Blocks that close a cycle fail the run as single adds do: the same
 * message from both. */
Test(engine_block, cycle_fails_as_singles)
{
    engine_t *a = eng_create(2, 0, 4, 4), *b = eng_create(2, 0, 4, 4);
    cr_assert(a && b);
    const int32_t stream[2] = {0, 1};
    const sim_time_ps d[2] = {3, 4};
    const eng_dep deps[2] = {{0, 1}, {1, 0}};
    for (int i = 0; i < 2; i++)
        cr_assert_eq(eng_add_task(a, stream[i], d[i], i), i);
    cr_assert_eq(eng_add_dep(a, 0, 1), SIM_OK);
    cr_assert_eq(eng_add_dep(a, 1, 0), SIM_OK);
    cr_assert_eq(eng_add_tasks(b, 2, stream, d, 0), 0);
    cr_assert_eq(eng_add_deps(b, 2, deps), SIM_OK);
    sim_err ea, eb;
    sim_err_clear(&ea);
    sim_err_clear(&eb);
    cr_assert_eq(eng_run(a, &ea), SIM_ESIM);
    cr_assert_eq(eng_run(b, &eb), SIM_ESIM);
    cr_assert_str_eq(ea.msg, eb.msg);
    cr_assert(strstr(eb.msg, "can never start") != NULL, "%s", eb.msg);
    eng_destroy(a);
    eng_destroy(b);
}

/* The step's graph takes each rank's pass order from sched_build, which
 * walks the virtual microbatch table in order instead of computing each
 * entry: its order is sched_virtual's table read entry by entry, for
 * every valid (p, v, M, N, rank) in a range that has short last groups. */
Test(engine_block, schedule_walks_the_virtual_table)
{
    static sched_item out[2 * 64 * 4];
    int checked = 0;
    for (int64_t p = 1; p <= 4; p++)
        for (int64_t v = 1; v <= 4; v++)
            for (int64_t M = 1; M * v <= 64; M++)
                for (int64_t n = v == 1 ? 1 : p; n <= (v == 1 ? 1 : M); n++) {
                    if (v > 1 && (p == 1 || (M % n > 0 && M % n < p)))
                        continue;
                    for (int64_t rank = 0; rank < p; rank++) {
                        sim_err err;
                        sim_err_clear(&err);
                        cr_assert_eq(sched_build(p, v, M, n, rank, out, &err), SIM_OK, "%s", err.msg);
                        const int64_t total = M * v, w = sched_warmup(p, v, M, n, rank);
                        int64_t kf = 0, kb = 0;
                        for (int64_t i = 0; i < 2 * total; i++) {
                            const sched_pass *x = &out[i].pass[0];
                            const bool fwd = i < w || (i >= w && i < w + 2 * (total - w) && (i - w) % 2 == 0);
                            int32_t mb, ch;
                            sched_virtual(v, M, n, fwd ? kf++ : kb++, &mb, &ch);
                            cr_assert_eq(x->kind, fwd ? SCHED_F : SCHED_B);
                            cr_assert_eq(x->microbatch, mb, "p %lld v %lld M %lld N %lld rank %lld pass %lld",
                                         (long long)p, (long long)v, (long long)M, (long long)n, (long long)rank,
                                         (long long)i);
                            cr_assert_eq(x->chunk, fwd ? ch : (int32_t)(v - 1 - ch));
                        }
                        checked++;
                    }
                }
    cr_assert_gt(checked, 500);
}
