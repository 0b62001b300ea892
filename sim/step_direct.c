/* step_direct: a whole step's figures straight from its schedule
 * (contract in step_direct.h). */
#include "step_direct.h"

#include <stdlib.h>
#include <string.h>

#include "schedule.h"
#include "step_internal.h"
#include "step_measure.h"
#include "units.h"

/* When a task ends (or may start) as the engine orders instants: the
 * time and the round of that instant (engine.c: a task of some length
 * ends in round 1, one of none in the round after its start; a lag or a
 * release ends in round 1), packed as time * 8 + round so that the later
 * of two is their maximum.  Times stay below 2^60 ps (DIRECT_WORK_MAX)
 * and rounds below 8 (zero-length tasks chained at one instant: a step
 * with more is declined). */
typedef uint64_t when;
#define ROUND_BITS 3
#define ROUND_MAX ((1u << ROUND_BITS) - 1)

static inline when at(sim_time_ps t, uint32_t rd)
{
    return (t << ROUND_BITS) | rd;
}

static inline sim_time_ps T(when w)
{
    return w >> ROUND_BITS;
}

static inline uint32_t RD(when w)
{
    return (uint32_t)(w & ROUND_MAX);
}

static inline when later(when a, when b)
{
    return b > a ? b : a;
}

/* The end of a task of d that starts at `start` (a round past the
 * packing's: the walk declines; wrong ends then go nowhere). */
static inline when end_of(when start, sim_time_ps d)
{
    return d ? at(T(start) + d, 1) : start + 1;
}

/* A stage's intervals of one stream, in start order. */
typedef struct ivlist {
    interval *v;
    size_t n, cap;
} ivlist;

/* A counter as the engine's sweep reads its changes in task order: the
 * value, the peak, the last change's (instant, phase). */
typedef struct dctr {
    int64_t value, peak;
    sim_time_ps t;
    uint32_t ph;
} dctr;

/* The last sweep of a shifted (chunk, kind)'s template on a stage
 * (step_measure.h's sweep_memo), its place in walk.memo_iv made the
 * first time one of its passes is shifted. */
typedef struct dmemo {
    sweep_memo m;
    bool placed;
} dmemo;

/* What a (chunk, kind)'s common pass (step.c: one task of its span, or
 * its host stand-in) needs, looked up once per stage: mode 0 where it
 * takes the general path, 1 one task of gpu (host ahead, or no host ops),
 * 2 a host stand-in (its summary's lead, gpu and rest; no sync); the
 * counter deltas of link_forward / link_backward (a forward's on its
 * span, a backward's flight on its last task); where its input comes
 * from (src_r -1: none) and its send goes (dst_r -1: none). */
typedef struct dkind {
    uint8_t mode;
    const pass_summary *sum;
    sim_time_ps gpu;
    int64_t act_s, act_e, inf_s, inf_e;
    int64_t src_r, src_c, dst_r;
    sim_time_ps src_send;
} dkind;

/* A pass at its place in its stage's order, looked up once: its index
 * in walk.last_end, its input's (-1: none) and its forward's (a
 * backward's; -1: a forward), its (chunk, kind). */
typedef struct dpos {
    int32_t own, src, fwd;
    uint32_t q;
} dpos;

/* One stage's walk: its order and how far it is, its streams, its host,
 * its counters and what measure reads. */
typedef struct dstage {
    sched_pass *seq;
    dpos *pos;                /* per place in seq */
    int64_t n_seq, i;
    bool no_host, lead_placed, fold, done;
    sim_time_ps host_clock;   /* where the folded host work ends */
    bool rest_pending;
    sim_time_ps rest_ps;
    when rest_wait;           /* what the pending rest waits for: its pass's host wait (0: nothing) */
    when clock[STREAM_KINDS]; /* each stream's last task's end (0: none) */
    bool sent;                /* the last pass sent (blocking p2p waits for it) */
    sim_time_ps sent_end;     /* its last task's end */
    sim_time_ps last_send_end; /* the last send's end (sends must not queue) */
    bool any_send;
    when last_rs;             /* the last DP reduction's end */
    bool has_rs;
    int64_t *last_grad;       /* [chunk] */
    bool *first_f_done;       /* [chunk] */
    when *ag_end;             /* [chunk * most_buckets + k]: gather of bucket k */
    sim_time_ps send_ps;
    dkind *kinds;              /* per (chunk, kind) */
    /* The union of the passes' intervals so far (step_measure's merge,
     * taken as they come in start order): its length and the open piece. */
    sim_time_ps busy_ps, busy_a, busy_b;
    bool busy_open;
    ivlist list[STREAM_KINDS]; /* spans of the tasks measure reads (not replaced), PP: the sends */
    ivlist inj[STREAM_KINDS];  /* shifted passes' ops */
    dctr ctr[CTR_PER_STAGE];
    bool ctr_bad;
    sim_time_ps *n_whole, *n_shifted; /* per (chunk, kind) */
    dmemo *memo;               /* per (chunk, kind) */
    sim_time_ps pipe_end;
} dstage;

/* The walk. */
typedef struct walk {
    step_t *st;
    const run_inputs *in;
    int rc;                    /* SIM_OK, DIRECT_DECLINED or SIM_ENOMEM */
    dstage *stages;
    when *last_end;            /* per pass (pass_index): its last task's end, NOT_YET before */
    bool ag_first, distopt, blocking;
    sched_kind grad, free_kind;
    int32_t most_buckets;
    sim_time_ps work, makespan;
    uint64_t tasks;
    /* Per stage's stream (stream_of), for the host streams: the host's own
     * busy time (step.host_own_ps). */
    sim_time_ps *host_own;
    /* A pass placed as ops: per op its start and end (a folded one: no
     * task, its end where the host's clock reached). */
    when *op_start, *op_end;
    sim_time_ps *ws, *we;      /* a template's sweep */
    interval *memo_iv;
    size_t memo_n, memo_cap;
} walk;

