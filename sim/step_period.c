/* step_period: a long step from two short ones (contract and the argument
 * in step_period.h). */
#include "step_period.h"

#include <stdlib.h>
#include <string.h>

#define PRE (-1)

typedef unsigned __int128 wide;

/* The working state of one fit: per task its block, per stream the tasks
 * in run order and where each block begins among them. */
typedef struct fitter {
    const step_timeline *tl;
    const engine_t *e;
    size_t n;
    int n_streams;
    int64_t K;
    int32_t *beta;       /* per task: PRE, 0 .. K-1, or K (the suffix) */
    int32_t *pos;        /* per task: its place in its stream */
    const eng_task *by_stream; /* all tasks, stream after stream (the engine's, or own_order) */
    eng_task *own_order;
    size_t *stream_at;   /* [s]: first of stream s in by_stream; [n_streams]: n */
    size_t *block_at;    /* [s * (K + 3) + b + 1]: first place of block b (PRE = -1 .. K) in stream s, and one past */
    int32_t *n_pred;     /* per task: dependency predecessors */
    bool *bad;           /* per block: its structure differs from the next (regular_blocks) */
    uint8_t *locked;     /* per task after the cut: shifts by exactly lambda */
    eng_task *work;      /* the locked tasks whose edges are still to follow */
    sim_time_ps *start, *end; /* per task, copied from the engine once */
    eng_dep *moves;      /* the edges into tasks outside the passes (assign_blocks) */
    sim_time_ps *shift;  /* per task of blocks 0 .. K-2: its image's start less its own (block_shifts) */
    eng_task *img;       /* per task: its image one block later, or -1 (index_images; read by
                            same_structure, before regular_blocks renumbers) */
    int32_t *stream;
    const uint32_t *succ_off; /* the engine's successor rows (eng_succ_rows), read in place */
    const eng_task *succ;
    const sim_time_ps *lag;   /* their lags beside them (eng_succ_lags), NULL: none */
    /* Per task its release (eng_task_releases), NULL: none; per stage
     * how much the releases of its tasks move from a block to the next
     * (block_shifts; host_shift_set: known, from the released tasks'
     * images or as 0 where its steady blocks have no release). */
    const sim_time_ps *rel;
    sim_time_ps *host_shift;
    bool *host_shift_set;
} fitter;

/* The lag of t's j-th successor edge. */
static sim_time_ps lag_of(const fitter *f, eng_task t, size_t j)
{
    return f->lag ? f->lag[f->succ_off[t] + j] : 0;
}

/* The latest end of t's edges out: its end, past it the longest lag (a
 * lag runs as a task of its own from t's end, engine.h). */
static sim_time_ps reach_of(const fitter *f, eng_task t)
{
    sim_time_ps most = 0;
    if (f->lag)
        for (uint32_t k = f->succ_off[t]; k < f->succ_off[t + 1]; k++)
            most = f->lag[k] > most ? f->lag[k] : most;
    return f->end[t] + most;
}

/* eng_task_succs off the rows held in f. */
static size_t succs(const fitter *f, eng_task t, const eng_task **succ)
{
    if (!f->succ_off) {
        *succ = NULL;
        return 0;
    }
    *succ = f->succ + f->succ_off[t];
    return f->succ_off[t + 1] - f->succ_off[t];
}

static bool pass_equal_shifted(const sched_pass *a, const sched_pass *b, int64_t P)
{
    return a->kind == b->kind && a->chunk == b->chunk && (int64_t)b->microbatch == (int64_t)a->microbatch + P;
}

/* Per stage the longest run where the order repeats one period later:
 * s0[r] its start (s0 NULL: not kept), and the blocks it holds.  Returns
 * K, the fewest blocks of any stage (0: some stage has none). */
static int64_t steady_blocks(const sched_pass *seq, int64_t pp, int64_t n, int64_t P, int64_t L, int64_t *s0)
{
    int64_t K = INT64_MAX;
    for (int64_t r = 0; r < pp; r++) {
        const sched_pass *q = seq + r * n;
        int64_t best = 0, best_at = 0, run = 0;
        for (int64_t i = 0; i + L < n; i++) {
            run = pass_equal_shifted(&q[i], &q[i + L], P) ? run + 1 : 0;
            if (run > best) {
                best = run;
                best_at = i + 1 - run;
            }
        }
        if (s0)
            s0[r] = best_at;
        int64_t k = best > 0 ? (best + L) / L : 0;
        K = k < K ? k : K;
    }
    return K == INT64_MAX ? 0 : K;
}

