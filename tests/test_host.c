/* The host as a resource of each rank: kernels wait for the host ops that
 * issue them, the host runs ahead while kernels are long and waits for the
 * GPU at an MoE dispatch; CUDA graphs replace a graphed module's launches
 * by one replay; the stream table drives the report columns. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_tree.h>

#include "cli_run.h"
#include "memory.h"
#include "sim_run.h"
#include "streams.h"
#include "workload.h"
#include "wl_kept.h"

/* A small-expert MoE (Qwen3-30B-A3B: 128 experts of 768) at a short
 * sequence: its kernels are short and the host shows. */
#define SMALL_MOE                                                                                            \
    "model.name=qwen3-30b-a3b", "cluster.topology=dgx-h100", "cluster.num_gpus=8",                           \
        "model.expert_model_parallel_size=8", "model.moe_token_dispatcher_type=alltoall",                    \
        "train.global_batch_size=16", "train.micro_batch_size=1", "model.seq_length=1024"
#define SMALL_MOE_ARGS                                                                                       \
    "model.name=qwen3-30b-a3b cluster.topology=dgx-h100 cluster.num_gpus=8 "                                 \
    "model.expert_model_parallel_size=8 model.moe_token_dispatcher_type=alltoall "                           \
    "train.global_batch_size=16 train.micro_batch_size=1 model.seq_length=1024"

static double step_s(const char *const *kv)
{
    sim x;
    sim_run(&x, kv);
    double t = step_result_get(x.st)->step_time_s;
    sim_free(&x);
    return t;
}

/* A slow host lengthens the step of a small-expert MoE; with the whole
 * forward and backward graphed (full_iteration) the launch cost is gone and
 * the step does not move. */
Test(host, slow_host_lengthens_small_moe_but_not_a_graphed_step)
{
    const char *eager[] = {SMALL_MOE, NULL};
    const char *eager_slow[] = {SMALL_MOE, "cluster.host.launch_us=50", NULL};
    const char *graph[] = {SMALL_MOE, "model.cuda_graph_impl=full_iteration", NULL};
    const char *graph_slow[] = {SMALL_MOE, "model.cuda_graph_impl=full_iteration", "cluster.host.launch_us=50", NULL};
    double e = step_s(eager), es = step_s(eager_slow), g = step_s(graph), gs = step_s(graph_slow);
    cr_assert_gt(es, e * 1.01, "eager: %.9f s -> %.9f s with a slow host", e, es);
    cr_assert_eq(gs, g, "graphed: %.9f s -> %.9f s with a slow host", g, gs);
    cr_assert_lt(g, e, "graphs take the launch cost off the eager step");
}

/* The host runs ahead while kernels are long: a dense model with large
 * GEMMs gains far less than its launch time when launches cost nothing. */
Test(host, host_runs_ahead_of_long_kernels)
{
    const char *with[] = {"model.name=llama3-70b", "cluster.topology=dgx-h100", "cluster.num_gpus=8",
                          "model.tensor_model_parallel_size=8", "model.sequence_parallel=true",
                          "train.global_batch_size=8", "model.seq_length=8192", NULL};
    const char *none[] = {"model.name=llama3-70b", "cluster.topology=dgx-h100", "cluster.num_gpus=8",
                          "model.tensor_model_parallel_size=8", "model.sequence_parallel=true",
                          "train.global_batch_size=8", "model.seq_length=8192", "cluster.host.launch_us=0",
                          "cluster.host.op_overhead_us=0", NULL};
    sim a, b;
    sim_run(&a, with);
    sim_run(&b, none);
    const step_result *ra = step_result_get(a.st), *rb = step_result_get(b.st);
    double host = ra->comm_s[STREAM_HOST] - rb->comm_s[STREAM_HOST];
    double gained = ra->step_time_s - rb->step_time_s;
    cr_assert_gt(host, 0.0);
    cr_assert(gained >= 0 && gained < 0.05 * host, "launches %.6f s of host time, step %.6f s longer", host, gained);
    sim_free(&a);
    sim_free(&b);
}

