/* search_space: the layouts a search considers (contract in
 * search_space.h).  The enumeration order is part of the output: it
 * breaks the last ties in the ranking, so the loops keep one fixed order
 * (GPU counts, TP, PP, VP, CP, schedule, CP communication, EP, ETP, SP,
 * MBS, recompute, distributed optimizer, EP overlap). */
#include "search_space.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "schedule.h"

int search_space_worlds(const run_inputs *b, const search_opts *o, search_result *r, sim_err *err)
{
    int64_t lo = o->gpus_min, hi = o->gpus_max;
    if (lo <= 0) {
        r->worlds[r->n_worlds++] = b->cluster.num_gpus;
        return SIM_OK;
    }
    if (lo == hi) {
        r->worlds[r->n_worlds++] = lo;
        return SIM_OK;
    }
    const int64_t node = b->cluster.gpus_per_node;
    for (int64_t w = node; w >= 1 && w <= hi && r->n_worlds < 32; w = w <= hi / 2 ? 2 * w : 0)
        if (w >= lo)
            r->worlds[r->n_worlds++] = w;
    if (r->n_worlds == 0)
        return sim_err_set(err, SIM_EINVAL,
                           "--gpus %" PRId64 ":%" PRId64 ": no power-of-two multiple of the node "
                           "size (%" PRId64 " GPUs) in that range", lo, hi, node);
    return SIM_OK;
}

/* A candidate that failed for want of memory fails the search: its layout
 * was not judged, so no ranking without it is right. */

/* A pinned CP that no TP legal for the attention heads makes legal for
 * the Mamba layers: the error at TP 1 (a TP divides the groups). */
static int mamba_cp_any_tp(const model_spec *m, int64_t cp, sim_err *err)
{
    for (int64_t t = 1; t <= m->mamba_num_groups; t++)
        if (strategy_check_tp(m, t, NULL) == SIM_OK && strategy_check_mamba(m, t, cp, NULL) == SIM_OK)
            return SIM_OK;
    return strategy_check_mamba(m, 1, cp, err);
}

int search_space_check_pinned(const run_inputs *b, const search_opts *o, sim_err *err)
{
    int rc = SIM_OK;
    if (search_pinned(o, SEARCH_DIM_TP) && (rc = strategy_check_tp(&b->model, b->par.tp, err)))
        return rc;
    if (search_pinned(o, SEARCH_DIM_CP) && (rc = strategy_check_cp(&b->model, b->par.cp, err)))
        return rc;
    if (search_pinned(o, SEARCH_DIM_TP) &&
        (rc = strategy_check_mamba(&b->model, b->par.tp, search_pinned(o, SEARCH_DIM_CP) ? b->par.cp : 1, err)))
        return rc;
    if (search_pinned(o, SEARCH_DIM_CP) && !search_pinned(o, SEARCH_DIM_TP) && (rc = mamba_cp_any_tp(&b->model, b->par.cp, err)))
        return rc;
    if (search_pinned(o, SEARCH_DIM_EP) && (rc = strategy_check_ep(&b->model, b->par.ep, err)))
        return rc;
    return SIM_OK;
}

typedef struct cand_vec {
    search_cand *v;
    size_t n, cap;
    bool oom;
} cand_vec;

static void push_cand(cand_vec *cv, const search_cand *c)
{
    if (cv->oom)
        return;
    if (cv->n == cv->cap) {
        size_t cap = cv->cap ? 2 * cv->cap : 1024;
        search_cand *p = realloc(cv->v, cap * sizeof *p);
        if (!p) {
            cv->oom = true;
            return;
        }
        cv->v = p;
        cv->cap = cap;
    }
    c = memcpy(&cv->v[cv->n], c, sizeof *c);
    cv->v[cv->n].order = (int64_t)cv->n;
    cv->n++;
}

enum { LIST_MAX = 64 };

typedef struct int_list {
    int64_t v[LIST_MAX];
    int n;
} int_list;

static void list_add(int_list *l, int64_t x)
{
    for (int i = 0; i < l->n; i++)
        if (l->v[i] == x)
            return;
    if (l->n < LIST_MAX)
        l->v[l->n++] = x;
}

typedef struct cp_choice {
    cp_comm_kind kind;
    int64_t a2a; /* a2a+p2p: the a2a level */
} cp_choice;