int64_t step_period_order_blocks(const sched_pass *seq, int64_t pp, int64_t rank_passes, int64_t period_mb,
                                 int64_t period_passes)
{
    if (pp <= 0 || rank_passes <= 0 || period_mb <= 0 || period_passes <= 0)
        return 0;
    return steady_blocks(seq, pp, rank_passes, period_mb, period_passes, NULL);
}

static size_t *block_row(const fitter *f, int s)
{
    return f->block_at + (size_t)s * (size_t)(f->K + 3);
}

/* Per task its image one block later: the task at its place in the next
 * block of its stream, -1 where that block is shorter or the task lies in
 * the prefix, the last block or the suffix. */
static void index_images(const fitter *f)
{
    for (size_t t = 0; t < f->n; t++)
        f->img[t] = -1;
    for (int s = 0; s < f->n_streams; s++) {
        const size_t *row = block_row(f, s);
        const eng_task *ids = f->by_stream + f->stream_at[s];
        for (int64_t b = 0; b + 1 < f->K; b++) {
            const size_t at = row[b + 1], n = row[b + 2] - at, m = row[b + 3] - row[b + 2];
            for (size_t p = 0; p < n && p < m; p++)
                f->img[ids[at + p]] = ids[at + n + p];
        }
    }
}

/* Rounds of the fixed point below: a task outside the passes takes its
 * block from chains of such tasks (gathers, reductions, host rests), a few
 * long; a sample still moving after this many is simulated whole. */
enum { BLOCK_ROUNDS_MAX = 64 };

/* Blocks of every task: passes by their place in the stage's order, the
 * rest by their predecessors (to a fixed point). */
static bool assign_blocks(fitter *f, const int64_t *s0, int32_t *pass_block)
{
    const step_timeline *tl = f->tl;
    const int64_t L = tl->period_passes;
    /* Per pass its block, counted along each stage's order (no division
     * per task). */
    for (int64_t r = 0; r < tl->pp; r++) {
        int32_t *row = pass_block + r * tl->rank_passes;
        int64_t b = 0, left = L;
        for (int64_t i = 0; i < tl->rank_passes; i++) {
            if (i < s0[r]) {
                row[i] = PRE;
                continue;
            }
            row[i] = (int32_t)(b > f->K ? f->K : b);
            if (--left == 0) {
                b++;
                left = L;
            }
        }
    }
    for (size_t t = 0; t < f->n; t++) {
        int32_t pi = tl->task_pass[t];
        f->beta[t] = pi < 0 ? PRE : pass_block[pi];
    }
    /* Only the edges into tasks outside the passes move a block: those,
     * in the order the rounds take every edge (dependencies source by
     * source, then the streams' successions), and the predecessors
     * counted on the way. */
    size_t m = 0;
    for (size_t t = 0; t < f->n; t++) {
        const eng_task *succ;
        size_t k = succs(f, (eng_task)t, &succ);
        for (size_t j = 0; j < k; j++) {
            const eng_task w = succ[j];
            f->n_pred[w]++;
            if (tl->task_pass[w] < 0)
                f->moves[m++] = (eng_dep){(eng_task)t, w};
        }
    }
    for (size_t k = 1; k < f->n; k++) {
        eng_task u = f->by_stream[k - 1], w = f->by_stream[k];
        if (f->stream[u] == f->stream[w] && tl->task_pass[w] < 0)
            f->moves[m++] = (eng_dep){u, w};
    }
    for (int round = 0;; round++) {
        if (round == BLOCK_ROUNDS_MAX)
            return false;
        bool changed = false;
        for (size_t i = 0; i < m; i++) {
            const eng_task u = f->moves[i].before, w = f->moves[i].after;
            if (f->beta[w] < f->beta[u]) {
                f->beta[w] = f->beta[u];
                changed = true;
            }
        }
        if (!changed)
            return true;
    }
}

/* Causal order: blocks never decrease along an edge, dependency or
 * stream. */
static bool causal(const fitter *f)
{
    for (size_t t = 0; t < f->n; t++) {
        const eng_task *succ;
        size_t k = succs(f, (eng_task)t, &succ);
        for (size_t j = 0; j < k; j++)
            if (f->beta[succ[j]] < f->beta[t])
                return false;
    }
    for (int s = 0; s < f->n_streams; s++)
        for (size_t k = f->stream_at[s] + 1; k < f->stream_at[s + 1]; k++)
            if (f->beta[f->by_stream[k]] < f->beta[f->by_stream[k - 1]])
                return false;
    return true;
}

