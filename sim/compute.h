/* compute: the time one kernel takes on one GPU.
 *
 * Roofline: time = max(flops / (peak * efficiency), bytes / (hbm_bw *
 * hbm_efficiency)) + kernel_overhead.  Peaks and efficiencies come from the
 * topology (cluster_spec); nothing is a constant here.
 * Units: flops, bytes, seconds.
 */
#ifndef PARSIM_COMPUTE_H
#define PARSIM_COMPUTE_H

#include <stdbool.h>

#include "cluster.h"
#include "strategy.h"

typedef enum { GEMM_BF16 = 0, GEMM_FP8, GEMM_FP4 } gemm_dtype;

/* dtype of the transformer GEMMs under a mixed-precision recipe. */
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

/* Fused (flash) attention of `flops` floating-point operations, forward or
 * backward, reading/writing `bytes` of Q, K, V, O (and gradients), over
 * keys of length kv_tokens and heads of head_dim (shorter keys and smaller
 * heads reach less of the plateau). */
double compute_attention_s(const cluster_spec *c, double flops, double bytes, double kv_tokens, double head_dim,
                           bool backward);

/* A memory-bound kernel moving `bytes` through HBM (reads + writes). */
double compute_memory_s(const cluster_spec *c, double bytes);

#endif
