/* wl_attention: the attention mixer's passes (wl_build.h).
 *
 * Norm, QKV (column-parallel; multi-latent attention's down and up
 * projections), rotary embedding, core attention, the projection
 * (row-parallel).  Core attention is fused (by kernel family),
 * unfused (Megatron's "local" backend) or split by context parallelism:
 * all-gather of K and V, Ulysses all-to-alls, the P2P ring beside its
 * steps, or the hierarchical all-to-all + ring.
 */
#include "wl_build.h"

#include <string.h>

/* ---- attention ------------------------------------------------------- */

static double attn_bytes(const ctx *x)
{
    return 2.0 * x->T * (x->q + x->kv_k + x->kv_v + x->core_out) / x->t;
}

/* Unfused attention (Megatron's "local" backend): batched QK^T and PV
 * GEMMs per head and a scale-mask-softmax + dropout pass over the s x s
 * scores (read 2 B, write probabilities 2 B, mask 1 B, dropout output 2 B
 * per score; the backward reads and writes as many).  Causal masking does
 * not skip work here. */
static void unfused_attention(const ctx *x, wl_opbuf *b, bool bwd)
{
    const model_spec *m = x->m;
    double heads = (double)m->num_attention_heads / x->t * (double)x->in->train.micro_batch_size;
    double s = (double)m->seq_length;
    double dq = x->q / (double)m->num_attention_heads, dv = x->core_out / (double)m->num_attention_heads;
    double scores = heads * s * s;
    if (!bwd) {
        then(b, "attn_scores", STREAM_COMPUTE, ggemm(x, b, heads, s, s, dq));
        then(b, "softmax_dropout", STREAM_COMPUTE, mem(x, 7.0 * scores));
        then(b, "attn_pv", STREAM_COMPUTE, ggemm(x, b, heads, s, dv, s));
    } else {
        then(b, "attn_pv_bwd", STREAM_COMPUTE, ggemm(x, b, heads, s, s, dv) + ggemm(x, b, heads, s, dv, s));
        then(b, "softmax_dropout_bwd", STREAM_COMPUTE, mem(x, 7.0 * scores));
        then(b, "attn_scores_bwd", STREAM_COMPUTE, ggemm(x, b, heads, s, dq, s) + ggemm(x, b, heads, s, dq, s));
    }
}

/* Core attention with context parallelism, forward or backward. */
static void core_attention(const ctx *x, wl_opbuf *b, bool bwd)
{
    const strategy_t *s = x->s;
    /* Flash backward: dQ, dK, dV (2x the forward's GEMMs) plus recomputing
     * QK^T (0.5x), the convention of the FlashAttention benchmarks whose
     * efficiencies the topology gives. */
    double flops = bwd ? 2.5 * x->attn_fwd_flops : x->attn_fwd_flops;
    double bytes = attn_bytes(x) * (bwd ? 2.0 : 1.0);
    int64_t cp = s->cp;
    b->flops += flops;
    /* K and V of the local sequence chunk. */
    double kv_bytes = 2.0 * x->T * (x->kv_k + x->kv_v) / x->t;

    const double seq = x->attn_keys; /* key length: the sequence, or the window */
    if (s->par.attention_backend == ATTN_UNFUSED && cp <= 1) {
        unfused_attention(x, b, bwd);
        return;
    }
    if (cp <= 1 || x->ideal) {
        then(b, bwd ? "attn_bwd" : "attn", STREAM_COMPUTE, compute_attention_s(x->c, &x->attn, flops, bytes, seq, bwd));
        return;
    }
    cp_comm_kind kind = s->par.cp_comm_type;
    const int64_t ring = x->cp_ring, a2a_size = x->cp_a2a;
    const group_placements *a2a_span = &x->cp_a2a_places;
    double a2a_qkv = 2.0 * x->T * (x->q + x->kv_k + x->kv_v) / x->t;
    double a2a_out = 2.0 * x->T * x->core_out / x->t;

    if (kind == CP_COMM_ALL_GATHER) {
        /* Gather the whole sequence's K and V (again in backward, then
         * reduce-scatter dK, dV); not asynchronous. */
        then(b, "cp_ag_kv", STREAM_CP, coll(x, GROUP_CP, COLL_ALL_GATHER, kv_bytes * (double)cp));
        then(b, bwd ? "attn_bwd" : "attn", STREAM_COMPUTE, compute_attention_s(x->c, &x->attn, flops, bytes, seq, bwd));
        if (bwd)
            then(b, "cp_rs_dkv", STREAM_CP, coll(x, GROUP_CP, COLL_REDUCE_SCATTER, kv_bytes * (double)cp));
        return;
    }
    if (a2a_size > 1) {
        /* Ulysses: scatter heads, gather sequence (q, k, v in; out back). */
        double in_bytes = bwd ? a2a_out : a2a_qkv;
        then(b, "cp_a2a", STREAM_CP, net_collective_worst_s(x->c, a2a_span, COLL_ALL_TO_ALL, in_bytes));
        kv_bytes *= (double)a2a_size; /* the ring then moves the gathered K, V */
    }
    if (ring <= 1) {
        then(b, bwd ? "attn_bwd" : "attn", STREAM_COMPUTE, compute_attention_s(x->c, &x->attn, flops, bytes, seq, bwd));
    } else {
        /* Ring of `ring` steps: step i computes on the K, V block received
         * at step i-1 while sending it on.  Forward sends ring-1 K+V blocks;
         * backward 2(ring-1) (K+V forward round, dK+dV back).  With
         * load-balanced (zig-zag) chunks every step has equal work. */
        /* Each step attends the local queries to one block of keys. */
        double step_s =
            compute_attention_s(x->c, &x->attn, flops / (double)ring, bytes / (double)ring, seq / (double)ring, bwd);
        double send_s = net_p2p_s(x->c, s->tp * a2a_size, kv_bytes);
        if (bwd)
            send_s *= 2.0;
        step_s = contended(x, &x->cp_ring_places, step_s, send_s);
        int32_t start = b->n - 1, prev_attn = WL_NONE, prev_send = WL_NONE;
        for (int64_t i = 0; i < ring; i++) {
            int32_t send = WL_NONE;
            if (i + 1 < ring)
                send = wl_push(b, "cp_p2p", STREAM_CP, send_s, prev_send == WL_NONE ? start : prev_send, WL_NONE);
            int32_t attn = wl_push(b, bwd ? "attn_bwd" : "attn", STREAM_COMPUTE, step_s,
                                prev_attn == WL_NONE ? start : prev_attn, prev_send);
            prev_attn = attn;
            prev_send = send;
        }
    }
    if (a2a_size > 1) {
        double out_bytes = bwd ? a2a_qkv : a2a_out;
        then(b, "cp_a2a", STREAM_CP, net_collective_worst_s(x->c, a2a_span, COLL_ALL_TO_ALL, out_bytes));
    }
}

