/* wl_overlap: the templates of two passes that overlap on one rank
 * (Megatron's combined 1F1B; contract of wl_pair_build in workload.h).
 *
 * A layer's ops are tagged with the node they belong to when the layer is
 * built (wl_tag_layer), from the order of its streams: in the forward the
 * ops before the first EP op are pre_dispatch, the EP run after them
 * dispatch, the compute up to the next EP op mlp, the rest (the EP run
 * back, unpermute, the residual) combine; the backward runs them the other
 * way round (combine, mlp, dispatch, pre_dispatch).  Host issue ops belong
 * to the node of the kernels they issue.  With delay_wgrad_compute the
 * weight-gradient GEMMs of mlp and pre_dispatch become nodes of their own
 * and what waited for them waits for what they waited for (their dgrad):
 * the EP all-to-all of the backward then no longer waits for the expert
 * wgrads.  A layer without EP ops is one pre_dispatch node.
 *
 * The pair template takes the two passes' ops node by node in Megatron's
 * order (model_chunk_schedule_plan.py:236-303) and rewrites every
 * dependency to the new positions, so each pass's data flow stays as it
 * was and only the issue order (each stream runs its ops in list order)
 * interleaves them: an all-to-all of one pass runs beside the compute of
 * the other where the data allows.
 */
#include <stdlib.h>

#include "wl_build.h"

static bool is_ep(const wl_op *op)
{
    return op->stream == STREAM_EP;
}

void wl_tag_layer(wl_opbuf *b, int32_t from, bool bwd, bool delay)
{
    if (b->oom)
        return;
    bool moe = false;
    for (int32_t i = from; i < b->n; i++)
        moe = moe || is_ep(&b->ops[i]);
    /* Forward: PRE -> DISPATCH at an EP op, -> MLP at compute, -> COMBINE
     * at the next EP op.  Backward: COMBINE through its EP run, then MLP,
     * DISPATCH at the next EP op, PRE after. */
    uint8_t node = moe ? (bwd ? WL_NODE_COMBINE : WL_NODE_PRE) : WL_NODE_PRE;
    bool seen_ep = false;
    for (int32_t i = from; i < b->n; i++) {
        wl_op *op = &b->ops[i];
        if (op->stream == STREAM_HOST)
            continue;
        bool ep = is_ep(op);
        if (moe && !bwd) {
            if (node == WL_NODE_PRE && ep)
                node = WL_NODE_DISPATCH;
            else if (node == WL_NODE_DISPATCH && !ep)
                node = WL_NODE_MLP;
            else if (node == WL_NODE_MLP && ep)
                node = WL_NODE_COMBINE;
        } else if (moe) {
            if (node == WL_NODE_COMBINE && !ep && seen_ep)
                node = WL_NODE_MLP;
            else if (node == WL_NODE_MLP && ep)
                node = WL_NODE_DISPATCH;
            else if (node == WL_NODE_DISPATCH && !ep)
                node = WL_NODE_PRE;
            seen_ep = seen_ep || ep;
        }
        op->node = node;
        if (bwd && delay && wl_is_wgrad(op) && (node == WL_NODE_MLP || node == WL_NODE_PRE))
            op->node = node == WL_NODE_MLP ? WL_NODE_MLP_DW : WL_NODE_PRE_DW;
    }
    /* Host ops: the node of the next kernel (of the last one at the end). */
    uint8_t next = node;
    for (int32_t i = b->n - 1; i >= from; i--) {
        if (b->ops[i].stream == STREAM_HOST)
            b->ops[i].node = next;
        else
            next = b->ops[i].node;
    }
    if (!bwd || !delay)
        return;
    /* A wgrad node runs after the dgrads: whatever waited for a wgrad GEMM
     * waits for what that GEMM waited for instead. */
    for (int32_t i = from; i < b->n; i++) {
        wl_op *op = &b->ops[i];
        bool dw = op->node == WL_NODE_MLP_DW || op->node == WL_NODE_PRE_DW;
        if (dw)
            continue;
        for (int j = 0; j < 2; j++) {
            int32_t d = op->dep_back[j] ? i - op->dep_back[j] : -1;
            while (d >= from && (b->ops[d].node == WL_NODE_MLP_DW || b->ops[d].node == WL_NODE_PRE_DW))
                d = b->ops[d].dep_back[0] ? d - b->ops[d].dep_back[0] : -1;
            op->dep_back[j] = d >= 0 ? i - d : 0;
        }
        if (op->dep_back[0] == op->dep_back[1])
            op->dep_back[1] = 0;
        if (!op->dep_back[0]) {
            op->dep_back[0] = op->dep_back[1];
            op->dep_back[1] = 0;
        }
    }
}

