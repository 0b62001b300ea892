/* step_period_fit_find on timelines made by hand: tasks outside the passes
 * take their blocks from their predecessors whatever the order of their
 * ids (a dependency into a task added earlier settles as one into a task
 * added later), through chains of dependencies and stream order; and a
 * block whose edges differ from the next one's (the same tasks, the same
 * durations) leaves the run of regular blocks. */
#include <criterion/criterion.h>
#include <string.h>

#include "engine.h"
#include "step_period.h"
#include "streams.h"

enum { MB = 12, MAX_TASKS = 8 * MB };

static const char NAME_F[] = "F", NAME_B[] = "B", NAME_SEND[] = "send", NAME_RED[] = "reduce",
                  NAME_HOST[] = "host";

/* One stage running F0 B0 F1 B1 ... on its compute stream; each F sends on
 * the pp stream; after each B a reduction on the dp stream and after that
 * a host task, neither of them part of a pass.  tag = the task's index
 * into name/mb. */
typedef struct toy {
    engine_t *e;
    sched_pass seq[2 * MB];
    int32_t task_pass[MAX_TASKS];
    uint8_t timed[MAX_TASKS];
    int32_t mb[MAX_TASKS];
    const char *name[MAX_TASKS];
    eng_task b_task[MB], red[MB], host[MB], f_task[MB];
    int n;
} toy;

static bool toy_same(const void *ctx, eng_task a, eng_task b)
{
    const toy *t = ctx;
    int32_t x = eng_task_tag(t->e, a), y = eng_task_tag(t->e, b);
    return t->name[x] == t->name[y] && t->mb[y] == t->mb[x] + 1;
}

static eng_task toy_task(toy *t, int stream, sim_time_ps d, const char *name, int mb, int32_t pass, bool timed)
{
    eng_task id = eng_add_task(t->e, stream, d, t->n);
    cr_assert(id >= 0 && id < MAX_TASKS);
    t->name[t->n] = name;
    t->mb[t->n] = mb;
    t->task_pass[id] = pass;
    t->timed[id] = timed;
    t->n++;
    return id;
}

/* With `early_reductions` the reductions and host tasks are added before
 * the passes (lower ids than the B each follows: every dependency into
 * them goes to a lower id); the timeline is the same either way.  With
 * `extra_edge`, F of microbatch 5 also precedes B of microbatch 6 (which
 * waits for F6 after F5 anyway: the times stay). */
static void toy_build(toy *t, bool early_reductions, bool extra_edge)
{
    memset(t, 0, sizeof *t);
    t->e = eng_create(STREAM_KINDS, 1, MAX_TASKS, MAX_TASKS);
    cr_assert_not_null(t->e);
    for (int pass = 0; early_reductions && pass < 2; pass++)
        for (int mb = 0; mb < MB; mb++) {
            if (pass == 0)
                t->red[mb] = toy_task(t, STREAM_DP, 2000, NAME_RED, mb, -1, true);
            else
                t->host[mb] = toy_task(t, STREAM_HOST, 500, NAME_HOST, mb, -1, false);
        }
    for (int i = 0; i < 2 * MB; i++) {
        const int mb = i / 2, kind = i % 2;
        t->seq[i] = (sched_pass){.kind = (uint8_t)kind, .microbatch = mb, .chunk = 0};
        if (kind == 0) {
            eng_task p = toy_task(t, STREAM_COMPUTE, 3000, NAME_F, mb, i, true);
            eng_task s = toy_task(t, STREAM_PP, 1000, NAME_SEND, mb, i, true);
            cr_assert_eq(eng_add_dep(t->e, p, s), SIM_OK);
            t->f_task[mb] = p;
            continue;
        }
        t->b_task[mb] = toy_task(t, STREAM_COMPUTE, 5000, NAME_B, mb, i, true);
        if (!early_reductions) {
            t->red[mb] = toy_task(t, STREAM_DP, 2000, NAME_RED, mb, -1, true);
            t->host[mb] = toy_task(t, STREAM_HOST, 500, NAME_HOST, mb, -1, false);
        }
    }
    for (int mb = 0; mb < MB; mb++) {
        cr_assert_eq(eng_add_dep(t->e, t->b_task[mb], t->red[mb]), SIM_OK);
        cr_assert_eq(eng_add_dep(t->e, t->red[mb], t->host[mb]), SIM_OK);
    }
    if (extra_edge)
        cr_assert_eq(eng_add_dep(t->e, t->f_task[5], t->b_task[6]), SIM_OK);
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(eng_run(t->e, &err), SIM_OK);
}

