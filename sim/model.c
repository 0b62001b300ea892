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

#include <stdio.h>
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
    /* transformer_config.py:1259-1270; mamba_num_heads 0 = 2h / P. */
    m->mamba_state_dim = 128;
    m->mamba_head_dim = 64;
    m->mamba_num_groups = 8;
    m->mamba_chunk_size = 128;
    m->mamba_mem_eff_path = true;
    /* layers[] stays all zeros (attention + dense MLP): config fills it
     * from moe_layer_freq and window_attn_skip_freq. */
}

/* megatron/core/models/hybrid/hybrid_layer_allocation.py:14-26 (symbols);
 * megatron-features.md B.1.  The number of layers is the number of layer
 * symbols: a '*' layer is attention alone, a '-' layer an MLP alone. */
enum { SYM_LAYER = 0, SYM_PIPE = 1, SYM_MTP = 2, SYM_BAD = -1 };

/* One symbol at position i: a layer into *l, a separator, or SYM_BAD with msg. */
static int hybrid_symbol(char ch, size_t i, model_layer *l, char *msg, size_t cap)
{
    *l = (model_layer){ MODEL_MIXER_NONE, MODEL_MLP_NONE, 0 };
    const char *unmodeled = NULL;
    switch (ch) {
    case 'M': l->mixer = MODEL_MIXER_MAMBA; return SYM_LAYER;
    case '*': l->mixer = MODEL_MIXER_ATTENTION; return SYM_LAYER;
    case '-': l->mlp = MODEL_MLP_DENSE; return SYM_LAYER;
    case 'E': l->mlp = MODEL_MLP_MOE; return SYM_LAYER;
    case '|': return SYM_PIPE;
    case '/': return SYM_MTP;
    case 'G': unmodeled = "Gated DeltaNet"; break;
    case 'D': unmodeled = "DSA attention"; break;
    case '+': unmodeled = "MLA"; break;
    default:
        if ((unsigned char)ch >= 0x20 && (unsigned char)ch < 0x7f)
            snprintf(msg, cap, "unknown symbol '%c' at position %zu (symbols: M * - E | / and G D + not modeled)",
                     ch, i);
        else
            snprintf(msg, cap, "unknown byte 0x%02x at position %zu (symbols: M * - E | /)", (unsigned char)ch, i);
        return SYM_BAD;
    }
    snprintf(msg, cap, "symbol '%c' (%s) at position %zu is not modeled by parsim", ch, unmodeled, i);
    return SYM_BAD;
}

/* The MTP part pattern[from, to) (one depth) into out[]; its layer count,
 * or -1 with msg. */
static int32_t mtp_part(const char *pattern, size_t from, size_t to, model_layer *out, char *msg, size_t cap)
{
    int32_t n = 0;
    for (size_t i = from; i < to; i++) {
        model_layer l;
        int kind = hybrid_symbol(pattern[i], i, &l, msg, cap);
        if (kind == SYM_BAD)
            return -1;
        if (kind != SYM_LAYER) {
            snprintf(msg, cap, "'%c' at position %zu is inside an MTP part (an MTP depth is layer symbols only)",
                     pattern[i], i);
            return -1;
        }
        if (n >= MODEL_MAX_MTP_LAYERS) {
            snprintf(msg, cap, "MTP part has more than %d layers (position %zu)", MODEL_MAX_MTP_LAYERS, i);
            return -1;
        }
        out[n++] = l;
    }
    if (n == 0) {
        snprintf(msg, cap, "MTP part ending at position %zu has no layers (symbols M * - E)", to);
        return -1;
    }
    return n;
}

/* The '/'-parts after the main pattern (pattern[from] is the first '/'):
 * every depth must repeat the first one's symbols [assumed: parsim models
 * one MTP block type]. */
