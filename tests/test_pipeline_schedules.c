/* Tests of the pipeline schedules beyond Megatron's orders and of the
 * schedule's shape: the pass-kind table, chunk placement (loop and V),
 * items of two overlapped passes. */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "schedule.h"

Test(pipeline_schedules, pass_kind_table)
{
    /* F sends downstream, B upstream, W nowhere; B follows F, W follows B. */
    cr_assert_str_eq(sched_kind_of(SCHED_F)->name, "F");
    cr_assert_str_eq(sched_kind_of(SCHED_B)->name, "B");
    cr_assert_str_eq(sched_kind_of(SCHED_W)->name, "W");
    cr_assert_eq(sched_kind_of(SCHED_F)->send_dir, 1);
    cr_assert_eq(sched_kind_of(SCHED_B)->send_dir, -1);
    cr_assert_eq(sched_kind_of(SCHED_W)->send_dir, 0);
    cr_assert_null(sched_kind_of(SCHED_W)->send);
    cr_assert_eq(sched_kind_of(SCHED_F)->after, -1);
    cr_assert_eq(sched_kind_of(SCHED_B)->after, SCHED_F);
    cr_assert_eq(sched_kind_of(SCHED_W)->after, SCHED_B);

    sched_plan whole = {.p = 4, .v = 1, .M = 8, .N = 4}, split = whole;
    split.split = true;
    cr_assert_eq(sched_plan_kinds(&whole), 2);
    cr_assert_eq(sched_plan_kinds(&split), 3);
    cr_assert(!sched_plan_has(&whole, SCHED_W));
    cr_assert(sched_plan_has(&split, SCHED_W));
    /* Activations live until the last pass of a microbatch that reads them. */
    cr_assert_eq(sched_plan_free_kind(&whole), SCHED_B);
    cr_assert_eq(sched_plan_free_kind(&split), SCHED_W);
    cr_assert_eq(sched_plan_grad_kind(&whole), SCHED_B);
    cr_assert_eq(sched_plan_grad_kind(&split), SCHED_W);
    /* Megatron's orders: F and B per (microbatch, chunk). */
    cr_assert_eq(sched_len(8, 3), 2 * 8 * 3);
}

Test(pipeline_schedules, loop_placement_is_megatrons)
{
    sched_plan pl = {.p = 4, .v = 3, .M = 8, .N = 4, .place = SCHED_PLACE_LOOP};
    for (int64_t r = 0; r < pl.p; r++)
        for (int64_t c = 0; c < pl.v; c++) {
            int64_t vs = sched_vstage(&pl, r, c), rr, cc;
            cr_assert_eq(vs, c * pl.p + r);
            sched_locate(&pl, vs, &rr, &cc);
            cr_assert_eq(rr, r);
            cr_assert_eq(cc, c);
        }
}

Test(pipeline_schedules, v_placement_folds_the_chunks)
{
    /* p = 4: rank 0 holds virtual stages 0 and 7, rank 3 holds 3 and 4
     * (the bottom of the V, one rank runs both in a row). */
    sched_plan pl = {.p = 4, .v = 2, .M = 8, .N = 4, .place = SCHED_PLACE_V};
    const int64_t want[4][2] = {{0, 7}, {1, 6}, {2, 5}, {3, 4}};
    bool seen[8] = {false};
    for (int64_t r = 0; r < pl.p; r++)
        for (int64_t c = 0; c < pl.v; c++) {
            int64_t vs = sched_vstage(&pl, r, c), rr, cc;
            cr_assert_eq(vs, want[r][c], "rank %lld chunk %lld: vstage %lld", (long long)r, (long long)c,
                         (long long)vs);
            cr_assert(!seen[vs]);
            seen[vs] = true;
            sched_locate(&pl, vs, &rr, &cc);
            cr_assert_eq(rr, r);
            cr_assert_eq(cc, c);
        }
}

