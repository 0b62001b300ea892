/* workload: what one microbatch does on one pipeline stage, as op lists.
 *
 * For every (stage, model chunk) the workload holds a forward pass and a
 * backward pass: ordered ops (GEMMs, attention, memory-bound kernels, TP /
 * CP / EP collectives), each on a stream of its stage with its duration
 * from compute and net.  Op i depends on the ops dep_back[] places before
 * it in the same pass (0 = no dependency; any distance is kept, so a
 * dependency may reach across layers), so overlapped communication
 * (e.g. CP ring steps beside attention) is expressed in the template.  It
 * also holds per stage the pipeline p2p time per microbatch and the DP
 * gradient reduce-scatter / parameter all-gather per chunk and the
 * optimizer step.  Identical microbatches share one template: the engine
 * instantiates it per microbatch.
 * Ownership: workload_build allocates, workload_destroy frees.
 */
#ifndef PARSIM_WORKLOAD_H
#define PARSIM_WORKLOAD_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "err.h"
#include "schedule.h"
#include "strategy.h"
#include "streams.h"
#include "units.h"

typedef struct wl_op {
    const char *name;        /* static string: "qkv", "attn", "tp_ag", ... */
    sim_time_ps duration_ps;
    uint8_t stream;          /* stream_kind */
    uint8_t node;            /* WL_NODE_* | WL_NODE_ODD for a layer's op where
                                passes overlap (combined 1F1B), else 0 */
    int32_t dep_back[2];     /* depends on op i-dep_back[j]; 0 = none */
    uint32_t launches;       /* host launches that issue it: 1 per kernel or
                                collective, 0 for a join, one per local
                                expert for Transformer Engine's grouped GEMM */
} wl_op;
/* launches sits in what was tail padding: templates stay as large. */
_Static_assert(sizeof(void *) != 8 || sizeof(wl_op) == 32, "wl_op grew past 32 bytes");

typedef struct wl_pass {
    wl_op *ops;
    int32_t n_ops;
    double flops;            /* hardware flops of this pass on one GPU */
} wl_pass;

/* A DP gradient bucket: the gradients of a run of layers, final once the
 * last microbatch's backward has passed them. */
typedef struct wl_bucket {
    int32_t ready_op;        /* bwd op after which its gradients are final */
    int32_t fwd_op;          /* first fwd op that uses its parameters: with
                                overlap_param_gather the first forward waits
                                there for the bucket's all-gather */
    double reduce_s;         /* reduce-scatter (distributed optimizer) or all-reduce */
    double gather_s;         /* all-gather of the updated parameters (dist-opt), else 0 */
} wl_bucket;

typedef struct wl_chunk {
    wl_pass fwd, bwd;        /* bwd: input and weight gradients, or only the
                                input gradients when wgt holds the rest */
    wl_pass wgt;             /* weight-gradient pass of a split backward
                                (no ops when the backward is whole) */
    wl_bucket *buckets;      /* in the order they become ready */
    int32_t n_buckets;
    bool twin;               /* ops and buckets are an earlier identical
                                chunk's (shared, freed with that one) */
    int64_t act_bytes;           /* stored from forward start to backward end */
    int64_t bwd_transient_bytes; /* alive during the backward only */
} wl_chunk;

typedef struct wl_stage {
    wl_chunk *chunks;            /* v chunks */
    double p2p_s;                /* one activation (or gradient) send */
    double embedding_grad_s;     /* tied embeddings, PP > 1: all-reduce of the
                                    word-embedding gradient between the first
                                    and last stage (finalize_model_grads) */
    double optimizer_s;          /* optimizer step on this GPU's shard */
} wl_stage;

typedef struct workload {
    int64_t pp, v;
    wl_stage *stages;            /* pp stages */
} workload_t;

/* The nodes of a layer where two passes overlap (Megatron's
 * model_chunk_schedule_plan.py): pre_dispatch (mixer, norm, router,
 * permute), dispatch (EP all-to-all), mlp (experts), combine (all-to-all
 * back, unpermute); the weight gradients of mlp and pre_dispatch as nodes
 * of their own with delay_wgrad_compute.  A dense layer is one
 * pre_dispatch node.  WL_NODE_ODD marks the ops of every other layer of a
 * chunk, so that consecutive layers stay apart; 0: outside the layers. */
enum {
    WL_NODE_NONE = 0, WL_NODE_PRE, WL_NODE_DISPATCH, WL_NODE_MLP, WL_NODE_MLP_DW, WL_NODE_COMBINE,
    WL_NODE_PRE_DW, WL_NODE_KINDS
};
#define WL_NODE_MASK 7u
#define WL_NODE_ODD 8u

