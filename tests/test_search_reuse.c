/* What search reuses across layouts changes no figure:
 *   - step_run_reuse on a lent workload with a cache of pass summaries
 *     shared over many layouts (first filled, then hit) gives step_run's
 *     result byte for byte, stages too;
 *   - every candidate of an exhaustive search (one workload for its bound
 *     and its step, a per-worker cache) has the time bound and the step
 *     figures that computing it alone gives, bit for bit, with --jobs 1
 *     and 2. */
#include <criterion/criterion.h>
#include <string.h>

#include "config.h"
#include "search.h"
#include "search_bound.h"
#include "sim_run.h"
#include "step.h"
#include "wl_cache.h"
#include "workload.h"

static void same_result(const step_result *x, const step_result *y, const char *what)
{
    step_result xs = *x, ys = *y;
    xs.stages = ys.stages = NULL;
    cr_assert_eq(memcmp(&xs, &ys, sizeof xs), 0, "%s: step result differs", what);
    cr_assert_eq(x->n_stages, y->n_stages);
    for (int64_t r = 0; r < x->n_stages; r++)
        cr_assert_eq(memcmp(&x->stages[r], &y->stages[r], sizeof x->stages[r]), 0, "%s: stage %lld differs", what,
                     (long long)r);
}

#define DENSE "model.name=llama3-8b cluster.topology=dgx-h100 cluster.num_gpus=32 model.seq_length=4096 " \
              "train.global_batch_size=64 "

static const char *const layouts[] = {
    DENSE "model.tensor_model_parallel_size=2 model.pipeline_model_parallel_size=2",
    DENSE "model.tensor_model_parallel_size=2 model.pipeline_model_parallel_size=2 ddp.use_distributed_optimizer=false",
    DENSE "model.tensor_model_parallel_size=2 model.pipeline_model_parallel_size=4",
    DENSE "model.tensor_model_parallel_size=2 model.pipeline_model_parallel_size=4 "
          "model.virtual_pipeline_model_parallel_size=2",
    DENSE "model.tensor_model_parallel_size=2 model.pipeline_model_parallel_size=4 sim.pipeline_schedule=zb-h1",
    DENSE "model.tensor_model_parallel_size=4 model.pipeline_model_parallel_size=2 model.context_parallel_size=2",
    DENSE "model.tensor_model_parallel_size=4 model.pipeline_model_parallel_size=2 model.context_parallel_size=2 "
          "model.cp_comm_type=a2a",
    DENSE "model.tensor_model_parallel_size=2 model.pipeline_model_parallel_size=2 train.micro_batch_size=2 "
          "model.recompute_granularity=full",
    "model.name=mixtral-8x7b cluster.topology=dgx-h100 cluster.num_gpus=32 train.global_batch_size=32 "
    "model.moe_token_dispatcher_type=alltoall model.tensor_model_parallel_size=2 "
    "model.pipeline_model_parallel_size=2 model.expert_model_parallel_size=8",
};
enum { N_LAYOUTS = sizeof layouts / sizeof *layouts };

