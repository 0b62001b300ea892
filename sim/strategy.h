/* strategy: the parallel layout and training batch, Megatron's rules for
 * them, the sizes derived from them and where each group sits on the fabric.
 *
 * parallel_spec / train_spec / ddp_spec are plain data filled by config.
 * strategy_resolve() checks every rule of Megatron (reference §5.4 and the
 * parallel state asserts) and fills a strategy_t with the derived sizes;
 * an error names the key concerned (err->key; the caller that read the key
 * adds its file and line, cfg_err_locate).
 * Rank order is Megatron's default: dense tp-cp-dp-pp, expert etp-ep-edp-pp,
 * leftmost fastest.
 */
#ifndef PARSIM_STRATEGY_H
#define PARSIM_STRATEGY_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cluster.h"
#include "err.h"
#include "model.h"
#include "schedule.h"

/* model.attention_backend: flash/fused kernels never store the s x s
 * scores; unfused (Megatron's "local"/"unfused", the 2021-22 runs)
 * materializes and keeps them (Korthikanti et al.'s 5as^2b term). */
/* auto and fused also run fused kernels: which family each runs is the
 * kernel table's (auto: what Transformer Engine picks on the GPU). */
typedef enum { ATTN_FLASH = 0, ATTN_UNFUSED, ATTN_AUTO, ATTN_FUSED } attention_backend_kind;

typedef enum { CP_COMM_P2P = 0, CP_COMM_ALL_GATHER, CP_COMM_A2A, CP_COMM_A2A_P2P } cp_comm_kind;
typedef enum { RECOMPUTE_NONE = 0, RECOMPUTE_SELECTIVE, RECOMPUTE_FULL } recompute_kind;
/* model.moe_token_dispatcher_type (Megatron Core's default is allgather) */
typedef enum {
    MOE_DISPATCHER_ALLGATHER = 0, MOE_DISPATCHER_ALLTOALL, MOE_DISPATCHER_FLEX
} moe_dispatcher_kind;

/* recompute_modules bits (Megatron Core names) */
enum {
    RECOMPUTE_MOD_CORE_ATTN = 1u << 0,
    RECOMPUTE_MOD_MLP = 1u << 1,
    RECOMPUTE_MOD_MOE = 1u << 2,
    RECOMPUTE_MOD_MOE_ACT = 1u << 3,
    RECOMPUTE_MOD_LAYERNORM = 1u << 4,
    RECOMPUTE_MOD_MLA_UP_PROJ = 1u << 5,
    RECOMPUTE_MOD_SHARED_EXPERTS = 1u << 6,
};

typedef enum {
    PREC_BF16 = 0, PREC_FP16, PREC_FP8_DELAYED, PREC_FP8_CS, PREC_MXFP8,
    PREC_FP8_BLOCKWISE, PREC_NVFP4
} precision_kind;

#define MAX_HIER_CP 4

typedef struct parallel_spec {
    int64_t tp, pp;
    int64_t vp;          /* virtual stages per PP rank; 0 = not interleaved */
    int64_t cp, ep;
    int64_t etp;         /* 0 = same as tp (Megatron's default) */
    bool sequence_parallel;
    cp_comm_kind cp_comm_type;
    attention_backend_kind attention_backend;
    int64_t hierarchical_cp_sizes[MAX_HIER_CP]; /* for a2a+p2p */
    int n_hierarchical_cp_sizes;
    recompute_kind recompute_granularity;
    unsigned recompute_modules;      /* RECOMPUTE_MOD_* bits; default core_attn */
    int64_t recompute_num_layers;    /* full recompute: layers per group (uniform) */
    bool recompute_num_layers_given; /* set in the inputs (Megatron: not None) */
    int64_t microbatch_group_size_per_vp_stage; /* 0 = pp */
    /* Uneven pipeline stages (Megatron Bridge names): layers on the first /
     * last pipeline rank (0 = even split), or count the embedding / the loss
     * as one layer each when splitting. */
    int64_t num_layers_in_first_pipeline_stage;
    int64_t num_layers_in_last_pipeline_stage;
    bool account_for_embedding_in_pipeline_split;
    bool account_for_loss_in_pipeline_split;
    /* Megatron's pipeline_model_parallel_layout: virtual stages separated by
     * '|', 'E' embedding, 't' a decoder layer, 'm' an MTP layer, 'L' the
     * loss, X*N repeats, (..)*N repeats a group; "" = not set. */
    char pipeline_model_parallel_layout[512];
    bool overlap_p2p_comm;           /* interleaved only; Megatron default on */
    sched_name pipeline_schedule;    /* sim.pipeline_schedule */
    bool tp_comm_overlap;
    moe_dispatcher_kind moe_token_dispatcher; /* how MoE tokens reach the experts */
    int moe_flex_backend;                     /* flex: kt_flex_backend (deepep, hybridep) */
    int64_t moe_hybridep_num_sms;             /* SMs HybridEP's dispatch/combine kernels run on */
    double moe_capacity_factor;      /* model.moe_expert_capacity_factor; 0 = dropless */
    bool moe_pad_to_capacity;        /* model.moe_pad_expert_input_to_capacity: static
                                        shapes, so no host sync and graphable experts */
    bool moe_shared_expert_overlap;  /* shared experts on a side stream beside the
                                        dispatch (fc1) and the combine (fc2) */
    precision_kind precision;        /* from mixed_precision */
    /* Combined 1F1B (model.overlap_moe_expert_parallel_comm): a backward
     * paired with the next forward, layer by layer, the EP all-to-all of
     * one beside the compute of the other; delay_wgrad_compute: the wgrad
     * GEMMs as nodes of their own after the dgrads. */
    bool overlap_moe_ep_comm;
    bool delay_wgrad_compute;
    /* CPU activation offloading (Megatron's cpu_offloading): the saved
     * activations of the first cpu_offloading_num_layers layers go to host
     * memory between their forward and their backward (wl_offload.c). */
    bool cpu_offloading;
    int64_t cpu_offloading_num_layers;
    bool cpu_offloading_activations;
    bool cpu_offloading_weights;     /* refused: weight offloading is not modeled */
} parallel_spec;

