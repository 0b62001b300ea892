#include "compute.h"

#include <math.h>

#include "microbench.h"

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

/* Bytes moved per element to quantize a bf16 GEMM operand under a
 * Transformer Engine recipe: read 2 B, write the low-precision copy in the
 * row-wise and the column-wise (transposed) layout that forward and
 * backward GEMMs need; current scaling (and NVFP4's per-tensor amax)
 * reads the tensor once more for its amax.  Block scales (MXFP8: one per
 * 32 elements, blockwise: per 128) add under 4%.  Format facts, not fitted. */
double compute_cast_bytes_per_element(precision_kind p)
{
    switch (p) {
    case PREC_BF16:
    case PREC_FP16:
        return 0.0;
    case PREC_FP8_DELAYED:
        return 2.0 + 1.0 + 1.0;
    case PREC_FP8_CS:
        return 2.0 + 2.0 + 1.0 + 1.0;
    case PREC_MXFP8:
        return 2.0 + 1.0 + 1.0 + 2.0 / 32.0;
    case PREC_FP8_BLOCKWISE:
        return 2.0 + 1.0 + 1.0 + 8.0 / 128.0;
    case PREC_NVFP4:
        return 2.0 + 2.0 + 0.5 + 0.5 + 2.0 / 16.0;
    }
    return 0.0;
}

/* Peak and achievable fraction for a GEMM dtype; a GPU without fp8 (fp4)
 * units runs them at the next wider width, as Transformer Engine falls back. */
static double gemm_rate(const cluster_spec *c, gemm_dtype dt, double *elem_bytes)
{
    const gpu_spec *g = &c->gpu;
    const compute_params *p = &c->compute;
    if (dt == GEMM_FP4 && g->peak_fp4_flops_per_s > 0) {
        *elem_bytes = 0.5;
        return g->peak_fp4_flops_per_s * p->gemm_fp8_efficiency * p->sustained_fraction;
    }
    if (dt != GEMM_BF16 && g->peak_fp8_flops_per_s > 0) {
        *elem_bytes = 1.0;
        return g->peak_fp8_flops_per_s * p->gemm_fp8_efficiency * p->sustained_fraction;
    }
    *elem_bytes = 2.0;
    return g->peak_bf16_flops_per_s * p->gemm_efficiency * p->sustained_fraction;
}

static double hbm_rate(const cluster_spec *c)
{
    if (c->compute.bench.hbm_bytes_per_s > 0)
        return c->compute.bench.hbm_bytes_per_s;
    return c->gpu.hbm_bw_bytes_per_s * c->compute.hbm_efficiency;
}

/* Share of the large-GEMM rate a shape reaches (NVIDIA's "Matrix
 * Multiplication Background" guide): output tiles padded to whole tiles,
 * tiles run in waves of one per SM so a partial last wave idles SMs, and
 * each tile pays a prologue/epilogue worth gemm_k_overhead of K depth.
 * `groups` GEMMs of the same shape in one launch (grouped expert GEMMs)
 * share the waves. */
static double shape_util(const cluster_spec *c, double groups, double m, double n, double k)
{
    const compute_params *p = &c->compute;
    double util = 1.0;
    if (p->gemm_k_overhead > 0)
        util *= k / (k + p->gemm_k_overhead);
    double sms = (double)c->gpu.sm_count;
    if (p->gemm_tile_m > 0 && p->gemm_tile_n > 0 && sms > 0) {
        double tiles = groups * ceil(m / p->gemm_tile_m) * ceil(n / p->gemm_tile_n);
        double waves = ceil(tiles / sms);
        util *= groups * m * n / (waves * sms * p->gemm_tile_m * p->gemm_tile_n);
    }
    return util;
}

/* The rate of one GEMM from a measured table, when it has the dtype: the
 * nearest measured shape's efficiency against the dtype's peak (its shape
 * effects are in the measurement).  Grouped GEMMs count as `groups`
 * separate launches of the shape, which is what was measured. */
static bool measured_rate(const cluster_spec *c, gemm_dtype dt, double m, double n, double k, double *rate,
                          double *elem_bytes)
{
    const gpu_spec *g = &c->gpu;
    bool fp8 = dt != GEMM_BF16 && g->peak_fp8_flops_per_s > 0;
    if (dt == GEMM_FP4 && g->peak_fp4_flops_per_s > 0)
        return false; /* no fp4 table: the analytic model */
    double eff;
    if (!microbench_gemm_efficiency(&c->compute.bench, fp8 ? 1 : 0, m, n, k, &eff))
        return false;
    *elem_bytes = fp8 ? 1.0 : 2.0;
    *rate = (fp8 ? g->peak_fp8_flops_per_s : g->peak_bf16_flops_per_s) * eff * c->compute.sustained_fraction;
    return true;
}

double compute_grouped_gemm_s(const cluster_spec *c, double groups, double m, double n, double k, gemm_dtype dt)
{
    if (groups <= 0 || m <= 0 || n <= 0 || k <= 0)
        return 0.0;
    double elem_bytes, rate;
    if (!measured_rate(c, dt, m, n, k, &rate, &elem_bytes))
        rate = gemm_rate(c, dt, &elem_bytes) * shape_util(c, groups, m, n, k);
    double flops = 2.0 * groups * m * n * k;
    /* Operands at the GEMM width, output in bf16. */
    double bytes = groups * (elem_bytes * (m * k + k * n) + 2.0 * m * n);
    return fmax(flops / rate, bytes / hbm_rate(c)) + c->compute.kernel_overhead_s;
}

double compute_gemm_s(const cluster_spec *c, double m, double n, double k, gemm_dtype dt)
{
    return compute_grouped_gemm_s(c, 1.0, m, n, k, dt);
}

double compute_attention_s(const cluster_spec *c, double flops, double bytes, double kv_tokens, double head_dim,
                           bool backward)
{
    if (flops <= 0)
        return 0.0;
    double eff;
    if (!microbench_attention_efficiency(&c->compute.bench, backward, kv_tokens, head_dim, &eff)) {
        eff = backward ? c->compute.attention_bwd_efficiency : c->compute.attention_fwd_efficiency;
        double half = c->compute.attention_seq_half_tokens;
        if (half > 0 && kv_tokens > 0)
            eff *= kv_tokens / (kv_tokens + half);
        double dh = c->compute.attention_head_dim_half;
        if (dh > 0 && head_dim > 0)
            eff *= fmin(1.0, (head_dim / (head_dim + dh)) / (128.0 / (128.0 + dh)));
    }
    double rate = c->gpu.peak_bf16_flops_per_s * eff * c->compute.sustained_fraction;
    return fmax(flops / rate, bytes / hbm_rate(c)) + c->compute.kernel_overhead_s;
}

double compute_memory_s(const cluster_spec *c, double bytes)
{
    if (bytes <= 0)
        return 0.0;
    return bytes / hbm_rate(c) + c->compute.kernel_overhead_s;
}
