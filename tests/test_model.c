/* Tests of sim/model.c: Megatron's FLOPs (reference §1.1) against the closed
 * forms of §1.2, parameter counts (§2.1) against the published model sizes,
 * and the model presets in models/ (every file parses, every key is one
 * model_spec knows, shapes are consistent).
 *
 * The presets are read here with libconfig directly, so most tests depend on
 * model.c and the preset files only; presets_resolve_the_same_through_config
 * checks that config.c reads every preset into the same model_spec.
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <libconfig.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "model.h"

#ifndef PARSIM_SOURCE_DIR
#define PARSIM_SOURCE_DIR "."
#endif

#define REL_TOL 1e-12

static void assert_rel_eq(double got, double want, double tol, const char *what)
{
    double scale = fabs(want) > 0.0 ? fabs(want) : 1.0;
    cr_assert(fabs(got - want) <= tol * scale, "%s: got %.17g, want %.17g (rel err %.3g > %.3g)",
              what, got, want, fabs(got - want) / scale, tol);
}

/* ---- preset loader (libconfig) ----------------------------------------- */

static bool get_int(const config_setting_t *s, int64_t *out)
{
    if (config_setting_type(s) == CONFIG_TYPE_INT || config_setting_type(s) == CONFIG_TYPE_INT64) {
        *out = (int64_t)config_setting_get_int64(s);
        return true;
    }
    return false;
}

static bool get_bool(const config_setting_t *s, bool *out)
{
    if (config_setting_type(s) != CONFIG_TYPE_BOOL)
        return false;
    *out = config_setting_get_bool(s) != 0;
    return true;
}

static bool get_str(const config_setting_t *s, char *out, size_t len)
{
    const char *v = config_setting_get_string(s);
    if (v == NULL || strlen(v) >= len)
        return false;
    strcpy(out, v);
    return true;
}

/* Fills m from one model.* setting; false if the key is unknown or its
 * value has the wrong type. */
