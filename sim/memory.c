#include "memory.h"

#include <math.h>
#include <stdlib.h>

/* Bytes per parameter (reference §2.2): bf16 weights, gradients in fp32
 * when grad_reduce_in_fp32 (Megatron's main_grad) else in bf16, and fp32
 * master weights + Adam m and v (12 B) sharded over D ranks by the
 * distributed optimizer. */
#define WEIGHT_BYTES 2.0
#define MASTER_AND_ADAM_BYTES 12.0

static bool is_first_virtual(const strategy_t *s, int64_t stage, int64_t chunk)
{
    return strategy_vstage(s, stage, chunk) == 0;
}

static bool is_last_virtual(const strategy_t *s, int64_t stage, int64_t chunk)
{
    return strategy_vstage(s, stage, chunk) == s->pp * s->v - 1;
}

void memory_layer_params(const run_inputs *in, const strategy_t *s, int64_t layer, double *dense,
                         double *expert)
{
    model_layer_params p;
    bool moe = model_layer_is_moe(&in->model, layer);
    model_layer_param_counts_at(&in->model, layer, &p);
    *dense = (p.attention + p.mamba + (moe ? p.shared_experts : p.dense_mlp)) / (double)s->tp + p.replicated;
    *expert = moe ? p.routed_experts / (double)(s->ep * s->etp) : 0.0;
}

/* A layer's figures memoized for one (in, s) by its type: outside a hybrid
 * model a layer's parameters depend only on whether it is an MoE layer, so
 * a stage's loops (memory_static: every chunk three times over) take them
 * once per type instead of once per layer.  The same doubles are added in
 * the same order: the sums are unchanged. */
typedef struct layer_memo {
    bool have[2];
    double tp_sharded[2], replicated[2], routed[2]; /* memory_chunk_params' terms */
    bool have_units[2];
    mem_units units[2]; /* memory_unit_params */
} layer_memo;

static void chunk_layer_terms(const model_spec *m, int64_t l, layer_memo *memo, double *tp_sharded,
                              double *replicated, double *routed)
{
    bool moe = model_layer_is_moe(m, l);
    if (memo && memo->have[moe]) {
        *tp_sharded = memo->tp_sharded[moe];
        *replicated = memo->replicated[moe];
        *routed = memo->routed[moe];
        return;
    }
    model_layer_params p;
    model_layer_param_counts_at(m, l, &p);
    *tp_sharded = p.attention + p.mamba + (moe ? p.shared_experts : p.dense_mlp);
    *replicated = p.replicated;
    *routed = moe ? p.routed_experts : 0.0;
    if (memo && !m->hybrid) {
        memo->have[moe] = true;
        memo->tp_sharded[moe] = *tp_sharded;
        memo->replicated[moe] = *replicated;
        memo->routed[moe] = *routed;
    }
}

static void chunk_params(const run_inputs *in, const strategy_t *s, int64_t stage, int64_t chunk, layer_memo *memo,
                         double *dense, double *expert)
{
    const model_spec *m = &in->model;
    const double h = (double)m->hidden_size;
    const double norm = m->normalization == NORM_RMSNORM ? 1.0 : 2.0;
    double tp_sharded = 0, replicated = 0, routed = 0;

    int64_t first, count;
    strategy_chunk_layers(s, stage, chunk, &first, &count);
    for (int64_t l = first; l < first + count; l++) {
        double t, r, e;
        chunk_layer_terms(m, l, memo, &t, &r, &e);
        tp_sharded += t;
        replicated += r;
        routed += e;
    }
    const double vocab = (double)model_padded_vocab(m, s->tp);
    if (is_first_virtual(s, stage, chunk)) {
        tp_sharded += h * vocab; /* word embedding */
        if (m->position_embedding_type[0] == 'l')
            replicated += h * (double)m->seq_length; /* learned positions */
    }
    if (is_last_virtual(s, stage, chunk)) {
        replicated += norm * h; /* final norm */
        /* The output layer: its own weight when untied; with tied weights
         * and PP > 1 the last stage keeps a copy of the embedding. */
        if (!m->share_embeddings_and_output_weights || s->pp > 1)
            tp_sharded += h * vocab;
        /* Hybrid MTP looks up the embedding here: its own copy when the
         * output layer is untied and the first stage is another. */
        if (model_mtp_embeds(m) && s->pp > 1 && !m->share_embeddings_and_output_weights)
            tp_sharded += h * vocab;
        /* MTP blocks live on the last stage: per depth its layers (a
         * transformer's: one of the last decoder layer's type; a hybrid's:
         * the MTP pattern), the eh projection (2h -> h) and the norms. */
        if (m->mtp_num_layers > 0) {
            model_layer_params p;
            model_mtp_depth_params(m, &p);
            double k = (double)model_mtp_weight_depths(m);
            tp_sharded += k * (p.attention + p.mamba + p.dense_mlp + p.shared_experts + p.mtp_proj);
            replicated += k * p.replicated;
            routed += k * p.routed_experts;
        }
    }
    *dense = tp_sharded / (double)s->tp + replicated;
    *expert = routed / (double)(s->ep * s->etp);
}