#define NOT_YET UINT64_MAX

/* Sums past this fall to the graph, which checks them (below step.c's
 * WORK_SURE_PS, where each sum fits for certain, and within the packing
 * of `when`). */
#define DIRECT_WORK_MAX ((sim_time_ps)1 << 60)

static void decline(walk *w)
{
    if (w->rc == SIM_OK)
        w->rc = DIRECT_DECLINED;
}

static inline void push(walk *w, ivlist *l, interval x)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 256;
        interval *p = realloc(l->v, cap * sizeof *p);
        if (!p) {
            w->rc = SIM_ENOMEM;
            return;
        }
        l->v = p;
        l->cap = cap;
    }
    l->v[l->n++] = x;
}

/* A pass's interval into the stage's busy union (merge()'s rule: empty
 * ones skipped, touching ones joined). */
static inline void busy_add(dstage *ds, sim_time_ps a, sim_time_ps b)
{
    if (b <= a)
        return;
    if (ds->busy_open && a <= ds->busy_b) {
        ds->busy_b = b > ds->busy_b ? b : ds->busy_b;
        return;
    }
    if (ds->busy_open)
        ds->busy_ps += ds->busy_b - ds->busy_a;
    ds->busy_a = a;
    ds->busy_b = b;
    ds->busy_open = true;
}

static bool measured_stream(int k)
{
    return k == STREAM_COMPUTE || streams_is_comm((stream_kind)k);
}

/* A change of counter c at (t, ph), as the engine's sweep takes them in
 * task order: one out of order sends the step to the graph. */
static inline void change(dstage *ds, int c, sim_time_ps t, uint32_t ph, int64_t delta)
{
    if (delta == 0)
        return;
    dctr *x = &ds->ctr[c];
    if (t < x->t || (t == x->t && ph < x->ph)) {
        ds->ctr_bad = true;
        return;
    }
    if ((t > x->t || ph > x->ph) && x->value > x->peak)
        x->peak = x->value;
    x->value += delta;
    x->t = t;
    x->ph = ph;
}

/* A counter delta on a task that started at `start` and lasts d. */
static inline void delta(dstage *ds, int c, when start, sim_time_ps d, int64_t at_start, int64_t at_end)
{
    change(ds, c, T(start), 2 * RD(start), at_start);
    change(ds, c, T(start) + d, d ? 1 : 2 * RD(start) + 1, at_end);
}

/* Times a task of d on stream k of stage ds that may start at `after`
 * (its dependencies' latest end), in the order step.c adds it; `kept`:
 * its span goes to the stream's list.  Returns its start. */
static when task(walk *w, dstage *ds, int k, sim_time_ps d, when after, bool kept)
{
    const when start = later(after, ds->clock[k]);
    if (d == 0 && RD(start) == ROUND_MAX)
        decline(w);
    w->work += d;
    if (w->work > DIRECT_WORK_MAX)
        decline(w);
    const when end = end_of(start, d);
    ds->clock[k] = end;
    w->tasks++;
    w->makespan = T(end) > w->makespan ? T(end) : w->makespan;
    if (kept && measured_stream(k))
        push(w, &ds->list[k], (interval){T(start), T(end)});
    return start;
}


/* A duration computed here; out of range: declined (the graph says so). */
static sim_time_ps dur(walk *w, double seconds)
{
    sim_time_ps t;
    if (!time_from_s_checked(seconds, &t)) {
        decline(w);
        return 0;
    }
    return t;
}

/* step.c's fold_host: folds d into the host's clock where the stage
 * still folds and d > 0. */
static bool fold(walk *w, dstage *ds, sim_time_ps d)
{
    if (!ds->fold || d == 0)
        return false;
    w->work += d;
    ds->host_clock += d;
    return true;
}

/* A host task as step.c's add() places one: the pending rest first
 * (folded where it can be), and the first placed releases where the
 * folded ones end. */
static void host_flush(walk *w, dstage *ds, bool may_fold);
static when host_task(walk *w, dstage *ds, sim_time_ps d, when after, bool own, int64_t r)
{
    if (ds->rest_pending)
        host_flush(w, ds, true);
    if (ds->fold) {
        ds->fold = false;
        if (ds->host_clock > 0)
            after = later(after, at(ds->host_clock, 1));
    }
    if (own)
        w->host_own[stream_of(r, STREAM_HOST)] += d;
    return task(w, ds, STREAM_HOST, d, after, false);
}

static void host_flush(walk *w, dstage *ds, bool may_fold)
{
    if (!ds->rest_pending)
        return;
    ds->rest_pending = false;
    const when wait = ds->rest_wait;
    ds->rest_wait = 0;
    if (may_fold && !wait && fold(w, ds, ds->rest_ps))
        return;
    host_task(w, ds, ds->rest_ps, wait, false, 0);
}

/* The lead of a stage's first host pass whose host is ahead (step.c's
 * first_lead): folded, or a task; *gate then waits for its end too. */
static void first_lead(walk *w, dstage *ds, const pass_summary *sum, when *gate)
{
    if (!sum->host || ds->lead_placed)
        return;
    ds->lead_placed = true;
    if (fold(w, ds, sum->lead_ps)) {
        *gate = later(*gate, at(ds->host_clock, 1));
        return;
    }
    const when a = host_task(w, ds, sum->lead_ps, 0, false, 0);
    *gate = later(*gate, end_of(a, sum->lead_ps));
}

