/* step_internal: what the parts of the step module share (internal to it,
 * not part of its contract in step.h): the step's state (the engine, where
 * each pass went, the pass summaries and overlapped templates), and the
 * sweep of a pass template alone that both the build (step.c) and the
 * measurement (step_measure.c) run.
 */
#ifndef PARSIM_STEP_INTERNAL_H
#define PARSIM_STEP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "schedule.h"
#include "step.h"
#include "step_measure.h"
#include "workload.h"

/* Counters per stage: activation bytes held, (microbatch, chunk) passes in
 * flight. */
enum { CTR_ACT = 0, CTR_INFLIGHT = 1, CTR_PER_STAGE = 2 };

#define NO_TASK (-1)
/* pass_ref.send of a pass whose pipeline send is a lag on the edges out
 * of its last task (step.lag_sends), not a task. */
#define SEND_LAGGED (-2)

enum { SHIFT_NONE = 0, SHIFT_AHEAD = 1, SHIFT_HOST = 2 };

/* Names of the host tasks that stand in for a pass's host ops (their busy
 * time comes from the summary instead). */
extern const char step_host_lead[], step_host_rest[];

/* One pass (F, B or W) of one microbatch on one chunk, as placed in
 * the engine: its ops are the contiguous tasks [base, last], first is its
 * first GPU task (what waits for other passes: the host ops ahead of it
 * wait for nothing), span the task whose start is the start of its GPU
 * work (first, but the GPU span of a stand-in that begins with a
 * zero-length start); send is the pipeline p2p task that carries its
 * output on (NO_TASK if none, SEND_LAGGED where it is a lag). */
typedef struct pass_ref {
    eng_task base, first, span, last, send;
    eng_task lead; /* a host stand-in measured from its ops: its host lead (step.shifted) */
    const int32_t *map; /* its ops' places in an overlapped template it runs in (NULL: its own) */
} pass_ref;

/* A pass template simulated alone: its span and, per stream, its busy and
 * exposed (compute idle) time.  Passes begin and end on the compute
 * stream and follow each other on it, so a pass runs in the step exactly
 * as alone; a single task of its span stands in for it (two-level
 * simulation), and its communication is accounted from the summary. */
typedef struct pass_summary {
    sim_time_ps span_ps;
    sim_time_ps comm_ps[STREAM_KINDS];
    sim_time_ps exposed_ps[STREAM_KINDS]; /* per communication stream */
    sim_time_ps exposed_all_ps;           /* all communication streams together */
    bool collapsible;
    /* It ends with one communication op (tail_stream, tail_ps long) that
     * starts after all its other ops have ended (a last stage's loss
     * all-reduce on the TP stream): where the next pass of its stage waits
     * for it, it stands as a compute task of the rest and that op, which
     * then runs exactly as among the pass's ops (measured from its ops:
     * step.shifted). */
    bool tail;
    /* Its GPU ops run at the same offsets from its GPU start whether the
     * GPU or the host is late (shifts; always without host ops), or at
     * least while the host is ahead of its lead (shifts_ahead: no op
     * starts later with the host late, from the host's start plus the
     * lead, than with the GPU late): placed as a stand-in it then runs as
     * alone from there, and measure() takes its ops' intervals from the
     * template (step.shifted). */
    bool shifts, shifts_ahead;
    int tail_stream;
    sim_time_ps tail_ps;
    /* A pass with host issue ops, as a function of when its GPU streams
     * (t_g) and its host (t_h) are free: it ends on the GPU at
     * max(t_g + gpu, t_h + lead + gpu) and on the host at
     * max(t_h + host, t_g + wait + host - lead) (the last only when the host
     * waits for the GPU inside it: sync).  Simulating with either side
     * delayed gives these exactly (the engine is max-plus linear). */
    bool host, sync;
    sim_time_ps gpu_ps, lead_ps, host_ps, wait_ps;
    sim_time_ps host_busy_ps;             /* sum of its host ops */
} pass_summary;

/* An overlapped template (two passes of one item) of a stage, once per
 * (stage, forward chunk, backward chunk), simulated alone like a pass
 * (its summary copied from an identical one of another stage). */
typedef struct pair_entry {
    int64_t stage;
    int32_t fchunk, bchunk;
    wl_pair t;
    pass_summary sum;
    int64_t standing;       /* items it stood in as one task (measure counts its summary) */
    /* Its GPU end when the input of pass k (its first GPU op, gate[k])
     * arrives at D late: D + coef[k] (the engine is max-plus linear, so
     * the end is max(start + span, f + coef[0], b + coef[1])).  gated:
     * the coefficients are known (the stand-in of a pair with inputs from
     * other stages). */
    int32_t gate[2];
    sim_time_ps coef[2];
    bool gated;
} pair_entry;