void memory_chunk_params(const run_inputs *in, const strategy_t *s, int64_t stage,
                         int64_t chunk, double *dense, double *expert)
{
    chunk_params(in, s, stage, chunk, NULL, dense, expert);
}

/* LoRA adapters of one layer on one GPU: A (in -> r) and B (r -> out) per
 * target.  Column-parallel targets (qkv, fc1) shard B's output over TP,
 * row-parallel ones (proj, fc2) A's input, as Megatron Bridge's adapters
 * follow the layer they wrap. */
static double lora_layer_params(const run_inputs *in, const strategy_t *s)
{
    const model_spec *m = &in->model;
    const double r = (double)in->peft.dim, t = (double)s->tp, h = (double)m->hidden_size;
    const double d = (double)model_kv_channels(m), a = (double)m->num_attention_heads;
    const double g = (double)model_query_groups(m), F = (double)m->ffn_hidden_size;
    const double glu = m->gated_linear_unit ? 2.0 : 1.0;
    const unsigned tg = in->peft.targets;
    double n = 0;
    if (tg & LORA_QKV)
        n += r * (h + (a + 2.0 * g) * d / t);
    if (tg & LORA_PROJ)
        n += r * (a * d / t + h);
    if (tg & LORA_FC1)
        n += r * (h + glu * F / t);
    if (tg & LORA_FC2)
        n += r * (F / t + h);
    return n;
}

void memory_layer_trained_params(const run_inputs *in, const strategy_t *s, int64_t layer, double *dense,
                                 double *expert)
{
    if (!in->peft.lora) {
        memory_layer_params(in, s, layer, dense, expert);
        return;
    }
    *dense = lora_layer_params(in, s);
    *expert = 0.0;
}

void memory_chunk_trained_params(const run_inputs *in, const strategy_t *s, int64_t stage, int64_t chunk,
                                 double *dense, double *expert)
{
    if (!in->peft.lora) {
        memory_chunk_params(in, s, stage, chunk, dense, expert);
        return;
    }
    int64_t first, count;
    strategy_chunk_layers(s, stage, chunk, &first, &count);
    *dense = (double)count * lora_layer_params(in, s);
    *expert = 0.0;
}

bool memory_embedding_is_unit(const run_inputs *in, const strategy_t *s, int64_t stage, int64_t chunk)
{
    return is_first_virtual(s, stage, chunk) && (!in->model.share_embeddings_and_output_weights || s->pp > 1);
}

static void unit_params(const run_inputs *in, const strategy_t *s, int64_t layer, layer_memo *memo, mem_units *u)
{
    const model_spec *m = &in->model;
    if (layer >= 0) {
        bool moe = model_layer_is_moe(m, layer);
        if (memo && memo->have_units[moe]) {
            *u = memo->units[moe];
            return;
        }
        memory_layer_params(in, s, layer, &u->w_dense, &u->w_expert);
        memory_layer_trained_params(in, s, layer, &u->t_dense, &u->t_expert);
        if (memo && !m->hybrid) {
            memo->have_units[moe] = true;
            memo->units[moe] = *u;
        }
        return;
    }
    const double h = (double)m->hidden_size;
    u->w_dense = h * (double)model_padded_vocab(m, s->tp) / (double)s->tp +
                 (m->position_embedding_type[0] == 'l' ? h * (double)m->seq_length : 0.0);
    u->w_expert = u->t_expert = 0.0;
    u->t_dense = in->peft.lora ? 0.0 : u->w_dense; /* LoRA: the base is frozen */
}