void wl_mark_layer(wl_opbuf *b, int32_t from, bool odd)
{
    for (int32_t i = from; i < b->n && !b->oom && odd; i++)
        if (b->ops[i].node)
            b->ops[i].node |= WL_NODE_ODD;
}

/* A pass cut into its parts: ops before the layers, each layer, ops
 * after.  node[i]: op i's node (an untagged op between layers takes the
 * node of the op before it). */
typedef struct cut {
    const wl_pass *p;
    uint8_t *node;
    int32_t *layer;   /* first op of each layer, and one past the last layer */
    int32_t n_layers;
    int32_t *map;
} cut;

static int cut_pass(const wl_pass *p, cut *c)
{
    size_t n = (size_t)p->n_ops + 1;
    *c = (cut){.p = p, .node = malloc(n), .layer = malloc((n + 1) * sizeof *c->layer), .map = malloc(n * sizeof *c->map)};
    if (!c->node || !c->layer || !c->map)
        return SIM_ENOMEM;
    int32_t first = -1, last = -1;
    for (int32_t i = 0; i < p->n_ops; i++) {
        c->map[i] = -1;
        if (p->ops[i].node) {
            first = first < 0 ? i : first;
            last = i;
        }
    }
    uint8_t odd = 0xff, prev = 0;
    for (int32_t i = 0; i < p->n_ops; i++) {
        bool inside = first >= 0 && i >= first && i <= last;
        uint8_t t = p->ops[i].node;
        if (inside && !t)
            t = prev;
        prev = t;
        c->node[i] = (uint8_t)(t & WL_NODE_MASK);
        if (inside && (t & WL_NODE_ODD) != odd) {
            odd = (uint8_t)(t & WL_NODE_ODD);
            c->layer[c->n_layers++] = i;
        }
    }
    c->layer[c->n_layers] = last + 1;
    return SIM_OK;
}

static void cut_free(cut *c)
{
    free(c->node);
    free(c->layer);
    free(c->map);
}

/* The pair under construction. */
typedef struct pairbuf {
    wl_opbuf out;
    int rc;
} pairbuf;

/* Appends op i of pass c, its dependencies moved to where they went. */
static void emit(pairbuf *pb, cut *c, int32_t i)
{
    const wl_op *src = &c->p->ops[i];
    int32_t at = wl_push(&pb->out, src->name, (stream_kind)src->stream, 0.0, WL_NONE, WL_NONE);
    if (pb->out.oom) {
        pb->rc = SIM_ENOMEM;
        return;
    }
    wl_op op = *src;
    for (int j = 0; j < 2; j++)
        if (op.dep_back[j]) {
            int32_t d = c->map[i - op.dep_back[j]];
            if (d < 0) {
                pb->rc = SIM_ESIM;
                return;
            }
            op.dep_back[j] = at - d;
        }
    pb->out.ops[at] = op;
    c->map[i] = at;
}

/* Ops [a, e) of pass c of node `node` (every op when node is KINDS). */
static void emit_range(pairbuf *pb, cut *c, int32_t a, int32_t e, int node)
{
    for (int32_t i = a; i < e && pb->rc == SIM_OK; i++)
        if (node == WL_NODE_KINDS || c->node[i] == node)
            emit(pb, c, i);
}