static int parse_mtp_parts(model_spec *m, const char *pattern, size_t from, char *msg, size_t cap)
{
    int32_t depth = 0, per = 0;
    size_t first_start = from + 1, first_len = 0;
    for (size_t at = from; pattern[at] == '/';) {
        size_t start = at + 1, end = start;
        while (pattern[end] && pattern[end] != '/')
            end++;
        model_layer part[MODEL_MAX_MTP_LAYERS] = { { 0 } };
        int32_t n = mtp_part(pattern, start, end, part, msg, cap);
        if (n < 0)
            return -1;
        if (depth == 0) {
            memcpy(m->mtp_layers, part, sizeof part);
            per = n;
            first_len = end - start;
        } else if (end - start != first_len || memcmp(pattern + start, pattern + first_start, first_len) != 0) {
            snprintf(msg, cap, "MTP part %d (position %zu) differs from the first one: every depth runs the same "
                     "layers", (int)depth + 1, start);
            return -1;
        }
        if (depth >= MODEL_MAX_LAYERS) {
            snprintf(msg, cap, "more than %d MTP parts (position %zu)", MODEL_MAX_LAYERS, at);
            return -1;
        }
        depth++;
        at = end;
    }
    m->mtp_layers_per_depth = per;
    m->mtp_pattern_depth = depth;
    return 0;
}

int model_hybrid_parse(model_spec *m, const char *pattern, char *msg, size_t cap)
{
    int64_t n = 0;
    int32_t seg = 0;
    bool pipes = false;
    int16_t seg_layers[MODEL_MAX_LAYERS + 2] = { 0 };
    size_t i = 0;
    for (; pattern[i] && pattern[i] != '/'; i++) {
        model_layer l;
        int kind = hybrid_symbol(pattern[i], i, &l, msg, cap);
        if (kind == SYM_BAD)
            return -1;
        if (kind == SYM_PIPE) {
            if (seg + 1 >= MODEL_MAX_LAYERS + 2) {
                snprintf(msg, cap, "more than %d pipeline segments ('|' at position %zu)", MODEL_MAX_LAYERS + 2, i);
                return -1;
            }
            pipes = true;
            seg++;
            continue;
        }
        if (n >= MODEL_MAX_LAYERS) {
            snprintf(msg, cap, "has more than %d layers (position %zu)", MODEL_MAX_LAYERS, i);
            return -1;
        }
        m->layers[n++] = l;
        seg_layers[seg]++;
    }
    if (n == 0) {
        snprintf(msg, cap, "has no layers (symbols M * - E)");
        return -1;
    }
    m->mtp_layers_per_depth = 0;
    m->mtp_pattern_depth = 0;
    if (pattern[i] == '/' && parse_mtp_parts(m, pattern, i, msg, cap) != 0)
        return -1;
    for (int64_t j = n; j < MODEL_MAX_LAYERS; j++)
        m->layers[j] = (model_layer){ MODEL_MIXER_NONE, MODEL_MLP_NONE, 0 };
    m->num_layers = n;
    m->hybrid = true;
    m->hybrid_segments = pipes ? seg + 1 : 0;
    memcpy(m->hybrid_segment_layers, seg_layers, sizeof seg_layers);
    return 0;
}

int model_mtp_pattern_parse(model_spec *m, const char *pattern, char *msg, size_t cap)
{
    model_layer part[MODEL_MAX_MTP_LAYERS] = { { 0 } };
    int32_t n = mtp_part(pattern, 0, strlen(pattern), part, msg, cap);
    if (n < 0)
        return -1;
    memcpy(m->mtp_layers, part, sizeof part);
    m->mtp_layers_per_depth = n;
    m->mtp_legacy_pattern = true;
    return 0;
}

int64_t model_mtp_layer_count(const model_spec *m)
{
    return m->hybrid ? m->mtp_num_layers * m->mtp_layers_per_depth : m->mtp_num_layers;
}

int64_t model_mtp_weight_depths(const model_spec *m)
{
    return m->mtp_use_repeated_layer && m->mtp_num_layers > 1 ? 1 : m->mtp_num_layers;
}

bool model_mtp_embeds(const model_spec *m)
{
    return m->hybrid && m->mtp_num_layers > 0;
}

