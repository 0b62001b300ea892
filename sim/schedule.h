/* schedule: the order in which one pipeline rank runs its forward and
 * backward passes, as Megatron Core's schedules.py does it.
 *
 *   p == 1           forward_backward_no_pipelining: F0 B0 F1 B1 ...
 *   v == 1, p > 1    non-interleaved 1F1B: warmup = min(p-rank-1, M)
 *   v > 1            interleaved 1F1B: microbatches in groups of N per
 *                    model chunk; warmup = (p-rank-1)*2 + (v-1)*N, capped
 *                    at M*v; backward walks chunks in reverse.
 *   combined         (overlap_moe_expert_parallel_comm) the same with one
 *                    more warm-up forward, each steady F paired with its
 *                    B in one item; p == 1: F0, (F1 B0), ..., B_{M-1}.
 * A sched_item names one pass (its kind, microbatch and model chunk), or
 * two passes that run overlapped on the rank (combined 1F1B, DualPipe's
 * F&B pairs).  The pass kinds are one table (sched_kind_desc): what a
 * pass of each kind sends, whom it follows, whether it exists only when the
 * backward is split into B (input gradient) and W (weight gradient).
 * Where a model chunk sits in the pipeline is the schedule's too
 * (sched_vstage / sched_locate): Megatron loops the chunks over the ranks
 * (virtual stage chunk*p + rank); V-shaped schedules fold them.
 * Pure functions; the caller owns the arrays.
 */
#ifndef PARSIM_SCHEDULE_H
#define PARSIM_SCHEDULE_H

#include <stdbool.h>
#include <stdint.h>

#include "err.h"

/* Pass kinds: forward, backward (input and, unless split, weight
 * gradient), weight gradient (split backward only). */
typedef enum { SCHED_F = 0, SCHED_B = 1, SCHED_W = 2, SCHED_KINDS } sched_kind;

typedef struct sched_kind_desc {
    const char *name;     /* trace event name: "F", "B", "W" */
    const char *send;     /* name of its pipeline send, or NULL */
    int8_t send_dir;      /* its output goes to virtual stage +1 / -1; 0: none */
    int8_t after;         /* kind of the same (microbatch, chunk) it follows; -1: none */
    bool split_only;      /* exists only when the backward is split */
} sched_kind_desc;

const sched_kind_desc *sched_kind_of(sched_kind k);

/* Where the chunks of the ranks sit in the pipeline.  LOOP: chunk c of
 * rank r is virtual stage c*p + r (Megatron).  V: two chunks, chunk 0 of
 * rank r is virtual stage r, chunk 1 is 2p-1-r (ZB-V, DualPipeV). */
typedef enum { SCHED_PLACE_LOOP = 0, SCHED_PLACE_V } sched_placement;

/* The schedules (sim.pipeline_schedule).  MEGATRON: 1F1B or interleaved
 * as Megatron chooses from v; 1F1B and INTERLEAVED: the same orders, the
 * choice pinned; ZB_H1 (Qi et al., Zero Bubble Pipeline Parallelism):
 * 1F1B's warm-up, rank r's W lagging its B by r microbatches, so that the
 * W passes fill the drain (in flight p on every rank, 1F1B's peak); ZB_V:
 * two chunks per rank in a V, 2p passes in flight (1F1B's activation
 * memory), W deferred to fill the drain; DUALPIPEV (DeepSeek's DualPipe
 * repository, dualpipev.py): two chunks in a V, forward and backward of
 * the two chunks paired in items, its eight phases as written there. */
typedef enum {
    SCHED_MEGATRON = 0, SCHED_1F1B, SCHED_INTERLEAVED, SCHED_ZB_H1, SCHED_ZB_V, SCHED_DUALPIPEV,
    SCHED_NAMES
} sched_name;

/* Its key value ("megatron", "1f1b", "interleaved", "zb-h1", "zb-v",
 * "dualpipev"), indexed by sched_name. */
extern const char *const sched_name_strs[SCHED_NAMES];
const char *sched_name_str(sched_name n);
/* Does it place chunks in a V (two per rank)?  Does it split the backward? */
bool sched_name_is_v(sched_name n);
bool sched_name_splits(sched_name n);

/* The shape of a pipeline schedule. */
typedef struct sched_plan {
    sched_name name;
    int64_t p, v, M, N;       /* ranks, chunks per rank, microbatches, Megatron's N */
    sched_placement place;
    bool split;               /* backward as B and W passes */
    /* Megatron's combined 1F1B (overlap_moe_expert_parallel_comm): with
     * p == 1 F0, then B_i paired with F_{i+1}, then the last B; with the
     * interleaved order one more warm-up forward per rank and each steady
     * (forward, backward) as a pair.  Also set with DualPipeV, whose own
     * F&B pairs then overlap (its order is unchanged). */
    bool combined;
} sched_plan;

