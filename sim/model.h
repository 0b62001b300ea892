/* model: the transformer being trained (dense, GQA, MLA, MoE, MTP).
 *
 * model_spec is plain data filled by config from model.* keys (Megatron
 * Bridge names).  The functions here are pure: parameter counts and
 * Megatron's num_floating_point_operations, both as in
 * megatron/training/{training,theoretical_memory_usage}.py.
 * Units: counts are parameters or elements; FLOPs are floating-point ops.
 */
#ifndef PARSIM_MODEL_H
#define PARSIM_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MODEL_MAX_LAYERS 1024
/* Layer symbols in one MTP depth of a hybrid pattern (Nemotron-3: 2). */
#define MODEL_MAX_MTP_LAYERS 64

typedef enum { NORM_LAYERNORM = 0, NORM_RMSNORM = 1 } norm_kind;
/* Megatron Bridge's activation_func (Nemotron-H and Nemotron-3: squared
 * ReLU).  With gated_linear_unit off every one is one elementwise pass over
 * the F-wide fc1 output, so time and FLOPs depend only on the gate. */
typedef enum { MODEL_ACT_GELU = 0, MODEL_ACT_SILU = 1, MODEL_ACT_RELU = 2, MODEL_ACT_SQUARED_RELU = 3 } model_activation;
/* moe_router_score_function. */
typedef enum { MODEL_ROUTER_SOFTMAX = 0, MODEL_ROUTER_SIGMOID = 1 } model_router_score;

/* What one layer holds.  A transformer layer is attention + an MLP; in a
 * hybrid pattern (model.hybrid_layer_pattern) each symbol is one layer
 * holding either a mixer or an MLP (Megatron's hybrid counting). */
/* The Mamba-2 mixer's depthwise conv1d width: Megatron Core's MambaMixer
 * d_conv (a constructor default, no config key; megatron-features.md B.5:
 * "kernel 4"; HF conv_kernel 4 for Nemotron-3). */
#define MAMBA_CONV_KERNEL 4

typedef enum { MODEL_MIXER_ATTENTION = 0, MODEL_MIXER_MAMBA = 1, MODEL_MIXER_NONE = 2 } model_mixer_kind;
typedef enum { MODEL_MLP_DENSE = 0, MODEL_MLP_MOE = 1, MODEL_MLP_NONE = 2 } model_mlp_kind;
typedef struct model_layer {
    uint8_t mixer;  /* model_mixer_kind */
    uint8_t mlp;    /* model_mlp_kind; MoE counts only when num_moe_experts > 0 */
    uint8_t window; /* 1 = sliding-window attention (counts when window_size > 0) */
} model_layer;