static bool apply_key(model_spec *m, const config_setting_t *s)
{
    const char *k = config_setting_name(s);
    struct {
        const char *key;
        int64_t *field;
    } ints[] = {
        {"num_layers", &m->num_layers},
        {"hidden_size", &m->hidden_size},
        {"ffn_hidden_size", &m->ffn_hidden_size},
        {"num_attention_heads", &m->num_attention_heads},
        {"num_query_groups", &m->num_query_groups},
        {"kv_channels", &m->kv_channels},
        {"vocab_size", &m->vocab_size},
        {"make_vocab_size_divisible_by", &m->make_vocab_size_divisible_by},
        {"seq_length", &m->seq_length},
        {"num_moe_experts", &m->num_moe_experts},
        {"moe_router_topk", &m->moe_router_topk},
        {"moe_ffn_hidden_size", &m->moe_ffn_hidden_size},
        {"moe_shared_expert_intermediate_size", &m->moe_shared_expert_intermediate_size},
        {"moe_router_num_groups", &m->moe_router_num_groups},
        {"moe_router_group_topk", &m->moe_router_group_topk},
        {"q_lora_rank", &m->q_lora_rank},
        {"kv_lora_rank", &m->kv_lora_rank},
        {"qk_head_dim", &m->qk_head_dim},
        {"qk_pos_emb_head_dim", &m->qk_pos_emb_head_dim},
        {"v_head_dim", &m->v_head_dim},
        {"mtp_num_layers", &m->mtp_num_layers},
        {"mamba_num_heads", &m->mamba_num_heads},
        {"mamba_head_dim", &m->mamba_head_dim},
        {"mamba_state_dim", &m->mamba_state_dim},
        {"mamba_num_groups", &m->mamba_num_groups},
        {"mamba_chunk_size", &m->mamba_chunk_size},
        {"moe_latent_size", &m->moe_latent_size},
    };
    struct {
        const char *key;
        bool *field;
    } bools[] = {
        {"gated_linear_unit", &m->gated_linear_unit},
        {"share_embeddings_and_output_weights", &m->share_embeddings_and_output_weights},
        {"add_bias_linear", &m->add_bias_linear},
        {"qk_layernorm", &m->qk_layernorm},
        {"multi_latent_attention", &m->multi_latent_attention},
        {"mtp_use_repeated_layer", &m->mtp_use_repeated_layer},
        {"moe_router_enable_expert_bias", &m->moe_router_enable_expert_bias},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (strcmp(k, ints[i].key) == 0)
            return get_int(s, ints[i].field);
    for (size_t i = 0; i < sizeof bools / sizeof bools[0]; i++)
        if (strcmp(k, bools[i].key) == 0)
            return get_bool(s, bools[i].field);
    if (strcmp(k, "normalization") == 0) {
        char v[16];
        if (!get_str(s, v, sizeof v))
            return false;
        if (strcmp(v, "LayerNorm") == 0)
            m->normalization = NORM_LAYERNORM;
        else if (strcmp(v, "RMSNorm") == 0)
            m->normalization = NORM_RMSNORM;
        else
            return false;
        return true;
    }
    if (strcmp(k, "position_embedding_type") == 0) {
        if (!get_str(s, m->position_embedding_type, sizeof m->position_embedding_type))
            return false;
        const char *ok[] = {"rope", "learned_absolute", "alibi", "none"};
        for (size_t i = 0; i < 4; i++)
            if (strcmp(m->position_embedding_type, ok[i]) == 0)
                return true;
        return false;
    }
    if (strcmp(k, "window_size") == 0) {
        /* Megatron's (left, right); a causal decoder has right = 0. */
        if (config_setting_type(s) != CONFIG_TYPE_ARRAY || config_setting_length(s) != 2 ||
            config_setting_get_int_elem(s, 1) != 0)
            return false;
        m->window_size = config_setting_get_int_elem(s, 0);
        return m->window_size > 0;
    }
    if (strcmp(k, "window_attn_skip_freq") == 0)
        return config_setting_type(s) == CONFIG_TYPE_INT; /* applied after all keys */
    if (strcmp(k, "softmax_type") == 0) {
        char v[16];
        if (!get_str(s, v, sizeof v))
            return false;
        m->softmax_type = strcmp(v, "vanilla") == 0 ? 0 : strcmp(v, "off-by-one") == 0 ? 1 : 2;
        return m->softmax_type < 2 || strcmp(v, "learnable") == 0;
    }
    if (strcmp(k, "activation_func") == 0 || strcmp(k, "moe_router_score_function") == 0 ||
        strcmp(k, "moe_token_dispatcher_type") == 0) {
        /* Names only: none changes a count. */
        static const char *const ok[] = {"gelu",    "silu",    "relu",      "squared_relu", "softmax",
                                         "sigmoid", "alltoall", "allgather", "flex"};
        const char *v = config_setting_get_string(s);
        for (size_t i = 0; v && i < sizeof ok / sizeof ok[0]; i++)
            if (strcmp(v, ok[i]) == 0)
                return true;
        return false;
    }
    if (strcmp(k, "moe_router_topk_scaling_factor") == 0) {
        if (config_setting_type(s) != CONFIG_TYPE_FLOAT)
            return false;
        m->moe_router_topk_scaling_factor = config_setting_get_float(s);
        return m->moe_router_topk_scaling_factor >= 0;
    }
    if (strcmp(k, "mtp_hybrid_override_pattern") == 0) {
        char msg[160];
        const char *v = config_setting_get_string(s);
        return v && model_mtp_pattern_parse(m, v, msg, sizeof msg) == 0;
    }
    if (strcmp(k, "moe_layer_freq") == 0) {
        /* Applied after all keys (needs num_layers); only the type is checked here. */
        int t = config_setting_type(s);
        return t == CONFIG_TYPE_INT || t == CONFIG_TYPE_ARRAY || t == CONFIG_TYPE_LIST;
    }
    return false;
}

/* Megatron: int freq f -> layer i is MoE iff i % f == 0; a list gives the
 * pattern itself (its length must equal num_layers). */
static bool apply_moe_layer_freq(model_spec *m, const config_setting_t *s)
{
    for (int i = 0; i < MODEL_MAX_LAYERS; i++)
        m->layers[i].mlp = MODEL_MLP_DENSE;
    if (m->num_layers <= 0 || m->num_layers > MODEL_MAX_LAYERS)
        return false;
    if (config_setting_type(s) == CONFIG_TYPE_INT) {
        int f = config_setting_get_int(s);
        if (f <= 0)
            return false;
        for (int64_t i = 0; i < m->num_layers; i++)
            m->layers[i].mlp = i % f == 0 ? MODEL_MLP_MOE : MODEL_MLP_DENSE;
        return true;
    }
    if (config_setting_length(s) != (int)m->num_layers)
        return false;
    for (int64_t i = 0; i < m->num_layers; i++) {
        int v = config_setting_get_int_elem(s, (int)i);
        if (v != 0 && v != 1)
            return false;
        m->layers[i].mlp = v ? MODEL_MLP_MOE : MODEL_MLP_DENSE;
    }
    return true;
}

/* Loads models/<name>.cfg into m (after model_defaults).  Fails the test on
 * a syntax error, an unknown key or a wrong type. */
static void load_preset_file(const char *path, model_spec *m)
{
    config_t cfg;
    config_init(&cfg);
    cr_assert(config_read_file(&cfg, path) == CONFIG_TRUE, "%s:%d: %s", path,
              config_error_line(&cfg), config_error_text(&cfg));
    config_setting_t *g = config_lookup(&cfg, "model");
    cr_assert_not_null(g, "%s: no model group", path);
    cr_assert(config_setting_is_group(g), "%s: model is not a group", path);
    model_defaults(m);
    int n = config_setting_length(g);
    for (int i = 0; i < n; i++) {
        config_setting_t *s = config_setting_get_elem(g, (unsigned)i);
        if (strcmp(config_setting_name(s), "hybrid_layer_pattern") == 0) {
            char msg[160];
            cr_assert_eq(model_hybrid_parse(m, config_setting_get_string(s), msg, sizeof msg), 0, "%s: %s", path, msg);
            continue;
        }
        cr_assert(apply_key(m, s), "%s:%d: model.%s: unknown key or wrong type", path,
                  config_setting_source_line(s), config_setting_name(s));
    }
    config_setting_t *f = config_setting_get_member(g, "moe_layer_freq");
    if (f != NULL) {
        cr_assert(apply_moe_layer_freq(m, f), "%s:%d: model.moe_layer_freq: bad value", path,
                  config_setting_source_line(f));
    } else if (m->num_moe_experts > 0 && !m->hybrid) {
        /* Megatron's default moe_layer_freq = 1. */
        for (int64_t i = 0; i < m->num_layers && i < MODEL_MAX_LAYERS; i++)
            m->layers[i].mlp = MODEL_MLP_MOE;
    }
    /* Megatron's is_layer_window_attention: 1-based layer n windowed iff n % N != 0. */
    config_setting_t *w = config_setting_get_member(g, "window_attn_skip_freq");
    int skip = w ? config_setting_get_int(w) : 0;
    for (int64_t i = 0; m->window_size > 0 && i < m->num_layers && i < MODEL_MAX_LAYERS; i++)
        m->layers[i].window = skip == 0 || (i + 1) % skip != 0;
    /* Top-level groups other than model are not expected in a model preset. */
    config_setting_t *root = config_root_setting(&cfg);
    cr_assert_eq(config_setting_length(root), 1, "%s: only a model group is expected", path);
    config_destroy(&cfg);
}

static void load_preset(const char *name, model_spec *m)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/models/%s.cfg", PARSIM_SOURCE_DIR, name);
    load_preset_file(path, m);
    snprintf(m->name, sizeof m->name, "%s", name);
}

