/* wl_ops: the op list under construction and the costing primitives of
 * the pass builders (wl_build.h).
 *
 * Ops are pushed with their dependencies by absolute index and stored with
 * the distance back; kernels are costed by compute, collectives by net
 * (worst placement of the group kind), with the SM share a collective
 * takes from a kernel beside it.  The column/row-parallel linears carry
 * their SP / TP collectives (overlapped with tp_comm_overlap); the costing
 * context is set up once per workload.
 */
#include "wl_build.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- op list under construction ---------------------------------------- */

/* Failures are sticky (as in every builder here): after the first, pushes
 * still return an index but store nothing, and the caller checks the
 * flags once when the pass is done. */
void too_long(wl_opbuf *b, const char *name, double seconds)
{
    if (!b->too_long_name) {
        b->too_long_name = name;
        b->too_long_s = seconds;
    }
}

int32_t wl_push(wl_opbuf *b, const char *name, stream_kind st, double seconds, int32_t d0, int32_t d1)
{
    if (b->oom)
        return b->n - 1;
    if (b->n == b->cap) {
        int32_t cap = b->cap ? 2 * b->cap : 64;
        wl_op *ops = b->cap <= INT32_MAX / 2 ? realloc(b->ops, (size_t)cap * sizeof *ops) : NULL;
        if (!ops) {
            b->oom = 1;
            return b->n - 1;
        }
        b->ops = ops;
        b->cap = cap;
    }
    wl_op *op = &b->ops[b->n];
    memset(op, 0, sizeof *op);
    op->name = name;
    op->stream = (uint8_t)st;
    op->launches = 1;
    if (!time_from_s_checked(seconds, &op->duration_ps))
        too_long(b, name, seconds); /* duration_ps stays 0 */
    int32_t d[2] = {d0, d1};
    for (int j = 0; j < 2; j++)
        op->dep_back[j] = d[j] < 0 || d[j] >= b->n ? 0 : b->n - d[j];
    return b->n++;
}

/* Appends an op that follows the last one. */
int32_t then(wl_opbuf *b, const char *name, stream_kind st, double seconds)
{
    return wl_push(b, name, st, seconds, b->n - 1, WL_NONE);
}

/* A zero-length op after ops a and c: a dependency, not a kernel. */
void join(wl_opbuf *b, int32_t a, int32_t c)
{
    int32_t i = wl_push(b, "join", STREAM_COMPUTE, 0.0, a, c);
    if (!b->oom)
        b->ops[i].launches = 0;
}

/* The host launches of op i (a kernel issued once per local expert). */
void set_launches(wl_opbuf *b, int32_t i, double n)
{
    if (!b->oom && i >= 0 && i < b->n)
        b->ops[i].launches = n >= 1 && n <= UINT32_MAX ? (uint32_t)n : 1u;
}

double gemm(const ctx *x, wl_opbuf *b, double m, double n, double k)
{
    b->flops += 2.0 * m * n * k;
    return compute_gemm_s(x->c, m, n, k, x->dt);
}

/* A LoRA adapter beside a linear layer of m tokens, in k -> out n on this
 * rank: A (k -> r) then B (r -> n), plain bf16 GEMMs outside Transformer
 * Engine's fp8 region; the backward runs dgrad and wgrad of both.  The
 * rank-r all-reduce of a row-parallel adapter is a few KiB and left out.
 * 0 when the layer is not a target. */
static double lora_s(const ctx *x, wl_opbuf *b, unsigned target, double m, double n, double k, bool bwd)
{
    if (!(x->lora_targets & target))
        return 0.0;
    double r = x->lora_dim;
    b->flops += (bwd ? 4.0 : 2.0) * m * r * (k + n);
    double fwd = compute_gemm_s(x->c, m, r, k, GEMM_BF16) + compute_gemm_s(x->c, m, n, r, GEMM_BF16);
    if (!bwd)
        return fwd;
    return compute_gemm_s(x->c, m, r, n, GEMM_BF16) + compute_gemm_s(x->c, r, n, m, GEMM_BF16) +
           compute_gemm_s(x->c, m, k, r, GEMM_BF16) + compute_gemm_s(x->c, k, r, m, GEMM_BF16);
}