/* Rotary embedding of q and k (read and write, bf16); the same in the
 * backward.  Other position types cost nothing per layer. */
static void rope(const ctx *x, wl_opbuf *b)
{
    if (strcmp(x->m->position_embedding_type, "rope") == 0)
        then(b, "rope", STREAM_COMPUTE, mem(x, 4.0 * x->T * (x->q + x->kv_k) / x->t));
}

/* ---- multi-latent attention's projections ---------------------------- */

/* Megatron Core's MLASelfAttention (the linears of megatron-formulas.md
 * §1's MLA term): the down projections h -> q_lora_rank and h ->
 * kv_lora_rank + rope dim are replicated over TP and run on this rank's
 * tokens (T_sp); with SP their latents are all-gathered (not the hidden
 * states); the norms of the latents; the up projections q_lora_rank ->
 * a (qk + rope) and kv_lora_rank -> a (qk + v) are column-parallel on the
 * gathered tokens.  Without q_lora_rank the query is one column-parallel
 * projection of the hidden states.  [assumed: the gather of the latents
 * and the duplicated down projections as in multi_latent_attention.py;
 * the reference gives the shapes through the FLOP term, not the
 * placement.] */
typedef struct mla_dims {
    double q_lat, kv_lat, rope; /* latent widths; rope: the shared k_pe */
    double q_up, kv_up;         /* up-projection outputs on this rank */
} mla_dims;

static mla_dims mla_of(const ctx *x)
{
    const model_spec *m = x->m;
    double a = (double)m->num_attention_heads;
    return (mla_dims){ (double)m->q_lora_rank, (double)m->kv_lora_rank, (double)m->qk_pos_emb_head_dim,
                       a * (double)(m->qk_head_dim + m->qk_pos_emb_head_dim) / x->t,
                       a * (double)(m->qk_head_dim + m->v_head_dim) / x->t };
}

/* A GEMM of a linear with its input cast (m x k elements). */
static void linear(const ctx *x, wl_opbuf *b, const char *name, double m, double n, double k)
{
    cast(x, b, m * k);
    then(b, name, STREAM_COMPUTE, gemm(x, b, m, n, k));
}

/* Backward of a linear m x k -> n: dgrad, then the weight gradient (LoRA,
 * whose base weights get none, is refused with MLA: config). */
static void linear_bwd(const ctx *x, wl_opbuf *b, const char *dgrad, const char *wgrad, double m, double n,
                       double k)
{
    cast(x, b, m * n);
    then(b, dgrad, STREAM_COMPUTE, gemm(x, b, m, k, n));
    then(b, wgrad, STREAM_COMPUTE, gemm(x, b, k, n, m));
}

/* The up projections in the forward (and in the mla_up_proj recompute). */
static void mla_up_fwd(const ctx *x, wl_opbuf *b, const mla_dims *d)
{
    if (d->q_lat > 0)
        linear(x, b, "q_up", x->T, d->q_up, d->q_lat);
    linear(x, b, "kv_up", x->T, d->kv_up, d->kv_lat);
}

