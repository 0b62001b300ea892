/* step_measure: the step's figures off its timeline (contract in
 * step_measure.h). */
#include "step_measure.h"

#include <stdlib.h>
#include <string.h>

#include "step_internal.h"

/* The spans of stage r's stream k in run order: the engine's, or where
 * the sends are lags (step.lag_sends) the PP stream's from them. */
static size_t comm_spans(const step_t *st, int64_t r, int k, const interval **out)
{
    if (k == STREAM_PP && st->lag_sends) {
        *out = st->send_spans + st->send_at[r];
        return st->send_at[r + 1] - st->send_at[r];
    }
    return eng_stream_spans(st->eng, stream_of(r, (stream_kind)k), out);
}

/* The intervals of a stream's tasks but the replaced (a stage with
 * shifted passes); the sends where they are lags (never replaced). */
static size_t stream_intervals(const step_t *st, int stream, interval *out)
{
    if (stream % STREAM_KINDS == STREAM_PP && st->lag_sends) {
        const interval *sp;
        const size_t n = comm_spans(st, stream / STREAM_KINDS, STREAM_PP, &sp);
        memcpy(out, sp, n * sizeof *out);
        return n;
    }
    const eng_task *ids;
    const eng_span *sp;
    const int32_t *tag = eng_task_tags(st->eng);
    size_t n = eng_stream_view(st->eng, stream, &ids), k = 0;
    eng_stream_spans(st->eng, stream, &sp);
    for (size_t i = 0; i < n; i++)
        if (!st->info[tag[ids[i]]].replaced)
            out[k++] = sp[i];
    return k;
}

int step_memo_sweep(const wl_pass *p, uint8_t shift, sim_time_ps gpu_at, sim_time_ps host_at, sweep_memo *m,
                      interval *miv, sim_time_ps *ws, sim_time_ps *we, const interval **g, sim_err *err)
{
    const sim_time_ps lo = gpu_at < host_at ? gpu_at : host_at, base = shift == SHIFT_HOST ? lo : gpu_at;
    interval *mine = miv + m->off;
    *g = mine;
    bool known = m->shift == shift && (shift == SHIFT_AHEAD || (m->gpu_d == gpu_at - lo && m->host_d == host_at - lo));
    /* The sweep that would overflow says so itself. */
    for (int32_t j = 0; known && shift == SHIFT_HOST && j < p->n_ops; j++)
        known = mine[j].b <= UINT64_MAX - base;
    if (known)
        return SIM_OK;
    m->shift = SHIFT_NONE;
    tmpl_scratch w = {.start = ws, .end = we};
    int rc = step_sweep(p, gpu_at, host_at, &w, err);
    if (rc != SIM_OK)
        return rc;
    *m = (sweep_memo){.off = m->off, .shift = shift, .gpu_d = gpu_at - lo, .host_d = host_at - lo};
    for (int32_t j = 0; j < p->n_ops; j++)
        m->cnt[p->ops[j].stream]++;
    size_t at[STREAM_KINDS];
    for (int k = 0, sum = 0; k < STREAM_KINDS; sum += (int)m->cnt[k], k++)
        at[k] = (size_t)sum;
    for (int32_t j = 0; j < p->n_ops; j++)
        mine[at[p->ops[j].stream]++] = (interval){ws[j] - base, we[j] - base};
    m->gpu_a = p->n_ops > 0 ? ws[step_first_gpu_op(p)] - base : 0;
    return SIM_OK;
}

/* The ops of stage r's shifted passes, per stream (inj + at[k], at[k+1] -
 * at[k] of them), each in the stage's pass order, which is start order:
 * each placed from its stand-in's GPU start as it ran alone.  per_sum:
 * the stage's shifted passes per (chunk, kind) (v x kinds); memo and miv
 * as many sweeps and their ops' times as that leaves; ws, we room for
 * the ops of one. */
