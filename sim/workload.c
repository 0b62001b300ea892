/* workload: the op templates of one step (contract in workload.h).
 *
 * A pass is built as an op list (wl_opbuf) by small emitters, one per
 * piece of Megatron's layer: column/row-parallel linears with their TP
 * collectives, attention (fused, unfused, the CP ring beside its steps),
 * MLP and MoE (router, permutes, EP all-to-all, grouped GEMMs), embedding
 * and output layer.  Each emitter costs its kernels with compute and its
 * collectives with net and appends them; an op names its dependencies by
 * absolute index when pushed and is stored with the distance back, so a
 * template can be copied and instantiated anywhere.
 *
 * Layers of one type (dense/MoE x full/sliding-window attention) have the
 * same ops: each is built once into a layer cache, fused there, and
 * appended per layer; chunks that hold the same run of layer types and no
 * embedding, output or bucketing are copied from a twin.  Fusing merges an
 * op into the one before it where nothing else can tell (same stream,
 * single dependency, nothing waits on the first), keeping the ops that
 * release a DP bucket or wait for a parameter all-gather as ends.
 *
 * DP buckets follow Megatron's DDP: gradients fill buckets in backward
 * order (ddp.bucket_size, else max(40M, 1M x DP) parameters, only on the
 * first chunk of the first stage when overlapped); each records the
 * backward op after which it is final and the forward op where its
 * parameters are first used.
 *
 * Failures are sticky in the op buffer (oom, first op of an out-of-range
 * duration); a chunk is checked once when built: every computed duration
 * (op, whole pass, bucket, p2p, optimizer, embedding all-reduce) must lie
 * in [0, LIMIT_DURATION_S], else SIM_EINVAL names it.
 */
#include "workload.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compute.h"
#include "bounds.h"
#include "memory.h"
#include "net.h"

/* ---- op list under construction ---------------------------------------- */

/* Failures are sticky (as in every builder here): after the first, pushes
 * still return an index but store nothing, and the caller checks the
 * flags once when the pass is done. */
static void too_long(wl_opbuf *b, const char *name, double seconds)
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
static int32_t then(wl_opbuf *b, const char *name, stream_kind st, double seconds)
{
    return wl_push(b, name, st, seconds, b->n - 1, WL_NONE);
}

/* A zero-length op after ops a and c: a dependency, not a kernel. */
static void join(wl_opbuf *b, int32_t a, int32_t c)
{
    int32_t i = wl_push(b, "join", STREAM_COMPUTE, 0.0, a, c);
    if (!b->oom)
        b->ops[i].launches = 0;
}

/* The host launches of op i (a kernel issued once per local expert). */
static void set_launches(wl_opbuf *b, int32_t i, double n)
{
    if (!b->oom && i >= 0 && i < b->n)
        b->ops[i].launches = n >= 1 && n <= UINT32_MAX ? (uint32_t)n : 1u;
}

/* ---- the costing context --------------------------------------------- */

typedef struct ctx {
    const run_inputs *in;
    const strategy_t *s;
    const cluster_spec *c;
    const model_spec *m;
    bool ideal;            /* sim.ideal_pipeline: no communication */
    bool host;             /* host issue ops in the templates (host_issue) */
    gemm_dtype dt;
    double t;              /* TP size */
    double T;              /* tokens of one microbatch on this rank after SP gather */
    double T_sp;           /* tokens held between the TP regions (T/t with SP) */
    double h;
    double q, kv_k, kv_v, core_out; /* projection widths */
    double attn_fwd_flops; /* one layer, this rank */
    double attn_keys;      /* keys a query sees at most: seq_length, or the window */
    double head_dim;       /* query/key head dimension */
    compute_attn attn;     /* attention kernel: family, mask, window */
    bool sp;
    bool no_cast;          /* GEMMs outside Transformer Engine stay in bf16 */
    bool frozen;           /* LoRA: base weights get no weight gradient */
    double lora_dim;       /* LoRA adapter rank */
    unsigned lora_targets; /* LORA_* bits */
    struct layer_cache *cache; /* op lists of one layer, built once per type */
    /* Context parallelism: a ring of cp_ring steps over Ulysses all-to-alls
     * of cp_a2a ranks; where their groups and the allgather dispatcher's
     * ETP x EP group sit (set once: the placements are the same for every
     * layer). */
    int64_t cp_ring, cp_a2a;
    group_placements cp_a2a_places, cp_ring_places, tp_ep_places;
} ctx;

static double gemm(const ctx *x, wl_opbuf *b, double m, double n, double k)
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
static double ggemm(const ctx *x, wl_opbuf *b, double groups, double m, double n, double k)
{
    b->flops += 2.0 * groups * m * n * k;
    return compute_grouped_gemm_s(x->c, groups, m, n, k, x->dt);
}

static double mem(const ctx *x, double bytes)
{
    return compute_memory_s(x->c, bytes);
}

/* Quantizing `elements` of a GEMM operand for a low-precision recipe
 * (Transformer Engine casts activations before fprop and gradients before
 * dgrad/wgrad); no op for bf16. */
static void cast(const ctx *x, wl_opbuf *b, double elements)
{
    double per = compute_cast_bytes_per_element(x->s->par.precision);
    if (per > 0 && !x->ideal && !x->no_cast)
        then(b, "quantize", STREAM_COMPUTE, mem(x, per * elements));
}

static double coll(const ctx *x, group_kind g, coll_kind k, double bytes)
{
    if (x->ideal)
        return 0.0;
    return net_collective_worst_s(x->c, &x->s->places[g], k, bytes);
}

/* A communication op exists only when its group has more than one rank
 * and the run is not the ideal pipeline. */
static bool has(const ctx *x, group_kind g)
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
static double contended(const ctx *x, const group_placements *p, double comp, double comm)
{
    double t = contended_one(x, &p->span[p->worst], comp, comm);
    for (int i = 0; i < p->n; i++)
        if (i != p->worst)
            t = fmax(t, contended_one(x, &p->span[i], comp, comm));
    return t;
}

