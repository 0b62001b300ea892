/* schedule: Megatron Core's pipeline orders (contract in schedule.h;
 * reference/megatron-formulas.md §3.2-3.3).
 *
 * All three of Megatron's functions share one skeleton, written here once
 * over "virtual microbatches" k = 0 .. M*v-1 (for v == 1 virtual id k is
 * microbatch k on chunk 0):
 *     warmup    forward of k for k < w
 *     steady    for k < M*v - w: forward of k + w, then backward of k
 *     cooldown  backward of the rest
 * with w from sched_warmup.  p == 1 (forward_backward_no_pipelining) is the
 * case w == 0: F0 B0 F1 B1 ...  The forward of virtual id k runs the
 * (microbatch, chunk) of get_schedule_table; its backward runs the same
 * microbatch on chunk v-1-chunk, as get_model_chunk_id(k, forward=False)
 * does.
 */
#include "schedule.h"

#include <assert.h>
#include <stdlib.h>

static const sched_kind_desc kinds[SCHED_KINDS] = {
    [SCHED_F] = {"F", "send_fwd", +1, -1, false},
    [SCHED_B] = {"B", "send_bwd", -1, SCHED_F, false},
    [SCHED_W] = {"W", NULL, 0, SCHED_B, true},
};

const sched_kind_desc *sched_kind_of(sched_kind k)
{
    assert(k >= 0 && k < SCHED_KINDS);
    return &kinds[k];
}

bool sched_plan_has(const sched_plan *pl, sched_kind k)
{
    return !sched_kind_of(k)->split_only || pl->split;
}

int sched_plan_kinds(const sched_plan *pl)
{
    int n = 0;
    for (int k = 0; k < SCHED_KINDS; k++)
        n += sched_plan_has(pl, (sched_kind)k);
    return n;
}

sched_kind sched_plan_free_kind(const sched_plan *pl)
{
    return pl->split ? SCHED_W : SCHED_B;
}

sched_kind sched_plan_grad_kind(const sched_plan *pl)
{
    return pl->split ? SCHED_W : SCHED_B;
}

int64_t sched_vstage(const sched_plan *pl, int64_t rank, int64_t chunk)
{
    assert(rank >= 0 && rank < pl->p && chunk >= 0 && chunk < pl->v);
    if (pl->place == SCHED_PLACE_V)
        return chunk == 0 ? rank : 2 * pl->p - 1 - rank;
    return chunk * pl->p + rank;
}

void sched_locate(const sched_plan *pl, int64_t vstage, int64_t *rank, int64_t *chunk)
{
    assert(vstage >= 0 && vstage < pl->p * pl->v);
    if (pl->place == SCHED_PLACE_V) {
        *chunk = vstage < pl->p ? 0 : 1;
        *rank = vstage < pl->p ? vstage : 2 * pl->p - 1 - vstage;
        return;
    }
    *chunk = vstage / pl->p;
    *rank = vstage % pl->p;
}

sched_item sched_one(sched_kind kind, int32_t microbatch, int32_t chunk)
{
    return (sched_item){.pass = {{(uint8_t)kind, microbatch, chunk}}, .n_passes = 1};
}

sched_item sched_pair(sched_pass a, sched_pass b)
{
    return (sched_item){.pass = {a, b}, .n_passes = 2};
}

int64_t sched_len(int64_t M, int64_t v)
{
    const sched_plan megatron = {.p = 1, .v = v, .M = M, .N = 1, .place = SCHED_PLACE_LOOP, .split = false};
    return sched_plan_kinds(&megatron) * M * v;
}

int64_t sched_warmup(int64_t p, int64_t v, int64_t M, int64_t N, int64_t rank)
{
    int64_t total = M * v, w;
    if (p <= 1)
        return 0;   /* no pipelining: the F0 B0 F1 B1 order has no warmup */
    if (v <= 1)
        w = p - rank - 1;
    else
        w = (p - rank - 1) * 2 + (v - 1) * N;
    return w < total ? w : total;
}

void sched_virtual(int64_t v, int64_t M, int64_t N, int64_t k,
                   int32_t *microbatch, int32_t *chunk)
{
    assert(v >= 1 && M >= 1 && k >= 0 && k < M * v);
    if (v == 1) {
        *microbatch = (int32_t)k;
        *chunk = 0;
        return;
    }
    assert(N >= 1);
    /* get_schedule_table: groups of N microbatches; every group but the
     * last is N wide and is run chunk by chunk; the last group holds the
     * remaining M - (G-1)*N microbatches. */
    int64_t groups = (M + N - 1) / N;
    int64_t full = (groups - 1) * N * v;   /* virtual ids in the full groups */
    if (k < full) {
        int64_t g = k / (N * v), off = k % (N * v);
        *chunk = (int32_t)(off / N);
        *microbatch = (int32_t)(g * N + off % N);
    } else {
        int64_t width = M - (groups - 1) * N, off = k - full;
        *chunk = (int32_t)(off / width);
        *microbatch = (int32_t)((groups - 1) * N + off % width);
    }
}