int64_t model_mtp_moe_weight_layers(const model_spec *m)
{
    if (!model_is_moe(m))
        return 0;
    int64_t per = 0;
    if (m->hybrid)
        for (int32_t i = 0; i < m->mtp_layers_per_depth && i < MODEL_MAX_MTP_LAYERS; i++)
            per += m->mtp_layers[i].mlp == MODEL_MLP_MOE;
    else
        per = m->num_layers > 0 && model_layer_is_moe(m, m->num_layers - 1);
    return per * model_mtp_weight_depths(m);
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

bool model_has_mamba(const model_spec *m)
{
    for (int64_t i = 0; m->hybrid && i < m->num_layers && i < MODEL_MAX_LAYERS; i++)
        if (m->layers[i].mixer == MODEL_MIXER_MAMBA)
            return true;
    for (int32_t i = 0; m->hybrid && i < m->mtp_layers_per_depth && i < MODEL_MAX_MTP_LAYERS; i++)
        if (m->mtp_layers[i].mixer == MODEL_MIXER_MAMBA)
            return true;
    return false;
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
        /* Latent MoE: the experts are l x F_e, and the down (h -> l) and up
         * (l -> h) projections are replicated over TP (reference
         * megatron-formulas.md §2.1-2.2: h_r = moe_latent_size, latent in
         * the replicated part).  Shared experts stay at width h. */
        double l = (double)m->moe_latent_size;
        double h_r = l > 0 ? l : h;
        out->shared_experts = 2.0 * h * (double)m->moe_shared_expert_intermediate_size * glu;
        out->routed_experts = 2.0 * h_r * (double)model_moe_ffn(m) * e * glu;
        /* Router weight, plus its bias when linear biases are on (§2.1). No
         * shared-expert gate: parsim has no moe_shared_expert_gate key and
         * Megatron's default is off.  The expert bias is an fp32 tensor of
         * E per layer (Megatron keeps it as a buffer; the Super import card
         * counts it among its elements). */
        out->replicated += h * e + (m->add_bias_linear ? e : 0.0) + (m->moe_router_enable_expert_bias ? e : 0.0)
                           + (l > 0 ? 2.0 * h * l : 0.0);
    } else {
        out->dense_mlp = 2.0 * h * (double)m->ffn_hidden_size * glu;
    }
}

double model_mamba_d_inner(const model_spec *m)
{
    return (double)m->mamba_num_heads * (double)m->mamba_head_dim;
}

double model_mamba_in_proj_width(const model_spec *m)
{
    return 2.0 * model_mamba_d_inner(m) + 2.0 * (double)m->mamba_num_groups * (double)m->mamba_state_dim
           + (double)m->mamba_num_heads;
}

/* Parameters of one Mamba-2 mixer (megatron-features.md B.5):
 * in_proj h (2 d_in + 2GN + H), the depthwise conv over x, B, C with
 * its kernel and a bias ((d_in + 2GN) x (MAMBA_CONV_KERNEL + 1)), dt_bias,
 * A_log and D (3H), the gated RMSNorm (d_in) and out_proj d_in h. */
static double mamba_params(const model_spec *m)
{
    double h = (double)m->hidden_size, d_in = model_mamba_d_inner(m);
    double gn = (double)m->mamba_num_groups * (double)m->mamba_state_dim;
    double H = (double)m->mamba_num_heads;
    return h * model_mamba_in_proj_width(m) + (d_in + 2.0 * gn) * (MAMBA_CONV_KERNEL + 1.0) + 3.0 * H + d_in +
           d_in * h;
}

static void hybrid_layer_params(const model_spec *m, const model_layer *l, model_layer_params *out);

void model_layer_param_counts_at(const model_spec *m, int64_t layer, model_layer_params *out)
{
    if (!m->hybrid || layer < 0 || layer >= m->num_layers || layer >= MODEL_MAX_LAYERS) {
        model_layer_param_counts(m, model_layer_is_moe(m, layer), out);
        return;
    }
    hybrid_layer_params(m, &m->layers[layer], out);
}

static double layer_total(const model_layer_params *p)
{
    return p->attention + p->mamba + p->dense_mlp + p->shared_experts + p->routed_experts + p->mtp_proj
           + p->replicated;
}

/* One hybrid layer held as `l` (not necessarily in m->layers): its mixer or
 * its MLP, with one norm. */
