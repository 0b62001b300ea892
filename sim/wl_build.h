/* wl_build: what the pass builders of workload share (internal to the
 * workload module, not part of its contract in workload.h).
 *
 * The costing context (one per workload: sizes on this rank, kernel
 * choices, group placements) and the primitives every layer emitter is
 * made of: pushing ops, costing kernels (compute) and collectives (net),
 * and the column/row-parallel linears with their TP collectives.  Then the
 * emitters of each kind of module (wl_attention.c, wl_mamba.c, wl_mlp.c,
 * wl_embed.c) and the host's issue of them (wl_host.c).
 */
#ifndef PARSIM_WL_BUILD_H
#define PARSIM_WL_BUILD_H

#include <stdbool.h>
#include <stdint.h>

#include "compute.h"
#include "net.h"
#include "workload.h"

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
    bool nodes;            /* tag layers' ops with their nodes (overlapped templates) */
    bool delay_wgrad;      /* delay_wgrad_compute: wgrad GEMMs as nodes of their own */
    /* Context parallelism: a ring of cp_ring steps over Ulysses all-to-alls
     * of cp_a2a ranks; where their groups and the allgather dispatcher's
     * ETP x EP group sit (set once: the placements are the same for every
     * layer). */
    int64_t cp_ring, cp_a2a;
    group_placements cp_a2a_places, cp_ring_places, tp_ep_places;
} ctx;

/* Sets up the context of one workload (wl_ops.c). */
void ctx_init(ctx *x, const run_inputs *in, const strategy_t *s);

/* ---- op list under construction (wl_ops.c) ---------------------------- */

void too_long(wl_opbuf *b, const char *name, double seconds);
int32_t then(wl_opbuf *b, const char *name, stream_kind st, double seconds);
void join(wl_opbuf *b, int32_t a, int32_t c);
void set_launches(wl_opbuf *b, int32_t i, double n);

/* ---- costing primitives (wl_ops.c) ------------------------------------ */

double gemm(const ctx *x, wl_opbuf *b, double m, double n, double k);
double ggemm(const ctx *x, wl_opbuf *b, double groups, double m, double n, double k);
double mem(const ctx *x, double bytes);
void cast(const ctx *x, wl_opbuf *b, double elements);
double coll(const ctx *x, group_kind g, coll_kind k, double bytes);
bool has(const ctx *x, group_kind g);
double contended(const ctx *x, const group_placements *p, double comp, double comm);
void tp_enter(const ctx *x, wl_opbuf *b, const char *name);
void column_fwd(const ctx *x, wl_opbuf *b, const char *name, double m, double n, double k, unsigned lora);
void row_fwd(const ctx *x, wl_opbuf *b, const char *name, double m, double n, double k, unsigned lora);
void row_bwd(const ctx *x, wl_opbuf *b, const char *dgrad, const char *wgrad, double m, double n_out,
             double k_in, unsigned lora);
void column_bwd(const ctx *x, wl_opbuf *b, const char *dgrad, const char *wgrad, double m, double n_out,
                double k_in, unsigned lora);

/* ---- nodes of overlapped passes (wl_overlap.c) ------------------------ */

/* Is this backward op a weight-gradient GEMM (workload.c)? */
bool wl_is_wgrad(const wl_op *op);
/* Tags ops [from, n) of one layer's pass with their nodes (workload.h);
 * with delay, a backward's wgrad GEMMs get nodes of their own and lose
 * the ops that waited for them. */
void wl_tag_layer(wl_opbuf *b, int32_t from, bool bwd, bool delay);
/* Marks the tagged ops [from, n) as an odd layer of the chunk. */
void wl_mark_layer(wl_opbuf *b, int32_t from, bool odd);

/* ---- CPU activation offloading (wl_offload.c) ------------------------- */

/* The copies of one chunk's passes while they are built: the first layer
 * of the chunk and the copy an op must still wait for. */
typedef struct wl_offload {
    int64_t first;
    int32_t pending; /* forward: the D2H of the layer before; backward: the H2D of the next layer down */
} wl_offload;
void wl_offload_init(wl_offload *o, int64_t first);
/* Forward: after layer `layer`'s ops (-1: after the last layer). */
void wl_offload_fwd_end(const ctx *x, wl_opbuf *f, wl_offload *o, int64_t layer);
/* Backward: before layer `layer`'s ops (layers in backward order). */
void wl_offload_bwd_begin(const ctx *x, wl_opbuf *b, wl_offload *o, int64_t layer);

/* ---- host issue (wl_host.c) ------------------------------------------- */

void module(wl_opbuf *b, uint8_t scope, bool sync, double framework_ops);
double host_ops(const ctx *x, int kind, bool bwd);
double router_ops(const ctx *x, bool bwd);
double local_experts(const ctx *x);
double moe_ops(const ctx *x, bool bwd);
void host_issue(const ctx *x, wl_opbuf *p);

/* ---- the emitters of one module's pass -------------------------------- */

void attention_fwd(const ctx *x, wl_opbuf *b);                      /* wl_attention.c */
void attention_bwd(const ctx *x, wl_opbuf *b, bool recompute_attn);
void mamba_fwd(const ctx *x, wl_opbuf *b);                          /* wl_mamba.c */
void mamba_bwd(const ctx *x, wl_opbuf *b);
void mlp_fwd(const ctx *x, wl_opbuf *b, bool moe);                  /* wl_mlp.c */
void mlp_bwd(const ctx *x, wl_opbuf *b, bool moe, bool recompute_mlp);
bool shared_overlapped(const ctx *x); /* shared experts beside the EP exchange */
void embedding_fwd(const ctx *x, wl_opbuf *b);                      /* wl_embed.c */
void embedding_bwd(const ctx *x, wl_opbuf *b);
void output_fwd(const ctx *x0, wl_opbuf *b);
void output_bwd(const ctx *x0, wl_opbuf *b);
void mtp_enter_fwd(const ctx *x, wl_opbuf *b);                      /* wl_embed.c */
void mtp_enter_bwd(const ctx *x, wl_opbuf *b);

#endif