/* Per stream where each block begins (the blocks in causal order). */
static void index_blocks(fitter *f)
{
    const int64_t rows = f->K + 3;
    for (int s = 0; s < f->n_streams; s++) {
        size_t a = f->stream_at[s], z = f->stream_at[s + 1];
        size_t *row = block_row(f, s);
        /* row[b + 1]: first place with block >= b, for b = PRE .. K + 1. */
        size_t k = a;
        for (int64_t b = PRE; b + 1 < rows; b++) {
            while (k < z && f->beta[f->by_stream[k]] < b)
                k++;
            row[b + 1] = k - a;
        }
    }
}

/* Block b + 1 is block b one period later, for b = 0 .. K-2, stream by
 * stream and task by task (bad[b] where it is not).  A stream's block b
 * and b + 1 are runs of its places, so the image of the task at place p
 * of one is the task at place p of the next; the caller's same_task,
 * the dearest comparison, comes last. */
static void same_structure(const fitter *f, bool *bad)
{
    const step_timeline *tl = f->tl;
    for (int s = 0; s < f->n_streams; s++) {
        const size_t *row = block_row(f, s);
        const eng_task *ids = f->by_stream + f->stream_at[s];
        for (int64_t b = 0; b + 1 < f->K; b++) {
            /* A block found bad stays so: its other tasks need no look. */
            if (bad[b])
                continue;
            const size_t at = row[b + 1], n = row[b + 2] - at;
            if (row[b + 3] - row[b + 2] != n) {
                bad[b] = true;
                continue;
            }
            for (size_t p = 0; p < n; p++) {
                const eng_task t = ids[at + p], u = ids[at + n + p];
                const eng_task *sa, *sb;
                size_t na = succs(f, t, &sa), nb = succs(f, u, &sb);
                bool same = f->end[t] - f->start[t] == f->end[u] - f->start[u] && na == nb &&
                            f->n_pred[t] == f->n_pred[u] && (!f->rel || (f->rel[t] > 0) == (f->rel[u] > 0));
                for (size_t j = 0; same && j < na; j++)
                    same = (f->beta[sa[j]] + 1 >= f->K || f->img[sa[j]] == sb[j]) && lag_of(f, t, j) == lag_of(f, u, j);
                if (!same || !tl->same_task(tl->ctx, t, u)) {
                    bad[b] = true;
                    break;
                }
            }
        }
    }
}

/* Keeps the longest run of blocks whose structure repeats: those before
 * it join the prefix, those after it the suffix.  False when no run of
 * four blocks remains, or the blocks are not in causal order (checked
 * once: the renumbering below keeps the order of blocks, and so the
 * order along every edge).
 *
 * One look suffices: a pair of blocks the run keeps compares the same
 * after the renumbering.  Its places, durations, predecessor counts and
 * same_task are untouched; a successor of one of its tasks lies in a
 * block no earlier (causal), so in a kept block, whose image is the one
 * it had, or in the run's last block or past it, which same_structure
 * does not follow. */
static bool regular_blocks(fitter *f)
{
    if (f->K < 4 || !causal(f))
        return false;
    index_blocks(f);
    index_images(f);
    bool *bad = f->bad;
    memset(bad, 0, (size_t)f->K * sizeof *bad);
    same_structure(f, bad);
    int64_t lo = 0, hi = 0, run_lo = 0; /* blocks lo .. hi */
    bool all = true;
    for (int64_t b = 0; b + 1 < f->K; b++) {
        if (bad[b]) {
            all = false;
            run_lo = b + 1;
        } else if (b + 1 - run_lo > hi - lo) {
            lo = run_lo;
            hi = b + 1;
        }
    }
    if (all)
        return true;
    const int64_t K = hi - lo + 1;
    if (K < 4)
        return false;
    for (size_t t = 0; t < f->n; t++) {
        int64_t b = f->beta[t];
        f->beta[t] = (int32_t)(b < lo ? PRE : b > hi ? K : b - lo);
    }
    f->K = K;
    index_blocks(f);
    return true;
}

/* Do the task's times reach the figures (step_timeline.timed)? */
static bool timed_stream(const fitter *f, eng_task t)
{
    return f->tl->timed[t] != 0;
}

/* Shift of t one block later (its image's start less its own), for a
 * task of blocks 0 .. K-2 once block_shifts has succeeded. */
static sim_time_ps delta_of(const fitter *f, eng_task t)
{
    return f->shift[t];
}

/* Does the edge u -> w (lag long) end before w starts? */
static bool slack(const fitter *f, eng_task u, eng_task w, sim_time_ps lag)
{
    return f->end[u] + lag < f->start[w];
}

