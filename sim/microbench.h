/* microbench: measured kernel efficiency tables for the compute model.
 *
 * bench/gpu_microbench.py measures, on one GPU, GEMM efficiency at the
 * shapes parsim's workloads produce and flash attention efficiency by key
 * length and head dimension, and writes them (--format cfg) as a libconfig
 * group `microbench` with lists gemm_bf16, gemm_fp8 ({m, n, k, efficiency}),
 * attention_fwd_bf16, attention_bwd_bf16 ({seq, head_dim, efficiency}) and
 * hbm_copy_uint8 ({gbytes_per_s}).  A topology (or any config) names such a
 * file with cluster.compute.microbench; compute then takes a GEMM's
 * efficiency from the nearest measured shape and attention's from the
 * measured curve instead of the analytic model.
 * Lookups are pure and allocation-free.
 */
#ifndef PARSIM_MICROBENCH_H
#define PARSIM_MICROBENCH_H

#include <stdbool.h>

#include "cluster.h"
#include "err.h"

/* Reads the table at path into *out (cleared first).  SIM_EINVAL with the
 * file and line for a syntax error, a missing `microbench` group, a value
 * out of range or more points than the table holds. */
int microbench_load(const char *path, microbench_table *out, sim_err *err);

/* Efficiency of the measured GEMM nearest to (m, n, k) in log space, for
 * dtype 0 (bf16) or 1 (fp8); false when that table is empty. */
bool microbench_gemm_efficiency(const microbench_table *t, int dtype, double m, double n, double k,
                                double *efficiency);

/* Attention efficiency (backward or forward) at kv_tokens keys, from the
 * measured head dimension nearest to head_dim, interpolated linearly in
 * log2(keys) and held flat beyond the measured range; false when empty. */
bool microbench_attention_efficiency(const microbench_table *t, bool backward, double kv_tokens, double head_dim,
                                     double *efficiency);

#endif
