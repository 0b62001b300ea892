/* search: the run of a search (contract in search.h): its phases, each
 * candidate's inputs, the ranking key.  The pieces live beside it:
 * search_space (GPU counts, pinned dimensions, enumeration), search_bound
 * (the time bound; the memory bound is memory's), search_rank (order,
 * top K, Pareto front), search_print (text and CSV), pool (the workers).
 *
 * Phases:
 *   1. enumerate  nested loops over the GPU counts and the dimensions, in a
 *                 fixed order; each combination gets its enumeration index.
 *   2. prepare    (parallel) per combination: strategy_resolve, the memory
 *                 lower bound, then for the survivors the workload and the
 *                 time lower bound.  Each result goes into its own slot.
 *                 Exhaustive (every survivor is simulated whatever the
 *                 bounds): the step too, on the same workload, its figures
 *                 kept aside for phase 3.
 *   3. simulate   (parallel) the survivors in ascending order of the time
 *                 bound, SEARCH_BATCH at a time; between batches the bound
 *                 threshold (the K-th best key so far) is updated on one
 *                 thread.  Batch boundaries do not depend on the jobs, so
 *                 neither does which candidates are simulated.
 *                 Exhaustive: the figures kept aside, taken in this order.
 *   4. rank       sort, Pareto front, the rules-of-thumb baseline.
 * Nothing here keeps state between calls; workers share only the
 * read-only base inputs and write disjoint slots.  Each worker keeps, for
 * the call, a copy of the base inputs (a candidate sets its own fields in
 * it) and a bounded cache of pass figures (wl_cache.h: exact, keyed by the
 * templates themselves), so that layouts sharing templates simulate and
 * bound each once.
 */
#include "search.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "memory.h"
#include "pool.h"
#include "search_bound.h"
#include "search_rank.h"
#include "search_space.h"
#include "step.h"
#include "wl_cache.h"
#include "workload.h"

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

bool search_pinned(const search_opts *o, search_dim d)
{
    return (o->pinned >> d) & 1u;
}

/* ---- candidates ------------------------------------------------------------ */

/* The candidate's inputs in `in`, a copy of the base: the fields a
 * candidate sets are the only ones that differ (so a worker copies the
 * large base once, not per candidate). */
static int cand_inputs_into(const search_cand *c, run_inputs *in, strategy_t *s, sim_err *err)
{
    in->cluster.num_gpus = c->world;
    in->par = c->par;
    in->train = c->train;
    in->ddp = c->ddp;
    return strategy_resolve(s, &in->model, &in->cluster, &in->par, &in->train, &in->ddp, err);
}

int search_cand_inputs(const run_inputs *base, const search_cand *c, run_inputs *in, strategy_t *s,
                       sim_err *err)
{
    *in = *base;
    return cand_inputs_into(c, in, s, err);
}

double search_key(const search_opts *o, const search_cand *c)
{
    return o->rank == SEARCH_RANK_TIME ? c->step_time_s : c->step_time_s * (double)c->world;
}

/* ---- the simulated figures ---------------------------------------------- */

/* An exhaustive search simulates each candidate while it prepares it, on
 * the same workload: the figures go into the candidate, its status and
 * error (cand_pre) aside until phase 3 takes them in bound order, so that
 * the tally, the batch and the ranking see what they saw when phase 3
 * simulated. */
typedef struct cand_pre {
    search_status status;
    int err_code;
} cand_pre;

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

/* The figures sim_fill sets, as before any simulation. */
static void sim_clear(search_cand *c)
{
    c->step_time_s = c->tokens_per_s_per_gpu = c->mfu = c->bubble_fraction = c->bubble_s = c->peak_bytes = 0;
    memset(c->exposed_s, 0, sizeof c->exposed_s);
    c->exposed_total_s = 0;
}

/* Simulates the step of resolved inputs (on wl when not NULL: lent) into
 * c's figures and status. */
static int run_step(const run_inputs *in, const strategy_t *s, workload_t *wl, wl_cache *cache, double cap,
                    search_cand *c)
{
    sim_err err;
    sim_err_clear(&err);
    step_t *st = NULL;
    int rc = step_run_reuse(&st, in, s, wl, cache, &err);
    if (rc == SIM_OK) {
        sim_fill(c, step_result_get(st), cap);
    } else {
        c->status = SEARCH_FAILED;
        c->err_code = rc;
    }
    step_destroy(st);
    if (!wl && cache) /* the step's own workload is gone */
        wl_cache_forget(cache);
    return rc;
}

/* ---- phase 2: prepare ---------------------------------------------------- */

/* With pre (exhaustive), a candidate that passes pruning is simulated on
 * the workload its bound came from (its status and error into *pre; it
 * stays SEARCH_READY). */