/* Launches (of every op but the host's own: one per kernel, none for a
 * zero-length join, one per local expert for a grouped expert GEMM) that
 * the host issues per step: the unfused templates, once per microbatch. */
static double kernels_per_step(const sim *x)
{
    workload_t *wl = wl_kept(&x->in, &x->s);
    double n = 0;
    for (int64_t r = 0; r < wl->pp; r++)
        for (int64_t c = 0; c < wl->v; c++) {
            const wl_pass *pass[2] = {&wl->stages[r].chunks[c].fwd, &wl->stages[r].chunks[c].bwd};
            for (int k = 0; k < 2; k++)
                for (int32_t i = 0; i < pass[k]->n_ops; i++)
                    if (pass[k]->ops[i].stream != STREAM_HOST)
                        n += pass[k]->ops[i].launches;
        }
    workload_destroy(wl);
    return n * (double)x->s.num_microbatches;
}

static yajl_val json_of(const char *args, char *buf, size_t len)
{
    result r;
    run(&r, args);
    cr_assert_eq(r.status, 0, "%s", r.out);
    char why[256];
    yajl_val v = yajl_tree_parse(r.out, why, sizeof why);
    cr_assert_not_null(v, "%s", why);
    snprintf(buf, len, "%s", r.out);
    return v;
}

static double host_s_of(yajl_val v)
{
    const char *path[] = {"host", "host_s", NULL};
    yajl_val h = yajl_tree_get(v, path, yajl_t_number);
    cr_assert_not_null(h, "no host.host_s in the JSON report");
    return YAJL_GET_DOUBLE(h);
}

/* Host busy time per step without graphs and with full_iteration differs
 * by the launch cost of every kernel the graph replays (module overheads,
 * framework ops, syncs and the replay itself set to zero; the optimizer, outside the
 * graph, costs both the same). */
Test(host, full_iteration_saves_the_launches_of_every_kernel)
{
#define ZERO                                                                                                 \
    "cluster.host.op_overhead_us=0", "cluster.host.sync_us=0", "cluster.host.graph_launch_us=0",              \
        "cluster.host.framework_ops.attn=0", "cluster.host.framework_ops.mlp=0",                               \
        "cluster.host.framework_ops.moe_router=0",                                                             \
        "cluster.host.framework_ops.moe_preprocess=0", "cluster.host.framework_ops.moe_dispatch=0",            \
        "cluster.host.framework_ops.moe_experts=0", "cluster.host.framework_ops.moe_per_expert=0",             \
        "cluster.host.framework_ops.moe_combine=0", "cluster.host.framework_ops.embedding=0",                  \
        "cluster.host.framework_ops.output=0"
    const char *none[] = {SMALL_MOE, ZERO, NULL};
    const char *full[] = {SMALL_MOE, ZERO, "model.cuda_graph_impl=full_iteration", NULL};
    sim a, b;
    sim_run(&a, none);
    sim_run(&b, full);
    double kernels = kernels_per_step(&a);
    double expect = kernels * a.in.cluster.host.launch_s;
    double got = step_result_get(a.st)->comm_s[STREAM_HOST] - step_result_get(b.st)->comm_s[STREAM_HOST];
    cr_assert_gt(kernels, 100.0);
    cr_assert(fabs(got - expect) <= 1e-9 * expect, "host time saved %.9f s, %.0f kernels x launch = %.9f s", got,
              kernels, expect);
    /* The JSON report carries the same figure (host.host_s). */
    static char out[65536];
    yajl_val v = json_of("run " SMALL_MOE_ARGS
                         " cluster.host.op_overhead_us=0 cluster.host.sync_us=0 cluster.host.graph_launch_us=0"
                         " cluster.host.framework_ops.attn=0 cluster.host.framework_ops.mlp=0"
                         " cluster.host.framework_ops.moe_router=0"
                         " cluster.host.framework_ops.moe_preprocess=0 cluster.host.framework_ops.moe_dispatch=0"
                         " cluster.host.framework_ops.moe_experts=0 cluster.host.framework_ops.moe_per_expert=0"
                         " cluster.host.framework_ops.moe_combine=0 cluster.host.framework_ops.embedding=0"
                         " cluster.host.framework_ops.output=0 --format json",
                         out, sizeof out);
    double js = host_s_of(v);
    yajl_tree_free(v);
    double st = step_result_get(a.st)->comm_s[STREAM_HOST];
    cr_assert(fabs(js - st) <= 1e-6 * st, "JSON host_s %.9f, step %.9f", js, st);
    sim_free(&a);
    sim_free(&b);
#undef ZERO
}

