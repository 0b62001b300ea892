/* heuristics: the rules of thumb (contract and sources in heuristics.h).
 *
 * The size tables are the Megatron Bridge parallelism guide's ranges
 * reduced to one value each (the guide gives e.g. "TP 4-8, PP 2-4" for a
 * range; a starting point needs one number).  The sequence-length rules
 * are the guide's table verbatim (reference §6): "< 2K standard; 2K-8K add
 * SP; 8K-32K add CP=2; 32K+ CP=4-8, consider hierarchical CP".  Each
 * decision leaves a note saying which rule made it.
 */
#include "heuristics.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "memory.h"
#include "model.h"
#include "strategy.h"
#include "units.h"

/* Dense models by parameter count (MoE: by active parameters, TP capped). */
typedef struct size_rule {
    double below_params;  /* the rule holds for models smaller than this */
    int64_t tp, pp;
    const char *range;
} size_rule;

static const size_rule size_rules[] = {
    {1e9, 1, 1, "under 1B"},
    {13e9, 2, 1, "1-13B"},
    {40e9, 4, 2, "13-40B"},
    {180e9, 8, 4, "40-180B"},
    {600e9, 8, 8, "180-600B"},
    {INFINITY, 8, 16, "600B and up"},
};

#define MOE_TP_MAX 4          /* MoE: EP carries the experts, TP stays small */
#define LAYERS_PER_CHUNK_MAX 4

static void note(heur_plan *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void note(heur_plan *p, const char *fmt, ...)
{
    if (p->n_notes >= HEUR_MAX_NOTES)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->notes[p->n_notes++], HEUR_NOTE_LEN, fmt, ap);
    va_end(ap);
}

void heur_model_params(const model_spec *m, double *total, double *active)
{
    *total = model_total_params(m, 1);
    *active = *total;
    if (!model_is_moe(m) || m->num_moe_experts <= 0)
        return;
    model_layer_params p;
    model_layer_param_counts(m, true, &p);
    /* The MTP blocks' MoE layers, as their weights are held (memory.c). */
    double moe_layers = (double)(model_num_moe_layers(m) + model_mtp_moe_weight_layers(m));
    double routed = p.routed_experts * moe_layers;
    double used = (double)m->moe_router_topk / (double)m->num_moe_experts;
    *active = *total - routed * (1.0 - used);
}

typedef struct hctx {
    const run_inputs *base;
    heur_plan *p;
    run_inputs in;
    strategy_t s;
    sim_err err;
} hctx;

/* Resolves the plan; true if Megatron accepts it. */
static bool check(hctx *x)
{
    heur_plan *p = x->p;
    x->in = *x->base;
    x->in.cluster.num_gpus = p->world;
    x->in.par = p->par;
    x->in.train = p->train;
    x->in.ddp = p->ddp;
    sim_err_clear(&x->err);
    p->legal = strategy_resolve(&x->s, &x->in.model, &x->in.cluster, &x->in.par, &x->in.train,
                                &x->in.ddp, &x->err) == SIM_OK;
    return p->legal;
}

static double peak_bound(hctx *x)
{
    return check(x) ? memory_peak_lower_bound(&x->in, &x->s) : INFINITY;
}

/* The smallest VP that leaves at most LAYERS_PER_CHUNK_MAX layers per
 * model chunk, with a legal layer split; 0 (not interleaved) if the
 * stages are that small already or none exists. */
static int64_t vp_for(const run_inputs *b, int64_t pp)
{
    const int64_t L = b->model.num_layers;
    parallel_spec split;
    if (pp <= 1 || (pp <= 2 && !b->par.overlap_p2p_comm) || (L + pp - 1) / pp <= LAYERS_PER_CHUNK_MAX)
        return 0;
    for (int64_t v = 2; v <= L / pp; v++)
        if ((L + pp * v - 1) / (pp * v) <= LAYERS_PER_CHUNK_MAX && strategy_split_layers(&b->model, pp, v, &split))
            return v;
    return 0;
}

/* The pipeline size nearest to `want` (the smallest one >= want, else the
 * largest below) with a layer split (strategy_split_layers) such that the
 * world holds whole replicas. */
static int64_t pp_near(const run_inputs *b, int64_t world, int64_t tpcp, int64_t epetp, int64_t want)
{
    int64_t L = b->model.num_layers, below = 0;
    parallel_spec split;
    for (int64_t d = 1; d <= L; d++) {
        int64_t dense, expert;
        if (__builtin_mul_overflow(tpcp, d, &dense) || __builtin_mul_overflow(epetp, d, &expert) ||
            world % dense || world % expert || !strategy_split_layers(&b->model, d, 0, &split))
            continue;
        if (d >= want)
            return d;
        below = d;
    }
    return below;
}

/* Applies PP with its layer split and the VP that goes with it. */
static void set_pp(hctx *x, int64_t pp)
{
    x->p->par.pp = pp;
    x->p->par.vp = vp_for(x->base, pp);
    strategy_split_layers(&x->base->model, pp, x->p->par.vp, &x->p->par);
}