static bool toy_fit(toy *t, step_period_fit *fit, int32_t *block, sim_time_ps *from)
{
    const step_timeline tl = {.eng = t->e, .same_task = toy_same, .ctx = t, .pp = 1,
                              .streams_per_stage = STREAM_KINDS, .rank_passes = 2 * MB, .seq = t->seq,
                              .task_pass = t->task_pass, .timed = t->timed, .period_mb = 1, .period_passes = 2,
                              .block_out = block, .from_out = from};
    return step_period_fit_find(&tl, fit);
}

Test(step_period4, tasks_outside_the_passes_take_their_blocks_whatever_their_ids)
{
    toy t[2];
    step_period_fit fit[2];
    int32_t block[2][MAX_TASKS];
    sim_time_ps from[2];
    for (int k = 0; k < 2; k++) {
        toy_build(&t[k], k == 1, false);
        cr_assert(toy_fit(&t[k], &fit[k], block[k], &from[k]), "variant %d fits", k);
    }
    /* The same timeline: the same fit. */
    cr_assert_eq(fit[0].lambda_ps, 8000); /* F + B on the compute stream */
    cr_assert_eq(fit[1].lambda_ps, fit[0].lambda_ps);
    cr_assert_eq(fit[1].cut, fit[0].cut);
    cr_assert_eq(fit[1].blocks, fit[0].blocks);
    cr_assert_eq(fit[1].window_ps, fit[0].window_ps);
    cr_assert_eq(fit[1].whole_period, fit[0].whole_period);
    cr_assert_eq(from[1], from[0]);
    cr_assert(fit[0].blocks >= 4 && fit[0].cut >= 0);
    for (int mb = 0; mb < MB; mb++) {
        for (int k = 0; k < 2; k++) {
            /* A reduction takes its B's block (its stream predecessor is a
             * block earlier), and the host task after it the same through
             * the chain. */
            const int32_t bb = block[k][t[k].b_task[mb]];
            cr_assert_eq(block[k][t[k].red[mb]], bb, "variant %d, microbatch %d", k, mb);
            cr_assert_eq(block[k][t[k].host[mb]], bb, "variant %d, microbatch %d", k, mb);
        }
        cr_assert_eq(block[1][t[1].b_task[mb]], block[0][t[0].b_task[mb]]);
        cr_assert_eq(block[1][t[1].f_task[mb]], block[0][t[0].f_task[mb]]);
    }
    /* Every microbatch is in the order's steady run (its passes repeat
     * one period later throughout): block mb. */
    cr_assert_eq(fit[0].blocks, MB);
    for (int mb = 0; mb < MB; mb++)
        cr_assert_eq(block[0][t[0].b_task[mb]], mb);
    for (int k = 0; k < 2; k++)
        eng_destroy(t[k].e);
}

Test(step_period4, a_block_whose_edges_differ_leaves_the_regular_run)
{
    toy plain, odd;
    step_period_fit fp, fo;
    int32_t bp[MAX_TASKS], bo[MAX_TASKS];
    toy_build(&plain, false, false);
    toy_build(&odd, false, true);
    /* The extra edge moves no time. */
    for (int mb = 0; mb < MB; mb++)
        cr_assert_eq(eng_task_start(odd.e, odd.b_task[mb]), eng_task_start(plain.e, plain.b_task[mb]));
    cr_assert(toy_fit(&plain, &fp, bp, NULL));
    cr_assert(toy_fit(&odd, &fo, bo, NULL));
    cr_assert_eq(fo.lambda_ps, fp.lambda_ps);
    /* F5 has one successor more than F4 and F6, and B6 one predecessor
     * more than B5 and B7: the blocks of microbatches 4 .. 7 cannot be
     * compared with their neighbours, and the longest regular run is on
     * one side of them. */
    cr_assert_lt(fo.blocks, fp.blocks);
    cr_assert(fo.blocks >= 4);
    const int32_t b5 = bo[odd.f_task[5]], b6 = bo[odd.b_task[6]];
    cr_assert(b5 < 0 || b5 >= (int32_t)fo.blocks || b6 < 0 || b6 >= (int32_t)fo.blocks,
              "microbatch 5 or 6 lies outside the regular blocks (%d, %d of %lld)", b5, b6, (long long)fo.blocks);
    eng_destroy(plain.e);
    eng_destroy(odd.e);
}
