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
    for (int64_t k = 0; k < w; k++) {
        sched_virtual(v, M, N, k, &mb, &ch);
        out[n++] = sched_one(SCHED_F, mb, ch);
    }
    for (int64_t k = 0; k < total - w; k++) {
        sched_virtual(v, M, N, k + w, &mb, &ch);
        out[n++] = sched_one(SCHED_F, mb, ch);
        sched_virtual(v, M, N, k, &mb, &ch);
        out[n++] = sched_one(SCHED_B, mb, (int32_t)(v - 1 - ch));
    }
    for (int64_t k = total - w; k < total; k++) {
        sched_virtual(v, M, N, k, &mb, &ch);
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

/* The V schedules share DualPipeV's phases (dualpipev.py, DualPipeV.step;
 * chunk 0 is the way down, virtual stage rank; chunk 1 the way up):
 *   1 nF0     2(p-r-1) forwards of chunk 0
 *   2 nF0F1   r+1 times a forward of each chunk
 *   3 nB1W1F1 p-r-1 times B1 (W deferred), a deferred W, F1
 *   4 main    M-2p+r+1 times: DualPipeV: F0&B1, F1&B0 (the last rank runs
 *             its first F0 and B1 apart); ZB-V: B1 B0 W F0 W F1 (backwards
 *             first, so that no more than 2p passes are in flight)
 *   5 nB1F1B0 p-r-1 times: DualPipeV: B1, F1&B0; ZB-V: B0 B1 W W F1
 *   6 nB1B0   r+1 times B1 B0, the W deferred from the middle one on
 *             (B1 on odd ranks, B0 on even ones), whole before
 *   7 nWB0    p-r-1 times a deferred W, B0 (W deferred)
 *   8 nW      the deferred W passes left. */
static int build_v(sched_name name, int64_t p, int64_t M, int64_t r, sched_item *out, int64_t cap, int64_t *n_out,
                   sim_err *err)
{
    vgen g = {.M = M, .out = out, .cap = cap, .wq = malloc((size_t)(2 * M + 1) * sizeof *g.wq)};
    if (!g.wq)
        return sim_err_set(err, SIM_ENOMEM, "out of memory building the pipeline schedule");
    const bool dual = name == SCHED_DUALPIPEV;
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
        if (dual) {
            if (i == 0 && r == p - 1) {
                v_f(&g, 0);
                v_b(&g, 1, false);
            } else {
                v_fb(&g, 0, 1);
            }
            v_fb(&g, 1, 0);
        } else {
            v_b(&g, 1, true);
            v_b(&g, 0, true);
            v_w(&g);
            v_f(&g, 0);
            v_w(&g);
            v_f(&g, 1);
        }
    }
    for (int64_t i = 0; i < p - r - 1; i++) {
        if (dual) {
            v_b(&g, 1, false);
            v_fb(&g, 1, 0);
        } else {
            v_b(&g, 0, true);
            v_b(&g, 1, true);
            v_w(&g);
            v_w(&g);
            v_f(&g, 1);
        }
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
        return sim_err_set(err, SIM_ESIM, "the %s schedule of rank %lld does not run every pass once",
                           sched_name_str(name), (long long)r);
    *n_out = g.n;
    return SIM_OK;
}

int64_t sched_plan_first_b(const sched_plan *pl, int64_t rank, int64_t *fwd)
{
    const int64_t p = pl->p, v = pl->v, M = pl->M, r = rank;
    for (int64_t c = 0; c < v; c++)
        fwd[c] = 0;
    if (sched_name_is_v(pl->name)) {
        /* build_v: phases 1 and 2, then B1 (phase 3, or phase 4 of ZB-V);
         * DualPipeV's last rank runs one more F0 before its B1. */
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
        return build_v(pl->name, p, M, rank, out, sched_plan_passes(pl), n, err);
    default: {
        int rc = sched_build(p, v, M, pl->N, rank, out, err);
        if (rc == SIM_OK)
            *n = sched_len(M, v);
        return rc;
    }
    }
}
