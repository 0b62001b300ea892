/* wl_mlp: the MLP's passes, dense and MoE (wl_build.h).
 *
 * Dense MLP as two TP linears around the activation; MoE as the router,
 * the shared experts (or, overlapped, beside the exchange), permute, the EP exchange (all-to-all, allgather
 * dispatcher or the flex dispatcher's kernels), ETP gather, the grouped
 * expert GEMMs and their way back.
 */
#include "wl_build.h"

#include <math.h>

/* ---- MLP ------------------------------------------------------------- */

/* A dense MLP in two halves: fc1 with the activation, and fc2 (the
 * shared experts run them apart when overlapped with the EP exchange). */
static void dense_fc1_fwd(const ctx *x, wl_opbuf *b, double F, const char *pfx_fc1, const char *pfx_act)
{
    double glu = x->m->gated_linear_unit ? 2.0 : 1.0;
    column_fwd(x, b, pfx_fc1, x->T, F * glu / x->t, x->h, LORA_FC1);
    then(b, pfx_act, STREAM_COMPUTE, mem(x, 2.0 * x->T * F * (glu + 1.0) / x->t));
}

static void dense_fc2_fwd(const ctx *x, wl_opbuf *b, double F, const char *pfx_fc2)
{
    row_fwd(x, b, pfx_fc2, x->T, x->h, F / x->t, LORA_FC2);
}

static void dense_mlp_fwd(const ctx *x, wl_opbuf *b, double F, const char *pfx_fc1,
                          const char *pfx_act, const char *pfx_fc2)
{
    dense_fc1_fwd(x, b, F, pfx_fc1, pfx_act);
    dense_fc2_fwd(x, b, F, pfx_fc2);
}

static void dense_fc2_bwd(const ctx *x, wl_opbuf *b, double F)
{
    row_bwd(x, b, "fc2_dgrad", "fc2_wgrad", x->T, x->h, F / x->t, LORA_FC2);
}

static void dense_fc1_bwd(const ctx *x, wl_opbuf *b, double F)
{
    double glu = x->m->gated_linear_unit ? 2.0 : 1.0;
    then(b, "act_bwd", STREAM_COMPUTE, mem(x, 2.0 * x->T * F * (2.0 * glu + 1.0) / x->t));
    column_bwd(x, b, "fc1_dgrad", "fc1_wgrad", x->T, F * glu / x->t, x->h, LORA_FC1);
}

static void dense_mlp_bwd(const ctx *x, wl_opbuf *b, double F)
{
    dense_fc2_bwd(x, b, F);
    dense_fc1_bwd(x, b, F);
}

/* Shared experts beside the EP exchange (model.moe_shared_expert_overlap):
 * Megatron's SharedExpertMLP runs on a side stream, called by the alltoall
 * / flex dispatcher right after it starts an exchange: fc1 and the
 * activation beside the dispatch, fc2 beside the combine (forward).  The
 * backward replays each op on its forward's stream (PyTorch autograd), so
 * fc2's backward runs beside the combine's and the activation's and fc1's
 * beside the dispatch's [assumed: the autograd engine issues them before
 * the exchange they sit beside, as they come later in the forward].
 * Without an EP exchange there is nothing to overlap. */
bool shared_overlapped(const ctx *x)
{
    const strategy_t *s = x->s;
    return s->par.moe_shared_expert_overlap && x->m->moe_shared_expert_intermediate_size > 0 &&
           s->par.moe_token_dispatcher != MOE_DISPATCHER_ALLGATHER && has(x, GROUP_EP);
}

/* The ops [from, n) were emitted after the exchange `ex` and run beside it:
 * those that waited for the exchange wait for what it waited for instead,
 * and the next op waits for both (a join).  The compute stream still runs
 * them in order, so the routed experts start after the shared part. */
static void beside(wl_opbuf *b, int32_t ex, int32_t from)
{
    if (b->oom || from >= b->n || ex < 0)
        return;
    int32_t before = b->ops[ex].dep_back[0] ? ex - b->ops[ex].dep_back[0] : WL_NONE;
    for (int32_t i = from; i < b->n; i++) {
        int32_t *d = b->ops[i].dep_back;
        for (int j = 0; j < 2; j++)
            if (d[j] && i - d[j] == ex)
                d[j] = before != WL_NONE ? i - before : 0;
        if (d[1] == d[0] || !d[0]) {
            d[0] = d[0] ? d[0] : d[1];
            d[1] = 0;
        }
    }
    join(b, b->n - 1, ex);
}

