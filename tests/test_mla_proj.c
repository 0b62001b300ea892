/* Multi-latent attention's projections (Megatron Core's MLASelfAttention):
 * the down projections h -> q_lora_rank and h -> kv_lora_rank + rope dim,
 * replicated over TP, and the column-parallel up projections, whose FLOPs
 * are megatron-formulas.md §1's MLA term (q_lora_rank (h + a (qk + rope))
 * + kv_lora_rank (h + a (qk + v)) per token); the mla_up_proj recompute
 * adds the up projections to the backward; a GQA model keeps its one qkv. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "strategy.h"
#include "workload.h"
#include "sim_run.h"

typedef struct pass_info {
    double fwd_flops, bwd_flops;
    int qkv, q_down, kv_down, q_up, kv_up; /* forward ops of these names */
} pass_info;

static int count(const wl_pass *p, const char *name)
{
    int n = 0;
    for (int32_t i = 0; i < p->n_ops; i++)
        n += strcmp(p->ops[i].name, name) == 0;
    return n;
}

/* The first stage's first chunk, built from "KEY=VALUE ..." as the command
 * line resolves it. */
static pass_info build(const char *args, run_inputs *in_out)
{
    sim_err err;
    sim_err_clear(&err);
    run_inputs in;
    strategy_t s;
    sim_resolve_args(args, &in, &s);
    in.sim.keep_ops = true;
    workload_t *w = NULL;
    cr_assert_eq(workload_build(&w, &in, &s, &err), SIM_OK, "%s", err.msg);
    const wl_chunk *ch = &w->stages[0].chunks[0];
    pass_info r = {ch->fwd.flops, ch->bwd.flops, count(&ch->fwd, "qkv"), count(&ch->fwd, "q_down"),
                   count(&ch->fwd, "kv_down"), count(&ch->fwd, "q_up"), count(&ch->fwd, "kv_up")};
    if (in_out)
        *in_out = in;
    workload_destroy(w);
    return r;
}

/* DeepSeek-V3's attention on two layers (dense MLPs, no MTP), one sequence
 * of 4096 tokens; TP and SP from `par`. */
#define DSV3 "model.name=deepseek-v3 model.num_layers=2 model.moe_layer_freq=[0,0] model.mtp_num_layers=0 " \
             "cluster.topology=dgx-h100 cluster.num_gpus=8 train.global_batch_size=8 mixed_precision=bf16 "

static void expect_close(double got, double want, const char *what)
{
    cr_expect(fabs(got - want) <= 1e-9 * fabs(want), "%s: %.6e flops, the MLA term says %.6e", what, got, want);
}

/* Changing q_lora_rank (kv_lora_rank) changes the forward FLOPs of a rank
 * by 2 x its change x (T_sp h + T a (qk + rope) / t) per layer (kv: (qk + v)
 * and the kv latent's own width): the down projection on this rank's
 * tokens, the up projection's share of the heads. */
static void expect_lora_terms(const char *par, double t, bool sp)
{
    char a[1024], b[1024], c[1024];
    snprintf(a, sizeof a, DSV3 "%s", par);
    snprintf(b, sizeof b, DSV3 "%s model.q_lora_rank=1024", par);
    snprintf(c, sizeof c, DSV3 "%s model.kv_lora_rank=256", par);
    run_inputs in;
    pass_info pa = build(a, &in), pb = build(b, NULL), pc = build(c, NULL);
    const model_spec *m = &in.model;
    double T = (double)m->seq_length, T_sp = sp ? T / t : T, h = (double)m->hidden_size;
    double heads = (double)m->num_attention_heads;
    double L = 2.0;
    double dq = (double)m->q_lora_rank - 1024.0, dkv = (double)m->kv_lora_rank - 256.0;
    cr_assert_gt(dq, 0.0);
    cr_assert_gt(dkv, 0.0);
    expect_close(pa.fwd_flops - pb.fwd_flops,
                 L * 2.0 * dq * (T_sp * h + T * heads * (double)(m->qk_head_dim + m->qk_pos_emb_head_dim) / t),
                 "q_lora_rank");
    expect_close(pa.fwd_flops - pc.fwd_flops,
                 L * 2.0 * dkv * (T_sp * h + T * heads * (double)(m->qk_head_dim + m->v_head_dim) / t), "kv_lora_rank");
    /* the backward runs dgrad and wgrad of each: twice */
    expect_close(pa.bwd_flops - pb.bwd_flops, 2.0 * (pa.fwd_flops - pb.fwd_flops), "q_lora_rank backward");
    cr_expect_eq(pa.qkv, 0, "no fused qkv for MLA");
    cr_expect_eq(pa.q_down, 2);
    cr_expect_eq(pa.kv_down, 2);
    cr_expect_eq(pa.q_up, 2);
    cr_expect_eq(pa.kv_up, 2);
}

Test(mla_proj, flops_are_the_mla_term_tp1)
{
    expect_lora_terms("", 1.0, false);
}

Test(mla_proj, flops_are_the_mla_term_tp2)
{
    /* without SP the down projections run on every token on each rank */
    expect_lora_terms("model.tensor_model_parallel_size=2", 2.0, false);
}

Test(mla_proj, flops_are_the_mla_term_tp2_sp)
{
    expect_lora_terms("model.tensor_model_parallel_size=2 model.sequence_parallel=true", 2.0, true);
}

/* mla_up_proj drops the up projections' outputs: the backward runs them
 * again, forward FLOPs unchanged. */
Test(mla_proj, mla_up_proj_recompute_adds_the_up_projections)
{
    run_inputs in;
    pass_info a = build(DSV3 "model.recompute_granularity=selective model.recompute_modules=[core_attn]", &in);
    pass_info b = build(DSV3 "model.recompute_granularity=selective model.recompute_modules=[core_attn,mla_up_proj]", NULL);
    const model_spec *m = &in.model;
    double T = (double)m->seq_length, heads = (double)m->num_attention_heads;
    double up = 2.0 * T * heads *
                ((double)m->q_lora_rank * (double)(m->qk_head_dim + m->qk_pos_emb_head_dim) +
                 (double)m->kv_lora_rank * (double)(m->qk_head_dim + m->v_head_dim));
    cr_expect_eq(a.fwd_flops, b.fwd_flops);
    expect_close(b.bwd_flops - a.bwd_flops, 2.0 * up, "mla_up_proj recompute");
}

/* Without q_lora_rank (Moonlight) the query is one projection; a GQA model
 * keeps its fused qkv. */
Test(mla_proj, without_q_lora_and_gqa)
{
    pass_info moon = build("model.name=moonlight-16b-a3b model.num_layers=2 model.moe_layer_freq=[0,0] "
                           "cluster.topology=dgx-h100 cluster.num_gpus=8 train.global_batch_size=8",
                           NULL);
    cr_expect_eq(moon.q_down + moon.q_up + moon.qkv, 0);
    cr_expect_eq(moon.kv_down, 2);
    cr_expect_eq(moon.kv_up, 2);
    pass_info llama = build("model.name=llama3-8b model.num_layers=2 cluster.topology=dgx-h100 cluster.num_gpus=8 "
                            "train.global_batch_size=8",
                            NULL);
    cr_expect_eq(llama.qkv, 2);
    cr_expect_eq(llama.kv_down + llama.kv_up, 0);
}