typedef struct train_spec {
    int64_t global_batch_size;  /* sequences per step */
    int64_t micro_batch_size;   /* sequences per microbatch */
} train_spec;

/* Parameter-efficient fine-tuning (Megatron Bridge `peft`).  With LoRA the
 * base weights are frozen: no weight-gradient GEMMs, gradients or optimizer
 * states for them; rank-`dim` adapters (A: in -> dim, B: dim -> out) sit
 * beside the target linear layers and are the only trained parameters. */
enum {
    LORA_QKV = 1u << 0,  /* linear_qkv */
    LORA_PROJ = 1u << 1, /* linear_proj */
    LORA_FC1 = 1u << 2,  /* linear_fc1 */
    LORA_FC2 = 1u << 3,  /* linear_fc2 */
};

typedef struct peft_spec {
    bool lora;                  /* peft.scheme = "lora" */
    int64_t dim;                /* adapter rank */
    unsigned targets;           /* LORA_* bits */
} peft_spec;

/* ddp.data_parallel_sharding_strategy / outer_dp_sharding_strategy
 * (Megatron-FSDP's names; the ZeRO stage is the value). */
typedef enum {
    DP_SHARD_NONE = 0, DP_SHARD_OPTIM, DP_SHARD_OPTIM_GRADS, DP_SHARD_OPTIM_GRADS_PARAMS
} dp_shard_kind;

typedef struct ddp_spec {
    bool use_distributed_optimizer;
    bool overlap_grad_reduce;
    bool overlap_param_gather;
    bool grad_reduce_in_fp32;
    int64_t bucket_size;        /* parameters per DP bucket; 0 = Megatron default */
    /* Megatron-FSDP (megatron-features.md C.1); the sharding strategies,
     * double buffer and unit size are read only with use_megatron_fsdp. */
    bool use_megatron_fsdp;
    int sharding;               /* dp_shard_kind */
    int outer_sharding;         /* DP_SHARD_NONE (HSDP) or DP_SHARD_OPTIM (HFSDP) */
    int64_t num_distributed_optimizer_instances; /* outer DP size; 1 = none */
    bool fsdp_double_buffer;
    int64_t suggested_communication_unit_size;   /* elements; 0 = none */
    bool fp8_param_gather;      /* mixed_precision.fp8_param_gather */
} ddp_spec;

/* A group kind keeps at most this many distinct placements. */
#define STRATEGY_MAX_PLACEMENTS CLUSTER_MAX_PLACEMENTS

#define STRATEGY_SHARD_GROUPS 4

typedef enum {
    GROUP_TP = 0, GROUP_CP, GROUP_DP, GROUP_DP_CP, GROUP_PP,
    GROUP_EP, GROUP_ETP, GROUP_EDP, GROUP_COUNT
} group_kind;

typedef struct strategy {
    parallel_spec par;     /* with defaults resolved (etp, vp->v, N) */
    train_spec train;
    ddp_spec ddp;
    int64_t world;         /* cluster.num_gpus */
    int64_t tp, pp, v, cp, ep, etp; /* v >= 1 */
    int64_t dp;            /* world / (tp*cp*pp) */
    int64_t edp;           /* world / (etp*ep*pp) */
    int64_t num_microbatches;  /* M = gbs / (mbs*dp) */
    int64_t group_size_n;      /* microbatch_group_size_per_vp_stage */
    int64_t min_gpus;          /* pp * lcm(tp*cp, ep*etp) */
    int64_t min_gpus_common;   /* pp * max(tp*cp, ep*etp), the usual rule */
    int64_t layers_per_chunk;  /* L / (pp*v) when the split is even, else the most */
    /* Layers of virtual stage vs (strategy_vstage) are
     * [vstage_start[vs], vstage_start[vs+1]). */
    int32_t vstage_start[MODEL_MAX_LAYERS + 3];
    group_span groups[GROUP_COUNT];   /* the worst placement of each kind */
    group_placements places[GROUP_COUNT];
    /* Data-parallel sharding, from the distributed optimizer or
     * Megatron-FSDP: zero = what is sharded over the DP x CP mesh (experts
     * over expert-DP): 0 nothing, 1 optimizer state, 2 + gradients, 3 +
     * parameters (dp_shard_kind).  With dp_outer optimizer instances the
     * shards span the inner groups (dp_inner = dp*cp / dp_outer, edp_inner
     * = edp / dp_outer); hfsdp also shards the optimizer state over the
     * outer groups. */
    int zero;
    bool hfsdp;
    int64_t dp_outer, dp_inner, edp_inner;
    group_placements shard_places[STRATEGY_SHARD_GROUPS]; /* strategy_shard_group */
} strategy_t;

