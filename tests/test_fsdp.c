/* Megatron-FSDP (megatron-features.md C.1): the keys and their rules, the
 * static memory of each sharding strategy against its closed form
 * (HSDP / HFSDP included), ZeRO-3's per-unit gathers and reduce-scatters
 * in every microbatch, optim as the distributed optimizer, and the
 * sharding strategy ignored without use_megatron_fsdp. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "cli_run.h"
#include "memory.h"
#include "net.h"
#include "scratch.h"
#include "sim_run.h"

/* Llama 3 8B cut to 4 layers, TP 2 on 16 H100s: DP 8, 2 microbatches. */
#define BASE "model.name=llama3-8b", "cluster.topology=dgx-h100", "cluster.num_gpus=16", \
             "model.num_layers=4", "model.tensor_model_parallel_size=2", "train.global_batch_size=16"
#define BASE_CLI "run model.name=llama3-8b cluster.topology=dgx-h100 cluster.num_gpus=16 model.num_layers=4 " \
                 "model.tensor_model_parallel_size=2 train.global_batch_size=16"
#define FSDP "ddp.use_megatron_fsdp=true"

/* The shape's parameters on one GPU (TP 2), from the model's sizes:
 * h 4096, 32 heads and 8 groups of 128, GLU F 14336, RMSNorm, vocab
 * 128256 (a multiple of 128 x TP already). */
static const double H = 4096, T = 2;
static double layer_params(void)
{
    double qkv = H * (32 * 128 + 2 * 8 * 128), proj = 32 * 128 * H, fc1 = H * 2 * 14336, fc2 = 14336 * H;
    return (qkv + proj + fc1 + fc2) / T + 2 * H; /* two norms, replicated */
}
static double embedding_params(void) { return H * 128256 / T; }
/* Outside the units: the untied output layer and the final norm. */
static double other_params(void) { return H * 128256 / T + H; }

static void expect_close(double got, double want, const char *what)
{
    cr_expect(fabs(got - want) <= 1e-9 * want, "%s: %.6f, want %.6f", what, got, want);
}

/* Static bytes of stage 0 for one set of keys (after BASE). */
static void static_mem(const char *const *extra, stage_static_mem *out, strategy_t *s_out)
{
    const char *kv[32] = {BASE};
    int n = 6;
    for (; *extra; extra++)
        kv[n++] = *extra;
    kv[n] = NULL;
    sim x;
    sim_run(&x, kv);
    memory_static(&x.in, &x.s, 0, out);
    if (s_out)
        *s_out = x.s;
    sim_free(&x);
}

/* w, g, o: bytes per GPU of weights, gradients (fp32) and optimizer state
 * with d ranks sharding units' weights (dw) and gradients (dg) and the
 * optimizer state (do_), plus `buffer` unsharded unit parameters. */
static void expect_mem(const char *const *extra, double dw, double dg, double do_, double buffer, const char *what)
{
    stage_static_mem sm;
    static_mem(extra, &sm, NULL);
    const double L = layer_params(), E = embedding_params(), N = other_params();
    const double units = 4 * L + E, all = units + N;
    char label[160];
    snprintf(label, sizeof label, "%s weights", what);
    expect_close(sm.weights_bytes, 2 * (N + units / dw) + (dw > 1 ? 2 * buffer : 0), label);
    snprintf(label, sizeof label, "%s gradients", what);
    expect_close(sm.gradients_bytes, 4 * (N + units / dg) + (dg > 1 ? 4 * buffer : 0), label);
    snprintf(label, sizeof label, "%s optimizer", what);
    expect_close(sm.optimizer_bytes, 12 * all / do_, label);
}

Test(fsdp, static_memory_per_strategy_is_the_closed_form)
{
    const double L = layer_params(), E = embedding_params();
    /* no_shard is DDP: nothing sharded. */
    expect_mem((const char *[]){FSDP, "ddp.data_parallel_sharding_strategy=no_shard", NULL}, 1, 1, 1, 0, "no_shard");
    /* optim (ZeRO-1): the optimizer state over DP 8. */
    expect_mem((const char *[]){FSDP, "ddp.data_parallel_sharding_strategy=optim", NULL}, 1, 1, 8, 0, "optim");
    /* optim_grads (ZeRO-2): + the units' gradients, and two units'
     * unsharded gradients in flight (the two largest: embedding + layer). */
    expect_mem((const char *[]){FSDP, "ddp.data_parallel_sharding_strategy=optim_grads", NULL}, 1, 8, 8, E + L,
               "optim_grads");
    /* optim_grads_params (ZeRO-3): + the units' weights; the buffers hold
     * gathered weights and gradients. */
    expect_mem((const char *[]){FSDP, "ddp.data_parallel_sharding_strategy=optim_grads_params", NULL}, 8, 8, 8, E + L,
               "optim_grads_params");
    /* The double buffer: two units of the most common size (a layer). */
    expect_mem((const char *[]){FSDP, "ddp.data_parallel_sharding_strategy=optim_grads_params",
                                "ddp.fsdp_double_buffer=true", NULL},
               8, 8, 8, 2 * L, "optim_grads_params, double buffer");
}