/* TP entry into a column-parallel region: SP all-gather of the sequence. */
static void tp_enter(const ctx *x, wl_opbuf *b, const char *name)
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
static void column_fwd(const ctx *x, wl_opbuf *b, const char *name, double m, double n, double k, unsigned lora)
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
static void row_fwd(const ctx *x, wl_opbuf *b, const char *name, double m, double n, double k, unsigned lora)
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
static void row_bwd(const ctx *x, wl_opbuf *b, const char *dgrad, const char *wgrad, double m, double n_out,
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
static void column_bwd(const ctx *x, wl_opbuf *b, const char *dgrad, const char *wgrad, double m, double n_out,
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

/* ---- host issue: modules and their host ops --------------------------- */

/* Marks the start of a module; the ops from here to the next mark are
 * issued together. */
static void module(wl_opbuf *b, uint8_t scope, bool sync, double framework_ops)
{
    if (b->n_marks < WL_MAX_MARKS)
        b->marks[b->n_marks++] = (wl_mark){b->n, scope, sync, framework_ops};
    else
        b->oom = 1; /* a layer has a handful of modules: never reached */
}

/* Is a module captured in a CUDA graph?  Whole-layer graphs (an empty
 * module list) leave the MoE dispatch and experts eager: their token
 * counts are dynamic in a dropless MoE (megatron-features.md §C.3). */
static bool graphed(const ctx *x, uint8_t scope)
{
    const graph_spec *g = &x->in->graphs;
    if (g->impl == GRAPH_NONE || scope == WL_SCOPE_NONE)
        return false;
    if (g->modules == 0) /* the whole layer; dropless experts have dynamic shapes */
        return scope != WL_SCOPE_MOE || x->s->par.moe_pad_to_capacity;
    static const unsigned bit[] = {
        [WL_SCOPE_ATTN] = GRAPH_MOD_ATTN, [WL_SCOPE_MLP] = GRAPH_MOD_MLP,
        [WL_SCOPE_MOE_ROUTER] = GRAPH_MOD_MOE_ROUTER, [WL_SCOPE_MOE_PREPROCESS] = GRAPH_MOD_MOE_PREPROCESS,
        [WL_SCOPE_MOE] = GRAPH_MOD_MOE,
    };
    return (g->modules & bit[scope]) != 0;
}

/* Framework ops of one module call (cluster.host.framework_ops.*): the
 * forward count, times the autograd factor in a backward pass. */
static double host_ops(const ctx *x, int kind, bool bwd)
{
    double n = (double)x->c->host.framework_ops[kind];
    return bwd ? n * x->c->host.framework_ops_bwd_factor : n;
}

/* The router's module holds the shared experts, a dense MLP, too. */
static double router_ops(const ctx *x, bool bwd)
{
    return host_ops(x, HOST_OPS_MOE_ROUTER, bwd) +
           (x->m->moe_shared_expert_intermediate_size > 0 ? host_ops(x, HOST_OPS_MLP, bwd) : 0.0);
}

/* Experts on this rank (balanced placement). */
static double local_experts(const ctx *x)
{
    return (double)x->m->num_moe_experts / (double)x->s->ep;
}

/* Dispatch, experts (a fixed part and one per local expert) and combine:
 * one module. */
static double moe_ops(const ctx *x, bool bwd)
{
    return host_ops(x, HOST_OPS_MOE_DISPATCH, bwd) + host_ops(x, HOST_OPS_MOE_EXPERTS, bwd) +
           host_ops(x, HOST_OPS_MOE_PER_EXPERT, bwd) * local_experts(x) + host_ops(x, HOST_OPS_MOE_COMBINE, bwd);
}

static sim_time_ps host_ps(double seconds)
{
    sim_time_ps t;
    return time_from_s_checked(seconds, &t) ? t : 0; /* keys are bounded by LIMIT_LATENCY_US */
}

/* Appends a host op of exactly d ps on STREAM_HOST after d0. */
static int32_t push_host(wl_opbuf *b, const char *name, sim_time_ps d, int32_t d0)
{
    int32_t i = wl_push(b, name, STREAM_HOST, 0.0, d0, WL_NONE);
    if (!b->oom)
        b->ops[i].duration_ps = d;
    return i;
}

/* Rewrites an op list so that every module is issued by the host before
 * its kernels run.  Per module, the host spends op_overhead (or one graph
 * launch when the module is graphed) and launch per kernel; at an MoE
 * dispatch it first copies the token counts to the host, waiting for the
 * GPU work before it (sync).  With H_i the host time through kernel i and
 * s_i the kernel's start when everything is issued at once (in the
 * module's own dependency order), the module's GPU work can begin no
 * earlier than lead = max_i (H_i - s_i) after the host starts it: one host
 * op of that length gates the module's first kernels, and a second holds
 * the host for the rest of its issue time.  The module's end is then exact
 * for a chain of kernels (max-plus: it ends at max(GPU free + span, host
 * free + lead + span)); kernels inside it may run a little later than when
 * issued one by one.  Zero-length joins are not kernels. */
static void host_issue(const ctx *x, wl_opbuf *p)
{
    int32_t n_marks = p->n_marks;
    p->n_marks = 0;
    if (!x->host || p->oom || p->n == 0)
        return;
    const host_params *h = &x->c->host;
    const sim_time_ps launch = host_ps(h->launch_s), overhead = host_ps(h->op_overhead_s),
                      graph = host_ps(h->graph_launch_s), sync = host_ps(h->sync_s);
    wl_opbuf out = {0};
    int32_t *map = malloc((size_t)p->n * sizeof *map);
    sim_time_ps *end = malloc((size_t)p->n * sizeof *end);
    if (!map || !end) {
        free(map);
        free(end);
        p->oom = 1;
        return;
    }
    /* Segments: [0, first mark) is a module of no scope, then one per mark. */
    for (int32_t m = -1; m < n_marks && !out.oom; m++) {
        int32_t a = m < 0 ? 0 : p->marks[m].at, e = m + 1 < n_marks ? p->marks[m + 1].at : p->n;
        if (e <= a)
            continue;
        uint8_t scope = m < 0 ? WL_SCOPE_NONE : p->marks[m].scope;
        bool g = graphed(x, scope);
        int32_t last_on[STREAM_KINDS];
        for (int k = 0; k < STREAM_KINDS; k++)
            last_on[k] = -1;
        sim_time_ps cum = g ? graph : overhead, fw = 0;
        uint64_t total = 0, seen = 0; /* launches of the module, and through op i */
        for (int32_t i = a; i < e; i++)
            total += p->ops[i].launches;
        double fw_s = !g && m >= 0 ? p->marks[m].framework_ops * h->launch_s : 0.0;
        double all_s = time_as_s(cum) + fw_s + (g ? 0.0 : (double)total * h->launch_s);
        sim_time_ps per = g ? 0 : launch;
        if (!time_s_fits(all_s)) {
            too_long(p, "the host issue of one module", all_s); /* sticky: the pass is refused */
            per = 0;
        } else {
            (void)time_from_s_checked(fw_s, &fw); /* fits: all_s does */
        }
        sim_time_ps lead = 0;
        for (int32_t i = a; i < e; i++) {
            const wl_op *op = &p->ops[i];
            sim_time_ps start = last_on[op->stream] >= 0 ? end[last_on[op->stream]] : 0;
            for (int j = 0; j < 2; j++) {
                int32_t d = i - op->dep_back[j];
                if (op->dep_back[j] && d >= a && end[d] > start)
                    start = end[d];
            }
            end[i] = start + op->duration_ps;
            last_on[op->stream] = i;
            cum += (sim_time_ps)op->launches * per;
            seen += op->launches;
            /* The framework's own calls are spread over the module's
             * launches (the router's top-k between its GEMM and the
             * permute); all of them are done by the last one. */
            sim_time_ps at = cum + (seen >= total ? fw : (sim_time_ps)((double)fw * (double)seen / (double)total));
            if (at > start && at - start > lead)
                lead = at - start;
        }
        cum += fw;
        if (m >= 0 && p->marks[m].sync && !g && a > 0 && sync > 0)
            push_host(&out, "d2h_sync", sync, map[a - 1]);
        int32_t gate = cum > 0 ? push_host(&out, "host_issue", lead, WL_NONE) : WL_NONE;
        if (cum > lead)
            push_host(&out, "host_issue", cum - lead, WL_NONE);
        for (int k = 0; k < STREAM_KINDS; k++)
            last_on[k] = -1;
        for (int32_t i = a; i < e && !out.oom; i++) {
            wl_op op = p->ops[i];
            bool root = last_on[op.stream] < 0;
            int32_t at = wl_push(&out, op.name, (stream_kind)op.stream, 0.0, WL_NONE, WL_NONE);
            if (out.oom)
                break;
            for (int j = 0; j < 2; j++)
                if (op.dep_back[j]) {
                    int32_t d = i - op.dep_back[j];
                    root = root && d < a;
                    op.dep_back[j] = at - map[d];
                }
            if (root && gate != WL_NONE)
                for (int j = 1; j >= 0; j--)
                    if (!op.dep_back[j]) {
                        op.dep_back[j] = at - gate;
                        break;
                    }
            out.ops[at] = op;
            map[i] = at;
            last_on[op.stream] = i;
        }
    }
    free(map);
    free(end);
    if (out.oom) {
        free(out.ops);
        p->oom = 1;
        return;
    }
    free(p->ops);
    p->ops = out.ops;
    p->n = out.n;
    p->cap = out.cap;
}

static void attention_fwd(const ctx *x, wl_opbuf *b)
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

static void attention_bwd(const ctx *x, wl_opbuf *b, bool recompute_attn)
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

/* ---- Mamba-2 mixer ---------------------------------------------------- */

/* The chunked SSD scan of one microbatch on this rank: H/t heads of P, G/t
 * groups of state N, chunk Q.  Flops [D] from the SSD kernels:
 * chunk_scan T H P (Q + 2N) (the tilelang formula, kernels.md §5),
 * chunk_state 2 T H P N, the C^T B products T Q G N; state passing is
 * small.  Bytes: x, B, C, dt in and y out, bf16. */
static void ssd_scan(const ctx *x, wl_opbuf *b, bool bwd)
{
    const model_spec *m = x->m;
    double H = (double)m->mamba_num_heads / x->t, P = (double)m->mamba_head_dim;
    double G = (double)m->mamba_num_groups / x->t, N = (double)m->mamba_state_dim;
    double Q = (double)m->mamba_chunk_size;
    double flops = x->T * (H * P * (Q + 4.0 * N) + Q * G * N);
    double bytes = 2.0 * x->T * (2.0 * H * P + 2.0 * G * N + H);
    b->flops += bwd ? 2.0 * flops : flops;
    then(b, bwd ? "ssd_scan_bwd" : "ssd_scan", STREAM_COMPUTE, compute_ssd_s(x->c, flops, bytes, bwd));
}

/* d_inner on this rank and the conv's channels x, B, C (mamba_mixer.py:321-339). */
static void mamba_widths(const ctx *x, double *d_l, double *conv)
{
    *d_l = model_mamba_d_inner(x->m) / x->t;
    *conv = *d_l + 2.0 * (double)x->m->mamba_num_groups * (double)x->m->mamba_state_dim / x->t;
}

/* megatron/core/ssm/mamba_mixer.py: norm, in_proj (column-parallel, the SP
 * all-gather before it), depthwise conv1d over x, B, C (kernel 4), the SSD
 * scan, the gated RMSNorm, out_proj (row-parallel, the SP reduce-scatter
 * after it); the host issues it as one module like attention. */
static void mamba_fwd(const ctx *x, wl_opbuf *b)
{
    const model_spec *m = x->m;
    double d_l, conv;
    mamba_widths(x, &d_l, &conv);
    module(b, WL_SCOPE_ATTN, false, host_ops(x, HOST_OPS_ATTN, false));
    then(b, "mamba_norm", STREAM_COMPUTE, mem(x, 4.0 * x->T_sp * x->h));
    column_fwd(x, b, "mamba_in_proj", x->T, model_mamba_in_proj_width(m) / x->t, x->h, 0);
    then(b, "mamba_conv1d", STREAM_COMPUTE, mem(x, 4.0 * x->T * conv));
    ssd_scan(x, b, false);
    then(b, "mamba_gated_norm", STREAM_COMPUTE, mem(x, 6.0 * x->T * d_l));
    row_fwd(x, b, "mamba_out_proj", x->T, x->h, d_l, 0);
    then(b, "bias_dropout_add", STREAM_COMPUTE, mem(x, 7.0 * x->T_sp * x->h));
}

/* The backward mirrors it; the fused kernel recomputes the conv output
 * and the chunk states (megatron-features.md B.5), counted in the conv and
 * scan backward (twice the forward). */
static void mamba_bwd(const ctx *x, wl_opbuf *b)
{
    const model_spec *m = x->m;
    double d_l, conv;
    mamba_widths(x, &d_l, &conv);
    module(b, WL_SCOPE_ATTN, false, host_ops(x, HOST_OPS_ATTN, true));
    then(b, "bias_dropout_add_bwd", STREAM_COMPUTE, mem(x, 5.0 * x->T_sp * x->h));
    row_bwd(x, b, "mamba_out_proj_dgrad", "mamba_out_proj_wgrad", x->T, x->h, d_l, 0);
    then(b, "mamba_gated_norm_bwd", STREAM_COMPUTE, mem(x, 10.0 * x->T * d_l));
    ssd_scan(x, b, true);
    then(b, "mamba_conv1d_bwd", STREAM_COMPUTE, mem(x, 8.0 * x->T * conv));
    column_bwd(x, b, "mamba_in_proj_dgrad", "mamba_in_proj_wgrad", x->T, model_mamba_in_proj_width(m) / x->t,
               x->h, 0);
    then(b, "mamba_norm_bwd", STREAM_COMPUTE, mem(x, 8.0 * x->T_sp * x->h));
}

/* ---- MLP ------------------------------------------------------------- */

static void dense_mlp_fwd(const ctx *x, wl_opbuf *b, double F, const char *pfx_fc1,
                          const char *pfx_act, const char *pfx_fc2)
{
    double glu = x->m->gated_linear_unit ? 2.0 : 1.0;
    column_fwd(x, b, pfx_fc1, x->T, F * glu / x->t, x->h, LORA_FC1);
    then(b, pfx_act, STREAM_COMPUTE, mem(x, 2.0 * x->T * F * (glu + 1.0) / x->t));
    row_fwd(x, b, pfx_fc2, x->T, x->h, F / x->t, LORA_FC2);
}

static void dense_mlp_bwd(const ctx *x, wl_opbuf *b, double F)
{
    double glu = x->m->gated_linear_unit ? 2.0 : 1.0;
    row_bwd(x, b, "fc2_dgrad", "fc2_wgrad", x->T, x->h, F / x->t, LORA_FC2);
    then(b, "act_bwd", STREAM_COMPUTE, mem(x, 2.0 * x->T * F * (2.0 * glu + 1.0) / x->t));
    column_bwd(x, b, "fc1_dgrad", "fc1_wgrad", x->T, F * glu / x->t, x->h, LORA_FC1);
}

/* One EP exchange of the routed rows: the flex dispatcher's kernels at the
 * kernel table's rates where it has them (paced by the placement that
 * spans the most domains), else an all-to-all. */
static double ep_a2a_s(const ctx *x, bool combine, double bytes)
{
    const strategy_t *s = x->s;
    double t;
    if (s->par.moe_token_dispatcher == MOE_DISPATCHER_FLEX &&
        compute_flex_s(x->c, (kt_flex_backend)s->par.moe_flex_backend, combine, (double)s->ep,
                       (double)s->places[GROUP_EP].span[s->places[GROUP_EP].worst].domains, bytes, &t))
        return t;
    return coll(x, GROUP_EP, COLL_ALL_TO_ALL, bytes);
}

/* The grouped expert GEMMs of Transformer Engine's GroupedLinear loop
 * cuBLAS over the local experts on several streams ("multi-stream cuBLAS
 * (TE)", kernels.md §1.3): one launch per expert, when
 * cluster.host.grouped_gemm_per_expert; the quantize of their inputs
 * likewise with grouped_quantize_per_expert. */
static void expert_gemm(const ctx *x, wl_opbuf *b, const char *name, double seconds)
{
    int32_t i = then(b, name, STREAM_COMPUTE, seconds);
    if (x->c->host.grouped_gemm_per_expert)
        set_launches(b, i, local_experts(x));
}

static void expert_cast(const ctx *x, wl_opbuf *b, double elements)
{
    int32_t n = b->n;
    cast(x, b, elements);
    if (b->n > n && x->c->host.grouped_quantize_per_expert)
        set_launches(b, b->n - 1, local_experts(x));
}

/* Routed experts with the all-to-all dispatcher: tokens of this rank times
 * top-k leave through the EP all-to-all, are gathered over ETP, run
 * through this rank's experts (grouped GEMMs) and come back. */
static void moe_fwd(const ctx *x, wl_opbuf *b, bool bwd)
{
    const model_spec *m = x->m;
    const strategy_t *s = x->s;
    double glu = m->gated_linear_unit ? 2.0 : 1.0;
    double k = (double)m->moe_router_topk;
    double etp = (double)s->etp;
    double sent = x->T_sp * k;                 /* rows this rank dispatches */
    /* Balanced routing fills each expert to its share; a capacity factor c
     * drops what is beyond c shares, and padding fills every expert to c. */
    double cf = s->par.moe_capacity_factor;
    if (cf > 0)
        sent *= s->par.moe_pad_to_capacity ? cf : fmin(cf, 1.0);
    double rows = sent * etp;                  /* rows its experts process */
    double Fe = (double)model_moe_ffn(m) / etp;
    /* Experts on this rank, each fed rows / E_loc rows (balanced routing). */
    double E_loc = local_experts(x);
    double a2a_bytes = sent * x->h * 2.0;
    /* The allgather dispatcher gathers every token of the ETP x EP group
     * (hidden states and routing) and reduce-scatters the results back;
     * alltoall (and flex, DeepEP's fused form) move only the routed rows. */
    bool allgather = s->par.moe_token_dispatcher == MOE_DISPATCHER_ALLGATHER && s->ep * s->etp > 1;
    double ag_bytes = x->T_sp * x->h * 2.0 * (double)(s->ep * s->etp);
    const char *gather = allgather ? "ep_allgather" : "ep_dispatch";
    const char *scatter = allgather ? "ep_reduce_scatter" : "ep_combine";
    /* Both directions of one exchange: (all-to-all, or the allgather
     * dispatcher's all-gather / reduce-scatter). */
#define EP_EXCHANGE(name, coll_a2a, coll_ag)                                                                 \
    do {                                                                                                     \
        if (allgather && !x->ideal)                                                                          \
            then(b, name, STREAM_EP, net_collective_worst_s(x->c, &x->tp_ep_places, coll_ag, ag_bytes));                     \
        else if (!allgather && has(x, GROUP_EP))                                                             \
            then(b, name, STREAM_EP, ep_a2a_s(x, coll_ag == COLL_REDUCE_SCATTER, a2a_bytes));               \
    } while (0)
    bool etp_comm = !allgather && has(x, GROUP_ETP);
    /* flex (DeepEP): a token crosses to another NVLink domain once per
     * domain it is routed to, then fans out over NVLink, instead of once per
     * expert.  With uniform routing of k experts over D domains it reaches
     * D(1 - (1 - 1/D)^k) of them, and at most moe_router_group_topk under
     * group-limited routing; the all-to-all's bytes shrink by that over k. */
    if (s->par.moe_token_dispatcher == MOE_DISPATCHER_FLEX && !s->groups[GROUP_EP].in_nvlink_domain) {
        double D = (double)s->groups[GROUP_EP].domains;
        double reach = D * (1.0 - pow(1.0 - 1.0 / D, k));
        if (m->moe_router_group_topk > 0 && (double)m->moe_router_group_topk < reach)
            reach = (double)m->moe_router_group_topk;
        if (reach < k)
            a2a_bytes *= reach / k;
    }
    if (!bwd) {
        then(b, "router", STREAM_COMPUTE, gemm(x, b, x->T_sp, (double)m->num_moe_experts, x->h));
        module(b, WL_SCOPE_MOE_PREPROCESS, false, host_ops(x, HOST_OPS_MOE_PREPROCESS, false));
        then(b, "permute", STREAM_COMPUTE, mem(x, 4.0 * sent * x->h));
        /* Dropless: the dispatch needs the token counts on the host; padded
         * to capacity, the shapes are static and nothing waits. */
        module(b, WL_SCOPE_MOE, !s->par.moe_pad_to_capacity, moe_ops(x, false));
        EP_EXCHANGE(gather, COLL_ALL_TO_ALL, COLL_ALL_GATHER);
        if (etp_comm)
            then(b, "etp_ag", STREAM_EP, coll(x, GROUP_ETP, COLL_ALL_GATHER, rows * x->h * 2.0));
        expert_cast(x, b, rows * x->h);
        expert_gemm(x, b, "expert_fc1", ggemm(x, b, E_loc, rows / E_loc, Fe * glu, x->h));
        then(b, "expert_act", STREAM_COMPUTE, mem(x, 2.0 * rows * Fe * (glu + 1.0)));
        expert_cast(x, b, rows * Fe);
        expert_gemm(x, b, "expert_fc2", ggemm(x, b, E_loc, rows / E_loc, x->h, Fe));
        if (etp_comm)
            then(b, "etp_rs", STREAM_EP, coll(x, GROUP_ETP, COLL_REDUCE_SCATTER, rows * x->h * 2.0));
        EP_EXCHANGE(scatter, COLL_ALL_TO_ALL, COLL_REDUCE_SCATTER);
        then(b, "unpermute", STREAM_COMPUTE, mem(x, 4.0 * sent * x->h));
    } else {
        then(b, "unpermute_bwd", STREAM_COMPUTE, mem(x, 4.0 * sent * x->h));
        /* Backward of a reduce-scatter is an all-gather and vice versa. */
        EP_EXCHANGE(allgather ? "ep_allgather_bwd" : "ep_combine_bwd", COLL_ALL_TO_ALL, COLL_ALL_GATHER);
        if (etp_comm)
            then(b, "etp_ag", STREAM_EP, coll(x, GROUP_ETP, COLL_ALL_GATHER, rows * x->h * 2.0));
        expert_cast(x, b, rows * x->h);
        expert_gemm(x, b, "expert_fc2_dgrad", ggemm(x, b, E_loc, rows / E_loc, Fe, x->h));
        expert_gemm(x, b, "expert_fc2_wgrad", ggemm(x, b, E_loc, Fe, x->h, rows / E_loc));
        then(b, "expert_act_bwd", STREAM_COMPUTE, mem(x, 2.0 * rows * Fe * (2.0 * glu + 1.0)));
        expert_cast(x, b, rows * Fe * glu);
        expert_gemm(x, b, "expert_fc1_dgrad", ggemm(x, b, E_loc, rows / E_loc, x->h, Fe * glu));
        expert_gemm(x, b, "expert_fc1_wgrad", ggemm(x, b, E_loc, Fe * glu, x->h, rows / E_loc));
        if (etp_comm)
            then(b, "etp_rs", STREAM_EP, coll(x, GROUP_ETP, COLL_REDUCE_SCATTER, rows * x->h * 2.0));
        EP_EXCHANGE(allgather ? "ep_reduce_scatter_bwd" : "ep_dispatch_bwd", COLL_ALL_TO_ALL, COLL_REDUCE_SCATTER);
        module(b, WL_SCOPE_MOE_PREPROCESS, false, host_ops(x, HOST_OPS_MOE_PREPROCESS, true));
        then(b, "permute_bwd", STREAM_COMPUTE, mem(x, 4.0 * sent * x->h));
        module(b, WL_SCOPE_MOE_ROUTER, false, router_ops(x, true));
        then(b, "router_bwd", STREAM_COMPUTE, gemm(x, b, x->T_sp, x->h, (double)m->num_moe_experts));
        then(b, "router_wgrad", STREAM_COMPUTE, gemm(x, b, (double)m->num_moe_experts, x->h, x->T_sp));
    }
#undef EP_EXCHANGE
}

static void mlp_fwd(const ctx *x, wl_opbuf *b, bool moe)
{
    /* the router's scope holds the shared experts */
    module(b, moe ? WL_SCOPE_MOE_ROUTER : WL_SCOPE_MLP, false,
           moe ? router_ops(x, false) : host_ops(x, HOST_OPS_MLP, false));
    then(b, "ln2", STREAM_COMPUTE, mem(x, 4.0 * x->T_sp * x->h));
    if (!moe) {
        dense_mlp_fwd(x, b, (double)x->m->ffn_hidden_size, "fc1", "act", "fc2");
    } else {
        double Fsh = (double)x->m->moe_shared_expert_intermediate_size;
        if (Fsh > 0)
            dense_mlp_fwd(x, b, Fsh, "shared_fc1", "shared_act", "shared_fc2");
        moe_fwd(x, b, false);
    }
    then(b, "bias_dropout_add", STREAM_COMPUTE, mem(x, 7.0 * x->T_sp * x->h));
}

static void mlp_bwd(const ctx *x, wl_opbuf *b, bool moe, bool recompute_mlp)
{
    module(b, moe ? WL_SCOPE_MOE : WL_SCOPE_MLP, false, moe ? moe_ops(x, true) : host_ops(x, HOST_OPS_MLP, true));
    then(b, "bias_dropout_add_bwd", STREAM_COMPUTE, mem(x, 5.0 * x->T_sp * x->h));
    if (!moe) {
        double F = (double)x->m->ffn_hidden_size;
        if (recompute_mlp)
            dense_mlp_fwd(x, b, F, "fc1", "act", "fc2");
        dense_mlp_bwd(x, b, F);
    } else {
        moe_fwd(x, b, true);
        double Fsh = (double)x->m->moe_shared_expert_intermediate_size;
        if (Fsh > 0)
            dense_mlp_bwd(x, b, Fsh);
    }
    then(b, "ln2_bwd", STREAM_COMPUTE, mem(x, 8.0 * x->T_sp * x->h));
}

/* ---- embedding and output layer ---------------------------------------- */

static void embedding_fwd(const ctx *x, wl_opbuf *b)
{
    module(b, WL_SCOPE_NONE, false, host_ops(x, HOST_OPS_EMBEDDING, false));
    then(b, "embedding", STREAM_COMPUTE, mem(x, 2.0 * x->T * x->h));
    if (has(x, GROUP_TP))
        then(b, x->sp ? "tp_rs" : "tp_ar", STREAM_TP,
             coll(x, GROUP_TP, x->sp ? COLL_REDUCE_SCATTER : COLL_ALL_REDUCE, x->T * x->h * 2.0));
}

/* The embedding's backward only scatters the weight gradient: nothing to
 * do when the weights are frozen (LoRA). */
static void embedding_bwd(const ctx *x, wl_opbuf *b)
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

static void output_fwd(const ctx *x0, wl_opbuf *b)
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

static void output_bwd(const ctx *x0, wl_opbuf *b)
{
    ctx y = bf16_ctx(x0);
    const ctx *x = &y;
    double V = padded_vocab_local(x);
    module(b, WL_SCOPE_NONE, false, host_ops(x, HOST_OPS_OUTPUT, true));
    then(b, "cross_entropy_bwd", STREAM_COMPUTE, mem(x, 2.0 * 4.0 * x->T * V));
    column_bwd(x, b, "logits_dgrad", "logits_wgrad", x->T, V, x->h, 0);
    then(b, "final_norm_bwd", STREAM_COMPUTE, mem(x, 8.0 * x->T_sp * x->h));
}

/* ---- one chunk ------------------------------------------------------- */

/* Every layer of a type (mixer attention / Mamba / none, MLP dense / MoE
 * / none, full or sliding-window attention) has the same ops: they are
 * built once per workload and copied. */
enum { LAYER_KINDS = 18 };
typedef struct layer_cache {
    wl_opbuf pass[LAYER_KINDS][2]; /* [layer_kind][0 forward, 1 backward] */
    bool built[LAYER_KINDS][2];
} layer_cache;

/* mlp + 3 window + 6 mixer (model_mlp_kind, model_mixer_kind). */
static int layer_kind(const ctx *x, int64_t layer)
{
    if (x->ideal && !x->m->hybrid)
        layer = 0; /* identical work everywhere: the first layer's type */
    const model_layer *l = &x->m->layers[layer];
    int mlp = l->mlp == MODEL_MLP_NONE ? MODEL_MLP_NONE : model_layer_is_moe(x->m, layer) ? MODEL_MLP_MOE : MODEL_MLP_DENSE;
    return mlp + 3 * (model_layer_is_window(x->m, layer) ? 1 : 0) + 6 * l->mixer;
}

/* Appends a cached op list; its first GPU op follows the op before it
 * (host ops ahead of it issue it and wait for nothing). */
static void append(wl_opbuf *dst, const wl_opbuf *src)
{
    if (src->oom) {
        dst->oom = 1;
        return;
    }
    if (src->too_long_name)
        too_long(dst, src->too_long_name, src->too_long_s);
    const int32_t before = dst->n - 1;
    bool linked = false;
    for (int32_t i = 0; i < src->n; i++) {
        int32_t at = then(dst, src->ops[i].name, (stream_kind)src->ops[i].stream, 0.0);
        if (dst->oom)
            return;
        wl_op op = src->ops[i];
        if (!linked && op.stream != STREAM_HOST) {
            op.dep_back[0] = before >= 0 ? at - before : 0;
            linked = true;
        }
        dst->ops[at] = op;
    }
    dst->flops += src->flops;
}

static void layer_fwd(const ctx *x, wl_opbuf *b, int mixer, int mlp)
{
    if (mixer == MODEL_MIXER_ATTENTION)
        attention_fwd(x, b);
    else if (mixer == MODEL_MIXER_MAMBA)
        mamba_fwd(x, b);
    if (mlp != MODEL_MLP_NONE)
        mlp_fwd(x, b, mlp == MODEL_MLP_MOE);
}

static void layer_bwd(const ctx *x, wl_opbuf *b, int mixer, int mlp)
{
    const parallel_spec *p = &x->s->par;
    bool full = p->recompute_granularity == RECOMPUTE_FULL;
    unsigned mods = p->recompute_granularity == RECOMPUTE_SELECTIVE ? p->recompute_modules : 0u;
    bool moe = mlp == MODEL_MLP_MOE;
    if (full)
        layer_fwd(x, b, mixer, mlp); /* rebuild the layer's activations first */
    if (mlp != MODEL_MLP_NONE)
        mlp_bwd(x, b, moe, (mods & RECOMPUTE_MOD_MLP) && !moe);
    if (mixer == MODEL_MIXER_ATTENTION)
        attention_bwd(x, b, (mods & RECOMPUTE_MOD_CORE_ATTN) != 0);
    else if (mixer == MODEL_MIXER_MAMBA)
        mamba_bwd(x, b);
}

static void ctx_init(ctx *x, const run_inputs *in, const strategy_t *s)
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

/* Contract in workload.h.  refs[] counts (saturating) the ops that wait on
 * each op; a chain link needs exactly one. */
int wl_fuse_chains(wl_opbuf *b, int32_t *map, const int32_t *pins, int32_t n_pins)
{
    int32_t n = b->n;
    uint8_t *refs = calloc((size_t)n + 1, 1);
    int32_t *idx = malloc(((size_t)n + 1) * sizeof *idx);
    if (!refs || !idx) {
        free(refs);
        free(idx);
        return SIM_ENOMEM;
    }
    for (int32_t i = 0; i < n; i++)
        for (int j = 0; j < 2; j++)
            if (b->ops[i].dep_back[j] && refs[i - b->ops[i].dep_back[j]] < 255)
                refs[i - b->ops[i].dep_back[j]]++;
    for (int32_t k = 0; k < n_pins; k++)
        if (pins[k] >= 0 && pins[k] < n)
            refs[pins[k]] = 255; /* something else waits on its end */
    int32_t out = 0;
    for (int32_t i = 0; i < n; i++) {
        wl_op op = b->ops[i];
        bool chain = i > 0 && op.dep_back[0] == 1 && op.dep_back[1] == 0 && b->ops[i - 1].stream == op.stream &&
                     refs[i - 1] == 1 && idx[i - 1] == out - 1 &&
                     op.duration_ps <= UINT64_MAX / 2 - b->ops[out - 1].duration_ps; /* no wrap */
        if (chain) {
            b->ops[out - 1].duration_ps += op.duration_ps;
            b->ops[out - 1].launches = op.launches > UINT32_MAX - b->ops[out - 1].launches
                                           ? UINT32_MAX
                                           : b->ops[out - 1].launches + op.launches;
            idx[i] = out - 1;
            continue;
        }
        for (int j = 0; j < 2; j++)
            if (op.dep_back[j])
                op.dep_back[j] = out - idx[i - op.dep_back[j]];
        b->ops[out] = op;
        idx[i] = out++;
    }
    b->n = out;
    if (map)
        memcpy(map, idx, (size_t)n * sizeof *idx);
    free(refs);
    free(idx);
    return SIM_OK;
}

static const wl_opbuf *cached_layer(const ctx *x0, int kind, int bwd)
{
    layer_cache *lc = x0->cache;
    wl_opbuf *p = &lc->pass[kind][bwd];
    if (!lc->built[kind][bwd]) {
        int mlp = kind % 3, mixer = kind / 6;
        ctx y = *x0;
        if ((kind / 3) % 2) {
            /* A sliding window: each query sees about W keys, not s/2. */
            y.attn_fwd_flops *= model_attention_context(x0->m, true) / model_attention_context(x0->m, false);
            y.attn_keys = (double)x0->m->window_size;
            y.attn.window = y.attn_keys < y.attn.seq ? y.attn_keys : 0.0; /* no wider than the sequence */
        }
        if (bwd)
            layer_bwd(&y, p, mixer, mlp);
        else
            layer_fwd(&y, p, mixer, mlp);
        host_issue(x0, p);
        /* Fused once here; the layer's last op stays last, so bucket
         * boundaries (at layer ends) are kept. */
        if (!x0->in->sim.keep_ops && !p->oom && wl_fuse_chains(p, NULL, NULL, 0) != SIM_OK)
            p->oom = 1;
        lc->built[kind][bwd] = true;
    }
    return p;
}

/* Megatron's DDP bucket size in parameters: ddp.bucket_size, else
 * max(40M, 1M x data-parallel size); one bucket per chunk where Megatron
 * disables bucketing (pipeline ranks > 0, chunks after the first) or when
 * gradient reduction is not overlapped. */
static double bucket_params(const ctx *x, int64_t stage, int64_t chunk)
{
    const strategy_t *s = x->s;
    if (!x->in->ddp.overlap_grad_reduce || stage > 0 || chunk > 0)
        return INFINITY;
    if (x->in->ddp.bucket_size > 0)
        return (double)x->in->ddp.bucket_size;
    double dp = (double)(s->dp * s->cp);
    return fmax(40e6, 1e6 * dp);
}

/* DP cost of one bucket holding `dense` and `expert` parameters of this GPU. */
static void bucket_cost(const ctx *x, double dense, double expert, wl_bucket *bk)
{
    const ddp_spec *ddp = &x->in->ddp;
    double grad_bytes = ddp->grad_reduce_in_fp32 ? 4.0 : 2.0;
    if (ddp->use_distributed_optimizer) {
        bk->reduce_s = coll(x, GROUP_DP_CP, COLL_REDUCE_SCATTER, dense * grad_bytes) +
                       coll(x, GROUP_EDP, COLL_REDUCE_SCATTER, expert * grad_bytes);
        bk->gather_s = coll(x, GROUP_DP_CP, COLL_ALL_GATHER, dense * 2.0) +
                       coll(x, GROUP_EDP, COLL_ALL_GATHER, expert * 2.0);
    } else {
        bk->reduce_s = coll(x, GROUP_DP_CP, COLL_ALL_REDUCE, dense * grad_bytes) +
                       coll(x, GROUP_EDP, COLL_ALL_REDUCE, expert * grad_bytes);
        bk->gather_s = 0.0;
    }
}

int wl_duration_err(sim_err *err, double seconds, const char *what)
{
    return sim_err_set(err, SIM_EINVAL,
                       "%s would take %.3g s, outside [0, %.3g s]: the inputs are beyond what parsim can simulate "
                       "(simulated time is 64-bit picoseconds)",
                       what, seconds, LIMIT_DURATION_S);
}

/* A finished pass template: out of memory, an op outside the duration
 * range, or ops that add up past it (the pass alone could then overflow
 * simulated time). */
static int pass_check(const wl_opbuf *p, const char *kind, int64_t stage, int64_t chunk, sim_err *err)
{
    char what[160];
    if (p->oom)
        return SIM_ENOMEM;
    if (p->too_long_name) {
        snprintf(what, sizeof what, "kernel or transfer '%s' of the %s pass of stage %lld chunk %lld",
                 p->too_long_name, kind, (long long)stage, (long long)chunk);
        return wl_duration_err(err, p->too_long_s, what);
    }
    double total = 0;
    for (int32_t i = 0; i < p->n; i++)
        total += time_as_s(p->ops[i].duration_ps);
    if (!time_s_fits(total)) {
        snprintf(what, sizeof what, "the %s pass of stage %lld chunk %lld (its kernels and transfers together)",
                 kind, (long long)stage, (long long)chunk);
        return wl_duration_err(err, total, what);
    }
    return SIM_OK;
}

/* The DP times of a chunk's buckets.  Their size comes from
 * ddp.bucket_size (or Megatron's default), their speed from the DP group's
 * fabric: the message names both. */
static int buckets_check(const wl_bucket *bk, int32_t n, int64_t stage, int64_t chunk, sim_err *err)
{
    for (int32_t k = 0; k < n; k++) {
        bool reduce_ok = time_s_fits(bk[k].reduce_s);
        if (reduce_ok && time_s_fits(bk[k].gather_s))
            continue;
        char what[256];
        snprintf(what, sizeof what,
                 "the DP %s of bucket %d of stage %lld chunk %lld (sized by ddp.bucket_size, over the DP group's "
                 "cluster.nvlink / cluster.scaleout bandwidths)",
                 !reduce_ok ? "gradient reduction" : "parameter all-gather", (int)k, (long long)stage,
                 (long long)chunk);
        return wl_duration_err(err, !reduce_ok ? bk[k].reduce_s : bk[k].gather_s, what);
    }
    return SIM_OK;
}

/* Fuses the chunk's two passes, keeping the ops the buckets point at as
 * ends of ops (and moving the bucket indices to the fused ops). */
static int fuse_chunk(wl_opbuf *f, wl_opbuf *b, wl_bucket *buckets, int32_t n_buckets)
{
    int32_t n_map = f->n > b->n ? f->n : b->n;
    int32_t *map = malloc(((size_t)n_map + 1) * sizeof *map);
    int32_t *pins = malloc(((size_t)n_buckets + 1) * sizeof *pins);
    int rc = map && pins ? SIM_OK : SIM_ENOMEM;
    if (rc == SIM_OK) {
        for (int32_t k = 0; k < n_buckets; k++)
            pins[k] = buckets[k].fwd_op - 1;
        rc = wl_fuse_chains(f, map, pins, n_buckets);
    }
    if (rc == SIM_OK) {
        for (int32_t k = 0; k < n_buckets; k++)
            buckets[k].fwd_op = map[buckets[k].fwd_op];
        for (int32_t k = 0; k < n_buckets; k++)
            pins[k] = buckets[k].ready_op;
        rc = wl_fuse_chains(b, map, pins, n_buckets);
    }
    if (rc == SIM_OK)
        for (int32_t k = 0; k < n_buckets; k++)
            buckets[k].ready_op = map[buckets[k].ready_op];
    free(map);
    free(pins);
    return rc;
}

/* Ops outside the layers (embedding, output layer and loss), issued by
 * the host as one module. */
static void issue_into(const ctx *x, wl_opbuf *dst, void (*build)(const ctx *, wl_opbuf *))
{
    wl_opbuf t = {0};
    build(x, &t);
    host_issue(x, &t);
    append(dst, &t);
    free(t.ops);
}

static int build_chunk(const ctx *x, int64_t stage, int64_t chunk, wl_chunk *out, sim_err *err)
{
    const strategy_t *s = x->s;
    wl_opbuf f = {0}, b = {0};
    int64_t first, count;
    strategy_chunk_layers(s, stage, chunk, &first, &count);
    bool first_virtual = stage == 0 && chunk == 0;
    bool last_virtual = stage == s->pp - 1 && chunk == s->v - 1;
    /* The ideal pipeline runs identical work everywhere: layers only, all
     * of the first layer's type. */
    bool ideal = x->ideal;
    /* Buckets fill in backward order; at most one per layer.
     * layer_start[i]: forward op where layer first + i begins. */
    wl_bucket *buckets = calloc((size_t)count + 1, sizeof *buckets);
    int32_t *layer_start = malloc(((size_t)count + 1) * sizeof *layer_start);
    int rc = buckets && layer_start ? SIM_OK : SIM_ENOMEM;
    if (rc != SIM_OK)
        goto done;
    int32_t n_buckets = 0;
    double limit = bucket_params(x, stage, chunk);
    double chunk_dense, chunk_expert, acc_dense = 0, acc_expert = 0, seen_dense = 0, seen_expert = 0;
    memory_chunk_trained_params(x->in, s, stage, chunk, &chunk_dense, &chunk_expert);

    /* Per-pass host work (the schedule's step, data, loss), when set. */
    if (x->c->compute.pass_overhead_s > 0 && !ideal) {
        then(&f, "host", STREAM_COMPUTE, x->c->compute.pass_overhead_s);
        then(&b, "host", STREAM_COMPUTE, x->c->compute.pass_overhead_s);
    }
    if (first_virtual && !ideal)
        issue_into(x, &f, embedding_fwd);
    for (int64_t l = first; l < first + count; l++) {
        layer_start[l - first] = f.n;
        append(&f, cached_layer(x, layer_kind(x, l), 0));
        /* A layer waits for its parameters at its first kernel, not at
         * the host ops that issue it. */
        while (!f.oom && layer_start[l - first] < f.n - 1 && f.ops[layer_start[l - first]].stream == STREAM_HOST)
            layer_start[l - first]++;
    }
    if (last_virtual && !ideal)
        issue_into(x, &f, output_fwd);

    if (last_virtual && !ideal)
        issue_into(x, &b, output_bwd);
    for (int64_t l = first + count - 1; l >= first; l--) {
        append(&b, cached_layer(x, layer_kind(x, l), 1));
        double d, e;
        memory_layer_trained_params(x->in, s, l, &d, &e);
        acc_dense += d;
        acc_expert += e;
        if (acc_dense + acc_expert >= limit && l > first) {
            buckets[n_buckets].ready_op = b.n - 1;
            buckets[n_buckets].fwd_op = layer_start[l - first];
            bucket_cost(x, acc_dense, acc_expert, &buckets[n_buckets++]);
            seen_dense += acc_dense;
            seen_expert += acc_expert;
            acc_dense = acc_expert = 0;
        }
    }
    if (first_virtual && !ideal)
        issue_into(x, &b, embedding_bwd);
    /* The last bucket takes the rest: its layers, embeddings, norms. */
    buckets[n_buckets].ready_op = b.n - 1;
    buckets[n_buckets].fwd_op = 0;
    while (!f.oom && buckets[n_buckets].fwd_op < f.n - 1 && f.ops[buckets[n_buckets].fwd_op].stream == STREAM_HOST)
        buckets[n_buckets].fwd_op++; /* the first kernel, not the host ops issuing it */
    bucket_cost(x, chunk_dense - seen_dense, chunk_expert - seen_expert, &buckets[n_buckets++]);

    if ((rc = pass_check(&f, "forward", stage, chunk, err)) != SIM_OK ||
        (rc = pass_check(&b, "backward", stage, chunk, err)) != SIM_OK ||
        (rc = buckets_check(buckets, n_buckets, stage, chunk, err)) != SIM_OK)
        goto done;
    if (!x->in->sim.keep_ops && (rc = fuse_chunk(&f, &b, buckets, n_buckets)) != SIM_OK)
        goto done;
    double act = memory_chunk_activation_bytes(x->in, s, ideal ? 0 : stage, ideal ? 0 : chunk);
    double transient = ideal ? 0.0 : memory_chunk_backward_transient_bytes(x->in, s, stage, chunk);
    if (!(act >= 0 && act <= LIMIT_ACT_BYTES && transient >= 0 && transient <= LIMIT_ACT_BYTES)) {
        rc = sim_err_set(err, SIM_EINVAL,
                         "the activations of one microbatch on stage %lld chunk %lld (%.3g bytes, %.3g more in "
                         "the backward) are beyond what parsim counts (%.3g bytes)",
                         (long long)stage, (long long)chunk, act, transient, LIMIT_ACT_BYTES);
        goto done;
    }
    out->fwd = (wl_pass){f.ops, f.n, f.flops};
    out->bwd = (wl_pass){b.ops, b.n, b.flops};
    out->buckets = buckets;
    out->n_buckets = n_buckets;
    f.ops = b.ops = NULL;
    buckets = NULL;
    out->act_bytes = (int64_t)act;
    out->bwd_transient_bytes = (int64_t)transient;
done:
    free(layer_start);
    free(f.ops);
    free(b.ops);
    free(buckets);
    return rc;
}

/* Chunks that hold the same run of layer types, with no embedding or
 * output layer and no bucketing, have the same ops: the twin is copied
 * instead of rebuilt.  Returns an already built chunk (stage, chunk before
 * (r, c) in build order) identical to chunk (stage, chunk), or NULL. */
static bool plain_chunk(const ctx *x, int64_t stage, int64_t chunk)
{
    const strategy_t *s = x->s;
    bool first_virtual = stage == 0 && chunk == 0, last_virtual = stage == s->pp - 1 && chunk == s->v - 1;
    return !first_virtual && !last_virtual && isinf(bucket_params(x, stage, chunk));
}

static const wl_chunk *twin_chunk(const ctx *x, const workload_t *w, int64_t stage, int64_t chunk, int64_t r,
                                  int64_t c)
{
    if (!plain_chunk(x, stage, chunk))
        return NULL;
    int64_t first, count;
    strategy_chunk_layers(x->s, stage, chunk, &first, &count);
    for (int64_t q = 0; q < r * x->s->v + c; q++) {
        int64_t qs = q / x->s->v, qc = q % x->s->v;
        if (x->ideal || !plain_chunk(x, qs, qc))
            continue;
        int64_t f2, n2;
        strategy_chunk_layers(x->s, qs, qc, &f2, &n2);
        if (n2 != count)
            continue;
        bool same = true;
        for (int64_t i = 0; i < count && same; i++)
            same = layer_kind(x, first + i) == layer_kind(x, f2 + i);
        if (same)
            return &w->stages[qs].chunks[qc];
    }
    return NULL;
}

static int copy_chunk(const wl_chunk *from, wl_chunk *to)
{
    *to = *from;
    to->fwd.ops = malloc(((size_t)from->fwd.n_ops + 1) * sizeof *to->fwd.ops);
    to->bwd.ops = malloc(((size_t)from->bwd.n_ops + 1) * sizeof *to->bwd.ops);
    to->buckets = malloc(((size_t)from->n_buckets + 1) * sizeof *to->buckets);
    if (!to->fwd.ops || !to->bwd.ops || !to->buckets) {
        free(to->fwd.ops);
        free(to->bwd.ops);
        free(to->buckets);
        memset(to, 0, sizeof *to);
        return SIM_ENOMEM;
    }
    memcpy(to->fwd.ops, from->fwd.ops, (size_t)from->fwd.n_ops * sizeof *to->fwd.ops);
    memcpy(to->bwd.ops, from->bwd.ops, (size_t)from->bwd.n_ops * sizeof *to->bwd.ops);
    memcpy(to->buckets, from->buckets, (size_t)from->n_buckets * sizeof *to->buckets);
    return SIM_OK;
}

/* Adam on the local shard: read grad, master, m, v; write master, m, v
 * (fp32) and the bf16 weight. */
static double optimizer_s(const ctx *x, int64_t stage)
{
    if (x->ideal)
        return 0.0;
    stage_static_mem sm;
    memory_static(x->in, x->s, stage, &sm);
    return mem(x, sm.shard_params * (4.0 + 12.0 + 12.0 + 2.0));
}

/* The per-stage times beside the chunks: pipeline p2p, tied-embedding
 * all-reduce, optimizer step. */
static int stage_check(const wl_stage *st, int64_t stage, sim_err *err)
{
    const struct {
        double s;
        const char *what;
    } d[] = {
        {st->p2p_s, "the pipeline send of one microbatch's activations"},
        {st->embedding_grad_s, "the tied-embedding gradient all-reduce"},
        {st->optimizer_s, "the optimizer step"},
    };
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        if (!time_s_fits(d[i].s)) {
            char what[160];
            snprintf(what, sizeof what, "%s of stage %lld", d[i].what, (long long)stage);
            return wl_duration_err(err, d[i].s, what);
        }
    return SIM_OK;
}

static void cache_free(layer_cache *cache)
{
    for (int i = 0; i < 2 * LAYER_KINDS; i++)
        free(cache->pass[i / 2][i % 2].ops);
}

int workload_build(workload_t **out, const run_inputs *in, const strategy_t *s, sim_err *err)
{
    *out = NULL;
    layer_cache cache;
    memset(&cache, 0, sizeof cache);
    int rc = SIM_ENOMEM;
    workload_t *w = calloc(1, sizeof *w);
    if (!w)
        goto fail;
    w->pp = s->pp;
    w->v = s->v;
    w->stages = calloc((size_t)s->pp, sizeof *w->stages);
    if (!w->stages)
        goto fail;
    ctx x;
    ctx_init(&x, in, s);
    x.cache = &cache;
    /* One activation (forward) or its gradient (backward) per microbatch
     * crosses each stage boundary: (s/cp [/t with SP]) x b x h in bf16. */
    double p2p_bytes = x.T_sp * x.h * 2.0;
    double p2p_s = x.ideal ? 0.0 : net_p2p_s(x.c, s->groups[GROUP_PP].stride, p2p_bytes);

    for (int64_t r = 0; r < s->pp; r++) {
        wl_stage *st = &w->stages[r];
        st->chunks = calloc((size_t)s->v, sizeof *st->chunks);
        if (!st->chunks) {
            rc = SIM_ENOMEM;
            goto fail;
        }
        st->p2p_s = s->pp > 1 ? p2p_s : 0.0;
        for (int64_t c = 0; c < s->v; c++) {
            int64_t rr = x.ideal ? 0 : r, cc = x.ideal ? 0 : c;
            const wl_chunk *twin = twin_chunk(&x, w, rr, cc, r, c);
            rc = twin ? copy_chunk(twin, &st->chunks[c]) : build_chunk(&x, rr, cc, &st->chunks[c], err);
            if (rc != SIM_OK)
                goto fail;
        }
        st->optimizer_s = optimizer_s(&x, r);
        if (in->model.share_embeddings_and_output_weights && s->pp > 1 && (r == 0 || r == s->pp - 1) && !x.ideal &&
            !x.frozen) {
            /* first and last stage of each pipeline: bases 0 .. world/pp - 1 */
            group_placements pair;
            int64_t per_stage = s->groups[GROUP_PP].stride;
            net_group_placements_of(x.c, 2, (s->pp - 1) * per_stage, per_stage, s->world, 1, &pair);
            double params = x.h * (double)model_padded_vocab(x.m, s->tp) / x.t;
            double grad_bytes = in->ddp.grad_reduce_in_fp32 ? 4.0 : 2.0;
            st->embedding_grad_s = net_collective_worst_s(x.c, &pair, COLL_ALL_REDUCE, params * grad_bytes);
        }
        if ((rc = stage_check(st, r, err)) != SIM_OK)
            goto fail;
    }
    cache_free(&cache);
    *out = w;
    return SIM_OK;
fail:
    cache_free(&cache);
    workload_destroy(w);
    if (rc == SIM_ENOMEM)
        return sim_err_set(err, SIM_ENOMEM, "out of memory building the workload");
    return rc;
}

bool wl_pass_equal(const wl_pass *a, const wl_pass *b)
{
    if (a->n_ops != b->n_ops)
        return false;
    for (int32_t i = 0; i < a->n_ops; i++) {
        const wl_op *p = &a->ops[i], *q = &b->ops[i];
        if (p->name != q->name || p->duration_ps != q->duration_ps || p->stream != q->stream ||
            p->dep_back[0] != q->dep_back[0] || p->dep_back[1] != q->dep_back[1] || p->launches != q->launches)
            return false;
    }
    return true;
}

void workload_destroy(workload_t *w)
{
    if (!w)
        return;
    if (w->stages) {
        for (int64_t r = 0; r < w->pp; r++) {
            wl_stage *st = &w->stages[r];
            if (st->chunks)
                for (int64_t c = 0; c < w->v; c++) {
                    free(st->chunks[c].fwd.ops);
                    free(st->chunks[c].bwd.ops);
                    free(st->chunks[c].buckets);
                }
            free(st->chunks);
        }
        free(w->stages);
    }
    free(w);
}
