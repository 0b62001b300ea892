/* wl_fsdp: data-parallel sharding in the workload (internal to the
 * workload module): the DP cost of a gradient bucket and Megatron-FSDP's
 * per-unit gathers and reduce-scatters inside the pass templates
 * (wl_fsdp.c says how they are placed).
 */
#ifndef PARSIM_WL_FSDP_H
#define PARSIM_WL_FSDP_H

#include "memory.h"
#include "wl_build.h"

/* DP times of a bucket of `dense` / `expert` trained parameters of this
 * GPU: all-reduce (no sharding), or reduce-scatter and parameter
 * all-gather over the inner groups, with the outer collectives of
 * ddp.num_distributed_optimizer_instances.  units: the chunk's FSDP
 * units when the bucket is the chunk's only one under ZeRO-2/3 (their
 * reductions, and under ZeRO-3 their gathers, are in the passes), else
 * NULL. */
void wl_bucket_cost(const ctx *x, double dense, double expert, const mem_units *units, wl_bucket *bk);

/* The per-unit ops of one chunk while its passes are built: n units in
 * forward order (0 when there are none to emit: ZeRO-0/1, a mesh of one
 * rank, the ideal pipeline). */
typedef struct wl_fsdp {
    mem_units units;      /* the chunk's unit parameters (also when n = 0) */
    int32_t n;
    bool emb;             /* unit 0 is the embedding */
    bool gather;          /* ZeRO-3: gathers per unit */
    double *ag_s, *rs_s;  /* per unit: its gather, its gradient reduce-scatter */
    int32_t *ag, *end;    /* per pass position: its gather's op, its last op */
    int32_t j;            /* pass position of the next unit */
    int32_t start, last_rs;
    bool bwd;
} wl_fsdp;

/* SIM_OK or SIM_ENOMEM (fs then holds nothing to free). */
int wl_fsdp_init(const ctx *x, int64_t stage, int64_t chunk, wl_fsdp *fs);
void wl_fsdp_free(wl_fsdp *fs);
/* Around a pass (after the ops no unit holds that come first) and around
 * each unit's ops, in pass order. */
void wl_fsdp_pass_begin(const ctx *x, wl_opbuf *b, wl_fsdp *fs, bool bwd);
void wl_fsdp_unit_begin(wl_opbuf *b, wl_fsdp *fs);
/* The end of a unit in pass b; in the backward its reduce-scatter follows
 * it there, or in w (not NULL: the split backward's W pass, where the
 * unit's weight gradients are) after what w holds so far. */
void wl_fsdp_unit_end(wl_opbuf *b, wl_opbuf *w, wl_fsdp *fs);
void wl_fsdp_pass_end(wl_opbuf *b, wl_fsdp *fs);

#endif
