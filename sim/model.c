/* model: parameter counts and FLOPs of a transformer, as Megatron computes
 * them.
 *
 * Two functions of Megatron-LM are transcribed here term by term (see
 * reference/megatron-formulas.md):
 *   - num_floating_point_operations (megatron/training/training.py, HEAD),
 *     §1.1, with Megatron Bridge's ffn_expansion_factor (3 for any gated
 *     linear unit, §1.6) and the padded vocabulary;
 *   - compute_weight_and_optimizer_memory
 *     (megatron/training/theoretical_memory_usage.py, HEAD), §2.1, for the
 *     parameter counts.
 * Both deliberately ignore what Megatron ignores: linear biases (all but the
 * router bias, which §2.1 counts), QK norms, position embeddings, the router
 * GEMM in FLOPs, MTP's eh projection in the parameter count.  The published
 * model sizes are therefore matched to within 1%, not exactly; the tests
 * compare against these formulas, not against a module-by-module count.
 *
 * Everything is computed in double: the counts reach 1e21 for a step and
 * Megatron's MLA core term has non-integer halves.
 */
#include "model.h"

#include <string.h>

void model_defaults(model_spec *m)
{
    memset(m, 0, sizeof *m);
    /* Megatron-LM arguments.py / TransformerConfig defaults. */
    m->make_vocab_size_divisible_by = 128;
    m->normalization = NORM_LAYERNORM;
    m->share_embeddings_and_output_weights = true; /* untie_embeddings... off */
    m->add_bias_linear = true;
    strcpy(m->position_embedding_type, "learned_absolute");
    m->moe_router_topk = 2;
    /* layers[] stays all zeros (attention + dense MLP): config fills it
     * from moe_layer_freq and window_attn_skip_freq. */
}

int64_t model_query_groups(const model_spec *m)
{
    /* Megatron: "if not args.group_query_attention: num_query_groups = a". */
    return m->num_query_groups > 0 ? m->num_query_groups : m->num_attention_heads;
}

int64_t model_kv_channels(const model_spec *m)
{
    if (m->kv_channels > 0)
        return m->kv_channels;
    return m->num_attention_heads > 0 ? m->hidden_size / m->num_attention_heads : 0;
}

int64_t model_moe_ffn(const model_spec *m)
{
    return m->moe_ffn_hidden_size > 0 ? m->moe_ffn_hidden_size : m->ffn_hidden_size;
}

bool model_is_moe(const model_spec *m)
{
    return m->num_moe_experts > 0;
}

/* Layer `layer` when it exists (0-based), else NULL. */
static const model_layer *layer_at(const model_spec *m, int64_t layer)
{
    return layer >= 0 && layer < m->num_layers && layer < MODEL_MAX_LAYERS ? &m->layers[layer] : NULL;
}

bool model_layer_is_moe(const model_spec *m, int64_t layer)
{
    const model_layer *l = layer_at(m, layer);
    return model_is_moe(m) && l && l->mlp == MODEL_MLP_MOE;
}

int64_t model_num_moe_layers(const model_spec *m)
{
    int64_t n = 0;
    for (int64_t i = 0; i < m->num_layers && i < MODEL_MAX_LAYERS; i++)
        n += model_layer_is_moe(m, i) ? 1 : 0;
    return n;
}

bool model_layer_is_window(const model_spec *m, int64_t layer)
{
    const model_layer *l = layer_at(m, layer);
    return m->window_size > 0 && l && l->window != 0;
}

int64_t model_num_window_layers(const model_spec *m)
{
    int64_t n = 0;
    for (int64_t i = 0; i < m->num_layers && i < MODEL_MAX_LAYERS; i++)
        n += model_layer_is_window(m, i) ? 1 : 0;
    return n;
}

double model_attention_context(const model_spec *m, bool window_layer)
{
    double s = (double)m->seq_length, w = (double)m->window_size;
    if (window_layer && w > 0 && w < s)
        return w - w * (w - 1.0) / (2.0 * s);
    return s / 2.0;
}

