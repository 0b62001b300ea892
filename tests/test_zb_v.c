/* Tests of ZB-V (Qi et al., Zero Bubble Pipeline Parallelism, ICLR 2024,
 * "memory efficient zero bubble schedule") against the paper's claims:
 * zero bubble at T_F = T_B = T_W with 1F1B's activation memory (2p chunk
 * passes in flight), the bubble (p-1)(T_F+T_B-2T_W) of its table, and
 * ZB-V below interleaved 1F1B and ZB-H1. */
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "pipe_run.h"
#include "pipe_trace.h"
#include "schedule.h"
#include "scratch.h"

/* ---- the orders run on the engine (pipe_run.h) ---------------------------- */

/* First start and last end of rank r's passes. */
static void rank_span(const pipe_run *pr, int64_t r, sim_time_ps *first, sim_time_ps *last)
{
    *first = UINT64_MAX;
    *last = 0;
    for (size_t t = 0; t < eng_num_tasks(pr->e); t++) {
        if (eng_task_stream(pr->e, (eng_task)t) != (int)r)
            continue;
        sim_time_ps a = eng_task_start(pr->e, (eng_task)t), b = eng_task_end(pr->e, (eng_task)t);
        *first = a < *first ? a : *first;
        *last = b > *last ? b : *last;
    }
}

/* Idle of rank r between its first pass and its last: the paper's bubble. */
static sim_time_ps span_idle(const pipe_run *pr, int64_t r)
{
    sim_time_ps a, b;
    rank_span(pr, r, &a, &b);
    return b - a - pr->busy;
}

static sim_time_ps span_idle_max(const pipe_run *pr)
{
    sim_time_ps most = 0;
    for (int64_t r = 0; r < pr->pl.p; r++)
        most = span_idle(pr, r) > most ? span_idle(pr, r) : most;
    return most;
}


/* (F, B, W) chunk-pass times with W <= F, B (W is the weight GEMMs of a
 * backward; F and B hold more), ps. */
static const sim_time_ps ratios[][3] = {{2000, 3000, 1000}, {3000, 2000, 2000}, {2000, 2000, 1000},
                                        {13000, 21000, 9000}, {3000, 3000, 2000}, {2000, 3000, 2000},
                                        {5000, 5000, 4000}, {4000, 3000, 3000}, {3000, 4000, 1000}};
#define N_RATIOS (sizeof ratios / sizeof ratios[0])

static sim_time_ps max3(sim_time_ps a, sim_time_ps b)
{
    return a > b ? a : b;
}

static sim_time_ps min3(sim_time_ps a, sim_time_ps b)
{
    return a < b ? a : b;
}

/* ---- zero bubble at equal times ------------------------------------------ */

Test(zb_v, zero_bubble_at_equal_times)
{
    /* T_F = T_B = T_W, the point the schedule is built for: no rank idles
     * between its first pass and its last; rank r starts r forwards late
     * (its first input) and ends as late, so makespan - busy is the fill
     * (p-1)F; 2p chunk passes in flight (1F1B's p M_B: each chunk holds
     * half a stage). */
    const int64_t ps[] = {2, 3, 4, 8};
    const sim_time_ps t = 1000;
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
        const int64_t p = ps[i], Ms[] = {2 * p, 3 * p, 4 * p + 1, 8 * p};
        for (size_t j = 0; j < sizeof Ms / sizeof Ms[0]; j++) {
            const int64_t M = Ms[j];
            pipe_run zv = run_plan(SCHED_ZB_V, p, 2, M, t, t, t);
            cr_assert_eq(zv.busy, (sim_time_ps)(6 * M) * t);
            for (int64_t r = 0; r < p; r++) {
                sim_time_ps a, b;
                rank_span(&zv, r, &a, &b);
                cr_assert_eq(span_idle(&zv, r), 0, "p=%lld M=%lld rank %lld idles %llu ps in its span", (long long)p,
                             (long long)M, (long long)r, (unsigned long long)span_idle(&zv, r));
                cr_assert_eq(a, (sim_time_ps)r * t, "p=%lld M=%lld rank %lld starts at %llu", (long long)p,
                             (long long)M, (long long)r, (unsigned long long)a);
            }
            cr_assert_eq(bubble(&zv), (sim_time_ps)(p - 1) * t, "p=%lld M=%lld: %llu", (long long)p,
                         (long long)M, (unsigned long long)bubble(&zv));
            cr_assert_eq(inflight_max(&zv), 2 * p, "p=%lld M=%lld: %lld in flight", (long long)p, (long long)M,
                         (long long)inflight_max(&zv));
            cr_assert_eq(zv.items_paired, 0);
            eng_destroy(zv.e);
        }
    }
}

