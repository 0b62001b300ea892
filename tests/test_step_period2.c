/* step_period's choice of sample lengths: step_period_order_blocks counts
 * the steady blocks of a schedule's order (one more per period of
 * microbatches, none where the order does not repeat), and a fit that
 * fails on a transient still running at the end of its sample estimates
 * how many blocks it lasts (settle_blocks), close enough that a sample
 * that long fits. */
#include <criterion/criterion.h>
#include <string.h>

#include "engine.h"
#include "schedule.h"
#include "step_period.h"
#include "streams.h"

/* The order of every rank of plan (p, v, M, N) as step_period reads it. */
static int64_t blocks_of(sched_name name, int64_t p, int64_t v, int64_t M, int64_t N)
{
    sched_plan pl;
    sched_plan_init(&pl, name, p, v, M, N);
    const int64_t n = sched_plan_passes(&pl);
    sched_item *items = calloc((size_t)n, sizeof *items);
    sched_pass *seq = calloc((size_t)(p * n), sizeof *seq);
    cr_assert(items && seq);
    for (int64_t r = 0; r < p; r++) {
        int64_t n_items = 0, k = 0;
        sim_err err;
        sim_err_clear(&err);
        cr_assert_eq(sched_plan_build(&pl, r, items, &n_items, &err), SIM_OK);
        for (int64_t i = 0; i < n_items; i++)
            for (int j = 0; j < items[i].n_passes; j++)
                seq[r * n + k++] = items[i].pass[j];
        cr_assert_eq(k, n);
    }
    const int64_t P = sched_plan_period(&pl);
    const int64_t K = step_period_order_blocks(seq, p, n, P, P * sched_plan_kinds(&pl) * v);
    free(items);
    free(seq);
    return K;
}

Test(step_period2, order_blocks_grow_by_one_a_period)
{
    /* 1F1B: a period of one microbatch; the warm-up and the drain are
     * outside the steady run, whatever M. */
    for (int64_t p = 2; p <= 8; p *= 2) {
        int64_t k0 = blocks_of(SCHED_1F1B, p, 1, 2 * p, p);
        cr_assert_gt(k0, 0, "1F1B p %lld", (long long)p);
        for (int64_t M = 2 * p + 1; M < 2 * p + 6; M++)
            cr_assert_eq(blocks_of(SCHED_1F1B, p, 1, M, p), k0 + (M - 2 * p), "1F1B p %lld M %lld", (long long)p,
                         (long long)M);
    }
    /* Interleaved: a period of N = p microbatches. */
    const int64_t p = 4, v = 2;
    const int64_t k0 = blocks_of(SCHED_INTERLEAVED, p, v, 4 * p, p);
    cr_assert_gt(k0, 0);
    for (int64_t j = 1; j < 4; j++)
        cr_assert_eq(blocks_of(SCHED_INTERLEAVED, p, v, (4 + j) * p, p), k0 + j, "interleaved M %lld",
                     (long long)((4 + j) * p));
}

Test(step_period2, an_order_that_does_not_repeat_has_no_blocks)
{
    /* F0 B0 F1 B1 ... with every third microbatch's passes swapped: no
     * position repeats one period later for long. */
    sched_pass seq[24];
    for (int i = 0; i < 24; i++) {
        const int mb = i / 2;
        const int kind = (mb % 3 == 2) ? 1 - i % 2 : i % 2;
        seq[i] = (sched_pass){.kind = (uint8_t)kind, .microbatch = mb, .chunk = 0};
    }
    cr_assert_lt(step_period_order_blocks(seq, 1, 24, 1, 2), 4);
    cr_assert_eq(step_period_order_blocks(seq, 0, 24, 1, 2), 0);
    cr_assert_eq(step_period_order_blocks(seq, 1, 24, 0, 2), 0);
}

/* ---- a transient that outlasts the sample ------------------------------ */

/* One stage: F_i then B_i (0.1 ns each) on the compute stream.  B_i waits
 * for R_i, a chain of 8 ns tasks on the pp stream (the steady cycle:
 * lambda = 8 ns); F_i waits for G_i, a chain of 7.8 ns tasks on the host
 * (untimed); both chains after an 80 ns start.  F_i is held by G_i, and
 * shifts by 7.8 ns a block, until the gap before it on the compute
 * stream, 7.7 - 0.2 i ns, is gone at i = 39; from there every timed task
 * shifts by 8 ns. */