/* ---- shapes written out by hand ---------------------------------------- */

/* Vanilla GPT: MHA with d = h/a, F = 4h, GeLU, LayerNorm, no MoE/MTP. */
static void vanilla_gpt(model_spec *m, int64_t layers, int64_t hidden, int64_t heads,
                        int64_t vocab, int64_t seq)
{
    model_defaults(m);
    m->num_layers = layers;
    m->hidden_size = hidden;
    m->ffn_hidden_size = 4 * hidden;
    m->num_attention_heads = heads;
    m->vocab_size = vocab;
    m->seq_length = seq;
}

/* ---- defaults and derived getters --------------------------------------- */

Test(model, defaults_are_megatrons)
{
    model_spec m;
    model_defaults(&m);
    cr_assert_eq(m.make_vocab_size_divisible_by, 128);
    cr_assert_eq(m.normalization, NORM_LAYERNORM);
    cr_assert(m.share_embeddings_and_output_weights);
    cr_assert(m.add_bias_linear);
    cr_assert_str_eq(m.position_embedding_type, "learned_absolute");
    cr_assert_eq(m.moe_router_topk, 2);
    cr_assert_eq(m.num_moe_experts, 0);
    cr_assert_eq(m.mtp_num_layers, 0);
    for (int i = 0; i < MODEL_MAX_LAYERS; i++)
        cr_assert_eq(m.layers[i].mlp, MODEL_MLP_DENSE);
}