static void hybrid_layer_params(const model_spec *m, const model_layer *l, model_layer_params *out)
{
    bool moe = l->mlp == MODEL_MLP_MOE && model_is_moe(m);
    model_layer_param_counts(m, moe, out);
    double h = (double)m->hidden_size;
    if (l->mixer != MODEL_MIXER_ATTENTION)
        out->attention = 0.0;
    if (l->mixer == MODEL_MIXER_MAMBA)
        out->mamba = mamba_params(m);
    if (l->mlp == MODEL_MLP_NONE) {
        out->dense_mlp = out->shared_experts = out->routed_experts = 0.0;
        out->replicated = h * norm_size(m); /* the mixer's norm */
    } else {
        out->replicated -= h * norm_size(m); /* one norm: the MLP's */
    }
}

static void params_add(model_layer_params *acc, const model_layer_params *p)
{
    acc->attention += p->attention;
    acc->dense_mlp += p->dense_mlp;
    acc->shared_experts += p->shared_experts;
    acc->routed_experts += p->routed_experts;
    acc->mamba += p->mamba;
    acc->mtp_proj += p->mtp_proj;
    acc->replicated += p->replicated;
}

/* Megatron's MultiTokenPredictionLayer: enorm and hnorm on the embedding
 * and the hidden state, eh_proj (2h -> h), the layers, final_layernorm. */
void model_mtp_depth_params(const model_spec *m, model_layer_params *out)
{
    double h = (double)m->hidden_size;
    memset(out, 0, sizeof *out);
    if (m->hybrid) {
        for (int32_t i = 0; i < m->mtp_layers_per_depth && i < MODEL_MAX_MTP_LAYERS; i++) {
            model_layer_params p;
            hybrid_layer_params(m, &m->mtp_layers[i], &p);
            params_add(out, &p);
        }
        out->replicated += 3.0 * norm_size(m) * h;
    } else {
        bool moe = m->num_layers > 0 && model_layer_is_moe(m, m->num_layers - 1);
        model_layer_param_counts(m, moe, out);
        if (moe)
            out->dense_mlp = 0.0;
        else
            out->shared_experts = out->routed_experts = 0.0;
        out->replicated += 2.0 * norm_size(m) * h;
    }
    out->mtp_proj = 2.0 * h * h;
}

double model_total_params(const model_spec *m, int64_t tp)
{
    if (m->hybrid) {
        double block = norm_size(m) * (double)m->hidden_size; /* final norm */
        for (int64_t l = 0; l < m->num_layers; l++) {
            model_layer_params p;
            model_layer_param_counts_at(m, l, &p);
            block += layer_total(&p);
        }
        if (m->mtp_num_layers > 0) {
            model_layer_params p;
            model_mtp_depth_params(m, &p);
            block += (double)model_mtp_weight_depths(m) * layer_total(&p);
        }
        double v = (double)model_padded_vocab(m, tp);
        return block + (double)m->hidden_size * v * (m->share_embeddings_and_output_weights ? 1.0 : 2.0);
    }
    model_layer_params dense, moe;
    model_layer_param_counts(m, false, &dense);
    model_layer_param_counts(m, true, &moe);

    double l_moe = (double)model_num_moe_layers(m);
    double l_dense = (double)m->num_layers - l_moe;
    double h = (double)m->hidden_size;

    double block = layer_total(&dense) * l_dense + layer_total(&moe) * l_moe
                   + norm_size(m) * h; /* final norm */

    /* MTP layers take the type of the last decoder layer. */
    double mtp = (double)model_mtp_weight_depths(m);
    bool last_is_moe = m->num_layers > 0 && model_layer_is_moe(m, m->num_layers - 1);
    double mtp_block = mtp * (last_is_moe ? layer_total(&moe) : layer_total(&dense));

    double v = (double)model_padded_vocab(m, tp);
    double embedding = h * v * (m->share_embeddings_and_output_weights ? 1.0 : 2.0);
    return block + mtp_block + embedding;
}