Test(fsdp, hsdp_and_hfsdp_memory)
{
    /* Two optimizer instances: the shards span DP 8 / 2 = 4 ranks. */
    const char *hsdp[] = {FSDP, "ddp.data_parallel_sharding_strategy=optim_grads_params",
                          "ddp.fsdp_double_buffer=true", "ddp.num_distributed_optimizer_instances=2", NULL};
    expect_mem(hsdp, 4, 4, 4, 2 * layer_params(), "HSDP");
    /* HFSDP: Opt / (DPin x DPout) + (Grad + W) / DPin. */
    const char *hfsdp[] = {FSDP, "ddp.data_parallel_sharding_strategy=optim_grads_params",
                           "ddp.fsdp_double_buffer=true", "ddp.num_distributed_optimizer_instances=2",
                           "ddp.outer_dp_sharding_strategy=optim", NULL};
    expect_mem(hfsdp, 4, 4, 8, 2 * layer_params(), "HFSDP");
    strategy_t s;
    stage_static_mem sm;
    static_mem(hfsdp, &sm, &s);
    cr_expect_eq(s.dp_inner, 4);
    cr_expect_eq(s.dp_outer, 2);
    cr_expect(s.hfsdp);
    /* The plain distributed optimizer with instances: its state over the
     * inner group only. */
    expect_mem((const char *[]){"ddp.use_distributed_optimizer=true", "ddp.num_distributed_optimizer_instances=4",
                                NULL},
               1, 1, 2, 0, "distributed optimizer, 4 instances");
}

/* MoE: dense parameters shard over DP x CP (16), routed experts over
 * expert-DP (16 / EP 8 = 2); Mixtral cut to 2 layers, TP 1. */
Test(fsdp, experts_shard_over_expert_dp)
{
    const char *kv[] = {"model.name=mixtral-8x7b", "cluster.topology=dgx-h100", "cluster.num_gpus=16",
                        "model.num_layers=2", "model.tensor_model_parallel_size=1", "model.pipeline_model_parallel_size=1",
                        "model.expert_model_parallel_size=8", "train.global_batch_size=16", FSDP,
                        "ddp.data_parallel_sharding_strategy=optim_grads_params", "ddp.fsdp_double_buffer=true", NULL};
    sim x;
    sim_run(&x, kv);
    cr_assert_eq(x.s.dp_inner, 16);
    cr_assert_eq(x.s.edp_inner, 2);
    stage_static_mem sm;
    memory_static(&x.in, &x.s, 0, &sm);
    const double h = 4096, N = h * 32000 + h, emb = h * 32000; /* output layer + final norm; embedding */
    const double dense = sm.dense_params, expert = sm.expert_params;
    const double sharded = N + (dense - N) / 16 + expert / 2;
    const double buffer = (dense - N - emb) + expert; /* two layers' worth, the mode */
    expect_close(sm.weights_bytes, 2 * sharded + 2 * buffer, "weights");
    expect_close(sm.gradients_bytes, 4 * sharded + 4 * buffer, "gradients");
    expect_close(sm.optimizer_bytes, 12 * (dense / 16 + expert / 2), "optimizer");
    cr_expect_gt(expert, 0);
    sim_free(&x);
}

/* Every task of the step named `name`, per microbatch of stage `stage`
 * (counts[mb]) and their durations in order. */
static size_t tasks_named(const step_t *st, const char *name, int64_t stage, int counts[], sim_time_ps *dur, size_t cap)
{
    const engine_t *e = step_engine(st);
    size_t n = 0;
    for (size_t t = 0; t < eng_num_tasks(e); t++) {
        step_task_info info;
        step_task_describe(st, (eng_task)t, &info);
        if (info.stage != stage || strcmp(info.name, name) != 0)
            continue;
        cr_assert_eq(info.stream, STREAM_DP, "%s on the DP stream", name);
        if (info.microbatch >= 0)
            counts[info.microbatch]++;
        if (n < cap)
            dur[n] = eng_task_end(e, (eng_task)t) - eng_task_start(e, (eng_task)t);
        n++;
    }
    return n;
}