Test(zb_v, zero_bubble_on_many_shapes)
{
    /* The list schedule is built for every shape, not the few above: every
     * p up to 12 and M from 2p to 5p, and some longer runs. */
    const sim_time_ps t = 1000;
    for (int64_t p = 2; p <= 12; p++)
        for (int64_t M = 2 * p; M <= 5 * p + 3; M += M < 5 * p ? 1 : 7 * p) {
            pipe_run zv = run_plan(SCHED_ZB_V, p, 2, M, t, t, t);
            cr_assert_eq(span_idle_max(&zv), 0, "p=%lld M=%lld: %llu", (long long)p, (long long)M,
                         (unsigned long long)span_idle_max(&zv));
            cr_assert_eq(bubble(&zv), (sim_time_ps)(p - 1) * t, "p=%lld M=%lld", (long long)p, (long long)M);
            cr_assert_eq(inflight_max(&zv), 2 * p, "p=%lld M=%lld", (long long)p, (long long)M);
            eng_destroy(zv.e);
        }
}

/* ---- the paper's formula -------------------------------------------------- */

Test(zb_v, paper_bubble_against_in_span_idle)
{
    /* The paper's table: ZB-V's bubble (p-1)(T_F+T_B-2T_W), T the time of
     * a whole stage (two chunk passes).  The fixed order (built at unit
     * times) run at W <= F, B leaves the rank that idles most
     * 2(p-1)(max(F,B)-W) inside its span, chunk times: the formula when W
     * equals the smaller of F and B, 2(p-1)(min(F,B)-W) below it
     * otherwise.  1F1B's memory at every ratio. */
    const int64_t ps[] = {2, 3, 4, 8};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
        const int64_t p = ps[i], Ms[] = {2 * p, 3 * p, 4 * p + 1, 8 * p};
        for (size_t j = 0; j < sizeof Ms / sizeof Ms[0]; j++)
            for (size_t k = 0; k < N_RATIOS; k++) {
                const int64_t M = Ms[j];
                const sim_time_ps F = ratios[k][0], B = ratios[k][1], W = ratios[k][2];
                pipe_run zv = run_plan(SCHED_ZB_V, p, 2, M, F, B, W);
                const sim_time_ps paper = (sim_time_ps)(p - 1) * (2 * F + 2 * B - 2 * 2 * W);
                const sim_time_ps got = span_idle_max(&zv), want = 2 * (sim_time_ps)(p - 1) * (max3(F, B) - W);
                cr_assert_eq(got, want, "p=%lld M=%lld F=%llu B=%llu W=%llu: %llu ps, 2(p-1)(max(F,B)-W) = %llu",
                             (long long)p, (long long)M, (unsigned long long)F, (unsigned long long)B,
                             (unsigned long long)W, (unsigned long long)got, (unsigned long long)want);
                cr_assert_eq(paper - got, 2 * (sim_time_ps)(p - 1) * (min3(F, B) - W));
                if (W == min3(F, B))
                    cr_assert_eq(got, paper);
                else
                    cr_assert_lt(got, paper);
                cr_assert_eq(inflight_max(&zv), 2 * p);
                eng_destroy(zv.e);
            }
    }
}

/* ---- against interleaved 1F1B and ZB-H1 ----------------------------------- */