/* `groups` same-shape GEMMs in one grouped launch (local experts). */
double ggemm(const ctx *x, wl_opbuf *b, double groups, double m, double n, double k)
{
    b->flops += 2.0 * groups * m * n * k;
    return compute_grouped_gemm_s(x->c, groups, m, n, k, x->dt);
}

double mem(const ctx *x, double bytes)
{
    return compute_memory_s(x->c, bytes);
}

/* Quantizing `elements` of a GEMM operand for a low-precision recipe
 * (Transformer Engine casts activations before fprop and gradients before
 * dgrad/wgrad); no op for bf16. */
void cast(const ctx *x, wl_opbuf *b, double elements)
{
    double per = compute_cast_bytes_per_element(x->s->par.precision);
    if (per > 0 && !x->ideal && !x->no_cast)
        then(b, "quantize", STREAM_COMPUTE, mem(x, per * elements));
}

double coll(const ctx *x, group_kind g, coll_kind k, double bytes)
{
    if (x->ideal)
        return 0.0;
    return net_collective_worst_s(x->c, &x->s->places[g], k, bytes);
}

/* A communication op exists only when its group has more than one rank
 * and the run is not the ideal pipeline. */
bool has(const ctx *x, group_kind g)
{
    return !x->ideal && x->s->groups[g].size > 1;
}

/* A kernel of `comp` seconds with a collective of `comm` seconds beside it
 * runs at (1 - share) of its speed while they overlap: the collective's
 * kernels hold SMs (Calculon's processor_usage).  The group decides the
 * tier. */
static double contended_one(const ctx *x, const group_span *g, double comp, double comm)
{
    const compute_params *p = &x->c->compute;
    double share = g->in_nvlink_domain ? p->overlap_sm_share_nvlink : p->overlap_sm_share_network;
    if (share <= 0 || share >= 1 || comm <= 0)
        return comp;
    double overlap = fmin(comp, comm);
    return comp + overlap * share / (1.0 - share);
}

/* The same paced by the slowest placement of the group kind: groups on
 * NVLink and groups on the network take different shares of the SMs. */
double contended(const ctx *x, const group_placements *p, double comp, double comm)
{
    double t = contended_one(x, &p->span[p->worst], comp, comm);
    for (int i = 0; i < p->n; i++)
        if (i != p->worst)
            t = fmax(t, contended_one(x, &p->span[i], comp, comm));
    return t;
}

/* TP entry into a column-parallel region: SP all-gather of the sequence. */
void tp_enter(const ctx *x, wl_opbuf *b, const char *name)
{
    if (x->sp && has(x, GROUP_TP))
        then(b, name, STREAM_TP, coll(x, GROUP_TP, COLL_ALL_GATHER, x->T * x->h * 2.0));
}

/* The activation-sized TP collective that leaves a row-parallel GEMM:
 * reduce-scatter with SP, all-reduce without. */
static double tp_exit_s(const ctx *x)
{
    return coll(x, GROUP_TP, x->sp ? COLL_REDUCE_SCATTER : COLL_ALL_REDUCE, x->T * x->h * 2.0);
}

static const char *tp_exit_name(const ctx *x)
{
    return x->sp ? "tp_rs" : "tp_ar";
}

/* Two ops side by side after the current last op, then a zero-length join
 * so the next op waits for both. */
static void side_by_side(wl_opbuf *b, const char *n1, stream_kind s1, double t1, const char *n2, stream_kind s2,
                         double t2)
{
    int32_t prev = b->n - 1;
    int32_t a = wl_push(b, n1, s1, t1, prev, WL_NONE);
    int32_t c = wl_push(b, n2, s2, t2, prev, WL_NONE);
    join(b, a, c);
}

/* Column-parallel linear, forward: the SP all-gather of the input, then the
 * GEMM; with tp_comm_overlap the gather is chunked and pipelined with the
 * GEMM (Transformer Engine userbuffers), so the two run side by side. */