/* One EP exchange of the routed rows: the flex dispatcher's kernels at the
 * kernel table's rates where it has them (paced by the placement that
 * spans the most domains; HybridEP's at its SM count), else an all-to-all. */
static double ep_a2a_s(const ctx *x, bool combine, double bytes)
{
    const strategy_t *s = x->s;
    kt_flex_backend be = (kt_flex_backend)s->par.moe_flex_backend;
    double t, sms = be == KT_HYBRIDEP ? (double)s->par.moe_hybridep_num_sms : 0.0;
    if (s->par.moe_token_dispatcher == MOE_DISPATCHER_FLEX &&
        compute_flex_s(x->c, be, combine, (double)s->ep,
                       (double)s->places[GROUP_EP].span[s->places[GROUP_EP].worst].domains, sms, bytes, &t))
        return t;
    return coll(x, GROUP_EP, COLL_ALL_TO_ALL, bytes);
}

/* The grouped expert GEMMs of Transformer Engine's GroupedLinear loop
 * cuBLAS over the local experts on several streams ("multi-stream cuBLAS
 * (TE)", kernels.md §1.3): one launch per expert, when
 * cluster.host.grouped_gemm_per_expert; the quantize of their inputs
 * likewise with grouped_quantize_per_expert. */
static void expert_gemm(const ctx *x, wl_opbuf *b, const char *name, double seconds)
{
    int32_t i = then(b, name, STREAM_COMPUTE, seconds);
    if (x->c->host.grouped_gemm_per_expert)
        set_launches(b, i, local_experts(x));
}

static void expert_cast(const ctx *x, wl_opbuf *b, double elements)
{
    int32_t n = b->n;
    cast(x, b, elements);
    if (b->n > n && x->c->host.grouped_quantize_per_expert)
        set_launches(b, b->n - 1, local_experts(x));
}

/* A sort of the routed rows between the exchange and the experts (moe_fwd):
 * one copy kernel of `bytes`, whose launches framework_ops.moe_experts
 * counts. */
static void sort_chunks(const ctx *x, wl_opbuf *b, bool on, const char *name, double bytes)
{
    if (!on)
        return;
    int32_t i = then(b, name, STREAM_COMPUTE, mem(x, bytes));
    if (!b->oom)
        b->ops[i].launches = 0;
}

/* The router's elementwise work on this rank's T_sp x E fp32 logits
 * (Megatron's TopKRouter, unfused): the score function (softmax or
 * sigmoid: read the logits, write the scores), with an expert bias the
 * biased selection scores (read, write), the top-k (read), then over the
 * T_sp x k chosen weights (fp32 weight and int64 index) sigmoid's
 * normalisation and the scaling factor.  Backward: the score function's
 * gradient (read scores and gradient, write the logits' gradient). */
static double router_score_bytes(const ctx *x, bool bwd)
{
    const model_spec *m = x->m;
    double logits = x->T_sp * (double)m->num_moe_experts * 4.0;
    if (bwd)
        return 3.0 * logits;
    double chosen = x->T_sp * (double)m->moe_router_topk * 12.0;
    double passes = 1.0 + (m->moe_router_score_function == MODEL_ROUTER_SIGMOID ? 1.0 : 0.0) +
                    (m->moe_router_topk_scaling_factor > 0 ? 1.0 : 0.0);
    return logits * (3.0 + (m->moe_router_enable_expert_bias ? 2.0 : 0.0)) + chosen * passes;
}

/* Routed experts with the all-to-all dispatcher: tokens of this rank times
 * top-k leave through the EP all-to-all, are gathered over ETP, run
 * through this rank's experts (grouped GEMMs) and come back.  Latent MoE
 * (moe_latent_size l): a down projection h -> l on this rank's tokens
 * before the permute and an up projection l -> h after the unpermute,
 * replicated over TP (their weights are in the replicated part of
 * megatron-formulas.md §2.2); everything between moves and multiplies
 * l-wide rows [assumed: the reference gives the parameter and FLOP terms,
 * not the dispatch width; Megatron projects before dispatch]. */
