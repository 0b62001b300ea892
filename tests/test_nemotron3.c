/* Nemotron-3: latent MoE (model.moe_latent_size), the router keys
 * (sigmoid scores, expert bias, top-k scale), MTP depths in hybrid patterns
 * ("main/mtp/mtp" and the legacy mtp_hybrid_override_pattern), and the
 * Super / Ultra / Lightning presets (megatron-features.md §B.1-B.4). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_run.h"
#include "scratch.h"
#include "memory.h"
#include "model.h"
#include "pattern_parse.h"
#include "search.h"
#include "workload.h"
#include "sim_run.h"

#define GB300 "cluster.topology=gb300-nvl72 "

/* Resolves a preset (with extra KEY=VALUE overrides, NULL-terminated) and runs one step. */
static void load(sim *x, const char *name, const char *const *extra)
{
    char assign[128];
    snprintf(assign, sizeof assign, "model.name=%s", name);
    const char *kv[16] = { assign, "cluster.topology=gb300-nvl72", "cluster.num_gpus=64",
                           "model.expert_model_parallel_size=64", "train.global_batch_size=64" };
    int n = 5;
    for (; extra && *extra && n < 15; extra++)
        kv[n++] = *extra;
    kv[n] = NULL;
    sim_run(x, kv);
}

/* A preset's parameter count (model_total_params at TP 1) within rel of want. */
static double preset_params_near(sim *x, const char *name, double want, double rel)
{
    load(x, name, NULL);
    double p = model_total_params(&x->in.model, 1);
    cr_assert(fabs(p / want - 1) < rel, "%s: %.6f G parameters", name, p / 1e9);
    cr_log_info("%s: %.0f parameters", name, p);
    return p;
}

Test(nemotron3, mtp_parts_are_depths_of_one_block)
{
    model_spec m;
    parse_ok(&m, "M*E/*E/*E");
    cr_assert_eq(m.num_layers, 3);
    cr_assert_eq(m.mtp_pattern_depth, 2);
    cr_assert_eq(m.mtp_layers_per_depth, 2);
    cr_assert_eq(m.mtp_layers[0].mixer, MODEL_MIXER_ATTENTION);
    cr_assert_eq(m.mtp_layers[0].mlp, MODEL_MLP_NONE);
    cr_assert_eq(m.mtp_layers[1].mixer, MODEL_MIXER_NONE);
    cr_assert_eq(m.mtp_layers[1].mlp, MODEL_MLP_MOE);
    /* The main layers end where the first '/' is: no MTP symbol leaks into them. */
    cr_assert_eq(m.layers[3].mixer, MODEL_MIXER_NONE);
    cr_assert_eq(m.layers[3].mlp, MODEL_MLP_NONE);
    parse_ok(&m, "M-|M-/M-");
    cr_assert_eq(m.num_layers, 4);
    cr_assert_eq(m.hybrid_segments, 2);
    cr_assert_eq(m.mtp_pattern_depth, 1);
    parse_ok(&m, "M*E");
    cr_assert_eq(m.mtp_pattern_depth, 0);
    cr_assert_eq(m.mtp_layers_per_depth, 0);
}

Test(nemotron3, bad_mtp_parts_name_the_position)
{
    parse_fails("M*/*|E", "'|' at position 4 is inside an MTP part");
    parse_fails("M*/*E/*-", "MTP part 2 (position 6) differs from the first one");
    parse_fails("M*/*E/*EE", "MTP part 2 (position 6) differs");
    parse_fails("M*//*E", "MTP part ending at position 3 has no layers");
    parse_fails("M*/", "MTP part ending at position 3 has no layers");
    parse_fails("/*E", "has no layers");
    parse_fails("M/*G", "'G' (Gated DeltaNet) at position 3");
    char big[MODEL_MAX_MTP_LAYERS + 4];
    memset(big, 'E', sizeof big);
    big[0] = 'M';
    big[1] = '/';
    big[sizeof big - 1] = '\0';
    parse_fails(big, "MTP part has more than 64 layers (position 66)");
    big[MODEL_MAX_MTP_LAYERS + 2] = '\0';
    model_spec m;
    parse_ok(&m, big);
    cr_assert_eq(m.mtp_layers_per_depth, MODEL_MAX_MTP_LAYERS);
}