/* Steps down VP, CP, TP, then tries every PP until Megatron accepts. */
static void make_legal(hctx *x)
{
    heur_plan *p = x->p;
    if (check(x))
        return;
    char why[600];
    sim_err_format(&x->err, why, sizeof why);
    if (p->par.vp > 1) {
        p->par.vp = 0;
        strategy_split_layers(&x->base->model, p->par.pp, 0, &p->par);
        if (check(x)) {
            note(p, "VP off: the interleaved schedule is not legal here (%s)", why);
            return;
        }
    }
    while (p->par.cp > 1) {
        p->par.cp /= 2;
        p->par.cp_comm_type = CP_COMM_P2P;
        p->par.n_hierarchical_cp_sizes = 0;
        if (check(x)) {
            note(p, "CP %lld: stepped down to be legal (%s)", (long long)p->par.cp, why);
            return;
        }
    }
    while (p->par.tp > 1) {
        p->par.tp /= 2;
        p->par.sequence_parallel = p->par.sequence_parallel && p->par.tp > 1;
        p->par.tp_comm_overlap = p->par.tp_comm_overlap && p->par.sequence_parallel;
        if (check(x)) {
            note(p, "TP %lld: stepped down to be legal (%s)", (long long)p->par.tp, why);
            return;
        }
    }
    for (int64_t d = 1; d <= x->base->model.num_layers; d++) {
        set_pp(x, d);
        if (check(x)) {
            note(p, "PP %lld: the only legal pipeline size left (%s)", (long long)d, why);
            return;
        }
    }
    note(p, "no legal layout follows from the rules of thumb: %s", why);
}

