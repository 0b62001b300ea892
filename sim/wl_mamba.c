/* wl_mamba: the Mamba-2 mixer's passes (wl_build.h).
 *
 * Megatron's MambaMixer: norm, in_proj (column-parallel), depthwise conv1d
 * over x, B, C, the chunked SSD scan, the gated RMSNorm and out_proj
 * (row-parallel); heads and groups split over TP.  With CP the conv, scan
 * and norm run head-parallel on the whole sequence, between all-to-alls
 * over the CP group (mamba_context_parallel.py).
 */
#include "wl_build.h"

/* ---- Mamba-2 mixer ---------------------------------------------------- */

/* The mixer's core (conv1d, SSD scan, gated norm) on this rank.  Without
 * CP: the microbatch's tokens here, H/t heads, G/t groups.  With CP: the
 * whole sequence, H/(t cp) heads and r G/(t cp) groups, r the
 * group_repeat_count (groups of a TP rank repeated when fewer than CP).
 * Tokens x widths per rank are then those of CP 1 but for r. */
typedef struct mamba_core {
    double T;    /* tokens the core runs on */
    double H, G; /* heads and groups on this rank */
    double d_l;  /* d_inner on this rank */
    double conv; /* the conv's channels: x, B, C */
} mamba_core;

static mamba_core core_shape(const ctx *x)
{
    const model_spec *m = x->m;
    double cp = (double)x->s->cp, r = (double)strategy_mamba_group_repeat(m, x->s->tp, x->s->cp);
    double split = x->t * cp;
    mamba_core k;
    k.T = x->T * cp;
    k.H = (double)m->mamba_num_heads / split;
    k.G = r * (double)m->mamba_num_groups / split;
    k.d_l = model_mamba_d_inner(m) / split;
    k.conv = k.d_l + 2.0 * r * (double)m->mamba_num_groups * (double)m->mamba_state_dim / split;
    return k;
}

/* The chunked SSD scan of one microbatch on this rank: H heads of P, G
 * groups of state N, chunk Q (mamba_core).  Flops [D] from the SSD kernels:
 * chunk_scan T H P (Q + 2N) (the tilelang formula, kernels.md §5),
 * chunk_state 2 T H P N, the C^T B products T Q G N; state passing is
 * small.  Bytes: x, B, C, dt in and y out, bf16. */
static void ssd_scan(const ctx *x, wl_opbuf *b, const mamba_core *k, bool bwd)
{
    const model_spec *m = x->m;
    double P = (double)m->mamba_head_dim, N = (double)m->mamba_state_dim;
    double Q = (double)m->mamba_chunk_size;
    double flops = k->T * (k->H * P * (Q + 4.0 * N) + Q * k->G * N);
    double bytes = 2.0 * k->T * (2.0 * k->H * P + 2.0 * k->G * N + k->H);
    b->flops += bwd ? 2.0 * flops : flops;
    int32_t i = then(b, bwd ? "mamba_ssd_scan_bwd" : "mamba_ssd_scan", STREAM_COMPUTE,
                     compute_ssd_s(x->c, flops, bytes, bwd));
    /* one op on the GPU, several Triton kernels for the host to launch */
    set_launches(b, i, (double)(bwd ? x->c->host.ssd_launches_bwd : x->c->host.ssd_launches_fwd));
}

/* CP, into the core (forward) or out of it (backward): z, x, B, C and dt
 * each go from sequence- to head-sharded by an all-to-all over the CP
 * group (pre_conv_ssm, mamba_context_parallel.py:140-199), bf16, on this
 * rank's tokens at its TP widths: d_in/t, d_in/t, r G N/t, r G N/t, H/t
 * (net counts the (cp-1)/cp that leaves).  Beside them the copy that
 * concatenates them and undoes attention's load-balancing order, and with
 * r > 1 the repeat of B and C (backward: the sum over the repeats), each
 * one read and one write of its tensor [assumed]. */
static void cp_zxbcdt(const ctx *x, wl_opbuf *b, bool bwd)
{
    const model_spec *m = x->m;
    if (x->s->cp <= 1)
        return;
    double r = (double)strategy_mamba_group_repeat(m, x->s->tp, x->s->cp);
    double d = model_mamba_d_inner(m) / x->t, gn = (double)m->mamba_num_groups * (double)m->mamba_state_dim / x->t;
    double H = (double)m->mamba_num_heads / x->t;
    const double width[5] = {d, d, r * gn, r * gn, H};
    double repeat = r > 1 ? 2.0 * x->T * 2.0 * gn * (1.0 + r) : 0.0;
    double copy = mem(x, 4.0 * x->T * (2.0 * d + 2.0 * r * gn + H) + repeat);
    if (bwd)
        then(b, "mamba_cp_permute", STREAM_COMPUTE, copy);
    if (has(x, GROUP_CP))
        for (int i = 0; i < 5; i++)
            then(b, "mamba_cp_a2a", STREAM_CP, coll(x, GROUP_CP, COLL_ALL_TO_ALL, 2.0 * x->T * width[i]));
    if (!bwd)
        then(b, "mamba_cp_permute", STREAM_COMPUTE, copy);
}