bool model_padded_vocab_checked(const model_spec *m, int64_t tp, int64_t *out)
{
    /* megatron/core/tokenizers/utils/build_tokenizer.py::vocab_size_with_padding */
    int64_t div = m->make_vocab_size_divisible_by > 0 ? m->make_vocab_size_divisible_by : 1;
    int64_t mult, padded;
    if (__builtin_mul_overflow(div, tp > 0 ? tp : 1, &mult) || m->vocab_size < 0)
        return false;
    int64_t units = m->vocab_size / mult + (m->vocab_size % mult != 0);
    if (__builtin_mul_overflow(units, mult, &padded))
        return false;
    *out = padded;
    return true;
}

int64_t model_padded_vocab(const model_spec *m, int64_t tp)
{
    int64_t v;
    return model_padded_vocab_checked(m, tp, &v) ? v : INT64_MAX;
}

/* 1 for RMSNorm (weight only), 2 for LayerNorm (weight and bias). */
static double norm_size(const model_spec *m)
{
    return m->normalization == NORM_RMSNORM ? 1.0 : 2.0;
}

/* 3/2 if the first MLP linear is doubled by a gated linear unit. */
static double glu_factor(const model_spec *m)
{
    return m->gated_linear_unit ? 1.5 : 1.0;
}

/* Attention parameters of one layer, §2.1. */
static double attention_params(const model_spec *m)
{
    double h = (double)m->hidden_size;
    double a = (double)m->num_attention_heads;
    if (m->multi_latent_attention) {
        double qk = (double)m->qk_head_dim;
        double rope = (double)m->qk_pos_emb_head_dim;
        double vd = (double)m->v_head_dim;
        double ns = norm_size(m);
        double q_term = m->q_lora_rank > 0
                            ? (double)m->q_lora_rank * (h + a * (qk + rope) + ns)
                            : h * a * (qk + rope);
        return q_term + (double)m->kv_lora_rank * (h + a * (qk + vd) + ns)
               + h * rope + a * vd * h;
    }
    double d = (double)model_kv_channels(m);
    double q = d * a;
    double kv = d * (double)model_query_groups(m);
    return 2.0 * h * (q + kv);
}

void model_layer_param_counts(const model_spec *m, bool moe_layer, model_layer_params *out)
{
    double h = (double)m->hidden_size;
    double glu = glu_factor(m);
    memset(out, 0, sizeof *out);
    out->attention = attention_params(m);
    out->replicated = 2.0 * h * norm_size(m); /* input and pre-MLP norms */
    if (moe_layer && model_is_moe(m)) {
        double e = (double)m->num_moe_experts;
        out->shared_experts = 2.0 * h * (double)m->moe_shared_expert_intermediate_size * glu;
        out->routed_experts = 2.0 * h * (double)model_moe_ffn(m) * e * glu;
        /* Router weight, plus its bias when linear biases are on (§2.1). No
         * shared-expert gate: parsim has no moe_shared_expert_gate key and
         * Megatron's default is off. */
        out->replicated += h * e + (m->add_bias_linear ? e : 0.0);
    } else {
        out->dense_mlp = 2.0 * h * (double)m->ffn_hidden_size * glu;
    }
}

static double layer_total(const model_layer_params *p)
{
    return p->attention + p->dense_mlp + p->shared_experts + p->routed_experts + p->replicated;
}

double model_total_params(const model_spec *m, int64_t tp)
{
    model_layer_params dense, moe;
    model_layer_param_counts(m, false, &dense);
    model_layer_param_counts(m, true, &moe);

    double l_moe = (double)model_num_moe_layers(m);
    double l_dense = (double)m->num_layers - l_moe;
    double h = (double)m->hidden_size;

    double block = layer_total(&dense) * l_dense + layer_total(&moe) * l_moe
                   + norm_size(m) * h; /* final norm */

    /* MTP layers take the type of the last decoder layer. */
    double mtp = (double)m->mtp_num_layers;
    bool last_is_moe = m->num_layers > 0 && model_layer_is_moe(m, m->num_layers - 1);
    double mtp_block = mtp * (last_is_moe ? layer_total(&moe) : layer_total(&dense));

    double v = (double)model_padded_vocab(m, tp);
    double embedding = h * v * (m->share_embeddings_and_output_weights ? 1.0 : 2.0);
    return block + mtp_block + embedding;
}

