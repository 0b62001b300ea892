/* wl_attention: the attention mixer's passes (wl_build.h).
 *
 * Norm, QKV (column-parallel), rotary embedding, core attention, the
 * projection (row-parallel).  Core attention is fused (by kernel family),
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

void attention_fwd(const ctx *x, wl_opbuf *b)
{
    double ln = 4.0 * x->T_sp * x->h; /* read + write bf16 */
    module(b, WL_SCOPE_ATTN, false, host_ops(x, HOST_OPS_ATTN, false));
    then(b, "ln1", STREAM_COMPUTE, mem(x, ln));
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
    if (recompute_attn)
        core_attention(x, b, false);
    core_attention(x, b, true);
    rope(x, b);
    column_bwd(x, b, "qkv_dgrad", "qkv_wgrad", x->T, (x->q + x->kv_k + x->kv_v) / x->t, x->h, LORA_QKV);
    then(b, "ln1_bwd", STREAM_COMPUTE, mem(x, 8.0 * x->T_sp * x->h));
}