/* sched_virtual's (microbatch, chunk) for k = 0, 1, 2, ... in turn,
 * without its divisions per k: sched_build reads the table in order.
 * Group g holds `width` microbatches (N, the last one what is left) of
 * every chunk c in turn; (g, c, j) is virtual id k's place. */
typedef struct vcursor {
    int64_t v, N, groups, last_width, width, g, c, j;
} vcursor;

static vcursor vcursor_at_0(int64_t v, int64_t M, int64_t N)
{
    /* v = 1: one group of M (microbatch k, chunk 0), whatever N is. */
    const int64_t groups = v == 1 ? 1 : (M + N - 1) / N, last_width = M - (groups - 1) * N;
    return (vcursor){v, N, groups, last_width, groups > 1 ? N : last_width, 0, 0, 0};
}

static inline void vcursor_read(const vcursor *q, int32_t *microbatch, int32_t *chunk)
{
    *microbatch = (int32_t)(q->g * q->N + q->j);
    *chunk = (int32_t)q->c;
}

static inline void vcursor_next(vcursor *q)
{
    if (++q->j < q->width)
        return;
    q->j = 0;
    if (++q->c < q->v)
        return;
    q->c = 0;
    q->g++;
    q->width = q->g < q->groups - 1 ? q->N : q->last_width;
}

int sched_build(int64_t p, int64_t v, int64_t M, int64_t N, int64_t rank,
                sched_item *out, sim_err *err)
{
    if (p < 1)
        return sim_err_set(err, SIM_EINVAL, "pipeline-parallel size must be >= 1, got %lld",
                           (long long)p);
    if (v < 1)
        return sim_err_set(err, SIM_EINVAL,
                           "virtual pipeline size (model chunks per rank) must be >= 1, got %lld",
                           (long long)v);
    if (M < 1)
        return sim_err_set(err, SIM_EINVAL, "number of microbatches must be >= 1, got %lld",
                           (long long)M);
    if (rank < 0 || rank >= p)
        return sim_err_set(err, SIM_EINVAL, "pipeline rank %lld is outside [0, %lld)",
                           (long long)rank, (long long)p);
    if (M > INT32_MAX || v > INT32_MAX || M * v > INT32_MAX)
        return sim_err_set(err, SIM_EINVAL, "schedule too long: %lld microbatches x %lld chunks",
                           (long long)M, (long long)v);
    if (v > 1) {
        if (p == 1)
            return sim_err_set(err, SIM_EINVAL,
                               "pipeline-model-parallel size should be greater than 1 with "
                               "interleaved schedule (virtual pipeline size %lld)",
                               (long long)v);
        if (N < p || N > M)
            return sim_err_set(err, SIM_EINVAL,
                               "The number of contiguous micro-batches in a virtual pipeline "
                               "stage should range in [PP=%lld , M=%lld], got %lld",
                               (long long)p, (long long)M, (long long)N);
        int64_t rem = M % N;
        if (rem > 0 && rem < p)
            return sim_err_set(err, SIM_EINVAL,
                               "The remainder of M (%lld) divided by N (%lld) should be 0, or "
                               "larger than or equal to the pipeline-parallel size (%lld)",
                               (long long)M, (long long)N, (long long)p);
    }

    int64_t total = M * v, w = sched_warmup(p, v, M, N, rank), n = 0;
    int32_t mb, ch;
    /* The forwards take virtual ids 0, 1, ... in order, and so do the
     * backwards: a cursor each. */
    vcursor f = vcursor_at_0(v, M, N), b = f;
    for (int64_t k = 0; k < w; k++, vcursor_next(&f)) {
        vcursor_read(&f, &mb, &ch);
        out[n++] = sched_one(SCHED_F, mb, ch);
    }
    for (int64_t k = 0; k < total - w; k++, vcursor_next(&f), vcursor_next(&b)) {
        vcursor_read(&f, &mb, &ch);
        out[n++] = sched_one(SCHED_F, mb, ch);
        vcursor_read(&b, &mb, &ch);
        out[n++] = sched_one(SCHED_B, mb, (int32_t)(v - 1 - ch));
    }
    for (int64_t k = total - w; k < total; k++, vcursor_next(&b)) {
        vcursor_read(&b, &mb, &ch);
        out[n++] = sched_one(SCHED_B, mb, (int32_t)(v - 1 - ch));
    }
    assert(n == sched_len(M, v));
    return SIM_OK;
}

/* ---- named schedules ---------------------------------------------------- */

const char *const sched_name_strs[SCHED_NAMES] = {
    [SCHED_MEGATRON] = "megatron", [SCHED_1F1B] = "1f1b",   [SCHED_INTERLEAVED] = "interleaved",
    [SCHED_ZB_H1] = "zb-h1",       [SCHED_ZB_V] = "zb-v",   [SCHED_DUALPIPEV] = "dualpipev",
};