Test(pipeline_schedules, item_of_two_overlapped_passes)
{
    sched_item one = sched_one(SCHED_B, 5, 1);
    cr_assert_eq(one.n_passes, 1);
    cr_assert_eq(one.pass[0].kind, SCHED_B);
    cr_assert_eq(one.pass[0].microbatch, 5);
    cr_assert_eq(one.pass[0].chunk, 1);
    sched_item fb = sched_pair((sched_pass){SCHED_F, 7, 0}, (sched_pass){SCHED_B, 2, 1});
    cr_assert_eq(fb.n_passes, 2);
    cr_assert_eq(fb.pass[0].kind, SCHED_F);
    cr_assert_eq(fb.pass[0].microbatch, 7);
    cr_assert_eq(fb.pass[0].chunk, 0);
    cr_assert_eq(fb.pass[1].kind, SCHED_B);
    cr_assert_eq(fb.pass[1].microbatch, 2);
    cr_assert_eq(fb.pass[1].chunk, 1);
}

Test(pipeline_schedules, megatron_items_hold_one_pass)
{
    const int64_t p = 4, v = 2, M = 8;
    sched_item *s = calloc((size_t)sched_len(M, v), sizeof *s);
    sim_err err;
    sim_err_clear(&err);
    for (int64_t r = 0; r < p; r++) {
        cr_assert_eq(sched_build(p, v, M, p, r, s, &err), SIM_OK, "%s", err.msg);
        for (int64_t k = 0; k < sched_len(M, v); k++)
            cr_assert_eq(s[k].n_passes, 1);
    }
    free(s);
}

/* ---- the named schedules run on the engine ------------------------------ */

/* One stream per rank running its order; F, B, W take tf, tb, tw (a
 * Megatron order's B takes tb + tw: its backward is whole); no
 * communication.  Counter r counts rank r's microbatch passes from the
 * start of their F to the end of the pass that frees them. */
typedef struct pipe_run {
    engine_t *e;
    sched_plan pl;
    sim_time_ps busy;      /* of every rank (they run the same passes) */
    int64_t items_paired;  /* items of two passes, all ranks */
} pipe_run;

static size_t pidx(const sched_plan *pl, int64_t r, int k, int64_t m, int64_t c)
{
    return (size_t)(((r * SCHED_KINDS + k) * pl->M + m) * pl->v + c);
}

static pipe_run run_plan(sched_name name, int64_t p, int64_t v, int64_t M, sim_time_ps tf, sim_time_ps tb,
                         sim_time_ps tw)
{
    pipe_run pr = {0};
    sched_plan_init(&pr.pl, name, p, v, M, p);
    const sched_plan *pl = &pr.pl;
    size_t n = (size_t)(p * SCHED_KINDS * M * v);
    pr.e = eng_create((int)p, (int)p, n, 3 * n);
    cr_assert_not_null(pr.e);
    eng_task *id = malloc(n * sizeof *id);
    for (size_t i = 0; i < n; i++)
        id[i] = -1;
    sched_item *s = calloc((size_t)sched_plan_passes(pl), sizeof *s);
    const sim_time_ps dur[SCHED_KINDS] = {tf, pl->split ? tb : tb + tw, tw};
    const sched_kind free_kind = sched_plan_free_kind(pl);
    for (int64_t r = 0; r < p; r++) {
        sim_err err;
        sim_err_clear(&err);
        int64_t len = 0;
        cr_assert_eq(sched_plan_build(pl, r, s, &len, &err), SIM_OK, "%s: %s", sched_name_str(name), err.msg);
        sim_time_ps busy = 0;
        for (int64_t k = 0; k < len; k++)
            for (int j = 0; j < s[k].n_passes; j++) {
                const sched_pass *ps = &s[k].pass[j];
                pr.items_paired += j == 1;
                eng_task t = eng_add_task(pr.e, (int)r, dur[ps->kind], 0);
                cr_assert_geq(t, 0);
                size_t at = pidx(pl, r, ps->kind, ps->microbatch, ps->chunk);
                /* Every (kind, microbatch, chunk) once. */
                cr_assert_eq(id[at], -1, "%s rank %lld: %s%d.%d twice", sched_name_str(name), (long long)r,
                             sched_kind_of(ps->kind)->name, ps->microbatch, ps->chunk);
                id[at] = t;
                busy += dur[ps->kind];
                if (ps->kind == SCHED_F)
                    cr_assert_eq(eng_add_counter_delta(pr.e, t, (int)r, 1, 0), SIM_OK);
                else if (ps->kind == free_kind)
                    cr_assert_eq(eng_add_counter_delta(pr.e, t, (int)r, 0, -1), SIM_OK);
            }
        pr.busy = busy;
    }
    free(s);
    for (int64_t r = 0; r < p; r++)
        for (int64_t m = 0; m < M; m++)
            for (int64_t c = 0; c < v; c++)
                for (int k = 0; k < SCHED_KINDS; k++) {
                    if (!sched_plan_has(pl, (sched_kind)k)) {
                        cr_assert_eq(id[pidx(pl, r, k, m, c)], -1);
                        continue;
                    }
                    eng_task t = id[pidx(pl, r, k, m, c)];
                    cr_assert_geq(t, 0, "%s rank %lld: %s%lld.%lld never runs", sched_name_str(name), (long long)r,
                                  sched_kind_of((sched_kind)k)->name, (long long)m, (long long)c);
                    const sched_kind_desc *kd = sched_kind_of((sched_kind)k);
                    if (kd->after >= 0)
                        cr_assert_eq(eng_add_dep(pr.e, id[pidx(pl, r, kd->after, m, c)], t), SIM_OK);
                    int64_t from = sched_vstage(pl, r, c) - kd->send_dir, fr, fc;
                    if (kd->send_dir != 0 && from >= 0 && from < p * v) {
                        sched_locate(pl, from, &fr, &fc);
                        cr_assert_eq(eng_add_dep(pr.e, id[pidx(pl, fr, k, m, fc)], t), SIM_OK);
                    }
                }
    free(id);
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(eng_run(pr.e, &err), SIM_OK, "%s p=%lld M=%lld: %s", sched_name_str(name), (long long)p,
                 (long long)M, err.msg);
    return pr;
}