/* step.c's add_host_pass up to its GPU span: with a sync, or measured
 * from its ops, a zero-length start first (the pass's first task, after
 * gate: *start), with a sync the host's wait for the GPU on the delay
 * stream after it; then the lead, joined to the rest before it (and
 * after what that rest waits for), folded where nothing measures it and
 * nothing waits.  Returns when its GPU span may start (the lead's end),
 * the rest left pending. */
static when host_pass_lead(walk *w, dstage *ds, int64_t r, const pass_summary *sum, bool measured, when gate,
                           when *start)
{
    when wait = 0;
    if (sum->sync || measured) {
        *start = task(w, ds, STREAM_COMPUTE, 0, gate, true);
        if (sum->sync)
            wait = end_of(task(w, ds, STREAM_HOST_WAIT, sum->wait_ps, end_of(*start, 0), false), sum->wait_ps);
    }
    const sim_time_ps before = ds->rest_pending ? ds->rest_ps : 0, ld = before + sum->lead_ps;
    const when before_wait = ds->rest_pending ? ds->rest_wait : 0;
    ds->rest_pending = false;
    ds->rest_wait = 0;
    when lead;
    if (!measured && !sum->sync && !before_wait && fold(w, ds, ld))
        lead = at(ds->host_clock, 1);
    else
        lead = end_of(host_task(w, ds, ld, before_wait, false, r), ld);
    ds->rest_pending = true;
    ds->rest_ps = sum->host_ps - sum->lead_ps;
    ds->rest_wait = wait;
    return lead;
}

/* What a pass's first task waits for besides its stream, into *gate: the
 * input from the neighbouring virtual stage, the stage's last send where
 * p2p blocks, its forward (a backward); false while the input has not
 * ended yet. */
static inline bool inputs(const walk *w, const dstage *ds, const dpos *pos, const dkind *dk, when *gate)
{
    when g = 0;
    if (pos->src >= 0) {
        const when e = w->last_end[pos->src];
        if (e == NOT_YET)
            return false;
        g = at(T(e) + dk->src_send, 1);
    }
    if (w->blocking && ds->sent)
        g = later(g, at(ds->sent_end + ds->send_ps, 1));
    if (pos->fwd >= 0) /* a stage's forward comes before its backward */
        g = later(g, w->last_end[pos->fwd]);
    *gate = g;
    return true;
}

/* The ops of a shifted pass of (chunk, kind) into the stage's inj lists,
 * as step_measure's shifted_ops places them (step_memo_sweep): from its
 * GPU's and host's starts (SHIFT_HOST), or from its template's GPU
 * origin with the host at 0, placed at its span's start (SHIFT_AHEAD);
 * *first its first GPU op's start. */
static void shifted_ops(walk *w, dstage *ds, int64_t r, int64_t c, int kind, uint8_t shift, sim_time_ps gpu_at,
                        sim_time_ps host_at, sim_time_ps span_start, sim_time_ps *first)
{
    step_t *st = w->st;
    const wl_pass *p = wl_chunk_pass(&st->wl->stages[r].chunks[c], (sched_kind)kind);
    dmemo *dm = &ds->memo[c * st->n_kinds + kind];
    if (!dm->placed) {
        if (w->memo_n + (size_t)p->n_ops > w->memo_cap) {
            const size_t cap = 2 * (w->memo_n + (size_t)p->n_ops) + 64;
            interval *q = realloc(w->memo_iv, cap * sizeof *q);
            if (!q) {
                w->rc = SIM_ENOMEM;
                return;
            }
            w->memo_iv = q;
            w->memo_cap = cap;
        }
        dm->m = (sweep_memo){.off = w->memo_n, .shift = SHIFT_NONE};
        dm->placed = true;
        w->memo_n += (size_t)p->n_ops;
    }
    sim_time_ps t0;
    if (shift == SHIFT_HOST) {
        t0 = gpu_at < host_at ? gpu_at : host_at;
    } else {
        gpu_at = dm->m.shift == SHIFT_AHEAD ? dm->m.gpu_d : step_gpu_origin(p, summary_of(st, r, c, kind));
        host_at = 0;
        t0 = span_start;
    }
    const interval *g;
    sim_err quiet;
    if (step_memo_sweep(p, shift, gpu_at, host_at, &dm->m, w->memo_iv, w->ws, w->we, &g, &quiet) != SIM_OK) {
        decline(w);
        return;
    }
    *first = t0 + dm->m.gpu_a;
    for (int k = 0; k < STREAM_KINDS; g += dm->m.cnt[k], k++) {
        if (k == STREAM_HOST || !measured_stream(k))
            continue;
        for (size_t j = 0; j < dm->m.cnt[k]; j++)
            push(w, &ds->inj[k], (interval){t0 + g[j].a, t0 + g[j].b});
    }
}

/* A pass kept as its ops (step.c's add_pass): each op after its
 * predecessors, the first GPU op (returned) after gate, op fwd_op of
 * bucket k after gather k where `gathers`; w->op_start and w->op_end
 * hold every op's times. */