int wl_pair_build(const wl_pass *f, const wl_pass *b, wl_pair *out, sim_err *err)
{
    enum { F = 0, B = 1 };
    static const struct {
        uint8_t side, node;
    } order[] = {
        {B, WL_NODE_COMBINE},  {F, WL_NODE_PRE},     {B, WL_NODE_MLP}, {F, WL_NODE_DISPATCH}, {B, WL_NODE_MLP_DW},
        {B, WL_NODE_DISPATCH}, {F, WL_NODE_MLP},     {F, WL_NODE_COMBINE}, {B, WL_NODE_PRE},  {B, WL_NODE_PRE_DW},
    };
    *out = (wl_pair){.map = {NULL, NULL}, .side = NULL};
    cut c[2];
    pairbuf pb = {.rc = SIM_OK};
    int rc1 = cut_pass(f, &c[F]), rc2 = cut_pass(b, &c[B]);
    pb.rc = rc1 != SIM_OK ? rc1 : rc2;
    /* Before the layers: the backward's (output layer, loss), then the
     * forward's (embedding). */
    if (pb.rc == SIM_OK) {
        emit_range(&pb, &c[B], 0, c[B].n_layers ? c[B].layer[0] : b->n_ops, WL_NODE_KINDS);
        emit_range(&pb, &c[F], 0, c[F].n_layers ? c[F].layer[0] : f->n_ops, WL_NODE_KINDS);
    }
    int32_t most = c[F].n_layers > c[B].n_layers ? c[F].n_layers : c[B].n_layers;
    for (int32_t k = 0; k < most && pb.rc == SIM_OK; k++) {
        bool hf = k < c[F].n_layers, hb = k < c[B].n_layers;
        if (hf && hb) {
            for (size_t o = 0; o < sizeof order / sizeof order[0]; o++) {
                cut *s = &c[order[o].side];
                emit_range(&pb, s, s->layer[k], s->layer[k + 1], order[o].node);
            }
        } else {
            cut *s = &c[hf ? F : B];
            emit_range(&pb, s, s->layer[k], s->layer[k + 1], WL_NODE_KINDS);
        }
    }
    /* After them: the forward's output layer, the backward's embedding. */
    if (pb.rc == SIM_OK && c[F].n_layers)
        emit_range(&pb, &c[F], c[F].layer[c[F].n_layers], f->n_ops, WL_NODE_KINDS);
    if (pb.rc == SIM_OK && c[B].n_layers)
        emit_range(&pb, &c[B], c[B].layer[c[B].n_layers], b->n_ops, WL_NODE_KINDS);
    if (pb.rc == SIM_OK) {
        out->pass = (wl_pass){pb.out.ops, pb.out.n, f->flops + b->flops};
        out->side = malloc((size_t)pb.out.n + 1);
        if (!out->side) {
            pb.rc = SIM_ENOMEM;
        } else {
            for (int k = 0; k < 2; k++)
                for (int32_t i = 0; i < c[k].p->n_ops; i++)
                    out->side[c[k].map[i]] = (uint8_t)k;
            out->map[F] = c[F].map;
            out->map[B] = c[B].map;
            c[F].map = c[B].map = NULL;
            pb.out.ops = NULL;
        }
    }
    free(pb.out.ops);
    cut_free(&c[F]);
    cut_free(&c[B]);
    if (pb.rc == SIM_ENOMEM)
        return sim_err_set(err, SIM_ENOMEM, "out of memory building an overlapped pass template");
    if (pb.rc != SIM_OK)
        return sim_err_set(err, SIM_ESIM, "an overlapped pass template would run an op before one it waits for");
    return SIM_OK;
}

void wl_pair_free(wl_pair *p)
{
    free(p->pass.ops);
    free(p->map[0]);
    free(p->map[1]);
    free(p->side);
    *p = (wl_pair){.map = {NULL, NULL}, .side = NULL};
}