typedef struct model_spec {
    char name[64];                   /* preset name, "" if given key by key */
    int64_t num_layers;              /* L */
    int64_t hidden_size;             /* h */
    int64_t ffn_hidden_size;         /* F (dense MLP) */
    int64_t num_attention_heads;     /* a */
    int64_t num_query_groups;        /* g; 0 = a (no GQA) */
    int64_t kv_channels;             /* d; 0 = h/a */
    bool gated_linear_unit;          /* SwiGLU/GeGLU: fc1 is 2F wide */
    norm_kind normalization;
    bool share_embeddings_and_output_weights; /* tied embeddings */
    bool add_bias_linear;
    bool qk_layernorm;
    char position_embedding_type[24]; /* "rope", "learned_absolute", "alibi", "none" */
    int64_t vocab_size;
    int64_t make_vocab_size_divisible_by; /* default 128 */
    int64_t seq_length;              /* s */

    /* MoE (num_moe_experts == 0: dense model) */
    int64_t num_moe_experts;                     /* E */
    int64_t moe_router_topk;                     /* k */
    int64_t moe_ffn_hidden_size;                 /* F_e; 0 = F */
    int64_t moe_shared_expert_intermediate_size; /* F_sh total; 0 = none */
    int64_t moe_router_num_groups;               /* device-limited routing: expert groups (0 = off) */
    int64_t moe_router_group_topk;               /* groups a token may use (0 = off) */
    int64_t moe_latent_size;                     /* l: routed experts run h -> l -> h; 0 = none */
    int activation_func;                         /* model_activation */
    int moe_router_score_function;               /* model_router_score */
    bool moe_router_enable_expert_bias;          /* fp32 per-expert bias on the selection scores */
    double moe_router_topk_scaling_factor;       /* scale on the top-k weights; 0 = none (Megatron's None) */

    /* Multi-latent attention (DeepSeek) */
    bool multi_latent_attention;
    int64_t q_lora_rank;             /* 0 = no q compression */
    int64_t kv_lora_rank;
    int64_t qk_head_dim;
    int64_t qk_pos_emb_head_dim;
    int64_t v_head_dim;

    int64_t mtp_num_layers;          /* multi-token prediction layers (depths), 0 = none */
    /* Hybrid MTP: each depth runs these layer symbols (the '/' parts of
     * hybrid_layer_pattern, or mtp_hybrid_override_pattern).  mtp_pattern_depth
     * is the number of '/' parts the main pattern carried (config reconciles
     * it with mtp_num_layers); mtp_legacy_pattern marks the legacy key. */
    model_layer mtp_layers[MODEL_MAX_MTP_LAYERS];
    int32_t mtp_layers_per_depth;
    int32_t mtp_pattern_depth;
    bool mtp_legacy_pattern;
    bool mtp_use_repeated_layer;     /* every depth runs the same weights (one depth's parameters) */

    /* Sliding-window attention (Megatron's window_size, causal: (W, 0)) */
    int64_t window_size;             /* keys before a query it attends to, W; 0 = full */
    int softmax_type;                /* 0 vanilla, 1 off-by-one, 2 learnable (sinks) */

    /* One entry per layer: mixer, MLP and window, from moe_layer_freq and
     * window_attn_skip_freq (all zeros: attention + dense MLP). */
    model_layer layers[MODEL_MAX_LAYERS];

    /* Hybrid models (model.hybrid_layer_pattern): each symbol one layer.
     * hybrid_segments > 0 when the pattern has '|' stage boundaries: then
     * hybrid_segment_layers[i] layers in segment i, in order. */
    bool hybrid;
    int32_t hybrid_segments;
    int16_t hybrid_segment_layers[MODEL_MAX_LAYERS + 2];

    /* Mamba-2 mixer (Megatron Core's mamba_* keys; 0 = derived) */
    int64_t mamba_state_dim;   /* N */
    int64_t mamba_head_dim;    /* P */
    int64_t mamba_num_groups;  /* G */
    int64_t mamba_num_heads;   /* H; 0 = 2h / P */
    int64_t mamba_chunk_size;  /* SSD chunk length */
    bool mamba_mem_eff_path;   /* use_mamba_mem_eff_path: the fused kernel */
} model_spec;

/* Fills the defaults every model_spec starts from (Megatron's defaults). */
void model_defaults(model_spec *m);

/* Reads a hybrid layer pattern (Megatron Core's hybrid_layer_allocation
 * symbols: M Mamba-2, * attention, - dense MLP, E MoE, | stage boundary,
 * / MTP separator) into m->layers, m->num_layers and the segments; the
 * '/'-parts ("main/mtp/mtp", one part a depth, all parts alike) into
 * m->mtp_layers and m->mtp_pattern_depth.  Returns 0, or -1 with one line
 * in msg naming the symbol and its 0-based position: symbols parsim does
 * not model (G, D, +), unknown ones, '|' in an MTP part, MTP parts that
 * differ or are empty, more than MODEL_MAX_LAYERS layers (or
 * MODEL_MAX_MTP_LAYERS in a part) or none. */
int model_hybrid_parse(model_spec *m, const char *pattern, char *msg, size_t cap);

/* Reads the legacy mtp_hybrid_override_pattern (one depth's symbols, no
 * '|' or '/') into m->mtp_layers; same errors as above. */
int model_mtp_pattern_parse(model_spec *m, const char *pattern, char *msg, size_t cap);

