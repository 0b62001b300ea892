/* wl_host: the host's issue of a pass (wl_build.h).
 *
 * Emitters mark where each module (attention, MLP, MoE router, preprocess,
 * dispatch + experts + combine) begins; host_issue then rewrites the op
 * list so that the host stream spends each module's issue time (op
 * overhead, framework ops, launches, or one graph replay) before its
 * kernels, with the D2H sync before a dropless MoE dispatch.
 */
#include "wl_build.h"

#include <stdlib.h>

/* ---- host issue: modules and their host ops --------------------------- */

/* Marks the start of a module; the ops from here to the next mark are
 * issued together. */
void module(wl_opbuf *b, uint8_t scope, bool sync, double framework_ops)
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
        [WL_SCOPE_MOE] = GRAPH_MOD_MOE, [WL_SCOPE_MAMBA] = GRAPH_MOD_MAMBA,
    };
    return (g->modules & bit[scope]) != 0;
}

/* Framework ops of one module call (cluster.host.framework_ops.*): the
 * forward count, times the autograd factor in a backward pass. */
double host_ops(const ctx *x, int kind, bool bwd)
{
    double n = (double)x->c->host.framework_ops[kind];
    return bwd ? n * x->c->host.framework_ops_bwd_factor : n;
}

/* The shared experts' framework ops (a dense MLP's), where they are
 * issued: in the router's module, or overlapped with the EP exchange in
 * the dispatcher's (moe_ops). */
static double shared_ops(const ctx *x, bool bwd, bool overlapped)
{
    bool here = x->m->moe_shared_expert_intermediate_size > 0 && shared_overlapped(x) == overlapped;
    return here ? host_ops(x, HOST_OPS_MLP, bwd) : 0.0;
}

double router_ops(const ctx *x, bool bwd)
{
    return host_ops(x, HOST_OPS_MOE_ROUTER, bwd) + shared_ops(x, bwd, false);
}

/* Experts on this rank (balanced placement). */
double local_experts(const ctx *x)
{
    return (double)x->m->num_moe_experts / (double)x->s->ep;
}

/* Dispatch, experts (a fixed part and one per local expert) and combine:
 * one module (with the shared experts when they run beside the exchange). */
double moe_ops(const ctx *x, bool bwd)
{
    return host_ops(x, HOST_OPS_MOE_DISPATCH, bwd) + host_ops(x, HOST_OPS_MOE_EXPERTS, bwd) +
           host_ops(x, HOST_OPS_MOE_PER_EXPERT, bwd) * local_experts(x) + host_ops(x, HOST_OPS_MOE_COMBINE, bwd) +
           shared_ops(x, bwd, true);
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
void host_issue(const ctx *x, wl_opbuf *p)
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