struct step {
    engine_t *eng;
    workload_t *wl;
    step_task_info *info;   /* per task */
    size_t n_info, cap_info;
    step_result res;
    int64_t pp, v, M;
    sched_plan plan;
    int n_kinds;            /* pass kinds it runs: the first n_kinds of the table */
    int64_t rank_passes;    /* passes one stage runs */
    pass_ref *passes;       /* [stage][kind][microbatch][chunk] */
    pass_summary *summary;  /* [stage][chunk][kind] */
    int32_t *order;         /* [stage][i]: pass_index of the stage's i-th pass */
    bool *collapsed;        /* per pass (pass_index): stands as one task */
    bool *paired;           /* per pass: ran in an overlapped template */
    /* Per pass: a stand-in measured from its ops, SHIFT_AHEAD run as alone
     * from its GPU start (pass_summary.shifts_ahead), SHIFT_HOST as alone
     * from its GPU and host starts (its zero-length start, its lead's end
     * less the lead); else SHIFT_NONE. */
    uint8_t *shifted;
    pair_entry *pairs;
    size_t n_pairs, cap_pairs;
    sim_time_ps work_ps;    /* every task's duration together (the build's) */
    /* [stream_of(stage, k)] for the host streams: the durations of their
     * tasks but the stand-ins' (step_host_lead, step_host_rest), summed as
     * the build places them (measure's host busy time of the whole step;
     * host_busy's rule, taken over the block of one period). */
    sim_time_ps *host_own_ps;
    /* Pipeline sends as lags (step.c, "Sends"): on the edges out of the
     * sending pass's last task, send_ps[stage] long; after the run each
     * stage's sends in its order as the PP stream's spans, send_spans
     * [send_at[r] .. send_at[r + 1]), each beside the task it follows
     * (send_from), so that measure reads them as it reads a stream. */
    bool lag_sends;
    sim_time_ps *send_ps;
    eng_span *send_spans;
    eng_task *send_from;
    size_t *send_at;
    /* The host's issue as release times where it waits for nothing
     * (step.c, "The host"); the host time folded so, each part beside
     * the released task that follows it (fold_task[i], fold_ps[i]: the
     * work of a period counts it in that task's block); of it, the host
     * ops of passes placed as ops, beside the same task (own_fold_task,
     * own_fold_ps: the host's busy time of a period counts them there
     * too; stand-ins count from their summaries). */
    bool fold_host;
    eng_task *fold_task;
    sim_time_ps *fold_ps;
    size_t n_fold, cap_fold;
    eng_task *own_fold_task;
    sim_time_ps *own_fold_ps;
    size_t n_own_fold, cap_own_fold;
    /* Tasks the engine will hold: ops_per_mb per microbatch and ops_fixed
     * (templates' stand-ins and ops), plus the sends and the tail. */
    size_t ops_per_mb, ops_fixed;
    bool borrowed;          /* wl and summary belong to another step (a sample of step_period) */
    bool wl_lent;           /* wl belongs to the caller (step_run_reuse) */
    int64_t period_mb;      /* a sample's: sched_plan_period of its plan, for same_task */
    const int32_t *task_tags; /* a sample's: its engine's tags once run (eng_task_tags), for same_task */
    int samples;            /* samples its figures came from (0: simulated whole) */
    bool direct;            /* its figures came from step_direct (no engine) */
    int period_checked;     /* sim.period_check: 0 not checked, 1 the second sample agrees, -1 not */
    /* A first sample's: the steps its figures stand for, as blocks more
     * than it has (the second sample's, the step's; 0: none), and
     * whether a stage's host would be ahead in one of them but not in
     * the sample, or the other way (step_host_ahead_longer). */
    int64_t longer_by[2];
    bool host_varies;
};

static inline pass_summary *summary_of(const step_t *st, int64_t stage, int64_t chunk, int kind)
{
    return &st->summary[(stage * st->v + chunk) * st->n_kinds + kind];
}

static inline size_t pass_index(const step_t *st, int64_t stage, int kind, int64_t mb, int64_t chunk)
{
    return (size_t)(((stage * st->n_kinds + kind) * st->M + mb) * st->v + chunk);
}

static inline int stream_of(int64_t stage, stream_kind k)
{
    return (int)(stage * STREAM_KINDS + k);
}

/* The first op of a pass template that is not the host's (its GPU work
 * begins there; the host ops that issue its first kernels come before),
 * or its last op. */