double model_flops_per_step(const model_spec *m, int64_t batch_size, int64_t tp)
{
    double h = (double)m->hidden_size;
    double a = (double)m->num_attention_heads;
    double s = (double)m->seq_length;
    double n_layers = (double)m->num_layers;

    /* BSHD, no packing: T = B*s, S2 = B*s^2. */
    double tokens = (double)batch_size * s;
    double seqlen_sq_sum = (double)batch_size * s * s;

    const double fwd_bwd = 3.0; /* fwd, bwd wgrad, bwd dgrad */
    const double fma = 2.0;     /* an m*n x n*k GEMM is 2mnk flops */
    /* Bridge flop_utils: 3 for any gated linear unit, else 2. */
    double ffn_exp = m->gated_linear_unit ? 3.0 : 2.0;

    /* Layer-type counts, MTP layers typed like the last decoder layer. */
    double l_moe = 0.0, l_dense = n_layers, k_used = 0.0;
    double last_is_moe = 0.0;
    if (model_is_moe(m)) {
        l_moe = (double)model_num_moe_layers(m);
        l_dense = n_layers - l_moe;
        k_used = (double)m->moe_router_topk;
        last_is_moe = m->num_layers > 0 && model_layer_is_moe(m, m->num_layers - 1) ? 1.0 : 0.0;
    }
    double mtp = (double)m->mtp_num_layers;
    l_moe += last_is_moe * mtp;
    l_dense += (1.0 - last_is_moe) * mtp;
    double l_all = n_layers + mtp; /* attention layers */
    /* Sliding-window layers attend to fewer keys (Bridge flop_utils). */
    double l_window = (double)model_num_window_layers(m);

    double f = (double)m->ffn_hidden_size;
    double f_e = (double)model_moe_ffn(m);
    double f_sh = (double)m->moe_shared_expert_intermediate_size;

    double attn_term, attn_core_term;
    if (m->multi_latent_attention) {
        double qk = (double)m->qk_head_dim;
        double rope = (double)m->qk_pos_emb_head_dim;
        double vd = (double)m->v_head_dim;
        double q_term = m->q_lora_rank > 0
                            ? (double)m->q_lora_rank * (h + a * (qk + rope) + 1.0)
                            : h * a * (qk + rope);
        attn_term = fwd_bwd * fma
                    * (q_term + (double)m->kv_lora_rank * (h + a * (qk + vd) + 1.0)
                       + h * rope + (a * vd) * h);
        attn_core_term = fwd_bwd * fma * (a * (qk + rope) / 2.0 + a * vd / 2.0);
    } else {
        double d = (double)model_kv_channels(m);
        double q = d * a;
        double kv = d * (double)model_query_groups(m);
        attn_term = fwd_bwd * fma * (h * (q + kv + kv) + q * h);
        /* "/2 causal mask", "*2 QK^T and (QK^T)V" */
        attn_core_term = fwd_bwd * fma * q / 2.0 * 2.0;
    }

    double v = (double)model_padded_vocab(m, tp);
    double routed = f_e * k_used * ffn_exp;

    double per_token = fwd_bwd * fma * h
                           * (f * ffn_exp * l_dense + routed * l_moe + f_sh * ffn_exp * l_moe)
                       + attn_term * l_all
                       + fwd_bwd * fma * mtp * (3.0 * h + 2.0 * h * h) /* MTP norms, eh proj */
                       + fwd_bwd * fma * h * v * (mtp + 1.0);          /* logits */
    double window_core = tokens * 2.0 * model_attention_context(m, true) * attn_core_term;
    return tokens * per_token + seqlen_sq_sum * attn_core_term * (l_all - l_window) + window_core * l_window;
}