void memory_unit_params(const run_inputs *in, const strategy_t *s, int64_t layer, mem_units *u)
{
    unit_params(in, s, layer, NULL, u);
}

static void chunk_units(const run_inputs *in, const strategy_t *s, int64_t stage, int64_t chunk, layer_memo *memo,
                        mem_units *out)
{
    int64_t first, count;
    strategy_chunk_layers(s, stage, chunk, &first, &count);
    *out = (mem_units){0};
    for (int64_t l = memory_embedding_is_unit(in, s, stage, chunk) ? -1 : first; l < first + count; l++) {
        mem_units u;
        unit_params(in, s, l, memo, &u);
        out->w_dense += u.w_dense;
        out->w_expert += u.w_expert;
        out->t_dense += u.t_dense;
        out->t_expert += u.t_expert;
    }
}

void memory_chunk_units(const run_inputs *in, const strategy_t *s, int64_t stage, int64_t chunk, mem_units *out)
{
    chunk_units(in, s, stage, chunk, NULL, out);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The unsharded buffers of the units in flight, per parameter of a unit
 * (gathered parameters under ZeRO-3, the gradients before their
 * reduce-scatter under ZeRO-2 and 3) times the parameters of two units:
 * with the double buffer two of the most common unit size (the mode; of
 * equally common sizes the largest), as Megatron-FSDP sizes its buffer
 * pair; without it the two largest units, the most the one-ahead prefetch
 * holds at once. */
static double unit_buffer_params(const run_inputs *in, const strategy_t *s, int64_t stage, layer_memo *memo)
{
    double size[MODEL_MAX_LAYERS + 1];
    int n = 0;
    for (int64_t c = 0; c < s->v; c++) {
        int64_t first, count;
        strategy_chunk_layers(s, stage, c, &first, &count);
        for (int64_t l = memory_embedding_is_unit(in, s, stage, c) ? -1 : first; l < first + count; l++) {
            mem_units u;
            unit_params(in, s, l, memo, &u);
            if (n < MODEL_MAX_LAYERS + 1)
                size[n++] = u.w_dense + u.w_expert;
        }
    }
    if (n == 0)
        return 0.0;
    qsort(size, (size_t)n, sizeof *size, cmp_double);
    if (!in->ddp.fsdp_double_buffer)
        return size[n - 1] + (n > 1 ? size[n - 2] : 0.0);
    double mode = size[0];
    int best = 0;
    for (int i = 0, j; i < n; i = j) {
        for (j = i; j < n && size[j] == size[i]; j++)
            ;
        if (j - i >= best) {
            best = j - i;
            mode = size[i];
        }
    }
    return 2.0 * mode;
}

double memory_param_gather_bytes(const run_inputs *in)
{
    return in->ddp.fp8_param_gather ? 1.0 : WEIGHT_BYTES;
}

/* memory_static with the layers' figures memoized in memo (one per
 * (in, s)); without LoRA the trained parameters are the parameters. */
static void static_mem(const run_inputs *in, const strategy_t *s, int64_t stage, layer_memo *memo,
                       stage_static_mem *out)
{
    double dense = 0, expert = 0, tr_dense = 0, tr_expert = 0;
    mem_units units = {0};
    for (int64_t c = 0; c < s->v; c++) {
        double d, e;
        chunk_params(in, s, stage, c, memo, &d, &e);
        dense += d;
        expert += e;
        if (in->peft.lora)
            memory_chunk_trained_params(in, s, stage, c, &d, &e);
        tr_dense += d;
        tr_expert += e;
        mem_units u;
        chunk_units(in, s, stage, c, memo, &u);
        units.w_dense += u.w_dense;
        units.w_expert += u.w_expert;
        units.t_dense += u.t_dense;
        units.t_expert += u.t_expert;
    }
    double grad_bytes = in->ddp.grad_reduce_in_fp32 ? 4.0 : 2.0;
    /* Dense parameters shard over DP x CP, expert ones over expert-DP
     * (within an optimizer instance; HFSDP shards the optimizer state over
     * the instances too).  Megatron-FSDP's units (layers, embedding) shard
     * their gradients (ZeRO-2) and weights (ZeRO-3); the other parameters
     * (output layer, final norm, MTP) stay whole as under the distributed
     * optimizer (megatron-features.md C.1: "Non-unit parameters stay
     * unsharded"). */
    const double din = (double)s->dp_inner, ein = (double)s->edp_inner;
    const double o = s->hfsdp ? (double)s->dp_outer : 1.0;
    double d_dense = s->zero >= DP_SHARD_OPTIM ? din * o : 1.0;
    double d_expert = s->zero >= DP_SHARD_OPTIM ? ein * o : 1.0;
    double w_whole = dense + expert, g_whole = tr_dense + tr_expert;
    double w_shard = 0, g_shard = 0, buffer = 0;
    if (s->zero == DP_SHARD_OPTIM_GRADS_PARAMS) {
        w_whole -= units.w_dense + units.w_expert;
        w_shard = units.w_dense / din + units.w_expert / ein;
    }
    if (s->zero >= DP_SHARD_OPTIM_GRADS) {
        g_whole -= units.t_dense + units.t_expert;
        g_shard = units.t_dense / din + units.t_expert / ein;
        buffer = unit_buffer_params(in, s, stage, memo);
    }
    out->dense_params = dense;
    out->expert_params = expert;
    out->fsdp_buffer_bytes = buffer * ((s->zero == DP_SHARD_OPTIM_GRADS_PARAMS ? memory_param_gather_bytes(in) : 0.0) +
                                       grad_bytes);
    /* LoRA adapters are bf16 weights beside the frozen base. */
    out->weights_bytes = WEIGHT_BYTES * (w_whole + w_shard + (in->peft.lora ? tr_dense : 0.0));
    out->gradients_bytes = grad_bytes * (g_whole + g_shard);
    out->shard_params = tr_dense / d_dense + tr_expert / d_expert;
    out->optimizer_bytes = MASTER_AND_ADAM_BYTES * out->shard_params;
    /* The buffers of the units in flight count with the weights and
     * gradients they hold. */
    if (s->zero == DP_SHARD_OPTIM_GRADS_PARAMS)
        out->weights_bytes += buffer * memory_param_gather_bytes(in);
    if (s->zero >= DP_SHARD_OPTIM_GRADS)
        out->gradients_bytes += buffer * grad_bytes;
}

void memory_static(const run_inputs *in, const strategy_t *s, int64_t stage, stage_static_mem *out)
{
    layer_memo memo = {0};
    static_mem(in, s, stage, &memo, out);
}

/* What the attention half of a multi-latent attention layer saves for its
 * backward, from Megatron Core's MLASelfAttention (multi_latent_attention.py)
 * with the Transformer Engine layer spec, in bytes per token of this rank
 * (s/cp x b tokens); "/sp" is /t with SP, else whole:
 *   2 h / sp        the input norm's input [s/sp, b, h]
 *   2 h / sp        its output, the down projections' input [s/sp, b, h]
 *                   (not with layernorm recomputed)
 *   1 h / sp        the dropout mask of bias-dropout-add [s/sp, b, h]
 *   2 c (q_lora_rank + kv_lora_rank) / sp
 *                   the latents [s/sp, b, r]: the down projections are
 *                   replicated over TP on this rank's tokens, the up
 *                   projections gather their input and save its local
 *                   shard; c = 2 with qk_layernorm (the latent norm fused
 *                   into the up projection, TELayerNormColumnParallelLinear,
 *                   saves its input and its output), else 1; no q latent
 *                   without q_lora_rank (the query is then the
 *                   column-parallel projection of the hidden states)
 *   2 a (qk + rope) / t   q [s, b, a/t, qk + rope]  } the up projections'
 *   2 a (qk + rope) / t   k [s, b, a/t, qk + rope]  } outputs after RoPE
 *   2 a v / t             v [s, b, a/t, v]          } (k_pe broadcast over
 *                                                     the heads), the core
 *                                                     attention's inputs
 *   2 a v / t       the core attention's output [s, b, a/t, v]
 * recompute_modules mla_up_proj runs the up projections and RoPE as a
 * CheckpointWithoutOutput: its forward runs without autograd, so the fused
 * norms' outputs are not saved (c = 1) and q, k, v are freed after the core
 * attention; it saves its inputs, the latents (the norms' inputs, counted
 * above) and
 *   2 rope          k_pe [s, b, rope], all-gathered over the sequence under
 *                   SP and so not split [assumed: k_pe's gather as in
 *                   get_query_key_value_tensors; without SP it is a view of
 *                   the down projection's output, counted at its own width].
 * mla_activation gives the widths and what is kept; the caller adds them
 * to the lines every attention half has (the first three, the core
 * output). */
typedef struct mla_saved {
    double latent;       /* split by SP */
    double qk, v;        /* per-rank widths before /t: a (qk + rope), a v */
    double rope_key;     /* not split: k_pe kept by the mla_up_proj checkpoint */
    bool up_recomputed;  /* q, k, v not kept */
} mla_saved;

static mla_saved mla_activation(const model_spec *m, bool up_recomputed)
{
    double a = (double)m->num_attention_heads;
    double lat = (double)(m->q_lora_rank + m->kv_lora_rank);
    double copies = m->qk_layernorm && !up_recomputed ? 2.0 : 1.0;
    return (mla_saved){ .latent = copies * lat,
                        .qk = a * (double)(m->qk_head_dim + m->qk_pos_emb_head_dim),
                        .v = a * (double)m->v_head_dim,
                        .rope_key = up_recomputed ? (double)m->qk_pos_emb_head_dim : 0.0,
                        .up_recomputed = up_recomputed };
}

/* Per-layer activations (Korthikanti et al. 2022, Table 2 and §4.1),
 * generalised: Q, K, V and the core-attention output at their GQA/MLA
 * widths (with MLA's latents, mla_activation), the MLP at width F (2F for
 * the GLU input), MoE rows after dispatch.  The s^2 score tensors are
 * never stored: attention runs as a fused flash kernel, so "none" and
 * "selective core_attn" store the same.  Bytes at 2 per bf16 element, 1
 * per dropout-mask element. */
/* A layer with the given mixer and MLP (a transformer layer has both; a
 * hybrid one either).  Each half keeps its norm input, its GEMM input
 * after the norm and its dropout mask.  A Mamba-2 mixer keeps what
 * mamba_split_conv1d_scan_combined saves (megatron-features.md B.5,
 * derived there): the in_proj output zxBCdt (2 d_in + 2GN + H), out_x, the
 * gated norm's input and out_proj's input (d_in each), over TP; conv
 * outputs and chunk states are recomputed in its backward.  With CP the
 * kernel saves zxBCdt after the all-to-all: the whole sequence at 1/cp of
 * the widths, the same per token of this rank but for the B and C groups
 * repeated r = group_repeat_count times, so per token of s/cp, bf16:
 *   (2 d_in + 2 r G N + H + 3 d_in) / t.
 * Unfused (use_mamba_mem_eff_path false) the conv output x, B, C
 * (d_in + 2 r G N) is kept for the scan, which keeps its output y (the
 * gated norm's input, d_in) and dA_cumsum (fp32 per head) [assumed from
 * mamba_ssm's chunk-scan autograd function]; out_proj's input as before:
 *   (2 d_in + 2 r G N + H + 3 d_in + 2 r G N) / t elements + 4 H / t bytes. */
static double layer_activation_bytes(const run_inputs *in, const strategy_t *s, recompute_kind rg, int mixer, int mlp)
{
    const model_spec *m = &in->model;
    const parallel_spec *par = &s->par;
    const double t = (double)s->tp;
    const double sb = (double)m->seq_length / (double)s->cp * (double)in->train.micro_batch_size;
    const double h = (double)m->hidden_size;
    const bool sp = par->sequence_parallel;
    const double shard = sp ? t : 1.0; /* sequence-sharded part of the layer */

    if (rg == RECOMPUTE_FULL) {
        /* Only the input of each recompute group is kept. */
        double per_group = 2.0 * sb * h / shard;
        double n = par->recompute_num_layers > 0 ? (double)par->recompute_num_layers : 1.0;
        return per_group / n;
    }
    unsigned mods = rg == RECOMPUTE_SELECTIVE ? par->recompute_modules : 0u;

    double q, kv_k, kv_v;
    mla_saved mla = { 0 };
    bool is_mla = mixer == MODEL_MIXER_ATTENTION && m->multi_latent_attention;
    if (is_mla) {
        mla = mla_activation(m, (mods & RECOMPUTE_MOD_MLA_UP_PROJ) != 0u);
        q = kv_k = mla.qk;
        kv_v = mla.v;
    } else {
        double d = (double)model_kv_channels(m);
        q = d * (double)m->num_attention_heads;
        kv_k = kv_v = d * (double)model_query_groups(m);
    }
    double core_out = is_mla ? kv_v : q;

    /* Not split by TP (split by SP): two norm inputs (4), the two GEMM
     * inputs after the norms (4; dropped when layernorm is recomputed),
     * two dropout masks (2). */
    double ln_out = (mods & RECOMPUTE_MOD_LAYERNORM) ? 0.0 : 4.0;
    double half = (2.0 + ln_out / 2.0 + 1.0) * sb * h;
    double seq_part = (mixer != MODEL_MIXER_NONE ? half : 0.0) + (mlp != MODEL_MLP_NONE ? half : 0.0);

    double tp_part = 0.0, unsplit = 0.0;
    if (mixer == MODEL_MIXER_ATTENTION) {
        /* Split by TP: Q, K, V (not kept under mla_up_proj) and the
         * core-attention output. */
        tp_part = 2.0 * sb * ((mla.up_recomputed ? 0.0 : q + kv_k + kv_v) + core_out);
        /* MLA's latents (split by SP) and the checkpoint's rope key (not
         * split). */
        seq_part += 2.0 * sb * mla.latent;
        unsplit += 2.0 * sb * mla.rope_key;
        /* Unfused attention keeps the softmax output (2 B), its dropout
         * mask (1 B) and dropout output (2 B) per score: 5 a s^2 b
         * (Korthikanti, Table 2), the queries of this CP rank against
         * every key. */
        if (par->attention_backend == ATTN_UNFUSED && !(mods & RECOMPUTE_MOD_CORE_ATTN))
            tp_part += 5.0 * (double)m->num_attention_heads * sb * (double)m->seq_length;
    } else if (mixer == MODEL_MIXER_MAMBA) {
        double r = (double)strategy_mamba_group_repeat(m, s->tp, s->cp);
        double rgn = (r - 1.0) * (double)m->mamba_num_groups * (double)m->mamba_state_dim; /* the repeats */
        tp_part = 2.0 * sb * (model_mamba_in_proj_width(m) + 2.0 * rgn + 3.0 * model_mamba_d_inner(m));
        if (!m->mamba_mem_eff_path)
            tp_part += 2.0 * sb * 2.0 * (rgn + (double)m->mamba_num_groups * (double)m->mamba_state_dim) +
                       4.0 * sb * (double)m->mamba_num_heads;
    }
    bool moe_layer = mlp == MODEL_MLP_MOE;

    double glu = m->gated_linear_unit ? 2.0 : 1.0;
    double moe_part = 0.0;
    if (mlp == MODEL_MLP_DENSE) {
        double F = (double)m->ffn_hidden_size;
        if (!(mods & RECOMPUTE_MOD_MLP))
            tp_part += 2.0 * sb * F * glu + 2.0 * sb * F; /* fc1 out, activation out */
    } else if (moe_layer) {
        double Fsh = (double)m->moe_shared_expert_intermediate_size;
        if (Fsh > 0 && !(mods & RECOMPUTE_MOD_SHARED_EXPERTS))
            tp_part += 2.0 * sb * Fsh * glu + 2.0 * sb * Fsh;
        if (!(mods & RECOMPUTE_MOD_MOE)) {
            /* Rows an expert rank holds: its tokens times top-k, gathered
             * over ETP (uniform routing). */
            double tokens = sb / shard;
            double rows = tokens * (double)m->moe_router_topk * (double)s->etp;
            double Fe = (double)model_moe_ffn(m) / (double)s->etp;
            double act = (mods & RECOMPUTE_MOD_MOE_ACT) ? 0.0 : 2.0 * rows * Fe;
            /* Latent MoE: the rows are l wide, and the up projection keeps
             * its l-wide input per token. */
            double l = (double)m->moe_latent_size;
            double width = l > 0 ? l : h;
            moe_part = 2.0 * rows * width + 2.0 * rows * Fe * glu + act
                       + tokens * (double)m->num_moe_experts * 4.0 /* router logits fp32 */
                       + (l > 0 ? 2.0 * tokens * l : 0.0);
        }
    }
    return seq_part / shard + tp_part / t + moe_part + unsplit;
}

double memory_layer_activation_bytes(const run_inputs *in, const strategy_t *s, bool moe_layer)
{
    return layer_activation_bytes(in, s, s->par.recompute_granularity, MODEL_MIXER_ATTENTION,
                                  moe_layer ? MODEL_MLP_MOE : MODEL_MLP_DENSE);
}

/* memory_layer_activation_bytes_at as if the recompute granularity were
 * rg (the rest of s as it is). */
static double layer_bytes_at(const run_inputs *in, const strategy_t *s, recompute_kind rg, int64_t layer)
{
    const model_spec *m = &in->model;
    if (!m->hybrid)
        return layer_activation_bytes(in, s, rg, MODEL_MIXER_ATTENTION,
                                      model_layer_is_moe(m, layer) ? MODEL_MLP_MOE : MODEL_MLP_DENSE);
    const model_layer *l = &m->layers[layer];
    int mlp = l->mlp == MODEL_MLP_NONE ? MODEL_MLP_NONE : model_layer_is_moe(m, layer) ? MODEL_MLP_MOE : MODEL_MLP_DENSE;
    return layer_activation_bytes(in, s, rg, l->mixer, mlp);
}

double memory_layer_activation_bytes_at(const run_inputs *in, const strategy_t *s, int64_t layer)
{
    return layer_bytes_at(in, s, s->par.recompute_granularity, layer);
}

/* A layer's activation bytes, memoized by MoE-ness outside a hybrid model
 * (where they depend on nothing else) for one (in, s). */
typedef struct act_memo {
    bool have[2];
    double bytes[2];
} act_memo;

static double layer_act_memo(const run_inputs *in, const strategy_t *s, recompute_kind rg, int64_t layer,
                             act_memo *memo)
{
    if (in->model.hybrid)
        return layer_bytes_at(in, s, rg, layer);
    bool moe = model_layer_is_moe(&in->model, layer);
    if (!memo->have[moe]) {
        memo->bytes[moe] = layer_bytes_at(in, s, rg, layer);
        memo->have[moe] = true;
    }
    return memo->bytes[moe];
}

double memory_chunk_activation_bytes(const run_inputs *in, const strategy_t *s,
                                     int64_t stage, int64_t chunk)
{
    const model_spec *m = &in->model;
    int64_t first, count;
    strategy_chunk_layers(s, stage, chunk, &first, &count);
    double bytes = 0, inflight[2] = {0, 0};
    act_memo memo = {0};
    for (int64_t l = first; l < first + count; l++) {
        double b = layer_act_memo(in, s, s->par.recompute_granularity, l, &memo);
        if (!memory_layer_offloaded(s, l))
            bytes += b;
        else if (b > inflight[0]) { /* the two largest offloaded layers */
            inflight[1] = inflight[0];
            inflight[0] = b;
        } else if (b > inflight[1]) {
            inflight[1] = b;
        }
    }
    /* CPU offloading keeps the layer being copied and the one being built
     * (forward) or used (backward) on the GPU. */
    bytes += inflight[0] + inflight[1];

    const double t = (double)s->tp;
    const double sb = (double)m->seq_length / (double)s->cp * (double)in->train.micro_batch_size;
    const double h = (double)m->hidden_size;
    const bool sp = s->par.sequence_parallel;
    if (is_first_virtual(s, stage, chunk)) {
        /* Token ids (int64) and the embedding dropout output (reference
         * §2.3, "8sbp + sbhp"). */
        double e = 8.0 * sb + sb * h;
        bytes += sp ? e / t : e;
    }
    if (is_last_virtual(s, stage, chunk)) {
        /* Input of the output layer and fp32 logits for the loss. */
        double V = (double)model_padded_vocab(m, s->tp);
        double out = sp ? 4.0 * sb * h * (1.0 + V / h) / t : 2.0 * (sb * V / t + sb * h);
        bytes += out;
        /* A hybrid model's MTP depths run here too: per depth its layers,
         * the eh projection's 2h-wide input and its own output layer. */
        if (m->hybrid && m->mtp_num_layers > 0) {
            double depth = 2.0 * sb * 2.0 * h / (sp ? t : 1.0) + out;
            for (int32_t i = 0; i < m->mtp_layers_per_depth; i++) {
                const model_layer *l = &m->mtp_layers[i];
                depth += layer_activation_bytes(in, s, s->par.recompute_granularity, l->mixer, l->mlp);
            }
            bytes += (double)m->mtp_num_layers * depth;
        }
    }
    return bytes;
}

bool memory_layer_offloaded(const strategy_t *s, int64_t layer)
{
    const parallel_spec *p = &s->par;
    return p->cpu_offloading && p->cpu_offloading_activations && layer >= 0 && layer < p->cpu_offloading_num_layers;
}

double memory_chunk_backward_transient_bytes(const run_inputs *in, const strategy_t *s,
                                             int64_t stage, int64_t chunk)
{
    if (s->par.recompute_granularity != RECOMPUTE_FULL)
        return 0.0;
    /* The backward of a fully recomputed layer first rebuilds that layer's
     * activations, as without recompute; one layer's worth is alive at a
     * time. */
    int64_t first, count;
    strategy_chunk_layers(s, stage, chunk, &first, &count);
    double worst = 0;
    act_memo memo = {0};
    for (int64_t l = first; l < first + count; l++) {
        double b = layer_act_memo(in, s, RECOMPUTE_NONE, l, &memo);
        if (b > worst)
            worst = b;
    }
    return worst;
}

double memory_graph_pool_bytes(const run_inputs *in, const strategy_t *s)
{
    if (in->graphs.impl == GRAPH_NONE)
        return 0.0;
    return s->pp > 1 ? in->cluster.host.graph_pool_pp_bytes : in->cluster.host.graph_pool_bytes;
}

/* Activation bytes of a chunk as the step allocates them (an integer). */
static double chunk_act(const run_inputs *in, const strategy_t *s, int64_t r, int64_t c)
{
    return trunc(memory_chunk_activation_bytes(in, s, r, c)); /* (int64_t) without its range */
}

double memory_peak_lower_bound(const run_inputs *in, const strategy_t *s)
{
    const int64_t p = s->pp, v = s->v;
    sched_plan plan;
    strategy_plan(s, &plan);
    double worst = 0;
    layer_memo memo = {0};
    for (int64_t r = 0; r < p; r++) {
        stage_static_mem sm;
        static_mem(in, s, r, &memo, &sm);
        double act_chunk[64], *act = act_chunk;
        int64_t fwd_chunk[64], *fwd = fwd_chunk;
        double *heap = NULL;
        if (v > 64) {
            heap = malloc((size_t)v * (sizeof *heap + sizeof *fwd));
            if (!heap)
                return 0; /* no bound: prune nothing */
            act = heap;
            fwd = (int64_t *)(heap + v);
        }
        for (int64_t c = 0; c < v; c++)
            act[c] = chunk_act(in, s, r, c);
        /* The forwards the schedule (schedule.h) runs before its first
         * backward (Megatron's: w warmup forwards and one more; the first
         * backward on chunk v-1, as it walks the chunks in reverse): none
         * has been freed when that backward starts.  Whole numbers below
         * 2^53: the sum is exact in any order. */
        int64_t first_b = sched_plan_first_b(&plan, r, fwd);
        double held = 0;
        for (int64_t c = 0; c < v; c++)
            held += (double)fwd[c] * act[c];
        held += trunc(memory_chunk_backward_transient_bytes(in, s, r, first_b));
        free(heap);
        double peak = sm.weights_bytes + sm.gradients_bytes + sm.optimizer_bytes + held + memory_graph_pool_bytes(in, s);
        if (peak > worst)
            worst = peak;
    }
    return worst;
}