Test(model, zero_means_derived)
{
    model_spec m;
    vanilla_gpt(&m, 24, 2048, 16, 50257, 2048);
    cr_assert_eq(model_query_groups(&m), 16);
    cr_assert_eq(model_kv_channels(&m), 128);
    cr_assert_eq(model_moe_ffn(&m), 8192);
    cr_assert(!model_is_moe(&m));
    m.num_query_groups = 4;
    m.kv_channels = 64;
    m.moe_ffn_hidden_size = 1024;
    cr_assert_eq(model_query_groups(&m), 4);
    cr_assert_eq(model_kv_channels(&m), 64);
    cr_assert_eq(model_moe_ffn(&m), 1024);
}

Test(model, moe_layer_pattern_is_read_per_layer)
{
    model_spec m;
    vanilla_gpt(&m, 6, 1024, 8, 32000, 1024);
    cr_assert_eq(model_num_moe_layers(&m), 0);
    m.layers[1].mlp = m.layers[3].mlp = m.layers[5].mlp = MODEL_MLP_MOE;
    /* A pattern without experts is not MoE. */
    cr_assert(!model_layer_is_moe(&m, 1));
    cr_assert_eq(model_num_moe_layers(&m), 0);
    m.num_moe_experts = 8;
    cr_assert(model_is_moe(&m));
    cr_assert(!model_layer_is_moe(&m, 0));
    cr_assert(model_layer_is_moe(&m, 1));
    cr_assert(!model_layer_is_moe(&m, -1));
    cr_assert(!model_layer_is_moe(&m, 6));
    cr_assert_eq(model_num_moe_layers(&m), 3);
}

Test(model, vocab_padding_follows_megatron)
{
    model_spec m;
    vanilla_gpt(&m, 24, 2048, 16, 50257, 2048);
    cr_assert_eq(model_padded_vocab(&m, 1), 50304);
    cr_assert_eq(model_padded_vocab(&m, 2), 50432);
    cr_assert_eq(model_padded_vocab(&m, 4), 50688);
    cr_assert_eq(model_padded_vocab(&m, 8), 51200);
    m.vocab_size = 128256; /* Llama 3: a multiple of 128 */
    cr_assert_eq(model_padded_vocab(&m, 1), 128256);
    cr_assert_eq(model_padded_vocab(&m, 8), 129024);
    m.vocab_size = 129280; /* DeepSeek-V3 with the Bridge divisor 1280 */
    m.make_vocab_size_divisible_by = 1280;
    cr_assert_eq(model_padded_vocab(&m, 1), 129280);
    cr_assert_eq(model_padded_vocab(&m, 2), 130560);
}

/* ---- FLOPs: closed forms of §1.2 ---------------------------------------- */

Test(model, flops_vanilla_gpt_match_closed_form)
{
    struct {
        int64_t layers, hidden, heads, vocab, seq, batch, tp;
    } cases[] = {
        {96, 12288, 96, 50257, 2048, 1536, 8}, /* GPT-3 175B */
        {24, 2048, 16, 50257, 2048, 512, 1},   /* GPT-3 1.3B-like */
        {105, 20480, 128, 51200, 2048, 1920, 8},
        {112, 18432, 144, 131072, 4096, 3072, 8},
        {2, 64, 4, 1000, 16, 3, 2}, /* tiny, vocab padding matters */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        model_spec m;
        vanilla_gpt(&m, cases[i].layers, cases[i].hidden, cases[i].heads, cases[i].vocab,
                    cases[i].seq);
        double B = (double)cases[i].batch, s = (double)cases[i].seq;
        double L = (double)cases[i].layers, h = (double)cases[i].hidden;
        double V = (double)model_padded_vocab(&m, cases[i].tp);
        double want = 72.0 * B * s * L * h * h * (1.0 + s / (12.0 * h) + V / (12.0 * L * h));
        assert_rel_eq(model_flops_per_step(&m, cases[i].batch, cases[i].tp), want, REL_TOL,
                      "vanilla GPT flops");
    }
}