/* The legacy pair (mtp_hybrid_override_pattern x mtp_num_layers) is the
 * '/' form (Megatron's arguments.py:780-785): same layers, same FLOPs. */
Test(nemotron3, legacy_mtp_pattern_is_the_slash_form)
{
    sim a, b;
    load(&a, "nemotron-3.5-lightning", NULL);
    /* A pattern from the command line replaces the preset's, with its own MTP parts. */
    const char *kv[] = { "model.name=nemotron-3-nano", "cluster.topology=gb300-nvl72", "cluster.num_gpus=64",
                         "model.expert_model_parallel_size=64", "train.global_batch_size=64",
                         "model.hybrid_layer_pattern=MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME/*E/*E",
                         "model.mtp_use_repeated_layer=true", NULL };
    sim_run(&b, kv);
    const model_spec *ma = &a.in.model, *mb = &b.in.model;
    cr_assert_eq(ma->mtp_num_layers, 2);
    cr_assert_eq(mb->mtp_num_layers, 2);
    cr_assert_eq(ma->mtp_layers_per_depth, 2);
    cr_assert_eq(mb->mtp_layers_per_depth, 2);
    cr_assert_eq(model_mtp_layer_count(ma), 4);
    cr_assert_eq(memcmp(ma->mtp_layers, mb->mtp_layers, 2 * sizeof ma->mtp_layers[0]), 0);
    cr_assert_eq(ma->num_layers, 52);
    cr_assert_eq(mb->num_layers, 52);
    cr_assert_float_eq(model_flops_per_step(ma, 8, 1), model_flops_per_step(mb, 8, 1), 1e-6 * model_flops_per_step(ma, 8, 1));
    cr_assert_float_eq(model_total_params(ma, 1), model_total_params(mb, 1), 1.0);
    sim_free(&a);
    sim_free(&b);
}

/* model.mtp_num_layers=0 drops the '/' parts (as it drops the legacy
 * pattern): the model is the main pattern alone. */
Test(nemotron3, mtp_num_layers_zero_drops_the_mtp_parts)
{
    const char *const slash0[] = { "model.hybrid_layer_pattern=MEM*E/*E/*E", "model.mtp_hybrid_override_pattern=\"\"",
                                   "model.mtp_num_layers=0", NULL };
    const char *const plain[] = { "model.hybrid_layer_pattern=MEM*E", "model.mtp_hybrid_override_pattern=\"\"",
                                  "model.mtp_num_layers=0", NULL };
    const char *const legacy0[] = { "model.hybrid_layer_pattern=MEM*E", "model.mtp_num_layers=0", NULL };
    sim a, b, c;
    load(&a, "nemotron-3-super", slash0);
    load(&b, "nemotron-3-super", plain);
    load(&c, "nemotron-3-super", legacy0);
    cr_assert_eq(a.in.model.mtp_num_layers, 0);
    cr_assert_eq(a.in.model.mtp_layers_per_depth, 0);
    cr_assert_eq(c.in.model.mtp_layers_per_depth, 0);
    double fb = model_flops_per_step(&b.in.model, 4, 1);
    cr_assert_eq(model_flops_per_step(&a.in.model, 4, 1), fb);
    cr_assert_eq(model_flops_per_step(&c.in.model, 4, 1), fb);
    cr_assert_eq(model_total_params(&a.in.model, 1), model_total_params(&b.in.model, 1));
    cr_assert_eq(step_result_get(a.st)->step_time_s, step_result_get(b.st)->step_time_s);
    sim_free(&a);
    sim_free(&b);
    sim_free(&c);
}