static int32_t kept_pass(walk *w, dstage *ds, int64_t r, const sched_pass *it, when gate, bool gathers)
{
    step_t *st = w->st;
    const wl_chunk *ch = &st->wl->stages[r].chunks[it->chunk];
    const wl_pass *p = wl_chunk_pass(ch, (sched_kind)it->kind);
    const int32_t gpu = step_first_gpu_op(p);
    for (int32_t i = 0; i < p->n_ops && w->rc == SIM_OK; i++) {
        const wl_op *op = &p->ops[i];
        if (ds->fold && step_op_folds(p, i)) {
            host_flush(w, ds, true); /* the rest first (it may end the folding) */
            if (fold(w, ds, op->duration_ps)) {
                w->host_own[stream_of(r, STREAM_HOST)] += op->duration_ps;
                w->op_end[i] = at(ds->host_clock, 1);
                continue;
            }
        }
        when after = 0;
        for (int j = 0; j < 2; j++) {
            const int32_t d = i - op->dep_back[j];
            if (!op->dep_back[j] || p->ops[d].stream == op->stream)
                continue;
            after = later(after, w->op_end[d]);
        }
        if (i == gpu)
            after = later(after, gate);
        for (int32_t k = 0; gathers && k < ch->n_buckets; k++)
            if (ch->buckets[k].fwd_op == i)
                after = later(after, ds->ag_end[(size_t)it->chunk * (size_t)w->most_buckets + (size_t)k]);
        when a;
        if (op->stream == STREAM_HOST)
            a = host_task(w, ds, op->duration_ps, after, true, r);
        else
            a = task(w, ds, op->stream, op->duration_ps, after, true);
        w->op_start[i] = a;
        w->op_end[i] = end_of(a, op->duration_ps);
    }
    return gpu;
}

/* The gathers of the stage's parameters issued before its first
 * forwards (overlap_param_gather: step.c's add_param_gathers), the
 * chunks' last passes of the gradient kind. */
static void stage_begin(walk *w, int64_t r)
{
    step_t *st = w->st;
    dstage *ds = &w->stages[r];
    const wl_stage *ws = &st->wl->stages[r];
    for (int64_t c = 0; c < st->v; c++) {
        const wl_chunk *ch = &ws->chunks[c];
        for (int32_t k = w->ag_first ? ch->n_buckets - 1 : -1; k >= 0; k--) {
            const sim_time_ps d = dur(w, ch->buckets[k].gather_s);
            const when a = task(w, ds, STREAM_DP, d, 0, true);
            ds->ag_end[(size_t)c * (size_t)w->most_buckets + (size_t)k] = end_of(a, d);
        }
        ds->first_f_done[c] = false;
        ds->last_grad[c] = -1;
    }
    for (int64_t i = 0; i < ds->n_seq; i++)
        if (ds->seq[i].kind == w->grad)
            ds->last_grad[ds->seq[i].chunk] = i;
}

/* The stage's DP tail, optimizer step and the host's last task (step.c's
 * add_tail and the last host_flush). */
static void stage_end(walk *w, int64_t r)
{
    step_t *st = w->st;
    const run_inputs *in = w->in;
    dstage *ds = &w->stages[r];
    const wl_stage *ws = &st->wl->stages[r];
    const sched_pass *e = &ds->seq[ds->n_seq - 1];
    const when last = w->last_end[pass_index(st, r, e->kind, e->microbatch, e->chunk)];
    if (!in->ddp.overlap_grad_reduce)
        for (int64_t c = 0; c < st->v; c++)
            for (int32_t k = 0; k < ws->chunks[c].n_buckets; k++) {
                const sim_time_ps d = dur(w, ws->chunks[c].buckets[k].reduce_s);
                ds->last_rs = end_of(task(w, ds, STREAM_DP, d, last, true), d);
                ds->has_rs = true;
            }
    if (ws->embedding_grad_s > 0) {
        const sim_time_ps d = dur(w, ws->embedding_grad_s);
        ds->last_rs = end_of(task(w, ds, STREAM_DP, d, last, true), d);
        ds->has_rs = true;
    }
    const host_params *h = &in->cluster.host;
    const when rs = ds->has_rs ? ds->last_rs : 0;
    when opt_after = later(last, rs);
    bool sync = false;
    if (!in->sim.ideal_pipeline && (h->sync_s > 0 || h->optimizer_s > 0)) {
        const sim_time_ps d = dur(w, h->sync_s);
        opt_after = later(opt_after, end_of(host_task(w, ds, d, later(last, rs), true, r), d));
        sync = true;
    }
    const sim_time_ps od = dur(w, ws->optimizer_s);
    const when opt = end_of(task(w, ds, STREAM_COMPUTE, od, opt_after, true), od);
    if (sync)
        host_task(w, ds, dur(w, h->optimizer_s), 0, true, r);
    if (w->distopt && !w->ag_first)
        for (int64_t c = 0; c < st->v; c++) {
            task(w, ds, STREAM_DP, dur(w, step_chunk_gather_s(&ws->chunks[c])), opt, true);
        }
    host_flush(w, ds, false);
}

/* The pipeline send of a pass that ended at `end` where it sends: a lag
 * on the PP stream, which must not queue (else the graph has the sends
 * as tasks: declined). */
static inline void send(walk *w, dstage *ds, bool sends, sim_time_ps end)
{
    ds->sent = sends;
    if (!sends)
        return;
    if (ds->any_send && end < ds->last_send_end)
        decline(w);
    w->work += ds->send_ps;
    push(w, &ds->list[STREAM_PP], (interval){end, end + ds->send_ps});
    ds->last_send_end = end + ds->send_ps;
    ds->any_send = true;
    ds->sent_end = end;
}

/* The common pass of a (chunk, kind) in mode 1 or 2 (dkind), with no
 * first lead, gathers or bucket reductions to place: what place_pass
 * does for it, without the case analysis.  False while its input has not
 * ended. */