static double gqa_swiglu_closed_form(const model_spec *m, int64_t batch, int64_t tp)
{
    double B = (double)batch, s = (double)m->seq_length, L = (double)m->num_layers;
    double h = (double)m->hidden_size, F = (double)m->ffn_hidden_size;
    double q = (double)(model_kv_channels(m) * m->num_attention_heads);
    double kv = (double)(model_kv_channels(m) * model_query_groups(m));
    double V = (double)model_padded_vocab(m, tp);
    return B * s * L * (12.0 * h * (q + kv) + 18.0 * h * F) + 6.0 * B * s * s * L * q
           + 6.0 * B * s * h * V;
}

/* Hand-written: head dim not h/a, GQA 4 groups, SwiGLU. */
static void hand_gqa(model_spec *m)
{
    model_defaults(m);
    m->num_layers = 28;
    m->hidden_size = 3072;
    m->ffn_hidden_size = 8192;
    m->num_attention_heads = 24;
    m->num_query_groups = 4;
    m->kv_channels = 160;
    m->gated_linear_unit = true;
    m->normalization = NORM_RMSNORM;
    m->vocab_size = 151936;
    m->seq_length = 4096;
}

Test(model, flops_gqa_swiglu_match_closed_form)
{
    const char *presets[] = {"llama3-8b", "llama3-70b", "llama3.1-405b", "llama2-70b",
                             "qwen3-30b-a3b"};
    model_spec m;
    hand_gqa(&m);
    assert_rel_eq(model_flops_per_step(&m, 256, 4), gqa_swiglu_closed_form(&m, 256, 4), REL_TOL,
                  "hand-written GQA+SwiGLU flops");
    for (size_t i = 0; i < 4; i++) {
        load_preset(presets[i], &m);
        cr_assert(m.gated_linear_unit && !model_is_moe(&m), "%s", presets[i]);
        for (int64_t tp = 1; tp <= 8; tp *= 2)
            assert_rel_eq(model_flops_per_step(&m, 128, tp), gqa_swiglu_closed_form(&m, 128, tp),
                          REL_TOL, presets[i]);
    }
}

Test(model, flops_llama3_70b_known_value)
{
    /* One sequence of Llama 3 70B at TP 1, the §1.2 closed form evaluated by hand:
     *   8192*80*(12*8192*(8192+1024) + 18*8192*28672) + 6*8192^2*80*8192
     *   + 6*8192*8192*128256 = 3,680,031,058,427,904. */
    model_spec m;
    load_preset("llama3-70b", &m);
    double f = model_flops_per_step(&m, 1, 1);
    assert_rel_eq(f, 3680031058427904.0, REL_TOL, "llama3-70b flops per sequence");
}

/* An independent, per-layer transcription of §1.1 for MoE + MLA + MTP. */
static double flops_by_layer(const model_spec *m, int64_t batch, int64_t tp)
{
    double h = (double)m->hidden_size, a = (double)m->num_attention_heads;
    double s = (double)m->seq_length, T = (double)batch * s, S2 = (double)batch * s * s;
    double glu = m->gated_linear_unit ? 3.0 : 2.0;
    double V = (double)model_padded_vocab(m, tp);
    double attn_tok, attn_sq;
    if (m->multi_latent_attention) {
        double qk = (double)m->qk_head_dim, r = (double)m->qk_pos_emb_head_dim;
        double vd = (double)m->v_head_dim;
        double qt = m->q_lora_rank ? (double)m->q_lora_rank * (h + a * (qk + r) + 1.0)
                                   : h * a * (qk + r);
        attn_tok = 6.0 * (qt + (double)m->kv_lora_rank * (h + a * (qk + vd) + 1.0) + h * r
                          + a * vd * h);
        attn_sq = 3.0 * a * (qk + r) + 3.0 * a * vd;
    } else {
        double q = (double)(model_kv_channels(m) * m->num_attention_heads);
        double kv = (double)(model_kv_channels(m) * model_query_groups(m));
        attn_tok = 6.0 * (2.0 * h * q + 2.0 * h * kv);
        attn_sq = 6.0 * q;
    }
    double mlp_dense = 6.0 * h * (double)m->ffn_hidden_size * glu;
    double mlp_moe = 6.0 * h
                     * ((double)model_moe_ffn(m) * (double)m->moe_router_topk * glu
                        + (double)m->moe_shared_expert_intermediate_size * glu);
    double total = 0.0;
    int64_t n = m->num_layers + m->mtp_num_layers;
    for (int64_t i = 0; i < n; i++) {
        /* MTP layers (i >= L) take the type of the last decoder layer. */
        int64_t ty = i < m->num_layers ? i : m->num_layers - 1;
        bool moe = model_layer_is_moe(m, ty);
        /* A sliding-window layer's queries see W - W(W-1)/(2s) keys, not s/2. */
        double w = (double)m->window_size;
        double core = (i < m->num_layers && model_layer_is_window(m, i) && w < s)
                          ? T * 2.0 * (w - w * (w - 1.0) / (2.0 * s)) * attn_sq
                          : S2 * attn_sq;
        total += T * (attn_tok + (moe ? mlp_moe : mlp_dense)) + core;
    }
    double mtp = (double)m->mtp_num_layers;
    total += T * 6.0 * mtp * (3.0 * h + 2.0 * h * h);
    total += T * 6.0 * h * V * (mtp + 1.0);
    return total;
}

