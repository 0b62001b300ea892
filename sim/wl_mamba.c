/* wl_mamba: the Mamba-2 mixer's passes (wl_build.h).
 *
 * Megatron's MambaMixer: norm, in_proj (column-parallel), depthwise conv1d
 * over x, B, C, the chunked SSD scan, the gated RMSNorm and out_proj
 * (row-parallel); heads and groups split over TP.
 */
#include "wl_build.h"

/* ---- Mamba-2 mixer ---------------------------------------------------- */

/* The chunked SSD scan of one microbatch on this rank: H/t heads of P, G/t
 * groups of state N, chunk Q.  Flops [D] from the SSD kernels:
 * chunk_scan T H P (Q + 2N) (the tilelang formula, kernels.md §5),
 * chunk_state 2 T H P N, the C^T B products T Q G N; state passing is
 * small.  Bytes: x, B, C, dt in and y out, bf16. */
static void ssd_scan(const ctx *x, wl_opbuf *b, bool bwd)
{
    const model_spec *m = x->m;
    double H = (double)m->mamba_num_heads / x->t, P = (double)m->mamba_head_dim;
    double G = (double)m->mamba_num_groups / x->t, N = (double)m->mamba_state_dim;
    double Q = (double)m->mamba_chunk_size;
    double flops = x->T * (H * P * (Q + 4.0 * N) + Q * G * N);
    double bytes = 2.0 * x->T * (2.0 * H * P + 2.0 * G * N + H);
    b->flops += bwd ? 2.0 * flops : flops;
    then(b, bwd ? "ssd_scan_bwd" : "ssd_scan", STREAM_COMPUTE, compute_ssd_s(x->c, flops, bytes, bwd));
}

/* d_inner on this rank and the conv's channels x, B, C (mamba_mixer.py:321-339). */
static void mamba_widths(const ctx *x, double *d_l, double *conv)
{
    *d_l = model_mamba_d_inner(x->m) / x->t;
    *conv = *d_l + 2.0 * (double)x->m->mamba_num_groups * (double)x->m->mamba_state_dim / x->t;
}

/* megatron/core/ssm/mamba_mixer.py: norm, in_proj (column-parallel, the SP
 * all-gather before it), depthwise conv1d over x, B, C (kernel 4), the SSD
 * scan, the gated RMSNorm, out_proj (row-parallel, the SP reduce-scatter
 * after it); the host issues it as one module like attention. */
void mamba_fwd(const ctx *x, wl_opbuf *b)
{
    const model_spec *m = x->m;
    double d_l, conv;
    mamba_widths(x, &d_l, &conv);
    module(b, WL_SCOPE_ATTN, false, host_ops(x, HOST_OPS_ATTN, false));
    then(b, "mamba_norm", STREAM_COMPUTE, mem(x, 4.0 * x->T_sp * x->h));
    column_fwd(x, b, "mamba_in_proj", x->T, model_mamba_in_proj_width(m) / x->t, x->h, 0);
    then(b, "mamba_conv1d", STREAM_COMPUTE, mem(x, 4.0 * x->T * conv));
    ssd_scan(x, b, false);
    then(b, "mamba_gated_norm", STREAM_COMPUTE, mem(x, 6.0 * x->T * d_l));
    row_fwd(x, b, "mamba_out_proj", x->T, x->h, d_l, 0);
    then(b, "bias_dropout_add", STREAM_COMPUTE, mem(x, 7.0 * x->T_sp * x->h));
}

/* The backward mirrors it; the fused kernel recomputes the conv output
 * and the chunk states (megatron-features.md B.5), counted in the conv and
 * scan backward (twice the forward). */
void mamba_bwd(const ctx *x, wl_opbuf *b)
{
    const model_spec *m = x->m;
    double d_l, conv;
    mamba_widths(x, &d_l, &conv);
    module(b, WL_SCOPE_ATTN, false, host_ops(x, HOST_OPS_ATTN, true));
    then(b, "bias_dropout_add_bwd", STREAM_COMPUTE, mem(x, 5.0 * x->T_sp * x->h));
    row_bwd(x, b, "mamba_out_proj_dgrad", "mamba_out_proj_wgrad", x->T, x->h, d_l, 0);
    then(b, "mamba_gated_norm_bwd", STREAM_COMPUTE, mem(x, 10.0 * x->T * d_l));
    ssd_scan(x, b, true);
    then(b, "mamba_conv1d_bwd", STREAM_COMPUTE, mem(x, 8.0 * x->T * conv));
    column_bwd(x, b, "mamba_in_proj_dgrad", "mamba_in_proj_wgrad", x->T, model_mamba_in_proj_width(m) / x->t,
               x->h, 0);
    then(b, "mamba_norm_bwd", STREAM_COMPUTE, mem(x, 8.0 * x->T_sp * x->h));
}
