#include "compute.h"

#include <math.h>

#include "kerneltable.h"
#include "microbench.h"

gemm_dtype compute_gemm_dtype(precision_kind p)
{
    return (gemm_dtype)kerneltable_precision(p);
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

/* Analytic model: peak x the configured efficiency for a GEMM dtype; a GPU
 * without fp8 (fp4) units runs them at the next wider width, as Transformer
 * Engine falls back.  0 where the efficiency is not set (the kernel table
 * is in charge). */
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

static double elem_bytes_of(gemm_dtype dt)
{
    return dt == GEMM_BF16 ? 2.0 : dt == GEMM_FP4 ? 0.5 : 1.0;
}

static double peak_of(const gpu_spec *g, gemm_dtype dt)
{
    if (dt == GEMM_BF16)
        return g->peak_bf16_flops_per_s;
    return dt == GEMM_FP4 ? g->peak_fp4_flops_per_s : g->peak_fp8_flops_per_s;
}

/* The rate from the published table: the nearest published shape's rate,
 * lowered by the tile, wave and prologue effects this shape has beyond that
 * one (shape_util's ratio, capped at 1: the published figure is the ceiling
 * near its shape).  A sweep's best shape (MAMF) counts as free of tile and
 * wave loss, so shapes near it sit below it by their own loss (kernels.md
 * §7.1: training shapes 10-35% below MAMF). */
static bool table_rate(const cluster_spec *c, gemm_dtype dt, double groups, double m, double n, double k,
                       double *rate, double *elem_bytes)
{
    kt_precision used;
    unsigned avail = 0;
    for (int p = 0; p < KT_PRECISIONS; p++)
        avail |= peak_of(&c->gpu, (gemm_dtype)p) > 0 ? 1u << p : 0u;
    const kt_gemm *g = kerneltable_gemm(&c->compute.kernels, (kt_precision)dt, avail, groups, m, n, k, &used);
    if (!g)
        return false;
    double ref = g->best_shape ? 1.0 : shape_util(c, g->groups, g->m, g->n, g->k);
    double r = g->flops_per_s * (ref > 0 ? fmin(1.0, shape_util(c, groups, m, n, k) / ref) : 1.0);
    *rate = fmin(r, peak_of(&c->gpu, (gemm_dtype)used)) * c->compute.sustained_fraction;
    *elem_bytes = elem_bytes_of((gemm_dtype)used);
    return true;
}

double compute_grouped_gemm_s(const cluster_spec *c, double groups, double m, double n, double k, gemm_dtype dt)
{
    if (groups <= 0 || m <= 0 || n <= 0 || k <= 0)
        return 0.0;
    double elem_bytes, rate;
    if (!measured_rate(c, dt, m, n, k, &rate, &elem_bytes)) {
        rate = gemm_rate(c, dt, &elem_bytes) * shape_util(c, groups, m, n, k);
        if (!(rate > 0) && !table_rate(c, dt, groups, m, n, k, &rate, &elem_bytes))
            return 0.0; /* unreachable: config requires a table or the efficiencies */
    }
    double flops = 2.0 * groups * m * n * k;
    /* Operands at the GEMM width, output in bf16. */
    double bytes = groups * (elem_bytes * (m * k + k * n) + 2.0 * m * n);
    return fmax(flops / rate, bytes / hbm_rate(c)) + c->compute.kernel_overhead_s;
}

double compute_gemm_s(const cluster_spec *c, double m, double n, double k, gemm_dtype dt)
{
    return compute_grouped_gemm_s(c, 1.0, m, n, k, dt);
}

kt_family compute_attention_family(const cluster_spec *c, attention_backend_kind backend, bool sinks)
{
    return kerneltable_family(&c->compute.kernels, backend, sinks);
}

/* Analytic attention efficiency: one plateau for every family, scaled by
 * key length and head dimension; 0 where the plateau is not set. */
static double analytic_attention_eff(const compute_params *p, double kv_tokens, double head_dim, bool backward)
{
    double eff = backward ? p->attention_bwd_efficiency : p->attention_fwd_efficiency;
    double half = p->attention_seq_half_tokens;
    if (half > 0 && kv_tokens > 0)
        eff *= kv_tokens / (kv_tokens + half);
    double dh = p->attention_head_dim_half;
    if (dh > 0 && head_dim > 0)
        eff *= fmin(1.0, (head_dim / (head_dim + dh)) / (128.0 / (128.0 + dh)));
    return eff;
}

double compute_attention_s(const cluster_spec *c, const compute_attn *a, double flops, double bytes,
                           double kv_tokens, bool backward)
{
    if (flops <= 0)
        return 0.0;
    double eff, rate = 0.0;
    if (microbench_attention_efficiency(&c->compute.bench, backward, kv_tokens, a->head_dim, &eff) ||
        (eff = analytic_attention_eff(&c->compute, kv_tokens, a->head_dim, backward)) > 0) {
        rate = c->gpu.peak_bf16_flops_per_s * eff;
    } else {
        /* windowed curves are published against the sequence length */
        double x = a->window > 0 && a->seq > 0 ? a->seq : kv_tokens;
        rate = kerneltable_attention_rate(&c->compute.kernels, a->family, backward, a->causal, a->window,
                                          a->head_dim, x);
    }
    if (!(rate > 0))
        return 0.0; /* unreachable: config requires a table or the efficiencies */
    rate = fmin(rate, c->gpu.peak_bf16_flops_per_s) * c->compute.sustained_fraction;
    return fmax(flops / rate, bytes / hbm_rate(c)) + c->compute.kernel_overhead_s;
}

bool compute_flex_s(const cluster_spec *c, kt_flex_backend backend, bool combine, double ranks, double domains,
                    double sms, double bytes, double *seconds)
{
    const kernel_table *t = &c->compute.kernels;
    double d_nvl, c_nvl, d_net = 0, c_net = 0;
    double per_domain = domains > 1 ? ranks / domains : ranks;
    if (!kerneltable_flex_rate(t, backend, false, per_domain, sms, &d_nvl, &c_nvl))
        return false;
    if (domains > 1 && !kerneltable_flex_rate(t, backend, true, ranks, sms, &d_net, &c_net))
        return false;
    double nvl = combine ? c_nvl : d_nvl, net = combine ? c_net : d_net;
    double t_s = domains > 1 ? fmax(bytes * (1.0 - 1.0 / domains) / net, bytes / domains / nvl) : bytes / nvl;
    *seconds = t_s + c->compute.kernel_overhead_s;
    return true;
}

double compute_ssd_s(const cluster_spec *c, double flops, double bytes, bool backward)
{
    if (flops <= 0)
        return 0.0;
    /* config refuses Mamba layers on a topology whose kernel table has no ssd entry */
    double rate = c->gpu.peak_bf16_flops_per_s * c->compute.kernels.ssd_efficiency * c->compute.sustained_fraction;
    double f = backward ? 2.0 * flops : flops;
    return fmax(f / rate, (backward ? 2.0 : 1.0) * bytes / hbm_rate(c)) + c->compute.kernel_overhead_s;
}

double compute_memory_s(const cluster_spec *c, double bytes)
{
    if (bytes <= 0)
        return 0.0;
    return bytes / hbm_rate(c) + c->compute.kernel_overhead_s;
}