Test(nemotron3, mtp_and_new_key_refusals_name_the_key)
{
    static const struct {
        const char *args, *key, *rule;
    } cases[] = {
        { "model.name=nemotron-3-nano model.hybrid_layer_pattern=MEM*E/*E/*E model.mtp_num_layers=3",
          "model.mtp_num_layers: is 3", "has 2 MTP parts" },
        { "model.name=nemotron-3-nano model.hybrid_layer_pattern=MEM*E/*E model.mtp_hybrid_override_pattern=*E",
          "model.mtp_hybrid_override_pattern:", "give MTP once" },
        { "model.name=nemotron-3-nano model.mtp_num_layers=1", "model.mtp_num_layers:",
          "need their symbols" },
        { "model.name=nemotron-3-nano model.mtp_num_layers=1 model.mtp_hybrid_override_pattern=*/E",
          "model.mtp_hybrid_override_pattern:", "'/' at position 1 is inside an MTP part" },
        { "model.name=nemotron-h-8b model.mtp_num_layers=1 model.mtp_hybrid_override_pattern=*E",
          "model.mtp_hybrid_override_pattern:", "MTP layer 1 is MoE (E) but model.num_moe_experts is 0" },
        { "model.name=llama3-8b model.mtp_num_layers=1 model.mtp_hybrid_override_pattern=*-",
          "model.mtp_hybrid_override_pattern:", "needs a hybrid model" },
        { "model.name=llama3-8b model.moe_latent_size=512", "model.moe_latent_size:", "needs model.num_moe_experts" },
        { "model.name=nemotron-3-super model.activation_func=swish", "model.activation_func:", "swish" },
        { "model.name=nemotron-3-super model.moe_router_score_function=sqrtsoftplus",
          "model.moe_router_score_function:", "sqrtsoftplus" },
        { "model.name=nemotron-3-super model.moe_router_topk_scaling_factor=-1",
          "model.moe_router_topk_scaling_factor:", NULL },
        { "model.name=nemotron-3-super model.moe_latent_size=-5", "model.moe_latent_size:", NULL },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "run %s " GB300 "cluster.num_gpus=64 train.global_batch_size=64", cases[i].args);
        result r;
        run(&r, cmd);
        expect_refusal(&r, cases[i].args, cases[i].key, cases[i].rule);
    }
}

/* Megatron's hybrid FLOPs (B.4) for Super, written out per token: the
 * main symbols once, the MTP symbols (*E) once per depth (2), logits x3;
 * latent routed experts 4Tl F_e k + 4Thl, shared at width h. */
Test(nemotron3, super_flops_count_latent_and_mtp_symbols_per_depth)
{
    sim x;
    load(&x, "nemotron-3-super", NULL);
    const model_spec *m = &x.in.model;
    double s = 8192, h = 4096, T = s, V = 131072, l = 1024;
    double q = 32 * 128, kv = 2 * 128;
    double attn = 4 * T * h * (q + kv) + 2 * s * s * q;
    double moe = 4 * T * l * 2688 * 22 + 4 * T * h * l + 4 * T * h * 5376;
    double d_in = 2 * h, gn = 8 * 128;
    double mamba = 2 * T * h * (2 * d_in + 2 * gn + 128) + 7 * T * d_in * 128 + 2 * T * d_in * h;
    double fwd = 8 * attn + 40 * moe + 40 * mamba + 2 * (attn + moe) + 3 * 2 * T * h * V;
    double got = model_flops_per_step(m, 1, 1);
    cr_assert(fabs(got / (3 * fwd) - 1) < 1e-12, "%.6g vs %.6g", got, 3 * fwd);
    /* Without MTP: the two *E depths and two logits go. */
    model_spec n = *m;
    n.mtp_num_layers = 0;
    double drop = 3 * (2 * (attn + moe) + 2 * 2 * T * h * V);
    cr_assert(fabs((got - model_flops_per_step(&n, 1, 1)) / drop - 1) < 1e-12);
    sim_free(&x);
}

/* Megatron Bridge's import card for Super: 123.6 G elements (88 layers
 * with their norms, untied embedding and output layer, one MTP block as
 * the repeated layer holds it: eh projection, enorm, hnorm, final norm, *E,
 * 41 fp32 router-bias tensors).  parsim's count, within 0.05 %. */