static inline bool fast_pass(walk *w, dstage *ds, int64_t r, const dpos *pos, const dkind *dk)
{
    when g;
    if (!inputs(w, ds, pos, dk, &g))
        return false;
    if (dk->mode == 2) {
        when none;
        g = later(g, host_pass_lead(w, ds, r, dk->sum, false, 0, &none));
    }
    const sim_time_ps d = dk->gpu;
    const when a = later(g, ds->clock[STREAM_COMPUTE]), e = end_of(a, d);
    if (d == 0 && RD(a) == ROUND_MAX)
        decline(w);
    ds->clock[STREAM_COMPUTE] = e;
    w->tasks++;
    w->work += d;
    w->makespan = T(e) > w->makespan ? T(e) : w->makespan;
    push(w, &ds->list[STREAM_COMPUTE], (interval){T(a), T(e)});
    delta(ds, CTR_ACT, a, d, dk->act_s, dk->act_e);
    delta(ds, CTR_INFLIGHT, a, d, dk->inf_s, dk->inf_e);
    w->last_end[pos->own] = e;
    ds->pipe_end = T(e) > ds->pipe_end ? T(e) : ds->pipe_end;
    busy_add(ds, T(a), T(e));
    ds->n_whole[pos->q]++;
    send(w, ds, dk->dst_r >= 0, T(e));
    return true;
}

/* Places stage r's next pass as step.c's add_scheduled_passes does,
 * false (nothing done) while its input has not ended. */
static bool place_pass(walk *w, int64_t r)
{
    step_t *st = w->st;
    const run_inputs *in = w->in;
    dstage *ds = &w->stages[r];
    const int64_t i = ds->i;
    const sched_pass *it = &ds->seq[i];
    const dpos *pos = &ds->pos[i];
    const dkind *dk = &ds->kinds[pos->q];
    const bool first_f = it->kind == SCHED_F && w->ag_first && !ds->first_f_done[it->chunk];
    const bool last_grad = it->kind == w->grad && in->ddp.overlap_grad_reduce && i == ds->last_grad[it->chunk];
    if (dk->mode != 0 && !first_f && !last_grad && !(dk->mode == 1 && dk->sum->host && !ds->lead_placed))
        return fast_pass(w, ds, r, pos, dk);
    const wl_chunk *ch = &st->wl->stages[r].chunks[it->chunk];
    const pass_summary *sum = dk->sum;
    const int32_t nb = ch->n_buckets;
    when gate;
    if (!inputs(w, ds, pos, dk, &gate))
        return false;
    const bool inside = last_grad && nb > 1;
    const size_t q = pos->q;
    when span_a = 0, last_a = 0;
    sim_time_ps span_d = 0, last_d = 0, first_at = 0;
    bool whole = true, shifted = false;
    int32_t kept_gpu = -1;
    const bool common = sum->collapsible && !sum->tail && !inside && !(nb > 1 && first_f);
    /* A pass that stands whole waits for its chunk's gathers at its first
     * task (one kept as ops, each at its op: kept_pass). */
    for (int32_t k = nb - 1; common && first_f && k >= 0; k--)
        gate = later(gate, ds->ag_end[(size_t)it->chunk * (size_t)w->most_buckets + (size_t)k]);
    if (common && (!sum->host || ds->no_host)) {
        when g = gate;
        first_lead(w, ds, sum, &g);
        span_d = last_d = sum->host ? sum->gpu_ps : sum->span_ps;
        span_a = last_a = task(w, ds, STREAM_COMPUTE, span_d, g, true);
    } else if (common) {
        /* With a sync the gate waits at the zero-length start, the GPU
         * span for its lead alone. */
        when start = 0;
        const when lead = host_pass_lead(w, ds, r, sum, false, gate, &start);
        span_d = last_d = sum->gpu_ps;
        span_a = last_a = task(w, ds, STREAM_COMPUTE, span_d, sum->sync ? lead : later(gate, lead), true);
    } else {
        bool keep = first_f && nb > 1;
        const bool ahead = !sum->host || ds->no_host;
        if (inside && !keep) {
            if (ahead && sum->collapsible) { /* may stand as a chain (step.c's add_chain) */
                decline(w);
                return true;
            }
            keep = true;
        }
        if (sum->tail && ((ahead && !sum->shifts_ahead) || first_f))
            keep = true;
        if (!keep && ds->no_host && sum->host && !ds->lead_placed && (inside || sum->tail)) {
            keep = true;
            ds->lead_placed = true;
        }
        whole = !keep && step_stands(ds->seq, NULL, ds->n_seq, i, sum);
        if (whole && !sum->collapsible && !sum->tail) { /* never: stands says so */
            decline(w);
            return true;
        }
        const bool tail = whole && !sum->collapsible;
        if (whole && ahead) {
            when g = gate;
            first_lead(w, ds, sum, &g);
            const sim_time_ps span = sum->host ? sum->gpu_ps : sum->span_ps;
            span_d = tail ? span - sum->tail_ps : span;
            span_a = task(w, ds, STREAM_COMPUTE, span_d, g, !tail);
            last_a = span_a;
            last_d = span_d;
            if (tail) {
                last_d = sum->tail_ps;
                last_a = task(w, ds, sum->tail_stream, last_d, end_of(span_a, span_d), false);
                shifted_ops(w, ds, r, it->chunk, it->kind, SHIFT_AHEAD, 0, 0, T(span_a), &first_at);
                shifted = true;
            }
        } else if (whole) {
            /* add_host_pass, measured from its ops (a tail): a zero-length
             * start, the lead, the GPU span and its tail op. */
            when sa = 0;
            const when le = host_pass_lead(w, ds, r, sum, true, gate, &sa);
            span_d = sum->gpu_ps - sum->tail_ps;
            span_a = task(w, ds, STREAM_COMPUTE, span_d, le, false);
            last_d = sum->tail_ps;
            last_a = task(w, ds, sum->tail_stream, last_d, end_of(span_a, span_d), false);
            shifted_ops(w, ds, r, it->chunk, it->kind, SHIFT_HOST, T(sa), T(le) - sum->lead_ps, 0, &first_at);
            shifted = true;
        } else {
            kept_gpu = kept_pass(w, ds, r, it, gate, first_f);
            const wl_pass *p = wl_chunk_pass(ch, (sched_kind)it->kind);
            span_a = w->op_start[kept_gpu];
            span_d = p->ops[kept_gpu].duration_ps;
            last_a = w->op_start[p->n_ops - 1];
            last_d = p->ops[p->n_ops - 1].duration_ps;
        }
    }
    if (w->rc != SIM_OK)
        return true;
    if (first_f)
        ds->first_f_done[it->chunk] = true;
    /* Counters (step.c's link_forward / link_backward): a forward's on
     * its span, a backward's flight ends with its last task. */
    delta(ds, CTR_ACT, span_a, span_d, dk->act_s, dk->act_e);
    if (it->kind == SCHED_F)
        delta(ds, CTR_INFLIGHT, span_a, span_d, dk->inf_s, dk->inf_e);
    else
        delta(ds, CTR_INFLIGHT, last_a, last_d, dk->inf_s, dk->inf_e);
    const when end = end_of(last_a, last_d);
    w->last_end[pos->own] = end;
    ds->pipe_end = T(end) > ds->pipe_end ? T(end) : ds->pipe_end;
    busy_add(ds, shifted ? first_at : T(span_a), T(end));
    if (whole)
        (shifted ? ds->n_shifted : ds->n_whole)[q]++;
    send(w, ds, dk->dst_r >= 0, T(end));
    /* The buckets' reductions after the chunk's last gradient pass. */
    if (last_grad)
        for (int32_t k = 0; k < nb; k++) {
            const sim_time_ps d = dur(w, ch->buckets[k].reduce_s);
            const when after = whole ? end : w->op_end[ch->buckets[k].ready_op];
            ds->last_rs = end_of(task(w, ds, STREAM_DP, d, after, true), d);
            ds->has_rs = true;
        }
    return true;
}

