/* The host cost of small-expert MoE layers: a grouped expert GEMM (and the
 * quantize of its inputs) is issued once per local expert, and every
 * module call adds its framework ops (cluster.host.framework_ops.*) at
 * launch_us each; graphed modules replay without them.  The expected host
 * time is computed here from the counts and the layer's structure. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_run.h"
#include "model.h"
#include "sim_run.h"
#include "streams.h"

/* Qwen3-30B-A3B (128 experts of 768, every layer MoE) at a short sequence
 * with an fp8 recipe (the expert inputs are quantized). */
#define QWEN(ep)                                                                                             \
    "model.name=qwen3-30b-a3b", "cluster.topology=dgx-h100", "cluster.num_gpus=8",                           \
        "model.expert_model_parallel_size=" #ep, "model.moe_token_dispatcher_type=alltoall",                 \
        "train.global_batch_size=16", "train.micro_batch_size=1", "model.seq_length=1024", "mixed_precision=fp8"
#define PER_EXPERT_OFF                                                                                       \
    "cluster.host.grouped_gemm_per_expert=false", "cluster.host.grouped_quantize_per_expert=false",          \
        "cluster.host.framework_ops.moe_per_expert=0"

static double host_s(const sim *x)
{
    return step_result_get(x->st)->comm_s[STREAM_HOST];
}

static double moe_layers(const sim *x)
{
    double n = 0;
    for (int64_t l = 0; l < x->in.model.num_layers; l++)
        n += model_layer_is_moe(&x->in.model, l) ? 1.0 : 0.0;
    return n;
}

/* Host time per step that issuing per local expert adds, with E local
 * experts: per microbatch and MoE layer, G = 6 grouped GEMMs (fc1 and fc2
 * forward, the dgrad and wgrad of each backward) and Q = 4 quantizes of
 * their inputs (before fc1 and fc2, before each dgrad) each launch E - 1
 * times more, and the expert module's per-expert framework ops run once in
 * the forward and bwd_factor times in the backward. */
static double per_expert_host_s(const sim *x, double experts)
{
    const host_params *h = &x->in.cluster.host;
    const double G = 6.0, Q = 4.0;
    double per_layer = (experts - 1.0) * (G + Q) +
                       experts * (double)h->framework_ops[HOST_OPS_MOE_PER_EXPERT] * (1.0 + h->framework_ops_bwd_factor);
    return (double)x->s.num_microbatches * moe_layers(x) * per_layer * h->launch_s;
}

Test(host_moe, host_time_grows_with_local_experts_as_launches_predict)
{
    const char *on16[] = {QWEN(8), NULL}, *off16[] = {QWEN(8), PER_EXPERT_OFF, NULL};
    const char *on32[] = {QWEN(4), NULL}, *off32[] = {QWEN(4), PER_EXPERT_OFF, NULL};
    const char *const *cases[2][2] = {{on16, off16}, {on32, off32}};
    double got[2];
    for (int i = 0; i < 2; i++) {
        sim on, off;
        sim_run(&on, cases[i][0]);
        sim_run(&off, cases[i][1]);
        double experts = (double)on.in.model.num_moe_experts / (double)on.s.ep;
        cr_assert_eq(experts, i == 0 ? 16.0 : 32.0);
        cr_assert(on.in.cluster.host.grouped_gemm_per_expert && on.in.cluster.host.grouped_quantize_per_expert,
                  "the topology issues grouped GEMMs per expert");
        got[i] = host_s(&on) - host_s(&off);
        double expect = per_expert_host_s(&on, experts);
        cr_assert_gt(expect, 0.0);
        cr_assert(fabs(got[i] - expect) <= 1e-9 * expect, "%g local experts: host %.9f s more, launches predict %.9f s",
                  experts, got[i], expect);
        /* the GPU waits for the host's issue: the step does not get shorter */
        cr_assert_geq(step_result_get(on.st)->step_time_s, step_result_get(off.st)->step_time_s);
        sim_free(&on);
        sim_free(&off);
    }
    cr_assert_gt(got[1], 1.9 * got[0], "32 experts %.6f s, 16 experts %.6f s", got[1], got[0]);
}