static int shifted_ops(const step_t *st, int64_t r, interval *inj, size_t at[STREAM_KINDS + 1],
                       sim_time_ps *first_at, const size_t *per_sum, sweep_memo *memo, interval *miv,
                       sim_time_ps *ws, sim_time_ps *we, sim_err *err)
{
    size_t fill[STREAM_KINDS] = {0}, off = 0;
    /* Room per stream: each template's ops per stream counted once, times
     * its shifted passes. */
    const size_t n_sums = (size_t)(st->v * st->n_kinds);
    for (size_t q = 0; q < n_sums; q++) {
        memo[q] = (sweep_memo){.off = off, .shift = SHIFT_NONE};
        if (!per_sum[q])
            continue;
        const wl_pass *p = wl_chunk_pass(&st->wl->stages[r].chunks[q / (size_t)st->n_kinds],
                                         (sched_kind)(q % (size_t)st->n_kinds));
        for (int32_t j = 0; j < p->n_ops; j++)
            fill[p->ops[j].stream] += per_sum[q];
        off += (size_t)p->n_ops;
    }
    at[0] = 0;
    for (int k = 0; k < STREAM_KINDS; k++) {
        at[k + 1] = at[k] + fill[k];
        fill[k] = 0;
    }
    for (int64_t i = 0; i < st->rank_passes; i++) {
        const size_t pi = (size_t)st->order[r * st->rank_passes + i];
        if (!st->shifted[pi])
            continue;
        const int64_t chunk = (int64_t)(pi % (size_t)st->v);
        const int kind = (int)(pi / (size_t)(st->v * st->M) % (size_t)st->n_kinds);
        const wl_pass *p = wl_chunk_pass(&st->wl->stages[r].chunks[chunk], (sched_kind)kind);
        const pass_ref *ref = &st->passes[pi];
        const pass_summary *ps = summary_of(st, r, chunk, kind);
        sweep_memo *m = &memo[chunk * st->n_kinds + kind];
        /* From its GPU's and host's starts, else from its stand-in's GPU
         * start, the template's GPU origin there. */
        sim_time_ps t0, gpu_at, host_at = 0;
        if (st->shifted[pi] == SHIFT_HOST) {
            gpu_at = eng_task_start(st->eng, ref->first);
            host_at = eng_task_end(st->eng, ref->lead) - ps->lead_ps;
            t0 = gpu_at < host_at ? gpu_at : host_at;
        } else {
            /* The origin its memo was swept from (less a host start of 0). */
            gpu_at = m->shift == SHIFT_AHEAD ? m->gpu_d : step_gpu_origin(p, ps);
            t0 = eng_task_start(st->eng, ref->span);
        }
        const interval *g;
        int rc = step_memo_sweep(p, st->shifted[pi], gpu_at, host_at, m, miv, ws, we, &g, err);
        if (rc != SIM_OK)
            return rc;
        first_at[i] = t0 + m->gpu_a;
        for (int k = 0; k < STREAM_KINDS; g += m->cnt[k], fill[k] += m->cnt[k], k++) {
            if (k == STREAM_HOST)
                continue;
            interval *d = inj + at[k] + fill[k];
            for (size_t j = 0; j < m->cnt[k]; j++)
                d[j] = (interval){t0 + g[j].a, t0 + g[j].b};
        }
    }
    return SIM_OK;
}

/* Intervals of a stream's tasks (*n of them in iv) together with its
 * shifted ops (inj, m), both sorted by start: iv itself without any, else
 * their union in out (room for *n + m); *n becomes its length. */
static const interval *with_shifted(const interval *iv, size_t *n, const interval *inj, size_t m, interval *out)
{
    if (m == 0)
        return iv;
    *n = unite(iv, *n, inj, m, out);
    return out;
}

/* Sums picoseconds; false when the sum would wrap. */
static bool add_ps(sim_time_ps *x, sim_time_ps d)
{
    return !__builtin_add_overflow(*x, d, x);
}

/* *x += d times n; false when it would wrap (as n additions of d would). */
static bool add_times(sim_time_ps *x, sim_time_ps d, sim_time_ps n)
{
    sim_time_ps y;
    return !__builtin_mul_overflow(d, n, &y) && add_ps(x, y);
}

/* The most ops a stage's shifted passes bring (*n_inj) and the most
 * tasks a stage has (*stage_most): the room measuring a stage takes. */
static void stage_room(const step_t *st, size_t *n_inj, size_t *stage_most)
{
    const int64_t v = st->v, M = st->M;
    *n_inj = *stage_most = 0;
    for (int64_t r = 0; r < st->pp; r++) {
        size_t n = 0, tasks = 0;
        for (size_t pi = (size_t)(r * st->rank_passes); pi < (size_t)((r + 1) * st->rank_passes); pi++)
            if (st->shifted[pi]) {
                const int64_t c = (int64_t)(pi % (size_t)v);
                const int kind = (int)(pi / (size_t)(v * M) % (size_t)st->n_kinds);
                n += (size_t)wl_chunk_pass(&st->wl->stages[r].chunks[c], (sched_kind)kind)->n_ops;
            }
        for (int k = 0; k < STREAM_KINDS; k++) {
            const eng_span *x;
            tasks += comm_spans(st, r, k, &x);
        }
        *n_inj = n > *n_inj ? n : *n_inj;
        *stage_most = tasks > *stage_most ? tasks : *stage_most;
    }
}