/* The CP communication variants worth trying for (tp, cp). */
static int cp_choices(const run_inputs *b, const search_opts *o, int64_t tp, int64_t cp, cp_choice *out)
{
    if (search_pinned(o, SEARCH_DIM_CP_COMM) || cp <= 1) {
        out[0] = (cp_choice){b->par.cp_comm_type, 0};
        return 1;
    }
    int n = 0;
    out[n++] = (cp_choice){CP_COMM_P2P, 0};
    out[n++] = (cp_choice){CP_COMM_ALL_GATHER, 0};
    const int64_t heads = b->model.num_attention_heads / tp;
    if (heads % cp == 0)
        out[n++] = (cp_choice){CP_COMM_A2A, 0};
    /* a2a+p2p: every split of cp into an a2a level (dividing the heads
     * per TP rank) and a ring of at least two. */
    for (int64_t x = 2; x < cp && n < 8; x *= 2)
        if (cp % x == 0 && heads % x == 0)
            out[n++] = (cp_choice){CP_COMM_A2A_P2P, x};
    return n;
}

/* The layout being built, dimension by dimension. */
typedef struct enum_ctx {
    const run_inputs *b;
    const search_opts *o;
    bool moe;
    cand_vec *cv;
    search_counts *cnt;
    int_list mbss;
} enum_ctx;

static const recompute_kind recompute_all[] = {RECOMPUTE_NONE, RECOMPUTE_SELECTIVE, RECOMPUTE_FULL};

static void set_fsdp(ddp_spec *d, int sharding)
{
    d->use_megatron_fsdp = true;
    d->sharding = sharding;
    d->use_distributed_optimizer = true;
    d->overlap_grad_reduce = d->overlap_grad_reduce || sharding >= DP_SHARD_OPTIM_GRADS;
    d->overlap_param_gather = d->overlap_param_gather || sharding == DP_SHARD_OPTIM_GRADS_PARAMS;
}

/* Whether the candidate's layout allows the EP overlap: strategy's rule,
 * with the overlap on (and the base's delay_wgrad_compute).  EP 1 is
 * answered first: a dense search asks for every layout. */
static bool ep_overlap_legal(const run_inputs *b, const search_cand *c)
{
    if (c->par.ep <= 1)
        return false;
    parallel_spec p = c->par;
    p.overlap_moe_ep_comm = true;
    p.delay_wgrad_compute = b->par.delay_wgrad_compute;
    sim_err err;
    return strategy_check_ep_overlap(&b->model, &p, p.pp, p.vp > 1 ? p.vp : 1, &err) == SIM_OK;
}

/* The base's EP overlap where the candidate allows it, off elsewhere. */
static void ep_overlap_where_legal(const run_inputs *b, search_cand *c)
{
    c->par.overlap_moe_ep_comm = b->par.overlap_moe_ep_comm && ep_overlap_legal(b, c);
    c->par.delay_wgrad_compute = b->par.delay_wgrad_compute && c->par.overlap_moe_ep_comm;
}

/* The last dimensions, which need no divisibility of their own: SP, MBS,
 * recompute, distributed optimizer. */
static void emit(enum_ctx *x, search_cand *c)
{
    const search_opts *o = x->o;
    const run_inputs *b = x->b;
    bool sps[2];
    int nsp = 0;
    if (search_pinned(o, SEARCH_DIM_SP))
        sps[nsp++] = b->par.sequence_parallel;
    else {
        if (c->par.tp > 1)
            sps[nsp++] = true;
        sps[nsp++] = false;
    }
    int nrc = search_pinned(o, SEARCH_DIM_RECOMPUTE) ? 1 : 3;
    int ndo = search_pinned(o, SEARCH_DIM_DISTOPT) ? 1 : 2;
    int nfs = o->fsdp && !search_pinned(o, SEARCH_DIM_DISTOPT) ? 2 : 0;
    for (int si = 0; si < nsp; si++)
        for (int bi = 0; bi < x->mbss.n; bi++)
            for (int ri = 0; ri < nrc; ri++)
                for (int di = 0; di < ndo + nfs; di++) {
                    c->par.sequence_parallel = sps[si];
                    c->par.tp_comm_overlap = b->par.tp_comm_overlap && sps[si];
                    c->train.micro_batch_size = x->mbss.v[bi];
                    if (nrc > 1)
                        c->par.recompute_granularity = recompute_all[ri];
                    c->ddp = b->ddp;
                    if (ndo > 1 && di < ndo)
                        c->ddp.use_distributed_optimizer = di == 0;
                    c->ddp.overlap_param_gather =
                        b->ddp.overlap_param_gather && c->ddp.use_distributed_optimizer && c->ddp.overlap_grad_reduce;
                    if (di >= ndo) /* Megatron-FSDP as config sets it: the strategy forces the overlaps */
                        set_fsdp(&c->ddp, di == ndo ? DP_SHARD_OPTIM_GRADS : DP_SHARD_OPTIM_GRADS_PARAMS);
                    ep_overlap_where_legal(b, c);
                    push_cand(x->cv, c);
                    x->cnt->enumerated++;
                    /* --ep-overlap: the other setting too, where Megatron allows it */
                    if (o->ep_overlap && ep_overlap_legal(b, c)) {
                        bool on = c->par.overlap_moe_ep_comm;
                        c->par.overlap_moe_ep_comm = !on;
                        c->par.delay_wgrad_compute = !on && b->par.delay_wgrad_compute;
                        push_cand(x->cv, c);
                        x->cnt->enumerated++;
                        c->par.overlap_moe_ep_comm = on;
                        c->par.delay_wgrad_compute = on && b->par.delay_wgrad_compute;
                    }
                }
}