Test(model, flops_moe_mla_mtp_match_per_layer_sum)
{
    const char *presets[] = {"deepseek-v3", "mixtral-8x7b", "kimi-k2", "moonlight-16b-a3b",
                             "llama4-maverick", "qwen3-235b-a22b", "gpt-oss-120b"};
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        model_spec m;
        load_preset(presets[i], &m);
        cr_assert(model_is_moe(&m), "%s", presets[i]);
        assert_rel_eq(model_flops_per_step(&m, 64, 2), flops_by_layer(&m, 64, 2), REL_TOL,
                      presets[i]);
    }
    /* MTP on a dense model counts as dense layers. */
    model_spec d;
    load_preset("llama3-8b", &d);
    d.mtp_num_layers = 2;
    assert_rel_eq(model_flops_per_step(&d, 8, 1), flops_by_layer(&d, 8, 1), REL_TOL,
                  "llama3-8b + 2 MTP");
}

Test(model, flops_scale_linearly_with_batch)
{
    model_spec m;
    load_preset("deepseek-v3", &m);
    assert_rel_eq(model_flops_per_step(&m, 1000, 1), 1000.0 * model_flops_per_step(&m, 1, 1),
                  REL_TOL, "batch linearity");
}

/* ---- parameter counts ---------------------------------------------------- */

Test(model, layer_params_llama3_70b)
{
    model_spec m;
    load_preset("llama3-70b", &m);
    model_layer_params p;
    model_layer_param_counts(&m, false, &p);
    cr_assert_float_eq(p.attention, 2.0 * 8192 * (8192 + 1024), 0.5);
    cr_assert_float_eq(p.dense_mlp, 2.0 * 8192 * 28672 * 1.5, 0.5);
    cr_assert_float_eq(p.shared_experts, 0.0, 0.0);
    cr_assert_float_eq(p.routed_experts, 0.0, 0.0);
    cr_assert_float_eq(p.replicated, 2.0 * 8192, 0.5); /* two RMSNorms */
}

Test(model, layer_params_moe_and_mla)
{
    model_spec m;
    load_preset("deepseek-v3", &m);
    model_layer_params p;
    model_layer_param_counts(&m, true, &p);
    double h = 7168, a = 128;
    double q = 1536.0 * (h + a * 192 + 1); /* RMSNorm: norm_size 1 */
    double kv = 512.0 * (h + a * 256 + 1);
    cr_assert_float_eq(p.attention, q + kv + h * 64 + a * 128 * h, 0.5);
    cr_assert_float_eq(p.dense_mlp, 0.0, 0.0);
    cr_assert_float_eq(p.shared_experts, 2.0 * h * 2048 * 1.5, 0.5);
    cr_assert_float_eq(p.routed_experts, 2.0 * h * 2048 * 256 * 1.5, 0.5);
    cr_assert_float_eq(p.replicated, 2.0 * h + h * 256, 0.5); /* norms + router, no bias */
    model_layer_param_counts(&m, false, &p);
    cr_assert_float_eq(p.dense_mlp, 2.0 * h * 18432 * 1.5, 0.5);
    cr_assert_float_eq(p.routed_experts, 0.0, 0.0);
    cr_assert_float_eq(p.replicated, 2.0 * h, 0.5);

    /* LayerNorm counts weight and bias (norm_size 2); router bias with biases on. */
    model_spec g;
    load_preset("gpt-oss-120b", &g);
    model_layer_param_counts(&g, true, &p);
    cr_assert_float_eq(p.replicated, 2.0 * 2880 + 2880.0 * 128 + 128, 0.5);
}