/* Idle time of every rank up to the end of the last pass (all ranks run
 * the same work, so it is the same on each). */
static sim_time_ps bubble(const pipe_run *pr)
{
    return eng_makespan(pr->e) - pr->busy;
}

static int64_t inflight_max(const pipe_run *pr)
{
    int64_t most = 0;
    for (int64_t r = 0; r < pr->pl.p; r++)
        if (eng_counter_peak(pr->e, (int)r) > most)
            most = eng_counter_peak(pr->e, (int)r);
    return most;
}

Test(pipeline_schedules, zb_h1_bubble_and_memory_against_1f1b)
{
    /* (F, B, W) with W <= F, the paper's setting (W is the weight GEMMs of
     * a backward, F holds every forward kernel). */
    const sim_time_ps d[][3] = {{1000, 1000, 1000}, {1000, 2000, 1000}, {2000, 3000, 1000}, {3000, 2000, 2000},
                                {1300, 2100, 900}};
    const int64_t shape[][2] = {{4, 8}, {4, 4}, {8, 16}, {2, 5}, {8, 24}};
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        for (size_t j = 0; j < sizeof shape / sizeof shape[0]; j++) {
            int64_t p = shape[j][0], M = shape[j][1];
            sim_time_ps F = d[i][0], B = d[i][1], W = d[i][2];
            pipe_run zb = run_plan(SCHED_ZB_H1, p, 1, M, F, B, W);
            pipe_run one = run_plan(SCHED_1F1B, p, 1, M, F, B, W);
            cr_assert_eq(bubble(&zb), (sim_time_ps)(p - 1) * (F + B - W), "p=%lld M=%lld F=%llu B=%llu W=%llu: %llu",
                         (long long)p, (long long)M, (unsigned long long)F, (unsigned long long)B,
                         (unsigned long long)W, (unsigned long long)bubble(&zb));
            cr_assert_eq(bubble(&one), (sim_time_ps)(p - 1) * (F + B + W));
            /* 1F1B's activation memory: p microbatches on the first rank. */
            cr_assert_eq(inflight_max(&zb), p);
            cr_assert_eq(inflight_max(&one), p);
            eng_destroy(zb.e);
            eng_destroy(one.e);
        }
}