static sim_time_ps gather_ps(const sim *x, double bytes)
{
    return time_from_s(net_collective_worst_s(&x->in.cluster, &x->s.shard_places[SHARD_DENSE_INNER], COLL_ALL_GATHER,
                                              bytes));
}

/* ZeRO-3 on PP 2 (DP 4): stage 0 holds the embedding and 2 layers (3
 * units), stage 1 two layers; 4 microbatches.  Each unit is gathered before its
 * forward and before its backward in every microbatch, its gradients
 * reduce-scattered after its backward; a gather moves the unit's
 * parameters at 2 bytes (1 with fp8_param_gather). */
static void check_gathers(const char *recompute, const char *precision, double bytes_per_param)
{
    const char *kv[] = {BASE, "model.pipeline_model_parallel_size=2", FSDP,
                        "ddp.data_parallel_sharding_strategy=optim_grads_params", recompute, precision, NULL};
    sim a, b;
    sim_run(&a, kv);
    sim_rerun_every_kernel(&a, &b);
    /* The passes stand as one task each in the step and give the step of
     * every kernel a task. */
    cr_expect_eq(step_result_get(a.st)->step_time_s, step_result_get(b.st)->step_time_s);
    const int units[2] = {3, 2};
    for (int64_t r = 0; r < 2; r++) {
        int ag[4] = {0}, rs[4] = {0};
        sim_time_ps dur[32], rs_dur[32];
        size_t n = tasks_named(b.st, "fsdp_ag", r, ag, dur, 32);
        tasks_named(b.st, "fsdp_rs", r, rs, rs_dur, 32);
        cr_expect_eq(n, (size_t)(4 * 2 * units[r]), "stage %lld: %zu gathers", (long long)r, n);
        for (int mb = 0; mb < 4; mb++) {
            cr_expect_eq(ag[mb], 2 * units[r], "stage %lld microbatch %d: %d gathers", (long long)r, mb, ag[mb]);
            cr_expect_eq(rs[mb], units[r], "stage %lld microbatch %d: %d reduce-scatters", (long long)r, mb, rs[mb]);
        }
        /* Stage 1's gathers are layers'; stage 0's forward begins with the
         * embedding's and its backward ends with it. */
        sim_time_ps layer = gather_ps(&b, bytes_per_param * layer_params());
        sim_time_ps emb = gather_ps(&b, bytes_per_param * embedding_params());
        cr_expect_eq(dur[r == 0 ? 1 : 0], layer, "stage %lld: a layer's gather", (long long)r);
        if (r == 0)
            cr_expect_eq(dur[0], emb, "the embedding's gather");
    }
    sim_free(&a);
    step_destroy(b.st);
}

Test(fsdp, zero3_gathers_each_unit_twice_per_microbatch)
{
    check_gathers("model.recompute_granularity=none", "mixed_precision=bf16", 2.0);
}

Test(fsdp, zero3_recomputed_unit_is_gathered_once_for_recompute_and_backward)
{
    check_gathers("model.recompute_granularity=full", "mixed_precision=bf16", 2.0);
}

Test(fsdp, fp8_param_gather_halves_the_gathered_bytes)
{
    check_gathers("mixed_precision.fp8_param_gather=true", "mixed_precision=fp8", 1.0);
}

static double shard_s(const sim *x, strategy_shard_group g, coll_kind k, double bytes)
{
    return net_collective_worst_s(&x->in.cluster, &x->s.shard_places[g], k, bytes);
}

/* Once per step, with the chunk's bucket: the gradients outside the units
 * (output layer, final norm) reduce-scattered over the inner group, this
 * rank's shard of all of them all-reduced over the instances (HSDP) or
 * reduce-scattered there and all-gathered back after the step (HFSDP). */