/* The groups the data-parallel shards are reduced and gathered over:
 * inner (dp_inner ranks of the DP x CP group, consecutive, / edp_inner of
 * expert-DP) and outer (one rank of each inner group). */
typedef enum {
    SHARD_DENSE_INNER = 0, SHARD_DENSE_OUTER, SHARD_EXPERT_INNER, SHARD_EXPERT_OUTER
} strategy_shard_group;

/* Checks every rule and derives the sizes.  Returns SIM_OK or SIM_EINVAL
 * naming the offending key (no file or line). */
int strategy_resolve(strategy_t *out, const model_spec *m, const cluster_spec *c,
                     const parallel_spec *par, const train_spec *train,
                     const ddp_spec *ddp, sim_err *err);

/* Single rules of strategy_resolve for one dimension against the model,
 * for callers that fix a dimension before choosing the rest (search):
 * CP against the sequence (seq_length % 2cp), EP against the experts, TP
 * against the heads and query groups.  SIM_OK or SIM_EINVAL naming the
 * dimension's key. */
int strategy_check_cp(const model_spec *m, int64_t cp, sim_err *err);
int strategy_check_ep(const model_spec *m, int64_t ep, sim_err *err);
int strategy_check_tp(const model_spec *m, int64_t tp, sim_err *err);
/* Mamba layers (none: SIM_OK): heads and groups divisible by TP, the
 * heads of a TP rank by CP, its groups and CP dividing one another. */
int strategy_check_mamba(const model_spec *m, int64_t tp, int64_t cp, sim_err *err);
/* Megatron's conditions on the EP all-to-all overlap, delay_wgrad_compute
 * and the shared-expert overlap (transformer_config.py:3002-3101) for a layout with pp ranks of v
 * chunks each; SIM_OK when p's settings are legal. */
int strategy_check_ep_overlap(const model_spec *m, const parallel_spec *p, int64_t pp, int64_t v, sim_err *err);
/* Megatron's group_repeat_count (mamba_context_parallel.py:116-129): the
 * groups of a TP rank, when fewer than CP, are repeated CP / (G/TP) times
 * so that every CP rank holds one; else 1. */
int64_t strategy_mamba_group_repeat(const model_spec *m, int64_t tp, int64_t cp);

/* Coordinates of a global rank. */
typedef struct rank_coords {
    int64_t tp, cp, dp, pp;   /* dense generator */
    int64_t etp, ep, edp;     /* expert generator */
} rank_coords;
void strategy_coords(const strategy_t *s, int64_t rank, rank_coords *out);

/* The pipeline schedule's plan (placement, B/W split, sizes). */
void strategy_plan(const strategy_t *s, sched_plan *out);
/* Virtual stage of model chunk `chunk` of pipeline rank `stage`, where the
 * schedule places it (chunk*pp + stage, or folded in a V). */
int64_t strategy_vstage(const strategy_t *s, int64_t stage, int64_t chunk);

/* Global layer range [first, first+count) held by model chunk `chunk` of
 * pipeline rank `stage`. */
void strategy_chunk_layers(const strategy_t *s, int64_t stage, int64_t chunk, int64_t *first, int64_t *count);

/* How the layers go onto pp stages of vp virtual stages each (vp 0 or 1:
 * not interleaved), in Megatron Bridge's terms; fills the four split
 * fields of par.  In order of preference: the even split; the embedding
 * and the loss counted as one layer each
 * (account_for_embedding/loss_in_pipeline_split); first and last stages
 * with at most as many layers as the middle ones, the first taking the
 * odd chunk (num_layers_in_first/last_pipeline_stage).  Returns false when
 * none of these is legal. */
bool strategy_split_layers(const model_spec *m, int64_t pp, int64_t vp, parallel_spec *par);

const char *group_kind_name(group_kind g);

/* Prints the layout view: rank table, groups and the fabric tier the
 * slowest group of each kind spans, every distinct placement of each kind
 * with how many groups have it, and the warnings. */
void strategy_print_layout(const strategy_t *s, const cluster_spec *c, FILE *out);

/* Number of warnings the layout would print (TP/EP/ETP groups outside
 * NVLink; groups of one kind placed differently), written to buf. */
int strategy_layout_warnings(const strategy_t *s, char *buf, size_t len);

#endif