/* The overlapped template of two passes of one item: a forward's and a
 * backward's ops interleaved node by node, layer k of the forward beside
 * the k-th layer the backward runs (layer L-1-k), in the order
 *   b.combine | f.pre_dispatch | b.mlp | f.dispatch | b.mlp_dw, b.dispatch
 *   | f.mlp | f.combine | b.pre_dispatch | b.pre_dispatch_dw
 * with each pass's dependencies kept; layers left over run alone, the ops
 * outside the layers before (output layer's backward, embedding) and after
 * (output layer, embedding's backward) them.  map[0][i] / map[1][i]: the
 * index in `pass` of op i of the forward / the backward. */
typedef struct wl_pair {
    wl_pass pass;
    int32_t *map[2];
    uint8_t *side;           /* [j]: op j of pass is the forward's (0) or the backward's (1) */
} wl_pair;

/* Builds the pair template of forward f and backward b (wl_overlap.c).
 * SIM_OK, SIM_ENOMEM, or SIM_ESIM when a dependency would come after its
 * op (a template whose nodes are out of order). */
int wl_pair_build(const wl_pass *f, const wl_pass *b, wl_pair *out, sim_err *err);
void wl_pair_free(wl_pair *p);

/* The template of a chunk's pass of kind k (sched_kind). */
static inline const wl_pass *wl_chunk_pass(const wl_chunk *ch, sched_kind k)
{
    return k == SCHED_F ? &ch->fwd : k == SCHED_B ? &ch->bwd : &ch->wgt;
}

/* Builds every template.  SIM_EINVAL when a duration it computes (a
 * kernel, a collective, a DP bucket, the optimizer step, a whole pass) is
 * not finite or outside [0, LIMIT_DURATION_S]: err names what and, where
 * one drives it, the key; SIM_ENOMEM when out of memory. */
int workload_build(workload_t **out, const run_inputs *in, const strategy_t *s, sim_err *err);
void workload_destroy(workload_t *w);

/* The error for a duration that may not become simulated time
 * (time_s_fits false): SIM_EINVAL, "<what> would take ... s". */
int wl_duration_err(sim_err *err, double seconds, const char *what);

/* Same ops, field by field (names compared as the static strings they
 * are; the same list, as a twin chunk's, at once); flops are not
 * compared. */
bool wl_pass_equal(const wl_pass *a, const wl_pass *b);

/* An op list under construction (one pass template).  Failures are
 * sticky: after one, pushes store nothing and the caller checks oom and
 * too_long_name once at the end. */
/* Where the modules of a layer begin (what a CUDA graph scope names) and
 * whether the host must wait for the GPU there (an MoE dispatch copies
 * token counts to the host): workload turns each module into host issue
 * ops on STREAM_HOST before its kernels. */
enum { WL_SCOPE_NONE = 0, WL_SCOPE_ATTN, WL_SCOPE_MLP, WL_SCOPE_MOE_ROUTER, WL_SCOPE_MOE_PREPROCESS, WL_SCOPE_MOE,
       WL_SCOPE_MAMBA };
#define WL_MAX_MARKS 32
typedef struct wl_mark {
    int32_t at;      /* first op of the module */
    uint8_t scope;   /* WL_SCOPE_* */
    bool sync;       /* the host waits for the GPU work before `at` */
    double framework_ops; /* PyTorch calls of the module beyond its kernels
                             (cluster.host.framework_ops.*), each launch_s */
} wl_mark;

typedef struct wl_opbuf {
    wl_op *ops;
    int32_t n, cap;
    wl_mark marks[WL_MAX_MARKS];
    int32_t n_marks;
    double flops;
    int oom;
    const char *too_long_name; /* first op whose duration was outside
                                  [0, LIMIT_DURATION_S] or not finite */
    double too_long_s;         /* and that duration */
} wl_opbuf;

#define WL_NONE (-1)

/* Appends an op of `seconds` on stream st that depends on the ops at
 * absolute indices d0 and d1 (WL_NONE for none; any earlier index is
 * kept).  Returns the new op's index. */
int32_t wl_push(wl_opbuf *b, const char *name, stream_kind st, double seconds, int32_t d0, int32_t d1);

/* Fuses chains in a pass: an op that depends only on the op before it, on
 * the same stream, where nothing else depends on that op, runs exactly when
 * it would as part of it (streams are in order and a pass's ops are issued
 * together), so the two become one op.  This leaves the timeline as it is
 * and the engine a third fewer tasks.  map[i] receives the new index of old
 * op i (may be NULL).  Pinned ops (one that releases a gradient bucket, or
 * the op before one that waits for a parameter all-gather) must end an op,
 * so nothing is fused onto them.  SIM_OK, or SIM_ENOMEM with b untouched. */
int wl_fuse_chains(wl_opbuf *b, int32_t *map, const int32_t *pins, int32_t n_pins);

#endif