static void check_outer(bool hfsdp)
{
    const char *kv[] = {BASE, FSDP, "ddp.data_parallel_sharding_strategy=optim_grads_params",
                        "ddp.num_distributed_optimizer_instances=2",
                        hfsdp ? "ddp.outer_dp_sharding_strategy=optim" : "ddp.outer_dp_sharding_strategy=no_shard",
                        NULL};
    sim x;
    sim_run_graph(&x, kv);
    const double N = other_params(), W = 4 * layer_params() + embedding_params() + N;
    const double shard = W / 4; /* DP 8 over 2 instances */
    int none[1] = {0};
    sim_time_ps rs[4], ag[4];
    cr_expect_eq(tasks_named(x.st, "dp_rs", 0, none, rs, 4), 1u, "one outer reduction a step");
    cr_expect_eq(tasks_named(x.st, "dp_ag", 0, none, ag, 4), 1u, "one gather a step");
    coll_kind outer = hfsdp ? COLL_REDUCE_SCATTER : COLL_ALL_REDUCE;
    cr_expect_eq(rs[0], time_from_s(shard_s(&x, SHARD_DENSE_INNER, COLL_REDUCE_SCATTER, 4 * N) +
                                    shard_s(&x, SHARD_DENSE_OUTER, outer, 4 * shard)));
    double gather = shard_s(&x, SHARD_DENSE_INNER, COLL_ALL_GATHER, 2 * N);
    if (hfsdp)
        gather += shard_s(&x, SHARD_DENSE_OUTER, COLL_ALL_GATHER, 2 * shard);
    cr_expect_eq(ag[0], time_from_s(gather));
    cr_expect_eq(x.s.shard_places[SHARD_DENSE_OUTER].span[0].size, 2);
    cr_expect_eq(x.s.shard_places[SHARD_DENSE_INNER].span[0].size, 4);
    sim_free(&x);
}

Test(fsdp, hsdp_all_reduces_across_instances_once_a_step)
{
    check_outer(false);
}

Test(fsdp, hfsdp_reduce_scatters_and_gathers_across_instances_once_a_step)
{
    check_outer(true);
}

Test(fsdp, zero2_reduces_every_backward_and_never_gathers_per_unit)
{
    const char *kv[] = {BASE, FSDP, "ddp.data_parallel_sharding_strategy=optim_grads", NULL};
    sim a, b;
    sim_run(&a, kv);
    sim_rerun_every_kernel(&a, &b);
    int ag[2] = {0, 0}, rs[2] = {0, 0};
    sim_time_ps dur[8];
    cr_expect_eq(tasks_named(b.st, "fsdp_ag", 0, ag, dur, 8), 0u);
    cr_expect_eq(tasks_named(b.st, "fsdp_rs", 0, rs, dur, 8), 10u);
    cr_expect_eq(rs[0], 5);
    cr_expect_eq(rs[1], 5);
    /* A layer's gradients at 4 bytes (grad_reduce_in_fp32). */
    sim_time_ps rs_ps = time_from_s(net_collective_worst_s(&b.in.cluster, &b.s.shard_places[SHARD_DENSE_INNER],
                                                           COLL_REDUCE_SCATTER, 4.0 * layer_params()));
    cr_expect_eq(dur[0], rs_ps);
    cr_expect_eq(step_result_get(a.st)->step_time_s, step_result_get(b.st)->step_time_s);
    sim_free(&a);
    step_destroy(b.st);
}

Test(fsdp, optim_is_the_distributed_optimizer)
{
    const char *dist[] = {BASE, "model.pipeline_model_parallel_size=2", "ddp.use_distributed_optimizer=true",
                          "ddp.overlap_grad_reduce=true", "ddp.overlap_param_gather=true", NULL};
    const char *optim[] = {BASE, "model.pipeline_model_parallel_size=2", FSDP,
                           "ddp.data_parallel_sharding_strategy=optim", "ddp.overlap_grad_reduce=true",
                           "ddp.overlap_param_gather=true", NULL};
    sim a, b;
    sim_run(&a, dist);
    sim_run(&b, optim);
    const step_result *ra = step_result_get(a.st), *rb = step_result_get(b.st);
    cr_expect_eq(ra->step_time_s, rb->step_time_s);
    cr_expect_eq(ra->peak_bytes, rb->peak_bytes);
    cr_expect_eq(ra->exposed_s[STREAM_DP], rb->exposed_s[STREAM_DP]);
    cr_expect_eq(ra->tasks, rb->tasks);
    for (int64_t r = 0; r < 2; r++) {
        stage_static_mem ma, mb;
        memory_static(&a.in, &a.s, r, &ma);
        memory_static(&b.in, &b.s, r, &mb);
        cr_expect_eq(ma.weights_bytes, mb.weights_bytes);
        cr_expect_eq(ma.gradients_bytes, mb.gradients_bytes);
        cr_expect_eq(ma.optimizer_bytes, mb.optimizer_bytes);
    }
    sim_free(&a);
    sim_free(&b);
}