Test(model, total_params_match_published_sizes)
{
    struct {
        const char *name;
        int64_t mtp; /* -1 = as in the preset */
        double want, tol;
    } cases[] = {
        {"llama3-8b", -1, 8.03e9, 0.01},
        {"llama3-70b", -1, 70.6e9, 0.01},
        {"llama3.1-405b", -1, 405.8e9, 0.01},
        {"mixtral-8x7b", -1, 46.7e9, 0.01},
        {"deepseek-v3", 0, 671e9, 0.01},
        {"gpt3-175b", -1, 175e9, 0.01},
        {"llama2-7b", -1, 6.74e9, 0.01},
        {"llama2-70b", -1, 69.0e9, 0.01},
        {"qwen3-235b-a22b", -1, 235e9, 0.01},
        {"mixtral-8x22b", -1, 141e9, 0.01},
        {"nemotron4-340b", -1, 341e9, 0.02},
        {"kimi-k2", -1, 1.04e12, 0.02},
        {"megatron-gpt-177b-h100", -1, 177.18e9, 0.005}, /* models.csv 12*L*h^2 + 2*V*h */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        model_spec m;
        load_preset(cases[i].name, &m);
        if (cases[i].mtp >= 0)
            m.mtp_num_layers = cases[i].mtp;
        double n = model_total_params(&m, 1);
        cr_assert(fabs(n / cases[i].want - 1.0) <= cases[i].tol, "%s: %.4g params, published %.4g",
                  cases[i].name, n, cases[i].want);
    }
}

Test(model, mtp_adds_one_layer_of_the_last_type)
{
    model_spec m;
    load_preset("deepseek-v3", &m);
    cr_assert_eq(m.mtp_num_layers, 1);
    double with = model_total_params(&m, 1);
    m.mtp_num_layers = 0;
    double without = model_total_params(&m, 1);
    model_layer_params p;
    model_layer_param_counts(&m, true, &p);
    double layer = p.attention + p.dense_mlp + p.shared_experts + p.routed_experts + p.replicated;
    assert_rel_eq(with - without, layer, 1e-9, "MTP layer");
}

Test(model, tied_embeddings_count_once)
{
    model_spec m;
    vanilla_gpt(&m, 2, 64, 4, 1000, 16);
    double tied = model_total_params(&m, 1);
    m.share_embeddings_and_output_weights = false;
    double untied = model_total_params(&m, 1);
    cr_assert_float_eq(untied - tied, 64.0 * 1024, 0.5); /* h * padded V */
}

/* ---- every preset -------------------------------------------------------- */

Test(model, every_preset_parses_and_is_consistent)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/models", PARSIM_SOURCE_DIR);
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "cannot open %s", dir);
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".cfg") != 0)
            continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        model_spec m;
        load_preset_file(path, &m);
        count++;
        cr_assert(m.num_layers > 0 && m.num_layers <= MODEL_MAX_LAYERS, "%s", path);
        cr_assert(m.hidden_size > 0 && m.num_attention_heads > 0, "%s", path);
        cr_assert(m.ffn_hidden_size > 0 && m.vocab_size > 0 && m.seq_length > 0, "%s", path);
        if (m.multi_latent_attention) {
            cr_assert(m.kv_lora_rank > 0 && m.qk_head_dim > 0 && m.v_head_dim > 0, "%s", path);
        } else {
            cr_assert(m.num_attention_heads % model_query_groups(&m) == 0, "%s: a %% g", path);
            cr_assert(model_kv_channels(&m) > 0, "%s", path);
        }
        if (model_is_moe(&m)) {
            cr_assert(m.moe_router_topk >= 1 && m.moe_router_topk <= m.num_moe_experts, "%s",
                      path);
            cr_assert(model_num_moe_layers(&m) > 0, "%s: MoE without MoE layers", path);
        }
        double n = model_total_params(&m, 1);
        cr_assert(n > 1e8 && n < 2e12, "%s: %.3g params", path, n);
        if (!model_is_moe(&m) && !m.multi_latent_attention && m.mtp_num_layers == 0 && !m.hybrid) {
            /* Dense: the token-linear FLOPs are 6x the GEMM weights, which are
             * the parameters less norms and the untied input embedding. */
            double s = (double)m.seq_length, h = (double)m.hidden_size, L = (double)m.num_layers;
            double q = (double)(model_kv_channels(&m) * m.num_attention_heads);
            double ns = m.normalization == NORM_RMSNORM ? 1.0 : 2.0;
            double lin = model_flops_per_step(&m, 1, 1) / s - 6.0 * q * s * L;
            double gemm = n - L * 2.0 * h * ns - ns * h
                          - (m.share_embeddings_and_output_weights
                                 ? 0.0
                                 : h * (double)model_padded_vocab(&m, 1));
            assert_rel_eq(lin / 6.0, gemm, 1e-12, path);
        }
    }
    closedir(d);
    cr_assert_geq(count, 40, "only %d presets found in %s", count, dir);
}

