/* compute: the time one kernel takes on one GPU.
 *
 * Roofline: time = max(flops / rate, bytes / (hbm_bw * hbm_efficiency)) +
 * kernel_overhead.  The rate, in order of precedence: a measured microbench
 * table (cluster.compute.microbench); the analytic efficiencies where a
 * configuration sets them (cluster.compute.gemm_efficiency, ...); the GPU's
 * published kernel table (cluster.compute.kernels, sim/kerneltable.h):
 * GEMMs by shape and precision recipe, attention by kernel family, mask,
 * window, head dimension and sequence length.  All of it from the topology
 * (cluster_spec); nothing is a constant here.
 * Units: flops, bytes, seconds.
 */
#ifndef PARSIM_COMPUTE_H
#define PARSIM_COMPUTE_H

#include <stdbool.h>

#include "cluster.h"
#include "strategy.h"

/* The GEMM format of a mixed-precision recipe: the kernel tables tell
 * per-tensor fp8 (delayed and current scaling), blockwise fp8 and MXFP8
 * apart (same width, different kernels); KT_* values. */
typedef enum {
    GEMM_BF16 = KT_BF16, GEMM_FP8 = KT_FP8_TENSOR, GEMM_FP8_BLOCK = KT_FP8_BLOCK, GEMM_MXFP8 = KT_MXFP8,
    GEMM_FP4 = KT_NVFP4
} gemm_dtype;

/* GEMM format of the transformer GEMMs under a mixed-precision recipe. */
gemm_dtype compute_gemm_dtype(precision_kind p);

/* C[m,n] = A[m,k] B[k,n]: 2mnk flops; bytes moved at the operand width.
 * The large-GEMM efficiency is scaled by the shape: tile padding, wave
 * quantization over the SMs and the per-tile prologue/epilogue. */
double compute_gemm_s(const cluster_spec *c, double m, double n, double k, gemm_dtype dt);

/* `groups` GEMMs of one shape in one launch (grouped expert GEMMs). */
double compute_grouped_gemm_s(const cluster_spec *c, double groups, double m, double n, double k, gemm_dtype dt);

/* Bytes moved per element to quantize a GEMM operand under a precision
 * recipe (0 for bf16/fp16). */
double compute_cast_bytes_per_element(precision_kind p);

/* What a fused attention kernel is asked to do, beyond its flops. */
typedef struct compute_attn {
    kt_family family; /* kernel family (compute_attention_family) */
    bool causal;
    double window;    /* sliding-window keys; 0 = full attention */
    double head_dim;
    double seq;       /* sequence length: the x axis of windowed curves */
} compute_attn;

/* The kernel family a backend runs on this GPU (softmax sinks need a
 * family that has them). */
kt_family compute_attention_family(const cluster_spec *c, attention_backend_kind backend, bool sinks);

/* Fused (flash) attention of `flops` floating-point operations, forward or
 * backward, reading/writing `bytes` of Q, K, V, O (and gradients), over
 * keys of length kv_tokens (shorter keys and smaller heads reach less). */
double compute_attention_s(const cluster_spec *c, const compute_attn *a, double flops, double bytes,
                           double kv_tokens, bool backward);

/* MoE flex dispatcher (DeepEP / HybridEP kernels): time of one dispatch
 * (or combine) of `bytes` per GPU over an EP group of `ranks` GPUs across
 * `domains` NVLink domains, at the kernel table's rates: the share bound
 * for other domains at the network rate, the rest at the NVLink rate.
 * `sms` > 0 reads the points published at the nearest SM count (HybridEP's
 * moe_hybridep_num_sms), 0 any.  false when the table has no rate for the
 * backend and scope (the caller times it as an all-to-all). */
bool compute_flex_s(const cluster_spec *c, kt_flex_backend backend, bool combine, double ranks, double domains,
                    double sms, double bytes, double *seconds);

/* The Mamba-2 chunked SSD scan of `flops` (forward count), moving `bytes`:
 * at the kernel table's ssd efficiency of the bf16 peak (config refuses
 * Mamba layers on a table without one).  The
 * backward is taken as twice the forward's flops at the same efficiency
 * [assumed: kernels.md has no backward figure]. */
double compute_ssd_s(const cluster_spec *c, double flops, double bytes, bool backward);

/* A memory-bound kernel moving `bytes` through HBM (reads + writes). */
double compute_memory_s(const cluster_spec *c, double bytes);

#endif