static void moe_fwd(const ctx *x, wl_opbuf *b, bool bwd)
{
    const model_spec *m = x->m;
    const strategy_t *s = x->s;
    double glu = m->gated_linear_unit ? 2.0 : 1.0;
    double k = (double)m->moe_router_topk;
    double lat = (double)m->moe_latent_size;
    double w = lat > 0 ? lat : x->h;           /* width of the routed rows */
    double etp = (double)s->etp;
    double sent = x->T_sp * k;                 /* rows this rank dispatches */
    /* Balanced routing fills each expert to its share; a capacity factor c
     * drops what is beyond c shares, and padding fills every expert to c. */
    double cf = s->par.moe_capacity_factor;
    if (cf > 0)
        sent *= s->par.moe_pad_to_capacity ? cf : fmin(cf, 1.0);
    double rows = sent * etp;                  /* rows its experts process */
    double Fe = (double)model_moe_ffn(m) / etp;
    /* Experts on this rank, each fed rows / E_loc rows (balanced routing). */
    double E_loc = local_experts(x);
    double a2a_bytes = sent * w * 2.0;
    /* The allgather dispatcher gathers every token of the ETP x EP group
     * (hidden states and routing) and reduce-scatters the results back;
     * alltoall (and flex, DeepEP's fused form) move only the routed rows. */
    bool allgather = s->par.moe_token_dispatcher == MOE_DISPATCHER_ALLGATHER && s->ep * s->etp > 1;
    double ag_bytes = x->T_sp * w * 2.0 * (double)(s->ep * s->etp);
    const char *gather = allgather ? "ep_allgather" : "ep_dispatch";
    const char *scatter = allgather ? "ep_reduce_scatter" : "ep_combine";
    /* Both directions of one exchange: (all-to-all, or the allgather
     * dispatcher's all-gather / reduce-scatter). */
#define EP_EXCHANGE(name, coll_a2a, coll_ag)                                                                 \
    do {                                                                                                     \
        if (allgather && !x->ideal)                                                                          \
            then(b, name, STREAM_EP, net_collective_worst_s(x->c, &x->tp_ep_places, coll_ag, ag_bytes));                     \
        else if (!allgather && has(x, GROUP_EP))                                                             \
            then(b, name, STREAM_EP, ep_a2a_s(x, coll_ag == COLL_REDUCE_SCATTER, a2a_bytes));               \
    } while (0)
    bool etp_comm = !allgather && has(x, GROUP_ETP);
    /* The alltoall dispatcher's small collectives beside the token
     * exchanges (megatron-formulas.md §4.3): dropless, the preprocess
     * all-gathers every rank's tokens per expert (E int64) over ETP x EP
     * before the D2H copy of the split sizes, which the sync waits for; it
     * is synchronous, so the compute stream waits for it (and the EP
     * stream's ops stay the exchanges that delimit a layer's nodes); its
     * launch is one of framework_ops.moe_preprocess.  The dispatch sends
     * the routing probabilities by an all-to-all of their own (T_sp k of
     * them, fp32 [assumed: the router's dtype]), and the backward returns
     * their gradient the same way.  The flex dispatcher fuses both into
     * its kernels. */
    bool a2a = s->par.moe_token_dispatcher == MOE_DISPATCHER_ALLTOALL && has(x, GROUP_EP);
    bool counts = a2a && !s->par.moe_pad_to_capacity;
    /* Its dispatch postprocess sorts the received rows, grouped by source
     * rank, into local-expert order, and the combine preprocess sorts them
     * back (sort_chunk when num_local_experts > 1, §4.3; with drop-and-pad
     * a transpose and contiguous copy): each a read and a write of the rows,
     * the probabilities with the first; the backward sorts the gradients the
     * same two ways. */
    bool sorts = s->par.moe_token_dispatcher == MOE_DISPATCHER_ALLTOALL && local_experts(x) > 1;
    double count_bytes = (double)m->num_moe_experts * 8.0 * (double)(s->ep * s->etp);
    /* The shared experts' half beside the exchange just emitted. */
    double Fsh = (double)m->moe_shared_expert_intermediate_size;
    bool shared = shared_overlapped(x);
#define SHARED_BESIDE(emit)                                                                                  \
    do {                                                                                                     \
        if (shared) {                                                                                        \
            int32_t ex_ = b->n - 1, from_ = b->n;                                                            \
            emit;                                                                                            \
            beside(b, ex_, from_);                                                                           \
        }                                                                                                    \
    } while (0)
    /* flex (DeepEP): a token crosses to another NVLink domain once per
     * domain it is routed to, then fans out over NVLink, instead of once per
     * expert.  With uniform routing of k experts over D domains it reaches
     * D(1 - (1 - 1/D)^k) of them, and at most moe_router_group_topk under
     * group-limited routing; the all-to-all's bytes shrink by that over k. */
    if (s->par.moe_token_dispatcher == MOE_DISPATCHER_FLEX && !s->groups[GROUP_EP].in_nvlink_domain) {
        double D = (double)s->groups[GROUP_EP].domains;
        double reach = D * (1.0 - pow(1.0 - 1.0 / D, k));
        if (m->moe_router_group_topk > 0 && (double)m->moe_router_group_topk < reach)
            reach = (double)m->moe_router_group_topk;
        if (reach < k)
            a2a_bytes *= reach / k;
    }
    if (!bwd) {
        then(b, "router", STREAM_COMPUTE, gemm(x, b, x->T_sp, (double)m->num_moe_experts, x->h));
        then(b, "router_score", STREAM_COMPUTE, mem(x, router_score_bytes(x, false)));
        module(b, WL_SCOPE_MOE_PREPROCESS, false, host_ops(x, HOST_OPS_MOE_PREPROCESS, false));
        if (counts) {
            int32_t ag = then(b, "ep_count_ag", STREAM_COMPUTE,
                              net_collective_worst_s(x->c, &x->tp_ep_places, COLL_ALL_GATHER, count_bytes));
            if (!b->oom)
                b->ops[ag].launches = 0;
        }
        if (lat > 0)
            then(b, "latent_down", STREAM_COMPUTE, gemm(x, b, x->T_sp, lat, x->h));
        then(b, "permute", STREAM_COMPUTE, mem(x, 4.0 * sent * w));
        /* Dropless: the dispatch needs the token counts on the host; padded
         * to capacity, the shapes are static and nothing waits. */
        module(b, WL_SCOPE_MOE, !s->par.moe_pad_to_capacity, moe_ops(x, false));
        /* before the tokens' exchange here: the shared experts sit beside
         * that one, and the experts wait for both either way */
        if (a2a)
            then(b, "ep_dispatch_probs", STREAM_EP, coll(x, GROUP_EP, COLL_ALL_TO_ALL, sent * 4.0));
        EP_EXCHANGE(gather, COLL_ALL_TO_ALL, COLL_ALL_GATHER);
        SHARED_BESIDE(dense_fc1_fwd(x, b, Fsh, "shared_fc1", "shared_act"));
        if (etp_comm)
            then(b, "etp_ag", STREAM_EP, coll(x, GROUP_ETP, COLL_ALL_GATHER, rows * w * 2.0));
        sort_chunks(x, b, sorts, "sort_chunks", 4.0 * rows * w + 8.0 * rows);
        expert_cast(x, b, rows * w);
        expert_gemm(x, b, "expert_fc1", ggemm(x, b, E_loc, rows / E_loc, Fe * glu, w));
        then(b, "expert_act", STREAM_COMPUTE, mem(x, 2.0 * rows * Fe * (glu + 1.0)));
        expert_cast(x, b, rows * Fe);
        expert_gemm(x, b, "expert_fc2", ggemm(x, b, E_loc, rows / E_loc, w, Fe));
        sort_chunks(x, b, sorts, "sort_chunks_back", 4.0 * rows * w);
        if (etp_comm)
            then(b, "etp_rs", STREAM_EP, coll(x, GROUP_ETP, COLL_REDUCE_SCATTER, rows * w * 2.0));
        EP_EXCHANGE(scatter, COLL_ALL_TO_ALL, COLL_REDUCE_SCATTER);
        SHARED_BESIDE(dense_fc2_fwd(x, b, Fsh, "shared_fc2"));
        then(b, "unpermute", STREAM_COMPUTE, mem(x, 4.0 * sent * w));
        if (lat > 0)
            then(b, "latent_up", STREAM_COMPUTE, gemm(x, b, x->T_sp, x->h, lat));
    } else {
        if (lat > 0) {
            then(b, "latent_up_dgrad", STREAM_COMPUTE, gemm(x, b, x->T_sp, lat, x->h));
            then(b, "latent_up_wgrad", STREAM_COMPUTE, gemm(x, b, lat, x->h, x->T_sp));
        }
        then(b, "unpermute_bwd", STREAM_COMPUTE, mem(x, 4.0 * sent * w));
        /* Backward of a reduce-scatter is an all-gather and vice versa. */
        EP_EXCHANGE(allgather ? "ep_allgather_bwd" : "ep_combine_bwd", COLL_ALL_TO_ALL, COLL_ALL_GATHER);
        SHARED_BESIDE(dense_fc2_bwd(x, b, Fsh));
        if (etp_comm)
            then(b, "etp_ag", STREAM_EP, coll(x, GROUP_ETP, COLL_ALL_GATHER, rows * w * 2.0));
        sort_chunks(x, b, sorts, "sort_chunks_back_bwd", 4.0 * rows * w);
        expert_cast(x, b, rows * w);
        expert_gemm(x, b, "expert_fc2_dgrad", ggemm(x, b, E_loc, rows / E_loc, Fe, w));
        expert_gemm(x, b, "expert_fc2_wgrad", ggemm(x, b, E_loc, Fe, w, rows / E_loc));
        then(b, "expert_act_bwd", STREAM_COMPUTE, mem(x, 2.0 * rows * Fe * (2.0 * glu + 1.0)));
        expert_cast(x, b, rows * Fe * glu);
        expert_gemm(x, b, "expert_fc1_dgrad", ggemm(x, b, E_loc, rows / E_loc, w, Fe * glu));
        expert_gemm(x, b, "expert_fc1_wgrad", ggemm(x, b, E_loc, Fe * glu, w, rows / E_loc));
        sort_chunks(x, b, sorts, "sort_chunks_bwd", 4.0 * rows * w + 8.0 * rows);
        if (etp_comm)
            then(b, "etp_rs", STREAM_EP, coll(x, GROUP_ETP, COLL_REDUCE_SCATTER, rows * w * 2.0));
        if (a2a)
            then(b, "ep_dispatch_probs_bwd", STREAM_EP, coll(x, GROUP_EP, COLL_ALL_TO_ALL, sent * 4.0));
        EP_EXCHANGE(allgather ? "ep_reduce_scatter_bwd" : "ep_dispatch_bwd", COLL_ALL_TO_ALL, COLL_REDUCE_SCATTER);
        SHARED_BESIDE(dense_fc1_bwd(x, b, Fsh));
        module(b, WL_SCOPE_MOE_PREPROCESS, false, host_ops(x, HOST_OPS_MOE_PREPROCESS, true));
        then(b, "permute_bwd", STREAM_COMPUTE, mem(x, 4.0 * sent * w));
        if (lat > 0) {
            then(b, "latent_down_dgrad", STREAM_COMPUTE, gemm(x, b, x->T_sp, x->h, lat));
            then(b, "latent_down_wgrad", STREAM_COMPUTE, gemm(x, b, x->h, lat, x->T_sp));
        }
        module(b, WL_SCOPE_MOE_ROUTER, false, router_ops(x, true));
        then(b, "router_score_bwd", STREAM_COMPUTE, mem(x, router_score_bytes(x, true)));
        then(b, "router_bwd", STREAM_COMPUTE, gemm(x, b, x->T_sp, x->h, (double)m->num_moe_experts));
        then(b, "router_wgrad", STREAM_COMPUTE, gemm(x, b, (double)m->num_moe_experts, x->h, x->T_sp));
    }
#undef EP_EXCHANGE
#undef SHARED_BESIDE
}

