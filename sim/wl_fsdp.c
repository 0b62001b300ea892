/* wl_fsdp: data-parallel sharding in the workload: the DP cost of a
 * gradient bucket (all-reduce, or the distributed optimizer's
 * reduce-scatter and parameter all-gather, with HSDP / HFSDP's outer
 * collectives) and Megatron-FSDP's per-unit collectives inside the pass
 * templates (megatron-features.md C.1).
 *
 * Units are the chunk's transformer layers and the embedding where it is
 * not also the output layer (memory_chunk_units); the other parameters
 * (output layer, final norm, MTP) stay whole and are reduced and gathered
 * once per step with the chunk's bucket, as under the distributed
 * optimizer.  ZeRO-2 and 3 reduce-scatter a unit's gradients after its
 * backward in every microbatch (fsdp_rs); ZeRO-3 also all-gathers a
 * unit's parameters before its forward and again before its backward
 * (fsdp_ag; one gather serves a recomputed unit's recompute and backward,
 * since the recompute runs inside the backward's ops), prefetching one
 * unit ahead: the gathers of the first two units are issued at the pass's
 * start, and the gather of unit j+1 is issued when unit j begins and waits
 * for the end of unit j-1, whose buffer it reuses (two unit buffers).  A
 * unit's first kernel waits for its gather, and what follows a unit in the
 * backward waits for the unit, not for its reduce-scatter.  All of it is on the stage's
 * DP stream, in list order, so a pass begins and ends on the compute
 * stream (a zero-length join before the first gathers, and after the last
 * reduce-scatter) and stands in the step as one task as every pass does.
 */
#include "wl_fsdp.h"

#include <stdlib.h>

static double shard_coll(const ctx *x, strategy_shard_group g, coll_kind k, double bytes)
{
    if (x->ideal)
        return 0.0;
    return net_collective_worst_s(x->c, &x->s->shard_places[g], k, bytes);
}

/* dense and expert parts of one collective, over the inner groups. */
static double inner_coll(const ctx *x, coll_kind k, double dense_bytes, double expert_bytes)
{
    return shard_coll(x, SHARD_DENSE_INNER, k, dense_bytes) + shard_coll(x, SHARD_EXPERT_INNER, k, expert_bytes);
}

static double grad_bytes(const ctx *x)
{
    return x->in->ddp.grad_reduce_in_fp32 ? 4.0 : 2.0;
}

void wl_bucket_cost(const ctx *x, double dense, double expert, const mem_units *units, wl_bucket *bk)
{
    const strategy_t *s = x->s;
    const double g = grad_bytes(x), p = memory_param_gather_bytes(x->in);
    if (s->zero == DP_SHARD_NONE) {
        bk->reduce_s = coll(x, GROUP_DP_CP, COLL_ALL_REDUCE, dense * g) + coll(x, GROUP_EDP, COLL_ALL_REDUCE, expert * g);
        bk->gather_s = 0.0;
        return;
    }
    /* Reduced here: all the bucket's gradients (ZeRO-1), or those outside
     * the units (ZeRO-2/3 reduce the units' in every backward). */
    double rd = dense, re = expert, gd = dense, ge = expert;
    if (units) {
        rd -= units->t_dense;
        re -= units->t_expert;
        if (s->zero == DP_SHARD_OPTIM_GRADS_PARAMS) { /* the units gather per microbatch */
            gd -= units->t_dense;
            ge -= units->t_expert;
        }
    }
    bk->reduce_s = inner_coll(x, COLL_REDUCE_SCATTER, rd * g, re * g);
    bk->gather_s = inner_coll(x, COLL_ALL_GATHER, gd * p, ge * p);
    if (s->dp_outer > 1) {
        /* This rank's shard across the optimizer instances, once per step:
         * all-reduced (distributed optimizer, HSDP), or reduce-scattered
         * before the step and all-gathered after it (HFSDP). */
        double sd = dense / (double)s->dp_inner, se = expert / (double)s->edp_inner;
        coll_kind k = s->hfsdp ? COLL_REDUCE_SCATTER : COLL_ALL_REDUCE;
        bk->reduce_s += shard_coll(x, SHARD_DENSE_OUTER, k, sd * g) + shard_coll(x, SHARD_EXPERT_OUTER, k, se * g);
        if (s->hfsdp)
            bk->gather_s += shard_coll(x, SHARD_DENSE_OUTER, COLL_ALL_GATHER, sd * p) +
                            shard_coll(x, SHARD_EXPERT_OUTER, COLL_ALL_GATHER, se * p);
    }
}