/* Edge u -> w for cut c.  Adding a block shifts every task by at most
 * lambda (each block's inputs shift by no more).  The tasks after the cut
 * that shift by lambda (locked: the timed ones, the others measured so
 * in the blocks with an image, or starting as a locked one ends) keep
 * doing so in every longer step when each edge into one of them comes
 * from a locked task, or from one shifted by lambda in the sample (a
 * block up to the cut), or ends before its target starts and is shifted
 * no more than lambda (its slack then never shrinks): the prefix, the
 * blocks up to the cut where the target lies in the last block or the
 * suffix (those shift when a block is added while these stay), an
 * unlocked task.  Only the timed tasks' times reach the figures (the
 * others count by their durations), and they are all locked. */
static bool edge_ok(const fitter *f, int64_t c, sim_time_ps lambda, eng_task u, eng_task w, sim_time_ps lag)
{
    const int64_t bu = f->beta[u], bw = f->beta[w];
    if (bw <= c || !f->locked[w])
        return true;
    if (bu > c)
        return f->locked[u] || slack(f, u, w, lag);
    sim_time_ps du = bu == PRE || bw + 1 >= f->K ? 0 : delta_of(f, u);
    return du == lambda || (du < lambda && slack(f, u, w, lag));
}

/* Shifts of the blocks: per block b (0 .. K-2) the shift of its timed
 * tasks (UINT64_MAX where they differ) and the largest of any task's;
 * each task's into f->shift; per stage the shift of its released tasks'
 * releases (a host's issue folded into them: one block's host time).
 * After regular_blocks every stream's block b + 1 has as many places as
 * block b, so the image of place p of one is place p of the next.  False
 * where a task has no image or an image that starts earlier, or releases
 * shift unlike one another on a stage. */
static bool block_shifts(const fitter *f, sim_time_ps *timed, sim_time_ps *most, bool *seen)
{
    for (int64_t r = 0; f->rel && r < f->tl->pp; r++)
        f->host_shift_set[r] = false;
    for (int64_t b = 0; b + 1 < f->K; b++) {
        timed[b] = 0;
        most[b] = 0;
        seen[b] = false;
    }
    for (int s = 0; s < f->n_streams; s++) {
        const size_t *row = block_row(f, s);
        const eng_task *ids = f->by_stream + f->stream_at[s];
        for (int64_t b = 0; b + 1 < f->K; b++) {
            const size_t at = row[b + 1], n = row[b + 2] - at;
            if (row[b + 3] - row[b + 2] != n)
                return false;
            for (size_t p = 0; p < n; p++) {
                const eng_task t = ids[at + p], u = ids[at + n + p];
                if (f->start[u] < f->start[t])
                    return false;
                const sim_time_ps d = f->start[u] - f->start[t];
                f->shift[t] = d;
                if (f->rel && (f->rel[t] > 0 || f->rel[u] > 0)) {
                    const int64_t r = s / f->tl->streams_per_stage;
                    if (f->rel[t] == 0 || f->rel[u] < f->rel[t] ||
                        (f->host_shift_set[r] && f->host_shift[r] != f->rel[u] - f->rel[t]))
                        return false;
                    f->host_shift[r] = f->rel[u] - f->rel[t];
                    f->host_shift_set[r] = true;
                }
                most[b] = d > most[b] ? d : most[b];
                if (timed_stream(f, t)) {
                    if (seen[b] && timed[b] != d)
                        timed[b] = UINT64_MAX;
                    else if (!seen[b])
                        timed[b] = d;
                    seen[b] = true;
                }
            }
        }
    }
    for (int64_t b = 0; b + 1 < f->K; b++)
        if (!seen[b])
            timed[b] = UINT64_MAX;
    /* A stage with no release in its steady blocks (its host folded only
     * ahead of them, or not at all) has none that an added block moves:
     * shift 0.  One whose releases there have no image has no shift
     * known (host_shift_set stays false). */
    for (int64_t r = 0; f->rel && r < f->tl->pp; r++) {
        if (f->host_shift_set[r])
            continue;
        bool steady = false;
        for (int k = 0; k < f->tl->streams_per_stage && !steady; k++) {
            const int s = (int)(r * f->tl->streams_per_stage + k);
            const size_t *row = block_row(f, s);
            for (size_t p = row[1]; p < row[f->K + 1] && !steady; p++)
                steady = f->rel[f->by_stream[f->stream_at[s] + p]] > 0;
        }
        f->host_shift[r] = 0;
        f->host_shift_set[r] = !steady;
    }
    return true;
}

/* Does the state repeat at cut c, the blocks after it all shifted by
 * lambda (block_shifts)?  Every edge by edge_ok, the locked tasks found
 * first. */
