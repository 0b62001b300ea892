/* A stage whose host is provably ahead of its GPU at every pass stands
 * each pass as its GPU span alone (step.c's host_ahead); one whose host
 * can fall behind keeps the host's stand-ins.  Across host costs from far
 * below the kernels to far above them, both come out as the step with
 * every kernel a task, and both kinds of stage occur. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sim_run.h"
#include "streams.h"

#define MAX_KV 24

/* Runs kv plus launch_us (and, when off, no host cost at all). */
static void run_with(sim *x, const char *const *kv, double launch_us, bool off)
{
    const char *all[MAX_KV];
    char launch[64];
    int n = 0;
    for (; kv[n]; n++)
        all[n] = kv[n];
    snprintf(launch, sizeof launch, "cluster.host.launch_us=%g", launch_us);
    all[n++] = launch;
    if (off) {
        all[n++] = "cluster.host.op_overhead_us=0";
        all[n++] = "cluster.host.sync_us=0";
        all[n++] = "cluster.host.optimizer_us=0";
    }
    all[n] = NULL;
    sim_run(x, all);
}

/* Two-level against every kernel, field by field: what two levels give
 * exactly (not the pass spans behind bubble and busy, where a stand-in's
 * GPU span begins where its first module may and a pass of every kernel
 * at its first kernel, nor exposed communication, where a stand-in hides
 * the DP and PP transfers beside it); and against the two-level graph
 * with every host stand-in a task (sim.plain_graph: the host's issue not
 * folded into release times), every figure; returns that graph's task
 * count (the stand-ins' tasks tell whether the host was ahead). */
static uint64_t check_exact(const char *const *kv, double launch_us)
{
    sim a, b;
    run_with(&a, kv, launch_us, false);
    sim_rerun_every_kernel(&a, &b);
    const step_result *ra = step_result_get(a.st), *rb = step_result_get(b.st);
    cr_assert_eq(ra->step_time_s, rb->step_time_s, "%s launch %g us: two-level %.12f s, every kernel %.12f s", kv[0],
                 launch_us, ra->step_time_s, rb->step_time_s);
    cr_assert_eq(ra->pipeline_s, rb->pipeline_s, "%s launch %g us", kv[0], launch_us);
    cr_assert_eq(ra->peak_bytes, rb->peak_bytes, "%s launch %g us", kv[0], launch_us);
    for (int64_t r = 0; r < ra->n_stages; r++) {
        cr_assert_eq(ra->stages[r].activations_peak_bytes, rb->stages[r].activations_peak_bytes);
        cr_assert_eq(ra->stages[r].inflight_microbatches_max, rb->stages[r].inflight_microbatches_max);
    }
    double ha = ra->comm_s[STREAM_HOST], hb = rb->comm_s[STREAM_HOST];
    cr_assert(fabs(ha - hb) <= 1e-9 * hb, "%s launch %g us: host %.12f s vs %.12f s", kv[0], launch_us, ha, hb);
    sim c = {.in = a.in, .s = a.s};
    c.in.sim.plain_graph = true;
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(step_run(&c.st, &c.in, &c.s, &err), SIM_OK, "%s", err.msg);
    const step_result *rc = step_result_get(c.st);
    cr_assert_eq(ra->step_time_s, rc->step_time_s, "%s launch %g us: folded host", kv[0], launch_us);
    cr_assert_eq(ra->bubble_fraction, rc->bubble_fraction, "%s launch %g us: folded host", kv[0], launch_us);
    cr_assert_eq(ra->exposed_total_s, rc->exposed_total_s, "%s launch %g us: folded host", kv[0], launch_us);
    for (int64_t r = 0; r < ra->n_stages; r++)
        cr_assert_eq(memcmp(&ra->stages[r], &rc->stages[r], sizeof ra->stages[r]), 0, "%s launch %g us: stage %lld",
                     kv[0], launch_us, (long long)r);
    cr_assert_leq(ra->tasks, rc->tasks);
    uint64_t tasks = rc->tasks;
    step_destroy(c.st);
    step_destroy(b.st);
    sim_free(&a);
    return tasks;
}

/* Counts how many host costs left every stand-in out (as many tasks as
 * without host ops, plus per stage the first lead, the optimizer's sync
 * and issue, in the graph with every stand-in a task) and how many kept
 * some. */
static void sweep_host_costs(const char *const *kv, int *ahead, int *behind)
{
    static const double launch_us[] = {0.5, 5, 20, 60, 80, 100, 120, 150, 300};
    sim off;
    run_with(&off, kv, 0, true);
    sim plain = {.in = off.in, .s = off.s};
    plain.in.sim.plain_graph = true;
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(step_run(&plain.st, &plain.in, &plain.s, &err), SIM_OK, "%s", err.msg);
    uint64_t base = step_result_get(plain.st)->tasks + 3 * (uint64_t)off.s.pp;
    step_destroy(plain.st);
    sim_free(&off);
    for (size_t i = 0; i < sizeof launch_us / sizeof *launch_us; i++) {
        uint64_t tasks = check_exact(kv, launch_us[i]);
        if (tasks <= base)
            ++*ahead;
        else
            ++*behind;
    }
}

Test(host_ahead, exact_whether_the_host_is_ahead_or_not)
{
    const char *moe[] = {"model.name=qwen3-30b-a3b", "cluster.topology=dgx-h100", "cluster.num_gpus=16",
                         "model.expert_model_parallel_size=8", "model.moe_token_dispatcher_type=alltoall",
                         "model.pipeline_model_parallel_size=2", "model.virtual_pipeline_model_parallel_size=2",
                         "model.num_layers=8", "train.global_batch_size=64", "train.micro_batch_size=1",
                         "model.seq_length=2048", NULL};
    const char *dense[] = {"model.name=llama3-8b", "cluster.topology=dgx-h100", "cluster.num_gpus=8",
                           "model.pipeline_model_parallel_size=4", "model.virtual_pipeline_model_parallel_size=2",
                           "train.global_batch_size=16", "model.seq_length=2048", NULL};
    int ahead = 0, behind = 0;
    sweep_host_costs(moe, &ahead, &behind);
    cr_assert_gt(ahead, 0, "the MoE case never left the host's stand-ins out");
    cr_assert_gt(behind, 0, "the MoE case never kept the host's stand-ins");
    ahead = behind = 0;
    sweep_host_costs(dense, &ahead, &behind);
    cr_assert_gt(ahead, 0, "the dense case never left the host's stand-ins out");
    cr_assert_gt(behind, 0, "the dense case never kept the host's stand-ins");
}