Test(nemotron3, super_parameters_match_the_import_card)
{
    sim x;
    double p = preset_params_near(&x, "nemotron-3-super", 123.6e9, 5e-4);
    /* Expert bias: E fp32 elements per MoE layer (40 + 1 MTP). */
    model_spec nb = x.in.model;
    nb.moe_router_enable_expert_bias = false;
    cr_assert_float_eq(p - model_total_params(&nb, 1), 41.0 * 512, 0.5);
    /* The repeated layer: a second depth adds no weights. */
    nb = x.in.model;
    nb.mtp_use_repeated_layer = false;
    model_layer_params d;
    model_mtp_depth_params(&x.in.model, &d);
    double depth = d.attention + d.mamba + d.dense_mlp + d.shared_experts + d.routed_experts + d.mtp_proj + d.replicated;
    cr_assert_float_eq(model_total_params(&nb, 1) - p, depth, 1.0);
    cr_assert_float_eq(d.mtp_proj, 2.0 * 4096 * 4096, 0.5);
    sim_free(&x);
}

/* Lightning's verification card: 32,913,266,240 parameters with its MTP
 * block (models.csv); within 0.01 % (the same counting as Super's). */
Test(nemotron3, lightning_parameters_match_its_card)
{
    sim x;
    preset_params_near(&x, "nemotron-3.5-lightning", 32913266240.0, 1e-4);
    sim_free(&x);
}

/* Latent MoE parameters (megatron-formulas.md §2.1-2.2): routed experts
 * 2 l F_e E, the two h x l projections replicated over TP, shared experts
 * at width h.  Per GPU (memory_layer_params): the experts over EP x ETP. */
Test(nemotron3, latent_moe_parameters_and_their_sharding)
{
    sim x;
    const char *const tp2[] = { "model.tensor_model_parallel_size=2", "model.sequence_parallel=true",
                                "model.expert_tensor_parallel_size=1", NULL };
    load(&x, "nemotron-3-super", tp2);
    const model_spec *m = &x.in.model;
    model_layer_params p;
    model_layer_param_counts_at(m, 1, &p); /* 'E' */
    cr_assert_float_eq(p.routed_experts, 2.0 * 1024 * 2688 * 512, 0.5);
    cr_assert_float_eq(p.shared_experts, 2.0 * 4096 * 5376, 0.5);
    cr_assert_float_eq(p.replicated, 4096 /* norm */ + 4096.0 * 512 /* router */ + 512 /* bias */ + 2.0 * 4096 * 1024,
                       0.5);
    double dense, expert;
    memory_layer_params(&x.in, &x.s, 1, &dense, &expert);
    cr_assert_float_eq(expert, p.routed_experts / 64.0, 0.5);
    cr_assert_float_eq(dense, p.shared_experts / 2.0 + p.replicated, 0.5);
    sim_free(&x);
}

/* A small Super search (9 of its layers, the MTP block, 16 GB300s; MBS,
 * recompute and the distributed optimizer pinned) with 8 query groups and
 * 2 Mamba groups, so TP 4 and 8 are legal for attention and not for the
 * Mamba mixer: every layout simulated keeps heads and groups divisible by
 * TP (megatron-features.md B.5), and the search finds one that fits. */