static bool cut_ok(const fitter *f, int64_t c, sim_time_ps lam)
{
    /* Only tasks after the cut lock, and the edges out of them go no
     * earlier (causal): a stream's tasks after the cut are its places
     * from block c + 1 on, and locked[] is read nowhere before them.
     * Those locked at first, then (a worklist: the closure is the same in
     * any order) each edge's or stream successor's target that starts as
     * a locked task ends. */
    size_t top = 0;
    for (int s = 0; s < f->n_streams; s++)
        for (size_t k = f->stream_at[s] + block_row(f, s)[c + 2]; k < f->stream_at[s + 1]; k++) {
            const eng_task t = f->by_stream[k];
            const int64_t b = f->beta[t];
            f->locked[t] = timed_stream(f, t) || (b + 1 < f->K && delta_of(f, t) == lam);
            if (f->locked[t])
                f->work[top++] = t;
        }
    while (top > 0) {
        const eng_task u = f->work[--top];
        const int s = f->stream[u];
        const size_t next = f->stream_at[s] + (size_t)f->pos[u] + 1;
        const eng_task *succ;
        size_t n = succs(f, u, &succ);
        for (size_t j = 0; j <= n; j++) {
            eng_task w = j < n ? succ[j] : (next < f->stream_at[s + 1] ? f->by_stream[next] : -1);
            if (w < 0 || f->locked[w] || f->end[u] + (j < n ? lag_of(f, u, j) : 0) != f->start[w])
                continue;
            f->locked[w] = 1;
            f->work[top++] = w;
        }
    }
    /* A release after the cut moves by its stage's host shift a block
     * (block_shifts): no more than lambda (every task shifts by at most
     * that), and for a locked task by lambda or with slack (a release
     * that moves less never catches up with the task). */
    for (int s = 0; f->rel && s < f->n_streams; s++)
        for (size_t k = f->stream_at[s] + block_row(f, s)[c + 2]; k < f->stream_at[s + 1]; k++) {
            const eng_task t = f->by_stream[k];
            if (f->rel[t] == 0)
                continue;
            const int64_t r = s / f->tl->streams_per_stage;
            if (!f->host_shift_set[r] || f->host_shift[r] > lam ||
                (f->locked[t] && f->host_shift[r] != lam && f->rel[t] >= f->start[t]))
                return false;
        }
    for (size_t k = 0; k < f->n; k++) {
        eng_task u = f->by_stream[k];
        const eng_task *succ;
        size_t n = succs(f, u, &succ);
        for (size_t j = 0; j <= n; j++) {
            eng_task w = j < n ? succ[j] : (k + 1 < f->n ? f->by_stream[k + 1] : -1);
            if (j == n && (w < 0 || f->stream[w] != f->stream[u]))
                continue;
            if (!edge_ok(f, c, lam, u, w, j < n ? lag_of(f, u, j) : 0))
                return false;
        }
    }
    return true;
}

/* When the last pair of blocks does not yet shift alike: the blocks its
 * transient is estimated to last (0: no estimate).  In a max-plus system
 * the tasks downstream of the slowest cycle end up shifting by its mean,
 * taken here as the largest shift lam of the last pair; a timed task of
 * that pair that shifts by d < lam after an idle gap g on its stream
 * closes the gap by lam - d a block and locks once it is gone.  Only the
 * length of the next sample comes from this; whatever is extended is
 * checked as ever. */
static int64_t settle_blocks(const fitter *f, sim_time_ps lam)
{
    int64_t worst = 0;
    const int64_t b = f->K - 2;
    for (int s = 0; s < f->n_streams; s++) {
        const size_t *row = block_row(f, s);
        for (size_t p = row[b + 1]; p < row[b + 2]; p++) {
            const eng_task t = f->by_stream[f->stream_at[s] + p];
            if (!timed_stream(f, t))
                continue;
            const sim_time_ps d = delta_of(f, t);
            const sim_time_ps ready = p > 0 ? f->end[f->by_stream[f->stream_at[s] + p - 1]] : 0;
            if (d >= lam || f->start[t] <= ready)
                continue;
            const sim_time_ps e = (f->start[t] - ready) / (lam - d) + 1;
            if (e >= (sim_time_ps)INT32_MAX)
                return INT32_MAX;
            worst = (int64_t)e > worst ? (int64_t)e : worst;
        }
    }
    return worst;
}

/* The first cut whose state repeats one block later; -1 if none (and
 * *settle, settle_blocks, where the last blocks do not shift alike). */
