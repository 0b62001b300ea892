/* step_measure: the step's figures off its timeline (internal to the step
 * module, not part of its contract in step.h).
 *
 * The interval arithmetic the measurement is made of (busy time as a union
 * of intervals, exposed time as the part of one union another leaves
 * uncovered), which the pass summaries of step.c use on a template's
 * timeline too, and step_measure(): per stage the busy time of its passes,
 * each communication stream's busy and exposed time, host busy time and
 * the counter peaks, in integer picoseconds (summed first, made seconds
 * once by the step: so that step_period's sums of them are exact).
 */
#ifndef PARSIM_STEP_MEASURE_H
#define PARSIM_STEP_MEASURE_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "err.h"
#include "step.h"
#include "step_period.h"
#include "units.h"

/* [a, b): the engine's spans are intervals. */
typedef eng_span interval;

static inline int interval_cmp(const void *x, const void *y)
{
    const interval *a = x, *b = y;
    return a->a < b->a ? -1 : a->a > b->a;
}

/* Merges intervals sorted by start into a disjoint union in place. */
static inline size_t merge(interval *iv, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (iv[i].b <= iv[i].a)
            continue;
        if (k > 0 && iv[i].a <= iv[k - 1].b) {
            if (iv[i].b > iv[k - 1].b)
                iv[k - 1].b = iv[i].b;
        } else {
            iv[k++] = iv[i];
        }
    }
    return k;
}

/* Union of two disjoint sorted interval lists (touching at most) into out
 * (the same); returns its length.  Where one list has ended, the rest of
 * the other past the union's last interval comes as it is (touching and
 * empty intervals too, which cover what merging them covers). */
static inline size_t unite(const interval *a, size_t na, const interval *b, size_t nb, interval *out)
{
    /* merge() of the interleaved lists, done as they interleave. */
    size_t i = 0, j = 0, n = 0;
    while (i < na && j < nb) {
        const interval x = a[i].a <= b[j].a ? a[i++] : b[j++];
        if (x.b <= x.a)
            continue;
        if (n > 0 && x.a <= out[n - 1].b) {
            if (x.b > out[n - 1].b)
                out[n - 1].b = x.b;
        } else {
            out[n++] = x;
        }
    }
    const interval *r = i < na ? a + i : b + j;
    size_t nr = i < na ? na - i : nb - j;
    for (; nr > 0 && n > 0 && r->a <= out[n - 1].b; r++, nr--)
        if (r->b > out[n - 1].b)
            out[n - 1].b = r->b;
    memcpy(out + n, r, nr * sizeof *out);
    return n + nr;
}

/* *u becomes the union of *u and c (both disjoint, sorted, touching at
 * most), built in *spare and the two buffers swapped (both of the
 * same room) instead of copied back; returns its length.  An empty c
 * leaves *u as it is, which is what merging it would give. */
static inline size_t unite_into(interval **u, size_t nu, const interval *c, size_t nc, interval **spare)
{
    if (nc == 0)
        return nu;
    size_t n = unite(*u, nu, c, nc, *spare);
    interval *x = *u;
    *u = *spare;
    *spare = x;
    return n;
}

/* The first of c[j..nc) that ends after a, where c's ends never
 * decrease (a union, or a stream's spans): galloping from j, then a
 * binary search, so that a list with few intervals against a long c
 * costs their logarithms rather than a walk along c. */
static inline size_t skip_ended(const interval *c, size_t j, size_t nc, sim_time_ps a)
{
    if (j >= nc || c[j].b > a)
        return j;
    size_t lo = j, hi = j + 1, step = 1; /* c[lo].b <= a */
    while (hi < nc && c[hi].b <= a) {
        lo = hi;
        step *= 2;
        hi = step < nc - lo ? lo + step : nc;
    }
    while (hi - lo > 1) { /* c[lo].b <= a; hi == nc or c[hi].b > a */
        const size_t mid = lo + (hi - lo) / 2;
        if (c[mid].b <= a)
            lo = mid;
        else
            hi = mid;
    }
    return hi;
}

/* Length of [a, b) not covered by c (sorted, disjoint, touching at
 * most), the scan resuming at *j: callers go through [a, b)s in order
 * of start. */
static inline sim_time_ps uncovered_one(sim_time_ps a, sim_time_ps b, const interval *c, size_t nc, size_t *j)
{
    sim_time_ps covered = 0;
    *j = skip_ended(c, *j, nc, a);
    for (size_t k = *j; k < nc && c[k].a < b; k++) {
        const sim_time_ps lo = c[k].a > a ? c[k].a : a, hi = c[k].b < b ? c[k].b : b;
        if (hi > lo)
            covered += hi - lo;
    }
    return (b - a) - covered;
}

/* Length of the part of u not covered by c (each sorted and disjoint,
 * touching at most: a union, or a stream's spans). */
static inline sim_time_ps uncovered(const interval *u, size_t nu, const interval *c, size_t nc)
{
    sim_time_ps total = 0;
    size_t j = 0;
    for (size_t i = 0; i < nu; i++)
        total += uncovered_one(u[i].a, u[i].b, c, nc, &j);
    return total;
}

/* Of n lists (u[k], nu[k] long, each sorted and disjoint, touching at
 * most: a union, or a stream's spans; n <= STREAM_KINDS), in one walk:
 * each list's total length (tot[k]), the part of it c leaves uncovered
 * (unc[k]), and, returned, the part of their union c leaves uncovered.
 * The union is built on the fly in start order, as merge() builds it,
 * without storing it; the list with the earliest head gives every
 * interval that starts no later than the other heads in one run.  A
 * piece of the union whose members do not overlap (one alone, or
 * touching) is uncovered as much as they are together, which their own
 * lists' walks have measured: only a piece where members overlap is
 * measured against c again.  Intervals never end before they start
 * (spans), so an empty one adds nothing anywhere. */