const char *sched_name_str(sched_name n)
{
    assert(n >= 0 && n < SCHED_NAMES);
    return sched_name_strs[n];
}

bool sched_name_is_v(sched_name n)
{
    return n == SCHED_ZB_V || n == SCHED_DUALPIPEV;
}

bool sched_name_splits(sched_name n)
{
    return n == SCHED_ZB_H1 || n == SCHED_ZB_V || n == SCHED_DUALPIPEV;
}

void sched_plan_init(sched_plan *pl, sched_name name, int64_t p, int64_t v, int64_t M, int64_t N)
{
    *pl = (sched_plan){.name = name, .p = p, .v = v, .M = M, .N = N,
                       .place = sched_name_is_v(name) ? SCHED_PLACE_V : SCHED_PLACE_LOOP,
                       .split = sched_name_splits(name)};
}

int64_t sched_plan_period(const sched_plan *pl)
{
    /* The interleaved table runs microbatches in groups of N per chunk;
     * the other orders (1F1B, ZB-H1, the V schedules' main phase) advance
     * one microbatch per step. */
    return pl->place == SCHED_PLACE_LOOP && pl->v > 1 ? pl->N : 1;
}

int64_t sched_plan_passes(const sched_plan *pl)
{
    return sched_plan_kinds(pl) * pl->M * pl->v;
}

/* ZB-H1 (Qi et al. 2024, §3.1): 1F1B's warm-up of p-rank-1 forwards, then
 * F and B in turn, and each W deferred: rank r runs W of microbatch k
 * after B of k+r (the last rank, which the drain reaches first, defers
 * most), the W passes left over at the end.  Every rank then holds p
 * microbatches at most, as 1F1B's first rank does, and the deferred W
 * passes fill the drain: bubble (p-1)(F+B-W) against 1F1B's (p-1)(F+B+W)
 * when M >= p and W <= F. */
static int64_t zb_h1_warmup(int64_t p, int64_t M, int64_t rank)
{
    return p - rank - 1 < M ? p - rank - 1 : M;
}

static int64_t build_zb_h1(int64_t p, int64_t M, int64_t rank, sched_item *out)
{
    int64_t w = zb_h1_warmup(p, M, rank), lag = rank, n = 0, next_w = 0;
    for (int64_t k = 0; k < w; k++)
        out[n++] = sched_one(SCHED_F, (int32_t)k, 0);
    for (int64_t k = 0; k < M; k++) {
        if (k + w < M)
            out[n++] = sched_one(SCHED_F, (int32_t)(k + w), 0);
        out[n++] = sched_one(SCHED_B, (int32_t)k, 0);
        if (k - lag >= 0)
            out[n++] = sched_one(SCHED_W, (int32_t)next_w++, 0);
    }
    while (next_w < M)
        out[n++] = sched_one(SCHED_W, (int32_t)next_w++, 0);
    return n;
}

/* A V schedule under construction: items so far, the next microbatch of
 * each (kind, chunk), and the W passes deferred (first in, first out). */
typedef struct vgen {
    int64_t M;
    sched_item *out;
    int64_t n, cap;
    int32_t nf[2], nb[2];
    sched_pass *wq;
    int64_t wq_head, wq_tail;
    bool bad;               /* more passes than the schedule has: a wrong recipe */
} vgen;

static void v_emit(vgen *g, sched_item it)
{
    if (g->n < g->cap)
        g->out[g->n++] = it;
    else
        g->bad = true;
}

static sched_pass v_next(vgen *g, sched_kind k, int c)
{
    int32_t *next = k == SCHED_F ? &g->nf[c] : &g->nb[c];
    if (*next >= g->M)
        g->bad = true;
    return (sched_pass){(uint8_t)k, (*next)++, c};
}

/* The W after a backward: right after it, or deferred (zero bubble). */
static void v_after_b(vgen *g, sched_pass b, bool defer)
{
    sched_pass w = {SCHED_W, b.microbatch, b.chunk};
    if (defer)
        g->wq[g->wq_tail++] = w;
    else
        v_emit(g, (sched_item){.pass = {w}, .n_passes = 1});
}

static void v_f(vgen *g, int c)
{
    v_emit(g, (sched_item){.pass = {v_next(g, SCHED_F, c)}, .n_passes = 1});
}

static void v_b(vgen *g, int c, bool defer)
{
    sched_pass b = v_next(g, SCHED_B, c);
    v_emit(g, (sched_item){.pass = {b}, .n_passes = 1});
    v_after_b(g, b, defer);
}

static void v_w(vgen *g)
{
    if (g->wq_head == g->wq_tail) {
        g->bad = true;
        return;
    }
    v_emit(g, (sched_item){.pass = {g->wq[g->wq_head++]}, .n_passes = 1});
}