Test(zb_v, bubble_below_interleaved_and_zb_h1)
{
    /* Same ratios; interleaved 1F1B with two chunks per rank runs the same
     * chunk passes (its backward whole: B+W); ZB-H1 runs one chunk per
     * rank with the same stage work (2F, 2B, 2W).  M a multiple of p, as
     * the interleaved schedule needs with N = p. */
    const int64_t shape[][2] = {{2, 4}, {3, 9}, {4, 8}, {4, 12}, {8, 16}, {8, 64}};
    for (size_t j = 0; j < sizeof shape / sizeof shape[0]; j++)
        for (size_t k = 0; k < N_RATIOS + 1; k++) {
            const int64_t p = shape[j][0], M = shape[j][1];
            const sim_time_ps F = k < N_RATIOS ? ratios[k][0] : 1000, B = k < N_RATIOS ? ratios[k][1] : 1000,
                              W = k < N_RATIOS ? ratios[k][2] : 1000;
            pipe_run zv = run_plan(SCHED_ZB_V, p, 2, M, F, B, W);
            pipe_run il = run_plan(SCHED_INTERLEAVED, p, 2, M, F, B, W);
            pipe_run h1 = run_plan(SCHED_ZB_H1, p, 1, M, 2 * F, 2 * B, 2 * W);
            cr_assert_eq(zv.busy, il.busy);
            cr_assert_eq(zv.busy, h1.busy);
            cr_assert_lt(bubble(&zv), bubble(&il), "p=%lld M=%lld F=%llu B=%llu W=%llu: %llu, interleaved %llu",
                         (long long)p, (long long)M, (unsigned long long)F, (unsigned long long)B,
                         (unsigned long long)W, (unsigned long long)bubble(&zv),
                         (unsigned long long)bubble(&il));
            cr_assert_lt(bubble(&zv), bubble(&h1), "p=%lld M=%lld F=%llu B=%llu W=%llu: %llu, zb-h1 %llu",
                         (long long)p, (long long)M, (unsigned long long)F, (unsigned long long)B,
                         (unsigned long long)W, (unsigned long long)bubble(&zv),
                         (unsigned long long)bubble(&h1));
            /* ZB-H1's p microbatches of a whole stage = ZB-V's 2p chunk
             * passes. */
            cr_assert_eq(inflight_max(&zv), 2 * inflight_max(&h1));
            eng_destroy(zv.e);
            eng_destroy(il.e);
            eng_destroy(h1.e);
        }
}

/* ---- figures ---------------------------------------------------------------- */

Test(zb_v, figures_p4_m12)
{
    /* p = 4, M = 12 at three ratios: per-rank idle inside its span, the
     * global bubble, the in-flight peak (printed with --verbose). */
    static const struct {
        sim_time_ps F, B, W, idle[4], global;
    } want[] = {{1000, 1000, 1000, {0, 0, 0, 0}, 3000},
                {2000, 3000, 1000, {12000, 9000, 6000, 3000}, 12000},
                {3000, 2000, 2000, {6000, 5000, 4000, 3000}, 12000}};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        pipe_run zv = run_plan(SCHED_ZB_V, 4, 2, 12, want[k].F, want[k].B, want[k].W);
        sim_time_ps idle[4];
        for (int r = 0; r < 4; r++)
            idle[r] = span_idle(&zv, r);
        cr_log_info("zb-v p=4 M=12 F=%llu B=%llu W=%llu ps: in-span idle %llu %llu %llu %llu, global bubble %llu, "
                    "in flight %lld",
                    (unsigned long long)want[k].F, (unsigned long long)want[k].B, (unsigned long long)want[k].W,
                    (unsigned long long)idle[0], (unsigned long long)idle[1], (unsigned long long)idle[2],
                    (unsigned long long)idle[3], (unsigned long long)bubble(&zv),
                    (long long)inflight_max(&zv));
        for (int r = 0; r < 4; r++)
            cr_assert_eq(idle[r], want[k].idle[r], "F=%llu B=%llu W=%llu rank %d", (unsigned long long)want[k].F,
                         (unsigned long long)want[k].B, (unsigned long long)want[k].W, r);
        cr_assert_eq(bubble(&zv), want[k].global);
        cr_assert_eq(inflight_max(&zv), 8);
        eng_destroy(zv.e);
    }
}

/* ---- first backward, refusals ----------------------------------------------- */