/* TE-scoped graphs of attention and the router leave the MoE dispatch and
 * experts eager: less host time than eager, more than the whole step
 * graphed. */
Test(host, te_scopes_leave_the_moe_dispatch_eager)
{
    const char *eager[] = {SMALL_MOE, NULL};
    const char *te[] = {SMALL_MOE, "model.cuda_graph_impl=transformer_engine",
                        "model.cuda_graph_modules=[attn,moe_router,moe_preprocess]", NULL};
    const char *full[] = {SMALL_MOE, "model.cuda_graph_impl=full_iteration", NULL};
    sim a, b, c;
    sim_run(&a, eager);
    sim_run(&b, te);
    sim_run(&c, full);
    double ha = step_result_get(a.st)->comm_s[STREAM_HOST], hb = step_result_get(b.st)->comm_s[STREAM_HOST],
           hc = step_result_get(c.st)->comm_s[STREAM_HOST];
    cr_assert(ha > hb && hb > hc, "host s: eager %.6f, TE scopes %.6f, full iteration %.6f", ha, hb, hc);
    sim_free(&a);
    sim_free(&b);
    sim_free(&c);
}

/* Each pass stands in the step as host lead, GPU span and host rest (and
 * the host's wait for an MoE dispatch); with every kernel a task the step
 * comes out the same, host-bound or not. */
Test(host, two_level_is_exact_with_the_host)
{
    const char *moe[] = {SMALL_MOE, "cluster.host.launch_us=50", NULL};
    const char *pp[] = {"model.name=mixtral-8x7b", "cluster.topology=dgx-h100", "cluster.num_gpus=64",
                        "model.tensor_model_parallel_size=2", "model.sequence_parallel=true",
                        "model.pipeline_model_parallel_size=4", "model.expert_model_parallel_size=8",
                        "model.expert_tensor_parallel_size=1", "model.moe_token_dispatcher_type=alltoall",
                        "train.global_batch_size=64", "model.seq_length=1024", "cluster.host.launch_us=20", NULL};
    const char *const *cases[] = {moe, pp};
    for (int i = 0; i < 2; i++) {
        sim a, b;
        sim_run(&a, cases[i]);
        sim_rerun_every_kernel(&a, &b);
        const step_result *ra = step_result_get(a.st), *rb = step_result_get(b.st);
        cr_assert_eq(ra->step_time_s, rb->step_time_s, "case %d: two-level %.9f s, every kernel %.9f s", i,
                     ra->step_time_s, rb->step_time_s);
        cr_assert(fabs(ra->comm_s[STREAM_HOST] - rb->comm_s[STREAM_HOST]) <= 1e-9 * rb->comm_s[STREAM_HOST]);
        cr_assert_lt(ra->tasks, rb->tasks);
        step_destroy(b.st);
        sim_free(&a);
    }
}

/* The CUDA graph pool adds to the peak: exactly the pool with PP = 1 (one
 * microbatch in flight, so the activations do not move). */
Test(host, graph_pool_adds_to_the_peak)
{
    const char *none[] = {"model.name=llama3-8b", "cluster.topology=dgx-h100", "cluster.num_gpus=8",
                          "train.global_batch_size=16", NULL};
    const char *local[] = {"model.name=llama3-8b", "cluster.topology=dgx-h100", "cluster.num_gpus=8",
                           "train.global_batch_size=16", "model.cuda_graph_impl=local", NULL};
    sim a, b;
    sim_run(&a, none);
    sim_run(&b, local);
    double pool = b.in.cluster.host.graph_pool_bytes;
    cr_assert_gt(pool, 0.0);
    cr_assert_eq(memory_graph_pool_bytes(&a.in, &a.s), 0.0);
    cr_assert_eq(step_result_get(b.st)->peak_bytes - step_result_get(a.st)->peak_bytes, pool);
    strategy_t pp2 = b.s;
    pp2.pp = 2;
    cr_assert_eq(memory_graph_pool_bytes(&b.in, &pp2), b.in.cluster.host.graph_pool_pp_bytes);
    sim_free(&a);
    sim_free(&b);
}