void column_fwd(const ctx *x, wl_opbuf *b, const char *name, double m, double n, double k, unsigned lora)
{
    double g = gemm(x, b, m, n, k) + lora_s(x, b, lora, m, n, k, false);
    cast(x, b, (x->sp ? m / x->t : m) * k); /* the input is cast before the gather */
    if (x->sp && has(x, GROUP_TP) && x->s->par.tp_comm_overlap) {
        double ag = coll(x, GROUP_TP, COLL_ALL_GATHER, x->T * x->h * 2.0);
        side_by_side(b, "tp_ag", STREAM_TP, ag, name, STREAM_COMPUTE,
                     contended(x, &x->s->places[GROUP_TP], g, ag));
        return;
    }
    tp_enter(x, b, "tp_ag");
    then(b, name, STREAM_COMPUTE, g);
}

/* Row-parallel linear, forward: the GEMM, then the reduce-scatter (SP) or
 * all-reduce of its output; overlapped chunk by chunk with tp_comm_overlap. */
void row_fwd(const ctx *x, wl_opbuf *b, const char *name, double m, double n, double k, unsigned lora)
{
    double g = gemm(x, b, m, n, k) + lora_s(x, b, lora, m, n, k, false);
    cast(x, b, m * k);
    if (!has(x, GROUP_TP)) {
        then(b, name, STREAM_COMPUTE, g);
        return;
    }
    if (x->sp && x->s->par.tp_comm_overlap) {
        side_by_side(b, name, STREAM_COMPUTE, contended(x, &x->s->places[GROUP_TP], g, tp_exit_s(x)),
                     tp_exit_name(x), STREAM_TP, tp_exit_s(x));
        return;
    }
    then(b, name, STREAM_COMPUTE, g);
    then(b, tp_exit_name(x), STREAM_TP, tp_exit_s(x));
}

/* The weight-gradient GEMM of a linear layer, or with frozen base weights
 * (LoRA) the backward of its adapter in its place (0 if it has none). */
static double wgrad_s(const ctx *x, wl_opbuf *b, unsigned lora, double m, double n_out, double k_in)
{
    if (x->frozen)
        return lora_s(x, b, lora, m, n_out, k_in, true);
    return gemm(x, b, k_in, n_out, m);
}

/* Row-parallel linear, backward: the output gradient is all-gathered (SP)
 * before the dgrad and wgrad GEMMs. */
void row_bwd(const ctx *x, wl_opbuf *b, const char *dgrad, const char *wgrad, double m, double n_out,
                    double k_in, unsigned lora)
{
    tp_enter(x, b, "tp_ag");
    cast(x, b, m * n_out);
    then(b, dgrad, STREAM_COMPUTE, gemm(x, b, m, k_in, n_out));
    then(b, wgrad, STREAM_COMPUTE, wgrad_s(x, b, lora, m, n_out, k_in));
}

/* Column-parallel linear, backward, as Megatron's
 * LinearWithGradAccumulationAndAsyncCommunication runs it: the SP re-gather
 * of the input (needed by the wgrad) is issued before and runs beside the
 * dgrad GEMM; the dgrad's reduce-scatter (SP) or all-reduce is issued before
 * and runs beside the wgrad GEMM.  The next op waits for the collective. */
void column_bwd(const ctx *x, wl_opbuf *b, const char *dgrad, const char *wgrad, double m, double n_out,
                       double k_in, unsigned lora)
{
    double dg = gemm(x, b, m, k_in, n_out);
    double wg = wgrad_s(x, b, lora, m, n_out, k_in);
    cast(x, b, m * n_out);
    if (!has(x, GROUP_TP)) {
        then(b, dgrad, STREAM_COMPUTE, dg);
        then(b, wgrad, STREAM_COMPUTE, wg);
        return;
    }
    int32_t prev = b->n - 1;
    const group_placements *tp = &x->s->places[GROUP_TP];
    double ag_s = x->sp ? coll(x, GROUP_TP, COLL_ALL_GATHER, x->T * x->h * 2.0) : 0.0;
    int32_t ag = x->sp ? wl_push(b, "tp_ag", STREAM_TP, ag_s, prev, WL_NONE) : WL_NONE;
    int32_t d = wl_push(b, dgrad, STREAM_COMPUTE, contended(x, tp, dg, ag_s), prev, WL_NONE);
    int32_t rs = wl_push(b, tp_exit_name(x), STREAM_TP, tp_exit_s(x), d, WL_NONE);
    int32_t w = wl_push(b, wgrad, STREAM_COMPUTE, contended(x, tp, wg, tp_exit_s(x)), d, ag);
    join(b, w, rs);
}