/* The simulator reads presets through config.c (model.name); it must see the
 * same model as the direct reading above, moe_layer_freq default included. */
Test(model, presets_resolve_the_same_through_config)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/models", PARSIM_SOURCE_DIR);
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "cannot open %s", dir);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".cfg") != 0)
            continue;
        char name[256], path[2048], assign[300];
        snprintf(name, sizeof name, "%.*s", (int)(len - 4), e->d_name);
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        model_spec direct;
        load_preset_file(path, &direct);

        cfg_t *c = cfg_create(PARSIM_SOURCE_DIR);
        cr_assert_not_null(c);
        sim_err err;
        sim_err_clear(&err);
        const char *overrides[] = {"cluster.topology=dgx-h100", "cluster.num_gpus=8",
                                   "train.global_batch_size=8"};
        snprintf(assign, sizeof assign, "model.name=%s", name);
        cr_assert_eq(cfg_set_override(c, assign, &err), SIM_OK, "%s", err.msg);
        for (size_t i = 0; i < 3; i++)
            cr_assert_eq(cfg_set_override(c, overrides[i], &err), SIM_OK, "%s", err.msg);
        run_inputs *in = calloc(1, sizeof *in);
        cr_assert_not_null(in);
        int rc = cfg_resolve(c, in, &err);
        char msg[1024];
        sim_err_format(&err, msg, sizeof msg);
        cr_assert_eq(rc, SIM_OK, "%s: %s", name, msg);
        const model_spec *m = &in->model;
        cr_assert_eq(m->num_layers, direct.num_layers, "%s", name);
        cr_assert_eq(model_num_moe_layers(m), model_num_moe_layers(&direct), "%s", name);
        for (int64_t l = 0; l < m->num_layers; l++)
            cr_assert_eq(model_layer_is_moe(m, l), model_layer_is_moe(&direct, l), "%s layer %ld",
                         name, (long)l);
        for (int64_t tp = 1; tp <= 8; tp *= 2) {
            assert_rel_eq(model_total_params(m, tp), model_total_params(&direct, tp), REL_TOL,
                          name);
            assert_rel_eq(model_flops_per_step(m, 16, tp), model_flops_per_step(&direct, 16, tp),
                          REL_TOL, name);
        }
        free(in);
        cfg_destroy(c);
    }
    closedir(d);
}

/* Sliding-window attention (Megatron Bridge flop_utils): a windowed layer's
 * queries see W - W(W-1)/(2s) keys on average instead of s/2; with
 * window_attn_skip_freq N, 1-based layers n with n % N != 0 are windowed. */
Test(model, sliding_window_flops_and_pattern)
{
    model_spec m;
    hand_gqa(&m);
    double full = model_flops_per_step(&m, 8, 1);
    m.window_size = 128;
    for (int64_t l = 0; l < m.num_layers; l++)
        m.layers[l].window = (l + 1) % 2 != 0;
    cr_assert(model_layer_is_window(&m, 0) && !model_layer_is_window(&m, 1) && model_layer_is_window(&m, 2));
    cr_assert_eq(model_num_window_layers(&m), 14);
    double s = 4096, w = 128, B = 8, L_win = 14;
    double q = 24.0 * 160.0;
    double ctx_full = s / 2.0, ctx_win = w - w * (w - 1.0) / (2.0 * s);
    cr_assert(fabs(model_attention_context(&m, true) - ctx_win) < 1e-12);
    /* 3 (fwd, 2 bwd) x 2 (fma) x 2 (QK^T and PV) x q per key seen, per token */
    double saved = B * s * L_win * 12.0 * q * (ctx_full - ctx_win);
    assert_rel_eq(model_flops_per_step(&m, 8, 1), full - saved, REL_TOL, "windowed flops");
    /* A window as long as the sequence changes nothing. */
    m.window_size = 4096;
    assert_rel_eq(model_flops_per_step(&m, 8, 1), full, REL_TOL, "window >= s");
}