Test(nemotron3, super_search_keeps_the_mamba_rules, .timeout = 60)
{
    const char *const kv[] = { "model.name=nemotron-3-super", "cluster.topology=gb300-nvl72", "cluster.num_gpus=16",
                               "train.global_batch_size=32", "model.hybrid_layer_pattern=MEM*EMEME",
                               "model.num_query_groups=8", "model.mamba_num_groups=2", NULL };
    sim_err err;
    sim_err_clear(&err);
    cfg_t *c = cfg_create(PARSIM_SOURCE_DIR);
    for (const char *const *k = kv; *k; k++)
        cr_assert_eq(cfg_set_override(c, *k, &err), SIM_OK, "%s: %s", *k, err.msg);
    run_inputs in;
    cr_assert_eq(cfg_resolve(c, &in, &err), SIM_OK, "%s", err.msg);
    cfg_destroy(c);
    cr_assert_eq(in.model.mtp_num_layers, 2);
    search_opts o;
    search_opts_default(&o);
    o.top = 3;
    o.jobs = 1;
    o.pinned = 1u << SEARCH_DIM_MBS | 1u << SEARCH_DIM_RECOMPUTE | 1u << SEARCH_DIM_DISTOPT;
    search_result r;
    cr_assert_eq(search_run(&in, &o, &r, &err), SIM_OK, "%s", err.msg);
    cr_assert(r.n_feasible >= 1, "nothing fits");
    /* the search enumerates only the TP the Mamba rules admit: every
     * candidate keeps them */
    for (size_t i = 0; i < r.n_cands; i++) {
        int64_t tp = r.cands[i].par.tp;
        cr_assert_eq(in.model.mamba_num_heads % tp, 0, "#%zu: TP %lld", i + 1, (long long)tp);
        cr_assert_eq(in.model.mamba_num_groups % tp, 0, "#%zu: TP %lld", i + 1, (long long)tp);
    }
    cr_assert_leq(r.cands[0].par.tp, 2);
    search_result_free(&r);
    /* The premise: TP 4 is refused by the Mamba rule alone. */
    result q;
    run(&q, "run model.name=nemotron-3-super " GB300 "cluster.num_gpus=16 train.global_batch_size=32 "
            "model.hybrid_layer_pattern=MEM*EMEME model.num_query_groups=8 model.mamba_num_groups=2 "
            "model.tensor_model_parallel_size=4 model.expert_model_parallel_size=4");
    expect_refusal(&q, "TP 4", "model.mamba_num_groups:", "divisible by tensor_model_parallel_size (4)");
}

/* ---- the workload: latent MoE, router score ops, MTP on the last stage ---- */

/* The unfused templates of a run (overrides kv, NULL-terminated). */
typedef struct built {
    sim x;
    workload_t *wl;
} built;

static void build(built *b, const char *const *kv)
{
    sim_run(&b->x, kv);
    run_inputs in = b->x.in;
    in.sim.keep_ops = true;
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(workload_build(&b->wl, &in, &b->x.s, &err), SIM_OK, "%s", err.msg);
}

static void built_free(built *b)
{
    workload_destroy(b->wl);
    sim_free(&b->x);
}

static const wl_pass *pass_of(const built *b, int64_t stage, bool bwd)
{
    const wl_chunk *c = &b->wl->stages[stage].chunks[b->wl->v - 1];
    return bwd ? &c->bwd : &c->fwd;
}

/* Ops named `name` in a pass, and their summed duration (ps) in *ps. */
static int count_ops(const wl_pass *p, const char *name, double *ps)
{
    int n = 0;
    double t = 0;
    for (int32_t i = 0; i < p->n_ops; i++)
        if (strcmp(p->ops[i].name, name) == 0) {
            n++;
            t += (double)p->ops[i].duration_ps;
        }
    if (ps)
        *ps = t;
    return n;
}

/* Super's shapes on a short pattern (2 MoE layers, MTP 2 x *E: 4 MoE
 * layer passes on the one stage), EP 8 over the alltoall dispatcher. */
#define SHORT_SUPER "model.name=nemotron-3-super", "cluster.topology=gb300-nvl72", "cluster.num_gpus=8", \
                    "model.expert_model_parallel_size=8", "train.global_batch_size=8", \
                    "model.hybrid_layer_pattern=ME*E"

/* Latent MoE in the templates: with l = h the expert GEMMs and the
 * exchange are those of no latent, plus the two projections (4 T h l
 * forward flops per MoE layer); with l = 1024 the expert GEMMs shrink with
 * the width (4 rows F_e w forward, squared-ReLU: no gate) and the
 * dispatch moves a quarter of the bytes. */