/* ---- the costing context, once per workload ------------------------- */

void ctx_init(ctx *x, const run_inputs *in, const strategy_t *s)
{
    memset(x, 0, sizeof *x);
    x->in = in;
    x->s = s;
    x->c = &in->cluster;
    x->m = &in->model;
    x->ideal = in->sim.ideal_pipeline;
    const host_params *hp = &in->cluster.host;
    x->host = !x->ideal && in->graphs.impl != GRAPH_FULL_ITERATION &&
              (hp->launch_s > 0 || hp->op_overhead_s > 0 || hp->sync_s > 0 ||
               (in->graphs.impl != GRAPH_NONE && hp->graph_launch_s > 0));
    x->dt = compute_gemm_dtype(s->par.precision);
    x->t = (double)s->tp;
    x->sp = s->par.sequence_parallel;
    x->frozen = in->peft.lora;
    x->lora_dim = in->peft.lora ? (double)in->peft.dim : 0.0;
    x->lora_targets = in->peft.lora ? in->peft.targets : 0u;
    x->h = (double)x->m->hidden_size;
    x->cp_ring = s->cp;
    x->cp_a2a = 1;
    if (s->par.cp_comm_type == CP_COMM_A2A_P2P && s->par.n_hierarchical_cp_sizes > 0) {
        x->cp_a2a = s->par.hierarchical_cp_sizes[0];
        x->cp_ring = s->cp / x->cp_a2a;
    } else if (s->par.cp_comm_type == CP_COMM_A2A) {
        x->cp_a2a = s->cp;
        x->cp_ring = 1;
    }
    net_group_placements(x->c, s->world, x->cp_a2a, s->tp, &x->cp_a2a_places);
    net_group_placements(x->c, s->world, x->cp_ring, s->tp * x->cp_a2a, &x->cp_ring_places);
    net_group_placements(x->c, s->world, s->ep * s->etp, 1, &x->tp_ep_places);
    double s_loc = (double)x->m->seq_length / (double)s->cp;
    double b = (double)in->train.micro_batch_size;
    x->T = s_loc * b;
    x->T_sp = x->sp ? x->T / x->t : x->T;
    const model_spec *m = x->m;
    double a = (double)m->num_attention_heads;
    double qk_dim, v_dim;
    if (m->multi_latent_attention) {
        qk_dim = (double)(m->qk_head_dim + m->qk_pos_emb_head_dim);
        v_dim = (double)m->v_head_dim;
        x->q = a * qk_dim;
        x->kv_k = x->q;
        x->kv_v = a * v_dim;
        x->core_out = x->kv_v;
    } else {
        qk_dim = v_dim = (double)model_kv_channels(m);
        x->q = a * qk_dim;
        x->kv_k = x->kv_v = qk_dim * (double)model_query_groups(m);
        x->core_out = x->q;
    }
    x->head_dim = qk_dim;
    /* Causal forward: QK^T and PV over the lower triangle of s x s, per
     * head, split over TP (heads) and CP (queries). */
    double s_full = (double)m->seq_length;
    x->attn_fwd_flops = b * s_full * s_full * a * (qk_dim + v_dim) / (x->t * (double)s->cp);
    x->attn_keys = s_full;
    x->attn = (compute_attn){ compute_attention_family(x->c, s->par.attention_backend, m->softmax_type != 0), true,
                              0.0, qk_dim, s_full };
}
