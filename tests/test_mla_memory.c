/* Multi-latent attention's activation memory (memory.c, mla_activation):
 * one layer stores the latents (twice with the fused latent norms, split
 * by SP), the up projections' outputs q, k, v and the core attention's
 * output (split by TP) beside the norm inputs, GEMM inputs and dropout
 * masks of any layer; recompute_modules mla_up_proj drops q, k, v and the
 * norms' outputs and keeps the checkpoint's rope key instead; the
 * per-stage peak of `parsim run --format json` moves by the layers'
 * change. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_run.h"
#include "config.h"
#include "memory.h"
#include "strategy.h"
#include "sim_run.h"

/* Two layers with dense MLPs, no MTP, one microbatch of one sequence. */
#define ONE_STEP "model.num_layers=2 model.moe_layer_freq=[0,0] model.mtp_num_layers=0 " \
                 "cluster.topology=dgx-h100 cluster.num_gpus=8 train.global_batch_size=8 mixed_precision=bf16 "
#define DSV3 "model.name=deepseek-v3 " ONE_STEP
#define MOONLIGHT "model.name=moonlight-16b-a3b " ONE_STEP

/* Resolves "KEY=VALUE ..." as the command line does and returns layer
 * 0's activation bytes; the inputs and strategy in *in, *s. */
static double any_layer_bytes(const char *args, run_inputs *in, strategy_t *s)
{
    sim_resolve_args(args, in, s);
    return memory_layer_activation_bytes_at(in, s, 0);
}

static double layer_bytes(const char *args, run_inputs *in, strategy_t *s)
{
    double b = any_layer_bytes(args, in, s);
    cr_assert(in->model.multi_latent_attention, "%s", args);
    return b;
}

static void expect_close(double got, double want, const char *what)
{
    cr_expect(fabs(got - want) <= 1e-12 * fabs(want), "%s: %.6f bytes, the closed form says %.6f", what, got, want);
}

/* The closed form of one layer with a dense SwiGLU MLP, nothing
 * recomputed, fused attention, bf16; per token of this rank:
 *   split by SP (/t with SP): 2 halves x (norm input 2 B + GEMM input 2 B
 *     + dropout mask 1 B) x h, and the latents 2 B x 2 (norm input and
 *     output) x (q_lora_rank + kv_lora_rank);
 *   split by TP: 2 B x (q a (qk + rope) + k a (qk + rope) + v a v + core
 *     output a v) and the MLP's fc1 output 2 B x 2F and activation 2 B x F. */
static double closed_form(const run_inputs *in, const strategy_t *s)
{
    const model_spec *m = &in->model;
    double t = (double)s->tp, shard = s->par.sequence_parallel ? t : 1.0;
    double sb = (double)m->seq_length / (double)s->cp * (double)in->train.micro_batch_size;
    double h = (double)m->hidden_size, a = (double)m->num_attention_heads, F = (double)m->ffn_hidden_size;
    double qk = a * (double)(m->qk_head_dim + m->qk_pos_emb_head_dim), v = a * (double)m->v_head_dim;
    double lat = (double)(m->q_lora_rank + m->kv_lora_rank);
    double seq = 2.0 * 5.0 * sb * h + 2.0 * 2.0 * sb * lat;
    double tp = 2.0 * sb * (2.0 * qk + 2.0 * v) + 2.0 * sb * 2.0 * F + 2.0 * sb * F;
    return seq / shard + tp / t;
}

static void expect_closed_form(const char *args, const char *what)
{
    run_inputs in;
    strategy_t s;
    double got = layer_bytes(args, &in, &s);
    cr_assert(in.model.qk_layernorm && in.model.gated_linear_unit, "%s: the closed form has fused norms and GLU",
              what);
    expect_close(got, closed_form(&in, &s), what);
}

#define NONE "model.recompute_granularity=none "
#define TP2_SP "model.tensor_model_parallel_size=2 model.sequence_parallel=true "