Test(nemotron3, latent_moe_projects_before_dispatch_and_after_combine)
{
    const char *const k0[] = { SHORT_SUPER, "model.moe_latent_size=0", NULL };
    const char *const kh[] = { SHORT_SUPER, "model.moe_latent_size=4096", NULL };
    const char *const kl[] = { SHORT_SUPER, NULL };
    built b0, bh, bl;
    build(&b0, k0);
    build(&bh, kh);
    build(&bl, kl);
    const double T = 8192, h = 4096, l = 1024, rows = T * 22, Fe = 2688, n_moe = 4;
    const wl_pass *f0 = pass_of(&b0, 0, false), *fh = pass_of(&bh, 0, false), *fl = pass_of(&bl, 0, false);
    cr_assert_eq(count_ops(f0, "latent_down", NULL), 0);
    cr_assert_eq(count_ops(fl, "latent_down", NULL), 4);
    cr_assert_eq(count_ops(fl, "latent_up", NULL), 4);
    cr_assert_eq(count_ops(pass_of(&bl, 0, true), "latent_down_wgrad", NULL), 4);
    cr_assert(fabs((fh->flops - f0->flops) / (n_moe * 4 * T * h * h) - 1) < 1e-9, "%.6g", fh->flops - f0->flops);
    double want = n_moe * (4 * rows * Fe * (h - l) - 4 * T * h * l);
    cr_assert(fabs((f0->flops - fl->flops) / want - 1) < 1e-9, "%.6g vs %.6g", f0->flops - fl->flops, want);
    double d0, dh, dl;
    cr_assert_eq(count_ops(f0, "ep_dispatch", &d0), 4);
    count_ops(fh, "ep_dispatch", &dh);
    count_ops(fl, "ep_dispatch", &dl);
    cr_assert_eq(dh, d0);
    cr_assert(dl < 0.5 * d0 && dl > 0.1 * d0, "dispatch %.0f ps at l 1024 vs %.0f ps", dl, d0);
    built_free(&b0);
    built_free(&bh);
    built_free(&bl);
}

/* The router's score ops follow its settings: softmax reads and writes the
 * logits; sigmoid with an expert bias and a top-k scale does more. */
Test(nemotron3, router_score_ops_follow_the_score_function)
{
    const char *const ks[] = { SHORT_SUPER, "model.moe_router_score_function=softmax",
                               "model.moe_router_enable_expert_bias=false", "model.moe_router_topk_scaling_factor=0",
                               NULL };
    const char *const kb[] = { SHORT_SUPER, NULL };
    built bs, bb;
    build(&bs, ks);
    build(&bb, kb);
    double ds, db, dsb, dbb;
    cr_assert_eq(count_ops(pass_of(&bs, 0, false), "router_score", &ds), 4);
    cr_assert_eq(count_ops(pass_of(&bb, 0, false), "router_score", &db), 4);
    cr_assert_eq(count_ops(pass_of(&bs, 0, true), "router_score_bwd", &dsb), 4);
    cr_assert_eq(count_ops(pass_of(&bb, 0, true), "router_score_bwd", &dbb), 4);
    cr_assert_gt(db, ds);
    cr_assert_eq(dbb, dsb);
    built_free(&bs);
    built_free(&bb);
}

/* MTP depths run on the last pipeline stage only, after the main layers:
 * per depth its entry (embedding, norms, eh projection), its *E layers and
 * its own logits; mtp_num_layers=0 drops them. */
Test(nemotron3, mtp_depths_run_on_the_last_stage)
{
    const char *const kv[] = { "model.name=nemotron-3-super", "cluster.topology=gb300-nvl72", "cluster.num_gpus=16",
                               "model.expert_model_parallel_size=8", "model.pipeline_model_parallel_size=2",
                               "train.global_batch_size=16", "model.hybrid_layer_pattern=ME*EME*E", NULL };
    const char *const k0[] = { "model.name=nemotron-3-super", "cluster.topology=gb300-nvl72", "cluster.num_gpus=16",
                               "model.expert_model_parallel_size=8", "model.pipeline_model_parallel_size=2",
                               "train.global_batch_size=16", "model.hybrid_layer_pattern=ME*EME*E",
                               "model.mtp_num_layers=0", NULL };
    built b, b0;
    build(&b, kv);
    build(&b0, k0);
    const wl_pass *first = pass_of(&b, 0, false), *last = pass_of(&b, 1, false), *last0 = pass_of(&b0, 1, false);
    cr_assert_eq(count_ops(first, "mtp_eh_proj", NULL), 0);
    cr_assert_eq(count_ops(first, "logits", NULL), 0);
    cr_assert_eq(count_ops(last, "mtp_eh_proj", NULL), 2);
    cr_assert_eq(count_ops(last, "logits", NULL), 3);
    cr_assert_eq(count_ops(last0, "logits", NULL), 1);
    cr_assert_eq(count_ops(last, "router", NULL), count_ops(last0, "router", NULL) + 2);
    cr_assert_eq(count_ops(pass_of(&b, 1, true), "mtp_eh_wgrad", NULL), 2);
    /* The last stage holds the MTP block's activations too, and the step is longer. */
    cr_assert_gt(b.wl->stages[1].chunks[0].act_bytes, b0.wl->stages[1].chunks[0].act_bytes);
    cr_assert_eq(b.wl->stages[0].chunks[0].act_bytes, b0.wl->stages[0].chunks[0].act_bytes);
    cr_assert_gt(step_result_get(b.x.st)->step_time_s, step_result_get(b0.x.st)->step_time_s);
    built_free(&b);
    built_free(&b0);
}