/* DualPipe's _forward_backward_chunk: the forward of chunk a overlapped
 * with the (whole) backward of chunk b. */
static void v_fb(vgen *g, int a, int b)
{
    sched_pass f = v_next(g, SCHED_F, a), bw = v_next(g, SCHED_B, b);
    v_emit(g, sched_pair(f, bw));
    v_after_b(g, bw, false);
}

/* DualPipeV (dualpipev.py, DualPipeV.step; chunk 0 is the way down,
 * virtual stage rank; chunk 1 the way up), its eight phases:
 *   1 nF0     2(p-r-1) forwards of chunk 0
 *   2 nF0F1   r+1 times a forward of each chunk
 *   3 nB1W1F1 p-r-1 times B1 (W deferred), a deferred W, F1
 *   4 main    M-2p+r+1 times F0&B1, F1&B0 (the last rank runs its first
 *             F0 and B1 apart)
 *   5 nB1F1B0 p-r-1 times B1, F1&B0
 *   6 nB1B0   r+1 times B1 B0, the W deferred from the middle one on
 *             (B1 on odd ranks, B0 on even ones), whole before
 *   7 nWB0    p-r-1 times a deferred W, B0 (W deferred)
 *   8 nW      the deferred W passes left. */
static int build_dualpipev(int64_t p, int64_t M, int64_t r, sched_item *out, int64_t cap, int64_t *n_out,
                           sim_err *err)
{
    vgen g = {.M = M, .out = out, .cap = cap, .wq = malloc((size_t)(2 * M + 1) * sizeof *g.wq)};
    if (!g.wq)
        return sim_err_set(err, SIM_ENOMEM, "out of memory building the pipeline schedule");
    for (int64_t i = 0; i < 2 * (p - r - 1); i++)
        v_f(&g, 0);
    for (int64_t i = 0; i < r + 1; i++) {
        v_f(&g, 0);
        v_f(&g, 1);
    }
    for (int64_t i = 0; i < p - r - 1; i++) {
        v_b(&g, 1, true);
        v_w(&g);
        v_f(&g, 1);
    }
    for (int64_t i = 0; i < M - 2 * p + r + 1; i++) {
        if (i == 0 && r == p - 1) {
            v_f(&g, 0);
            v_b(&g, 1, false);
        } else {
            v_fb(&g, 0, 1);
        }
        v_fb(&g, 1, 0);
    }
    for (int64_t i = 0; i < p - r - 1; i++) {
        v_b(&g, 1, false);
        v_fb(&g, 1, 0);
    }
    bool defer = false;
    for (int64_t i = 0; i < r + 1; i++) {
        if (i == (r + 1) / 2 && r % 2 == 1)
            defer = true;
        v_b(&g, 1, defer);
        if (i == (r + 1) / 2 && r % 2 == 0)
            defer = true;
        v_b(&g, 0, defer);
    }
    for (int64_t i = 0; i < p - r - 1; i++) {
        v_w(&g);
        v_b(&g, 0, true);
    }
    while (g.wq_head < g.wq_tail)
        v_w(&g);
    free(g.wq);
    bool complete = !g.bad;
    for (int c = 0; c < 2; c++)
        complete = complete && g.nf[c] == M && g.nb[c] == M;
    if (!complete)
        return sim_err_set(err, SIM_ESIM, "the dualpipev schedule of rank %lld does not run every pass once",
                           (long long)r);
    *n_out = g.n;
    return SIM_OK;
}