void mlp_fwd(const ctx *x, wl_opbuf *b, bool moe)
{
    /* the router's scope holds the shared experts */
    module(b, moe ? WL_SCOPE_MOE_ROUTER : WL_SCOPE_MLP, false,
           moe ? router_ops(x, false) : host_ops(x, HOST_OPS_MLP, false));
    then(b, "ln2", STREAM_COMPUTE, mem(x, 4.0 * x->T_sp * x->h));
    if (!moe) {
        dense_mlp_fwd(x, b, (double)x->m->ffn_hidden_size, "fc1", "act", "fc2");
    } else {
        double Fsh = (double)x->m->moe_shared_expert_intermediate_size;
        if (Fsh > 0 && !shared_overlapped(x))
            dense_mlp_fwd(x, b, Fsh, "shared_fc1", "shared_act", "shared_fc2");
        moe_fwd(x, b, false);
    }
    then(b, "bias_dropout_add", STREAM_COMPUTE, mem(x, 7.0 * x->T_sp * x->h));
}

void mlp_bwd(const ctx *x, wl_opbuf *b, bool moe, bool recompute_mlp)
{
    module(b, moe ? WL_SCOPE_MOE : WL_SCOPE_MLP, false, moe ? moe_ops(x, true) : host_ops(x, HOST_OPS_MLP, true));
    then(b, "bias_dropout_add_bwd", STREAM_COMPUTE, mem(x, 5.0 * x->T_sp * x->h));
    if (!moe) {
        double F = (double)x->m->ffn_hidden_size;
        if (recompute_mlp)
            dense_mlp_fwd(x, b, F, "fc1", "act", "fc2");
        dense_mlp_bwd(x, b, F);
    } else {
        moe_fwd(x, b, true);
        double Fsh = (double)x->m->moe_shared_expert_intermediate_size;
        if (Fsh > 0 && !shared_overlapped(x))
            dense_mlp_bwd(x, b, Fsh);
    }
    then(b, "ln2_bwd", STREAM_COMPUTE, mem(x, 8.0 * x->T_sp * x->h));
}
