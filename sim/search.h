/* search: which parallel layout to run for a model on a number of GPUs.
 *
 * search_run() enumerates every legal combination of TP x PP x VP x CP
 * (x cp_comm_type) x EP x ETP x SP x micro-batch size x recompute x
 * distributed optimizer for one or several GPU counts, keeps what Megatron
 * accepts (strategy_resolve), prunes what certainly cannot fit in HBM,
 * simulates the rest (step_run) and ranks the results.  Beside them it
 * simulates the starting point the rules of thumb give (heuristics.h).
 *
 * Ranges (the "sensible" space; search.c has the constants):
 *   TP   divisors of the attention heads (and compatible with the query
 *        groups) up to twice the NVLink domain
 *   PP   every size up to the layers that divides the GPUs, with one
 *        layer split per (PP, VP): even if the layers divide, else the
 *        embedding and the loss counted as layers, else lighter first and
 *        last stages (strategy_split_layers)
 *   VP   1, or 2 .. SEARCH_VP_MAX where such a split exists
 *   CP   powers of two with seq % (2 CP) == 0 and at least
 *        SEARCH_CP_MIN_TOKENS tokens per rank; cp_comm_type p2p,
 *        all_gather, a2a (heads per TP rank divisible by CP) and a2a+p2p
 *        for every a2a level 2, 4, .. below CP dividing those heads
 *   EP   divisors of the experts (MoE only); ETP in {1, TP} (MoE only)
 *   Mamba layers: only (TP, CP) pairs their rules admit
 *        (strategy_check_mamba), pruned while enumerating
 *   SP   on and off when TP > 1; MBS in {1, 2, 4, 8}
 *   recompute none / selective (the config's recompute_modules) / full
 *   distributed optimizer on and off (off only where it changes anything);
 *        with fsdp also Megatron-FSDP optim_grads and optim_grads_params
 *        (where DP shards anything), pruned by memory as the rest
 *   distributed optimizer on and off (off only where it changes anything)
 *   schedule the base's sim.pipeline_schedule, or those of
 *        search_opts.schedules (parsim search --schedules), each where it
 *        applies: megatron everywhere; 1f1b and zb-h1 at VP 1 (zb-h1 with
 *        PP > 1), interleaved at VP > 1, zb-v and dualpipev at VP 2 with
 *        PP > 1 (1f1b and interleaved are megatron's orders: left out when
 *        megatron is searched too)
 * A dimension the caller pins (search_opts.pinned) keeps the base value.
 *
 * Pruning, before simulating:
 *   memory  the peak of a stage is at least its static bytes (weights,
 *           gradients, optimizer: exact) plus the activations of every
 *           forward pass its schedule runs before its first backward
 *           (all alive when that backward starts: they are freed at the
 *           end of a backward or a W) plus that backward's transient
 *           bytes.  A candidate whose bound exceeds the HBM
 *           capacity can never fit, so pruning drops nothing feasible.
 *   time    (unless exhaustive) the step time is at least, for every
 *           stage, the pipeline fill before its first forward (the
 *           critical paths of chunk 0's forward passes and sends on the
 *           stages before it) + for every pass it runs, the least time
 *           from its first to its last compute op (dependencies and
 *           in-order streams: the compute stream runs passes one after
 *           another, so the gaps inside a pass stay idle) + the larger of
 *           its optimizer step and the drain after its last backward
 *           (not for schedules that split the backward: their deferred W
 *           passes fill the drain).
 *           Candidates are simulated in ascending order of that bound in
 *           fixed-size batches; once the bound of the next candidate
 *           exceeds the ranking key of the K-th best feasible result
 *           (K = max(top, 2)), no later candidate can enter the top K and
 *           the rest are skipped.  With pareto, a candidate is skipped
 *           only if, besides, a simulated feasible point is no slower than
 *           its time bound, on no more GPUs, with no more memory than its
 *           memory bound, and better in one of them.  Batches do not
 *           depend on the number of jobs, so the set simulated (and every
 *           output) does not either.
 * Both bounds lean on how step.c builds a step (each pass's ops added
 * together in schedule order, activations held from a forward's first op
 * to its backward's last, the optimizer on the compute stream after the
 * last backward, p2p sends between virtual stages); tests/test_search.c
 * checks them against simulating everything, so a change there that
 * breaks one fails a test rather than silently dropping a result.
 * After simulation, candidates whose simulated peak exceeds the capacity
 * are ranked after the feasible ones and never listed as results.
 *
 * Ranking keys: step time; tokens/s per GPU and GPU-hours for a token
 * budget (both order by step time x GPUs).  Ties break on fewer GPUs, then
 * lower peak memory, then enumeration order: the output is deterministic.
 *
 * Ownership: search_run fills a caller-owned search_result whose arrays
 * search_result_free releases.
 */