Test(search_reuse, lent_workload_and_kept_summaries_change_nothing, .timeout = 120)
{
    wl_cache *cache = wl_cache_create(WL_CACHE_BYTES);
    cr_assert_not_null(cache);
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < N_LAYOUTS; i++) {
            run_inputs in;
            strategy_t s;
            sim_resolve_args(layouts[i], &in, &s);
            sim_err err;
            sim_err_clear(&err);
            step_t *alone = NULL, *reused = NULL;
            cr_assert_eq(step_run(&alone, &in, &s, &err), SIM_OK, "%s: %s", layouts[i], err.msg);
            workload_t *wl = NULL;
            cr_assert_eq(workload_build(&wl, &in, &s, &err), SIM_OK, "%s", err.msg);
            cr_assert_eq(step_run_reuse(&reused, &in, &s, wl, cache, &err), SIM_OK, "%s", err.msg);
            same_result(step_result_get(alone), step_result_get(reused), layouts[i]);
            step_destroy(reused);
            /* The bound from the lent workload and the cache is the bound. */
            double lb0, c0, lb1, c1;
            cr_assert_eq(search_time_bound(&in, &s, &lb0, &c0, &err), SIM_OK, "%s", err.msg);
            cr_assert_eq(search_time_bound_of(wl, &s, cache, &lb1, &c1, &err), SIM_OK, "%s", err.msg);
            cr_assert(memcmp(&lb0, &lb1, sizeof lb0) == 0 && memcmp(&c0, &c1, sizeof c0) == 0, "%s: bound differs",
                      layouts[i]);
            workload_destroy(wl);
            wl_cache_forget(cache);
            /* Its own workload, the cache kept: still the same. */
            cr_assert_eq(step_run_reuse(&reused, &in, &s, NULL, cache, &err), SIM_OK, "%s", err.msg);
            same_result(step_result_get(alone), step_result_get(reused), layouts[i]);
            step_destroy(reused);
            wl_cache_forget(cache);
            step_destroy(alone);
        }
    wl_cache_stats st;
    wl_cache_stats_get(cache, &st);
    cr_assert_gt(st.hits, 0); /* the second round found what the first kept */
    wl_cache_destroy(cache);
}

static void resolve(const char *args, run_inputs *in)
{
    strategy_t s;
    sim_resolve_args(args, in, &s);
    in->ddp.overlap_grad_reduce = true;
    in->ddp.overlap_param_gather = true;
}

static void each_candidate_as_alone(const char *args, int jobs)
{
    run_inputs in;
    resolve(args, &in);
    search_opts o;
    search_opts_default(&o);
    o.exhaustive = true;
    o.jobs = jobs;
    search_result r;
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(search_run(&in, &o, &r, &err), SIM_OK, "%s", err.msg);
    cr_assert_gt(r.n_cands, 4, "%s: %zu candidates", args, r.n_cands);
    for (size_t i = 0; i < r.n_cands; i++) {
        const search_cand *c = &r.cands[i];
        run_inputs ci;
        strategy_t s;
        cr_assert_eq(search_cand_inputs(&in, c, &ci, &s, &err), SIM_OK, "%s", err.msg);
        double lb, comp;
        cr_assert_eq(search_time_bound(&ci, &s, &lb, &comp, &err), SIM_OK, "%s", err.msg);
        cr_assert(lb == c->time_lb_s && comp == c->compute_s, "#%zu: bound %g vs %g", i, lb, c->time_lb_s);
        step_t *st = NULL;
        cr_assert_eq(step_run(&st, &ci, &s, &err), SIM_OK, "%s", err.msg);
        const step_result *x = step_result_get(st);
        cr_assert(x->step_time_s == c->step_time_s && x->tokens_per_s_per_gpu == c->tokens_per_s_per_gpu &&
                      x->mfu == c->mfu && x->peak_bytes == c->peak_bytes &&
                      x->bubble_fraction == c->bubble_fraction && x->exposed_total_s == c->exposed_total_s,
                  "#%zu of %s differs from simulating it alone", i, args);
        for (int k = 0; k < STREAM_KINDS; k++)
            cr_assert(!streams_is_comm((stream_kind)k) || x->exposed_s[k] == c->exposed_s[k]);
        step_destroy(st);
    }
    search_result_free(&r);
}

Test(search_reuse, exhaustive_candidates_are_as_simulated_alone, .timeout = 240)
{
    each_candidate_as_alone("model.name=llama3-8b cluster.topology=dgx-h100 cluster.num_gpus=16 "
                            "model.seq_length=8192 train.global_batch_size=32 model.num_layers=8",
                            1);
    each_candidate_as_alone("model.name=llama3-8b cluster.topology=dgx-h100 cluster.num_gpus=16 "
                            "model.seq_length=8192 train.global_batch_size=32 model.num_layers=8",
                            2);
}