/* Megatron Bridge writes the strategy for every run; without
 * use_megatron_fsdp Megatron never reads it, nor the other FSDP keys. */
Test(fsdp, sharding_strategy_alone_changes_nothing)
{
    static result plain, with;
    run(&plain, BASE_CLI " ddp.use_distributed_optimizer=true --format json");
    run(&with, BASE_CLI " ddp.use_distributed_optimizer=true --format json"
                        " ddp.data_parallel_sharding_strategy=optim_grads_params ddp.outer_dp_sharding_strategy=optim"
                        " ddp.fsdp_double_buffer=true ddp.suggested_communication_unit_size=800000000");
    cr_assert_eq(plain.status, 0, "%s", plain.out);
    cr_assert_eq(with.status, 0, "%s", with.out);
    cr_expect_str_eq(with.out, plain.out);
    /* ... while with it the same strategy changes the step. */
    run(&with, BASE_CLI " ddp.use_distributed_optimizer=true --format json " FSDP
                        " ddp.data_parallel_sharding_strategy=optim_grads_params");
    cr_assert_eq(with.status, 0, "%s", with.out);
    cr_expect_str_neq(with.out, plain.out);
}

/* optim_grads forces overlap_grad_reduce, optim_grads_params both
 * overlaps, as Megatron does: setting them off changes nothing. */
Test(fsdp, strategies_force_the_overlaps)
{
    const char *on[] = {BASE, FSDP, "ddp.data_parallel_sharding_strategy=optim_grads_params", NULL};
    const char *off[] = {BASE, FSDP, "ddp.data_parallel_sharding_strategy=optim_grads_params",
                         "ddp.overlap_grad_reduce=false", "ddp.overlap_param_gather=false",
                         "ddp.use_distributed_optimizer=false", NULL};
    sim a, b;
    sim_run(&a, on);
    sim_run(&b, off);
    cr_expect(b.in.ddp.overlap_grad_reduce && b.in.ddp.overlap_param_gather && b.in.ddp.use_distributed_optimizer);
    cr_expect_eq(step_result_get(a.st)->step_time_s, step_result_get(b.st)->step_time_s);
    sim_free(&a);
    sim_free(&b);
}

Test(fsdp, refusals_name_the_key)
{
    static result r;
    run(&r, BASE_CLI " " FSDP " ddp.data_parallel_sharding_strategy=optim_grads_params"
                     " ddp.num_distributed_optimizer_instances=3");
    expect_refusal(&r, "instances not dividing dp*cp", "ddp.num_distributed_optimizer_instances",
                   "must be a multiple of the instances");
    run(&r, BASE_CLI " ddp.num_distributed_optimizer_instances=2");
    expect_refusal(&r, "instances without a sharded optimizer", "ddp.num_distributed_optimizer_instances",
                   "sharded optimizer");
    run(&r, BASE_CLI " " FSDP " ddp.data_parallel_sharding_strategy=no_shard ddp.num_distributed_optimizer_instances=2");
    expect_refusal(&r, "instances with no_shard", "ddp.num_distributed_optimizer_instances", "sharded optimizer");
    run(&r, BASE_CLI " " FSDP " ddp.data_parallel_sharding_strategy=optim_grads_params ddp.outer_dp_sharding_strategy=optim");
    expect_refusal(&r, "HFSDP with one instance", "ddp.outer_dp_sharding_strategy", "instances > 1");
    run(&r, BASE_CLI " " FSDP " ddp.data_parallel_sharding_strategy=optim_grads_params mixed_precision.fp8_param_gather=true");
    expect_refusal(&r, "fp8 gather in bf16", "mixed_precision.fp8_param_gather", "FP8 recipe");
    /* With the backward split, a unit's reduce-scatter follows its W
     * (tests/test_pipeline_schedules.c checks where): it runs. */
    run(&r, BASE_CLI " " FSDP " ddp.data_parallel_sharding_strategy=optim_grads model.pipeline_model_parallel_size=2"
                     " sim.pipeline_schedule=zb-h1");
    cr_expect_eq(r.status, 0, "ZeRO-2 with a split backward: %s", r.out);
    run(&r, BASE_CLI " mixed_precision=fp8 mixed_precision.fp8_param_gather=true");
    expect_refusal(&r, "fp8 gather without a gather", "mixed_precision.fp8_param_gather", "all-gather");
    run(&r, BASE_CLI " " FSDP " ddp.data_parallel_sharding_strategy=zero3");
    expect_refusal(&r, "unknown strategy", "ddp.data_parallel_sharding_strategy", "optim_grads_params");
    run(&r, BASE_CLI " ddp.outer_dp_sharding_strategy=optim_grads");
    expect_refusal(&r, "outer strategy beyond optim", "ddp.outer_dp_sharding_strategy", "no_shard");
    run(&r, BASE_CLI " ddp.num_distributed_optimizer_instances=0");
    expect_refusal(&r, "zero instances", "ddp.num_distributed_optimizer_instances", NULL);
    run(&r, BASE_CLI " " FSDP " model.cuda_graph_impl=transformer_engine");
    expect_refusal(&r, "TE graphs with FSDP", "model.cuda_graph_impl", "ddp.use_megatron_fsdp");
    run(&r, BASE_CLI " ddp.suggested_communication_unit_size=-1");
    expect_refusal(&r, "negative unit size", "ddp.suggested_communication_unit_size", NULL);
}