static void mla_fwd(const ctx *x, wl_opbuf *b)
{
    mla_dims d = mla_of(x);
    if (d.q_lat > 0)
        linear(x, b, "q_down", x->T_sp, d.q_lat, x->h);
    else
        column_fwd(x, b, "q_proj", x->T, d.q_up, x->h, 0);
    linear(x, b, "kv_down", x->T_sp, d.kv_lat + d.rope, x->h);
    if (x->sp && has(x, GROUP_TP))
        then(b, "tp_ag", STREAM_TP, coll(x, GROUP_TP, COLL_ALL_GATHER, 2.0 * x->T * (d.q_lat + d.kv_lat + d.rope)));
    then(b, "mla_latent_norm", STREAM_COMPUTE, mem(x, 4.0 * x->T * (d.q_lat + d.kv_lat)));
    mla_up_fwd(x, b, &d);
}

/* Backward: the up projections' data gradients are partial sums over TP
 * (column-parallel), reduced (reduce-scatter with SP) before the latent
 * norms and the down projections. */
static void mla_bwd(const ctx *x, wl_opbuf *b)
{
    mla_dims d = mla_of(x);
    if (d.q_lat > 0)
        linear_bwd(x, b, "q_up_dgrad", "q_up_wgrad", x->T, d.q_up, d.q_lat);
    linear_bwd(x, b, "kv_up_dgrad", "kv_up_wgrad", x->T, d.kv_up, d.kv_lat);
    if (has(x, GROUP_TP))
        then(b, x->sp ? "tp_rs" : "tp_ar", STREAM_TP,
             coll(x, GROUP_TP, x->sp ? COLL_REDUCE_SCATTER : COLL_ALL_REDUCE, 2.0 * x->T * (d.q_lat + d.kv_lat)));
    then(b, "mla_latent_norm_bwd", STREAM_COMPUTE, mem(x, 8.0 * x->T_sp * (d.q_lat + d.kv_lat)));
    linear_bwd(x, b, "kv_down_dgrad", "kv_down_wgrad", x->T_sp, d.kv_lat + d.rope, x->h);
    if (d.q_lat > 0)
        linear_bwd(x, b, "q_down_dgrad", "q_down_wgrad", x->T_sp, d.q_lat, x->h);
    else
        column_bwd(x, b, "q_proj_dgrad", "q_proj_wgrad", x->T, d.q_up, x->h, 0);
}

void attention_fwd(const ctx *x, wl_opbuf *b)
{
    double ln = 4.0 * x->T_sp * x->h; /* read + write bf16 */
    module(b, WL_SCOPE_ATTN, false, host_ops(x, HOST_OPS_ATTN, false));
    then(b, "ln1", STREAM_COMPUTE, mem(x, ln));
    if (x->m->multi_latent_attention)
        mla_fwd(x, b);
    else
        column_fwd(x, b, "qkv", x->T, (x->q + x->kv_k + x->kv_v) / x->t, x->h, LORA_QKV);
    rope(x, b);
    core_attention(x, b, false);
    row_fwd(x, b, "proj", x->T, x->h, x->core_out / x->t, LORA_PROJ);
    then(b, "bias_dropout_add", STREAM_COMPUTE, mem(x, 7.0 * x->T_sp * x->h));
}

void attention_bwd(const ctx *x, wl_opbuf *b, bool recompute_attn)
{
    module(b, WL_SCOPE_ATTN, false, host_ops(x, HOST_OPS_ATTN, true));
    then(b, "bias_dropout_add_bwd", STREAM_COMPUTE, mem(x, 5.0 * x->T_sp * x->h));
    row_bwd(x, b, "proj_dgrad", "proj_wgrad", x->T, x->h, x->core_out / x->t, LORA_PROJ);
    /* mla_up_proj: the up projections' outputs (and their rope) were
     * dropped after the forward and are recomputed for the core's backward */
    if (x->m->multi_latent_attention && x->s->par.recompute_granularity == RECOMPUTE_SELECTIVE &&
        (x->s->par.recompute_modules & RECOMPUTE_MOD_MLA_UP_PROJ)) {
        mla_dims d = mla_of(x);
        mla_up_fwd(x, b, &d);
        rope(x, b);
    }
    if (recompute_attn)
        core_attention(x, b, false);
    core_attention(x, b, true);
    rope(x, b);
    if (x->m->multi_latent_attention)
        mla_bwd(x, b);
    else
        column_bwd(x, b, "qkv_dgrad", "qkv_wgrad", x->T, (x->q + x->kv_k + x->kv_v) / x->t, x->h, LORA_QKV);
    then(b, "ln1_bwd", STREAM_COMPUTE, mem(x, 8.0 * x->T_sp * x->h));
}