static void prepare(run_inputs *in, bool base_fsdp, search_cand *c, double cap, wl_cache *cache, cand_pre *pre)
{
    strategy_t s;
    sim_err err;
    sim_err_clear(&err);
    int rc = cand_inputs_into(c, in, &s, &err);
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
    if ((!c->ddp.use_distributed_optimizer || (c->ddp.use_megatron_fsdp && !base_fsdp)) &&
        s.dp * s.cp == 1 && s.edp == 1) {
        c->status = SEARCH_DUPLICATE;
        return;
    }
    c->peak_lb_bytes = memory_peak_lower_bound(in, &s);
    if (c->peak_lb_bytes > cap) {
        c->status = SEARCH_PRUNED_MEMORY;
        return;
    }
    workload_t *wl = NULL;
    if (workload_build(&wl, in, &s, &err) != SIM_OK ||
        search_time_bound_of(wl, &s, cache, &c->time_lb_s, &c->compute_s, &err) != SIM_OK) {
        workload_destroy(wl);
        if (cache)
            wl_cache_forget(cache);
        c->status = SEARCH_FAILED;
        c->err_code = err.code;
        return;
    }
    c->status = SEARCH_READY;
    if (pre) {
        run_step(in, &s, wl, cache, cap, c);
        *pre = (cand_pre){c->status, c->err_code};
        c->status = SEARCH_READY;
        c->err_code = 0;
    }
    workload_destroy(wl);
    if (cache)
        wl_cache_forget(cache);
}

/* ---- phase 3: simulate --------------------------------------------------- */

/* in: a copy of the base (cand_inputs_into). */
static int simulate(run_inputs *in, search_cand *c, double cap, wl_cache *cache)
{
    strategy_t s;
    sim_err err;
    sim_err_clear(&err);
    int rc = cand_inputs_into(c, in, &s, &err);
    if (rc == SIM_OK)
        return run_step(in, &s, NULL, cache, cap, c);
    c->status = SEARCH_FAILED;
    c->err_code = rc;
    return rc;
}

/* ---- phases 2 and 3 on the pool ------------------------------------------ */

/* Workers share the read-only base and write only their own slot; each
 * keeps its own cache of pass figures (made on its first item). */
typedef struct phase_ctx {
    const run_inputs *base;
    search_cand *c;
    double cap;
    cand_pre *pre;        /* exhaustive: per candidate, simulated in phase 2 */
    wl_cache **cache;     /* [worker] */
    run_inputs **in;      /* [worker]: a copy of base, the candidate's fields set */
} phase_ctx;

static wl_cache *worker_cache(phase_ctx *x, int worker)
{
    if (!x->cache[worker])
        x->cache[worker] = wl_cache_create(WL_CACHE_BYTES);
    return x->cache[worker];
}

/* worker_cache and worker_inputs: NULL when out of memory (the candidate
 * then fails with SIM_ENOMEM). */
static run_inputs *worker_inputs(phase_ctx *x, int worker)
{
    if (!x->in[worker] && (x->in[worker] = malloc(sizeof *x->in[worker])))
        *x->in[worker] = *x->base;
    return x->in[worker];
}

static void oom_cand(search_cand *c)
{
    c->status = SEARCH_FAILED;
    c->err_code = SIM_ENOMEM;
}

/* A candidate that failed for want of memory fails the search: its layout
 * was not judged, so no ranking without it is right.  Other failures are
 * the candidate's status. */
static int cand_status(const search_cand *c, sim_err *err)
{
    if (c->status == SEARCH_FAILED && c->err_code == SIM_ENOMEM)
        return sim_err_set(err, SIM_ENOMEM, "out of memory");
    return SIM_OK;
}

static int prep_one(void *arg, int worker, size_t i, sim_err *err)
{
    phase_ctx *x = arg;
    run_inputs *in = worker_inputs(x, worker);
    wl_cache *cache = worker_cache(x, worker);
    if (in && cache)
        prepare(in, x->base->ddp.use_megatron_fsdp, &x->c[i], x->cap, cache, x->pre ? &x->pre[i] : NULL);
    else
        oom_cand(&x->c[i]);
    return cand_status(&x->c[i], err);
}

static int sim_one(void *arg, int worker, size_t i, sim_err *err)
{
    phase_ctx *x = arg;
    run_inputs *in = x->pre ? NULL : worker_inputs(x, worker);
    wl_cache *cache = x->pre ? NULL : worker_cache(x, worker);
    if (x->pre) {
        x->c[i].status = x->pre[i].status;
        if (x->pre[i].status == SEARCH_FAILED)
            x->c[i].err_code = x->pre[i].err_code;
    } else if (in && cache)
        simulate(in, &x->c[i], x->cap, cache);
    else
        oom_cand(&x->c[i]);
    return cand_status(&x->c[i], err);
}

static void phase_free(phase_ctx *x)
{
    for (int w = 0; w < POOL_MAX_WORKERS; w++) {
        wl_cache_destroy(x->cache ? x->cache[w] : NULL);
        free(x->in ? x->in[w] : NULL);
    }
    free(x->cache);
    free(x->in);
    free(x->pre);
}

/* ---- the run ------------------------------------------------------------------ */