/* Layer symbols of all MTP depths together (hybrid: depth x symbols). */
int64_t model_mtp_layer_count(const model_spec *m);
/* MTP depths that hold their own weights: 1 with mtp_use_repeated_layer, else all. */
int64_t model_mtp_weight_depths(const model_spec *m);
/* Whether the last pipeline stage runs a hybrid pattern's MTP depths, which
 * look up the input embedding there (Megatron builds the embedding on an
 * MTP stage too and keeps it in step with the first stage's). */
bool model_mtp_embeds(const model_spec *m);
/* MoE layers among the MTP weights (weight depths x MoE layers a depth holds). */
int64_t model_mtp_moe_weight_layers(const model_spec *m);

/* Effective values of the "0 = derived" fields. */
int64_t model_query_groups(const model_spec *m);   /* g */
int64_t model_kv_channels(const model_spec *m);    /* d */
int64_t model_moe_ffn(const model_spec *m);        /* F_e */
bool model_is_moe(const model_spec *m);
/* The layer pattern (main layers or an MTP depth) has Mamba-2 mixers (M). */
bool model_has_mamba(const model_spec *m);
bool model_layer_is_moe(const model_spec *m, int64_t layer); /* 0-based */
int64_t model_num_moe_layers(const model_spec *m);
bool model_layer_is_window(const model_spec *m, int64_t layer); /* 0-based */
int64_t model_num_window_layers(const model_spec *m);
/* Keys one query attends to on average in a causal layer of sequence s:
 * s/2, or with a window W < s, W - W(W-1)/(2s) (Megatron Bridge flop_utils). */
double model_attention_context(const model_spec *m, bool window_layer);

/* Vocabulary padded as Megatron does for tensor-parallel size tp:
 * ceil(V / (div*tp)) * div*tp.  The checked form returns false when that
 * passes int64 (strategy_resolve rejects such a model); the plain one, for
 * callers that have checked, returns INT64_MAX then. */
bool model_padded_vocab_checked(const model_spec *m, int64_t tp, int64_t *out);
int64_t model_padded_vocab(const model_spec *m, int64_t tp);

/* Parameters of one attention block, dense MLP, MoE MLP (all experts, with
 * router and shared experts), norms of one layer; Megatron's counting. */
typedef struct model_layer_params {
    double attention;      /* TP-sharded */
    double dense_mlp;      /* TP-sharded */
    double shared_experts; /* TP-sharded */
    double routed_experts; /* sharded over EP x ETP */
    double mamba;          /* Mamba-2 mixer, TP-sharded */
    double mtp_proj;       /* an MTP depth's eh projection 2h -> h, TP-sharded */
    double replicated;     /* norms, router, expert bias, latent projections: not sharded */
} model_layer_params;

void model_layer_param_counts(const model_spec *m, bool moe_layer, model_layer_params *out);

/* The same for layer `layer` (0-based) as its entry in m->layers holds it:
 * a transformer layer as above; a hybrid layer only its mixer or its MLP,
 * with one norm. */
void model_layer_param_counts_at(const model_spec *m, int64_t layer, model_layer_params *out);

/* Parameters of one MTP depth: its layers (hybrid: the pattern's symbols;
 * transformer: one layer of the last decoder layer's type), the eh
 * projection and the norms (hybrid: enorm, hnorm and final norm; transformer:
 * enorm and hnorm, as memory has always counted them). */
void model_mtp_depth_params(const model_spec *m, model_layer_params *out);

/* Mamba-2 widths: d_inner = H * P and the in_proj output 2 d_inner + 2 G N + H
 * (megatron/core/ssm/mamba_mixer.py:239-308). */
double model_mamba_d_inner(const model_spec *m);
double model_mamba_in_proj_width(const model_spec *m);

/* Total parameters (with embeddings, output layer if untied, MTP). */
double model_total_params(const model_spec *m, int64_t tp);

/* Megatron-LM num_floating_point_operations for one step of batch_size
 * sequences of seq_length tokens (current HEAD convention: 3x GEMMs, causal
 * attention counted as half, no recompute), padded vocab for tp. */
double model_flops_per_step(const model_spec *m, int64_t batch_size, int64_t tp);

#endif