#ifndef PARSIM_SEARCH_H
#define PARSIM_SEARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "config.h"
#include "err.h"
#include "heuristics.h"
#include "strategy.h"
#include "workload.h"

#define SEARCH_VP_MAX 8          /* largest virtual pipeline size tried */
#define SEARCH_CP_MIN_TOKENS 1024 /* smallest sequence chunk per CP rank */
#define SEARCH_BATCH 8           /* candidates simulated between bound updates */
#define SEARCH_BATCH_PARETO 32   /* the same with --pareto (more to simulate) */

typedef enum { SEARCH_RANK_TIME = 0, SEARCH_RANK_TOKENS, SEARCH_RANK_COST } search_rank;

/* Dimensions of the space; bits of search_opts.pinned. */
typedef enum {
    SEARCH_DIM_TP = 0, SEARCH_DIM_PP, SEARCH_DIM_VP, SEARCH_DIM_CP, SEARCH_DIM_CP_COMM,
    SEARCH_DIM_EP, SEARCH_DIM_ETP, SEARCH_DIM_SP, SEARCH_DIM_MBS, SEARCH_DIM_RECOMPUTE,
    SEARCH_DIM_DISTOPT, SEARCH_DIM_SCHEDULE, SEARCH_DIMS
} search_dim;

/* The config key of a dimension (e.g. "model.tensor_model_parallel_size"),
 * and the dimension a key pins: -1 if the key is not a searched one. */
const char *search_dim_key(search_dim d);
int search_dim_of_key(const char *key);

typedef struct search_opts {
    int64_t gpus_min, gpus_max; /* 0: base cluster.num_gpus; min == max: that
                                   count; else the power-of-two multiples of
                                   the node size in [min, max] */
    search_rank rank;
    double token_budget;        /* tokens; > 0 adds the GPU-hours column */
    int top;                    /* results listed, >= 1 */
    int jobs;                   /* worker threads, >= 1 */
    bool pareto;                /* also the front over (time, GPUs, memory) */
    bool exhaustive;            /* simulate every memory-feasible candidate
                                   (no time bound) */
    unsigned pinned;            /* 1u << search_dim: keep the base value */
    bool fsdp;                  /* the distributed-optimizer dimension also
                                   takes Megatron-FSDP optim_grads and
                                   optim_grads_params (--fsdp) */
    bool ep_overlap;            /* the EP all-to-all overlap searched off and
                                   on wherever Megatron allows it
                                   (--ep-overlap) */
    unsigned schedules;         /* 1u << sched_name: the pipeline schedules
                                   searched, each where it applies; 0: the
                                   base's sim.pipeline_schedule only */
    /* Called on the calling thread after each batch of simulations with
     * the candidates simulated so far and those left to consider (the
     * time bound may skip some); NULL for none. */
    void (*on_progress)(void *ctx, int64_t done, int64_t total);
    void *progress_ctx;
} search_opts;

void search_opts_default(search_opts *o);