int search_run(const run_inputs *base, const search_opts *o, search_result *out, sim_err *err)
{
    memset(out, 0, sizeof *out);
    double t0 = now_s();
    int rc = search_space_check_pinned(base, o, err);
    if (rc == SIM_OK)
        rc = search_space_worlds(base, o, out, err);
    if (rc != SIM_OK)
        return rc;
    const double cap = base->cluster.gpu.hbm_capacity_bytes;
    out->capacity_bytes = cap;
    search_counts *cnt = &out->counts;

    search_cand *all;
    size_t n_all;
    if ((rc = search_space_enumerate(base, o, out->worlds, out->n_worlds, &all, &n_all, cnt, err)) != SIM_OK)
        return rc;

    phase_ctx px = {.base = base, .c = all, .cap = cap, .cache = calloc(POOL_MAX_WORKERS, sizeof *px.cache),
                    .in = calloc(POOL_MAX_WORKERS, sizeof *px.in)};
    if (o->exhaustive)
        px.pre = malloc((n_all + 1) * sizeof *px.pre);
    const double t_prep = now_s();
    pool_job job = {.jobs = o->jobs, .n = n_all, .fn = prep_one, .ctx = &px};
    if (!px.cache || !px.in || (o->exhaustive && !px.pre) || pool_run(&job, NULL) != SIM_OK) {
        phase_free(&px);
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
            (out->closest.status == SEARCH_ILLEGAL || c->peak_lb_bytes < out->closest.peak_lb_bytes)) {
            /* as it was before phase 3 simulated it (exhaustive: the
             * figures are in already) */
            out->closest = *c;
            sim_clear(&out->closest);
        }
    }

    /* Phase 3: ascending time bound, in batches. */
    search_ranked *order = malloc((n_ready + 1) * sizeof *order);
    /* Batch sizes are constants (never the number of jobs): which
     * candidates get simulated must not depend on it.  Exhaustive: one
     * batch, nothing to decide between batches. */
    const size_t batch_max = o->exhaustive ? (n_ready ? n_ready : 1) : o->pareto ? SEARCH_BATCH_PARETO : SEARCH_BATCH;
    size_t *batch = malloc(batch_max * sizeof *batch);
    size_t K = (size_t)(o->top > 2 ? o->top : 2);
    search_topk best = {.v = malloc(K * sizeof *best.v), .k = K};
    size_t *front = malloc((n_ready + 1) * sizeof *front);
    if (!order || !batch || !best.v || !front) {
        phase_free(&px);
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
            order[k++] = (search_ranked){search_rank_bound_key(o, &all[i]), all[i].world, all[i].peak_lb_bytes, all[i].order, i};
    qsort(order, n_ready, sizeof *order, search_rank_cmp);

    /* Exhaustive: the simulations ran with phase 2. */
    double ts = o->exhaustive ? t_prep : now_s();
    size_t n_front = 0;
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
            if (out_of_top && search_rank_front_dominates(all, front, n_front, c)) {
                c->status = SEARCH_SKIPPED_BOUND;
                cnt->skipped_bound++;
                next++;
                continue;
            }
            batch[nb++] = order[next++].idx;
        }
        if (nb == 0)
            break;
        pool_job sjob = {.jobs = o->jobs, .n = nb, .items = batch, .fn = sim_one, .ctx = &px};
        if (pool_run(&sjob, NULL) != SIM_OK) {
            phase_free(&px);
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
                search_ranked rr = search_rank_of(o, c, batch[j]);
                search_topk_add(&best, &rr);
                if (o->pareto)
                    n_front = search_rank_front_add(all, front, n_front, batch[j]);
            }
        }
    }
    for (; next < n_ready; next++) {
        all[order[next].idx].status = SEARCH_SKIPPED_BOUND;
        cnt->skipped_bound++;
    }
    free(front);
    phase_free(&px);
    out->sim_wall_s = now_s() - ts;
    free(batch);
    free(best.v);

    /* Phase 4: rank what was simulated: feasible first. */
    size_t n_sim = 0;
    for (size_t i = 0; i < n_all; i++) {
        search_status st = all[i].status;
        if (st == SEARCH_FEASIBLE || st == SEARCH_OVER_MEMORY) {
            search_ranked rr = search_rank_of(o, &all[i], i);
            if (st != SEARCH_FEASIBLE)
                rr.key = INFINITY;
            order[n_sim++] = rr;
            if (st == SEARCH_FEASIBLE)
                cnt->feasible++;
            else if (st == SEARCH_OVER_MEMORY)
                cnt->over_memory++;
        }
    }
    qsort(order, n_sim, sizeof *order, search_rank_cmp);
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
        out->n_pareto = search_rank_pareto(out->cands, out->n_feasible, out->pareto);

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
            int brc = search_time_bound(&in, &s, &b->time_lb_s, &b->compute_s, &e2);
            if (brc == SIM_OK)
                brc = simulate(&in, b, cap, NULL);
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