/* The plan of schedule `name` (its placement and split from the name). */
void sched_plan_init(sched_plan *pl, sched_name name, int64_t p, int64_t v, int64_t M, int64_t N);

/* Pass kinds the plan runs (F and B, and W when split): the first
 * sched_plan_kinds of the table, as the kinds that exist only when split
 * come last. */
bool sched_plan_has(const sched_plan *pl, sched_kind k);
int sched_plan_kinds(const sched_plan *pl);
/* The kind whose end frees a microbatch's activations: the last one it
 * runs (B, or W when split: W reads the layer inputs the forward stored). */
sched_kind sched_plan_free_kind(const sched_plan *pl);
/* The kind that finishes a chunk's weight gradients (B, or W when split):
 * the DP reduction of a bucket follows its last one. */
sched_kind sched_plan_grad_kind(const sched_plan *pl);

/* Virtual stage (0 .. p*v-1) of chunk `chunk` of rank `rank`, and back. */
int64_t sched_vstage(const sched_plan *pl, int64_t rank, int64_t chunk);
void sched_locate(const sched_plan *pl, int64_t vstage, int64_t *rank, int64_t *chunk);

/* At most two passes in one item. */
#define SCHED_ITEM_PASSES 2

typedef struct sched_pass {
    uint8_t kind;        /* sched_kind */
    int32_t microbatch;  /* 0..M-1 */
    int32_t chunk;       /* model chunk 0..v-1 on this rank */
} sched_pass;

typedef struct sched_item {
    sched_pass pass[SCHED_ITEM_PASSES];
    uint8_t n_passes;    /* 1, or 2: they overlap on the rank */
} sched_item;

/* An item of one pass. */
sched_item sched_one(sched_kind kind, int32_t microbatch, int32_t chunk);
/* An item of two overlapped passes. */
sched_item sched_pair(sched_pass a, sched_pass b);

/* Microbatches of one steady period: in the steady phase of every rank
 * the order repeats, one period later, with every microbatch that many
 * higher (1, or Megatron's N with interleaving). */
int64_t sched_plan_period(const sched_plan *pl);

/* Passes one rank runs: kinds x M x v; no schedule has more items. */
int64_t sched_plan_passes(const sched_plan *pl);

/* Fills out[0 .. *n-1] (room for sched_plan_passes items) with the order of
 * rank `rank`.  SIM_EINVAL (with a message) when the schedule cannot run
 * (p, v, M, N): Megatron's rules for its orders; ZB-H1 needs v = 1; the V
 * schedules need v = 2, p >= 2 and M >= 2p; SIM_ENOMEM. */
int sched_plan_build(const sched_plan *pl, int64_t rank, sched_item *out, int64_t *n, sim_err *err);

/* Orders a schedule builds for every rank at once (ZB-V's list schedule),
 * kept by the caller between its sched_plan_build_kept calls for the ranks
 * of one plan: zero-initialised, freed with sched_orders_free. */
typedef struct sched_orders {
    int64_t p, M;
    sched_pass *order;
} sched_orders;

/* sched_plan_build, reusing and refreshing *keep (NULL: nothing kept). */
int sched_plan_build_kept(const sched_plan *pl, int64_t rank, sched_orders *keep, sched_item *out, int64_t *n,
                          sim_err *err);
void sched_orders_free(sched_orders *keep);

/* What rank `rank` runs before its first B (for memory bounds, without
 * building the order): fwd[c] (v entries) gets its forwards of chunk c;
 * returns the chunk of that first B.  The plan must be one that
 * sched_plan_build accepts. */
int64_t sched_plan_first_b(const sched_plan *pl, int64_t rank, int64_t *fwd);
/* Warm-up forwards of rank `rank` in the combined 1F1B plan: Megatron's
 * plus one (schedules.py:966-970), at most M*v; 1 with p == 1. */
int64_t sched_combined_warmup(const sched_plan *pl, int64_t rank);

/* Number of items one rank runs in Megatron's orders: 2*M*v. */
int64_t sched_len(int64_t M, int64_t v);

/* Warmup forward passes of a rank (Megatron's num_warmup_microbatches). */
int64_t sched_warmup(int64_t p, int64_t v, int64_t M, int64_t N, int64_t rank);

/* Fills out[0 .. 2*M*v-1] with the order of rank `rank`.  N is
 * microbatch_group_size_per_vp_stage (ignored when v == 1).  Returns SIM_OK
 * or SIM_EINVAL (with a message) when Megatron would reject (p, v, M, N). */
int sched_build(int64_t p, int64_t v, int64_t M, int64_t N, int64_t rank,
                sched_item *out, sim_err *err);

/* The (microbatch, chunk) of virtual microbatch k in the forward order of
 * the interleaved table (get_schedule_table); backward uses chunk v-1-c. */
void sched_virtual(int64_t v, int64_t M, int64_t N, int64_t k,
                   int32_t *microbatch, int32_t *chunk);


#endif