static int64_t find_cut(fitter *f, sim_time_ps *lambda, int64_t *settle)
{
    /* A task without predecessors starts at 0: no cut before it.  (One
     * with a release starts there: cut_ok takes how that moves.) */
    int64_t lo = 0;
    for (size_t t = 0; t < f->n; t++)
        if (f->n_pred[t] == 0 && f->pos[t] == 0 && (!f->rel || f->rel[t] == 0) && f->beta[t] > lo)
            lo = f->beta[t];
    sim_time_ps *timed = malloc((size_t)f->K * sizeof *timed), *most = malloc((size_t)f->K * sizeof *most);
    int64_t cut = -1;
    if (timed && most && block_shifts(f, timed, most, f->bad)) {
        /* The earliest cut after which every block shifts by one lambda
         * (the timed tasks) and no task by more. */
        const sim_time_ps lam = timed[f->K - 2];
        int64_t from = f->K - 2;
        while (from > 0 && timed[from - 1] == lam && most[from - 1] <= lam)
            from--;
        if (lam == UINT64_MAX || most[f->K - 2] > lam)
            *settle = settle_blocks(f, most[f->K - 2]);
        if (lam != UINT64_MAX && lam > 0 && most[f->K - 2] <= lam) {
            /* Cut c needs blocks c + 1 .. K-2 so: c >= from - 1; a few
             * more where an edge does not yet shift. */
            for (int64_t c = from - 1 > lo ? from - 1 : lo; c + 2 < f->K && c < from + 3 && cut < 0; c++)
                if (cut_ok(f, c, lam)) {
                    cut = c;
                    *lambda = lam;
                }
        }
    }
    free(timed);
    free(most);
    return cut;
}

/* The window condition on every stage (step_period.h), or the blocks the
 * sample lacks for it. */
static void window(const fitter *f, step_period_fit *fit)
{
    const int64_t c = fit->cut, K = f->K;
    const wide lam = fit->lambda_ps;
    int64_t lack = 0;
    wide worst = 0;
    fit->whole_period = true;
    for (int64_t r = 0; r < f->tl->pp; r++) {
        wide a1 = 0, x0 = ~(wide)0, x1 = 0, c0 = ~(wide)0;
        bool any_x = false;
        for (int k = 0; k < f->tl->streams_per_stage; k++) {
            const int s = (int)(r * f->tl->streams_per_stage + k);
            for (size_t p = f->stream_at[s]; p < f->stream_at[s + 1]; p++) {
                eng_task t = f->by_stream[p];
                const int64_t b = f->beta[t];
                if (!timed_stream(f, t))
                    continue;
                wide st = f->start[t], en = reach_of(f, t);
                if (b <= c)
                    a1 = en > a1 ? en : a1;
                else if (b == c + 1) {
                    any_x = true;
                    x0 = st < x0 ? st : x0;
                    x1 = en > x1 ? en : x1;
                } else if (b == K)
                    c0 = st < c0 ? st : c0;
            }
        }
        if (!any_x) {
            lack = INT64_MAX;
            break;
        }
        wide lo = a1 + lam > x1 ? a1 + lam : x1;
        worst = lo > worst ? lo : worst;
        /* x0 + (K - c - 1 + e) lambda > lo and c0 + e lambda > lo. */
        int64_t e = 0;
        wide have = x0 + (wide)(K - c - 1) * lam;
        if (have <= lo)
            e = (int64_t)((lo - have) / lam + 1);
        if (c0 != ~(wide)0 && c0 <= lo) {
            int64_t e2 = (int64_t)((lo - c0) / lam + 1);
            e = e2 > e ? e2 : e;
        }
        lack = e > lack ? e : lack;
        /* One period from lo inside the window: lo + lambda <= both ends. */
        const wide hi = c0 < have ? c0 : have;
        fit->whole_period = fit->whole_period && e == 0 && lo + lam <= hi && lo + lam <= (wide)UINT64_MAX;
        if (f->tl->from_out)
            f->tl->from_out[r] = lo > (wide)UINT64_MAX ? UINT64_MAX : (sim_time_ps)lo;
    }
    fit->short_blocks = lack;
    fit->window_ps = worst > (wide)UINT64_MAX ? UINT64_MAX : (sim_time_ps)worst;
}