/* ZB-V (Qi et al. 2024, "memory efficient zero bubble schedule"), built as
 * the paper's repository builds it (zero-bubble-pipeline-parallelism,
 * v_schedule.py, PipelineGraph.try_v_schedule): a list schedule of every
 * rank at once at unit costs (F = B = W = 1, no communication), each pass
 * placed at max(its rank free, its input's end) + 1, under 1F1B's
 * activation memory: at most 2p chunk passes in flight on a rank, from the
 * start of an F to the end of its W.  The order each rank gets is then
 * run as it is whatever the real durations.  Dependencies (chunk 0 of
 * rank r is virtual stage r, chunk 1 is 2p-1-r): F of chunk 0 after F of
 * chunk 0 on rank r-1, F of chunk 1 after F of chunk 1 on rank r+1 (the
 * last rank: after its own F of chunk 0); B of chunk 1 after B of chunk 1
 * on rank r-1 (rank 0: after its F), B of chunk 0 after B of chunk 0 on
 * rank r+1 (the last rank: after its B of chunk 1); W after its B.
 *
 * The placement rules (the repository's, and why):
 *   warm-up  F of microbatch 0 down the ranks; then, from the last rank
 *            up, rank r adds chunk-0 forwards (with every rank above it,
 *            which feed it) while they end before chunk 1's first
 *            forward reaches it and 2r+2 in-flight places stay free (for
 *            the forwards of both chunks the next step adds), then runs
 *            that chunk-1 forward; then, from rank 1 down, the ranks below take
 *            forwards of the two chunks in turn until each has run as
 *            many as the rank above it and more of chunk 1.  Rank r then
 *            holds 2p-1-r chunk-0 and r+1 chunk-1 forwards: 2p in flight,
 *            the most the memory allows, before its first backward.
 *   rounds   2M rounds; each places one B per rank, then one F per rank.
 *            B: chunk 1 (a new microbatch's backward) once the chunk-0
 *            backwards have caught up with it, else chunk 0 if its input
 *            gradient is placed (or chunk 1 is done), else chunk 1: the
 *            older microbatch first, whose end frees memory; placed in
 *            dependency order (chunk 0 from the last rank up, then chunk
 *            1 from rank 0 down).  F: chunk 0 once chunk 1 has caught up
 *            with it, else chunk 1 if its input is placed, else chunk 0
 *            if its input is placed, else none this round.
 *   W        deferred (zero bubble needs them to fill the drain): a rank
 *            runs a pending W only where the next pass would exceed 2p
 *            in flight, where its input ends no earlier than the W would
 *            (a wait the W fills), and at the end; oldest first (the
 *            order of the W passes moves no pass: they feed nothing).
 * At unit costs this leaves no rank idle between its first pass and its
 * last (rank r starts r late and ends as late), the paper's zero bubble.
 * The repository's bubble-approval step and its search over fill options
 * are left out: at unit costs they never change the order.  A plainer
 * list schedule (whenever free: a ready B, else a ready F within memory,
 * else a W; any fixed preference of chunks) leaves the first ranks idle
 * in the drain (p-1 passes at p = 8): their W passes are spent before the
 * last backwards come back.
 *
 * Cost O(p*M) time for the orders of all ranks at once, one scratch of
 * O(p*M) (the end of every F and B; p rings of 2p pending W passes, as no
 * more are in flight) besides them. */
typedef struct zbv {
    const sched_plan *pl;
    int64_t p, M;              /* ranks, microbatches */
    int64_t *endf, *endb;      /* [(c*p + r)*M + m]: end of F / B, -1 until placed */
    int64_t *cur, *mem;        /* per rank: when it is free; passes in flight */
    int64_t (*nf)[2], (*nb)[2];/* per rank and chunk: F / B placed */
    int64_t *wq_head, *wq_len; /* per rank: ring of pending W (2p places) */
    sched_pass *wq;
    int8_t *bchunk;            /* per rank: the chunk of this round's B */
    sched_pass *order;         /* [r*cap + i]: rank r's i-th pass */
    int64_t *n, cap;           /* per rank: passes so far; passes of a rank */
    bool bad;                  /* a rule broke an invariant: a wrong recipe */
} zbv;

static int64_t *zbv_end(zbv *z, sched_kind k, int64_t c, int64_t r, int64_t m)
{
    return &(k == SCHED_F ? z->endf : z->endb)[(c * z->p + r) * z->M + m];
}

/* End of the input of the next (k, c) on rank r: the F of the virtual
 * stage before, the B of the one after (the last stage's B: its own F);
 * 0 for the first stage's F; -1 while not placed or none is left. */
static int64_t zbv_input_end(zbv *z, sched_kind k, int64_t c, int64_t r)
{
    const int64_t m = (k == SCHED_F ? z->nf : z->nb)[r][c], vs = sched_vstage(z->pl, r, c);
    if (m >= z->M)
        return -1;
    if (k == SCHED_F && vs == 0)
        return 0;
    if (k == SCHED_B && vs == 2 * z->p - 1)
        return *zbv_end(z, SCHED_F, c, r, m);
    int64_t fr, fc;
    sched_locate(z->pl, k == SCHED_F ? vs - 1 : vs + 1, &fr, &fc);
    return *zbv_end(z, k, fc, fr, m);
}

static void zbv_emit(zbv *z, int64_t r, sched_pass ps)
{
    if (z->n[r] < z->cap)
        z->order[r * z->cap + z->n[r]++] = ps;
    else
        z->bad = true;
}

static void zbv_put_w(zbv *z, int64_t r)
{
    const int64_t ring = 2 * z->p;
    if (z->wq_len[r] == 0) {
        z->bad = true;
        return;
    }
    sched_pass w = z->wq[r * ring + z->wq_head[r]];
    z->wq_head[r] = (z->wq_head[r] + 1) % ring;
    z->wq_len[r]--;
    z->cur[r]++;
    z->mem[r]--;
    zbv_emit(z, r, w);
}

/* Place the next (k, c) of rank r; with fill, pending W passes first
 * while each ends no later than that pass's input does. */
