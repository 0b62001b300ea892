/* The host cost of Mamba layers: a Mamba mixer is a module of its own
 * (cluster.host.framework_ops.mamba, CUDA graph scope mamba), its chunked
 * SSD scan is several kernel launches (cluster.host.ssd_launches_fwd /
 * _bwd) and the fused path's conv backward two.  The expected host time is
 * computed here from the counts and the layer's kernels. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli_run.h"
#include "sim_run.h"
#include "streams.h"

/* Nemotron-3 Nano's Mamba mixer alone (pattern of n M layers), bf16 on one
 * GPU: no casts, no TP collectives, two microbatches. */
#define NANO_MAMBA(pattern)                                                                                  \
    "model.name=nemotron-3-nano", "cluster.topology=dgx-h100", "cluster.num_gpus=1",                          \
        "model.hybrid_layer_pattern=" pattern, "model.mtp_num_layers=0", "train.global_batch_size=2",          \
        "model.seq_length=1024", "mixed_precision=bf16"

/* Kernels parsim costs in one Mamba layer beside the SSD scan: forward
 * norm, in_proj, conv1d, gated norm, out_proj, bias-dropout-add; backward
 * bias-dropout-add, out_proj dgrad and wgrad, gated norm, conv1d (its
 * recompute and backward: two launches on the fused path), in_proj dgrad
 * and wgrad, norm. */
#define FWD_KERNELS 6.0
#define BWD_KERNELS 9.0

static double host_s(const sim *x)
{
    return step_result_get(x->st)->comm_s[STREAM_HOST];
}

static double host_of(const char *const *kv)
{
    sim x;
    sim_run(&x, kv);
    double t = host_s(&x);
    sim_free(&x);
    return t;
}

/* Host time two more Mamba layers add to the step, against what the counts
 * predict: per layer and microbatch, one op overhead per pass and a launch
 * per kernel and framework op (the backward's framework ops times the
 * autograd factor). */
static void expect_two_layers(const char *const *two, const char *const *four, bool graphed)
{
    sim a, b;
    sim_run(&a, two);
    sim_run(&b, four);
    const host_params *h = &b.in.cluster.host;
    double per_layer;
    if (graphed) {
        per_layer = 2.0 * h->graph_launch_s;
    } else {
        double fw = (double)h->framework_ops[HOST_OPS_MAMBA];
        double launches = FWD_KERNELS + (double)h->ssd_launches_fwd + BWD_KERNELS + (double)h->ssd_launches_bwd +
                          fw * (1.0 + h->framework_ops_bwd_factor);
        per_layer = 2.0 * h->op_overhead_s + launches * h->launch_s;
    }
    double expect = 2.0 * (double)b.s.num_microbatches * per_layer;
    double got = host_s(&b) - host_s(&a);
    cr_expect(fabs(got - expect) <= 1e-9 * expect + 1e-12, "%s: two Mamba layers add %.9f s of host, counts say %.9f s",
              graphed ? "graphed" : "eager", got, expect);
    sim_free(&a);
    sim_free(&b);
}

Test(mamba_host, host_time_per_layer_is_the_counts_times_launch_plus_overhead)
{
    sim x;
    sim_run(&x, (const char *const[]){NANO_MAMBA("MM"), NULL});
    const host_params *h = &x.in.cluster.host;
    cr_expect_gt(h->framework_ops[HOST_OPS_MAMBA], 0, "the host file counts the mixer's framework ops");
    cr_expect_gt(h->ssd_launches_fwd, 1, "the SSD scan forward is several kernels");
    cr_expect_gt(h->ssd_launches_bwd, h->ssd_launches_fwd, "its backward more");
    sim_free(&x);
    expect_two_layers((const char *const[]){NANO_MAMBA("MM"), NULL}, (const char *const[]){NANO_MAMBA("MMMM"), NULL},
                      false);
    /* and with other counts: the keys drive it */
    expect_two_layers((const char *const[]){NANO_MAMBA("MM"), "cluster.host.framework_ops.mamba=100",
                                            "cluster.host.ssd_launches_fwd=9", "cluster.host.ssd_launches_bwd=30", NULL},
                      (const char *const[]){NANO_MAMBA("MMMM"), "cluster.host.framework_ops.mamba=100",
                                            "cluster.host.ssd_launches_fwd=9", "cluster.host.ssd_launches_bwd=30", NULL},
                      false);
}

