/* pipe_run.h: a pipeline schedule's orders run on the engine, for the
 * schedule tests (one stream per rank, no communication). */
#ifndef PARSIM_TEST_PIPE_RUN_H
#define PARSIM_TEST_PIPE_RUN_H

#include <criterion/criterion.h>

#include <stdlib.h>

#include "engine.h"
#include "schedule.h"

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

static inline size_t pidx(const sched_plan *pl, int64_t r, int k, int64_t m, int64_t c)
{
    return (size_t)(((r * SCHED_KINDS + k) * pl->M + m) * pl->v + c);
}

static inline pipe_run run_plan(sched_name name, int64_t p, int64_t v, int64_t M, sim_time_ps tf, sim_time_ps tb,
                                sim_time_ps tw)
{
    pipe_run pr = {0};
    sched_plan_init(&pr.pl, name, p, v, M, p);
    const sched_plan *pl = &pr.pl;
    size_t n = (size_t)(p * SCHED_KINDS * M * v);
    pr.e = eng_create((int)p, (int)p, n, 3 * n);
    cr_assert_not_null(pr.e);
    eng_task *id = malloc(n * sizeof *id);
    cr_assert_not_null(id);
    for (size_t i = 0; i < n; i++)
        id[i] = -1;
    sched_item *s = calloc((size_t)sched_plan_passes(pl), sizeof *s);
    cr_assert_not_null(s);
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
static inline sim_time_ps bubble(const pipe_run *pr)
{
    return eng_makespan(pr->e) - pr->busy;
}

static inline int64_t inflight_max(const pipe_run *pr)
{
    int64_t most = 0;
    for (int64_t r = 0; r < pr->pl.p; r++)
        if (eng_counter_peak(pr->e, (int)r) > most)
            most = eng_counter_peak(pr->e, (int)r);
    return most;
}

#endif
