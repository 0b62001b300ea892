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

/* C[m,n] = A[m,k] B[k,n]: 2mnk flops; bytes moved at the operand width. */
double compute_gemm_s(const cluster_spec *c, double m, double n, double k, gemm_dtype dt);

/* Fused (flash) attention of `flops` floating-point operations, forward or
 * backward, reading/writing `bytes` of Q, K, V, O (and gradients). */
double compute_attention_s(const cluster_spec *c, double flops, double bytes, bool backward);

/* A memory-bound kernel moving `bytes` through HBM (reads + writes). */
double compute_memory_s(const cluster_spec *c, double bytes);

#endif