Test(pipeline_schedules, dualpipev_bubble_and_inflight)
{
    /* DeepSeek-V3 report / DualPipe: bubble (PP/2-1)(F&B+B-3W) and PP+1
     * activations, PP the stages = 2p virtual stages here, F&B the pair
     * (run one after the other here: F+B+W).  Exact with B = W; with
     * W < B the timeline does better than the formula. */
    const int64_t shape[][2] = {{4, 8}, {4, 10}, {8, 16}, {2, 5}, {4, 20}};
    const sim_time_ps d[][3] = {{1000, 1000, 1000}, {3000, 2000, 2000}, {2000, 2000, 2000},
                                {2000, 2000, 1000}, {2000, 3000, 1000}};
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        for (size_t j = 0; j < sizeof shape / sizeof shape[0]; j++) {
            int64_t p = shape[j][0], M = shape[j][1];
            sim_time_ps F = d[i][0], B = d[i][1], W = d[i][2], FB = F + B + W;
            pipe_run dv = run_plan(SCHED_DUALPIPEV, p, 2, M, F, B, W);
            sim_time_ps want = (sim_time_ps)(p - 1) * (FB + B - 3 * W);
            if (B == W)
                cr_assert_eq(bubble(&dv), want, "p=%lld M=%lld: %llu, formula %llu", (long long)p, (long long)M,
                             (unsigned long long)bubble(&dv), (unsigned long long)want);
            else
                cr_assert_leq(bubble(&dv), want);
            cr_assert_eq(inflight_max(&dv), 2 * p + 1);
            /* F&B pairs: two per microbatch of the main phase on each rank. */
            cr_assert_gt(dv.items_paired, 0);
            eng_destroy(dv.e);
        }
}

Test(pipeline_schedules, zb_v_bubble_and_inflight)
{
    /* ZB-V: 1F1B's activation memory (2p chunk passes = p microbatches of
     * a whole rank) and, at T_F = T_B = T_W (the point the schedule is
     * built for), no bubble but the fill (p-1)F that the last rank waits
     * for its first forward; interleaved 1F1B with two chunks has
     * (p-1)(F+B+W) there. */
    const int64_t shape[][2] = {{2, 4}, {4, 8}, {4, 12}, {8, 16}, {8, 24}};
    for (size_t j = 0; j < sizeof shape / sizeof shape[0]; j++) {
        int64_t p = shape[j][0], M = shape[j][1];
        const sim_time_ps t = 1000;
        pipe_run zv = run_plan(SCHED_ZB_V, p, 2, M, t, t, t);
        cr_assert_eq(bubble(&zv), (sim_time_ps)(p - 1) * t, "p=%lld M=%lld: %llu", (long long)p, (long long)M,
                     (unsigned long long)bubble(&zv));
        cr_assert_eq(inflight_max(&zv), 2 * p);
        cr_assert_eq(zv.items_paired, 0);
        pipe_run il = run_plan(SCHED_INTERLEAVED, p, 2, M, t, t, t);
        cr_assert_eq(bubble(&il), (sim_time_ps)(p - 1) * 3 * t);
        eng_destroy(zv.e);
        eng_destroy(il.e);
    }
    /* Other ratios: 1F1B's memory still, bubble below interleaved's. */
    pipe_run zv = run_plan(SCHED_ZB_V, 4, 2, 12, 2000, 3000, 1000);
    pipe_run il = run_plan(SCHED_INTERLEAVED, 4, 2, 12, 2000, 3000, 1000);
    cr_assert_eq(inflight_max(&zv), 8);
    cr_assert_lt(bubble(&zv), bubble(&il));
    eng_destroy(zv.e);
    eng_destroy(il.e);
}

Test(pipeline_schedules, refusals)
{
    sched_item s[64];
    int64_t n;
    sim_err err;
    sched_plan pl;
    sim_err_clear(&err);
    sched_plan_init(&pl, SCHED_ZB_H1, 4, 2, 8, 4);
    cr_assert_eq(sched_plan_build(&pl, 0, s, &n, &err), SIM_EINVAL);
    cr_assert(strstr(err.msg, "one chunk"), "%s", err.msg);
    sched_plan_init(&pl, SCHED_DUALPIPEV, 4, 2, 7, 4);
    cr_assert_eq(sched_plan_build(&pl, 0, s, &n, &err), SIM_EINVAL);
    cr_assert(strstr(err.msg, "2 x 4 microbatches"), "%s", err.msg);
    sched_plan_init(&pl, SCHED_ZB_V, 1, 2, 8, 1);
    cr_assert_eq(sched_plan_build(&pl, 0, s, &n, &err), SIM_EINVAL);
    sched_plan_init(&pl, SCHED_ZB_V, 2, 1, 8, 2);
    cr_assert_eq(sched_plan_build(&pl, 0, s, &n, &err), SIM_EINVAL);
    cr_assert(strstr(err.msg, "two chunks"), "%s", err.msg);
}