enum { CHAIN_START = 80000, GATE = 7800, RECV = 8000, PASS_PS = 100, SETTLED = 39 };

typedef struct drift {
    engine_t *e;
    sched_pass seq[128];
    int32_t task_pass[512];
    uint8_t timed[512];
    int32_t tag_mb[512];
    const char *tag_name[512];
    int n;
} drift;

static const char D_F[] = "F", D_B[] = "B", D_R[] = "recv", D_G[] = "gate", D_START[] = "start";

static bool drift_same(const void *ctx, eng_task a, eng_task b)
{
    const drift *t = ctx;
    int32_t x = eng_task_tag(t->e, a), y = eng_task_tag(t->e, b);
    return t->tag_name[x] == t->tag_name[y] && t->tag_mb[y] == t->tag_mb[x] + 1;
}

static eng_task drift_add(drift *t, int stream, sim_time_ps d, const char *name, int mb, int32_t pass, bool timed)
{
    eng_task k = eng_add_task(t->e, stream, d, t->n);
    cr_assert_geq(k, 0);
    t->tag_mb[t->n] = mb;
    t->tag_name[t->n] = name;
    t->n++;
    t->task_pass[k] = pass;
    t->timed[k] = timed;
    return k;
}

static bool drift_fit(drift *t, int M, step_period_fit *fit)
{
    memset(t, 0, sizeof *t);
    cr_assert_leq(M, 64);
    t->e = eng_create(STREAM_KINDS, 1, 512, 1024);
    cr_assert_not_null(t->e);
    eng_task r = drift_add(t, STREAM_PP, CHAIN_START, D_START, -1, -1, true);
    eng_task g = drift_add(t, STREAM_HOST, CHAIN_START, D_START, -1, -1, false);
    for (int i = 0; i < M; i++) {
        t->seq[2 * i] = (sched_pass){.kind = SCHED_F, .microbatch = i, .chunk = 0};
        t->seq[2 * i + 1] = (sched_pass){.kind = SCHED_B, .microbatch = i, .chunk = 0};
        g = drift_add(t, STREAM_HOST, GATE, D_G, i, 2 * i, false);
        eng_task f = drift_add(t, STREAM_COMPUTE, PASS_PS, D_F, i, 2 * i, true);
        cr_assert_eq(eng_add_dep(t->e, g, f), SIM_OK);
        r = drift_add(t, STREAM_PP, RECV, D_R, i, 2 * i + 1, true);
        eng_task b = drift_add(t, STREAM_COMPUTE, PASS_PS, D_B, i, 2 * i + 1, true);
        cr_assert_eq(eng_add_dep(t->e, r, b), SIM_OK);
    }
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(eng_run(t->e, &err), SIM_OK);
    const step_timeline tl = {.eng = t->e, .same_task = drift_same, .ctx = t, .pp = 1,
                              .streams_per_stage = STREAM_KINDS, .rank_passes = 2 * M, .seq = t->seq,
                              .task_pass = t->task_pass, .timed = t->timed, .period_mb = 1, .period_passes = 2};
    bool ok = step_period_fit_find(&tl, fit);
    eng_destroy(t->e);
    return ok;
}

Test(step_period2, a_transient_past_the_sample_is_estimated)
{
    static drift t;
    step_period_fit fit;
    memset(&fit, 0, sizeof fit);
    cr_assert(!drift_fit(&t, 16, &fit));
    cr_assert_eq(fit.cut, -1);
    /* Every microbatch is a block (the order repeats from the first
     * pass); the last pair begins at block 14, whose F is still gated,
     * with a gap that closes SETTLED - 14 blocks later. */
    cr_assert_eq(fit.blocks, 16);
    const int64_t left = SETTLED - 14;
    cr_assert(fit.settle_blocks >= left && fit.settle_blocks <= left + 1, "settle %lld, the transient lasts %lld more",
              (long long)fit.settle_blocks, (long long)left);
    /* A sample that many blocks longer, and a few for the window, fits at
     * the steady cycle. */
    const int M = 16 + (int)fit.settle_blocks + 4;
    step_period_fit longer;
    memset(&longer, 0, sizeof longer);
    cr_assert(drift_fit(&t, M, &longer), "M %d", M);
    cr_assert_eq(longer.lambda_ps, RECV);
    cr_assert_eq(longer.settle_blocks, 0);
}