/* Stage r's figures (step_measure's, off the same sets). */
static void measure_stage(walk *w, int64_t r, step_stage_meas *sr, interval *scratch, size_t room)
{
    step_t *st = w->st;
    dstage *ds = &w->stages[r];
    memset(sr, 0, sizeof *sr);
    sr->busy_ps = ds->busy_ps + (ds->busy_open ? ds->busy_b - ds->busy_a : 0);
    /* Each list with its shifted ops, the compute stream's first. */
    const interval *lists[STREAM_KINDS];
    size_t lens[STREAM_KINDS], used = 0;
    for (int k = 0; k < STREAM_KINDS; k++) {
        lists[k] = ds->list[k].v;
        lens[k] = ds->list[k].n;
        if (ds->inj[k].n == 0)
            continue;
        if (used + lens[k] + ds->inj[k].n > room) {
            decline(w);
            return;
        }
        lens[k] = unite(ds->list[k].v, ds->list[k].n, ds->inj[k].v, ds->inj[k].n, scratch + used);
        lists[k] = scratch + used;
        used += lens[k];
    }
    const interval *streams[STREAM_KINDS];
    size_t sl[STREAM_KINDS];
    int kinds[STREAM_KINDS], n_comm = 0;
    for (int k = 0; k < STREAM_KINDS; k++) {
        if (!streams_is_comm((stream_kind)k) || lens[k] == 0)
            continue;
        streams[n_comm] = lists[k];
        sl[n_comm] = lens[k];
        kinds[n_comm++] = k;
    }
    sim_time_ps exposed =
        step_measure_comm(streams, sl, kinds, n_comm, lists[STREAM_COMPUTE], lens[STREAM_COMPUTE], sr);
    for (int k = 0; k < STREAM_KINDS; k++)
        if (streams_desc((stream_kind)k)->role == STREAM_ROLE_HOST)
            sr->comm_ps[k] = w->host_own[stream_of(r, (stream_kind)k)];
    if (!step_measure_add_summaries(st, r, ds->n_whole, ds->n_shifted, sr, &exposed))
        decline(w);
    sr->exposed_total_ps = exposed;
    for (int c = 0; c < CTR_PER_STAGE; c++)
        if (ds->ctr[c].value > ds->ctr[c].peak)
            ds->ctr[c].peak = ds->ctr[c].value;
    sr->act_peak = ds->ctr[CTR_ACT].peak;
    sr->inflight_peak = ds->ctr[CTR_INFLIGHT].peak;
    sr->act_final = ds->ctr[CTR_ACT].value;
    sr->inflight_final = ds->ctr[CTR_INFLIGHT].value;
    if (ds->ctr_bad)
        decline(w);
}

/* Can the step be walked directly (step_direct.h)? */
static bool eligible(const step_t *st, const run_inputs *in)
{
    if (in->sim.keep_ops || in->sim.plain_graph || in->sim.graph_only || st->plan.combined || st->n_pairs > 0 ||
        st->plan.place != SCHED_PLACE_LOOP || st->n_kinds != 2)
        return false;
    if (in->graphs.impl == GRAPH_FULL_ITERATION && !in->sim.ideal_pipeline && in->cluster.host.graph_launch_s > 0)
        return false;
    for (int64_t r = 0; r < st->pp; r++) {
        sim_time_ps t;
        if (st->pp > 1 && (!time_from_s_checked(st->wl->stages[r].p2p_s, &t) || t == 0))
            return false;
    }
    return true;
}

static void walk_free(walk *w)
{
    for (int64_t r = 0; w->stages && r < w->st->pp; r++) {
        dstage *ds = &w->stages[r];
        free(ds->seq);
        free(ds->pos);
        free(ds->last_grad);
        free(ds->first_f_done);
        free(ds->ag_end);
        for (int k = 0; k < STREAM_KINDS; k++) {
            free(ds->list[k].v);
            free(ds->inj[k].v);
        }
        free(ds->kinds);
        free(ds->n_whole);
        free(ds->memo);
    }
    free(w->stages);
    free(w->last_end);
    free(w->op_start);
    free(w->op_end);
    free(w->ws);
    free(w->we);
    free(w->memo_iv);
    free(w->host_own);
}