int wl_fsdp_init(const ctx *x, int64_t stage, int64_t chunk, wl_fsdp *fs)
{
    const strategy_t *s = x->s;
    *fs = (wl_fsdp){.start = WL_NONE, .last_rs = WL_NONE};
    memory_chunk_units(x->in, s, stage, chunk, &fs->units);
    if (x->ideal || s->zero < DP_SHARD_OPTIM_GRADS || (s->dp_inner == 1 && s->edp_inner == 1))
        return SIM_OK;
    int64_t first, count;
    strategy_chunk_layers(s, stage, chunk, &first, &count);
    fs->emb = memory_embedding_is_unit(x->in, s, stage, chunk);
    int32_t n = (int32_t)count + (fs->emb ? 1 : 0);
    fs->gather = s->zero == DP_SHARD_OPTIM_GRADS_PARAMS;
    fs->ag_s = malloc(((size_t)n + 1) * sizeof *fs->ag_s);
    fs->rs_s = malloc(((size_t)n + 1) * sizeof *fs->rs_s);
    fs->ag = malloc(((size_t)n + 1) * sizeof *fs->ag);
    fs->end = malloc(((size_t)n + 1) * sizeof *fs->end);
    if (!fs->ag_s || !fs->rs_s || !fs->ag || !fs->end) {
        wl_fsdp_free(fs);
        return SIM_ENOMEM;
    }
    const double g = grad_bytes(x), p = memory_param_gather_bytes(x->in);
    for (int32_t u = 0; u < n; u++) {
        mem_units one;
        memory_unit_params(x->in, s, fs->emb && u == 0 ? -1 : first + u - (fs->emb ? 1 : 0), &one);
        fs->ag_s[u] = inner_coll(x, COLL_ALL_GATHER, one.w_dense * p, one.w_expert * p);
        fs->rs_s[u] = inner_coll(x, COLL_REDUCE_SCATTER, one.t_dense * g, one.t_expert * g);
    }
    fs->n = n;
    return SIM_OK;
}

void wl_fsdp_free(wl_fsdp *fs)
{
    free(fs->ag_s);
    free(fs->rs_s);
    free(fs->ag);
    free(fs->end);
    fs->ag_s = fs->rs_s = NULL;
    fs->ag = fs->end = NULL;
    fs->n = 0;
}

/* The unit at pass position j: forward order, reversed in the backward. */
static int32_t unit_at(const wl_fsdp *fs, int32_t j)
{
    return fs->bwd ? fs->n - 1 - j : j;
}

static int32_t push_gather(wl_opbuf *b, const wl_fsdp *fs, int32_t j, int32_t after)
{
    return wl_push(b, "fsdp_ag", STREAM_DP, fs->ag_s[unit_at(fs, j)], after, WL_NONE);
}

void wl_fsdp_pass_begin(const ctx *x, wl_opbuf *b, wl_fsdp *fs, bool bwd)
{
    fs->j = 0;
    fs->bwd = bwd;
    fs->last_rs = WL_NONE;
    if (!fs->n || !fs->gather)
        return;
    /* The host issues the first two gathers (the pre-forward / pre-backward
     * hook) before the pass's GPU work can start. */
    int32_t issue = WL_NONE;
    if (x->host)
        issue = wl_push(b, "host_issue", STREAM_HOST, x->c->host.launch_s * (fs->n > 1 ? 2.0 : 1.0), WL_NONE, WL_NONE);
    wl_push(b, "join", STREAM_COMPUTE, 0.0, issue == WL_NONE ? b->n - 1 : b->n - 2, issue);
    if (!b->oom)
        b->ops[b->n - 1].launches = 0;
    fs->start = b->n - 1;
    fs->ag[0] = push_gather(b, fs, 0, fs->start);
    if (fs->n > 1)
        fs->ag[1] = push_gather(b, fs, 1, fs->start);
}

void wl_fsdp_unit_begin(wl_opbuf *b, wl_fsdp *fs)
{
    const int32_t j = fs->j;
    if (!fs->n || !fs->gather || j >= fs->n)
        return;
    if (j >= 1 && j + 1 < fs->n)
        fs->ag[j + 1] = push_gather(b, fs, j + 1, fs->end[j - 1]);
    join(b, j == 0 ? fs->start : fs->end[j - 1], fs->ag[j]);
}

void wl_fsdp_unit_end(wl_opbuf *b, wl_opbuf *w, wl_fsdp *fs)
{
    const int32_t j = fs->j;
    if (!fs->n || j >= fs->n)
        return;
    fs->end[j] = b->n - 1;
    if (fs->bwd) {
        /* The gradients are final after the unit's weight gradients: in W
         * when the backward is split. */
        wl_opbuf *g = w ? w : b;
        int32_t after = g->n - 1;
        fs->last_rs = wl_push(g, "fsdp_rs", STREAM_DP, fs->rs_s[unit_at(fs, j)], after, WL_NONE);
        join(g, after, WL_NONE); /* what follows follows the unit, not its reduce-scatter */
    }
    fs->j++;
}

void wl_fsdp_pass_end(wl_opbuf *b, wl_fsdp *fs)
{
    if (fs->bwd && fs->last_rs != WL_NONE)
        join(b, b->n - 1, fs->last_rs);
}