/* search --fsdp: the distributed-optimizer dimension also takes ZeRO-2 and
 * ZeRO-3 (a dp_sharding column in the CSV); their memory and time lower
 * bounds stay below what they simulate to, so pruning drops nothing that
 * fits. */
static int column(const char *header, const char *name)
{
    char buf[8192];
    size_t n = strlen(header);
    cr_assert_lt(n, sizeof buf);
    memcpy(buf, header, n + 1);
    int k = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",\n", &save); t; t = strtok_r(NULL, ",\n", &save), k++)
        if (!strcmp(t, name))
            return k;
    return -1;
}

static void field(const char *line, int k, char *out, size_t len)
{
    const char *p = line;
    for (int i = 0; i < k && p; i++)
        p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL;
    cr_assert_not_null(p);
    size_t n = strcspn(p, ",\n");
    snprintf(out, len, "%.*s", (int)(n < len ? n : len - 1), p);
}

#define SEARCH_CLI "search model.name=llama3-8b cluster.topology=dgx-h100 cluster.num_gpus=16 model.num_layers=4 " \
                   "train.global_batch_size=16 model.tensor_model_parallel_size=1 model.context_parallel_size=1 " \
                   "train.micro_batch_size=1 model.recompute_granularity=none"

Test(fsdp, search_tries_zero2_and_zero3_when_asked, .init = make_dir, .fini = remove_dir)
{
    static result r;
    runf(&r, SEARCH_CLI " --fsdp --exhaustive --top 20 --out %s/s.csv", dir);
    cr_assert_eq(r.status, 0, "%s", r.out);
    char path[128];
    snprintf(path, sizeof path, "%s/s.csv", dir);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    char line[8192];
    cr_assert_not_null(fgets(line, sizeof line, f));
    int ks = column(line, "dp_sharding"), kt = column(line, "step_time_s"), ktl = column(line, "time_lower_bound_s");
    int kp = column(line, "peak_bytes"), kpl = column(line, "peak_lower_bound_bytes");
    cr_assert(ks >= 0 && kt >= 0 && ktl >= 0 && kp >= 0 && kpl >= 0, "header: %s", line);
    int seen[4] = {0};
    while (fgets(line, sizeof line, f)) {
        char v[64], a[64], b[64];
        field(line, ks, v, sizeof v);
        for (int z = 2; z <= 3; z++) {
            char name[8];
            snprintf(name, sizeof name, "fsdp%d", z);
            if (strcmp(v, name) != 0)
                continue;
            seen[z]++;
            field(line, ktl, a, sizeof a);
            field(line, kt, b, sizeof b);
            cr_expect(strtod(a, NULL) <= strtod(b, NULL), "time bound %s above the step %s: %s", a, b, line);
            field(line, kpl, a, sizeof a);
            field(line, kp, b, sizeof b);
            cr_expect(strtod(a, NULL) <= strtod(b, NULL), "memory bound %s above the peak %s: %s", a, b, line);
        }
    }
    fclose(f);
    cr_expect(seen[2] > 0 && seen[3] > 0, "fsdp2 %d, fsdp3 %d rows", seen[2], seen[3]);
    /* Without --fsdp: neither the candidates nor the column. */
    runf(&r, SEARCH_CLI " --top 20 --out %s/plain.csv", dir);
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_expect(!strstr(r.out, "fsdp"), "%s", r.out);
    snprintf(path, sizeof path, "%s/plain.csv", dir);
    f = fopen(path, "r");
    cr_assert_not_null(f);
    cr_assert_not_null(fgets(line, sizeof line, f));
    fclose(f);
    cr_expect_eq(column(line, "dp_sharding"), -1);
}