sim_time_ps step_measure_comm(const interval *const *streams, const size_t *lens, const int *kinds, int n,
                                const interval *cp, size_t nc, step_stage_meas *sr)
{
    sim_time_ps tot[STREAM_KINDS], unc[STREAM_KINDS];
    const sim_time_ps exposed_ps = exposed_lists(streams, lens, n, cp, nc, tot, unc);
    for (int i = 0; i < n; i++) {
        sr->comm_ps[kinds[i]] = tot[i];
        sr->exposed_ps[kinds[i]] = unc[i];
    }
    return exposed_ps;
}

/* Busy time of stage r's host stream k in block blk: its tasks of the
 * block by their durations, but not the stand-ins of collapsed passes,
 * which include the host's waits: those count from their summaries
 * (add_summaries).  The whole step's is the build's (step.host_own_ps). */
static sim_time_ps host_busy(const step_t *st, int64_t r, int k, const int32_t *block, int32_t blk)
{
    const engine_t *e = st->eng;
    const eng_task *hid;
    const eng_span *hs;
    const int32_t *tag = eng_task_tags(e);
    const size_t nk = eng_stream_view(e, stream_of(r, (stream_kind)k), &hid);
    eng_stream_spans(e, stream_of(r, (stream_kind)k), &hs);
    sim_time_ps total = 0;
    for (size_t i = 0; i < nk; i++) {
        const char *name = st->info[tag[hid[i]]].name;
        if (block[hid[i]] == blk && name != step_host_lead && name != step_host_rest)
            total += hs[i].b - hs[i].a;
    }
    /* Host ops folded into release times (step.own_fold_ps), in the
     * block of the task released after them. */
    for (size_t i = 0; k == STREAM_HOST && i < st->n_own_fold; i++) {
        const eng_task t = st->own_fold_task[i];
        if (block[t] == blk && st->info[tag[t]].stage == r)
            total += st->own_fold_ps[i];
    }
    return total;
}

bool step_measure_add_summaries(const step_t *st, int64_t r, const sim_time_ps *n_whole, const sim_time_ps *n_shifted,
                          step_stage_meas *sr, sim_time_ps *exposed_ps)
{
    bool fits = true;
    for (int64_t c = 0; c < st->v; c++)
        for (int kind = 0; kind < st->n_kinds; kind++) {
            const size_t q = (size_t)(c * st->n_kinds + kind);
            const pass_summary *ps = summary_of(st, r, c, kind);
            if (n_shifted[q])
                for (int k = 0; k < STREAM_KINDS; k++)
                    if (streams_desc((stream_kind)k)->role == STREAM_ROLE_HOST)
                        fits = fits && add_times(&sr->comm_ps[k], ps->comm_ps[k], n_shifted[q]);
            if (!n_whole[q])
                continue;
            fits = fits && add_times(exposed_ps, ps->exposed_all_ps, n_whole[q]);
            for (int k = 0; k < STREAM_KINDS; k++)
                fits = fits && add_times(&sr->comm_ps[k], ps->comm_ps[k], n_whole[q]) &&
                       add_times(&sr->exposed_ps[k], ps->exposed_ps[k], n_whole[q]);
        }
    return fits;
}

/* The part of iv (sorted, disjoint) inside [lo, hi) into out; its length. */
static size_t clip(const interval *iv, size_t n, sim_time_ps lo, sim_time_ps hi, interval *out)
{
    size_t k = 0;
    for (size_t i = skip_ended(iv, 0, n, lo); i < n && iv[i].a < hi; i++) {
        const interval x = {iv[i].a > lo ? iv[i].a : lo, iv[i].b < hi ? iv[i].b : hi};
        if (x.b > x.a)
            out[k++] = x;
    }
    return k;
}

static sim_time_ps length_of(const interval *iv, size_t n)
{
    sim_time_ps total = 0;
    for (size_t i = 0; i < n; i++)
        total += iv[i].b - iv[i].a;
    return total;
}

