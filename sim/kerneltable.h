/* kerneltable: the published kernel figures of one GPU type.
 *
 * A kernel file (kernels/<gpu>.cfg, named by cluster.compute.kernels) holds
 * one libconfig group `kernels`:
 *
 *   clock_fraction  sustained / boost SM clock under the power limit
 *   gemm.<p>        ({m, n, k, tflops, derate, src[, best_shape]}) per
 *                   precision p: bf16, fp8_tensor (delayed and current
 *                   scaling), fp8_block, mxfp8, nvfp4; best_shape = true
 *                   marks the best shape of a brute-force sweep (MAMF)
 *   grouped_gemm.<p> ({groups, m, n, k, tflops, derate, src}): m rows per group
 *   attention       auto, flash (the family each backend runs), sinks (the
 *                   families with softmax sinks), curves ({family = cudnn |
 *                   fa2 | fa3 | fa4, pass = fwd | bwd, causal, window,
 *                   head_dim, seq = [...], tflops = [...], derate, src})
 *   flex.<backend>  ({scope = nvlink | network, ranks, dispatch_gbytes_per_s,
 *                   combine_gbytes_per_s, src[, sms]}) for deepep and hybridep;
 *                   sms = the SMs the kernels ran on (unstated: any)
 *
 * `derate = true` marks a figure taken at a clock a training job does not
 * hold (locked boost clock, short loops with cool-down): clock_fraction
 * applies to it; false: the figure already includes throttling.  Every entry
 * names its source in `src`.  Loaded once per configuration; lookups are
 * pure and allocation-free.
 */
#ifndef PARSIM_KERNELTABLE_H
#define PARSIM_KERNELTABLE_H

#include <stdbool.h>

#include "cluster.h"
#include "err.h"
#include "strategy.h"

/* Reads the kernel file at path into *out (cleared first).  SIM_EINVAL with
 * file, line and key for a syntax error, a missing group or field, a value
 * of the wrong type or out of range, a sequence or rank list that does not
 * increase, a family named but without forward and backward curves. */
int kerneltable_load(const char *path, kernel_table *out, sim_err *err);

/* Table precision of a mixed-precision recipe. */
kt_precision kerneltable_precision(precision_kind p);

/* The published GEMM nearest (groups, m, n, k) in log space for precision
 * p, from the grouped table when groups > 1 and it has one, else the plain
 * one; a precision the table lacks falls back to the next wider one
 * (nvfp4 -> mxfp8 -> fp8_block -> fp8_tensor -> bf16), as Transformer
 * Engine does on a GPU without the format, as does one the GPU lacks
 * (bit p of avail clear; bf16 is always there).  *used is the precision
 * found.  NULL when the table has no GEMM figure at all. */
const kt_gemm *kerneltable_gemm(const kernel_table *t, kt_precision p, unsigned avail, double groups, double m,
                                double n, double k, kt_precision *used);

/* The attention family a backend runs: auto and flash as the file says,
 * fused = cuDNN; with softmax sinks a family without them gives way to the
 * first that has them (auto's family first). */
kt_family kerneltable_family(const kernel_table *t, attention_backend_kind backend, bool sinks);

/* Attention rate, flop/s, of `family` at `seq` tokens: the curve of that
 * family and pass that matches best (full vs windowed, then the mask, then
 * the window nearest in log space, then the head dimension), read linearly
 * in log2(seq).  0 when the family has no curve. */
double kerneltable_attention_rate(const kernel_table *t, kt_family family, bool backward, bool causal,
                                  double window, double head_dim, double seq);

/* Dispatch and combine rates (bytes/s per GPU) of a flex backend for an EP
 * group of `ranks` inside one NVLink domain or across domains, linear in
 * log2(ranks) between published points, flat beyond; false when the table
 * has none for that scope.  Where points state their SM count, only those
 * of one count are read: the nearest sms in log space (the lower on a tie),
 * the largest when sms is 0; the kernels' bandwidth grows with their SMs. */
bool kerneltable_flex_rate(const kernel_table *t, kt_flex_backend backend, bool network, double ranks,
                           double sms, double *dispatch, double *combine);

const char *kerneltable_family_name(kt_family f);

#endif