static void zbv_put(zbv *z, sched_kind k, int64_t c, int64_t r, bool fill)
{
    const int64_t in = zbv_input_end(z, k, c, r), ring = 2 * z->p;
    if (fill)
        while (z->wq_len[r] > 0 && in >= z->cur[r] + 1)
            zbv_put_w(z, r);
    if (in < 0 || (k == SCHED_F && z->mem[r] >= 2 * z->p) || (k == SCHED_B && z->wq_len[r] >= ring)) {
        z->bad = true;
        return;
    }
    const int64_t m = (k == SCHED_F ? z->nf : z->nb)[r][c]++, t = (z->cur[r] > in ? z->cur[r] : in) + 1;
    *zbv_end(z, k, c, r, m) = t;
    z->cur[r] = t;
    if (k == SCHED_F) {
        z->mem[r]++;
    } else {
        z->wq[r * ring + (z->wq_head[r] + z->wq_len[r]) % ring] = (sched_pass){SCHED_W, (int32_t)m, (int32_t)c};
        z->wq_len[r]++;
    }
    zbv_emit(z, r, (sched_pass){(uint8_t)k, (int32_t)m, (int32_t)c});
}

static int64_t zbv_forwards(const zbv *z, int64_t r)
{
    return z->nf[r][0] + z->nf[r][1];
}

static void zbv_warmup(zbv *z)
{
    const int64_t p = z->p, M = z->M;
    for (int64_t r = 0; r < p; r++)
        zbv_put(z, SCHED_F, 0, r, false);
    for (int64_t r = p - 1; r >= 0 && !z->bad; r--) {
        if (r < p - 1) {
            const int64_t arrives = *zbv_end(z, SCHED_F, 1, r + 1, 0);
            while (!z->bad && z->mem[r] + 2 + 2 * r <= 2 * p && z->cur[r] + 1 <= arrives && z->nf[r][0] < M)
                for (int64_t j = 0; j <= r; j++)
                    zbv_put(z, SCHED_F, 0, j, false);
        }
        zbv_put(z, SCHED_F, 1, r, false);
    }
    int64_t c = 0;
    for (int64_t r = 1; r < p && !z->bad; r++) {
        int stuck = 0; /* turns in a row that placed nothing on rank r */
        while (!z->bad && (zbv_forwards(z, r) < zbv_forwards(z, r - 1) ||
                           (z->nf[r][1] <= z->nf[r - 1][1] && z->nf[r - 1][1] < M))) {
            const int64_t before = zbv_forwards(z, r);
            for (int64_t j = p - 1; j >= r; j--)
                if (z->nf[j][c] < M)
                    zbv_put(z, SCHED_F, c, j, false);
            c = 1 - c;
            stuck = zbv_forwards(z, r) == before ? stuck + 1 : 0;
            z->bad = z->bad || stuck >= 2;
        }
    }
}

static void zbv_round(zbv *z)
{
    const int64_t p = z->p, M = z->M;
    for (int64_t r = 0; r < p; r++)
        z->bchunk[r] = z->nb[r][0] < z->nb[r][1] && (zbv_input_end(z, SCHED_B, 0, r) >= 0 || z->nb[r][1] >= M) ? 0 : 1;
    /* In input order: chunk 0 from the last rank up, chunk 1 from rank 0
     * down. */
    for (int64_t r = p - 1; r >= 0; r--)
        if (z->bchunk[r] == 0)
            zbv_put(z, SCHED_B, 0, r, true);
    for (int64_t r = 0; r < p; r++)
        if (z->bchunk[r] == 1)
            zbv_put(z, SCHED_B, 1, r, true);
    for (int64_t r = 0; r < p; r++) {
        int64_t c;
        if (z->nf[r][1] >= M)
            continue;
        if (z->nf[r][1] >= z->nf[r][0])
            c = 0;
        else if (zbv_input_end(z, SCHED_F, 1, r) >= 0)
            c = 1;
        else if (zbv_input_end(z, SCHED_F, 0, r) >= 0)
            c = 0;
        else
            continue;
        while (z->mem[r] >= 2 * p && z->wq_len[r] > 0)
            zbv_put_w(z, r);
        zbv_put(z, SCHED_F, c, r, true);
    }
}