bool step_period_fit_find(const step_timeline *tl, step_period_fit *fit)
{
    const engine_t *e = tl->eng;
    fitter f = {.tl = tl, .e = e, .n = eng_num_tasks(e), .n_streams = (int)(tl->pp * tl->streams_per_stage)};
    eng_succ_rows(e, &f.succ_off, &f.succ);
    f.lag = f.succ_off ? eng_succ_lags(e) : NULL;
    f.rel = eng_task_releases(e);
    if (tl->period_passes <= 0 || tl->period_mb <= 0 || f.n == 0)
        return false;
    int64_t *s0 = malloc((size_t)tl->pp * sizeof *s0);
    if (!s0)
        return false;
    f.K = steady_blocks(tl->seq, tl->pp, tl->rank_passes, tl->period_mb, tl->period_passes, s0);
    bool ok = f.K >= 4;
    fit->settle_blocks = 0;
    if (ok) {
        f.beta = malloc(f.n * sizeof *f.beta);
        f.pos = malloc(f.n * sizeof *f.pos);
        f.n_pred = calloc(f.n, sizeof *f.n_pred);
        f.locked = calloc(f.n, sizeof *f.locked);
        f.work = malloc(f.n * sizeof *f.work);
        f.start = malloc(f.n * sizeof *f.start);
        f.end = malloc(f.n * sizeof *f.end);
        f.stream = malloc(f.n * sizeof *f.stream);
        f.stream_at = malloc(((size_t)f.n_streams + 1) * sizeof *f.stream_at);
        f.block_at = malloc((size_t)f.n_streams * (size_t)(f.K + 3) * sizeof *f.block_at);
        f.bad = malloc((size_t)f.K * sizeof *f.bad);
        f.shift = malloc(f.n * sizeof *f.shift);
        f.img = malloc(f.n * sizeof *f.img);
        f.host_shift = f.rel ? malloc((size_t)tl->pp * sizeof *f.host_shift) : NULL;
        f.host_shift_set = f.rel ? malloc((size_t)tl->pp * sizeof *f.host_shift_set) : NULL;
        const uint32_t edges = f.succ_off ? f.succ_off[f.n] : 0;
        f.moves = malloc(((size_t)edges + f.n) * sizeof *f.moves);
        ok = f.beta && f.pos && f.n_pred && f.locked && f.work && f.start && f.end && f.stream && f.stream_at &&
             f.block_at && f.bad && f.shift && f.img && f.moves && (!f.rel || (f.host_shift && f.host_shift_set));
    }
    if (ok) {
        /* The engine's streams in place where they lie one after the
         * other, as after a run; else copied. */
        const eng_task *base = NULL;
        bool in_place = true;
        size_t at = 0;
        for (int s = 0; s < f.n_streams; s++) {
            const eng_task *ids;
            const size_t k = eng_stream_view(e, s, &ids);
            if (s == 0)
                base = ids;
            in_place = in_place && base && (k == 0 || ids == base + at);
            f.stream_at[s] = at;
            at += k;
        }
        f.stream_at[f.n_streams] = at;
        const eng_span *spans = NULL;
        if (in_place && at == f.n) {
            f.by_stream = base;
            /* The spans lie beside the ids (eng_stream_spans). */
            if (f.n_streams > 0 && eng_stream_spans(e, 0, &spans) != f.stream_at[1] - f.stream_at[0])
                spans = NULL;
        } else {
            f.own_order = malloc(f.n * sizeof *f.own_order);
            at = 0;
            for (int s = 0; f.own_order && s < f.n_streams; s++) {
                f.stream_at[s] = at;
                at += eng_stream_tasks(e, s, f.own_order + at, f.n - at);
            }
            f.stream_at[f.n_streams] = at;
            f.by_stream = f.own_order;
        }
        ok = f.by_stream && at == f.n;
        /* Per task its stream and place, and its times: from the spans in
         * run order where the engine has them, in the same pass. */
        if (ok && !spans)
            eng_task_times(e, f.start, f.end, NULL);
        for (int s = 0; ok && s < f.n_streams; s++)
            for (size_t k = f.stream_at[s]; k < f.stream_at[s + 1]; k++) {
                const eng_task t = f.by_stream[k];
                f.stream[t] = s;
                f.pos[t] = (int32_t)(k - f.stream_at[s]);
                if (spans) {
                    f.start[t] = spans[k].a;
                    f.end[t] = spans[k].b;
                }
            }
    }
    int32_t *pass_block = ok ? malloc((size_t)(tl->pp * tl->rank_passes) * sizeof *pass_block) : NULL;
    ok = ok && pass_block && assign_blocks(&f, s0, pass_block) && regular_blocks(&f);
    free(pass_block);
    if (ok) {
        fit->blocks = f.K;
        fit->cut = find_cut(&f, &fit->lambda_ps, &fit->settle_blocks);
        ok = fit->cut >= 0;
    }
    fit->whole_period = false;
    if (ok)
        window(&f, fit);
    ok = ok && fit->short_blocks != INT64_MAX;
    if (ok && tl->block_out)
        memcpy(tl->block_out, f.beta, f.n * sizeof *f.beta);
    free(s0);
    free(f.beta);
    free(f.pos);
    free(f.own_order);
    free(f.n_pred);
    free(f.locked);
    free(f.work);
    free(f.start);
    free(f.end);
    free(f.stream);
    free(f.stream_at);
    free(f.block_at);
    free(f.bad);
    free(f.shift);
    free(f.img);
    free(f.host_shift);
    free(f.host_shift_set);
    free(f.moves);
    return ok;
}