static inline int32_t step_first_gpu_op(const wl_pass *p)
{
    int32_t i = 0;
    while (i < p->n_ops - 1 && p->ops[i].stream == STREAM_HOST)
        i++;
    return i;
}
/* May op i of a pass placed as its own ops fold into the host's clock
 * where the stage folds (step.c, "The host")?  A host op of some length
 * that waits for host ops alone, neither the pass's first GPU op nor its
 * last (its ends are the pass's). */
static inline bool step_op_folds(const wl_pass *p, int32_t i)
{
    const wl_op *op = &p->ops[i];
    if (op->stream != STREAM_HOST || op->duration_ps == 0 || i == step_first_gpu_op(p) || i == p->n_ops - 1)
        return false;
    for (int j = 0; j < 2; j++)
        if (op->dep_back[j] && p->ops[i - op->dep_back[j]].stream != STREAM_HOST)
            return false;
    return true;
}
/* Does a pass of (chunk, kind) on stage r send to the neighbouring
 * virtual stage? */
static inline bool step_sends(const step_t *st, int64_t r, int64_t chunk, int kind)
{
    const int8_t dir = sched_kind_of((sched_kind)kind)->send_dir;
    const int64_t to = sched_vstage(&st->plan, r, chunk) + dir;
    return dir != 0 && to >= 0 && to < st->pp * st->v && st->pp > 1;
}
/* Time to all-gather a chunk's updated parameters: all its buckets. */
static inline double step_chunk_gather_s(const wl_chunk *ch)
{
    double t = 0;
    for (int32_t k = 0; k < ch->n_buckets; k++)
        t += ch->buckets[k].gather_s;
    return t;
}
/* Scratch for simulating pass templates alone, sized once for the
 * longest template: one allocation per step, not per simulation. */
typedef struct tmpl_scratch {
    sim_time_ps *start, *end; /* per op */
    interval *comp, *comm, *all, *tmp;
} tmpl_scratch;

int step_scratch_init(tmpl_scratch *w, size_t n);
void step_scratch_free(tmpl_scratch *w);

/* The timeline of a pass template alone into w (step.c's note on
 * sweep_gated), with its GPU streams free from gpu_at and its host from
 * host_at. */
int step_sweep(const wl_pass *p, sim_time_ps gpu_at, sim_time_ps host_at, tmpl_scratch *w, sim_err *err);

/* Where the GPU streams of a pass start on its stand-in's timeline. */
sim_time_ps step_gpu_origin(const wl_pass *p, const pass_summary *sum);
/* Can seq[i] of a stage's order (n passes; pair[j] >= 0 where seq[j] and
 * seq[j + 1] run as an overlapped pair, pair NULL: none) stand as a task
 * (or its stand-in) on the compute stream?  A pass that ends with a
 * communication op (pass_summary.tail) only when nothing after it on its
 * stage can start before that op ends: the next pass waits for its end (a
 * forward's backward), or none follows (the optimizer waits for it). */
static inline bool step_stands(const sched_pass *seq, const int32_t *pair, int64_t n, int64_t i,
                               const pass_summary *sum)
{
    if (sum->collapsible || (pair && pair[i] >= 0))
        return sum->collapsible;
    if (!sum->tail)
        return false;
    if (i + 1 == n)
        return true;
    const sched_pass *it = &seq[i], *next = &seq[i + 1];
    return !(pair && pair[i + 1] >= 0) && sched_kind_of((sched_kind)next->kind)->after == it->kind &&
           next->microbatch == it->microbatch && next->chunk == it->chunk;
}
/* Is the stage's host provably ahead of its GPU at every pass (step.c,
 * "The host")? */
bool step_host_ahead(const step_t *st, const run_inputs *in, const sched_pass *seq, const int32_t *pair, int64_t n,
                     int64_t r, bool ag_first);
/* Where a longer step's order (P microbatches, L passes a period more)
 * holds the passes it has beyond seq's: seq[at - L, at) one period on,
 * before seq[at], with seq's steady run (seq[i + L] seq[i] one period on)
 * through [at - L, at + L); -1 where the run is shorter or a pair (pair:
 * NULL for none) would run across a copy's start. */
int64_t step_order_copy_at(const sched_pass *seq, const int32_t *pair, int64_t n, int64_t P, int64_t L);
/* step_host_ahead on seq with blocks more copies of seq[at - L, at)
 * inserted before seq[at] (step_order_copy_at). */
bool step_host_ahead_longer(const step_t *st, const run_inputs *in, const sched_pass *seq, const int32_t *pair,
                            int64_t n, int64_t r, bool ag_first, int64_t at, int64_t L, int64_t blocks);

#endif