/* CP, y out of the core (forward) or its gradient into it (backward):
 * one all-to-all back to sequence-sharded (post_conv_ssm) and the copy
 * that restores the load-balancing order. */
static void cp_y(const ctx *x, wl_opbuf *b, bool bwd)
{
    if (x->s->cp <= 1)
        return;
    double d = model_mamba_d_inner(x->m) / x->t;
    if (!bwd)
        then(b, "mamba_cp_permute", STREAM_COMPUTE, mem(x, 4.0 * x->T * d));
    if (has(x, GROUP_CP))
        then(b, "mamba_cp_a2a", STREAM_CP, coll(x, GROUP_CP, COLL_ALL_TO_ALL, 2.0 * x->T * d));
    if (bwd)
        then(b, "mamba_cp_permute", STREAM_COMPUTE, mem(x, 4.0 * x->T * d));
}

/* megatron/core/ssm/mamba_mixer.py: norm, in_proj (column-parallel, the SP
 * all-gather before it), depthwise conv1d over x, B, C (kernel 4), the SSD
 * scan, the gated RMSNorm, out_proj (row-parallel, the SP reduce-scatter
 * after it); the host issues it as one module of its own (CUDA graph scope
 * mamba, framework_ops.mamba).  The fused path (use_mamba_mem_eff_path)
 * and the unfused one run the same kernels forward. */
void mamba_fwd(const ctx *x, wl_opbuf *b)
{
    const model_spec *m = x->m;
    mamba_core k = core_shape(x);
    module(b, WL_SCOPE_MAMBA, false, host_ops(x, HOST_OPS_MAMBA, false));
    then(b, "mamba_norm", STREAM_COMPUTE, mem(x, 4.0 * x->T_sp * x->h));
    column_fwd(x, b, "mamba_in_proj", x->T, model_mamba_in_proj_width(m) / x->t, x->h, 0);
    cp_zxbcdt(x, b, false);
    then(b, "mamba_conv1d", STREAM_COMPUTE, mem(x, 4.0 * k.T * k.conv));
    ssd_scan(x, b, &k, false);
    then(b, "mamba_gated_norm", STREAM_COMPUTE, mem(x, 6.0 * k.T * k.d_l));
    cp_y(x, b, false);
    row_fwd(x, b, "mamba_out_proj", x->T, x->h, model_mamba_d_inner(m) / x->t, 0);
    then(b, "bias_dropout_add", STREAM_COMPUTE, mem(x, 7.0 * x->T_sp * x->h));
}

/* The backward mirrors it; the fused kernel recomputes the conv output
 * and the chunk states (megatron-features.md B.5), counted in the conv and
 * scan backward (twice the forward).  The unfused path keeps the conv
 * output (memory.c), so its conv backward is the fused one less that
 * recompute, one forward's bytes [assumed]; its scan recomputes the chunk
 * states all the same. */
void mamba_bwd(const ctx *x, wl_opbuf *b)
{
    const model_spec *m = x->m;
    mamba_core k = core_shape(x);
    double d_l = model_mamba_d_inner(m) / x->t;
    module(b, WL_SCOPE_MAMBA, false, host_ops(x, HOST_OPS_MAMBA, true));
    then(b, "bias_dropout_add_bwd", STREAM_COMPUTE, mem(x, 5.0 * x->T_sp * x->h));
    row_bwd(x, b, "mamba_out_proj_dgrad", "mamba_out_proj_wgrad", x->T, x->h, d_l, 0);
    cp_y(x, b, true);
    then(b, "mamba_gated_norm_bwd", STREAM_COMPUTE, mem(x, 10.0 * k.T * k.d_l));
    ssd_scan(x, b, &k, true);
    /* the fused path launches the conv's recompute and its backward */
    int32_t conv = then(b, "mamba_conv1d_bwd", STREAM_COMPUTE, mem(x, (m->mamba_mem_eff_path ? 8.0 : 4.0) * k.T * k.conv));
    set_launches(b, conv, m->mamba_mem_eff_path ? 2.0 : 1.0);
    cp_zxbcdt(x, b, true);
    column_bwd(x, b, "mamba_in_proj_dgrad", "mamba_in_proj_wgrad", x->T, model_mamba_in_proj_width(m) / x->t,
               x->h, 0);
    then(b, "mamba_norm_bwd", STREAM_COMPUTE, mem(x, 8.0 * x->T_sp * x->h));
}