/* *out = a + n (b - a), b >= a; false on overflow or b < a. */
static bool affine_u(uint64_t a, uint64_t b, int64_t n, uint64_t *out)
{
    uint64_t d, m;
    if (b < a || __builtin_mul_overflow(b - a, (uint64_t)n, &d) || __builtin_add_overflow(a, d, &m))
        return false;
    *out = m;
    return true;
}

bool step_period_extend(const step_meas *a, const step_meas *b, int64_t n, step_meas *out)
{
    if (a->n_stages != b->n_stages || n < 0)
        return false;
    step_meas o = {.n_stages = a->n_stages};
    bool ok = affine_u(a->makespan_ps, b->makespan_ps, n, &o.makespan_ps) &&
              affine_u(a->pipe_end_ps, b->pipe_end_ps, n, &o.pipe_end_ps) &&
              affine_u(a->work_ps, b->work_ps, n, &o.work_ps) && affine_u(a->events, b->events, n, &o.events) &&
              affine_u(a->tasks, b->tasks, n, &o.tasks);
    o.stages = ok ? calloc((size_t)a->n_stages, sizeof *o.stages) : NULL;
    ok = ok && o.stages;
    for (int64_t r = 0; ok && r < a->n_stages; r++) {
        const step_stage_meas *x = &a->stages[r], *y = &b->stages[r];
        step_stage_meas *z = &o.stages[r];
        ok = affine_u(x->busy_ps, y->busy_ps, n, &z->busy_ps) &&
             affine_u(x->exposed_total_ps, y->exposed_total_ps, n, &z->exposed_total_ps) &&
             x->act_peak == y->act_peak && x->inflight_peak == y->inflight_peak && x->act_final == y->act_final &&
             x->inflight_final == y->inflight_final;
        for (int k = 0; ok && k < STREAM_KINDS; k++)
            ok = affine_u(x->comm_ps[k], y->comm_ps[k], n, &z->comm_ps[k]) &&
                 affine_u(x->exposed_ps[k], y->exposed_ps[k], n, &z->exposed_ps[k]);
        z->act_peak = x->act_peak;
        z->inflight_peak = x->inflight_peak;
        z->act_final = x->act_final;
        z->inflight_final = x->inflight_final;
    }
    if (!ok) {
        free(o.stages);
        return false;
    }
    *out = o;
    return true;
}

static bool add_u(uint64_t a, uint64_t d, uint64_t *out)
{
    return !__builtin_add_overflow(a, d, out);
}

bool step_period_next(const step_meas *a, const step_meas *inc, step_meas *b)
{
    if (a->n_stages != inc->n_stages)
        return false;
    step_meas o = {.n_stages = a->n_stages};
    bool ok = add_u(a->makespan_ps, inc->makespan_ps, &o.makespan_ps) &&
              add_u(a->pipe_end_ps, inc->pipe_end_ps, &o.pipe_end_ps) && add_u(a->work_ps, inc->work_ps, &o.work_ps) &&
              add_u(a->events, inc->events, &o.events) && add_u(a->tasks, inc->tasks, &o.tasks);
    o.stages = ok ? calloc((size_t)a->n_stages, sizeof *o.stages) : NULL;
    ok = ok && o.stages;
    for (int64_t r = 0; ok && r < a->n_stages; r++) {
        const step_stage_meas *x = &a->stages[r], *d = &inc->stages[r];
        step_stage_meas *z = &o.stages[r];
        *z = *x; /* peaks and finals stay */
        ok = add_u(x->busy_ps, d->busy_ps, &z->busy_ps) &&
             add_u(x->exposed_total_ps, d->exposed_total_ps, &z->exposed_total_ps);
        for (int k = 0; ok && k < STREAM_KINDS; k++)
            ok = add_u(x->comm_ps[k], d->comm_ps[k], &z->comm_ps[k]) &&
                 add_u(x->exposed_ps[k], d->exposed_ps[k], &z->exposed_ps[k]);
    }
    if (!ok) {
        free(o.stages);
        return false;
    }
    *b = o;
    return true;
}