Test(zb_v, first_backward_from_the_order)
{
    /* sched_plan_first_b (the memory bound's forwards before the first
     * backward) against the built order: 2p-1-r forwards of chunk 0 and
     * r+1 of chunk 1, then a B of chunk 1, on every shape. */
    for (int64_t p = 2; p <= 12; p++)
        for (int64_t M = 2 * p; M <= 4 * p + 1; M += p / 2 + 1) {
            sched_plan pl;
            sched_plan_init(&pl, SCHED_ZB_V, p, 2, M, p);
            sched_item *s = calloc((size_t)sched_plan_passes(&pl), sizeof *s);
            cr_assert_not_null(s);
            for (int64_t r = 0; r < p; r++) {
                sim_err err;
                sim_err_clear(&err);
                int64_t n = 0, fwd[2] = {0, 0}, got[2], first_b = -1;
                cr_assert_eq(sched_plan_build(&pl, r, s, &n, &err), SIM_OK, "%s", err.msg);
                for (int64_t k = 0; k < n && first_b < 0; k++) {
                    if (s[k].pass[0].kind == SCHED_F)
                        fwd[s[k].pass[0].chunk]++;
                    else if (s[k].pass[0].kind == SCHED_B)
                        first_b = s[k].pass[0].chunk;
                }
                cr_assert_eq(fwd[0], 2 * p - 1 - r, "p=%lld M=%lld rank %lld", (long long)p, (long long)M, (long long)r);
                cr_assert_eq(fwd[1], r + 1, "p=%lld M=%lld rank %lld", (long long)p, (long long)M, (long long)r);
                cr_assert_eq(sched_plan_first_b(&pl, r, got), first_b);
                cr_assert_eq(got[0], fwd[0]);
                cr_assert_eq(got[1], fwd[1]);
            }
            free(s);
        }
}


Test(zb_v, refusals_name_the_rule)
{
    sched_item s[64];
    int64_t n;
    sim_err err;
    sched_plan pl;
    sim_err_clear(&err);
    sched_plan_init(&pl, SCHED_ZB_V, 4, 2, 7, 4);
    cr_assert_eq(sched_plan_build(&pl, 0, s, &n, &err), SIM_EINVAL);
    cr_assert(strstr(err.msg, "the zb-v schedule needs at least 2 x 4 microbatches, got 7"), "%s", err.msg);
    sched_plan_init(&pl, SCHED_ZB_V, 1, 2, 8, 1);
    cr_assert_eq(sched_plan_build(&pl, 0, s, &n, &err), SIM_EINVAL);
    cr_assert(strstr(err.msg, "two chunks on each of >= 2 ranks, got 2 chunks on 1 ranks"), "%s", err.msg);
    sched_plan_init(&pl, SCHED_ZB_V, 4, 3, 8, 4);
    cr_assert_eq(sched_plan_build(&pl, 0, s, &n, &err), SIM_EINVAL);
    cr_assert(strstr(err.msg, "got 3 chunks on 4 ranks"), "%s", err.msg);
}

/* ---- parsim run ---------------------------------------------------------------- */

static trace_rd tr;
static result res;

Test(zb_v, parsim_run_trace_and_inflight)
{
    run_schedule("zb-v", "", &tr, &res);
    expect_each_once(&tr, "zb-v", 2, true);
    /* The order the engine harness runs, here with parsim's passes: its
     * most idle stage as there. */
    const int64_t F = kind_ps(&tr, SCHED_F), B = kind_ps(&tr, SCHED_B), W = kind_ps(&tr, SCHED_W);
    cr_assert(W > 0 && W <= F && W <= B, "F %lld B %lld W %lld", (long long)F, (long long)B, (long long)W);
    int64_t first[P], last[P], busy[P], most = 0;
    for (int r = 0; r < P; r++) {
        first[r] = INT64_MAX;
        last[r] = busy[r] = 0;
    }
    for (int i = 0; i < tr.n; i++) {
        const tpass *p = &tr.p[i];
        first[p->stage] = p->a < first[p->stage] ? p->a : first[p->stage];
        last[p->stage] = p->b > last[p->stage] ? p->b : last[p->stage];
        busy[p->stage] += p->b - p->a;
    }
    for (int r = 0; r < P; r++)
        most = last[r] - first[r] - busy[r] > most ? last[r] - first[r] - busy[r] : most;
    cr_assert_eq(most, 2 * (P - 1) * ((F > B ? F : B) - W), "F %lld B %lld W %lld: %lld ps", (long long)F,
                 (long long)B, (long long)W, (long long)most);
    /* 2p chunk passes in flight: 1F1B's activation memory. */
    cr_assert_eq(json_max(res.out, "inflight_microbatches_max"), 2 * P);
    cr_assert(strstr(res.out, "\"pipeline_schedule\": \"zb-v\""), "%s", res.out);
}
