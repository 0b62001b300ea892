/* Nemotron-3 Nano's layers as parsim builds them, against the figures they
 * come from: the SSD scan on Blackwell at mamba_ssm's Triton rate, whose
 * share of a Nano forward Megatron-LM PR #5829 bounds (kernels.md §5: the
 * CuTe DSL scan, 1.44x faster, made Nano prefill 5-7% faster). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "compute.h"
#include "sim_run.h"
#include "streams.h"
#include "wl_kept.h"

/* The forward pass of the one stage of a run (overrides kv, NULL-terminated),
 * every op kept; *w is the caller's to destroy. */
static const wl_pass *forward_of(sim *x, workload_t **w, const char *const *kv)
{
    sim_run(x, kv);
    *w = wl_kept(&x->in, &x->s);
    return &(*w)->stages[0].chunks[0].fwd;
}

/* Summed duration (ps) of the compute-stream ops named `name`, or of all
 * the others when `others`, leaving out the logits and the loss. */
static double compute_ps(const wl_pass *p, const char *name, bool others)
{
    double t = 0;
    for (int32_t i = 0; i < p->n_ops; i++) {
        const wl_op *op = &p->ops[i];
        if (op->stream != STREAM_COMPUTE || strcmp(op->name, "logits") == 0 ||
            strcmp(op->name, "cross_entropy") == 0)
            continue;
        if ((strcmp(op->name, name) == 0) != others)
            t += (double)op->duration_ps;
    }
    return t;
}

/* A gain i from making a part 1.44x faster means the part took
 * r = i / (1 - (1 + i) / 1.44) of the rest of the time. */
static double share_of_gain(double i)
{
    return i / (1.0 - (1.0 + i) / 1.44);
}

/* One 8192-token Nano forward in bf16 on one Blackwell GPU, as prefill runs
 * it: the scan takes the share of the other kernels that PR #5829's 5-7%
 * implies.  At the Hopper share of peak (0.14) it took about 0.024. */
Test(nano_ops, blackwell_scan_share_matches_the_cute_dsl_gain)
{
    static const char *const topo[] = {"cluster.topology=dgx-b200", "cluster.topology=gb200-nvl72"};
    for (size_t g = 0; g < sizeof topo / sizeof topo[0]; g++) {
        const char *kv[] = {"model.name=nemotron-3-nano", topo[g], "cluster.num_gpus=1",
                            "model.seq_length=8192", "train.global_batch_size=1", "mixed_precision=bf16", NULL};
        sim x;
        workload_t *w = NULL;
        const wl_pass *f = forward_of(&x, &w, kv);
        double scan = compute_ps(f, "mamba_ssd_scan", false), rest = compute_ps(f, "mamba_ssd_scan", true);
        cr_assert_gt(scan, 0.0, "%s: no scan in the forward", topo[g]);
        double r = scan / rest;
        cr_expect_geq(r, share_of_gain(0.05), "%s: scan %.4f of the rest, below a 5%% gain's", topo[g], r);
        cr_expect_leq(r, share_of_gain(0.07), "%s: scan %.4f of the rest, above a 7%% gain's", topo[g], r);
        workload_destroy(w);
        sim_free(&x);
    }
}

/* A GB300 Nano row's scan (MBS 4 of 8192 tokens, H 64 x P 64, G 8 x N 128,
 * chunk 128): the forward op runs its flops at the table's share of the bf16
 * peak, the backward twice them. */
Test(nano_ops, gb300_scan_op_runs_at_the_tables_rate)
{
    const char *kv[] = {"model.name=nemotron-3-nano", "cluster.topology=gb300-nvl72", "cluster.num_gpus=8",
                        "model.expert_model_parallel_size=8", "model.seq_length=8192", "train.micro_batch_size=4",
                        "train.global_batch_size=32", "mixed_precision=mxfp8", NULL};
    sim x;
    workload_t *w = NULL;
    const wl_pass *f = forward_of(&x, &w, kv);
    const cluster_spec *c = &x.in.cluster;
    cr_assert_float_eq(c->compute.kernels.ssd_efficiency, 0.015, 1e-12);
    double T = 4.0 * 8192.0, H = 64, P = 64, G = 8, N = 128, Q = 128;
    double flops = T * (H * P * (Q + 4.0 * N) + Q * G * N);
    double rate = c->gpu.peak_bf16_flops_per_s * 0.015 * c->compute.sustained_fraction;
    const wl_pass *b = &w->stages[0].chunks[0].bwd;
    const wl_op *fw = NULL, *bw = NULL;
    for (int32_t i = 0; i < f->n_ops && !fw; i++)
        fw = strcmp(f->ops[i].name, "mamba_ssd_scan") == 0 ? &f->ops[i] : NULL;
    for (int32_t i = 0; i < b->n_ops && !bw; i++)
        bw = strcmp(b->ops[i].name, "mamba_ssd_scan_bwd") == 0 ? &b->ops[i] : NULL;
    cr_assert(fw && bw, "the scan ops are missing");
    double over = c->compute.kernel_overhead_s;
    cr_expect_float_eq((double)fw->duration_ps * 1e-12, flops / rate + over, 1e-8, "forward %g s",
                       (double)fw->duration_ps * 1e-12);
    cr_expect_float_eq((double)bw->duration_ps * 1e-12, 2.0 * flops / rate + over, 1e-8, "backward %g s",
                       (double)bw->duration_ps * 1e-12);
    workload_destroy(w);
    sim_free(&x);
}
