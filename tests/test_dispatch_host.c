/* The alltoall dispatcher's small collectives and sorts (megatron-formulas.md
 * §4.3): dropless, the all-gather of the tokens per expert before the D2H
 * copy of the split sizes that the host syncs on, and the routing
 * probabilities' all-to-all beside the tokens' (and its gradient's in the
 * backward); with several local experts the sort of the received rows
 * into expert order and back.  The flex dispatcher fuses them; drop-and-pad
 * needs no counts. */
#include <criterion/criterion.h>
#include <string.h>

#include "compute.h"
#include "net.h"
#include "sim_run.h"
#include "streams.h"
#include "wl_kept.h"

/* Qwen3-30B-A3B on 8 B200s, EP 8, two MoE layers, one microbatch of 4096
 * tokens; `extra` (NULL or one KEY=VALUE) changes the dispatcher. */
typedef struct built {
    sim x;
    workload_t *w;
} built;

static void build(built *b, const char *extra, const char *extra2)
{
    const char *kv[] = {"model.name=qwen3-30b-a3b", "cluster.topology=dgx-b200", "cluster.num_gpus=8",
                        "model.expert_model_parallel_size=8", "model.num_layers=2", "model.seq_length=4096",
                        "train.global_batch_size=8", "mixed_precision=bf16",
                        "model.moe_token_dispatcher_type=alltoall", extra, extra2, NULL};
    if (!extra)
        kv[9] = NULL;
    else if (!extra2)
        kv[10] = NULL;
    sim_run(&b->x, kv);
    b->w = wl_kept(&b->x.in, &b->x.s);
}

static void built_free(built *b)
{
    workload_destroy(b->w);
    sim_free(&b->x);
}

static const wl_pass *pass(const built *b, bool bwd)
{
    const wl_chunk *c = &b->w->stages[0].chunks[0];
    return bwd ? &c->bwd : &c->fwd;
}

/* Index of the n-th op named `name` in p (from 0), or -1. */
static int32_t nth(const wl_pass *p, const char *name, int n)
{
    for (int32_t i = 0; i < p->n_ops; i++)
        if (strcmp(p->ops[i].name, name) == 0 && n-- == 0)
            return i;
    return -1;
}

static int count(const wl_pass *p, const char *name)
{
    int k = 0;
    while (nth(p, name, k) >= 0)
        k++;
    return k;
}

/* Does op i wait, directly or through the ops before it, for op j? */
static bool waits_for(const wl_pass *p, int32_t i, int32_t j)
{
    if (i == j)
        return true;
    for (int d = 0; d < 2; d++)
        if (p->ops[i].dep_back[d] && i - p->ops[i].dep_back[d] >= j && waits_for(p, i - p->ops[i].dep_back[d], j))
            return true;
    return false;
}

Test(dispatch_host, dropless_layer_gathers_counts_before_its_sync)
{
    built b;
    build(&b, NULL, NULL);
    const wl_pass *f = pass(&b, false);
    const cluster_spec *c = &b.x.in.cluster;
    const strategy_t *s = &b.x.s;
    cr_assert_eq(count(f, "ep_count_ag"), 2, "one count all-gather per MoE layer");
    cr_assert_eq(count(f, "ep_dispatch_probs"), 2, "one probs all-to-all per MoE layer");
    cr_assert_eq(count(pass(&b, true), "ep_dispatch_probs_bwd"), 2, "and its gradient's");
    cr_assert_eq(count(f, "d2h_sync"), 2, "one host sync per dispatch");
    double ag = net_collective_worst_s(c, &s->places[GROUP_EP], COLL_ALL_GATHER, 128.0 * 8.0 * 8.0);
    double probs = net_collective_worst_s(c, &s->places[GROUP_EP], COLL_ALL_TO_ALL, 4096.0 * 8.0 * 4.0);
    for (int l = 0; l < 2; l++) {
        int32_t g = nth(f, "ep_count_ag", l), y = nth(f, "d2h_sync", l), pr = nth(f, "ep_dispatch_probs", l),
                d = nth(f, "ep_dispatch", l);
        cr_assert(g >= 0 && y > g && pr > y && d > pr, "layer %d: all-gather %d, sync %d, probs %d, dispatch %d", l,
                  g, y, pr, d);
        cr_expect(waits_for(f, y, g), "layer %d: the sync waits for the counts' all-gather", l);
        cr_expect_eq(f->ops[g].stream, STREAM_COMPUTE, "a synchronous collective holds the compute stream");
        cr_expect_eq(f->ops[g].launches, 0u, "its launch is a framework op of the preprocess");
        cr_expect_eq(f->ops[pr].stream, STREAM_EP);
        cr_expect_float_eq((double)f->ops[g].duration_ps * 1e-12, ag, 1e-11);
        cr_expect_float_eq((double)f->ops[pr].duration_ps * 1e-12, probs, 1e-11);
    }
    built_free(&b);
}