/* A module's framework ops cost launch_us each, forward and (x bwd_factor)
 * backward, per layer and microbatch; a module in a CUDA graph replays
 * without them. */
Test(host_moe, framework_ops_cost_launch_each_unless_graphed)
{
    const char *base[] = {QWEN(8), "cluster.host.framework_ops.attn=0", NULL};
    const char *more[] = {QWEN(8), "cluster.host.framework_ops.attn=40", NULL};
    const char *gbase[] = {QWEN(8), "model.cuda_graph_impl=local", "cluster.host.framework_ops.attn=0", NULL};
    const char *gmore[] = {QWEN(8), "model.cuda_graph_impl=local", "cluster.host.framework_ops.attn=40", NULL};
    sim a, b, c, d;
    sim_run(&a, base);
    sim_run(&b, more);
    sim_run(&c, gbase);
    sim_run(&d, gmore);
    const host_params *h = &b.in.cluster.host;
    double expect = (double)b.s.num_microbatches * (double)b.in.model.num_layers * 40.0 *
                    (1.0 + h->framework_ops_bwd_factor) * h->launch_s;
    double got = host_s(&b) - host_s(&a);
    cr_assert(fabs(got - expect) <= 1e-9 * expect, "attention framework ops: %.9f s, expected %.9f s", got, expect);
    cr_assert_eq(host_s(&d), host_s(&c), "graphed attention: %.9f s vs %.9f s", host_s(&d), host_s(&c));
    sim_free(&a);
    sim_free(&b);
    sim_free(&c);
    sim_free(&d);
}

/* A count out of range is bad input, on the command line and in a file:
 * exit 2 and one line naming the key (and the file and line). */
Test(host_moe, count_out_of_range_is_exit_2_naming_the_key)
{
    static const struct {
        const char *kv, *key;
    } cases[] = {
        {"cluster.host.framework_ops.moe_router=100001", "cluster.host.framework_ops.moe_router"},
        {"cluster.host.framework_ops.moe_per_expert=-1", "cluster.host.framework_ops.moe_per_expert"},
        {"cluster.host.framework_ops.attn=2.5", "cluster.host.framework_ops.attn"},
        {"cluster.host.framework_ops_bwd_factor=1e9", "cluster.host.framework_ops_bwd_factor"},
        {"cluster.host.grouped_gemm_per_expert=3", "cluster.host.grouped_gemm_per_expert"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[512];
        snprintf(args, sizeof args, "run configs/mixtral-8x7b-h100x64.cfg %s", cases[i].kv);
        result r;
        run(&r, args);
        expect_refusal(&r, cases[i].kv, cases[i].key, NULL);
    }
    char dir[] = "/tmp/parsim-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[64];
    snprintf(path, sizeof path, "%s/host.cfg", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("model: { name = \"mixtral-8x7b\"; };\ntrain: { global_batch_size = 8; };\ncluster: {\n  topology = \"dgx-h100\";\n  num_gpus = 8;\n"
          "  host: { framework_ops: { moe_experts = 200000; }; };\n};\n",
          f);
    fclose(f);
    char args[128];
    snprintf(args, sizeof args, "run '%s' model.expert_model_parallel_size=8", path);
    result r;
    run(&r, args);
    unlink(path);
    rmdir(dir);
    cr_assert_eq(r.status, 2, "status %d: %s", r.status, r.out);
    cr_assert(strstr(r.out, "host.cfg:6") && strstr(r.out, "cluster.host.framework_ops.moe_experts") &&
                  strstr(r.out, "100000"),
              "%s", r.out);
    cr_assert_eq(strchr(r.out, '\n'), r.out + strlen(r.out) - 1, "one line: %s", r.out);
}
