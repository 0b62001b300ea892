/* step_period: a long step from short ones (one, or two), exactly.
 *
 * The step's engine is max-plus linear (engine.h: in-order streams,
 * dependencies, no contention), and in the steady phase of a pipeline
 * schedule every period (sched_plan_period microbatches) runs the same
 * passes with the same durations.  Then, once the timeline of one period
 * is the timeline of the one before shifted by a constant lambda, every
 * later period is too (A (x) (x + lambda) = A (x) x + lambda), and a step
 * of M microbatches is a step of fewer with whole periods inserted.  This
 * module verifies that on a simulated timeline and derives the figures of
 * the long step from two short ones; it assumes nothing it can check.
 *
 * Blocks.  Each stage's pass order is cut where it repeats: the longest
 * run of positions i with pass i + L equal to pass i one period later (L
 * the passes of one period); block b of a stage is its b-th L passes from
 * the start of that run, and K (the blocks every stage has) bounds them:
 * a pass before its stage's run is in the prefix (PRE), one at or past
 * block K in the suffix (SUF).  A task that belongs to no pass (a
 * gather, a reduction, the optimizer, a host rest) takes the latest block
 * of its predecessors (stream predecessor included).
 *
 * What is checked on the timeline of the short step (step_period_fit_find):
 *   causal     no dependency or stream edge goes to an earlier block;
 *   structure  block b + 1 is block b one period later: per stream as many
 *              tasks, each with the same duration, name, chunk and flags,
 *              its microbatch one period higher, as many predecessors, its
 *              dependency successors the same one block later (in the order
 *              they were added); the longest run of blocks that agree is
 *              kept, those before it join the prefix, those after it the
 *              suffix;
 *   shifts     after a cut c (after block c) every timed task (one whose
 *              times reach the figures: compute and communication streams,
 *              and the host leads step.c names) starts lambda > 0 later in
 *              the next block, and no task shifts by more;
 *   edges      adding a block shifts every task by at most lambda (each
 *              block's inputs shift by no more), so the tasks after the cut
 *              that shift by lambda in the sample (locked: the timed ones,
 *              untimed ones measured so, and any that starts as a locked
 *              one ends) keep doing so in every longer step when each edge
 *              into a locked task comes from a locked task, from a task of
 *              the blocks up to the cut shifted by lambda, or is slack (its
 *              source ends before its target starts, and its source shifts
 *              by less: the prefix, the blocks up to the cut where the target
 *              lies in the last block or the suffix, an untimed task), for
 *              its slack then never shrinks; a task after the cut without
 *              a predecessor (it would start at 0) rules the cut out;
 *              an edge's lag (engine.h) counts as part of it (its source's
 *              end plus the lag);
 *   releases   a release time (engine.h: the host's issue folded, step.c)
 *              is an edge from a source that moves by its stage's host
 *              shift a block (the same for every released task of a block
 *              with an image, 0 where its steady blocks have none): no
 *              more than lambda, and into a locked task by lambda or slack;
 *              structure compares whether a task has one.
 * The host, which runs ahead of its GPU at its own pace, is the untimed
 * part: its tasks count by their durations, and its edges to the GPU stay
 * slack.  For every step with more blocks (the builder lays each block out
 * the same, which the structure check confirms inside the sample and
 * tests/test_step_period.c across steps, and takes each stage's host as
 * ahead in the longer steps the sample stands for exactly where it does
 * in the sample, which step_host_ahead_longer checks on their orders,
 * tests/test_host_longer.c) the timed tasks of blocks
 * c + 1 .. are then copies of block c + 1 shifted by lambda each, and the
 * suffix's follow the last one.  The first sample is as long as leaves
 * a few blocks in its order's steady run (step_period_order_blocks, on
 * the schedule alone); one whose transient outlasts it is taken again
 * with twice the blocks, or as many as the transient is estimated to
 * last (settle_blocks), up to three times (step.c).
 *
 * Figures.  Every figure of step_meas is, per stage, an integral over time
 * of a function of what covers the instant (busy, exposed, a stream's
 * busy time), a sum over tasks or passes (communication time, summaries,
 * tasks, events, work), a peak of a counter, or the latest end (makespan,
 * pipeline end).  With E the timed tasks of blocks <= c, X those of block c + 1
 * (from x0 to x1) and C the suffix's (from c0), the window condition
 *     max(end(E) + lambda, x1) < min(x0 + (K - c - 1) lambda, c0)
 * on every stage makes a step of K + 1 blocks differ from one of K by the
 * integral over one period of the periodic middle, the same for every
 * later K: so each integral and sum is affine in K, and a peak is
 * constant once one period adds nothing to its counter (the final values
 * of the two samples agree).  The latest end grows by lambda once it lies
 * past the window.  Where the window is short, step_period_fit says by
 * how many blocks.  Every figure of the long step is then
 *     f(M) = f(M1) + n (f(M1 + P) - f(M1)),   n = (M - M1) / P,
 * in integer picoseconds (step.c sums its doubles that way for that
 * reason), and checked: peaks and finals equal, sums not shrinking, the
 * ends of the two samples lambda apart.  Anything that fails falls back
 * to the whole simulation.
 *
 * One sample.  The sample one period longer (K + 1 blocks) differs from
 * the first (K) by what one period of the periodic middle adds, and the
 * window gives that off the first alone (step_measure given a period request) where it
 * holds a whole period on every stage: with lo = max(end(E) + lambda, x1)
 * and hi = min(x0 + (K - c - 1) lambda, c0), lo + lambda <= hi
 * (whole_period).  On a stage:
 *   instants   before hi the timed tasks of K + 1 blocks are those of K
 *              at the same times (block K and the suffix start at hi or
 *              later), and from lo on those of K + 1 at t + lambda are
 *              those of K at t (E and block c + 1 end by lo); so K + 1's
 *              coverage is K's on (-inf, lo + lambda) and K's shifted
 *              after, and a figure integrated over time (busy: the union
 *              of pass spans; a communication stream's busy time; its
 *              exposed part, against compute; the exposed union) grows
 *              by its integral over [lo, lo + lambda) of the first sample:
 *              the lists are clipped to that period (a span across lo or
 *              lo + lambda cut there) before the uncovered part is taken
 *              against the compute stream (which only covers, and is not
 *              clipped);
 *   sums       the tasks, events (two per task), work and host time (by
 *              durations) and the summaries of the passes that stand as
 *              one task grow by their sums over one block, c + 1: blocks
 *              hold the same tasks with the same durations and flags (the
 *              structure check), and K + 1 blocks have one more;
 *   counters   change at the starts and ends of passes (timed tasks).  A
 *              block whose changes sum to zero leaves the finals, and
 *              K + 1's value is K's before lo + lambda and K's lambda
 *              earlier from then on: every value K + 1 takes K takes, so
 *              the peaks stay;
 *   ends       the makespan and the pipeline's end grow by lambda where a
 *              timed task of block c + 1 or later holds them (its copy one
 *              block later, or the suffix's, ends lambda later, and no
 *              task shifts by more).
 * All of these are integer picoseconds or counts, so a + n inc has the
 * bits a + n (b - a) has.  Where one of them does not hold (a window
 * shorter than a period, a block that changes a counter, a latest end
 * before the cut) or a figure is counted otherwise (an overlapped pair
 * standing as one task: its summary per item), the second sample is
 * simulated as before; sim.period_check takes it for a derived one too
 * and compares (bench_search --verify).
 */
