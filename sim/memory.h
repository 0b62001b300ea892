/* memory: bytes a GPU of each pipeline stage holds.
 *
 * Static: weights, gradients and optimizer states from the parameters a
 * stage holds, sharded as Megatron shards them (TP, EP x ETP, the
 * distributed optimizer over DP x CP for dense and over expert-DP for
 * expert parameters; bytes per parameter 2 + 4 + 12/D, reference §2.2),
 * and Megatron-FSDP's gradients and weights as its strategy shards them,
 * with the unsharded buffers of the units in flight.
 * Activations: the bytes one microbatch leaves stored per layer
 * (Korthikanti et al. 2022, Table 2, generalised to GQA, MLA, GLU, MoE and
 * CP),
 * which the step simulation allocates at a forward pass and frees at the
 * matching backward, so peaks come from the simulated timeline.
 * Units: bytes.
 */
#ifndef PARSIM_MEMORY_H
#define PARSIM_MEMORY_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "strategy.h"

typedef struct stage_static_mem {
    double dense_params;     /* parameters on this GPU sharded like dense ones */
    double expert_params;    /* routed-expert parameters on this GPU */
    double shard_params;     /* trained parameters whose optimizer state this GPU
                                holds (all of them without the distributed
                                optimizer) */
    double weights_bytes;    /* with Megatron-FSDP's gathered unit buffers */
    double gradients_bytes;  /* with its unsharded unit gradient buffers */
    double optimizer_bytes;
    double fsdp_buffer_bytes; /* those buffers (part of the two above) */
} stage_static_mem;

/* Parameters one GPU holds in Megatron-FSDP's units of a chunk (its
 * transformer layers, and the embedding where it is not also the output
 * layer), before FSDP sharding: all (w_) and trained (t_), dense and
 * routed-expert. */
typedef struct mem_units {
    double w_dense, w_expert, t_dense, t_expert;
} mem_units;
/* One unit's parameters on this GPU: layer `layer`, or the embedding (word
 * and learned positions) when layer < 0. */
void memory_unit_params(const run_inputs *in, const strategy_t *s, int64_t layer, mem_units *u);
void memory_chunk_units(const run_inputs *in, const strategy_t *s, int64_t stage, int64_t chunk, mem_units *out);
/* Is the embedding of this chunk an FSDP unit (first virtual stage; not
 * when tied to an output layer on the same stage, which no unit holds)? */
bool memory_embedding_is_unit(const run_inputs *in, const strategy_t *s, int64_t stage, int64_t chunk);
/* Bytes per gathered parameter: bf16, or fp8 with fp8_param_gather. */
double memory_param_gather_bytes(const run_inputs *in);

void memory_static(const run_inputs *in, const strategy_t *s, int64_t stage, stage_static_mem *out);

/* The CUDA graph memory pool on each GPU when graphs are on
 * (cluster.host.graph_pool_gib, or graph_pool_pp_gib with PP > 1:
 * megatron-features.md §C.3 "a few GB, more than 10 GB with PP > 1");
 * 0 without graphs. */
double memory_graph_pool_bytes(const run_inputs *in, const strategy_t *s);

/* Parameters one GPU holds for model chunk `chunk` of `stage`: dense ones
 * (TP-sharded and replicated, with embeddings, output layer, final norm
 * and MTP where they live) and routed-expert ones (EP x ETP sharded). */
void memory_chunk_params(const run_inputs *in, const strategy_t *s, int64_t stage,
                         int64_t chunk, double *dense, double *expert);

/* Parameters one GPU holds for transformer layer `layer` (0-based):
 * dense (TP-sharded / TP + replicated) and routed-expert (/ EP x ETP). */
void memory_layer_params(const run_inputs *in, const strategy_t *s, int64_t layer, double *dense,
                         double *expert);

/* Trained parameters (those with gradients and optimizer state) of a
 * layer and of a chunk on one GPU: all of them, or with LoRA
 * (peft.scheme) only the adapters, which are counted as dense. */
void memory_layer_trained_params(const run_inputs *in, const strategy_t *s, int64_t layer, double *dense,
                                 double *expert);
void memory_chunk_trained_params(const run_inputs *in, const strategy_t *s, int64_t stage, int64_t chunk,
                                 double *dense, double *expert);

/* Activation bytes one microbatch stores for one transformer layer. */
double memory_layer_activation_bytes(const run_inputs *in, const strategy_t *s, bool moe_layer);
/* The same for layer `layer` (0-based) as m->layers holds it (hybrid
 * layers: a mixer or an MLP). */
double memory_layer_activation_bytes_at(const run_inputs *in, const strategy_t *s, int64_t layer);

/* Are layer `layer`'s saved activations offloaded to host memory
 * (model.cpu_offloading: the first cpu_offloading_num_layers layers)? */
bool memory_layer_offloaded(const strategy_t *s, int64_t layer);

/* Activation bytes one microbatch stores in model chunk `chunk` of `stage`
 * (its layers, plus the embedding on the first and the output layer and
 * loss on the last virtual stage), from forward until its backward ends.
 * With CPU offloading the offloaded layers count only as the two in
 * flight (the largest two: the one being copied and the next). */
double memory_chunk_activation_bytes(const run_inputs *in, const strategy_t *s,
                                     int64_t stage, int64_t chunk);

/* Extra bytes alive during the backward of one chunk (recomputed layer
 * activations under full recompute: one layer's full set). */
double memory_chunk_backward_transient_bytes(const run_inputs *in, const strategy_t *s,
                                             int64_t stage, int64_t chunk);

/* Lower bound of the peak bytes of any GPU, for judging a layout without
 * simulating it (search's pruning, the rules-of-thumb baseline): the
 * largest over stages of its static bytes (weights, gradients, optimizer:
 * exact) plus the activations of every forward pass its schedule runs
 * before its first backward (all alive when that backward starts: the
 * step frees them at the end of a backward or a W) plus that backward's
 * transient bytes.  A layout whose bound exceeds the HBM can never fit.
 * It leans on how step.c holds activations (from a forward's first op to
 * its backward's last); tests/test_search.c checks it against simulating.
 * Benign out-of-memory degradation: it allocates only for more than 64
 * chunks, and without memory returns 0, a bound that prunes nothing; the
 * layout is then simulated and judged by its simulated peak, so the ranking
 * is the same and only the pruned / simulated counts differ. */
double memory_peak_lower_bound(const run_inputs *in, const strategy_t *s);

#endif