/* Fills order[r*6M ..] with the passes of every rank r. */
static int build_zb_v(const sched_plan *pl, sched_pass *order, sim_err *err)
{
    const int64_t p = pl->p, M = pl->M;
    /* One block: F and B ends (4pM), four per-rank counters, the F and B
     * counts per chunk and the pass counts (9p), the W rings (2p^2
     * passes), the B chunks (p).  p <= M/2 < 2^29 (sched_plan_build's
     * checks): 9p and 2p^2 fit in int64; the rest is checked. */
    int64_t words, ring_bytes, total;
    if (__builtin_mul_overflow(4 * p, M, &words) || __builtin_add_overflow(words, 9 * p, &words) ||
        __builtin_mul_overflow(words, (int64_t)sizeof(int64_t), &total) ||
        __builtin_mul_overflow(2 * p * p, (int64_t)sizeof(sched_pass), &ring_bytes) ||
        __builtin_add_overflow(total, ring_bytes + p, &total) || (uint64_t)total > SIZE_MAX)
        return sim_err_set(err, SIM_ENOMEM, "out of memory building the zb-v schedule (%lld ranks, %lld microbatches)",
                           (long long)p, (long long)M);
    int64_t *block = malloc((size_t)total);
    if (!block)
        return sim_err_set(err, SIM_ENOMEM, "out of memory building the zb-v schedule (%lld ranks, %lld microbatches)",
                           (long long)p, (long long)M);
    zbv z = {.pl = pl, .p = p, .M = M, .order = order, .cap = 6 * M};
    z.endf = block;
    z.endb = z.endf + 2 * p * M;
    z.cur = z.endb + 2 * p * M;
    z.mem = z.cur + p;
    z.wq_head = z.mem + p;
    z.wq_len = z.wq_head + p;
    z.n = z.wq_len + p;
    z.nf = (int64_t(*)[2])(z.n + p);
    z.nb = z.nf + p;
    z.wq = (sched_pass *)(z.nb + p);
    z.bchunk = (int8_t *)(z.wq + 2 * p * p);
    for (int64_t i = 0; i < 4 * p * M; i++)
        z.endf[i] = -1;
    for (int64_t i = 0; i < 9 * p; i++)
        z.cur[i] = 0;
    zbv_warmup(&z);
    for (int64_t i = 0; i < 2 * M && !z.bad; i++)
        zbv_round(&z);
    bool complete = !z.bad;
    for (int64_t r = 0; r < p; r++) {
        while (z.wq_len[r] > 0 && !z.bad)
            zbv_put_w(&z, r);
        for (int c = 0; c < 2; c++)
            complete = complete && !z.bad && z.nf[r][c] == M && z.nb[r][c] == M && z.mem[r] == 0 && z.n[r] == z.cap;
    }
    free(block);
    if (!complete)
        return sim_err_set(err, SIM_ESIM, "the zb-v schedule (%lld ranks, %lld microbatches) does not run every "
                           "pass once", (long long)p, (long long)M);
    return SIM_OK;
}

static void zbv_copy(const sched_pass *order, int64_t rank, int64_t len, sched_item *out, int64_t *n)
{
    for (int64_t i = 0; i < len; i++)
        out[i] = (sched_item){.pass = {order[rank * len + i]}, .n_passes = 1};
    *n = len;
}

/* ZB-V's list schedule orders every rank at once: with `keep` the orders
 * of the last (p, M) stay there for the caller's next rank, so a step
 * costs one list schedule, not p. */
static int zbv_plan_build(const sched_plan *pl, int64_t rank, sched_orders *keep, sched_item *out, int64_t *n,
                          sim_err *err)
{
    const int64_t len = 6 * pl->M;
    if (keep && keep->order && keep->p == pl->p && keep->M == pl->M) {
        zbv_copy(keep->order, rank, len, out, n);
        return SIM_OK;
    }
    sched_pass *order = NULL;
    size_t bytes; /* p*len < 2^29 * 3 * 2^31 passes: the product is checked */
    if (!__builtin_mul_overflow((size_t)(pl->p * len), sizeof *order, &bytes))
        order = malloc(bytes);
    if (!order)
        return sim_err_set(err, SIM_ENOMEM, "out of memory building the zb-v schedule (%lld ranks, %lld microbatches)",
                           (long long)pl->p, (long long)pl->M);
    int rc = build_zb_v(pl, order, err);
    if (rc == SIM_OK)
        zbv_copy(order, rank, len, out, n);
    if (rc == SIM_OK && keep) {
        sched_orders_free(keep);
        *keep = (sched_orders){.p = pl->p, .M = pl->M, .order = order};
    } else {
        free(order);
    }
    return rc;
}

void sched_orders_free(sched_orders *keep)
{
    free(keep->order);
    *keep = (sched_orders){0};
}

int64_t sched_plan_first_b(const sched_plan *pl, int64_t rank, int64_t *fwd)
{
    const int64_t p = pl->p, v = pl->v, M = pl->M, r = rank;
    for (int64_t c = 0; c < v; c++)
        fwd[c] = 0;
    if (sched_name_is_v(pl->name)) {
        /* Both fill 2p in flight before their first backward, of chunk 1:
         * 2p-1-r forwards of chunk 0 and r+1 of chunk 1 (ZB-V's warm-up;
         * DualPipeV's phases 1 and 2), DualPipeV's last rank one more F0. */
        fwd[0] = 2 * (p - r - 1) + (r + 1) + (pl->name == SCHED_DUALPIPEV && r == p - 1);
        fwd[1] = r + 1;
        return 1;
    }
    /* Megatron's orders and ZB-H1 (1F1B's warm-up): w warmup forwards and
     * one more; the backward of virtual microbatch 0 on chunk v-1. */
    int64_t total = M * v, w = pl->name == SCHED_ZB_H1 ? zb_h1_warmup(p, M, r) : sched_warmup(p, v, M, pl->N, r);
    int64_t n = w < total ? w + 1 : total;
    for (int64_t k = 0; k < n; k++) {
        int32_t mb, ch;
        sched_virtual(v, M, pl->N, k, &mb, &ch);
        fwd[ch]++;
    }
    return v - 1;
}

