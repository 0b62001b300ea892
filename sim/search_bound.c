/* search_bound: the step-time lower bound of a layout from its workload
 * (contract in search_bound.h).  Apart from the search proper because it
 * is the one place that reads pass templates op by op: the dependencies
 * and streams step.c simulates, not the search's candidates. */
#include "search_bound.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "schedule.h"
#include "units.h"
#include "workload.h"

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

/* Compute work and span of a pass.  The middle stages of a pipeline run
 * the same templates, so a pass equal to the one of the stage above (same
 * ops; workload zeroes their padding) takes its figures from there. */
typedef struct pass_figures {
    sim_time_ps work, span, critical; /* critical: chunk 0 only (fill and drain) */
} pass_figures;

/* A pass's figures in one scan to find its compute ops (and sum their
 * work) and one over its ops for both longest paths:
 *   span      least time from the start of the first compute op to the
 *             end of the last one: the longest path between them through
 *             the dependencies and the in-order streams (a pass's ops are
 *             consecutive on each stream).  The compute stream runs passes
 *             one after another, so no other pass can use the gaps inside
 *             it.  Without a path from the first compute op, the sum of
 *             the compute ops is still a bound.
 *   critical  (when asked) the longest dependency path from the start of
 *             op 0 to the end of the last op (ops not reachable from op 0
 *             through dependencies count nothing).
 * buf and crit hold n_ops entries each. */
static void figures_of(const wl_pass *p, bool want_critical, sim_time_ps *buf, sim_time_ps *crit, pass_figures *f)
{
    const sim_time_ps none = UINT64_MAX;
    int32_t first = -1, last = -1;
    sim_time_ps work = 0;
    for (int32_t i = 0; i < p->n_ops; i++)
        if (p->ops[i].stream == STREAM_COMPUTE) {
            if (first < 0)
                first = i;
            last = i;
            work = ps_add(work, p->ops[i].duration_ps);
        }
    *f = (pass_figures){.work = work};
    const bool span = first >= 0;
    if (p->n_ops <= 0 || (!span && !want_critical))
        return;
    int32_t prev_on[STREAM_KINDS];
    for (int k = 0; k < STREAM_KINDS; k++)
        prev_on[k] = -1;
    for (int32_t i = 0; i < p->n_ops; i++) {
        const wl_op *op = &p->ops[i];
        const int32_t d0 = op->dep_back[0] ? i - op->dep_back[0] : -1, d1 = op->dep_back[1] ? i - op->dep_back[1] : -1;
        if (span) {
            sim_time_ps start = i == first ? 0 : none;
            const int32_t preds[3] = {d0, d1, prev_on[op->stream]};
            for (int j = 0; j < 3; j++)
                if (preds[j] >= 0 && buf[preds[j]] != none && (start == none || buf[preds[j]] > start))
                    start = buf[preds[j]];
            buf[i] = start == none ? none : ps_add(start, op->duration_ps);
            prev_on[op->stream] = i;
        }
        if (want_critical) {
            sim_time_ps start = i == 0 ? 0 : none;
            const int32_t preds[2] = {d0, d1};
            for (int j = 0; j < 2; j++)
                if (preds[j] >= 0 && crit[preds[j]] != none && (start == none || crit[preds[j]] > start))
                    start = crit[preds[j]];
            crit[i] = start == none ? none : ps_add(start, op->duration_ps);
        }
    }
    if (span)
        f->span = buf[last] != none ? buf[last] : work;
    if (want_critical)
        f->critical = crit[p->n_ops - 1] == none ? 0 : crit[p->n_ops - 1];
}

/* The figures are a function of the pass's ops alone, so an equal
 * template of an earlier layout (wl_cache.h) has them too; the critical
 * path is kept for every pass so that a kept entry serves chunk 0 too. */
static int pass_cost(const wl_pass *p, const wl_pass *above, bool chunk0, pass_figures *f, sim_time_ps *buf,
                     wl_cache *cache, sim_err *err)
{
    if (above && above->n_ops == p->n_ops &&
        (p->n_ops == 0 || above->ops == p->ops || memcmp(above->ops, p->ops, (size_t)p->n_ops * sizeof *p->ops) == 0))
        return SIM_OK; /* *f still holds the figures of `above` */
    const void *kept = cache ? wl_cache_get(cache, p, WL_CACHE_BOUND, sizeof *f) : NULL;
    if (kept) {
        memcpy(f, kept, sizeof *f);
    } else {
        figures_of(p, chunk0 || cache, buf, buf + p->n_ops, f);
        if (cache && wl_cache_put(cache, p, WL_CACHE_BOUND, f, sizeof *f) != SIM_OK)
            return sim_err_set(err, SIM_ENOMEM, "out of memory keeping a pass's figures");
    }
    if (!chunk0)
        f->critical = 0;
    return SIM_OK;
}

int search_time_bound(const run_inputs *in, const strategy_t *s, double *lb_s, double *compute_s,
                      sim_err *err)
{
    workload_t *wl = NULL;
    int rc = workload_build(&wl, in, s, err);
    if (rc != SIM_OK)
        return rc;
    rc = search_time_bound_of(wl, s, NULL, lb_s, compute_s, err);
    workload_destroy(wl);
    return rc;
}

int search_time_bound_of(const workload_t *wl, const strategy_t *s, wl_cache *cache, double *lb_s,
                         double *compute_s, sim_err *err)
{
    int rc = SIM_OK;
    const int64_t p = s->pp, v = s->v, M = s->num_microbatches;
    int32_t most = 0;
    for (int64_t r = 0; r < p; r++)
        for (int64_t c = 0; c < v; c++) {
            const wl_chunk *ch = &wl->stages[r].chunks[c];
            for (int k = 0; k < SCHED_KINDS; k++)
                if (wl_chunk_pass(ch, (sched_kind)k)->n_ops > most)
                    most = wl_chunk_pass(ch, (sched_kind)k)->n_ops;
        }
    sim_time_ps *buf = malloc(2 * ((size_t)most + 1) * sizeof *buf); /* figures_of's two */
    if (!buf)
        return sim_err_set(err, SIM_ENOMEM, "out of memory");
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
            for (int k = 0; k < SCHED_KINDS && rc == SIM_OK; k++) {
                rc = pass_cost(wl_chunk_pass(ch, (sched_kind)k), above ? wl_chunk_pass(above, (sched_kind)k) : NULL,
                               c == 0, &cost[c][k], buf, cache, err);
                work = ps_add(work, cost[c][k].work);
                /* Overlapped pairs fill each other's gaps: only the
                 * compute work stays a bound. */
                span = ps_add(span, s->par.overlap_moe_ep_comm ? cost[c][k].work : cost[c][k].span);
            }
        }
        if (rc != SIM_OK)
            break;
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
    if (rc != SIM_OK)
        return rc;
    *lb_s = time_as_s(best_lb);
    *compute_s = time_as_s(most_compute);
    return SIM_OK;
}
