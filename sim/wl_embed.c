/* wl_embed: the passes outside the layers (wl_build.h).
 *
 * The input embedding (a lookup, then the TP reduction of its output), the
 * output layer with the vocab-parallel cross entropy, in bf16 even under an
 * fp8 recipe, and the entry of one MTP depth (its embedding, norms and eh
 * projection).
 */
#include "wl_build.h"

/* ---- embedding and output layer ---------------------------------------- */

void embedding_fwd(const ctx *x, wl_opbuf *b)
{
    module(b, WL_SCOPE_NONE, false, host_ops(x, HOST_OPS_EMBEDDING, false));
    then(b, "embedding", STREAM_COMPUTE, mem(x, 2.0 * x->T * x->h));
    if (has(x, GROUP_TP))
        then(b, x->sp ? "tp_rs" : "tp_ar", STREAM_TP,
             coll(x, GROUP_TP, x->sp ? COLL_REDUCE_SCATTER : COLL_ALL_REDUCE, x->T * x->h * 2.0));
}

/* The embedding's backward only scatters the weight gradient: nothing to
 * do when the weights are frozen (LoRA). */
void embedding_bwd(const ctx *x, wl_opbuf *b)
{
    if (x->frozen)
        return;
    module(b, WL_SCOPE_NONE, false, host_ops(x, HOST_OPS_EMBEDDING, true));
    tp_enter(x, b, "tp_ag");
    then(b, "embedding_bwd", STREAM_COMPUTE, mem(x, 6.0 * x->T * x->h));
}

static double padded_vocab_local(const ctx *x)
{
    return (double)model_padded_vocab(x->m, x->s->tp) / x->t;
}

/* Megatron's output layer is a plain ColumnParallelLinear: bf16 even under
 * an fp8 recipe. */
static ctx bf16_ctx(const ctx *x)
{
    ctx y = *x;
    y.dt = GEMM_BF16;
    y.no_cast = true;
    return y;
}

void output_fwd(const ctx *x0, wl_opbuf *b)
{
    ctx y = bf16_ctx(x0);
    const ctx *x = &y;
    double V = padded_vocab_local(x);
    module(b, WL_SCOPE_NONE, false, host_ops(x, HOST_OPS_OUTPUT, false));
    then(b, "final_norm", STREAM_COMPUTE, mem(x, 4.0 * x->T_sp * x->h));
    column_fwd(x, b, "logits", x->T, V, x->h, 0);
    /* Vocab-parallel cross entropy: fp32 logits read/written, three small
     * all-reduces (max, target logit, sum of exp) over TP. */
    then(b, "cross_entropy", STREAM_COMPUTE, mem(x, 3.0 * 4.0 * x->T * V));
    if (has(x, GROUP_TP))
        then(b, "tp_ar_ce", STREAM_TP, 3.0 * coll(x, GROUP_TP, COLL_ALL_REDUCE, x->T * 4.0));
}

void output_bwd(const ctx *x0, wl_opbuf *b)
{
    ctx y = bf16_ctx(x0);
    const ctx *x = &y;
    double V = padded_vocab_local(x);
    module(b, WL_SCOPE_NONE, false, host_ops(x, HOST_OPS_OUTPUT, true));
    then(b, "cross_entropy_bwd", STREAM_COMPUTE, mem(x, 2.0 * 4.0 * x->T * V));
    column_bwd(x, b, "logits_dgrad", "logits_wgrad", x->T, V, x->h, 0);
    then(b, "final_norm_bwd", STREAM_COMPUTE, mem(x, 8.0 * x->T_sp * x->h));
}

/* One MTP depth's entry (Megatron's MultiTokenPredictionLayer): the
 * embedding of the shifted tokens, enorm and hnorm (read, write 2 B each),
 * the concatenated 2h-wide input through eh_proj, a column-parallel 2h -> h
 * whose output is gathered over TP (gather_from_tensor_model_parallel_region;
 * with SP the layers then take their sequence shard, no communication). */
void mtp_enter_fwd(const ctx *x, wl_opbuf *b)
{
    embedding_fwd(x, b);
    then(b, "mtp_norms", STREAM_COMPUTE, mem(x, 2.0 * 4.0 * x->T_sp * x->h));
    tp_enter(x, b, "tp_ag"); /* the second h of the input (column_fwd gathers one) */
    column_fwd(x, b, "mtp_eh_proj", x->T, x->h / x->t, 2.0 * x->h, 0);
    if (has(x, GROUP_TP))
        then(b, "tp_ag_eh", STREAM_TP, coll(x, GROUP_TP, COLL_ALL_GATHER, x->T * x->h * 2.0));
}

/* Its backward: the gather's backward is a split; eh_proj's dgrad leaves
 * 2h wide (column_bwd reduces one h, the second here), the norms, the
 * embedding's weight gradient. */
void mtp_enter_bwd(const ctx *x, wl_opbuf *b)
{
    column_bwd(x, b, "mtp_eh_dgrad", "mtp_eh_wgrad", x->T, x->h / x->t, 2.0 * x->h, 0);
    if (has(x, GROUP_TP))
        then(b, x->sp ? "tp_rs" : "tp_ar", STREAM_TP,
             coll(x, GROUP_TP, x->sp ? COLL_REDUCE_SCATTER : COLL_ALL_REDUCE, x->T * x->h * 2.0));
    then(b, "mtp_norms_bwd", STREAM_COMPUTE, mem(x, 2.0 * 8.0 * x->T_sp * x->h));
    embedding_bwd(x, b);
}
