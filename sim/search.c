/* search: enumerate, prune, simulate, rank (contract in search.h).
 *
 * Phases:
 *   1. enumerate  nested loops over the GPU counts and the dimensions, in a
 *                 fixed order; each combination gets its enumeration index.
 *   2. prepare    (parallel) per combination: strategy_resolve, the memory
 *                 lower bound, then for the survivors the workload and the
 *                 time lower bound.  Each result goes into its own slot.
 *   3. simulate   (parallel) the survivors in ascending order of the time
 *                 bound, SEARCH_BATCH at a time; between batches the bound
 *                 threshold (the K-th best key so far) is updated on one
 *                 thread.  Batch boundaries do not depend on the jobs, so
 *                 neither does which candidates are simulated.
 *   4. rank       sort, Pareto front, the rules-of-thumb baseline.
 * Nothing here keeps state between calls; workers share only the
 * read-only base inputs and write disjoint slots.
 */
#include "search.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "handover.h"
#include "memory.h"
#include "model.h"
#include "schedule.h"
#include "step.h"
#include "units.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- dimensions and options ------------------------------------------ */

static const char *const dim_keys[SEARCH_DIMS] = {
    [SEARCH_DIM_TP] = "model.tensor_model_parallel_size",
    [SEARCH_DIM_PP] = "model.pipeline_model_parallel_size",
    [SEARCH_DIM_VP] = "model.virtual_pipeline_model_parallel_size",
    [SEARCH_DIM_CP] = "model.context_parallel_size",
    [SEARCH_DIM_CP_COMM] = "model.cp_comm_type",
    [SEARCH_DIM_EP] = "model.expert_model_parallel_size",
    [SEARCH_DIM_ETP] = "model.expert_tensor_parallel_size",
    [SEARCH_DIM_SP] = "model.sequence_parallel",
    [SEARCH_DIM_MBS] = "train.micro_batch_size",
    [SEARCH_DIM_RECOMPUTE] = "model.recompute_granularity",
    [SEARCH_DIM_DISTOPT] = "ddp.use_distributed_optimizer",
    [SEARCH_DIM_SCHEDULE] = "sim.pipeline_schedule",
};

const char *search_dim_key(search_dim d)
{
    return d >= 0 && d < SEARCH_DIMS ? dim_keys[d] : "?";
}

int search_dim_of_key(const char *key)
{
    for (int d = 0; d < SEARCH_DIMS; d++)
        if (!strcmp(key, dim_keys[d]))
            return d;
    /* The a2a+p2p levels go with the CP communication type. */
    if (!strcmp(key, "model.hierarchical_context_parallel_sizes"))
        return SEARCH_DIM_CP_COMM;
    return -1;
}

void search_opts_default(search_opts *o)
{
    memset(o, 0, sizeof *o);
    o->rank = SEARCH_RANK_TIME;
    o->top = 10;
    o->jobs = 1;
}

static bool pinned(const search_opts *o, search_dim d)
{
    return (o->pinned >> d) & 1u;
}

/* ---- candidate inputs and the bounds ---------------------------------- */

int search_cand_inputs(const run_inputs *base, const search_cand *c, run_inputs *in, strategy_t *s,
                       sim_err *err)
{
    *in = *base;
    in->cluster.num_gpus = c->world;
    in->par = c->par;
    in->train = c->train;
    in->ddp = c->ddp;
    return strategy_resolve(s, &in->model, &in->cluster, &in->par, &in->train, &in->ddp, err);
}

/* Sums in the bounds saturate one below UINT64_MAX (the "unreached"
 * mark): a saturated lower bound is still a lower bound, and a step that
 * long fails when simulated. */
#define PS_SATURATED (UINT64_MAX - 1)

static sim_time_ps ps_add(sim_time_ps a, sim_time_ps b)
{
    sim_time_ps r;
    return __builtin_add_overflow(a, b, &r) || r > PS_SATURATED ? PS_SATURATED : r;
}

static sim_time_ps ps_mul(sim_time_ps a, sim_time_ps b)
{
    sim_time_ps r;
    return __builtin_mul_overflow(a, b, &r) || r > PS_SATURATED ? PS_SATURATED : r;
}

/* A stage-level duration of the workload in simulated time, or SIM_EINVAL
 * naming it. */
static int stage_ps(double seconds, const char *what, int64_t stage, sim_time_ps *out, sim_err *err)
{
    if (time_from_s_checked(seconds, out))
        return SIM_OK;
    return sim_err_set(err, SIM_EINVAL,
                       "the %s of pipeline stage %" PRId64 " would take %.3g s (limit %.3g s)", what,
                       stage, seconds, LIMIT_DURATION_S);
}

/* Longest dependency path through a pass template from the start of op 0
 * to the end of its last op (ops not reachable from op 0 through
 * dependencies count nothing).  buf holds n_ops entries. */
static sim_time_ps pass_critical(const wl_pass *p, sim_time_ps *buf)
{
    if (p->n_ops <= 0)
        return 0;
    const sim_time_ps none = UINT64_MAX;
    for (int32_t i = 0; i < p->n_ops; i++) {
        const wl_op *op = &p->ops[i];
        sim_time_ps start = i == 0 ? 0 : none;
        for (int j = 0; j < 2; j++) {
            int32_t d = op->dep_back[j];
            if (d && i - d >= 0 && buf[i - d] != none && (start == none || buf[i - d] > start))
                start = buf[i - d];
        }
        buf[i] = start == none ? none : ps_add(start, op->duration_ps);
    }
    return buf[p->n_ops - 1] == none ? 0 : buf[p->n_ops - 1];
}

static sim_time_ps stream_sum(const wl_pass *p, int stream)
{
    sim_time_ps t = 0;
    for (int32_t i = 0; i < p->n_ops; i++)
        if (p->ops[i].stream == stream)
            t = ps_add(t, p->ops[i].duration_ps);
    return t;
}

/* Least time from the start of a pass's first compute op to the end of its
 * last one: the longest path between them through the dependencies and
 * the in-order streams (a pass's ops are consecutive on each stream).  The
 * compute stream runs passes one after another, so no other pass can use
 * the gaps inside this span.  buf holds n_ops entries. */
static sim_time_ps compute_span(const wl_pass *p, sim_time_ps *buf)
{
    const sim_time_ps none = UINT64_MAX;
    int32_t first = -1, last = -1;
    for (int32_t i = 0; i < p->n_ops; i++)
        if (p->ops[i].stream == STREAM_COMPUTE) {
            if (first < 0)
                first = i;
            last = i;
        }
    if (first < 0)
        return 0;
    int32_t prev_on[STREAM_KINDS];
    for (int k = 0; k < STREAM_KINDS; k++)
        prev_on[k] = -1;
    for (int32_t i = 0; i < p->n_ops; i++) {
        const wl_op *op = &p->ops[i];
        sim_time_ps start = i == first ? 0 : none;
        int32_t preds[3] = {op->dep_back[0] ? i - op->dep_back[0] : -1,
                            op->dep_back[1] ? i - op->dep_back[1] : -1, prev_on[op->stream]};
        for (int j = 0; j < 3; j++)
            if (preds[j] >= 0 && buf[preds[j]] != none && (start == none || buf[preds[j]] > start))
                start = buf[preds[j]];
        buf[i] = start == none ? none : ps_add(start, op->duration_ps);
        prev_on[op->stream] = i;
    }
    /* Without a path from the first compute op, the sum of the compute
     * ops is still a bound. */
    return buf[last] != none ? buf[last] : stream_sum(p, STREAM_COMPUTE);
}

/* Compute work and span of a pass.  The middle stages of a pipeline run
 * the same templates, so a pass equal to the one of the stage above (same
 * ops; workload zeroes their padding) takes its figures from there. */