/* CP communication, EP and ETP for a (world, tp, pp, vp, cp). */
static void emit_experts(enum_ctx *x, search_cand *c, const int_list *eps)
{
    const search_opts *o = x->o;
    const run_inputs *b = x->b;
    const int64_t tp = c->par.tp, cp = c->par.cp;
    cp_choice cc[8];
    int ncc = cp_choices(b, o, tp, cp, cc);
    for (int k = 0; k < ncc; k++) {
        if (!search_pinned(o, SEARCH_DIM_CP_COMM)) {
            c->par.cp_comm_type = cc[k].kind;
            c->par.n_hierarchical_cp_sizes = 0;
            if (cc[k].kind == CP_COMM_A2A_P2P) {
                c->par.hierarchical_cp_sizes[0] = cc[k].a2a;
                c->par.hierarchical_cp_sizes[1] = cp / cc[k].a2a;
                c->par.n_hierarchical_cp_sizes = 2;
            }
        }
        for (int ei = 0; ei < eps->n; ei++) {
            int_list etps = {0};
            if (!x->moe)
                list_add(&etps, 0); /* = TP, which is all a dense model needs */
            else if (search_pinned(o, SEARCH_DIM_ETP))
                list_add(&etps, b->par.etp);
            else {
                list_add(&etps, 1);
                list_add(&etps, tp);
            }
            for (int xi = 0; xi < etps.n; xi++) {
                int64_t etp = etps.v[xi] ? etps.v[xi] : tp, etp_ep, mp;
                if (__builtin_mul_overflow(etp, eps->v[ei], &etp_ep) ||
                    __builtin_mul_overflow(etp_ep, c->par.pp, &mp) || mp > c->world)
                    continue;
                c->par.ep = eps->v[ei];
                c->par.etp = etps.v[xi];
                emit(x, c);
            }
        }
    }
}

/* Is schedule n searched at (pp, vp)?  The base's alone unless
 * search_opts.schedules lists some, each then where it applies (search.h). */
static bool schedule_searched(const run_inputs *b, const search_opts *o, sched_name n, int64_t pp, int64_t vp)
{
    if (!o->schedules || search_pinned(o, SEARCH_DIM_SCHEDULE))
        return n == b->par.pipeline_schedule;
    if (!((o->schedules >> n) & 1u))
        return false;
    const bool megatron = (o->schedules >> SCHED_MEGATRON) & 1u, one = vp <= 1;
    switch (n) {
    case SCHED_MEGATRON:
        return true;
    case SCHED_1F1B:
        return one && !megatron;
    case SCHED_INTERLEAVED:
        return !one && !megatron;
    case SCHED_ZB_H1:
        return one && pp > 1;
    default:
        return vp == 2 && pp > 1;
    }
}