/* Does a timed task of a block from per->blk on end at latest, the
 * latest end of all?  A stream's ends never decrease (it runs its tasks
 * one at a time in order), so those that end there are each stream's
 * last: only they are looked at. */
static bool last_task_shifts(const step_t *st, const step_period_req *per, sim_time_ps latest)
{
    const engine_t *e = st->eng;
    for (int s = 0; s < (int)(st->pp * STREAM_KINDS); s++) {
        const eng_task *ids;
        const eng_span *sp;
        size_t i = eng_stream_view(e, s, &ids);
        eng_stream_spans(e, s, &sp);
        for (; i > 0 && sp[i - 1].b == latest; i--)
            if (per->timed[ids[i - 1]] && per->block[ids[i - 1]] >= per->blk)
                return true;
    }
    return false;
}

/* Does a timed last task of a pass, of a block from per->blk on, end at
 * pipe_end, the latest end of the passes? */
static bool last_pass_shifts(const step_t *st, const step_period_req *per, sim_time_ps pipe_end)
{
    for (size_t pi = 0; pi < (size_t)(st->pp * st->rank_passes); pi++) {
        const eng_task t = st->passes[pi].last;
        if (t >= 0 && per->timed[t] && per->block[t] >= per->blk && eng_task_end(st->eng, t) == pipe_end)
            return true;
    }
    return false;
}

/* What one period adds that is no stage's: false where a block changes a
 * counter (the finals would not stay, nor the values past the window
 * repeat those before it); else the tasks of one block (read off the
 * streams, which hold every task once), their work, and the latest ends'
 * lambda into per->inc.  nets: room for every counter. */
static bool period_sums(const step_t *st, const step_period_req *per, int64_t *nets)
{
    const engine_t *e = st->eng;
    step_meas *inc = per->inc;
    if (!eng_counter_nets(e, per->block, per->blk, nets))
        return false;
    for (int64_t c = 0; c < st->pp * CTR_PER_STAGE; c++)
        if (nets[c] != 0)
            return false;
    for (int s = 0; s < (int)(st->pp * STREAM_KINDS); s++) {
        const eng_task *ids;
        const eng_span *sp;
        const size_t n = eng_stream_view(e, s, &ids);
        eng_stream_spans(e, s, &sp);
        for (size_t i = 0; i < n; i++)
            if (per->block[ids[i]] == per->blk) {
                inc->tasks++;
                inc->work_ps += sp[i].b - sp[i].a;
            }
    }
    /* Sends that are lags count in the work (as the build counts them),
     * in the block of the task they follow. */
    for (size_t i = 0; st->lag_sends && i < st->send_at[st->pp]; i++)
        if (per->block[st->send_from[i]] == per->blk)
            inc->work_ps += st->send_spans[i].b - st->send_spans[i].a;
    /* So does the host time folded into release times, in the block of
     * the task released after it. */
    for (size_t i = 0; i < st->n_fold; i++)
        if (per->block[st->fold_task[i]] == per->blk)
            inc->work_ps += st->fold_ps[i];
    inc->events = 2 * inc->tasks;
    inc->makespan_ps = inc->pipe_end_ps = per->lambda;
    return true;
}

/* The step's figures off the timeline, in integer picoseconds (summed
 * first, made seconds once by finish(): so that step_period's sums of
 * them are exact).
 *
 * A stream runs its tasks one at a time in order, so its spans, as the
 * engine keeps them (eng_stream_spans), are sorted and disjoint (touching at most): the
 * part of one such list that another leaves uncovered, and their union,
 * are the same as of the merged lists, and a stage without shifted passes
 * (no replaced task, no ops brought in) reads them in place.  The passes
 * that stand as one task bring their summaries: counted per (chunk, kind)
 * first, each summary added times its count (integer sums: the same as
 * adding it once per pass, and wrapping exactly when that would).
 *
 * One period's figures (per) are the same lists clipped to the stage's
 * window, each taken as soon as the whole step's use of it is done: the
 * busy union before the compute stream's list takes its place, the
 * streams' lists (kept side by side) after the whole step's exposed time.
 * A stream without tasks adds nothing to either walk, so it is left out
 * of both. */