#ifndef PARSIM_STEP_PERIOD_H
#define PARSIM_STEP_PERIOD_H

#include <stdbool.h>
#include <stdint.h>

#include "engine.h"
#include "schedule.h"
#include "streams.h"

/* The figures of a step before they become seconds: integer picoseconds
 * and counts, so that a long step's are exact sums of a short one's. */
typedef struct step_stage_meas {
    sim_time_ps busy_ps;
    sim_time_ps comm_ps[STREAM_KINDS];
    sim_time_ps exposed_ps[STREAM_KINDS];
    sim_time_ps exposed_total_ps;
    int64_t act_peak, inflight_peak;   /* counter peaks */
    int64_t act_final, inflight_final; /* counter values at the end */
} step_stage_meas;

typedef struct step_meas {
    sim_time_ps makespan_ps, pipe_end_ps;
    sim_time_ps work_ps; /* every task's duration together */
    uint64_t events, tasks;
    int64_t n_stages;
    step_stage_meas *stages;
} step_meas;

/* One simulated step as the check reads it. */
typedef struct step_timeline {
    const engine_t *eng;
    /* Is task b task a one period later (the same name, chunk and role,
     * its microbatch period_mb higher)?  Durations and edges are
     * compared here. */
    bool (*same_task)(const void *ctx, eng_task a, eng_task b);
    const void *ctx;
    int64_t pp;
    int streams_per_stage;
    int64_t rank_passes;       /* passes per stage */
    const sched_pass *seq;     /* [stage * rank_passes + i]: the stage's i-th pass */
    const int32_t *task_pass;  /* per task: stage * rank_passes + i of its pass, -1 if none */
    /* Per task: its times reach the figures (the compute and
     * communication streams' tasks, and host tasks a figure reads the
     * time of); the others count by their durations only. */
    const uint8_t *timed;
    int64_t period_mb;         /* microbatches per period */
    int64_t period_passes;     /* passes per period on one stage */
    /* Outputs of a fit that succeeds, where not NULL: per task its block
     * (-1 the prefix, 0 .. K-1, K the suffix), and per stage where the
     * window begins (lo: max(end(E) + lambda, x1)). */
    int32_t *block_out;
    sim_time_ps *from_out;
} step_timeline;

typedef struct step_period_fit {
    int64_t cut;          /* c: blocks after c + 1 are copies */
    int64_t blocks;       /* K */
    sim_time_ps lambda_ps;
    int64_t short_blocks; /* blocks the sample lacks for the window (0: none) */
    sim_time_ps window_ps; /* max over stages of max(end(E) + lambda, x1) */
    /* A fit that failed because its last blocks do not yet shift alike:
     * the blocks their transient is estimated to last (0: no estimate). */
    int64_t settle_blocks;
    /* Every stage's window holds one whole period from its lo:
     * lo + lambda <= min(x0 + (K - c - 1) lambda, c0) (step_period_one). */
    bool whole_period;
} step_period_fit;

/* True when the timeline is periodic as above (fit says where); false
 * when a check fails or memory runs out (the caller then simulates the
 * whole step). */
bool step_period_fit_find(const step_timeline *tl, step_period_fit *fit);

/* The blocks (K above, before the structure check) that an order holds:
 * seq[stage * rank_passes + i] the stage's i-th pass; 0 when some stage
 * has no steady run.  For choosing a sample's length before simulating
 * it. */
int64_t step_period_order_blocks(const sched_pass *seq, int64_t pp, int64_t rank_passes, int64_t period_mb,
                                 int64_t period_passes);

/* out = a + n (b - a) figure by figure (out->stages allocated, n_stages
 * of a); false (out untouched) when a and b do not agree as two samples
 * of the affine range do, or a figure would overflow. */
bool step_period_extend(const step_meas *a, const step_meas *b, int64_t n, step_meas *out);

/* b = a + inc (b->stages allocated): the sample one period longer; false
 * (b untouched) on overflow or out of memory. */
bool step_period_next(const step_meas *a, const step_meas *inc, step_meas *b);

#endif