static void enumerate(const run_inputs *b, const search_opts *o, const int64_t *worlds, int n_worlds,
                      cand_vec *cv, search_counts *cnt)
{
    const model_spec *m = &b->model;
    const int64_t L = m->num_layers, a = m->num_attention_heads, seq = m->seq_length;
    const int64_t nvl = b->cluster.nvlink_domain_gpus;
    static const int64_t mbs_all[] = {1, 2, 4, 8};
    enum_ctx x = {.b = b, .o = o, .moe = model_is_moe(m), .cv = cv, .cnt = cnt};
    if (search_pinned(o, SEARCH_DIM_MBS))
        list_add(&x.mbss, b->train.micro_batch_size);
    else
        for (size_t k = 0; k < sizeof mbs_all / sizeof mbs_all[0]; k++)
            if (b->train.global_batch_size % mbs_all[k] == 0)
                list_add(&x.mbss, mbs_all[k]);

    for (int wi = 0; wi < n_worlds; wi++) {
        const int64_t W = worlds[wi];
        int_list tps = {0}, pps = {0}, cps = {0}, eps = {0};
        if (search_pinned(o, SEARCH_DIM_TP))
            list_add(&tps, b->par.tp);
        else
            for (int64_t t = 1; t <= a && (t - 1) / 2 < nvl && t <= W; t++) /* t <= 2 nvl */
                if (a % t == 0 && W % t == 0)
                    list_add(&tps, t);
        if (search_pinned(o, SEARCH_DIM_PP))
            list_add(&pps, b->par.pp);
        else
            for (int64_t p = 1; p <= L && p <= W; p++)
                if (W % p == 0)
                    list_add(&pps, p);
        if (search_pinned(o, SEARCH_DIM_CP))
            list_add(&cps, b->par.cp);
        else
            for (int64_t c = 1;; c *= 2) {
                if (c == 1 || (seq % (2 * c) == 0 && seq / c >= SEARCH_CP_MIN_TOKENS))
                    list_add(&cps, c);
                if (c > W / 2 || c > seq / 4) /* the next one needs 2c <= W, 4c <= seq */
                    break;
            }
        if (!x.moe || search_pinned(o, SEARCH_DIM_EP))
            list_add(&eps, b->par.ep);
        else
            for (int64_t e = 1; e <= m->num_moe_experts && e <= W; e++)
                if (m->num_moe_experts % e == 0 && W % e == 0)
                    list_add(&eps, e);

        for (int ti = 0; ti < tps.n; ti++)
            for (int pi = 0; pi < pps.n; pi++) {
                const int64_t tp = tps.v[ti], pp = pps.v[pi];
                int_list vps = {0};
                parallel_spec split;
                if (search_pinned(o, SEARCH_DIM_VP))
                    list_add(&vps, b->par.vp);
                else
                    for (int64_t v = 0; v <= (pp > 1 ? SEARCH_VP_MAX : 0); v += v ? 1 : 2)
                        if (strategy_split_layers(m, pp, v, &split))
                            list_add(&vps, v);
                for (int vi = 0; vi < vps.n; vi++)
                    for (int ci = 0; ci < cps.n; ci++) {
                        int64_t tpp, mp;
                        /* Mamba layers: heads and groups over TP and CP */
                        if (__builtin_mul_overflow(tp, pp, &tpp) ||
                            __builtin_mul_overflow(tpp, cps.v[ci], &mp) || mp > W ||
                            strategy_check_mamba(m, tp, cps.v[ci], NULL) != SIM_OK)
                            continue;
                        search_cand c;
                        memset(&c, 0, sizeof c);
                        c.world = W;
                        c.par = b->par;
                        c.train = b->train;
                        c.ddp = b->ddp;
                        c.par.tp = tp;
                        c.par.pp = pp;
                        c.par.vp = vps.v[vi];
                        c.par.cp = cps.v[ci];
                        /* A pinned PP and VP keep the config's split. */
                        if (!(search_pinned(o, SEARCH_DIM_PP) && search_pinned(o, SEARCH_DIM_VP)) &&
                            !strategy_split_layers(m, pp, c.par.vp, &c.par))
                            continue;
                        for (int sn = 0; sn < SCHED_NAMES; sn++) {
                            if (!schedule_searched(b, o, (sched_name)sn, pp, c.par.vp))
                                continue;
                            c.par.pipeline_schedule = (sched_name)sn;
                            emit_experts(&x, &c, &eps);
                        }
                    }
            }
    }
}

int search_space_enumerate(const run_inputs *b, const search_opts *o, const int64_t *worlds, int n_worlds,
                           search_cand **cands, size_t *n, search_counts *cnt, sim_err *err)
{
    cand_vec cv = {0};
    enumerate(b, o, worlds, n_worlds, &cv, cnt);
    *cands = NULL;
    *n = 0;
    if (cv.oom) {
        free(cv.v);
        return sim_err_set(err, SIM_ENOMEM, "out of memory enumerating layouts");
    }
    *cands = cv.v;
    *n = cv.n;
    return SIM_OK;
}
