/* A longer step of a periodic schedule lays its stages out by its own
 * order: whether a stage's host is ahead of its GPU there
 * (step_host_ahead) is what step_host_ahead_longer reads off a shorter
 * step's order with the blocks it lacks inserted (step_order_copy_at).
 * Checked against the longer orders themselves, built by the schedule,
 * for host costs on both sides of the GPU's and for more blocks than the
 * skipped copies start at; with the forward's host cheaper than its GPU
 * span and the backward's dearer, the short and the long step decide
 * differently, which is why a sample checks it (step.c, host_stays). */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "schedule.h"
#include "sim_run.h"
#include "step_internal.h"

/* Stage r's order at M microbatches into seq (n passes); false where the
 * schedule does not run at M. */
static bool order_of(const step_t *st, int64_t r, int64_t M, sched_pass *seq, int64_t *n)
{
    sched_plan pl = st->plan;
    pl.M = M;
    sched_item *items = malloc((size_t)sched_plan_passes(&pl) * sizeof *items);
    cr_assert_not_null(items);
    sched_orders kept = {0};
    sim_err err;
    sim_err_clear(&err);
    int64_t n_items = 0;
    const bool ok = sched_plan_build_kept(&pl, r, &kept, items, &n_items, &err) == SIM_OK;
    *n = 0;
    for (int64_t i = 0; ok && i < n_items; i++)
        for (int j = 0; j < items[i].n_passes; j++)
            seq[(*n)++] = items[i].pass[j];
    sched_orders_free(&kept);
    free(items);
    return ok;
}

/* Every stage's host passes given host costs of fwd (forwards) and bwd
 * (the other kinds) times their GPU time, in thousandths. */
static void set_host(step_t *st, const pass_summary *orig, int fwd, int bwd)
{
    const size_t n = (size_t)(st->pp * st->v * st->n_kinds);
    for (size_t q = 0; q < n; q++) {
        pass_summary *p = &st->summary[q];
        *p = orig[q];
        if (!p->host)
            continue;
        const int pct = q % (size_t)st->n_kinds == SCHED_F ? fwd : bwd;
        p->host_ps = p->gpu_ps / 1000 * (sim_time_ps)pct;
        p->lead_ps = p->host_ps / 2;
    }
}

typedef struct tally {
    int checked, ahead, behind, differ;
} tally;

static void check_case(const char *const *kv, int64_t M1, tally *t)
{
    sim x;
    sim_run(&x, kv);
    step_t *st = x.st;
    const int64_t P = sched_plan_period(&st->plan), L = P * st->n_kinds * st->v;
    static const int64_t more[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 17, 40};
    const int64_t most = M1 + 40 * P, cap = st->n_kinds * most * st->v;
    sched_pass *seq = malloc((size_t)cap * sizeof *seq), *longer = malloc((size_t)cap * sizeof *longer);
    const size_t ns = (size_t)(st->pp * st->v * st->n_kinds);
    pass_summary *orig = malloc(ns * sizeof *orig);
    cr_assert(seq && longer && orig);
    memcpy(orig, st->summary, ns * sizeof *orig);
    const bool ag_first = x.s.zero >= DP_SHARD_OPTIM && x.in.ddp.overlap_param_gather;
    static const int fwd[] = {200, 600, 950, 1000, 1300};
    for (size_t f = 0; f < sizeof fwd / sizeof *fwd; f++)
        for (int bwd = 600; bwd <= 1600; bwd += 2) {
            set_host(st, orig, fwd[f], bwd);
            for (int64_t r = 0; r < st->pp; r++) {
                int64_t n1 = 0;
                cr_assert(order_of(st, r, M1, seq, &n1), "%s: the schedule at %lld microbatches", kv[0],
                          (long long)M1);
                const int64_t at = step_order_copy_at(seq, NULL, n1, P, L);
                cr_assert_geq(at, L, "%s stage %lld: no steady run of a period at %lld microbatches", kv[0],
                              (long long)r, (long long)M1);
                const bool short_ahead = step_host_ahead(st, &x.in, seq, NULL, n1, r, ag_first);
                for (size_t k = 0; k < sizeof more / sizeof *more; k++) {
                    int64_t n = 0;
                    cr_assert(order_of(st, r, M1 + more[k] * P, longer, &n));
                    cr_assert_eq(n, n1 + more[k] * L);
                    const bool want = step_host_ahead(st, &x.in, longer, NULL, n, r, ag_first);
                    const bool got = step_host_ahead_longer(st, &x.in, seq, NULL, n1, r, ag_first, at, L, more[k]);
                    cr_assert_eq(got, want,
                                 "%s stage %lld, host %d/%d thousandths of the GPU: %lld blocks more, the longer order says "
                                 "%s, the short one with copies %s",
                                 kv[0], (long long)r, fwd[f], bwd, (long long)more[k], want ? "ahead" : "behind",
                                 got ? "ahead" : "behind");
                    t->checked++;
                    want ? t->ahead++ : t->behind++;
                    t->differ += want != short_ahead;
                }
            }
        }
    memcpy(st->summary, orig, ns * sizeof *orig);
    free(orig);
    free(seq);
    free(longer);
    sim_free(&x);
}

Test(host_longer, the_longer_orders_decide_as_the_short_one_with_copies)
{
    const char *interleaved[] = {"model.name=llama3-8b", "cluster.topology=dgx-h100", "cluster.num_gpus=4",
                                 "model.pipeline_model_parallel_size=4", "model.virtual_pipeline_model_parallel_size=2",
                                 "train.global_batch_size=32", "model.seq_length=2048", NULL};
    const char *one_f_one_b[] = {"model.name=llama3-8b", "cluster.topology=dgx-h100", "cluster.num_gpus=4",
                                 "model.pipeline_model_parallel_size=4", "train.global_batch_size=32",
                                 "model.seq_length=2048", NULL};
    const char *moe[] = {"model.name=qwen3-30b-a3b", "cluster.topology=dgx-h100", "cluster.num_gpus=16",
                         "model.expert_model_parallel_size=8", "model.moe_token_dispatcher_type=alltoall",
                         "model.pipeline_model_parallel_size=2", "model.virtual_pipeline_model_parallel_size=2",
                         "model.num_layers=8", "train.global_batch_size=64", "train.micro_batch_size=1",
                         "model.seq_length=2048", NULL};
    tally t = {0};
    check_case(interleaved, 24, &t);
    check_case(one_f_one_b, 20, &t);
    check_case(moe, 24, &t);
    cr_assert_gt(t.ahead, 0, "no longer order had its host ahead");
    cr_assert_gt(t.behind, 0, "no longer order had its host behind");
    cr_assert_gt(t.differ, 0, "no longer order decided otherwise than the short one");
}