Test(mla_memory, one_layer_matches_the_closed_form)
{
    expect_closed_form(DSV3 NONE, "DeepSeek-V3 TP 1");
    expect_closed_form(DSV3 NONE TP2_SP, "DeepSeek-V3 TP 2 + SP");
    expect_closed_form(DSV3 NONE TP2_SP "model.context_parallel_size=2", "DeepSeek-V3 TP 2 + SP, CP 2");
    /* Moonlight: no q_lora_rank, its query projects the hidden states. */
    expect_closed_form(MOONLIGHT NONE, "Moonlight TP 1");
    expect_closed_form(MOONLIGHT NONE TP2_SP, "Moonlight TP 2 + SP");
}

/* The arguments `args` with selective recompute of core_attn (a) and of
 * core_attn and mla_up_proj (b). */
static void with_and_without_up_proj(const char *args, char *a, char *b, size_t n)
{
    int ka = snprintf(a, n, "%s model.recompute_granularity=selective model.recompute_modules=[core_attn]", args);
    int kb = snprintf(b, n, "%s model.recompute_granularity=selective model.recompute_modules=[core_attn,mla_up_proj]",
                      args);
    cr_assert(ka > 0 && kb > 0 && (size_t)ka < n && (size_t)kb < n, "%s: too long", args);
}

/* mla_up_proj drops q, k, v (split by TP) and the fused norms' outputs
 * (the latents once, split by SP), and keeps the rope key k_pe (not
 * split). */
static void expect_up_proj_drop(const char *shape, const char *par, const char *what)
{
    char args[1024], a[1024], b[1024];
    snprintf(args, sizeof args, "%s%s", shape, par);
    with_and_without_up_proj(args, a, b, sizeof a);
    run_inputs in;
    strategy_t s;
    double kept = layer_bytes(a, &in, &s);
    double dropped = layer_bytes(b, &in, &s);
    const model_spec *m = &in.model;
    double t = (double)s.tp, shard = s.par.sequence_parallel ? t : 1.0;
    double sb = (double)m->seq_length / (double)s.cp * (double)in.train.micro_batch_size;
    double a_ = (double)m->num_attention_heads;
    double up = 2.0 * sb * a_ * (2.0 * (double)(m->qk_head_dim + m->qk_pos_emb_head_dim) + (double)m->v_head_dim) / t;
    double norm_out = 2.0 * sb * (double)(m->q_lora_rank + m->kv_lora_rank) / shard;
    double rope_key = 2.0 * sb * (double)m->qk_pos_emb_head_dim;
    expect_close(kept - dropped, up + norm_out - rope_key, what);
    cr_expect(dropped < kept, "%s: %.0f -> %.0f bytes", what, kept, dropped);
}

Test(mla_memory, mla_up_proj_drops_the_up_projections_outputs)
{
    expect_up_proj_drop(DSV3, "", "DeepSeek-V3 TP 1");
    expect_up_proj_drop(DSV3, TP2_SP, "DeepSeek-V3 TP 2 + SP");
    expect_up_proj_drop(MOONLIGHT, TP2_SP "model.context_parallel_size=2", "Moonlight TP 2 + SP, CP 2");
}

/* kv_lora_rank 512 -> 256 moves a layer by the latent's two copies (norm
 * input and output), split by SP; under mla_up_proj by one copy. */
static void expect_kv_rank_term(const char *par, double copies, const char *what)
{
    char a[1024], b[1024];
    snprintf(a, sizeof a, DSV3 "%s", par);
    snprintf(b, sizeof b, DSV3 "%s model.kv_lora_rank=256", par);
    run_inputs in;
    strategy_t s;
    double wide = layer_bytes(a, &in, &s);
    double narrow = layer_bytes(b, &in, &s);
    cr_assert_eq(in.model.kv_lora_rank, 256);
    double shard = s.par.sequence_parallel ? (double)s.tp : 1.0;
    double sb = (double)in.model.seq_length / (double)s.cp * (double)in.train.micro_batch_size;
    expect_close(wide - narrow, copies * 2.0 * sb * (512.0 - 256.0) / shard, what);
}