int step_direct(step_t *st, const run_inputs *in, const strategy_t *s, step_meas *ms, sim_err *err)
{
    if (!eligible(st, in))
        return DIRECT_DECLINED;
    const int64_t pp = st->pp, v = st->v;
    walk w = {.st = st, .in = in, .rc = SIM_OK};
    w.ag_first = s->zero >= DP_SHARD_OPTIM && in->ddp.overlap_param_gather;
    w.distopt = s->zero >= DP_SHARD_OPTIM;
    w.blocking = st->plan.place == SCHED_PLACE_LOOP && (v == 1 || !s->par.overlap_p2p_comm);
    w.grad = sched_plan_grad_kind(&st->plan);
    w.free_kind = sched_plan_free_kind(&st->plan);
    size_t longest = 1;
    w.most_buckets = 1;
    for (int64_t r = 0; r < pp; r++)
        for (int64_t c = 0; c < v; c++) {
            const wl_chunk *ch = &st->wl->stages[r].chunks[c];
            w.most_buckets = ch->n_buckets > w.most_buckets ? ch->n_buckets : w.most_buckets;
            for (int k = 0; k < st->n_kinds; k++) {
                const size_t n = (size_t)wl_chunk_pass(ch, (sched_kind)k)->n_ops;
                longest = n > longest ? n : longest;
            }
        }
    const size_t n_passes = (size_t)(pp * st->rank_passes), n_sums = (size_t)(v * st->n_kinds);
    w.stages = calloc((size_t)pp, sizeof *w.stages);
    w.last_end = malloc(n_passes * sizeof *w.last_end);
    w.op_start = malloc(longest * sizeof *w.op_start);
    w.op_end = malloc(longest * sizeof *w.op_end);
    w.ws = malloc(longest * sizeof *w.ws);
    w.we = malloc(longest * sizeof *w.we);
    w.host_own = calloc((size_t)(pp * STREAM_KINDS), sizeof *w.host_own);
    int rc = SIM_OK;
    if (!w.stages || !w.last_end || !w.op_start || !w.op_end || !w.ws || !w.we || !w.host_own) {
        rc = SIM_ENOMEM;
        goto done;
    }
    for (size_t i = 0; i < n_passes; i++)
        w.last_end[i] = NOT_YET;
    sched_orders kept = {0};
    sched_item *items = malloc((size_t)st->rank_passes * sizeof *items);
    if (!items)
        rc = SIM_ENOMEM;
    for (int64_t r = 0; r < pp && rc == SIM_OK; r++) {
        dstage *ds = &w.stages[r];
        ds->seq = malloc((size_t)st->rank_passes * sizeof *ds->seq);
        ds->pos = malloc((size_t)st->rank_passes * sizeof *ds->pos);
        ds->last_grad = malloc((size_t)v * sizeof *ds->last_grad);
        ds->first_f_done = malloc((size_t)v * sizeof *ds->first_f_done);
        ds->ag_end = malloc((size_t)v * (size_t)w.most_buckets * sizeof *ds->ag_end);
        ds->n_whole = calloc(2 * n_sums, sizeof *ds->n_whole);
        ds->memo = calloc(n_sums, sizeof *ds->memo);
        if (!ds->seq || !ds->pos || !ds->last_grad || !ds->first_f_done || !ds->ag_end || !ds->n_whole || !ds->memo) {
            rc = SIM_ENOMEM;
            break;
        }
        ds->n_shifted = ds->n_whole + n_sums;
        /* Its lists' room for a task per pass (the compute stream, the
         * sends), grown only by passes kept as ops. */
        ds->list[STREAM_COMPUTE].cap = (size_t)st->rank_passes + 64;
        ds->list[STREAM_PP].cap = (size_t)st->rank_passes + 1;
        ds->list[STREAM_COMPUTE].v = malloc(ds->list[STREAM_COMPUTE].cap * sizeof(interval));
        ds->list[STREAM_PP].v = malloc(ds->list[STREAM_PP].cap * sizeof(interval));
        ds->kinds = calloc(n_sums, sizeof *ds->kinds);
        if (!ds->list[STREAM_COMPUTE].v || !ds->list[STREAM_PP].v || !ds->kinds) {
            rc = SIM_ENOMEM;
            break;
        }
        /* Where each (chunk, kind)'s input comes from and its send goes. */
        for (int64_t c = 0; c < v; c++)
            for (int k = 0; k < st->n_kinds; k++) {
                dkind *dk = &ds->kinds[c * st->n_kinds + k];
                const int64_t vs = sched_vstage(&st->plan, r, c), dir = sched_kind_of((sched_kind)k)->send_dir;
                int64_t lc;
                dk->src_r = dk->src_c = dk->dst_r = -1;
                if (dir != 0 && vs - dir >= 0 && vs - dir < pp * v)
                    sched_locate(&st->plan, vs - dir, &dk->src_r, &dk->src_c);
                if (step_sends(st, r, c, k))
                    sched_locate(&st->plan, vs + dir, &dk->dst_r, &lc);
            }
        int64_t n_items = 0;
        sim_err quiet;
        sim_err_clear(&quiet);
        if (sched_plan_build_kept(&st->plan, r, &kept, items, &n_items, &quiet) != SIM_OK) {
            rc = DIRECT_DECLINED;
            break;
        }
        for (int64_t i = 0; i < n_items; i++)
            for (int j = 0; j < items[i].n_passes && ds->n_seq < st->rank_passes; j++)
                ds->seq[ds->n_seq++] = items[i].pass[j];
        if (ds->n_seq != st->rank_passes || n_passes > (size_t)INT32_MAX) {
            rc = DIRECT_DECLINED;
            break;
        }
        for (int64_t i = 0; i < ds->n_seq; i++) {
            const sched_pass *it = &ds->seq[i];
            const size_t q = (size_t)(it->chunk * st->n_kinds + it->kind);
            const dkind *dk = &ds->kinds[q];
            ds->pos[i] = (dpos){
                .own = (int32_t)pass_index(st, r, it->kind, it->microbatch, it->chunk),
                .src = dk->src_r < 0 ? -1 : (int32_t)pass_index(st, dk->src_r, it->kind, it->microbatch, dk->src_c),
                .fwd = it->kind == SCHED_F ? -1 : (int32_t)pass_index(st, r, SCHED_F, it->microbatch, it->chunk),
                .q = (uint32_t)q};
        }
        ds->fold = true;
        ds->no_host = step_host_ahead(st, in, ds->seq, NULL, ds->n_seq, r, w.ag_first);
        if (pp > 1)
            time_from_s_checked(st->wl->stages[r].p2p_s, &ds->send_ps);
    }
    for (int64_t r = 0; r < pp && rc == SIM_OK; r++) {
        dstage *ds = &w.stages[r];
        for (int64_t c = 0; c < v; c++)
            for (int k = 0; k < st->n_kinds; k++) {
                const size_t q = (size_t)(c * st->n_kinds + k);
                const pass_summary *sum = summary_of(st, r, c, k);
                const wl_chunk *ch = &st->wl->stages[r].chunks[c];
                dkind *dk = &ds->kinds[q];
                const bool common = sum->collapsible && !sum->tail;
                dk->mode = !common ? 0 : !sum->host || ds->no_host ? 1 : sum->sync ? 0 : 2;
                dk->sum = sum;
                dk->gpu = dk->mode == 1 && !sum->host ? sum->span_ps : sum->gpu_ps;
                if (k == SCHED_F) {
                    dk->act_s = ch->act_bytes;
                    dk->inf_s = 1;
                } else {
                    const bool frees = k == (int)w.free_kind;
                    const int64_t transient = k == SCHED_B ? ch->bwd_transient_bytes : 0;
                    dk->act_s = transient;
                    dk->act_e = -(frees ? ch->act_bytes : 0) - transient;
                    dk->inf_e = frees ? -1 : 0;
                }
                dk->src_send = dk->src_r >= 0 ? w.stages[dk->src_r].send_ps : 0;
            }
    }
    free(items);
    sched_orders_free(&kept);
    if (rc != SIM_OK)
        goto done;
    for (int64_t r = 0; r < pp; r++)
        stage_begin(&w, r);
    /* Every stage's passes as their inputs end: a stage is tried again
     * when a pass that feeds it has been placed (a stack of stages to try,
     * each on it once). */
    int64_t *todo = malloc((size_t)pp * sizeof *todo), n_todo = 0, left = pp;
    bool *queued = calloc((size_t)pp, sizeof *queued);
    if (!todo || !queued)
        w.rc = SIM_ENOMEM;
    for (int64_t r = pp; w.rc == SIM_OK && r-- > 0;) {
        todo[n_todo++] = r;
        queued[r] = true;
    }
    while (n_todo > 0 && w.rc == SIM_OK) {
        const int64_t r = todo[--n_todo];
        dstage *ds = &w.stages[r];
        queued[r] = false;
        while (!ds->done && w.rc == SIM_OK) {
            if (ds->i == ds->n_seq) {
                stage_end(&w, r);
                ds->done = true;
                left--;
                break;
            }
            if (!place_pass(&w, r))
                break;
            const sched_pass *it = &ds->seq[ds->i++];
            const int64_t to = ds->kinds[it->chunk * st->n_kinds + it->kind].dst_r;
            if (to >= 0 && to != r && !queued[to]) {
                todo[n_todo++] = to;
                queued[to] = true;
            }
        }
    }
    if (w.rc == SIM_OK && left > 0)
        decline(&w); /* never: a schedule that runs has an order */
    free(todo);
    free(queued);
    rc = w.rc;
    if (rc != SIM_OK)
        goto done;
    /* The figures. */
    size_t room = 0;
    for (int64_t r = 0; r < pp; r++) {
        size_t n = 0;
        for (int k = 0; k < STREAM_KINDS; k++)
            n += w.stages[r].list[k].n + w.stages[r].inj[k].n;
        room = n > room ? n : room;
    }
    interval *scratch = malloc((room ? room : 1) * sizeof *scratch);
    ms->stages = calloc((size_t)pp, sizeof *ms->stages);
    if (!scratch || !ms->stages) {
        free(scratch);
        rc = SIM_ENOMEM;
        goto done;
    }
    ms->n_stages = pp;
    sim_time_ps pipe_end = 0;
    for (int64_t r = 0; r < pp && w.rc == SIM_OK; r++) {
        measure_stage(&w, r, &ms->stages[r], scratch, room);
        pipe_end = w.stages[r].pipe_end > pipe_end ? w.stages[r].pipe_end : pipe_end;
    }
    free(scratch);
    rc = w.rc;
    ms->makespan_ps = w.makespan;
    ms->pipe_end_ps = pipe_end;
    ms->work_ps = w.work;
    ms->tasks = w.tasks;
    ms->events = 2 * w.tasks;
done:
    walk_free(&w);
    if (rc != SIM_OK) {
        free(ms->stages);
        ms->stages = NULL;
        ms->n_stages = 0;
    }
    if (rc == SIM_ENOMEM)
        return sim_err_set(err, SIM_ENOMEM, "out of memory simulating the step");
    return rc;
}