typedef enum {
    SEARCH_ILLEGAL = 0,     /* Megatron rejects it (strategy_resolve) */
    SEARCH_DUPLICATE,       /* same simulation as another candidate */
    SEARCH_PRUNED_MEMORY,   /* memory lower bound above the HBM capacity */
    SEARCH_READY,           /* passed pruning, not (yet) simulated */
    SEARCH_SKIPPED_BOUND,   /* time lower bound cannot reach the top K */
    SEARCH_FAILED,          /* the simulation failed (err_code) */
    SEARCH_OVER_MEMORY,     /* simulated; peak above the HBM capacity */
    SEARCH_FEASIBLE,        /* simulated and fits */
} search_status;

typedef struct search_cand {
    int64_t order;             /* enumeration index */
    int64_t world;             /* GPUs */
    parallel_spec par;
    train_spec train;
    ddp_spec ddp;
    search_status status;
    int err_code;              /* SEARCH_FAILED: the SIM_E* code */
    /* derived (status >= SEARCH_PRUNED_MEMORY) */
    int64_t dp, edp, num_microbatches;
    double peak_lb_bytes;      /* memory lower bound, max over stages */
    /* from the workload (status >= SEARCH_READY) */
    double time_lb_s;          /* step time lower bound */
    double compute_s;          /* compute-stream work of the busiest stage */
    /* simulated (status >= SEARCH_OVER_MEMORY) */
    double step_time_s, tokens_per_s_per_gpu, mfu;
    double bubble_fraction;    /* mean over stages */
    double bubble_s;           /* bubble_fraction x pipeline time */
    double peak_bytes;         /* max over stages */
    double exposed_s[STREAM_KINDS]; /* per comm stream (index STREAM_TP..) */
    double exposed_total_s;
} search_cand;

typedef struct search_counts {
    int64_t enumerated;        /* combinations generated */
    int64_t illegal, duplicate, pruned_memory, skipped_bound;
    int64_t simulated, failed, over_memory, feasible;
} search_counts;

typedef struct search_result {
    search_cand *cands;        /* simulated candidates, best first: the
                                  feasible ones, then the rest */
    size_t n_cands;
    size_t n_feasible;         /* cands[0 .. n_feasible-1] fit */
    size_t *pareto;            /* indices into cands, by step time */
    size_t n_pareto;
    search_cand closest;       /* when nothing is legal or fits: the legal
                                  candidate with the smallest memory bound
                                  (status SEARCH_ILLEGAL if none) */
    char first_illegal[512];   /* the first rejection, for messages */
    heur_plan baseline;        /* the rules of thumb at the best's GPUs */
    bool have_baseline;        /* baseline.legal and baseline_run is set */
    search_cand baseline_run;  /* the baseline, simulated */
    search_counts counts;
    int64_t worlds[32];        /* GPU counts searched */
    int n_worlds;
    double capacity_bytes;     /* HBM per GPU */
    double wall_s;             /* whole search */
    double sim_wall_s;         /* simulation phase (exhaustive: with the
                                  preparation it runs in) */
} search_result;

/* Runs the search.  base: resolved inputs (model, cluster, training and
 * ddp options; the searched fields are overwritten per candidate unless
 * pinned).  Returns SIM_OK (even when nothing fits: check n_feasible),
 * SIM_EINVAL for options that admit no GPU count or a pinned TP, CP or EP
 * that breaks Megatron's rule against the model (strategy_check_*),
 * SIM_ENOMEM. */
int search_run(const run_inputs *base, const search_opts *o, search_result *out, sim_err *err);
void search_result_free(search_result *r);

/* The inputs and strategy of a candidate (world, parallel, train, ddp
 * applied to base), as search_run simulated it. */
int search_cand_inputs(const run_inputs *base, const search_cand *c, run_inputs *in, strategy_t *s,
                       sim_err *err);

/* Ranking key of a simulated candidate (smaller is better). */
double search_key(const search_opts *o, const search_cand *c);

/* Whether the caller pins dimension d (search_opts.pinned). */
bool search_pinned(const search_opts *o, search_dim d);

#endif