typedef struct pass_figures {
    sim_time_ps work, span, critical; /* critical: chunk 0 only (fill and drain) */
} pass_figures;

static void pass_cost(const wl_pass *p, const wl_pass *above, bool chunk0, pass_figures *f, sim_time_ps *buf)
{
    if (above && above->n_ops == p->n_ops &&
        (p->n_ops == 0 || memcmp(above->ops, p->ops, (size_t)p->n_ops * sizeof *p->ops) == 0))
        return; /* *f still holds the figures of `above` */
    f->work = stream_sum(p, STREAM_COMPUTE);
    f->span = compute_span(p, buf);
    f->critical = chunk0 ? pass_critical(p, buf) : 0;
}

/* Time lower bound and compute work from the workload (see search.h). */
static int time_bound(const run_inputs *in, const strategy_t *s, double *lb_s, double *compute_s,
                      sim_err *err)
{
    workload_t *wl = NULL;
    int rc = workload_build(&wl, in, s, err);
    if (rc != SIM_OK)
        return rc;
    const int64_t p = s->pp, v = s->v, M = s->num_microbatches;
    int32_t most = 0;
    for (int64_t r = 0; r < p; r++)
        for (int64_t c = 0; c < v; c++) {
            const wl_chunk *ch = &wl->stages[r].chunks[c];
            for (int k = 0; k < SCHED_KINDS; k++)
                if (wl_chunk_pass(ch, (sched_kind)k)->n_ops > most)
                    most = wl_chunk_pass(ch, (sched_kind)k)->n_ops;
        }
    sim_time_ps *buf = malloc((size_t)(most + 1) * sizeof *buf);
    if (!buf) {
        workload_destroy(wl);
        return sim_err_set(err, SIM_ENOMEM, "out of memory");
    }
    /* Does the last backward of a stage run chunk 0 (so that the drain
     * through the stages before it follows)?  It is virtual microbatch
     * M*v-1 of the backward order. */
    int32_t last_mb, last_ch;
    sched_virtual(v, M, s->group_size_n, M * v - 1, &last_mb, &last_ch);
    sched_plan plan;
    strategy_plan(s, &plan);
    /* With the backward split, the deferred W passes fill the drain. */
    bool drain_chunk0 = v - 1 - last_ch == 0 && !plan.split;

    /* per chunk and pass kind: the figures of the last stage seen */
    pass_figures (*cost)[SCHED_KINDS] = calloc((size_t)v, sizeof *cost);
    if (!cost) {
        free(buf);
        workload_destroy(wl);
        return sim_err_set(err, SIM_ENOMEM, "out of memory");
    }
    sim_time_ps fill = 0, drain = 0, best_lb = 0, most_compute = 0;
    for (int64_t r = 0; r < p && rc == SIM_OK; r++) {
        const wl_stage *ws = &wl->stages[r];
        sim_time_ps work = 0, span = 0, opt = 0, send = 0, next_send = 0;
        if ((rc = stage_ps(ws->optimizer_s, "optimizer step", r, &opt, err)) ||
            (p > 1 && (rc = stage_ps(ws->p2p_s, "pipeline send", r, &send, err))) ||
            (r + 1 < p && (rc = stage_ps(wl->stages[r + 1].p2p_s, "pipeline send", r + 1, &next_send, err))))
            break;
        for (int64_t c = 0; c < v; c++) {
            const wl_chunk *ch = &ws->chunks[c], *above = r > 0 ? &wl->stages[r - 1].chunks[c] : NULL;
            for (int k = 0; k < SCHED_KINDS; k++) {
                pass_cost(wl_chunk_pass(ch, (sched_kind)k), above ? wl_chunk_pass(above, (sched_kind)k) : NULL,
                          c == 0, &cost[c][k], buf);
                work = ps_add(work, cost[c][k].work);
                /* Overlapped pairs fill each other's gaps: only the
                 * compute work stays a bound. */
                span = ps_add(span, s->par.overlap_moe_ep_comm ? cost[c][k].work : cost[c][k].span);
            }
        }
        work = ps_mul(work, (sim_time_ps)M);
        span = ps_mul(span, (sim_time_ps)M);
        if (ps_add(work, opt) > most_compute)
            most_compute = ps_add(work, opt);
        /* fill/drain of stage r: the chunk-0 passes of stages 0..r-1 and
         * the sends between them.  The first op of a pass must be a compute
         * op for the fill to delay this stage's compute stream. */
        const wl_pass *f0 = wl_chunk_pass(&ws->chunks[0], SCHED_F);
        sim_time_ps head = (f0->n_ops > 0 && f0->ops[0].stream == STREAM_COMPUTE) ? fill : 0;
        sim_time_ps tail = drain_chunk0 ? drain : 0;
        sim_time_ps lb = ps_add(ps_add(head, span), tail > opt ? tail : opt);
        if (lb > best_lb)
            best_lb = lb;
        if (p > 1) {
            fill = ps_add(fill, ps_add(cost[0][SCHED_F].critical, send));
            /* backward: stage r+1 sends to r, then r's chunk-0 backward */
            if (r + 1 < p)
                drain = ps_add(drain, ps_add(cost[0][SCHED_B].critical, next_send));
        }
    }
    free(cost);
    free(buf);
    workload_destroy(wl);
    if (rc != SIM_OK)
        return rc;
    *lb_s = time_as_s(best_lb);
    *compute_s = time_as_s(most_compute);
    return SIM_OK;
}

/* ---- the worker pool --------------------------------------------------- */

typedef void (*work_fn)(void *ctx, size_t i);

typedef struct pool {
    work_fn fn;
    void *ctx;
    const size_t *idx;   /* items to run, or NULL for 0..n-1 */
    size_t n;
    atomic_size_t next;
} pool;

static void *pool_worker(void *arg)
{
    pool *p = arg;
    for (;;) {
        size_t k = atomic_fetch_add(&p->next, 1);
        if (k >= p->n)
            break;
        p->fn(p->ctx, p->idx ? p->idx[k] : k);
    }
    return NULL;
}

/* Runs fn over the items on `jobs` threads (the caller is one of them).
 * Threads that cannot be started leave their share to the others. */
static void parallel_for(int jobs, work_fn fn, void *ctx, const size_t *idx, size_t n)
{
    pool p = {.fn = fn, .ctx = ctx, .idx = idx, .n = n};
    atomic_init(&p.next, 0);
    enum { MAX_THREADS = 256 };
    pthread_t th[MAX_THREADS];
    int started = 0;
    size_t want = (size_t)(jobs > 1 ? jobs - 1 : 0);
    if (want > n)
        want = n;
    if (want > MAX_THREADS)
        want = MAX_THREADS;
    for (size_t t = 0; t < want; t++)
        if (pthread_create(&th[started], NULL, pool_worker, &p) == 0)
            started++;
    pool_worker(&p);
    for (int t = 0; t < started; t++)
        pthread_join(th[t], NULL);
}