/* validate finds the new presets by the model column (models.csv names):
 * a Super, an Ultra and a Lightning row on GB300s are predicted, not
 * skipped (public.csv has no such rows yet). */
Test(nemotron3, validate_maps_the_new_model_names)
{
    make_dir();
    char csv[128];
    path_in(csv, sizeof csv, "rows.csv");
    write_file(csv,
               "id,source,gpu_type,num_gpus,model,seq_len,gbs,mbs,tp,pp,vp,cp,ep,etp,dp,sp,recompute,precision,"
               "distributed_optimizer,metric_name,metric_value,notes,flop_convention\n"
               "t-super,test,GB300,64,nemotron-3-super,8192,512,1,1,1,1,1,64,,64,,,bf16,,tokens_per_s_per_gpu,1000,"
               "x,megatron\n"
               "t-ultra,test,GB300,256,nemotron-3-ultra,8192,512,1,1,1,1,1,64,,256,,,bf16,,tokens_per_s_per_gpu,1000,"
               "x,megatron\n"
               "t-light,test,GB300,8,nemotron-3.5-lightning,8192,64,1,1,1,1,1,8,,8,,,bf16,,tokens_per_s_per_gpu,1000,"
               "x,megatron\n");
    result r;
    runf(&r, "validate '%s' --recipes none", csv);
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_assert(strstr(r.out, "validate: 3 rows, 3 predicted, 0 skipped"), "%s", r.out);
    remove_dir();
}

/* With PP > 1 the MTP stage holds its own copy of the (untied) word
 * embedding, h V / TP parameters more than without MTP's embedding, and
 * all-reduces its gradient with the first stage's. */
Test(nemotron3, mtp_stage_holds_an_embedding_copy)
{
    const char *const pp2[] = { "model.pipeline_model_parallel_size=2", "model.expert_model_parallel_size=32",
                                "model.hybrid_layer_pattern=ME*EME*E", NULL };
    sim x;
    load(&x, "nemotron-3-super", pp2);
    double dense, expert, dense0, expert0;
    memory_chunk_params(&x.in, &x.s, 1, 0, &dense, &expert);
    model_spec keep = x.in.model;
    x.in.model.mtp_num_layers = 0;
    memory_chunk_params(&x.in, &x.s, 1, 0, &dense0, &expert0);
    x.in.model = keep;
    model_layer_params d;
    model_mtp_depth_params(&keep, &d);
    double block = d.attention + d.shared_experts + d.mtp_proj + d.replicated; /* TP 1 */
    cr_assert_float_eq(dense - dense0, block + 4096.0 * 131072, 1.0, "%.0f", dense - dense0);
    cr_assert_float_eq(expert - expert0, d.routed_experts / 32, 1.0);
    run_inputs in = x.in;
    workload_t *wl = NULL;
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(workload_build(&wl, &in, &x.s, &err), SIM_OK, "%s", err.msg);
    cr_assert_gt(wl->stages[1].embedding_grad_s, 0);
    cr_assert_gt(wl->stages[0].embedding_grad_s, 0);
    workload_destroy(wl);
    sim_free(&x);
}