/* Fields of one CSV line (no quoting in these rows). */
static int fields(const char *line, size_t len)
{
    int n = 1;
    for (size_t i = 0; i < len; i++)
        n += line[i] == ',';
    return n;
}

/* The CSV header and row come from the same stream table: equal column
 * counts, and a <key>_s column per communication and host stream, in
 * table order. */
Test(host, stream_table_drives_csv_header_and_rows)
{
    result r;
    run(&r, "run configs/mixtral-8x7b-h100x64.cfg --format csv");
    cr_assert_eq(r.status, 0, "%s", r.out);
    const char *nl = strchr(r.out, '\n');
    cr_assert_not_null(nl);
    const char *row = nl + 1, *end = strchr(row, '\n');
    cr_assert_not_null(end);
    cr_assert_eq(fields(r.out, (size_t)(nl - r.out)), fields(row, (size_t)(end - row)));
    const char *at = r.out;
    int seen = 0;
    for (int k = 0; k < STREAM_KINDS; k++) {
        const stream_desc *d = streams_desc((stream_kind)k);
        char col[64];
        snprintf(col, sizeof col, ",%s_s,", d->key);
        const char *p = strstr(r.out, col);
        if (d->role == STREAM_ROLE_COMM || d->role == STREAM_ROLE_HOST) {
            cr_assert(p != NULL && p < nl, "no column %s", col);
            cr_assert_gt(p, at, "column %s out of table order", col);
            at = p;
            seen++;
        } else {
            cr_assert(p == NULL || p > nl, "stream %s has a column", d->name);
        }
    }
    cr_assert_eq(seen, 7); /* tp, cp, ep, dp, pp, offload, host */
}

/* Megatron's graph rules are bad input: exit 2 and one line naming the key. */
Test(host, graph_rules_are_exit_2_naming_the_key)
{
    static const struct {
        const char *args, *key, *rule;
    } cases[] = {
        {"model.cuda_graph_impl=transformer_engine model.recompute_granularity=full", "model.cuda_graph_impl",
         "full recompute"},
        {"model.cuda_graph_impl=transformer_engine model.cuda_graph_modules=[moe_preprocess]",
         "model.cuda_graph_modules", "moe_preprocess requires moe_router"},
        {"model.cuda_graph_impl=transformer_engine model.cuda_graph_scope=[moe_router,moe_preprocess,moe]",
         "model.cuda_graph_scope", "drop-and-pad"},
        {"model.cuda_graph_impl=transformer_engine model.cuda_graph_scope=[full_iteration]",
         "model.cuda_graph_scope", "full_iteration"},
        {"model.cuda_graph_impl=local model.cuda_graph_modules=[attn,full_iteration]", "model.cuda_graph_modules",
         "stands alone"},
        {"model.cuda_graph_impl=sometimes", "model.cuda_graph_impl", "sometimes"},
        {"model.cuda_graph_modules=[attn,ffn]", "model.cuda_graph_modules", "ffn"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[512];
        snprintf(args, sizeof args, "run configs/mixtral-8x7b-h100x64.cfg %s", cases[i].args);
        result r;
        run(&r, args);
        expect_refusal(&r, cases[i].args, cases[i].key, cases[i].rule);
    }
    /* The legacy spelling local + [full_iteration] is full_iteration. */
    const char *legacy[] = {SMALL_MOE, "model.cuda_graph_impl=local", "model.cuda_graph_scope=[full_iteration]",
                            NULL};
    const char *full[] = {SMALL_MOE, "model.cuda_graph_impl=full_iteration", NULL};
    cr_assert_eq(step_s(legacy), step_s(full));
}