int64_t sched_combined_warmup(const sched_plan *pl, int64_t rank)
{
    int64_t w = sched_warmup(pl->p, pl->v, pl->M, pl->N, rank) + 1;
    return w < pl->M * pl->v ? w : pl->M * pl->v;
}

/* Combined 1F1B (combined_1f1b.py): Megatron's order with one more
 * warm-up forward, so that each steady forward can run beside the
 * backward of an older microbatch, and those two as one item: F B as a
 * pair in the steady phase.  Built on sched_build's order: its items are
 * the warm-up forwards, then (F, B) per steady step, then the cool-down
 * backwards. */
static int build_combined(const sched_plan *pl, int64_t rank, sched_item *out, int64_t *n, sim_err *err)
{
    const int64_t total = pl->M * pl->v, w = sched_combined_warmup(pl, rank);
    int32_t mb, ch;
    int64_t k = 0;
    *n = 0;
    if (pl->p > 1 && pl->v <= 1)
        return sim_err_set(err, SIM_EINVAL, "combined 1F1B with %lld pipeline ranks needs an interleaved schedule",
                           (long long)pl->p);
    int rc = sched_build(pl->p, pl->v, pl->M, pl->N, rank, out, err); /* checks (p, v, M, N) */
    if (rc != SIM_OK)
        return rc;
    for (; k < w; k++) {
        sched_virtual(pl->v, pl->M, pl->N, k, &mb, &ch);
        out[(*n)++] = sched_one(SCHED_F, mb, ch);
    }
    for (int64_t b = 0; b < total; b++) {
        sched_virtual(pl->v, pl->M, pl->N, b, &mb, &ch);
        sched_pass bw = {SCHED_B, mb, (int32_t)(pl->v - 1 - ch)};
        if (k < total) {
            sched_virtual(pl->v, pl->M, pl->N, k++, &mb, &ch);
            out[(*n)++] = sched_pair((sched_pass){SCHED_F, mb, ch}, bw);
        } else {
            out[(*n)++] = (sched_item){.pass = {bw}, .n_passes = 1};
        }
    }
    return SIM_OK;
}

int sched_plan_build(const sched_plan *pl, int64_t rank, sched_item *out, int64_t *n, sim_err *err)
{
    return sched_plan_build_kept(pl, rank, NULL, out, n, err);
}

int sched_plan_build_kept(const sched_plan *pl, int64_t rank, sched_orders *keep, sched_item *out, int64_t *n,
                          sim_err *err)
{
    if (pl->combined && !pl->split && pl->place == SCHED_PLACE_LOOP)
        return build_combined(pl, rank, out, n, err);
    const int64_t p = pl->p, v = pl->v, M = pl->M;
    *n = 0;
    switch (pl->name) {
    case SCHED_ZB_H1:
        if (v != 1)
            return sim_err_set(err, SIM_EINVAL, "the zb-h1 schedule runs one chunk per rank, got %lld", (long long)v);
        if (p < 1 || M < 1 || rank < 0 || rank >= p || M > INT32_MAX)
            return sim_err_set(err, SIM_EINVAL, "zb-h1: %lld ranks, %lld microbatches, rank %lld", (long long)p,
                               (long long)M, (long long)rank);
        *n = build_zb_h1(p, M, rank, out);
        return SIM_OK;
    case SCHED_ZB_V:
    case SCHED_DUALPIPEV:
        if (v != 2 || p < 2 || rank < 0 || rank >= p)
            return sim_err_set(err, SIM_EINVAL, "the %s schedule runs two chunks on each of >= 2 ranks, got %lld "
                               "chunks on %lld ranks", sched_name_str(pl->name), (long long)v, (long long)p);
        if (M < 2 * p || M > INT32_MAX / 2)
            return sim_err_set(err, SIM_EINVAL, "the %s schedule needs at least 2 x %lld microbatches, got %lld",
                               sched_name_str(pl->name), (long long)p, (long long)M);
        if (pl->name == SCHED_ZB_V)
            return zbv_plan_build(pl, rank, keep, out, n, err);
        return build_dualpipev(p, M, rank, out, sched_plan_passes(pl), n, err);
    default: {
        int rc = sched_build(p, v, M, pl->N, rank, out, err);
        if (rc == SIM_OK)
            *n = sched_len(M, v);
        return rc;
    }
    }
}