Test(dispatch_host, flex_fuses_them_and_drop_and_pad_needs_no_counts)
{
    built b;
    build(&b, "model.moe_token_dispatcher_type=flex", NULL);
    cr_expect_eq(count(pass(&b, false), "ep_count_ag"), 0);
    cr_expect_eq(count(pass(&b, false), "ep_dispatch_probs"), 0);
    cr_expect_eq(count(pass(&b, true), "ep_dispatch_probs_bwd"), 0);
    built_free(&b);
    build(&b, "model.moe_expert_capacity_factor=1", "model.moe_pad_expert_input_to_capacity=true");
    cr_expect_eq(count(pass(&b, false), "ep_count_ag"), 0, "static shapes: no counts to gather");
    cr_expect_eq(count(pass(&b, false), "ep_dispatch_probs"), 2);
    built_free(&b);
}

/* 16 local experts: the received rows (4096 tokens x top-8, hidden 2048,
 * bf16) are sorted into expert order before the experts, with their fp32
 * probabilities, and back after them; the backward sorts the gradients
 * both ways. */
Test(dispatch_host, received_rows_are_sorted_by_local_expert_and_back)
{
    built b;
    build(&b, NULL, NULL);
    const wl_pass *f = pass(&b, false), *bw = pass(&b, true);
    const cluster_spec *c = &b.x.in.cluster;
    double rows = 4096.0 * 8.0, w = 2048.0;
    static const struct {
        const char *name;
        bool bwd;
        double bytes;
    } sorts[] = {
        {"sort_chunks", false, 4.0 * 4096.0 * 8.0 * 2048.0 + 8.0 * 4096.0 * 8.0},
        {"sort_chunks_back", false, 4.0 * 4096.0 * 8.0 * 2048.0},
        {"sort_chunks_back_bwd", true, 4.0 * 4096.0 * 8.0 * 2048.0},
        {"sort_chunks_bwd", true, 4.0 * 4096.0 * 8.0 * 2048.0 + 8.0 * 4096.0 * 8.0},
    };
    cr_assert_float_eq(sorts[1].bytes, 4.0 * rows * w, 1.0);
    for (size_t k = 0; k < sizeof sorts / sizeof sorts[0]; k++) {
        const wl_pass *p = sorts[k].bwd ? bw : f;
        cr_assert_eq(count(p, sorts[k].name), 2, "%s: one per MoE layer", sorts[k].name);
        const wl_op *op = &p->ops[nth(p, sorts[k].name, 0)];
        cr_expect_float_eq((double)op->duration_ps * 1e-12, compute_memory_s(c, sorts[k].bytes), 1e-11, "%s",
                           sorts[k].name);
        cr_expect_eq(op->launches, 0u, "%s: its launches are framework ops of the experts", sorts[k].name);
    }
    int32_t d = nth(f, "ep_dispatch", 0), s0 = nth(f, "sort_chunks", 0), fc1 = nth(f, "expert_fc1", 0),
            fc2 = nth(f, "expert_fc2", 0), back = nth(f, "sort_chunks_back", 0), cb = nth(f, "ep_combine", 0);
    cr_expect(d < s0 && s0 < fc1 && fc2 < back && back < cb, "dispatch %d, sort %d, fc1 %d, fc2 %d, back %d, combine %d",
              d, s0, fc1, fc2, back, cb);
    built_free(&b);
    build(&b, "model.moe_token_dispatcher_type=flex", NULL);
    cr_expect_eq(count(pass(&b, false), "sort_chunks"), 0, "flex permutes inside its kernels");
    built_free(&b);
}
