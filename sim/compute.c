#include "compute.h"

#include <math.h>

gemm_dtype compute_gemm_dtype(precision_kind p)
{
    switch (p) {
    case PREC_BF16:
    case PREC_FP16:
        return GEMM_BF16;
    case PREC_NVFP4:
        return GEMM_FP4;
    default:
        return GEMM_FP8;
    }
}

/* Peak and achievable fraction for a GEMM dtype; a GPU without fp8 (fp4)
 * units runs them at the next wider width, as Transformer Engine falls back. */
static double gemm_rate(const cluster_spec *c, gemm_dtype dt, double *elem_bytes)
{
    const gpu_spec *g = &c->gpu;
    const compute_params *p = &c->compute;
    if (dt == GEMM_FP4 && g->peak_fp4_flops_per_s > 0) {
        *elem_bytes = 0.5;
        return g->peak_fp4_flops_per_s * p->gemm_fp8_efficiency;
    }
    if (dt != GEMM_BF16 && g->peak_fp8_flops_per_s > 0) {
        *elem_bytes = 1.0;
        return g->peak_fp8_flops_per_s * p->gemm_fp8_efficiency;
    }
    *elem_bytes = 2.0;
    return g->peak_bf16_flops_per_s * p->gemm_efficiency;
}

static double hbm_rate(const cluster_spec *c)
{
    return c->gpu.hbm_bw_bytes_per_s * c->compute.hbm_efficiency;
}

double compute_gemm_s(const cluster_spec *c, double m, double n, double k, gemm_dtype dt)
{
    if (m <= 0 || n <= 0 || k <= 0)
        return 0.0;
    double elem_bytes;
    double rate = gemm_rate(c, dt, &elem_bytes);
    double flops = 2.0 * m * n * k;
    /* Operands at the GEMM width, output in bf16. */
    double bytes = elem_bytes * (m * k + k * n) + 2.0 * m * n;
    return fmax(flops / rate, bytes / hbm_rate(c)) + c->compute.kernel_overhead_s;
}

double compute_attention_s(const cluster_spec *c, double flops, double bytes, bool backward)
{
    if (flops <= 0)
        return 0.0;
    double eff = backward ? c->compute.attention_bwd_efficiency : c->compute.attention_fwd_efficiency;
    double rate = c->gpu.peak_bf16_flops_per_s * eff;
    return fmax(flops / rate, bytes / hbm_rate(c)) + c->compute.kernel_overhead_s;
}

double compute_memory_s(const cluster_spec *c, double bytes)
{
    if (bytes <= 0)
        return 0.0;
    return bytes / hbm_rate(c) + c->compute.kernel_overhead_s;
}