Test(mla_memory, kv_lora_rank_moves_the_latents)
{
    expect_kv_rank_term(NONE, 2.0, "TP 1");
    expect_kv_rank_term(NONE TP2_SP, 2.0, "TP 2 + SP");
    expect_kv_rank_term(TP2_SP "model.recompute_granularity=selective model.recompute_modules=[mla_up_proj]", 1.0,
                        "TP 2 + SP, mla_up_proj");
}

/* A non-MLA attention layer is what it was: the same closed form without
 * latents at the GQA widths (Llama 3 8B: a 32, g 8, d 128). */
Test(mla_memory, gqa_layer_unchanged_by_mla_up_proj)
{
    const char *base = "model.name=llama3-8b model.num_layers=2 cluster.topology=dgx-h100 cluster.num_gpus=8 "
                       "train.global_batch_size=8 mixed_precision=bf16 " TP2_SP;
    char a[1024], b[1024];
    with_and_without_up_proj(base, a, b, sizeof a);
    run_inputs in;
    strategy_t s;
    double got[2] = { any_layer_bytes(a, &in, &s), any_layer_bytes(b, &in, &s) };
    cr_assert(!in.model.multi_latent_attention && s.tp == 2);
    const model_spec *m = &in.model;
    double sb = (double)m->seq_length, h = (double)m->hidden_size, F = (double)m->ffn_hidden_size;
    double q = 128.0 * 32.0, kv = 128.0 * 8.0;
    double want = 2.0 * 5.0 * sb * h / 2.0 + (2.0 * sb * (q + 2.0 * kv + q) + 2.0 * sb * 3.0 * F) / 2.0;
    expect_close(got[0], want, "Llama 3 8B TP 2 + SP");
    expect_close(got[1], want, "Llama 3 8B with mla_up_proj named");
}

/* "activations_peak_bytes" and "peak_bytes" of the first stage in a run's
 * JSON report. */
static void stage_peaks(const char *args, double *activ, double *peak)
{
    result r;
    run(&r, args);
    cr_assert_eq(r.status, 0, "%s: status %d: %s", args, r.status, r.out);
    const char *st = strstr(r.out, "\"stages\"");
    cr_assert_not_null(st, "%s", r.out);
    const char *a = strstr(st, "\"activations_peak_bytes\":");
    const char *p = a ? strstr(a, "\"peak_bytes\":") : NULL;
    cr_assert(a && p, "%s", r.out);
    *activ = strtod(a + strlen("\"activations_peak_bytes\":"), NULL);
    *peak = strtod(p + strlen("\"peak_bytes\":"), NULL);
}

/* One microbatch in flight on one stage: its peak holds both layers'
 * activations, so mla_up_proj lowers the stage's activation peak and its
 * peak by two layers' drop, the static memory the same. */
Test(mla_memory, run_json_stage_peak_follows)
{
    char a[1024], b[1024];
    with_and_without_up_proj(DSV3 TP2_SP, a, b, sizeof a);
    run_inputs in;
    strategy_t s;
    double drop = layer_bytes(a, &in, &s) - layer_bytes(b, &in, &s);
    cr_assert_eq(s.pp, 1);
    char ca[1200], cb[1200];
    snprintf(ca, sizeof ca, "run %s --format json", a);
    snprintf(cb, sizeof cb, "run %s --format json", b);
    double act_a, peak_a, act_b, peak_b;
    stage_peaks(ca, &act_a, &peak_a);
    stage_peaks(cb, &act_b, &peak_b);
    expect_close(act_a - act_b, 2.0 * drop, "activations_peak_bytes");
    expect_close(peak_a - peak_b, 2.0 * drop, "peak_bytes");
}