int step_measure(step_t *st, step_meas *res, const step_period_req *per, sim_err *err)
{
    const engine_t *e = st->eng;
    const int64_t pp = st->pp, v = st->v, M = st->M;
    const int n_kinds = st->n_kinds;
    const size_t n_tasks = eng_num_tasks(e);
    step_meas *inc = per ? per->inc : NULL;
    if (per) {
        *per->derived = false;
        memset(inc, 0, sizeof *inc);
    }
    /* One period's figures come off a timeline without overlapped pairs
     * on which every task ran. */
    bool pok = per && st->n_pairs == 0 && eng_events(e) == 2 * (uint64_t)n_tasks;
    /* Shifted passes bring their ops: the most a stage has; and the most
     * tasks a stage has. */
    size_t n_inj, stage_most;
    stage_room(st, &n_inj, &stage_most);
    const size_t room = stage_most + n_inj + 1, n_sums = (size_t)(v * n_kinds);
    /* One block for the scratch below, each part a multiple of 8 bytes;
     * what only shifted passes use has no room without any, what only the
     * period uses none without it. */
    const size_t sh = n_inj ? 1 : 0, pw = pok ? 1 : 0;
    /* The two passes of an overlapped pair can be one task: a stage's
     * pass spans may outnumber the tasks. */
    const size_t n_all = room + (size_t)st->rank_passes;
    const size_t sizes[] = {
        n_all * sizeof(interval),                    /* all */
        2 * n_sums * sizeof(sim_time_ps),            /* n_whole, n_shifted */
        n_sums * sizeof(size_t),                     /* per_sum */
        sh * room * sizeof(interval),                /* comp */
        sh * room * sizeof(interval),                /* comm */
        sh * n_all * sizeof(interval),               /* tmp */
        sh * (n_inj + 1) * sizeof(interval),         /* inj */
        sh * ((size_t)st->rank_passes + 1) * sizeof(sim_time_ps), /* first_at */
        sh * n_sums * sizeof(sweep_memo),            /* memo */
        sh * 2 * (n_inj + 1) * sizeof(sim_time_ps),  /* ws, we */
        sh * (n_inj + 1) * sizeof(interval),         /* miv */
        pw * 2 * n_sums * sizeof(sim_time_ps),       /* p_whole, p_shifted */
        pw * n_all * sizeof(interval),               /* cut */
        pw * (size_t)(pp * CTR_PER_STAGE) * sizeof(int64_t), /* nets */
    };
    enum { N_PARTS = sizeof sizes / sizeof *sizes };
    size_t bytes = 0, at_part[N_PARTS];
    for (int i = 0; i < N_PARTS; i++) {
        at_part[i] = bytes;
        bytes += (sizes[i] + 7) / 8 * 8;
    }
    char *block = malloc(bytes);
    char *part[N_PARTS];
    for (int i = 0; i < N_PARTS; i++)
        part[i] = block ? block + at_part[i] : NULL;
    interval *all = (interval *)part[0];
    sim_time_ps *n_whole = (sim_time_ps *)part[1], *n_shifted = n_whole ? n_whole + n_sums : NULL;
    /* Per (chunk, kind) of a stage: its passes that stand as one task
     * (whole), those of them measured from their ops (shifted), and all
     * its shifted passes (per_sum). */
    size_t *per_sum = (size_t *)part[2];
    /* Every communication stream's spans of a stage at once, one after
     * the other, where passes are shifted (else they are read in place):
     * together no more than the stage's tasks and shifted ops. */
    interval *comp = (interval *)part[3], *comm = (interval *)part[4], *tmp = (interval *)part[5];
    interval *inj = (interval *)part[6];
    sim_time_ps *first_at = (sim_time_ps *)part[7];
    /* The sweeps of a stage's shifted templates: no more ops than its
     * shifted passes bring. */
    sweep_memo *memo = (sweep_memo *)part[8];
    sim_time_ps *ws = (sim_time_ps *)part[9], *we = ws ? ws + n_inj + 1 : NULL;
    interval *miv = (interval *)part[10];
    /* The period's: n_whole and n_shifted of one block's passes; every
     * list clipped to the window, one after the other; counter nets. */
    sim_time_ps *p_whole = (sim_time_ps *)part[11], *p_shifted = p_whole ? p_whole + n_sums : NULL;
    interval *cut = (interval *)part[12];
    int64_t *nets = (int64_t *)part[13];
    res->stages = calloc((size_t)pp, sizeof *res->stages);
    if (pok)
        inc->stages = calloc((size_t)pp, sizeof *inc->stages);
    int rc = SIM_OK;
    bool fits = true;
    if (!block || !res->stages || (pok && !inc->stages)) {
        rc = sim_err_set(err, SIM_ENOMEM, "out of memory measuring the step");
        goto done;
    }
    res->n_stages = pp;
    res->makespan_ps = eng_makespan(e);
    res->work_ps = st->work_ps;
    if (pok) {
        inc->n_stages = pp;
        pok = period_sums(st, per, nets);
    }

    /* The end of the last pass, from the stages' passes below (each
     * stage's order holds every one of its passes once). */
    sim_time_ps pipe_end = 0;

    for (int64_t r = 0; r < pp; r++) {
        step_stage_meas *sr = &res->stages[r];
        step_stage_meas *pr = pok ? &inc->stages[r] : NULL;
        const sim_time_ps lo = pok ? per->from[r] : 0, hi = pok ? lo + per->lambda : 0;
        /* Busy = union of forward/backward pass spans, in schedule order,
         * which is start order (passes start on the in-order compute
         * stream). */
        size_t at[STREAM_KINDS + 1] = {0};
        memset(n_whole, 0, 2 * n_sums * sizeof *n_whole);
        memset(per_sum, 0, n_sums * sizeof *per_sum);
        if (pok)
            memset(p_whole, 0, 2 * n_sums * sizeof *p_whole);
        bool shifts = false, any_shifted = false;
        size_t pass = (size_t)(r * st->rank_passes);
        for (int kind = 0; kind < n_kinds; kind++)
            for (int64_t mb = 0; mb < M; mb++)
                for (int64_t c = 0; c < v; c++, pass++) {
                    const size_t q = (size_t)(c * n_kinds + kind);
                    if (st->shifted[pass]) {
                        per_sum[q]++;
                        any_shifted = true;
                    }
                    if (!st->collapsed[pass] || st->paired[pass])
                        continue;
                    if (st->shifted[pass]) {
                        n_shifted[q]++;
                        shifts = true;
                    } else {
                        n_whole[q]++;
                    }
                    /* The period's: those of one block (by the task
                     * that stands for the pass). */
                    if (pok) {
                        const pass_ref *p = &st->passes[pass];
                        const eng_task t = p->span >= 0 ? p->span : p->first;
                        if (t < 0)
                            pok = false;
                        else if (per->block[t] == per->blk)
                            (st->shifted[pass] ? p_shifted : p_whole)[q]++;
                    }
                }
        if (!pok)
            pr = NULL;
        if (any_shifted &&
            (rc = shifted_ops(st, r, inj, at, first_at, per_sum, memo, miv, ws, we, err)) != SIM_OK)
            goto done;
        size_t n = 0;
        for (int64_t i = 0; i < st->rank_passes; i++) {
            const size_t pi = (size_t)st->order[r * st->rank_passes + i];
            const pass_ref *p = &st->passes[pi];
            if (p->last < 0)
                continue;
            const sim_time_ps end = eng_task_end(e, p->last);
            pipe_end = end > pipe_end ? end : pipe_end;
            if (p->span >= 0)
                all[n++] = (interval){st->shifted[pi] ? first_at[i] : eng_task_start(e, p->span), end};
        }
        /* The passes of an overlapped pair start in either order. */
        if (st->n_pairs > 0)
            qsort(all, n, sizeof *all, interval_cmp);
        n = merge(all, n);
        sr->busy_ps = length_of(all, n);
        if (pr)
            pr->busy_ps = length_of(cut, clip(all, n, lo, hi, cut));

        /* Exposed communication: comm-stream time with the compute stream
         * idle. */
        const interval *cp;
        size_t nc;
        if (shifts) {
            /* all is free again: the busy time is taken. */
            nc = stream_intervals(st, stream_of(r, STREAM_COMPUTE), comp);
            cp = with_shifted(comp, &nc, inj + at[STREAM_COMPUTE], at[STREAM_COMPUTE + 1] - at[STREAM_COMPUTE], all);
        } else {
            nc = eng_stream_spans(e, stream_of(r, STREAM_COMPUTE), &cp);
        }
        const interval *streams[STREAM_KINDS];
        size_t lens[STREAM_KINDS];
        int kinds[STREAM_KINDS];
        int n_comm = 0;
        size_t used = 0, united = 0;
        for (int k = 0; k < STREAM_KINDS; k++) {
            if (!streams_is_comm((stream_kind)k))
                continue;
            /* A stream's tasks come in run order, so sorted by start. */
            const interval *cm;
            size_t nk;
            if (shifts) {
                /* Its tasks after the last stream's in comm, their union
                 * with its shifted ops after the last one's in tmp. */
                interval *mine = comm + used;
                nk = stream_intervals(st, stream_of(r, (stream_kind)k), mine);
                used += nk;
                cm = with_shifted(mine, &nk, inj + at[k], at[k + 1] - at[k], tmp + united);
                united += cm == mine ? 0 : nk;
            } else {
                nk = comm_spans(st, r, k, &cm);
            }
            if (nk == 0)
                continue;
            streams[n_comm] = cm;
            kinds[n_comm] = k;
            lens[n_comm++] = nk;
        }
        sim_time_ps exposed_ps = step_measure_comm(streams, lens, kinds, n_comm, cp, nc, sr);
        for (int k = 0; k < STREAM_KINDS; k++)
            if (streams_desc((stream_kind)k)->role == STREAM_ROLE_HOST)
                sr->comm_ps[k] = st->host_own_ps[stream_of(r, (stream_kind)k)];
        fits = fits && step_measure_add_summaries(st, r, n_whole, n_shifted, sr, &exposed_ps);
        /* Overlapped pairs that stood as one task: their template's. */
        for (size_t q = 0; q < st->n_pairs; q++) {
            const pair_entry *pe = &st->pairs[q];
            if (pe->stage != r || pe->standing == 0)
                continue;
            const sim_time_ps times = (sim_time_ps)pe->standing;
            fits = fits && add_times(&exposed_ps, pe->sum.exposed_all_ps, times);
            for (int k = 0; k < STREAM_KINDS; k++)
                fits = fits && add_times(&sr->comm_ps[k], pe->sum.comm_ps[k], times) &&
                       add_times(&sr->exposed_ps[k], pe->sum.exposed_ps[k], times);
        }
        sr->exposed_total_ps = exposed_ps;
        const int act = (int)(r * CTR_PER_STAGE + CTR_ACT), inflight = (int)(r * CTR_PER_STAGE + CTR_INFLIGHT);
        sr->act_peak = eng_counter_peak(e, act);
        sr->inflight_peak = eng_counter_peak(e, inflight);
        sr->act_final = eng_counter_final(e, act);
        sr->inflight_final = eng_counter_final(e, inflight);

        if (pr) {
            /* One period: the streams' lists clipped to the window, the
             * compute stream's whole; the host's tasks of one block; the
             * summaries of the block's passes that stand as one task. */
            const interval *clipped[STREAM_KINDS];
            size_t clen[STREAM_KINDS], cut_used = 0;
            for (int i = 0; i < n_comm; i++) {
                clipped[i] = cut + cut_used;
                clen[i] = clip(streams[i], lens[i], lo, hi, cut + cut_used);
                cut_used += clen[i];
            }
            sim_time_ps p_exposed = step_measure_comm(clipped, clen, kinds, n_comm, cp, nc, pr);
            for (int k = 0; k < STREAM_KINDS; k++)
                if (streams_desc((stream_kind)k)->role == STREAM_ROLE_HOST)
                    pr->comm_ps[k] = host_busy(st, r, k, per->block, per->blk);
            pok = step_measure_add_summaries(st, r, p_whole, p_shifted, pr, &p_exposed);
            pr->exposed_total_ps = p_exposed;
        }
    }
    res->pipe_end_ps = pipe_end;
    res->events = eng_events(e);
    res->tasks = n_tasks;
    if (!fits)
        rc = sim_err_set_at(err, SIM_EINVAL, NULL, 0, "train.global_batch_size",
                            "the step's communication time per stage, summed over its passes, is beyond what "
                            "parsim counts (%.3g s); fewer microbatches keep it in range",
                            LIMIT_DURATION_S);
    /* The latest ends shift by lambda only where a task after the cut
     * holds them. */
    pok = pok && last_task_shifts(st, per, res->makespan_ps) && last_pass_shifts(st, per, pipe_end);
done:
    free(block);
    if (per) {
        if (rc == SIM_OK && pok) {
            *per->derived = true;
        } else {
            free(inc->stages);
            memset(inc, 0, sizeof *inc);
        }
    }
    return rc;
}