void heur_baseline(const run_inputs *base, int64_t world, heur_plan *out)
{
    memset(out, 0, sizeof *out);
    hctx x = {.base = base, .p = out};
    const model_spec *m = &base->model;
    const cluster_spec *c = &base->cluster;
    const bool moe = model_is_moe(m);
    const int64_t a = m->num_attention_heads, g = model_query_groups(m);
    const int64_t nvl = c->nvlink_domain_gpus, seq = m->seq_length;
    const double cap = c->gpu.hbm_capacity_bytes;
    heur_plan *p = out;
    p->world = world;
    p->par = base->par;
    p->train = base->train;
    p->ddp = base->ddp;

    double total, active;
    heur_model_params(m, &total, &active);
    double size = moe ? active : total;
    const size_rule *r = &size_rules[0];
    while (size >= r->below_params)
        r++;

    /* 1. TP by size, inside the NVLink domain. */
    int64_t tp = r->tp;
    if (moe && tp > MOE_TP_MAX)
        tp = MOE_TP_MAX;
    while (tp > 1 && (tp > nvl || tp > world || a % tp || (g % tp && tp % g) || world % tp))
        tp /= 2;
    if (moe)
        note(p, "TP %lld: MoE with %.1fB active of %.1fB parameters (%s: TP %lld, at most %d for "
                "MoE), inside the %lld-GPU NVLink domain",
             (long long)tp, active / 1e9, total / 1e9, r->range, (long long)r->tp, MOE_TP_MAX,
             (long long)nvl);
    else
        note(p, "TP %lld: %.1fB parameters (%s: TP %lld), inside the %lld-GPU NVLink domain",
             (long long)tp, total / 1e9, r->range, (long long)r->tp, (long long)nvl);
    p->par.tp = tp;

    /* 2. Sequence length: SP, CP. */
    p->par.sequence_parallel = tp > 1 && seq >= SP_FROM_TOKENS;
    p->par.tp_comm_overlap = p->par.tp_comm_overlap && p->par.sequence_parallel;
    note(p, "SP %s: sequence %lld %s %d tokens%s", p->par.sequence_parallel ? "on" : "off",
         (long long)seq, seq >= SP_FROM_TOKENS ? ">=" : "<", SP_FROM_TOKENS,
         tp > 1 ? "" : " (and SP needs TP > 1)");
    int64_t cp = seq >= CP8_FROM_TOKENS ? 8 : seq >= CP4_FROM_TOKENS ? 4 : seq >= CP2_FROM_TOKENS ? 2 : 1;
    while (cp > 1 && (seq % (2 * cp) || world % (tp * cp)))
        cp /= 2;
    p->par.cp = cp;
    p->par.cp_comm_type = CP_COMM_P2P;
    p->par.n_hierarchical_cp_sizes = 0;
    if (cp >= 4) {
        /* Hierarchical: all-to-all inside the NVLink domain where TP
         * leaves room (else the smallest split), ring across. */
        int64_t lvl = (a / tp) % 2 == 0 ? 2 : 1;
        for (int64_t x2 = 2; x2 < cp; x2 *= 2)
            if (cp % x2 == 0 && tp * x2 <= nvl && (a / tp) % x2 == 0)
                lvl = x2;
        if (lvl > 1) {
            p->par.cp_comm_type = CP_COMM_A2A_P2P;
            p->par.hierarchical_cp_sizes[0] = lvl;
            p->par.hierarchical_cp_sizes[1] = cp / lvl;
            p->par.n_hierarchical_cp_sizes = 2;
        }
    }
    if (cp > 1)
        note(p, "CP %lld (%s): sequence %lld tokens (from 8K: CP 2; from 32K: CP 4-8, "
                "hierarchical)", (long long)cp,
             p->par.cp_comm_type == CP_COMM_A2A_P2P ? "a2a+p2p" : "p2p", (long long)seq);
    else
        note(p, "CP 1: sequence %lld tokens < 8K", (long long)seq);

    /* 3. Experts inside the NVLink domain. */
    p->par.ep = 1;
    p->par.etp = moe ? 1 : 0;
    if (moe) {
        int64_t ep = 1;
        for (int64_t e = 1; e <= m->num_moe_experts && e <= nvl && e <= world; e++)
            if (m->num_moe_experts % e == 0 && world % e == 0)
                ep = e;
        p->par.ep = ep;
        note(p, "EP %lld, ETP 1: %lld experts, expert parallelism inside the NVLink domain",
             (long long)ep, (long long)m->num_moe_experts);
    }

    /* 4-6. PP, VP, the rest. */
    p->train.micro_batch_size = 1;
    p->par.recompute_granularity = RECOMPUTE_NONE;
    p->ddp.use_distributed_optimizer = true;
    p->ddp.overlap_param_gather = base->ddp.overlap_param_gather && base->ddp.overlap_grad_reduce;
    int64_t epetp = p->par.ep * (moe ? 1 : tp);
    int64_t want = moe ? 1 : r->pp;
    int64_t pp = pp_near(base, world, tp * cp, epetp, want);
    set_pp(&x, pp > 0 ? pp : 1);
    if (moe)
        note(p, "PP %lld: MoE starts without pipelining", (long long)p->par.pp);
    else
        note(p, "PP %lld: %s table value %lld%s", (long long)p->par.pp, r->range, (long long)r->pp,
             p->par.pp != r->pp ? ", the nearest that splits the layers and fits the world" : "");
    make_legal(&x);

    /* Grow PP, then EP, then recompute while the model does not fit. */
    double bound = peak_bound(&x);
    while (p->legal && bound > cap) {
        heur_plan keep = *p;
        double was = bound;
        bool grown = false;
        for (int64_t d = p->par.pp + 1; d <= m->num_layers && !grown; d++) {
            set_pp(&x, d);
            if (check(&x)) {
                grown = true;
                bound = peak_bound(&x);
                *p = keep;
                set_pp(&x, d);
                note(p, "PP %lld: does not fit at PP %lld (at least %.1f GiB > %.1f GiB HBM)",
                     (long long)d, (long long)keep.par.pp, was / GIB, cap / GIB);
            }
        }
        if (!grown && moe) {
            *p = keep;
            for (int64_t e = p->par.ep + 1; e <= m->num_moe_experts && !grown; e++) {
                if (m->num_moe_experts % e)
                    continue;
                p->par.ep = e;
                if (check(&x)) {
                    grown = true;
                    bound = peak_bound(&x);
                    *p = keep;
                    p->par.ep = e;
                    note(p, "EP %lld: does not fit at EP %lld (at least %.1f GiB > %.1f GiB HBM)",
                         (long long)e, (long long)keep.par.ep, was / GIB, cap / GIB);
                }
            }
        }
        if (!grown) {
            *p = keep;
            if (p->par.recompute_granularity == RECOMPUTE_FULL)
                break;
            p->par.recompute_granularity =
                p->par.recompute_granularity == RECOMPUTE_NONE ? RECOMPUTE_SELECTIVE : RECOMPUTE_FULL;
            note(p, "recompute %s: does not fit otherwise (at least %.1f GiB > %.1f GiB HBM)",
                 p->par.recompute_granularity == RECOMPUTE_FULL ? "full" : "selective", was / GIB,
                 cap / GIB);
        }
        bound = peak_bound(&x);
    }
    if (p->legal) {
        int64_t v = x.s.v;
        if (p->par.num_layers_in_first_pipeline_stage || p->par.num_layers_in_last_pipeline_stage)
            note(p, "uneven stages: %lld layers on the first and %lld on the last pipeline stage",
                 (long long)p->par.num_layers_in_first_pipeline_stage,
                 (long long)p->par.num_layers_in_last_pipeline_stage);
        else if (p->par.account_for_embedding_in_pipeline_split)
            note(p, "uneven stages: the embedding and the loss count as one layer each in the split");
        if (v > 1)
            note(p, "VP %lld: interleaved, %lld layers per model chunk (at most %d)", (long long)v,
                 (long long)x.s.layers_per_chunk, LAYERS_PER_CHUNK_MAX);
        note(p, "MBS 1, distributed optimizer on, DP %lld takes the rest", (long long)x.s.dp);
    }
    p->fits = p->legal && bound <= cap;
}