/* Megatron Bridge's hybrid_flops (training/utils/flop_utils.py:801-945,
 * megatron-features.md B.4): per layer symbol, attention
 * 4Th(q + kv) + 2 sum(L^2) q, MLP 4ThF (x1.5 gated), MoE 4Th F_e k and
 * shared 4Th F_sh (x1.5 gated; with a latent l the routed term is
 * 4Tl F_e k + 4Thl), Mamba 2Th(2 d_in + 2GN + H) + 7 T d_in N + 2 T d_in h
 * with d_in = 2h as Bridge hard-codes it (the simulated time uses the true
 * H x P), logits 2ThV; the MTP symbols count once per depth and the logits
 * (1 + mtp) times; all x3 (forward, two backward). */
static double hybrid_layer_flops(const model_spec *m, const model_layer *ly, double T, double sq)
{
    double h = (double)m->hidden_size;
    double glu = m->gated_linear_unit ? 1.5 : 1.0;
    double d = (double)model_kv_channels(m);
    double q = d * (double)m->num_attention_heads, kv = d * (double)model_query_groups(m);
    double d_in = 2.0 * h, gn = (double)m->mamba_num_groups * (double)m->mamba_state_dim;
    double fwd = 0.0;
    if (ly->mixer == MODEL_MIXER_ATTENTION)
        fwd += 4.0 * T * h * (q + kv) + 2.0 * sq * q;
    else if (ly->mixer == MODEL_MIXER_MAMBA)
        fwd += 2.0 * T * h * (2.0 * d_in + 2.0 * gn + (double)m->mamba_num_heads)
               + 7.0 * T * d_in * (double)m->mamba_state_dim + 2.0 * T * d_in * h;
    if (ly->mlp == MODEL_MLP_DENSE) {
        fwd += 4.0 * T * h * (double)m->ffn_hidden_size * glu;
    } else if (ly->mlp == MODEL_MLP_MOE && model_is_moe(m)) {
        double routed = (double)model_moe_ffn(m) * (double)m->moe_router_topk * glu;
        double l = (double)m->moe_latent_size;
        fwd += l > 0 ? 4.0 * T * l * routed + 4.0 * T * h * l : 4.0 * T * h * routed;
        fwd += 4.0 * T * h * (double)m->moe_shared_expert_intermediate_size * glu;
    }
    return fwd;
}

static double hybrid_flops(const model_spec *m, int64_t batch_size, int64_t tp)
{
    double h = (double)m->hidden_size, s = (double)m->seq_length;
    double T = (double)batch_size * s, sq = (double)batch_size * s * s;
    double fwd = 0.0, mtp_depth = 0.0;
    for (int64_t l = 0; l < m->num_layers && l < MODEL_MAX_LAYERS; l++)
        fwd += hybrid_layer_flops(m, &m->layers[l], T, sq);
    for (int32_t l = 0; l < m->mtp_layers_per_depth && l < MODEL_MAX_MTP_LAYERS; l++)
        mtp_depth += hybrid_layer_flops(m, &m->mtp_layers[l], T, sq);
    double mtp = (double)m->mtp_num_layers;
    fwd += mtp * mtp_depth;
    fwd += 2.0 * T * h * (double)model_padded_vocab(m, tp) * (1.0 + mtp);
    return 3.0 * fwd;
}

double model_flops_per_step(const model_spec *m, int64_t batch_size, int64_t tp)
{
    if (m->hybrid)
        return hybrid_flops(m, batch_size, tp);
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
    /* Latent MoE (§1.1): the experts run at width l, plus the two l x h projections. */
    double latent = (double)m->moe_latent_size;
    double routed = latent > 0 ? f_e * k_used * ffn_exp * latent / h + 2.0 * latent : f_e * k_used * ffn_exp;

    double per_token = fwd_bwd * fma * h
                           * (f * ffn_exp * l_dense + routed * l_moe + f_sh * ffn_exp * l_moe)
                       + attn_term * l_all
                       + fwd_bwd * fma * mtp * (3.0 * h + 2.0 * h * h) /* MTP norms, eh proj */
                       + fwd_bwd * fma * h * v * (mtp + 1.0);          /* logits */
    double window_core = tokens * 2.0 * model_attention_context(m, true) * attn_core_term;
    return tokens * per_token + seqlen_sq_sum * attn_core_term * (l_all - l_window) + window_core * l_window;
}