Test(mamba_host, graphed_mamba_scope_is_one_graph_launch)
{
#define TE_MAMBA "model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=[mamba]"
    expect_two_layers((const char *const[]){NANO_MAMBA("MM"), TE_MAMBA, NULL},
                      (const char *const[]){NANO_MAMBA("MMMM"), TE_MAMBA, NULL}, true);
    /* the whole layer graphed ([] scope) holds the mixer too */
    expect_two_layers((const char *const[]){NANO_MAMBA("MM"), "model.cuda_graph_impl=local", NULL},
                      (const char *const[]){NANO_MAMBA("MMMM"), "model.cuda_graph_impl=local", NULL}, true);
    /* attention's scope is not the mixer's: it stays eager */
    expect_two_layers(
        (const char *const[]){NANO_MAMBA("MM"), "model.cuda_graph_impl=transformer_engine",
                              "model.cuda_graph_scope=[attn]", NULL},
        (const char *const[]){NANO_MAMBA("MMMM"), "model.cuda_graph_impl=transformer_engine",
                              "model.cuda_graph_scope=[attn]", NULL},
        false);
#undef TE_MAMBA
}

/* Graphing the mixer shortens a host-bound step: the framework ops cost
 * nothing in the graph. */
Test(mamba_host, framework_ops_cost_only_eager)
{
    const char *const eager0[] = {NANO_MAMBA("MMMM"), "cluster.host.framework_ops.mamba=0", NULL};
    const char *const eager1[] = {NANO_MAMBA("MMMM"), "cluster.host.framework_ops.mamba=200", NULL};
    const char *const graph0[] = {NANO_MAMBA("MMMM"), "cluster.host.framework_ops.mamba=0",
                                  "model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=[mamba]", NULL};
    const char *const graph1[] = {NANO_MAMBA("MMMM"), "cluster.host.framework_ops.mamba=200",
                                  "model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=[mamba]", NULL};
    double a = host_of(eager0), b = host_of(eager1), c = host_of(graph0), d = host_of(graph1);
    cr_expect_gt(b, a);
    cr_expect_eq(c, d, "graphed: %.9f / %.9f s", c, d);
    cr_expect_lt(c, a);
}

/* Counts out of range are bad input: exit 2, one line naming the key. */
Test(mamba_host, bad_counts_name_the_key)
{
    static const struct {
        const char *kv, *key;
    } cases[] = {
        {"cluster.host.ssd_launches_fwd=0", "cluster.host.ssd_launches_fwd"},
        {"cluster.host.ssd_launches_bwd=-3", "cluster.host.ssd_launches_bwd"},
        {"cluster.host.framework_ops.mamba=-1", "cluster.host.framework_ops.mamba"},
        {"cluster.host.framework_ops.mamba=1e9", "cluster.host.framework_ops.mamba"},
        {"cluster.host.ssd_launches_fwd=five", "cluster.host.ssd_launches_fwd"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        result r;
        char args[512];
        snprintf(args, sizeof args,
                 "run model.name=nemotron-3-nano cluster.topology=dgx-h100 cluster.num_gpus=1 "
                 "model.hybrid_layer_pattern=MM model.mtp_num_layers=0 train.global_batch_size=2 %s",
                 cases[i].kv);
        run(&r, args);
        expect_refusal(&r, cases[i].kv, cases[i].key, NULL);
    }
}