/* ---- phase 1: enumeration ---------------------------------------------- */

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
    if (pinned(o, SEARCH_DIM_CP_COMM) || cp <= 1) {
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
    if (pinned(o, SEARCH_DIM_SP))
        sps[nsp++] = b->par.sequence_parallel;
    else {
        if (c->par.tp > 1)
            sps[nsp++] = true;
        sps[nsp++] = false;
    }
    int nrc = pinned(o, SEARCH_DIM_RECOMPUTE) ? 1 : 3;
    int ndo = pinned(o, SEARCH_DIM_DISTOPT) ? 1 : 2;
    int nfs = o->fsdp && !pinned(o, SEARCH_DIM_DISTOPT) ? 2 : 0;
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
        if (!pinned(o, SEARCH_DIM_CP_COMM)) {
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
            else if (pinned(o, SEARCH_DIM_ETP))
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
    if (!o->schedules || pinned(o, SEARCH_DIM_SCHEDULE))
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
    if (pinned(o, SEARCH_DIM_MBS))
        list_add(&x.mbss, b->train.micro_batch_size);
    else
        for (size_t k = 0; k < sizeof mbs_all / sizeof mbs_all[0]; k++)
            if (b->train.global_batch_size % mbs_all[k] == 0)
                list_add(&x.mbss, mbs_all[k]);

    for (int wi = 0; wi < n_worlds; wi++) {
        const int64_t W = worlds[wi];
        int_list tps = {0}, pps = {0}, cps = {0}, eps = {0};
        if (pinned(o, SEARCH_DIM_TP))
            list_add(&tps, b->par.tp);
        else
            for (int64_t t = 1; t <= a && (t - 1) / 2 < nvl && t <= W; t++) /* t <= 2 nvl */
                if (a % t == 0 && W % t == 0)
                    list_add(&tps, t);
        if (pinned(o, SEARCH_DIM_PP))
            list_add(&pps, b->par.pp);
        else
            for (int64_t p = 1; p <= L && p <= W; p++)
                if (W % p == 0)
                    list_add(&pps, p);
        if (pinned(o, SEARCH_DIM_CP))
            list_add(&cps, b->par.cp);
        else
            for (int64_t c = 1;; c *= 2) {
                if (c == 1 || (seq % (2 * c) == 0 && seq / c >= SEARCH_CP_MIN_TOKENS))
                    list_add(&cps, c);
                if (c > W / 2 || c > seq / 4) /* the next one needs 2c <= W, 4c <= seq */
                    break;
            }
        if (!x.moe || pinned(o, SEARCH_DIM_EP))
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
                if (pinned(o, SEARCH_DIM_VP))
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
                        if (!(pinned(o, SEARCH_DIM_PP) && pinned(o, SEARCH_DIM_VP)) &&
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

/* ---- phase 2: prepare ---------------------------------------------------- */

typedef struct prep_ctx {
    const run_inputs *base;
    search_cand *c;
    double cap;
} prep_ctx;

static void prep_one(void *arg, size_t i)
{
    prep_ctx *x = arg;
    search_cand *c = &x->c[i];
    run_inputs in;
    strategy_t s;
    sim_err err;
    sim_err_clear(&err);
    int rc = search_cand_inputs(x->base, c, &in, &s, &err);
    if (rc != SIM_OK) {
        c->status = rc == SIM_EINVAL ? SEARCH_ILLEGAL : SEARCH_FAILED;
        c->err_code = rc;
        return;
    }
    c->dp = s.dp;
    c->edp = s.edp;
    c->num_microbatches = s.num_microbatches;
    /* Without data parallelism anywhere, the distributed optimizer (and
     * Megatron-FSDP) shards over one rank: off simulates exactly as on. */
    if ((!c->ddp.use_distributed_optimizer || (c->ddp.use_megatron_fsdp && !x->base->ddp.use_megatron_fsdp)) &&
        s.dp * s.cp == 1 && s.edp == 1) {
        c->status = SEARCH_DUPLICATE;
        return;
    }
    c->peak_lb_bytes = memory_peak_lower_bound(&in, &s);
    if (c->peak_lb_bytes > x->cap) {
        c->status = SEARCH_PRUNED_MEMORY;
        return;
    }
    if (time_bound(&in, &s, &c->time_lb_s, &c->compute_s, &err) != SIM_OK) {
        c->status = SEARCH_FAILED;
        c->err_code = err.code;
        return;
    }
    c->status = SEARCH_READY;
}

/* ---- phase 3: simulate --------------------------------------------------- */

typedef struct sim_ctx {
    const run_inputs *base;
    search_cand *c;
    double cap;
} sim_ctx;

static void sim_fill(search_cand *c, const step_result *r, double cap)
{
    c->step_time_s = r->step_time_s;
    c->tokens_per_s_per_gpu = r->tokens_per_s_per_gpu;
    c->mfu = r->mfu;
    c->bubble_fraction = r->bubble_fraction;
    c->bubble_s = r->bubble_fraction * r->pipeline_s;
    c->peak_bytes = r->peak_bytes;
    for (int k = 0; k < STREAM_KINDS; k++)
        c->exposed_s[k] = streams_is_comm((stream_kind)k) ? r->exposed_s[k] : 0.0;
    c->exposed_total_s = r->exposed_total_s;
    c->status = r->peak_bytes > cap ? SEARCH_OVER_MEMORY : SEARCH_FEASIBLE;
}

static int simulate(const run_inputs *base, search_cand *c, double cap)
{
    run_inputs in;
    strategy_t s;
    sim_err err;
    sim_err_clear(&err);
    step_t *st = NULL;
    int rc = search_cand_inputs(base, c, &in, &s, &err);
    if (rc == SIM_OK)
        rc = step_run(&st, &in, &s, &err);
    if (rc != SIM_OK) {
        c->status = SEARCH_FAILED;
        c->err_code = rc;
        return rc;
    }
    sim_fill(c, step_result_get(st), cap);
    step_destroy(st);
    return SIM_OK;
}

static void sim_one(void *arg, size_t i)
{
    sim_ctx *x = arg;
    simulate(x->base, &x->c[i], x->cap);
}

/* ---- ranking ---------------------------------------------------------------- */

double search_key(const search_opts *o, const search_cand *c)
{
    return o->rank == SEARCH_RANK_TIME ? c->step_time_s : c->step_time_s * (double)c->world;
}

static double lb_key(const search_opts *o, const search_cand *c)
{
    return o->rank == SEARCH_RANK_TIME ? c->time_lb_s : c->time_lb_s * (double)c->world;
}

static int cmp3(double a, double b)
{
    return a < b ? -1 : a > b;
}

/* What ranking compares, copied out of the candidates (qsort has no
 * context argument for the rank mode). */
typedef struct ranked {
    double key;           /* search_key, or the bound's key for ordering */
    int64_t world;
    double peak;
    int64_t order;
    size_t idx;
} ranked;

static int cmp_ranked(const void *x, const void *y)
{
    const ranked *a = x, *b = y;
    int c = cmp3(a->key, b->key);
    if (!c)
        c = a->world < b->world ? -1 : a->world > b->world;
    if (!c)
        c = cmp3(a->peak, b->peak);
    if (!c)
        c = a->order < b->order ? -1 : a->order > b->order;
    return c;
}

/* Keeps the K smallest keys seen (insertion into a sorted array). */
typedef struct topk {
    ranked *v;
    size_t n, k;
} topk;

static void topk_add(topk *t, const ranked *r)
{
    if (t->n == t->k && cmp_ranked(r, &t->v[t->n - 1]) >= 0)
        return;
    size_t i = t->n < t->k ? t->n++ : t->n - 1;
    while (i > 0 && cmp_ranked(r, &t->v[i - 1]) < 0) {
        t->v[i] = t->v[i - 1];
        i--;
    }
    t->v[i] = *r;
}

static ranked rank_of(const search_opts *o, const search_cand *c, size_t idx)
{
    return (ranked){search_key(o, c), c->world, c->peak_bytes, c->order, idx};
}

/* Pareto front over (step time, GPUs, peak bytes), all minimised, of the
 * first n (feasible) candidates; indices in step-time order. */
static size_t pareto_front(const search_cand *c, size_t n, size_t *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        bool dominated = false;
        for (size_t j = 0; j < n && !dominated; j++) {
            if (j == i)
                continue;
            bool le = c[j].step_time_s <= c[i].step_time_s && c[j].world <= c[i].world &&
                      c[j].peak_bytes <= c[i].peak_bytes;
            bool lt = c[j].step_time_s < c[i].step_time_s || c[j].world < c[i].world ||
                      c[j].peak_bytes < c[i].peak_bytes;
            /* Equal points: keep the first in rank order only. */
            dominated = le && (lt || j < i);
        }
        if (!dominated)
            out[k++] = i;
    }
    /* Already in rank order; sort by step time (stable by index). */
    for (size_t i = 1; i < k; i++) {
        size_t v = out[i], j = i;
        while (j > 0 && (c[out[j - 1]].step_time_s > c[v].step_time_s)) {
            out[j] = out[j - 1];
            j--;
        }
        out[j] = v;
    }
    return k;
}

/* Is candidate c (by its time and memory lower bounds) certainly
 * dominated by a simulated feasible point of the front: no slower, no
 * more GPUs, no more memory, and better in one of them? */
static bool front_dominates(const search_cand *all, const size_t *front, size_t n, const search_cand *c)
{
    for (size_t i = 0; i < n; i++) {
        const search_cand *q = &all[front[i]];
        if (q->step_time_s <= c->time_lb_s && q->world <= c->world && q->peak_bytes <= c->peak_lb_bytes &&
            (q->step_time_s < c->time_lb_s || q->world < c->world || q->peak_bytes < c->peak_lb_bytes))
            return true;
    }
    return false;
}

static bool dominates(const search_cand *q, const search_cand *c)
{
    return q->step_time_s <= c->step_time_s && q->world <= c->world && q->peak_bytes <= c->peak_bytes &&
           (q->step_time_s < c->step_time_s || q->world < c->world || q->peak_bytes < c->peak_bytes);
}

/* Adds simulated point i to the front (indices into all) unless a point
 * there dominates it; drops the points it dominates.  Returns the size. */
static size_t front_add(const search_cand *all, size_t *front, size_t n, size_t i)
{
    for (size_t k = 0; k < n; k++)
        if (dominates(&all[front[k]], &all[i]))
            return n;
    size_t w = 0;
    for (size_t k = 0; k < n; k++)
        if (!dominates(&all[i], &all[front[k]]))
            front[w++] = front[k];
    front[w++] = i;
    return w;
}

/* ---- the run ------------------------------------------------------------------ */

static int pick_worlds(const run_inputs *b, const search_opts *o, search_result *r, sim_err *err)
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
static bool out_of_memory(const search_cand *c, const size_t *idx, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const search_cand *x = &c[idx ? idx[i] : i];
        if (x->status == SEARCH_FAILED && x->err_code == SIM_ENOMEM)
            return true;
    }
    return false;
}

/* A pinned CP that no TP legal for the attention heads makes legal for
 * the Mamba layers: the error at TP 1 (a TP divides the groups). */
static int mamba_cp_any_tp(const model_spec *m, int64_t cp, sim_err *err)
{
    for (int64_t t = 1; t <= m->mamba_num_groups; t++)
        if (strategy_check_tp(m, t, NULL) == SIM_OK && strategy_check_mamba(m, t, cp, NULL) == SIM_OK)
            return SIM_OK;
    return strategy_check_mamba(m, 1, cp, err);
}

/* A pinned TP, CP or EP that breaks a rule of its own against the model
 * is the user's to change: no layout can make it legal. */
static int check_pinned(const run_inputs *b, const search_opts *o, sim_err *err)
{
    int rc = SIM_OK;
    if (pinned(o, SEARCH_DIM_TP) && (rc = strategy_check_tp(&b->model, b->par.tp, err)))
        return rc;
    if (pinned(o, SEARCH_DIM_CP) && (rc = strategy_check_cp(&b->model, b->par.cp, err)))
        return rc;
    if (pinned(o, SEARCH_DIM_TP) &&
        (rc = strategy_check_mamba(&b->model, b->par.tp, pinned(o, SEARCH_DIM_CP) ? b->par.cp : 1, err)))
        return rc;
    if (pinned(o, SEARCH_DIM_CP) && !pinned(o, SEARCH_DIM_TP) && (rc = mamba_cp_any_tp(&b->model, b->par.cp, err)))
        return rc;
    if (pinned(o, SEARCH_DIM_EP) && (rc = strategy_check_ep(&b->model, b->par.ep, err)))
        return rc;
    return SIM_OK;
}

int search_run(const run_inputs *base, const search_opts *o, search_result *out, sim_err *err)
{
    memset(out, 0, sizeof *out);
    double t0 = now_s();
    int rc = check_pinned(base, o, err);
    if (rc == SIM_OK)
        rc = pick_worlds(base, o, out, err);
    if (rc != SIM_OK)
        return rc;
    const double cap = base->cluster.gpu.hbm_capacity_bytes;
    out->capacity_bytes = cap;
    search_counts *cnt = &out->counts;

    cand_vec cv = {0};
    enumerate(base, o, out->worlds, out->n_worlds, &cv, cnt);
    if (cv.oom) {
        free(cv.v);
        return sim_err_set(err, SIM_ENOMEM, "out of memory enumerating layouts");
    }
    search_cand *all = cv.v;
    const size_t n_all = cv.n;

    prep_ctx px = {.base = base, .c = all, .cap = cap};
    parallel_for(o->jobs, prep_one, &px, NULL, n_all);
    if (out_of_memory(all, NULL, n_all)) {
        free(all);
        return sim_err_set(err, SIM_ENOMEM, "out of memory preparing layouts");
    }

    /* Tally; remember the first rejection and the smallest memory bound
     * (for the messages when nothing is legal or fits). */
    size_t n_ready = 0;
    out->closest.status = SEARCH_ILLEGAL;
    for (size_t i = 0; i < n_all; i++) {
        search_cand *c = &all[i];
        switch (c->status) {
        case SEARCH_ILLEGAL:
            cnt->illegal++;
            if (!out->first_illegal[0]) {
                run_inputs in;
                strategy_t s;
                sim_err e2;
                sim_err_clear(&e2);
                search_cand_inputs(base, c, &in, &s, &e2);
                sim_err_format(&e2, out->first_illegal, sizeof out->first_illegal);
            }
            break;
        case SEARCH_DUPLICATE: cnt->duplicate++; break;
        case SEARCH_PRUNED_MEMORY: cnt->pruned_memory++; break;
        case SEARCH_FAILED: cnt->failed++; break;
        default: n_ready++; break;
        }
        if (c->status >= SEARCH_PRUNED_MEMORY && c->status != SEARCH_FAILED &&
            (out->closest.status == SEARCH_ILLEGAL || c->peak_lb_bytes < out->closest.peak_lb_bytes))
            out->closest = *c;
    }

    /* Phase 3: ascending time bound, in batches. */
    ranked *order = malloc((n_ready + 1) * sizeof *order);
    /* Batch sizes are constants (never the number of jobs): which
     * candidates get simulated must not depend on it.  Exhaustive: one
     * batch, nothing to decide between batches. */
    const size_t batch_max = o->exhaustive ? (n_ready ? n_ready : 1) : o->pareto ? SEARCH_BATCH_PARETO : SEARCH_BATCH;
    size_t *batch = malloc(batch_max * sizeof *batch);
    size_t K = (size_t)(o->top > 2 ? o->top : 2);
    topk best = {.v = malloc(K * sizeof *best.v), .k = K};
    size_t *front = malloc((n_ready + 1) * sizeof *front);
    if (!order || !batch || !best.v || !front) {
        free(order);
        free(batch);
        free(best.v);
        free(front);
        free(all);
        return sim_err_set(err, SIM_ENOMEM, "out of memory");
    }
    size_t k = 0;
    for (size_t i = 0; i < n_all; i++)
        if (all[i].status == SEARCH_READY)
            order[k++] = (ranked){lb_key(o, &all[i]), all[i].world, all[i].peak_lb_bytes, all[i].order, i};
    qsort(order, n_ready, sizeof *order, cmp_ranked);

    double ts = now_s();
    size_t n_front = 0;
    sim_ctx sx = {.base = base, .c = all, .cap = cap};
    size_t next = 0;
    bool done = false;
    while (next < n_ready && !done) {
        /* Take the next candidates that may still matter, in bound order.
         * One that cannot reach the top K (and, with --pareto, is already
         * dominated by a simulated point) never will: the threshold only
         * falls and the front only grows. */
        size_t nb = 0;
        while (next < n_ready && nb < batch_max) {
            search_cand *c = &all[order[next].idx];
            bool out_of_top = !o->exhaustive && best.n == best.k && order[next].key > best.v[best.n - 1].key;
            if (out_of_top && !o->pareto) {
                done = true; /* sorted by the bound: so are all the rest */
                break;
            }
            if (out_of_top && front_dominates(all, front, n_front, c)) {
                c->status = SEARCH_SKIPPED_BOUND;
                cnt->skipped_bound++;
                next++;
                continue;
            }
            batch[nb++] = order[next++].idx;
        }
        if (nb == 0)
            break;
        parallel_for(o->jobs, sim_one, &sx, batch, nb);
        if (out_of_memory(all, batch, nb)) {
            free(order);
            free(batch);
            free(best.v);
            free(front);
            free(all);
            return sim_err_set(err, SIM_ENOMEM, "out of memory simulating layouts");
        }
        if (o->on_progress)
            o->on_progress(o->progress_ctx, (int64_t)next, (int64_t)n_ready);
        for (size_t j = 0; j < nb; j++) {
            search_cand *c = &all[batch[j]];
            cnt->simulated++;
            if (c->status == SEARCH_FAILED)
                cnt->failed++;
            if (c->status == SEARCH_FEASIBLE) {
                ranked rr = rank_of(o, c, batch[j]);
                topk_add(&best, &rr);
                if (o->pareto)
                    n_front = front_add(all, front, n_front, batch[j]);
            }
        }
    }
    for (; next < n_ready; next++) {
        all[order[next].idx].status = SEARCH_SKIPPED_BOUND;
        cnt->skipped_bound++;
    }
    free(front);
    out->sim_wall_s = now_s() - ts;
    free(batch);
    free(best.v);

    /* Phase 4: rank what was simulated: feasible first. */
    size_t n_sim = 0;
    for (size_t i = 0; i < n_all; i++) {
        search_status st = all[i].status;
        if (st == SEARCH_FEASIBLE || st == SEARCH_OVER_MEMORY) {
            ranked rr = rank_of(o, &all[i], i);
            if (st != SEARCH_FEASIBLE)
                rr.key = INFINITY;
            order[n_sim++] = rr;
            if (st == SEARCH_FEASIBLE)
                cnt->feasible++;
            else if (st == SEARCH_OVER_MEMORY)
                cnt->over_memory++;
        }
    }
    qsort(order, n_sim, sizeof *order, cmp_ranked);
    out->cands = malloc((n_sim + 1) * sizeof *out->cands);
    out->pareto = malloc((n_sim + 1) * sizeof *out->pareto);
    if (!out->cands || !out->pareto) {
        free(order);
        free(all);
        search_result_free(out);
        return sim_err_set(err, SIM_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n_sim; i++)
        out->cands[i] = all[order[i].idx];
    out->n_cands = n_sim;
    out->n_feasible = (size_t)cnt->feasible;
    free(order);
    free(all);
    if (o->pareto)
        out->n_pareto = pareto_front(out->cands, out->n_feasible, out->pareto);

    /* The rules of thumb, at the GPU count of the best (else the first). */
    int64_t bw = out->n_feasible ? out->cands[0].world : out->worlds[0];
    heur_baseline(base, bw, &out->baseline);
    if (out->baseline.legal) {
        search_cand *b = &out->baseline_run;
        memset(b, 0, sizeof *b);
        b->order = -1;
        b->world = bw;
        b->par = out->baseline.par;
        b->train = out->baseline.train;
        b->ddp = out->baseline.ddp;
        run_inputs in;
        strategy_t s;
        sim_err e2;
        sim_err_clear(&e2);
        if (search_cand_inputs(base, b, &in, &s, &e2) == SIM_OK) {
            b->dp = s.dp;
            b->edp = s.edp;
            b->num_microbatches = s.num_microbatches;
            b->peak_lb_bytes = memory_peak_lower_bound(&in, &s);
            int brc = time_bound(&in, &s, &b->time_lb_s, &b->compute_s, &e2);
            if (brc == SIM_OK)
                brc = simulate(base, b, cap);
            if (brc == SIM_ENOMEM) {
                search_result_free(out);
                return sim_err_set(err, SIM_ENOMEM, "out of memory simulating the rules-of-thumb layout");
            }
            out->have_baseline = brc == SIM_OK;
        }
    }
    out->wall_s = now_s() - t0;
    return SIM_OK;
}

void search_result_free(search_result *r)
{
    if (!r)
        return;
    free(r->cands);
    free(r->pareto);
    r->cands = NULL;
    r->pareto = NULL;
    r->n_cands = r->n_feasible = r->n_pareto = 0;
}

/* ---- output -------------------------------------------------------------------- */

static const char *recompute_name(recompute_kind k)
{
    return k == RECOMPUTE_FULL ? "full" : k == RECOMPUTE_SELECTIVE ? "selective" : "none";
}

static void cp_comm_str(const search_cand *c, char *buf, size_t len)
{
    const parallel_spec *p = &c->par;
    if (p->cp <= 1) {
        snprintf(buf, len, "-");
        return;
    }
    switch (p->cp_comm_type) {
    case CP_COMM_P2P: snprintf(buf, len, "p2p"); break;
    case CP_COMM_ALL_GATHER: snprintf(buf, len, "all_gather"); break;
    case CP_COMM_A2A: snprintf(buf, len, "a2a"); break;
    case CP_COMM_A2A_P2P:
        if (p->n_hierarchical_cp_sizes == 2)
            snprintf(buf, len, "a2a+p2p:%" PRId64 "x%" PRId64, p->hierarchical_cp_sizes[0],
                     p->hierarchical_cp_sizes[1]);
        else
            snprintf(buf, len, "a2a+p2p");
        break;
    }
}

/* The layer split of a candidate: "even", "emb+loss" (embedding and loss
 * counted as layers), "7/../6" (layers on the first / last stage). */
static void split_str(const search_cand *c, char *buf, size_t len)
{
    const parallel_spec *p = &c->par;
    if (p->num_layers_in_first_pipeline_stage || p->num_layers_in_last_pipeline_stage)
        snprintf(buf, len, "%" PRId64 "/../%" PRId64, p->num_layers_in_first_pipeline_stage,
                 p->num_layers_in_last_pipeline_stage);
    else if (p->account_for_embedding_in_pipeline_split || p->account_for_loss_in_pipeline_split)
        snprintf(buf, len, "%s%s%s", p->account_for_embedding_in_pipeline_split ? "emb" : "",
                 p->account_for_embedding_in_pipeline_split && p->account_for_loss_in_pipeline_split ? "+" : "",
                 p->account_for_loss_in_pipeline_split ? "loss" : "");
    else
        snprintf(buf, len, "even");
}

static int64_t vp_of(const search_cand *c)
{
    return c->par.vp > 1 ? c->par.vp : 1;
}

static int64_t etp_of(const search_cand *c)
{
    return c->par.etp ? c->par.etp : c->par.tp;
}

/* The distributed-optimizer column: on, off, or Megatron-FSDP's ZeRO stage. */
static const char *dopt_name(const search_cand *c)
{
    static const char *const fsdp[] = {"fsdp0", "fsdp1", "fsdp2", "fsdp3"};
    if (c->ddp.use_megatron_fsdp && c->ddp.sharding >= 0 && c->ddp.sharding <= DP_SHARD_OPTIM_GRADS_PARAMS)
        return fsdp[c->ddp.sharding];
    return c->ddp.use_distributed_optimizer ? "on" : "off";
}

static double gpu_hours(const run_inputs *b, const search_opts *o, const search_cand *c)
{
    double tokens_per_step = (double)b->train.global_batch_size * (double)b->model.seq_length;
    return o->token_budget / tokens_per_step * c->step_time_s * (double)c->world / 3600.0;
}

/* The table's columns of exposed time: its communication streams, EP's
 * only for MoE models. */
static bool exposed_column(stream_kind k, bool moe)
{
    return streams_is_comm(k) && (moe || k != STREAM_EP);
}

/* The table names the schedule when it is not Megatron's everywhere. */
static bool schedule_column(const run_inputs *b, const search_opts *o)
{
    return o->schedules || b->par.pipeline_schedule != SCHED_MEGATRON;
}

/* ... and the EP overlap when it is searched or asked for. */
static bool ep_overlap_column(const run_inputs *b, const search_opts *o)
{
    return o->ep_overlap || b->par.overlap_moe_ep_comm;
}

static void table_header(FILE *out, const run_inputs *b, const search_opts *o, bool moe)
{
    fprintf(out, "%-8s %5s %3s %3s %-8s %3s %3s", "rank", "GPUs", "TP", "PP", "split", "VP", "CP");
    if (moe)
        fprintf(out, " %4s %3s", "EP", "ETP");
    fprintf(out, " %3s %3s %-9s %-14s %4s %9s %9s %5s %8s %8s %7s", "SP", "MBS", "recompute", "cp_comm",
            "dopt", "step s", "tok/s/GPU", "MFU%", "peak GiB", "free GiB", "bubble%");
    if (schedule_column(b, o))
        fprintf(out, " %-11s", "schedule");
    if (ep_overlap_column(b, o))
        fprintf(out, " %-4s", "epov");
    if (o->token_budget > 0)
        fprintf(out, " %10s", "GPU-hours");
    fputs("  exposed s:", out);
    for (int k = 0; k < STREAM_KINDS; k++)
        if (exposed_column((stream_kind)k, moe))
            fprintf(out, " %6s", stream_kind_name((stream_kind)k));
    fputc('\n', out);
}

static void table_row(FILE *out, const char *label, const run_inputs *b, const search_opts *o,
                      const search_result *r, const search_cand *c, bool moe)
{
    char cpc[32], split[32];
    cp_comm_str(c, cpc, sizeof cpc);
    split_str(c, split, sizeof split);
    fprintf(out, "%-8s %5" PRId64 " %3" PRId64 " %3" PRId64 " %-8s %3" PRId64 " %3" PRId64, label, c->world,
            c->par.tp, c->par.pp, split, vp_of(c), c->par.cp);
    if (moe)
        fprintf(out, " %4" PRId64 " %3" PRId64, c->par.ep, etp_of(c));
    fprintf(out, " %3s %3" PRId64 " %-9s %-14s %4s %9.3f %9.1f %5.1f %8.2f %8.2f %7.1f",
            c->par.sequence_parallel ? "on" : "off", c->train.micro_batch_size,
            recompute_name(c->par.recompute_granularity), cpc, dopt_name(c),
            c->step_time_s, c->tokens_per_s_per_gpu, 100.0 * c->mfu, c->peak_bytes / GIB,
            (r->capacity_bytes - c->peak_bytes) / GIB, 100.0 * c->bubble_fraction);
    if (schedule_column(b, o))
        fprintf(out, " %-11s", sched_name_str(c->par.pipeline_schedule));
    if (ep_overlap_column(b, o))
        fprintf(out, " %-4s", c->par.overlap_moe_ep_comm ? "on" : "off");
    if (o->token_budget > 0)
        fprintf(out, " %10.0f", gpu_hours(b, o, c));
    fputs("            ", out);
    for (int k = 0; k < STREAM_KINDS; k++)
        if (exposed_column((stream_kind)k, moe))
            fprintf(out, " %6.3f", c->exposed_s[k]);
    fputc('\n', out);
}

/* "TP 4 -> 8, VP 5 -> 1": the settings in which b differs from a. */
static void diff_str(const search_cand *a, const search_cand *b, bool moe, char *buf, size_t len)
{
    size_t w = 0;
    buf[0] = '\0';
#define DIFF_INT(name, x, y)                                                                          \
    if ((x) != (y) && w < len)                                                                        \
    w += (size_t)snprintf(buf + w, len - w, "%s%s %" PRId64 " -> %" PRId64, w ? ", " : "", name, (int64_t)(x), \
                          (int64_t)(y))
#define DIFF_STR(name, x, y)                                                                          \
    if (strcmp((x), (y)) && w < len)                                                                  \
    w += (size_t)snprintf(buf + w, len - w, "%s%s %s -> %s", w ? ", " : "", name, (x), (y))
    DIFF_INT("GPUs", a->world, b->world);
    DIFF_INT("TP", a->par.tp, b->par.tp);
    DIFF_INT("PP", a->par.pp, b->par.pp);
    char sa[32], sb[32];
    split_str(a, sa, sizeof sa);
    split_str(b, sb, sizeof sb);
    DIFF_STR("layer split", sa, sb);
    DIFF_INT("VP", vp_of(a), vp_of(b));
    DIFF_INT("CP", a->par.cp, b->par.cp);
    if (moe) {
        DIFF_INT("EP", a->par.ep, b->par.ep);
        DIFF_INT("ETP", etp_of(a), etp_of(b));
    }
    DIFF_STR("SP", a->par.sequence_parallel ? "on" : "off", b->par.sequence_parallel ? "on" : "off");
    DIFF_INT("MBS", a->train.micro_batch_size, b->train.micro_batch_size);
    DIFF_STR("recompute", recompute_name(a->par.recompute_granularity),
             recompute_name(b->par.recompute_granularity));
    char ca[32], cb[32];
    cp_comm_str(a, ca, sizeof ca);
    cp_comm_str(b, cb, sizeof cb);
    DIFF_STR("cp_comm", ca, cb);
    DIFF_STR("distributed optimizer", dopt_name(a), dopt_name(b));
    DIFF_STR("schedule", sched_name_str(a->par.pipeline_schedule), sched_name_str(b->par.pipeline_schedule));
    DIFF_STR("EP overlap", a->par.overlap_moe_ep_comm ? "on" : "off", b->par.overlap_moe_ep_comm ? "on" : "off");
#undef DIFF_INT
#undef DIFF_STR
    if (!w)
        snprintf(buf, len, "nothing searched");
}

typedef struct component {
    const char *what;  /* "in the pipeline bubble", ... */
    double a, b;
} component;

static int cmp_component(const void *x, const void *y)
{
    const component *p = x, *q = y;
    double dp = fabs(p->b - p->a), dq = fabs(q->b - q->a);
    return dp > dq ? -1 : dp < dq;
}

/* The reasons a beats b, largest measured differences first. */
static void reasons(FILE *out, const char *na, const search_cand *a, const char *nb, const search_cand *b,
                    double cap, bool moe)
{
    char diff[512];
    diff_str(a, b, moe, diff, sizeof diff);
    double dt = b->step_time_s - a->step_time_s;
    fprintf(out, "%s differs from %s in: %s\n", nb, na, diff);
    if (dt <= 0) {
        fprintf(out, "  both simulate %.3f s per step; %s ranks first on fewer GPUs, then less memory, "
                     "then search order\n", a->step_time_s, na);
    } else {
        fprintf(out, "  %s is %.3f s (%.1f%%) faster per step: %.3f s vs %.3f s\n", na, dt,
                100.0 * dt / b->step_time_s, a->step_time_s, b->step_time_s);
    }
    component comp[] = {
        {"in the pipeline bubble", a->bubble_s, b->bubble_s},
        {"of exposed TP communication", a->exposed_s[STREAM_TP], b->exposed_s[STREAM_TP]},
        {"of exposed CP communication", a->exposed_s[STREAM_CP], b->exposed_s[STREAM_CP]},
        {"of exposed EP communication", a->exposed_s[STREAM_EP], b->exposed_s[STREAM_EP]},
        {"of exposed DP communication", a->exposed_s[STREAM_DP], b->exposed_s[STREAM_DP]},
        {"of exposed PP communication", a->exposed_s[STREAM_PP], b->exposed_s[STREAM_PP]},
        {"of compute on the busiest stage", a->compute_s, b->compute_s},
    };
    const size_t n = sizeof comp / sizeof comp[0];
    qsort(comp, n, sizeof comp[0], cmp_component);
    int shown = 0;
    for (size_t i = 0; i < n && shown < 4; i++) {
        double d = comp[i].b - comp[i].a;
        if (fabs(d) < 5e-4)
            break;
        fprintf(out, "  - %s%.3f s %s %s (%.3f s vs %.3f s)", d > 0 ? "" : "but ", fabs(d),
                d > 0 ? "less" : "more", comp[i].what, comp[i].a, comp[i].b);
        if (!strcmp(comp[i].what, "of compute on the busiest stage") &&
            a->par.recompute_granularity != b->par.recompute_granularity)
            fprintf(out, ": recompute %s vs %s", recompute_name(a->par.recompute_granularity),
                    recompute_name(b->par.recompute_granularity));
        fputc('\n', out);
        shown++;
    }
    if (!shown)
        fputs("  - no component differs by 0.5 ms or more\n", out);
    fprintf(out, "  - memory: %s peaks at %.1f GiB (%.1f GiB free), %s at %.1f GiB (%.1f GiB free)\n", na,
            a->peak_bytes / GIB, (cap - a->peak_bytes) / GIB, nb, b->peak_bytes / GIB,
            (cap - b->peak_bytes) / GIB);
}

static void print_counts(FILE *out, const search_result *r)
{
    const search_counts *c = &r->counts;
    fprintf(out, "searched %" PRId64 " layouts: %" PRId64 " illegal, %" PRId64 " equivalent to another, %" PRId64
                 " pruned by memory before simulation (lower bound above %.1f GiB), %" PRId64
                 " skipped by the time bound, %" PRId64 " simulated (%" PRId64 " fit, %" PRId64 " over HBM",
            c->enumerated, c->illegal, c->duplicate, c->pruned_memory, r->capacity_bytes / GIB, c->skipped_bound,
            c->simulated, c->feasible, c->over_memory);
    if (c->failed)
        fprintf(out, ", %" PRId64 " failed", c->failed);
    fputs(")\n", out);
}

static void layout_str(const search_cand *c, bool moe, char *buf, size_t len)
{
    char cpc[32], split[32];
    cp_comm_str(c, cpc, sizeof cpc);
    split_str(c, split, sizeof split);
    size_t w = (size_t)snprintf(buf, len, "TP %" PRId64 " PP %" PRId64 "%s%s%s VP %" PRId64 " CP %" PRId64,
                                c->par.tp, c->par.pp, strcmp(split, "even") ? " (" : "",
                                strcmp(split, "even") ? split : "", strcmp(split, "even") ? ")" : "", vp_of(c),
                                c->par.cp);
    if (moe && w < len)
        w += (size_t)snprintf(buf + w, len - w, " EP %" PRId64 " ETP %" PRId64, c->par.ep, etp_of(c));
    if (w < len)
        snprintf(buf + w, len - w, " SP %s MBS %" PRId64 " recompute %s%s%s dist-opt %s",
                 c->par.sequence_parallel ? "on" : "off", c->train.micro_batch_size,
                 recompute_name(c->par.recompute_granularity), c->par.cp > 1 ? " cp_comm " : "",
                 c->par.cp > 1 ? cpc : "", dopt_name(c));
}

/* What reruns a candidate: parsim run CONFIG <these words>. */
static void rerun_words(FILE *out, const run_inputs *b, const search_cand *c)
{
    run_inputs in = *b;
    in.cluster.num_gpus = c->world;
    in.par = c->par;
    in.train = c->train;
    in.ddp = c->ddp;
    handover_overrides(out, &in, HANDOVER_PARSIM);
}

void search_print(FILE *out, const run_inputs *b, const search_opts *o, const search_result *r)
{
    const model_spec *m = &b->model;
    const bool moe = model_is_moe(m);
    double total, active;
    heur_model_params(m, &total, &active);
    fprintf(out, "parsim search: %s (%.1fB parameters", m->name[0] ? m->name : "model", total / 1e9);
    if (moe)
        fprintf(out, ", %.1fB active", active / 1e9);
    fprintf(out, ") on ");
    for (int i = 0; i < r->n_worlds; i++)
        fprintf(out, "%s%" PRId64, i ? ", " : "", r->worlds[i]);
    fprintf(out, " x %s (%s), seq %" PRId64 ", global batch %" PRId64 ", %s\n", b->cluster.gpu.name,
            b->cluster.name[0] ? b->cluster.name : "cluster", m->seq_length, b->train.global_batch_size,
            precision_name(b->par.precision));
    fprintf(out, "  ranked by %s; HBM %.1f GiB per GPU; ddp overlap_grad_reduce %s, overlap_param_gather %s "
                 "(with the distributed optimizer)",
            o->rank == SEARCH_RANK_TIME     ? "step time"
            : o->rank == SEARCH_RANK_TOKENS ? "tokens/s per GPU"
                                            : "GPU-hours for the token budget",
            r->capacity_bytes / GIB, b->ddp.overlap_grad_reduce ? "on" : "off",
            b->ddp.overlap_param_gather ? "on" : "off");
    if (o->token_budget > 0)
        fprintf(out, "; token budget %.4g", o->token_budget);
    fputc('\n', out);
    if (o->pinned) {
        fputs("  fixed by the command line:", out);
        for (int d = 0; d < SEARCH_DIMS; d++)
            if (pinned(o, (search_dim)d))
                fprintf(out, " %s", dim_keys[d]);
        fputc('\n', out);
    }
    fputc('\n', out);

    if (r->n_feasible == 0) {
        fputs("no layout fits: ", out);
        if (r->closest.status == SEARCH_ILLEGAL)
            fprintf(out, "none is legal (%s)\n", r->first_illegal);
        else {
            char lay[256];
            layout_str(&r->closest, moe, lay, sizeof lay);
            if (r->closest.peak_lb_bytes > r->capacity_bytes)
                fprintf(out, "the smallest memory lower bound is %.1f GiB > %.1f GiB HBM, on %" PRId64
                             " GPUs with %s\n",
                        r->closest.peak_lb_bytes / GIB, r->capacity_bytes / GIB, r->closest.world, lay);
            else
                fprintf(out, "every layout whose memory lower bound fits peaks above %.1f GiB HBM when "
                             "simulated; the smallest bound is %.1f GiB, on %" PRId64 " GPUs with %s\n",
                        r->capacity_bytes / GIB, r->closest.peak_lb_bytes / GIB, r->closest.world, lay);
        }
        print_counts(out, r);
        return;
    }

    size_t top = r->n_feasible < (size_t)o->top ? r->n_feasible : (size_t)o->top;
    table_header(out, b, o, moe);
    for (size_t i = 0; i < top; i++) {
        char label[24];
        snprintf(label, sizeof label, "%zu", i + 1);
        table_row(out, label, b, o, r, &r->cands[i], moe);
    }
    if (r->have_baseline)
        table_row(out, "rules", b, o, r, &r->baseline_run, moe);
    fputs("\n#1 reruns as: parsim run CONFIG ", out);
    rerun_words(out, b, &r->cands[0]);
    fputs("\n\n", out);

    if (r->n_feasible >= 2) {
        fputs("why #1 beats #2:\n", out);
        reasons(out, "#1", &r->cands[0], "#2", &r->cands[1], r->capacity_bytes, moe);
        fputc('\n', out);
    }

    fprintf(out, "rules of thumb (Megatron Bridge parallelism guide) on %" PRId64 " GPUs:\n", r->baseline.world);
    for (int i = 0; i < r->baseline.n_notes; i++)
        fprintf(out, "  - %s\n", r->baseline.notes[i]);
    if (r->have_baseline) {
        const search_cand *bl = &r->baseline_run, *best = &r->cands[0];
        char lay[256];
        layout_str(bl, moe, lay, sizeof lay);
        fprintf(out, "  => %s: %.3f s per step, %.1f tokens/s per GPU, peak %.1f GiB", lay, bl->step_time_s,
                bl->tokens_per_s_per_gpu, bl->peak_bytes / GIB);
        if (bl->status == SEARCH_OVER_MEMORY)
            fprintf(out, " -- does NOT fit in %.1f GiB\n", r->capacity_bytes / GIB);
        else
            fputs(" (fits)\n", out);
        double d = bl->step_time_s - best->step_time_s;
        if (best->world == bl->world && fabs(d) < 1e-12)
            fprintf(out, "  the best found simulates the same step time as the rules of thumb (%.3f s)\n",
                    best->step_time_s);
        else if (d > 0)
            fprintf(out, "  the best found is %.1f%% faster than the rules of thumb (%.3f s vs %.3f s per step, "
                         "%.2fx the throughput)\n",
                    100.0 * d / bl->step_time_s, best->step_time_s, bl->step_time_s,
                    bl->step_time_s / best->step_time_s);
        else
            fprintf(out, "  the best found is %.1f%% slower than the rules of thumb (%.3f s vs %.3f s per step): "
                         "their layout lies outside the searched ranges or bound\n",
                    100.0 * -d / bl->step_time_s, best->step_time_s, bl->step_time_s);
        fputc('\n', out);
        fputs("why #1 beats the rules of thumb:\n", out);
        reasons(out, "#1", best, "the rules' layout", bl, r->capacity_bytes, moe);
    } else if (r->baseline.legal) {
        fputs("  (the rules' layout could not be simulated)\n", out);
    }
    fputc('\n', out);

    if (o->pareto) {
        fprintf(out, "Pareto front over (step time, GPUs, peak memory): %zu layouts\n", r->n_pareto);
        fprintf(out, "  %5s %9s %9s %8s  %s\n", "GPUs", "step s", "tok/s/GPU", "peak GiB", "layout");
        for (size_t i = 0; i < r->n_pareto; i++) {
            const search_cand *c = &r->cands[r->pareto[i]];
            char lay[256];
            layout_str(c, moe, lay, sizeof lay);
            fprintf(out, "  %5" PRId64 " %9.3f %9.1f %8.2f  %s\n", c->world, c->step_time_s, c->tokens_per_s_per_gpu,
                    c->peak_bytes / GIB, lay);
        }
        fputc('\n', out);
    }
    print_counts(out, r);
}

void search_print_timing(FILE *out, const search_opts *o, const search_result *r)
{
    double rate = r->sim_wall_s > 0 ? (double)r->counts.simulated / r->sim_wall_s : 0;
    fprintf(out, "parsim search: %" PRId64 " configurations simulated in %.2f s (%.0f per second, --jobs %d); "
                 "%" PRId64 " layouts checked, %.2f s in all\n",
            r->counts.simulated, r->sim_wall_s, rate, o->jobs, r->counts.enumerated, r->wall_s);
}

static void csv_row(FILE *out, const char *kind, size_t rank, const run_inputs *b, const search_opts *o,
                    const search_result *r, const search_cand *c)
{
    char cpc[32];
    cp_comm_str(c, cpc, sizeof cpc);
    if (rank)
        fprintf(out, "%s,%zu,", kind, rank);
    else
        fprintf(out, "%s,,", kind);
    fprintf(out, "%d,%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%d,%d,",
            c->status == SEARCH_FEASIBLE, c->world, c->par.tp, c->par.pp, c->par.num_layers_in_first_pipeline_stage,
            c->par.num_layers_in_last_pipeline_stage, c->par.account_for_embedding_in_pipeline_split,
            c->par.account_for_loss_in_pipeline_split);
    fprintf(out,
            "%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64
            ",%" PRId64 ",%d,%" PRId64 ",%" PRId64 ",%s,%s,%d,",
            vp_of(c), c->par.cp, c->par.ep,
            etp_of(c), c->dp, c->edp, c->par.sequence_parallel, c->train.micro_batch_size, c->num_microbatches,
            recompute_name(c->par.recompute_granularity), cpc, c->ddp.use_distributed_optimizer);
    fprintf(out, "%.9g,%.9g,%.9g,", c->step_time_s, c->tokens_per_s_per_gpu, c->mfu);
    if (o->token_budget > 0)
        fprintf(out, "%.9g,", gpu_hours(b, o, c));
    else
        fputc(',', out);
    fprintf(out, "%.9g,%.9g,%.0f,%.0f,%.0f,%.9g,%.9g", c->bubble_fraction, c->bubble_s, c->peak_bytes,
            r->capacity_bytes - c->peak_bytes, c->peak_lb_bytes, c->time_lb_s, c->compute_s);
    for (int k = 0; k < STREAM_KINDS; k++)
        if (streams_is_comm((stream_kind)k))
            fprintf(out, ",%.9g", c->exposed_s[k]);
    fprintf(out, ",%.9g,%s", c->exposed_total_s, sched_name_str(c->par.pipeline_schedule));
    if (o->fsdp) /* the column only a search over Megatron-FSDP has */
        fprintf(out, ",%s", dopt_name(c));
    if (ep_overlap_column(b, o))
        fprintf(out, ",%s", c->par.overlap_moe_ep_comm ? "true" : "false");
    /* a quoted cell: the words hold commas ([2,2]), never a double quote */
    fputs(",\"", out);
    rerun_words(out, b, c);
    fputs("\"\n", out);
}

void search_write_csv(FILE *out, const run_inputs *b, const search_opts *o, const search_result *r)
{
    fputs("kind,rank,fits,gpus,tp,pp,num_layers_in_first_pipeline_stage,num_layers_in_last_pipeline_stage,"
          "account_for_embedding_in_pipeline_split,account_for_loss_in_pipeline_split,"
          "vp,cp,ep,etp,dp,edp,sequence_parallel,micro_batch_size,num_microbatches,"
          "recompute_granularity,cp_comm_type,use_distributed_optimizer,step_time_s,tokens_per_s_per_gpu,mfu,"
          "gpu_hours,bubble_fraction,bubble_s,peak_bytes,headroom_bytes,peak_lower_bound_bytes,"
          "time_lower_bound_s,compute_s",
          out);
    for (int k = 0; k < STREAM_KINDS; k++)
        if (streams_is_comm((stream_kind)k))
            fprintf(out, ",exposed_%s_s", streams_desc((stream_kind)k)->key);
    fputs(",exposed_total_s,pipeline_schedule", out);
    if (o->fsdp)
        fputs(",dp_sharding", out);
    if (ep_overlap_column(b, o))
        fputs(",overlap_moe_expert_parallel_comm", out);
    fputs(",overrides\n", out);
    for (size_t i = 0; i < r->n_cands; i++)
        csv_row(out, "search", i < r->n_feasible ? i + 1 : 0, b, o, r, &r->cands[i]);
    if (r->have_baseline)
        csv_row(out, "baseline", 0, b, o, r, &r->baseline_run);
}