static inline sim_time_ps exposed_lists(const interval *const *u, const size_t *nu, int n, const interval *c,
                                        size_t nc, sim_time_ps *tot, sim_time_ps *unc)
{
    size_t at[STREAM_KINDS] = {0}, jk[STREAM_KINDS] = {0}, j = 0;
    sim_time_ps total = 0, ca = 0, cb = 0, members = 0;
    bool open = false, overlap = false;
    for (int k = 0; k < n; k++)
        tot[k] = unc[k] = 0;
    for (;;) {
        /* The earliest head (the first of equals) and the earliest of
         * the others' heads, in one look at each. */
        int pick = -1;
        sim_time_ps head = 0, bound = UINT64_MAX;
        for (int k = 0; k < n; k++) {
            if (at[k] >= nu[k])
                continue;
            const sim_time_ps h = u[k][at[k]].a;
            if (pick < 0 || h < head) {
                if (pick >= 0)
                    bound = head;
                pick = k;
                head = h;
            } else if (h < bound) {
                bound = h;
            }
        }
        if (pick < 0)
            break;
        const interval *l = u[pick];
        size_t i = at[pick], *jp = &jk[pick];
        sim_time_ps t = tot[pick], x_exp = unc[pick];
        do {
            const interval x = l[i++];
            if (x.b <= x.a)
                continue;
            t += x.b - x.a;
            const sim_time_ps e = uncovered_one(x.a, x.b, c, nc, jp);
            x_exp += e;
            if (open && x.a <= cb) {
                overlap = overlap || x.a < cb;
                cb = x.b > cb ? x.b : cb;
                members += e;
                continue;
            }
            if (open)
                total += overlap ? uncovered_one(ca, cb, c, nc, &j) : members;
            ca = x.a;
            cb = x.b;
            members = e;
            overlap = false;
            open = true;
        } while (i < nu[pick] && l[i].a <= bound);
        at[pick] = i;
        tot[pick] = t;
        unc[pick] = x_exp;
    }
    if (open)
        total += overlap ? uncovered_one(ca, cb, c, nc, &j) : members;
    return total;
}

/* The last sweep of a (chunk, kind)'s template in step_measure's shifted_ops (and
 * step_direct's), its ops'
 * times at off in the memo's arrays, less base: a template run as alone
 * from its GPU start (SHIFT_AHEAD) is swept from the same origin for
 * every pass of its (chunk, kind), so once; one run from its GPU's and
 * its host's starts (SHIFT_HOST) gives, the sweep being max-plus
 * (sweep_gated: every time a max of sums), the same times later by d
 * when both starts are later by d: kept with the starts less the earlier
 * of them (gpu_d, host_d, one of them 0). */
typedef struct sweep_memo {
    size_t off;
    uint8_t shift; /* SHIFT_NONE: not swept yet on this stage */
    sim_time_ps gpu_d, host_d;
    sim_time_ps gpu_a; /* the start of its first GPU op, where its span begins */
    size_t cnt[STREAM_KINDS]; /* its ops per stream */
} sweep_memo;
/* The [start, end) of a (chunk, kind)'s ops (*g, less the base the caller
 * adds), grouped by stream (m->cnt[k] of stream k after those of the
 * streams before it, each stream's in op order: so that a pass's ops go
 * to the streams' lists in runs), swept as shift says from gpu_at and
 * host_at, from its memo where that sweep is known, else swept (step_sweep
 * writes a timeline's starts and ends into ws, we: room for the ops) and
 * kept in the memo's place of miv. */
int step_memo_sweep(const wl_pass *p, uint8_t shift, sim_time_ps gpu_at, sim_time_ps host_at, sweep_memo *m,
                    interval *miv, sim_time_ps *ws, sim_time_ps *we, const interval **g, sim_err *err);
/* Each listed stream's busy and exposed time into sr (list i is stream
 * kinds[i]'s, each sorted and disjoint), against the compute stream's cp,
 * in one walk; returned, their union's exposed time. */
sim_time_ps step_measure_comm(const interval *const *streams, const size_t *lens, const int *kinds, int n,
                              const interval *cp, size_t nc, step_stage_meas *sr);
/* Passes of stage r that stand as one task (n_whole per (chunk, kind))
 * bring their communication from their summary into sr and *exposed_ps;
 * those measured from their ops (n_shifted) only their host.  False when
 * a sum would wrap. */
bool step_measure_add_summaries(const step_t *st, int64_t r, const sim_time_ps *n_whole, const sim_time_ps *n_shifted,
                                step_stage_meas *sr, sim_time_ps *exposed_ps);
/* What one period adds to a step whose timeline step_period verified
 * (step_period.h, "One sample"): block the fit's per task, blk the block
 * after its cut, from[r] where stage r's window begins, lambda the
 * period; timed as the fit read it.  *inc gets the increments of every
 * summed figure, the latest ends' lambda (peaks and finals: 0, they
 * stay); *derived false (inc empty) where one sample does not give them:
 * an overlapped pair, a counter a block changes, a latest end before the
 * cut. */
typedef struct step_period_req {
    const int32_t *block;
    int32_t blk;
    const sim_time_ps *from;
    sim_time_ps lambda;
    const uint8_t *timed;
    step_meas *inc;
    bool *derived;
} step_period_req;

/* The figures of a step whose graph has run (step_internal.h: the
 * engine, the pass places and the summaries in st), and with per (or
 * NULL) what one period adds, in the same walk over the stages' lists. */
int step_measure(step_t *st, step_meas *res, const step_period_req *per, sim_err *err);

#endif
