/* step: one training step, simulated (contract in step.h).
 *
 * Two levels.  Every distinct pass template of the workload (forward and
 * backward of each (stage, chunk); middle stages mostly share theirs) is
 * first simulated alone (step_sweep(): one pass over its ops in list order is
 * the engine's timeline for a template, with no engine to build):
 * summarize() keeps its span and its per-stream busy and exposed time.  A pass begins and
 * ends on the in-order compute stream, so inside the step it runs exactly
 * as alone, and one task of its span stands in for its ops ("collapsed").
 * Passes whose inner ops other tasks must see keep their ops: the last
 * backward of a chunk that releases DP buckets from inside it, the first
 * forward that waits for several parameter all-gathers, and every pass
 * when the trace wants every kernel (sim.keep_ops).
 *
 * The host.  A pass's templates carry host issue ops on the host stream
 * (workload's host_issue), so a pass no longer starts from one stream:
 * its GPU work can start when the GPU is free (t_g) and its host when the
 * host is (t_h), and the host of the next pass may run ahead while this
 * pass's kernels run.  The engine is max-plus linear, so a pass alone
 * answers both exactly: summarize_host() simulates it with the GPU late
 * and with the host late, and the pass ends on the GPU at max(t_g + gpu,
 * t_h + lead + gpu) and on the host at max(t_h + host, t_g + wait + rest).
 * In the step it stands as the host's lead (host stream), its GPU span
 * (compute stream, after the lead) and the host's rest (host stream;
 * joined with the next stand-in's lead into one task); a pass whose host
 * waits for the GPU (an MoE dispatch's D2H copy) also gets a zero-length
 * start on the compute stream and, from there, the host's wait on the
 * delay stream, which the rest waits for.  So host modeling keeps passes
 * collapsed (two tasks per pass, four with a sync); a pass whose figures
 * fall outside what the stand-in reproduces (wait longer than its GPU
 * span, a lead longer than its host time) keeps its ops instead.  A stage
 * whose host provably stays ahead of its GPU (host_ahead(): bounds on the
 * host's end against the compute stream's, pass by pass) needs none of
 * this: its passes stand as their GPU spans, the first behind its lead.
 * While a stage's host stream holds nothing but stand-ins' leads and
 * rests and host ops that wait for host ops alone (no sync, no graph
 * launch, no stand-in its ops measure from its lead), it waits for
 * nothing but itself and runs them back to back from 0: they are no
 * tasks then (fold_host); the GPU span behind a lead, or a kept pass's
 * GPU op after such a host op (add_ops), has a release time where that
 * host work ends (engine.h), and the first host task placed (the
 * optimizer's sync, a host op that waits for the GPU, the stage's last
 * rest, whose end may be the step's) one where the folded ones end.  A
 * stand-in or op of no time is not folded (a task of none ends a round
 * later than a release says), nor a kept pass's first GPU op or last op
 * (its ends are the pass's).  The folded time counts in the work, each
 * part in the block of the task released after it (fold_task, fold_ps:
 * step_measure's period), a kept pass's host ops in the host's busy time
 * there too (own_fold_task, own_fold_ps), and step_period's fit takes how
 * the releases move from a block to the next (one block's host time).
 *
 * Overlapped pairs.  With the EP overlap an item of two passes (the
 * combined 1F1B's, DualPipeV's F&B) runs as one overlapped template
 * (workload.h, wl_pair), made and simulated once per (stage, chunks) and
 * shared by identical ones; it stands as one task with PP 1, and with
 * PP > 1 as three tasks gated by its passes' inputs (add_gated_pair), its
 * ends then equal to its ops'.
 *
 * The step's engine has the streams of the stream table per stage
 * (compute, tp, cp, ep, dp, pp, host, the delay stream) and two counters
 * per stage (activation bytes, passes in flight).
 * build() adds, stage by stage: the parameter all-gathers issued before
 * the first forwards (overlap_param_gather), the scheduled passes in
 * Megatron's order with their pipeline sends, counters and bucket
 * reductions, then the DP tail and the optimizer step (the host's sync
 * for the gradient norm and found-inf, then its issue of the step, beside
 * it); last the links
 * between stages (a forward waits for the previous virtual stage's send, a
 * backward for the next one's).  step_measure() (step_measure.c) reads bubble, exposed
 * communication and memory off the timeline.
 *
 * Sends.  A pipeline send runs on its stage's in-order PP stream from the
 * end of its pass; the next virtual stage's pass waits for it (and, with
 * blocking p2p, the stage's next pass).  A stream that never queues
 * starts each send as its pass ends, so the send is then exactly a lag of
 * its duration on the edges out of the pass's last task (engine.h): a
 * task fewer per send.  simulate() builds so (sends_as_lags:
 * not for a trace, beside overlapped pairs, or for a send of no time),
 * runs, and lays the sends out as the PP stream's spans (lay_sends); if a
 * send would have started before the one ahead of it ended, the step is
 * built again with the sends as tasks.  measure() reads those spans as
 * the PP stream's, the build counts their time in the work, and
 * step_period's fit follows an edge's lag (a lag's end as a task's) and
 * takes the window past it.  With the stream never queuing in a sample
 * whose timeline is periodic, it never queues in the steps extended from
 * it either: each pair of consecutive sends there is one of the sample's,
 * or one of its steady blocks' shifted by whole periods.
 *
 * Walked.  Where step_direct takes the step (step_direct.h) and walking
 * it whole costs less than samples would (direct_pays), the figures come
 * from that walk and no graph is built.
 *
 * Long steps.  The pass templates and their summaries do not depend on
 * the microbatches, so simulate() builds, runs and measures the graph for
 * any M on one workload: where sim.steady_extension allows and the step is
 * long enough to gain, run_periodic() simulates two short samples (M1 and
 * M1 + one period) and derives the step's figures from them when
 * step_period verifies the first sample's timeline periodic (contract and
 * argument in step_period.h), else the whole step is simulated.  For the
 * two ways to agree bit for bit, measure() sums integer picoseconds and
 * finish() makes them seconds once.  A trace (sim.keep_ops) always
 * simulates the whole step: it reads every task.
 *
 * Failures while building are sticky, as in workload's op buffer: the
 * first failed add, dependency or counter delta records its code in
 * builder.rc, and every later call does nothing.  NO_TASK is a legitimate
 * absence (no send from the last virtual stage, no reduction yet); a
 * failure is never mistaken for one, because the build then returns rc.
 */
#include "step.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "memory.h"
#include "model.h"
#include "schedule.h"
#include "step_direct.h"
#include "step_internal.h"
#include "step_period.h"
#include "units.h"

/* The step's graph under construction, with its sticky status. */
typedef struct builder {
    step_t *st;
    const run_inputs *in;
    const strategy_t *s;
    sim_err *err;
    int rc;                  /* SIM_OK until the first failure */
    sim_time_ps work_ps;     /* durations of every task so far: bounds the makespan */
    /* The host rest of the last stand-in, not yet added: the next
     * stand-in's lead joins it in one task (host_flush otherwise). */
    bool rest_pending;
    int64_t rest_stage;
    sim_time_ps rest_ps;
    eng_task rest_wait;      /* the task it waits for (NO_TASK if none) */
    int32_t rest_mb, rest_chunk;
    /* Per stage, rebuilt for each. */
    sched_item *items;       /* the stage's schedule */
    int64_t n_items;
    sched_pass *seq;         /* its passes in order (an item's passes one after the other) */
    int32_t *seq_pair;       /* [i]: the pair entry seq[i] and seq[i+1] run in, or -1 */
    int64_t n_seq;
    eng_task *param_ag;      /* [chunk]: gather of its bucket n-1 (first layers), or NO_TASK */
    bool *first_f_done;      /* [chunk]: its first forward is placed */
    int64_t *last_grad;      /* [chunk]: seq index of its last pass of the plan's grad kind */
    /* A pass standing as a chain (add_chain): per bucket the task its
     * gather gates or its reduction follows; chained: the pass being
     * placed is one. */
    eng_task *bucket_task;   /* [bucket] */
    /* The pass last placed as its own ops (add_ops): per op its task
     * (NO_TASK: folded into the host's clock) and a folded op's end. */
    eng_task *op_at;
    sim_time_ps *op_end;
    bool chained;
    struct tmpl_scratch *w;  /* for simulating a template while building */
    /* Looked up once rather than per pass: the pass kinds' descriptors;
     * per stage, whether its pipeline send's duration is made yet (into
     * step.send_ps[stage] the first time a pass of the stage sends) and
     * whether a pass of (chunk, kind) sends (sends[chunk * SCHED_KINDS +
     * kind]). */
    const sched_kind_desc *kd[SCHED_KINDS];
    bool host_role[STREAM_KINDS]; /* the streams of STREAM_ROLE_HOST */
    bool send_made;
    bool *sends;
    /* The tasks, dependencies and counter deltas of the stage being built,
     * not yet in the engine: flush() hands them over in one block each
     * (eng_add_tasks and the like).  A task's id is known when it is
     * added, the engine's next (next_id); new_tag is the tag of the first
     * kept task (its index in st->info), tag_shift a task's tag less its
     * id. */
    int32_t *new_stream;
    sim_time_ps *new_dur;
    size_t n_new, cap_new;
    eng_dep *new_deps;
    size_t n_new_deps, cap_new_deps;
    eng_delta *new_deltas;
    size_t n_new_deltas, cap_new_deltas;
    /* The lagged dependencies (the sends, step.lag_sends) beside their lags. */
    eng_dep *new_lag_deps;
    sim_time_ps *new_lags;
    size_t n_new_lag, cap_new_lag;
    /* The host's issue as release times (step.c, "The host"): while every
     * task of the stage's host stream so far has been a stand-in's lead or
     * rest of some length (fold), they are no tasks; host_clock is where
     * the last of them ends, the release of the GPU span behind a lead
     * and of the first host task that is placed. */
    bool fold;
    sim_time_ps host_clock;
    sim_time_ps fold_pending; /* folded since the last release (step.fold_ps) */
    sim_time_ps fold_own_pending; /* of it, host ops of passes placed as ops (step.own_fold_ps) */
    eng_task *new_rel_task;
    sim_time_ps *new_rel_at;
    size_t n_new_rel, cap_new_rel;
    int64_t next_id, tag_shift;
    int32_t new_tag;
} builder;

/* Records the first failure; later ones keep it. */
static void fail(builder *b, int rc)
{
    if (b->rc == SIM_OK)
        b->rc = rc;
}

static inline void dep(builder *b, eng_task before, eng_task after);
static void host_flush(builder *b, bool may_fold);
static void release_at(builder *b, eng_task t, sim_time_ps at);

const char step_host_lead[] = "host_issue", step_host_rest[] = "host_issue ";

/* Doubles a kept array of *cap elements (of size elem); false, with the
 * build failed, when out of memory. */
static bool room(builder *b, void **p, size_t *cap, size_t elem)
{
    size_t nc = *cap < 64 ? 64 : 2 * *cap;
    void *q = nc <= SIZE_MAX / elem ? realloc(*p, nc * elem) : NULL;
    if (!q) {
        fail(b, SIM_ENOMEM);
        return false;
    }
    *p = q;
    *cap = nc;
    return true;
}

/* Doubles the room of two arrays kept side by side, *cap elements each
 * (of sizes ea and ec). */
static bool room_pair(builder *b, void **a, size_t ea, void **c, size_t ec, size_t *cap)
{
    size_t n = *cap;
    if (!room(b, a, &n, ea))
        return false;
    n = *cap;
    if (!room(b, c, &n, ec))
        return false;
    *cap = n;
    return true;
}

/* Doubles the room for kept tasks (both arrays). */
static bool room_tasks(builder *b)
{
    return room_pair(b, (void **)&b->new_stream, sizeof *b->new_stream, (void **)&b->new_dur, sizeof *b->new_dur,
                     &b->cap_new);
}

#define WORK_SURE_PS ((sim_time_ps)(0.4 * LIMIT_DURATION_S * PS_PER_S))

/* The task added once there is room: its duration counted in the work
 * (at most LIMIT_DURATION_S: no wrap) and, on a host stream and not a
 * pass's stand-in, in the host's busy time (step.host_own_ps, within the
 * work), its stream, and what it is. */
static inline eng_task place(builder *b, int64_t stage, stream_kind k, sim_time_ps d, const char *name, int32_t mb,
                             int32_t chunk)
{
    step_t *st = b->st;
    b->work_ps += d;
    if (b->host_role[k] && name != step_host_lead && name != step_host_rest)
        st->host_own_ps[stream_of(stage, k)] += d;
    const eng_task t = (eng_task)b->next_id++;
    b->new_stream[b->n_new] = stream_of(stage, k);
    b->new_dur[b->n_new++] = d;
    st->info[st->n_info++] =
        (step_task_info){.stage = stage, .stream = k, .name = name, .microbatch = mb, .chunk = chunk};
    return t;
}

/* Can d join the work (LIMIT_DURATION_S at most: no wrap)?  False with
 * the build failed when not.  Below WORK_SURE_PS each (less than half of
 * LIMIT_DURATION_S, with room for the rounding of time_as_s), the sum in
 * seconds fits for certain: the check in double is only needed past it. */
static bool work_fits(builder *b, sim_time_ps d)
{
    if (b->work_ps > WORK_SURE_PS || d > WORK_SURE_PS) {
        double work_s = time_as_s(b->work_ps) + time_as_s(d);
        if (!time_s_fits(work_s)) {
            fail(b, wl_duration_err(b->err, work_s, "the step's kernels and transfers together"));
            return false;
        }
    }
    return true;
}

/* add() with every check: a failed build, a host rest pending, work past
 * WORK_SURE_PS, the room grown. */
static eng_task add_checked(builder *b, int64_t stage, stream_kind k, sim_time_ps d, const char *name, int32_t mb,
                            int32_t chunk)
{
    step_t *st = b->st;
    if (b->rc != SIM_OK)
        return NO_TASK;
    if (k == STREAM_HOST && b->rest_pending)
        host_flush(b, true); /* a pending host rest comes first on its stream */
    /* A host task that is placed ends the folding: it follows the folded
     * ones, so it is released where they end. */
    const bool unfold = k == STREAM_HOST && b->fold;
    b->fold = b->fold && !unfold;
    if (!work_fits(b, d))
        return NO_TASK;
    /* The engine's limit: ids up to INT32_MAX - 1 (eng_add_task). */
    if (b->next_id >= INT32_MAX || (b->n_new == b->cap_new && !room_tasks(b))) {
        fail(b, SIM_ENOMEM);
        return NO_TASK;
    }
    if (st->n_info == st->cap_info) {
        size_t cap = st->cap_info ? 2 * st->cap_info : 1024;
        step_task_info *p = realloc(st->info, cap * sizeof *p);
        if (!p) {
            fail(b, SIM_ENOMEM);
            return NO_TASK;
        }
        st->info = p;
        st->cap_info = cap;
    }
    const eng_task t = place(b, stage, k, d, name, mb, chunk);
    if (unfold)
        release_at(b, t, b->host_clock);
    return t;
}

/* Adds a task and records what it is.  NO_TASK once the build has failed.
 * Inline where none of add_checked's cases arises (the usual one): what
 * it does then, without a call per task. */
static inline eng_task add(builder *b, int64_t stage, stream_kind k, sim_time_ps d, const char *name, int32_t mb,
                           int32_t chunk)
{
    step_t *st = b->st;
    if (b->rc != SIM_OK || (k == STREAM_HOST && (b->rest_pending || b->fold)) || b->work_ps > WORK_SURE_PS ||
        d > WORK_SURE_PS ||
        b->next_id >= INT32_MAX || b->n_new == b->cap_new || st->n_info == st->cap_info)
        return add_checked(b, stage, k, d, name, mb, chunk);
    return place(b, stage, k, d, name, mb, chunk);
}

/* Adds a task that stands for a whole pass (or its GPU span). */
static eng_task add_whole(builder *b, int64_t stage, sim_time_ps d, sched_kind kind, int32_t mb, int32_t chunk)
{
    eng_task t = add(b, stage, STREAM_COMPUTE, d, b->kd[kind]->name, mb, chunk);
    if (t != NO_TASK)
        b->st->info[b->st->n_info - 1].whole_pass = true;
    return t;
}

/* A duration in seconds computed here, as simulated time; outside
 * [0, LIMIT_DURATION_S] it fails the build naming what it is. */
static sim_time_ps duration_ps(builder *b, double seconds, const char *what, int64_t stage)
{
    sim_time_ps t;
    if (time_from_s_checked(seconds, &t))
        return t;
    if (b->rc == SIM_OK) {
        char buf[160];
        snprintf(buf, sizeof buf, "%s of stage %lld", what, (long long)stage);
        fail(b, wl_duration_err(b->err, seconds, buf));
    }
    return 0;
}

/* Folds d of a stand-in's host time into host_clock where the stage
 * still folds and d > 0 (a task of no time would end a round later than
 * a release says); false, nothing changed, where not. */
static bool fold_host(builder *b, sim_time_ps d)
{
    if (!b->fold || d == 0 || !work_fits(b, d))
        return false;
    b->work_ps += d;
    b->host_clock += d;
    b->fold_pending += d;
    return true;
}

/* Adds the pending host rest of the last stand-in as a task of its own,
 * or (may_fold: a host task follows it) folds it. */
static void host_flush(builder *b, bool may_fold)
{
    if (!b->rest_pending)
        return;
    b->rest_pending = false;
    if (may_fold && b->rest_wait == NO_TASK && fold_host(b, b->rest_ps))
        return;
    eng_task t = add(b, b->rest_stage, STREAM_HOST, b->rest_ps, step_host_rest, b->rest_mb, b->rest_chunk);
    dep(b, b->rest_wait, t);
}

/* t cannot start before `at` (a folded host's clock); nothing for 0. */
static void release_at(builder *b, eng_task t, sim_time_ps at)
{
    if (b->rc != SIM_OK || t == NO_TASK || at == 0)
        return;
    if (b->n_new_rel == b->cap_new_rel &&
        !room_pair(b, (void **)&b->new_rel_task, sizeof *b->new_rel_task, (void **)&b->new_rel_at,
                   sizeof *b->new_rel_at, &b->cap_new_rel))
        return;
    b->new_rel_task[b->n_new_rel] = t;
    b->new_rel_at[b->n_new_rel++] = at;
    step_t *st = b->st;
    if (b->fold_pending == 0)
        return;
    if (st->n_fold == st->cap_fold &&
        !room_pair(b, (void **)&st->fold_task, sizeof *st->fold_task, (void **)&st->fold_ps, sizeof *st->fold_ps,
                   &st->cap_fold))
        return;
    st->fold_task[st->n_fold] = t;
    st->fold_ps[st->n_fold++] = b->fold_pending;
    b->fold_pending = 0;
    if (b->fold_own_pending == 0)
        return;
    if (st->n_own_fold == st->cap_own_fold &&
        !room_pair(b, (void **)&st->own_fold_task, sizeof *st->own_fold_task, (void **)&st->own_fold_ps,
                   sizeof *st->own_fold_ps, &st->cap_own_fold))
        return;
    st->own_fold_task[st->n_own_fold] = t;
    st->own_fold_ps[st->n_own_fold++] = b->fold_own_pending;
    b->fold_own_pending = 0;
}

/* `after` waits for `before`; no edge when either is NO_TASK. */
static inline void dep(builder *b, eng_task before, eng_task after)
{
    if (b->rc != SIM_OK || before == NO_TASK || after == NO_TASK)
        return;
    if (b->n_new_deps == b->cap_new_deps &&
        !room(b, (void **)&b->new_deps, &b->cap_new_deps, sizeof *b->new_deps))
        return;
    b->new_deps[b->n_new_deps++] = (eng_dep){before, after};
}

/* `after` waits for `lag` past the end of `before` (a send, step.lag_sends);
 * no edge when either is NO_TASK. */
static void dep_lag(builder *b, eng_task before, eng_task after, sim_time_ps lag)
{
    if (b->rc != SIM_OK || before == NO_TASK || after == NO_TASK)
        return;
    if (b->n_new_lag == b->cap_new_lag &&
        !room_pair(b, (void **)&b->new_lag_deps, sizeof *b->new_lag_deps, (void **)&b->new_lags, sizeof *b->new_lags,
                   &b->cap_new_lag))
        return;
    b->new_lag_deps[b->n_new_lag] = (eng_dep){before, after};
    b->new_lags[b->n_new_lag++] = lag;
}

/* Are tasks a and t, both kept (not yet in the engine), on one stream, a
 * first?  Then t waits for a by the stream's order alone: an edge would
 * add nothing to the timeline. */
static inline bool same_stream(const builder *b, eng_task a, eng_task t)
{
    const int64_t kept = b->next_id - (int64_t)b->n_new;
    return a >= kept && t > a && t < b->next_id && b->new_stream[a - kept] == b->new_stream[t - kept];
}

static inline void count(builder *b, eng_task t, int counter, int64_t at_start, int64_t at_end)
{
    if (b->rc != SIM_OK || t == NO_TASK)
        return;
    if (b->n_new_deltas == b->cap_new_deltas &&
        !room(b, (void **)&b->new_deltas, &b->cap_new_deltas, sizeof *b->new_deltas))
        return;
    b->new_deltas[b->n_new_deltas++] = (eng_delta){t, counter, at_start, at_end};
}

/* Hands the kept tasks, dependencies and counter deltas to the engine (in
 * that order: the dependencies and deltas name kept tasks). */
static void flush(builder *b)
{
    engine_t *e = b->st->eng;
    if (b->rc != SIM_OK)
        return;
    if (b->n_new > 0 && eng_add_tasks(e, b->n_new, b->new_stream, b->new_dur, b->new_tag) < 0) {
        fail(b, SIM_ENOMEM); /* out of memory (the ids and tags are in range) */
        return;
    }
    int rc = eng_add_deps(e, b->n_new_deps, b->new_deps);
    if (rc == SIM_OK && b->n_new_lag > 0)
        rc = eng_add_lagged_deps(e, b->n_new_lag, b->new_lag_deps, b->new_lags);
    if (rc == SIM_OK && b->n_new_rel > 0)
        rc = eng_add_releases(e, b->n_new_rel, b->new_rel_task, b->new_rel_at);
    if (rc == SIM_OK)
        rc = eng_add_counter_deltas(e, b->n_new_deltas, b->new_deltas);
    fail(b, rc);
    b->n_new = b->n_new_deps = b->n_new_deltas = b->n_new_lag = b->n_new_rel = 0;
    b->new_tag = (int32_t)b->st->n_info;
}

/* Instantiates one pass's op template; with side (an overlapped pair's),
 * op i is of microbatch mb[side[i]] on chunk chunk[side[i]].  A pass of
 * its own (no side) on a stage that folds its host folds the host ops
 * that wait for nothing but the host (step_op_folds): no tasks, their ends in
 * b->op_end, a GPU op after one released there; b->op_at[i] is the task
 * of op i (NO_TASK for a folded one), read by op_task(). */
static void add_ops(builder *b, int64_t stage, const wl_pass *p, const uint8_t *side, const int32_t mb[2],
                    const int32_t chunk[2], pass_ref *ref)
{
    const int32_t gpu = step_first_gpu_op(p);
    eng_task base = NO_TASK;
    for (int32_t i = 0; i < p->n_ops && b->rc == SIM_OK; i++) {
        const wl_op *op = &p->ops[i];
        int k = side ? side[i] : 0;
        if (!side && b->fold && step_op_folds(p, i)) {
            host_flush(b, true); /* the last stand-in's rest comes first (it may end the folding) */
            if (fold_host(b, op->duration_ps)) {
                b->st->host_own_ps[stream_of(stage, STREAM_HOST)] += op->duration_ps;
                b->fold_own_pending += op->duration_ps;
                b->op_at[i] = NO_TASK;
                b->op_end[i] = b->host_clock;
                continue;
            }
        }
        eng_task t = add(b, stage, (stream_kind)op->stream, op->duration_ps, op->name, mb[k], chunk[k]);
        if (!side)
            b->op_at[i] = t;
        if (base == NO_TASK)
            base = t;
        /* An op the template orders after an earlier op of its own
         * stream follows it in the stream's order anyway: no edge; one
         * after a folded op starts no earlier than that op's end. */
        for (int j = 0; j < 2; j++) {
            const int32_t d = i - op->dep_back[j];
            if (!op->dep_back[j] || p->ops[d].stream == op->stream)
                continue;
            if (!side && b->op_at[d] == NO_TASK)
                release_at(b, t, b->op_end[d]);
            else
                dep(b, side ? t - op->dep_back[j] : b->op_at[d], t);
        }
    }
    const bool placed = base != NO_TASK && b->rc == SIM_OK;
    ref->base = placed ? base : NO_TASK;
    ref->first = ref->span = !placed ? NO_TASK : side ? base + gpu : b->op_at[gpu];
    ref->last = !placed ? NO_TASK : side ? base + p->n_ops - 1 : b->op_at[p->n_ops - 1];
    ref->map = NULL;
}

/* Instantiates one pass's op template. */
static void add_pass(builder *b, int64_t stage, const wl_pass *p, int32_t mb, int32_t chunk, pass_ref *ref)
{
    add_ops(b, stage, p, NULL, (int32_t[2]){mb, mb}, (int32_t[2]){chunk, chunk}, ref);
}

/* The task of GPU op i of a pass placed as ops: in an overlapped
 * template by its map, in its own by add_ops' (the pass just placed). */
static eng_task op_task(const builder *b, const pass_ref *ref, int32_t i)
{
    return ref->map ? ref->base + ref->map[i] : b->op_at[i];
}

/* The refs of the two passes of an overlapped template placed as ops:
 * each pass's first GPU op where it went; both end with the template (as
 * in Megatron, the pair's sends follow the whole pair). */
static void pair_refs(const pair_entry *pe, const wl_pass *fp, const wl_pass *bp, eng_task base, pass_ref *fr,
                      pass_ref *br)
{
    const wl_pass *ps[2] = {fp, bp};
    pass_ref *rs[2] = {fr, br};
    for (int k = 0; k < 2; k++) {
        int32_t gpu = 0;
        while (gpu < ps[k]->n_ops - 1 && ps[k]->ops[gpu].stream == STREAM_HOST)
            gpu++;
        rs[k]->base = base;
        rs[k]->map = pe->t.map[k];
        rs[k]->first = rs[k]->span = base == NO_TASK || ps[k]->n_ops == 0 ? NO_TASK : base + pe->t.map[k][gpu];
        rs[k]->last = base == NO_TASK || ps[k]->n_ops == 0 ? NO_TASK : base + pe->t.pass.n_ops - 1;
    }
}

void step_scratch_free(tmpl_scratch *w)
{
    free(w->start);
    free(w->end);
    free(w->comp);
    free(w->comm);
    free(w->all);
    free(w->tmp);
}

int step_scratch_init(tmpl_scratch *w, size_t n)
{
    n = n ? n : 1;
    *w = (tmpl_scratch){malloc(n * sizeof *w->start), malloc(n * sizeof *w->end), malloc(n * sizeof *w->comp),
                        malloc(n * sizeof *w->comm), malloc(n * sizeof *w->all), malloc(n * sizeof *w->tmp)};
    if (w->start && w->end && w->comp && w->comm && w->all && w->tmp)
        return SIM_OK;
    step_scratch_free(w);
    *w = (tmpl_scratch){0}; /* freeing it again is a no-op */
    return SIM_ENOMEM;
}

/* The timeline of a pass template alone, with its GPU streams free from
 * gpu_at and its host from host_at: what the engine gives for its ops
 * behind an origin task of each length, without building an engine.  In a
 * template every op's dependencies come before it and each stream runs its
 * ops in list order, so an op starts when the last of its stream
 * predecessor and its dependencies ends (the engine's rule, nothing else
 * delays a task): one sweep in list order is the engine's timeline.  Op
 * gate_op (-1: none) starts no earlier than gate_at: an input from another
 * stage that arrives then. */
static int sweep_gated(const wl_pass *p, sim_time_ps gpu_at, sim_time_ps host_at, int32_t gate_op,
                       sim_time_ps gate_at, tmpl_scratch *w, sim_err *err)
{
    sim_time_ps free_at[STREAM_KINDS];
    for (int k = 0; k < STREAM_KINDS; k++)
        free_at[k] = k == STREAM_HOST ? host_at : gpu_at;
    for (int32_t i = 0; i < p->n_ops; i++) {
        const wl_op *op = &p->ops[i];
        sim_time_ps t = free_at[op->stream];
        if (i == gate_op && gate_at > t)
            t = gate_at;
        for (int j = 0; j < 2; j++)
            if (op->dep_back[j] && w->end[i - op->dep_back[j]] > t)
                t = w->end[i - op->dep_back[j]];
        w->start[i] = t;
        if (__builtin_add_overflow(t, op->duration_ps, &w->end[i]))
            return sim_err_set(err, SIM_ESIM, "engine: simulated time overflows 2^64 ps at %llu ps",
                               (unsigned long long)t);
        free_at[op->stream] = w->end[i];
    }
    return SIM_OK;
}

int step_sweep(const wl_pass *p, sim_time_ps gpu_at, sim_time_ps host_at, tmpl_scratch *w, sim_err *err)
{
    return sweep_gated(p, gpu_at, host_at, -1, 0, w, err);
}

/* The ops of one stream in the last sweep, as intervals in run order. */
static size_t op_intervals(const wl_pass *p, int stream, const tmpl_scratch *w, interval *out)
{
    size_t n = 0;
    for (int32_t i = 0; i < p->n_ops; i++)
        if (p->ops[i].stream == stream)
            out[n++] = (interval){w->start[i], w->end[i]};
    return n;
}

/* When a pass's GPU work ends (its last op on any GPU stream, as a pass
 * span is its makespan) and its host work ends, with its GPU streams free
 * from gpu_at and its host from host_at. */
static int respond(const wl_pass *p, sim_time_ps gpu_at, sim_time_ps host_at, sim_time_ps *gpu_end,
                   sim_time_ps *host_end, tmpl_scratch *w, sim_err *err)
{
    int rc = step_sweep(p, gpu_at, host_at, w, err);
    if (rc != SIM_OK)
        return rc;
    *gpu_end = gpu_at;
    *host_end = host_at;
    for (int32_t i = 0; i < p->n_ops; i++) {
        if (p->ops[i].stream == STREAM_HOST)
            *host_end = w->end[i];
        else if (w->end[i] > *gpu_end)
            *gpu_end = w->end[i];
    }
    return SIM_OK;
}

/* Where the GPU streams of a pass start on its stand-in's timeline: 0
 * without host ops; with them late by its whole work plus one, so that
 * the host is ahead throughout (summarize_host's GPU-late response). */
sim_time_ps step_gpu_origin(const wl_pass *p, const pass_summary *sum)
{
    if (!sum->host)
        return 0;
    sim_time_ps total = 1;
    for (int32_t i = 0; i < p->n_ops; i++)
        total += p->ops[i].duration_ps;
    return total;
}

/* In the last sweep, does the pass's last op start only after every other
 * GPU op has ended (so that it alone is on the GPU at the pass's end)? */
static bool tail_last(const wl_pass *p, const tmpl_scratch *w)
{
    const int32_t n = p->n_ops;
    for (int32_t i = 0; i < n - 1; i++)
        if (p->ops[i].stream != STREAM_HOST && w->end[i] > w->start[n - 1])
            return false;
    return true;
}

/* The host side of a pass's summary (see pass_summary).  The stand-in
 * (host lead, GPU span, host rest, and with a sync the wait carried on
 * STREAM_HOST_WAIT) reproduces the pass only when its parts are in range;
 * otherwise the pass keeps its ops. */
static int summarize_host(const wl_pass *p, pass_summary *out, tmpl_scratch *w, sim_err *err)
{
    sim_time_ps total = 1, gd, hd, gh, hh;
    for (int32_t i = 0; i < p->n_ops; i++) {
        total += p->ops[i].duration_ps;
        if (p->ops[i].stream == STREAM_HOST) {
            out->host = true;
            out->host_busy_ps += p->ops[i].duration_ps;
            for (int j = 0; j < 2; j++)
                if (p->ops[i].dep_back[j] && p->ops[i - p->ops[i].dep_back[j]].stream != STREAM_HOST)
                    out->sync = true;
        }
    }
    out->shifts = out->shifts_ahead = true;
    if (!out->host)
        return SIM_OK;
    if (total > UINT64_MAX / 4) { /* delayed by total, its ends could pass 2^64 ps: keep its ops */
        out->collapsible = out->tail = false;
        return SIM_OK;
    }
    int rc;
    if ((rc = respond(p, total, 0, &gd, &hd, w, err)) != SIM_OK)
        return rc;
    out->tail = out->tail && tail_last(p, w);
    for (int32_t i = 0; i < p->n_ops; i++)
        w->comp[i] = (interval){w->start[i] - total, w->end[i] - total};
    if ((rc = respond(p, 0, total, &gh, &hh, w, err)) != SIM_OK)
        return rc;
    out->tail = out->tail && tail_last(p, w);
    /* GPU late: it ends at total + gpu, the host (if it waits) at total + wait'. */
    out->gpu_ps = gd - total;
    sim_time_ps b = gh - total; /* host late: GPU end from the host's start */
    out->host_ps = hh - total;
    out->lead_ps = b >= out->gpu_ps ? b - out->gpu_ps : 0;
    bool ok = b >= out->gpu_ps && out->lead_ps <= out->host_ps;
    if (out->sync) {
        sim_time_ps d = hd >= total ? hd - total : 0, rest = out->host_ps - out->lead_ps;
        ok = ok && hd >= total && d >= rest && d - rest <= out->gpu_ps;
        out->wait_ps = ok ? d - rest : 0;
    }
    out->collapsible = out->collapsible && ok;
    out->tail = out->tail && ok;
    /* Host late: each GPU op as many ps after the GPU's start (the lead
     * after the host's) as with the GPU late. */
    sim_time_ps at = total + out->lead_ps;
    out->shifts_ahead = ok;
    for (int32_t i = 0; i < p->n_ops && out->shifts_ahead; i++) {
        if (p->ops[i].stream == STREAM_HOST)
            continue;
        out->shifts_ahead = w->start[i] >= total && w->start[i] - total <= out->lead_ps + w->comp[i].a;
        out->shifts = out->shifts && w->start[i] >= at && w->start[i] - at == w->comp[i].a;
    }
    out->shifts = out->shifts && out->shifts_ahead;
    return SIM_OK;
}

/* Simulates one pass template alone and fills its summary. */
static int summarize(const wl_pass *p, pass_summary *out, tmpl_scratch *w, sim_err *err)
{
    memset(out, 0, sizeof *out);
    if (p->n_ops == 0)
        return SIM_OK;
    int rc = step_sweep(p, 0, 0, w, err);
    if (rc != SIM_OK)
        return rc;
    for (int32_t i = 0; i < p->n_ops; i++)
        if (w->end[i] > out->span_ps)
            out->span_ps = w->end[i];
    size_t nc = merge(w->comp, op_intervals(p, STREAM_COMPUTE, w, w->comp));
    size_t n_all = 0;
    for (int k = 0; k < STREAM_KINDS; k++) {
        if (!streams_is_comm((stream_kind)k))
            continue;
        size_t nk = op_intervals(p, k, w, w->comm);
        for (size_t i = 0; i < nk; i++)
            out->comm_ps[k] += w->comm[i].b - w->comm[i].a;
        nk = merge(w->comm, nk);
        out->exposed_ps[k] = uncovered(w->comm, nk, w->comp, nc);
        n_all = unite_into(&w->all, n_all, w->comm, nk, &w->tmp);
    }
    out->exposed_all_ps = uncovered(w->all, n_all, w->comp, nc);
    /* It begins and ends on the compute stream (host ops that issue its
     * first kernels may come before). */
    int32_t first = 0;
    while (first < p->n_ops - 1 && p->ops[first].stream == STREAM_HOST)
        first++;
    const wl_op *last = &p->ops[p->n_ops - 1];
    out->collapsible = p->ops[first].stream == STREAM_COMPUTE && last->stream == STREAM_COMPUTE;
    out->tail = p->ops[first].stream == STREAM_COMPUTE && first < p->n_ops - 1 &&
                streams_is_comm((stream_kind)last->stream) && tail_last(p, w);
    rc = summarize_host(p, out, w, err);
    for (int k = 0; k < STREAM_KINDS; k++)
        if (streams_desc((stream_kind)k)->role == STREAM_ROLE_HOST)
            out->comm_ps[k] = out->host_busy_ps;
    if (out->tail) {
        out->tail_stream = last->stream;
        out->tail_ps = last->duration_ps;
    }
    return rc;
}

/* Parameters must be gathered before a chunk's first forward.  With
 * overlap_param_gather the gathers are issued bucket by bucket in forward
 * order and the first forward waits for each bucket just before the layers
 * that use it (Megatron's forward pre-hook), so they overlap the forward of
 * earlier layers and chunks; without it, the gather follows the optimizer
 * step (add_tail).  param_ag[c]: the gather of chunk c's bucket n-1 (its
 * first layers); the gather of bucket k is the task param_ag[c] + (n-1-k). */
static void add_param_gathers(builder *b, int64_t r, bool ag_first)
{
    const wl_stage *ws = &b->st->wl->stages[r];
    for (int64_t c = 0; c < b->st->v; c++) {
        const wl_chunk *ch = &ws->chunks[c];
        b->param_ag[c] = NO_TASK;
        for (int32_t k = ag_first ? ch->n_buckets - 1 : -1; k >= 0; k--) {
            eng_task t = add(b, r, STREAM_DP, duration_ps(b, ch->buckets[k].gather_s, "a DP parameter all-gather", r),
                             "dp_ag", -1, (int32_t)c);
            if (k == ch->n_buckets - 1)
                b->param_ag[c] = t;
        }
        b->first_f_done[c] = false;
        b->last_grad[c] = -1;
    }
    const sched_kind grad = sched_plan_grad_kind(&b->st->plan);
    for (int64_t i = 0; i < b->n_seq; i++)
        if (b->seq[i].kind == grad)
            b->last_grad[b->seq[i].chunk] = i;
}

/* The forward's side: its activations and in-flight count from its start
 * and, for a chunk's first forward with overlap_param_gather, the waits for
 * the parameter gathers. */
static void link_forward(builder *b, int64_t r, const sched_pass *it, const wl_chunk *ch, const pass_ref *ref,
                         bool ag_first)
{
    step_t *st = b->st;
    count(b, ref->span, (int)(r * CTR_PER_STAGE + CTR_ACT), ch->act_bytes, 0);
    count(b, ref->span, (int)(r * CTR_PER_STAGE + CTR_INFLIGHT), 1, 0);
    if (!ag_first || b->first_f_done[it->chunk])
        return;
    b->first_f_done[it->chunk] = true;
    bool whole = st->collapsed[pass_index(st, r, it->kind, it->microbatch, it->chunk)];
    for (int32_t k = ch->n_buckets - 1; k >= 0 && b->param_ag[it->chunk] != NO_TASK; k--) {
        eng_task ag = b->param_ag[it->chunk] + (ch->n_buckets - 1 - k);
        /* A whole-pass task (one bucket) waits at its start. */
        dep(b, ag, whole || ref->first == NO_TASK ? ref->first : op_task(b, ref, ch->buckets[k].fwd_op));
    }
}

/* A backward pass's side (B or W): B holds its transients while it runs;
 * the pass of the plan's free kind frees the forward's activations and
 * ends the microbatch's flight; it follows the pass of its kind's `after`
 * on the same (microbatch, chunk). */
static void link_backward(builder *b, int64_t r, const sched_pass *it, const wl_chunk *ch, const pass_ref *ref)
{
    step_t *st = b->st;
    const bool frees = it->kind == sched_plan_free_kind(&st->plan);
    const int64_t transient = it->kind == SCHED_B ? ch->bwd_transient_bytes : 0;
    if (ref->map) {
        /* In an overlapped template placed as ops the forward beside it
         * starts before its first op ends: it frees at its last op. */
        count(b, ref->span, (int)(r * CTR_PER_STAGE + CTR_ACT), transient, 0);
        count(b, ref->last, (int)(r * CTR_PER_STAGE + CTR_ACT), 0, -(frees ? ch->act_bytes : 0) - transient);
    } else {
        count(b, ref->span, (int)(r * CTR_PER_STAGE + CTR_ACT), transient, -(frees ? ch->act_bytes : 0) - transient);
    }
    if (frees)
        count(b, ref->last, (int)(r * CTR_PER_STAGE + CTR_INFLIGHT), 0, -1);
    const pass_ref *f = &st->passes[pass_index(st, r, b->kd[it->kind]->after, it->microbatch, it->chunk)];
    if (!same_stream(b, f->last, ref->first))
        dep(b, f->last, ref->first);
}

/* With overlap_grad_reduce a bucket's reduction starts as soon as the last
 * microbatch's backward has passed its layers.  Returns the last reduction
 * added (NO_TASK if none). */
static eng_task add_bucket_reductions(builder *b, int64_t r, const sched_pass *it, const wl_chunk *ch,
                                      const pass_ref *ref)
{
    step_t *st = b->st;
    const bool distopt = b->s->zero >= DP_SHARD_OPTIM; /* reduce-scatter into shards */
    bool whole = st->collapsed[pass_index(st, r, it->kind, it->microbatch, it->chunk)];
    eng_task last_rs = NO_TASK;
    for (int32_t k = 0; k < ch->n_buckets; k++) {
        const wl_bucket *bk = &ch->buckets[k];
        last_rs = add(b, r, STREAM_DP, duration_ps(b, bk->reduce_s, "a DP gradient reduction", r),
                      distopt ? "dp_rs" : "dp_ar", -1, it->chunk);
        dep(b,
            b->chained                          ? b->bucket_task[k]
            : whole || ref->first == NO_TASK ? ref->last
                                               : op_task(b, ref, bk->ready_op),
            last_rs);
    }
    return last_rs;
}

/* The GPU span of a pass standing on the compute stream, dep after `lead`:
 * one task, or with a tail the compute task of the rest and the tail op
 * behind it.  Returns the first; *last is the task its pass ends with. */
static eng_task add_span(builder *b, int64_t r, const pass_summary *sum, sim_time_ps span, const sched_pass *it,
                         eng_task lead, eng_task *last)
{
    const bool tail = !sum->collapsible;
    eng_task t = add_whole(b, r, tail ? span - sum->tail_ps : span, it->kind, it->microbatch, it->chunk);
    dep(b, lead, t);
    *last = t;
    if (tail) {
        const wl_pass *p = wl_chunk_pass(&b->st->wl->stages[r].chunks[it->chunk], (sched_kind)it->kind);
        *last = add(b, r, (stream_kind)sum->tail_stream, sum->tail_ps, p->ops[p->n_ops - 1].name, it->microbatch,
                    it->chunk);
        dep(b, t, *last);
    }
    return t;
}

/* The last backward of a chunk that releases its gradient buckets from
 * inside it can stand on the compute stream as a chain of tasks of its
 * span instead of its ops: it runs as alone from its GPU start
 * (pass_summary.shifts), so bucket k is final e_k after that (the end of
 * op ready_op_k on its stand-in's GPU timeline), and the chain is cut
 * there for its reduction to follow.  chain_cuts() puts the cuts, sorted,
 * in b->w->tmp (offset, bucket); false for a figure out of range or a
 * release at its very start (its counters would change at one instant):
 * then it keeps its ops. */
static bool chain_cuts(builder *b, const pass_summary *sum, sim_time_ps span, const wl_pass *p, const wl_chunk *ch)
{
    tmpl_scratch *w = b->w;
    const int32_t nb = ch->n_buckets;
    if (nb < 1 || nb > p->n_ops || !sum->shifts_ahead)
        return false;
    const sim_time_ps o = step_gpu_origin(p, sum);
    int rc = step_sweep(p, o, 0, w, b->err);
    if (rc != SIM_OK) {
        fail(b, rc);
        return false;
    }
    interval *cut = w->tmp;
    for (int32_t k = 0; k < nb; k++) {
        const int32_t op = ch->buckets[k].ready_op;
        if (op < 0 || op >= p->n_ops || w->end[op] < o || w->end[op] - o > span)
            return false;
        cut[k] = (interval){w->end[op] - o, (sim_time_ps)k};
    }
    qsort(cut, (size_t)nb, sizeof *cut, interval_cmp);
    return cut[0].a > 0;
}

/* The chain of chain_cuts(), after `lead`: a task up to each distinct cut
 * and one to the end; bucket k's reduction follows b->bucket_task[k].
 * Returns the first task, *last the last. */
static eng_task add_chain(builder *b, int64_t r, sim_time_ps span, const sched_pass *it, int32_t nb, eng_task lead,
                          eng_task *last)
{
    const interval *cut = b->w->tmp;
    sim_time_ps prev = 0;
    eng_task t = NO_TASK, first = NO_TASK;
    for (int32_t j = 0; j <= nb && b->rc == SIM_OK; j++) {
        const sim_time_ps at = j < nb ? cut[j].a : span;
        if (j == nb || at > prev) {
            eng_task n = add_whole(b, r, at - prev, it->kind, it->microbatch, it->chunk);
            dep(b, t == NO_TASK ? lead : t, n);
            first = first == NO_TASK ? n : first;
            t = n;
            prev = at;
        }
        if (j < nb)
            b->bucket_task[cut[j].b] = t;
    }
    b->chained = true;
    *last = t;
    return first;
}

/* The stand-in of a pass with host issue ops (pass_summary): the host's
 * lead, the GPU span after it (a chain of `chain` cuts if not 0), the rest of the host's issue time; with a
 * sync also a zero-length start on the compute stream (the pass's first
 * task: it begins when the GPU is free) and the host's wait for the GPU
 * carried from there on STREAM_HOST_WAIT.  The wait task ends before the
 * next pass's begins (summarize_host checks wait <= gpu), so that stream
 * never delays anything. */
static void add_host_pass(builder *b, int64_t r, const pass_summary *sum, const sched_pass *it, int32_t chain,
                          bool measured, pass_ref *ref)
{
    eng_task end;
    eng_task start = NO_TASK, wait = NO_TASK;
    if (sum->sync || measured) /* measured: when its GPU is free */
        start = add_whole(b, r, 0, it->kind, it->microbatch, it->chunk);
    if (sum->sync) {
        wait = add(b, r, STREAM_HOST_WAIT, sum->wait_ps, "host_wait", it->microbatch, it->chunk);
        dep(b, start, wait);
    }
    /* The previous stand-in's host rest and this lead are back to back
     * on the host stream: one task (it waits for what the rest waited
     * for; the lead waits for nothing). */
    sim_time_ps before = 0;
    eng_task before_wait = NO_TASK;
    if (b->rest_pending && b->rest_stage == r) {
        before = b->rest_ps;
        before_wait = b->rest_wait;
        b->rest_pending = false;
    }
    /* Folded where the stage folds and nothing measures it from its
     * lead: its GPU span released where the lead ends. */
    const bool folds = !chain && !measured && !sum->sync && before_wait == NO_TASK && fold_host(b, before + sum->lead_ps);
    eng_task lead = NO_TASK;
    if (!folds) {
        lead = add(b, r, STREAM_HOST, before + sum->lead_ps, step_host_lead, it->microbatch, it->chunk);
        dep(b, before_wait, lead);
    }
    eng_task gpu = chain ? add_chain(b, r, sum->gpu_ps, it, chain, lead, &end)
                         : add_span(b, r, sum, sum->gpu_ps, it, lead, &end);
    if (folds)
        release_at(b, gpu, b->host_clock);
    b->rest_pending = true;
    b->rest_stage = r;
    b->rest_ps = sum->host_ps - sum->lead_ps;
    b->rest_wait = wait;
    b->rest_mb = it->microbatch;
    b->rest_chunk = it->chunk;
    ref->base = ref->first = start != NO_TASK ? start : gpu;
    ref->span = gpu;
    ref->last = end;
    ref->lead = lead;
}

/* The stand-in of a pair with inputs from other stages: three tasks on
 * the compute stream that add up to its span, the second gated by the
 * input of the pass with the larger coefficient, the third by the other's,
 * so that the pair ends at max(start + span, in_f + coef[0], in_b +
 * coef[1]) as its ops would (pair_entry). */
static void add_gated_pair(builder *b, int64_t r, const pair_entry *pe, sim_time_ps span, const sched_pass *it,
                           eng_task lead, pass_ref *refs[2])
{
    const int hi = pe->coef[0] >= pe->coef[1] ? 0 : 1, lo = 1 - hi;
    sim_time_ps c_hi = pe->coef[hi] < span ? pe->coef[hi] : span, c_lo = pe->coef[lo] < c_hi ? pe->coef[lo] : c_hi;
    eng_task t1 = add_whole(b, r, span - c_hi, it->kind, it->microbatch, it->chunk);
    eng_task t2 = add_whole(b, r, c_hi - c_lo, it->kind, it->microbatch, it->chunk);
    eng_task t3 = add_whole(b, r, c_lo, it->kind, it->microbatch, it->chunk);
    dep(b, lead, t1);
    refs[hi]->first = t2;
    refs[lo]->first = t3;
    /* The pair's work starts with its first task, or with the gated one
     * when the first is empty (its first op waits for that input): a wait
     * for it is no busy time, as with its ops. */
    for (int k = 0; k < 2; k++) {
        refs[k]->base = t1;
        refs[k]->span = span > c_hi ? t1 : t2;
        refs[k]->last = t3;
        refs[k]->map = NULL;
    }
}

/* The host's lead of the first host pass of a stage whose host is ahead
 * (the passes after it stand as their GPU spans): a task, or folded (its
 * end then in *rel, the release of the pass's span); NO_TASK for a pass
 * without host ops or once *placed. */
static eng_task first_lead(builder *b, int64_t r, const pass_summary *sum, const sched_pass *it, bool *placed,
                           sim_time_ps *rel)
{
    if (!sum->host || *placed)
        return NO_TASK;
    *placed = true;
    if (fold_host(b, sum->lead_ps)) {
        *rel = b->host_clock;
        return NO_TASK;
    }
    return add(b, r, STREAM_HOST, sum->lead_ps, step_host_lead, it->microbatch, it->chunk);
}

/* x += d; false if it would pass 2^64 ps. */
static bool accumulate(sim_time_ps *x, sim_time_ps d)
{
    return !__builtin_add_overflow(*x, d, x);
}

static bool stands(const builder *b, int64_t i, const pass_summary *sum)
{
    return step_stands(b->seq, b->seq_pair, b->n_seq, i, sum);
}

/* The bounds of step_host_ahead as it goes along a stage's order:
 * host_*: when the host ends (from 0 / from the last sync pass's GPU
 * start); gpu_*: when the GPU is free at the earliest. */
typedef struct ahead_bounds {
    sim_time_ps host_abs, host_rel, gpu_abs, gpu_rel, rest;
    bool synced, any;
} ahead_bounds;

/* The bounds past the pass (or pair) at seq[i]; false where the host may
 * fall behind there.  *i moves past a pair's second pass. */
static bool ahead_pass(ahead_bounds *a, const step_t *st, int64_t r, const sched_pass *seq, const int32_t *pair,
                       int64_t n, int64_t *i)
{
    const sched_pass *it = &seq[*i];
    /* An overlapped pair stands as its template. */
    const pass_summary *sum =
        pair && pair[*i] >= 0 ? &st->pairs[pair[*i]].sum : summary_of(st, r, it->chunk, it->kind);
    sim_time_ps gpu = sum->host ? sum->gpu_ps : sum->span_ps;
    if (!step_stands(seq, pair, n, *i, sum) || gpu == 0)
        return false;
    if (sum->host && !a->any) {
        /* The first host pass keeps its lead (on an idle host) before
         * its GPU span: the GPU starts it no earlier than the lead. */
        a->any = true;
        a->host_abs = a->host_rel = sum->lead_ps;
        a->gpu_abs = a->gpu_abs > sum->lead_ps ? a->gpu_abs : sum->lead_ps;
        a->gpu_rel = 0;
        if (sum->sync) {
            a->synced = true;
            a->host_rel = sum->wait_ps;
            a->host_abs = 0;
        }
        a->rest = sum->host_ps - sum->lead_ps;
    } else if (sum->host) {
        if (!accumulate(&a->host_abs, a->rest) || !accumulate(&a->host_abs, sum->lead_ps) ||
            !accumulate(&a->host_rel, a->rest) || !accumulate(&a->host_rel, sum->lead_ps))
            return false;
        if (a->host_abs > a->gpu_abs || (a->synced && a->host_rel > a->gpu_rel))
            return false;
        if (sum->sync) { /* the host resumes at the GPU start + wait */
            a->synced = true;
            a->host_rel = sum->wait_ps;
            a->host_abs = 0;
            a->gpu_rel = 0;
        }
        a->rest = sum->host_ps - sum->lead_ps;
    }
    if (!accumulate(&a->gpu_abs, gpu) || !accumulate(&a->gpu_rel, gpu))
        return false;
    *i += pair && pair[*i] >= 0;
    return true;
}

/* ahead_pass over seq[from .. to). */
static bool ahead_run(ahead_bounds *a, const step_t *st, int64_t r, const sched_pass *seq, const int32_t *pair,
                      int64_t n, int64_t from, int64_t to)
{
    for (int64_t i = from; i < to; i++)
        if (!ahead_pass(a, st, r, seq, pair, n, &i))
            return false;
    return true;
}

/* y = x + k d field by field (d = x2 - x1, which never shrinks: each
 * bound only grows within a block, or restarts from the same value in
 * every block); false past 2^64 ps. */
static bool ahead_forward(const ahead_bounds *x1, const ahead_bounds *x2, uint64_t k, ahead_bounds *y)
{
    const sim_time_ps *p1[] = {&x1->host_abs, &x1->host_rel, &x1->gpu_abs, &x1->gpu_rel, &x1->rest};
    const sim_time_ps *p2[] = {&x2->host_abs, &x2->host_rel, &x2->gpu_abs, &x2->gpu_rel, &x2->rest};
    sim_time_ps *q[] = {&y->host_abs, &y->host_rel, &y->gpu_abs, &y->gpu_rel, &y->rest};
    if (x1->synced != x2->synced || x1->any != x2->any)
        return false;
    *y = *x2;
    for (size_t f = 0; f < sizeof q / sizeof *q; f++) {
        sim_time_ps kd;
        if (*p2[f] < *p1[f] || __builtin_mul_overflow(*p2[f] - *p1[f], k, &kd) ||
            __builtin_add_overflow(*p2[f], kd, q[f]))
            return false;
    }
    return true;
}

/* The host's bounds past a stage's last pass: is it ahead to the end? */
static bool ahead_end(ahead_bounds a)
{
    return a.any && accumulate(&a.host_abs, a.rest) && accumulate(&a.host_rel, a.rest) && a.host_abs <= a.gpu_abs &&
           (!a.synced || a.host_rel <= a.gpu_rel);
}

/* ahead[k] = step_host_ahead_longer with blocks[k] (0: seq itself), for
 * k < nb.  The passes before seq[at] and the first two copies are the
 * same in each order, and are walked once for all. */
static void ahead_orders(const step_t *st, const run_inputs *in, const sched_pass *seq, const int32_t *pair, int64_t n,
                         int64_t r, bool ag_first, int64_t at, int64_t L, const int64_t *blocks, int nb, bool *ahead)
{
    const wl_stage *ws = &st->wl->stages[r];
    for (int k = 0; k < nb; k++)
        ahead[k] = false;
    if (in->sim.keep_ops)
        return;
    /* A backward releasing buckets stands as a chain, but keeps its ops
     * in an overlapped pair; a forward waiting for gathers keeps them. */
    for (int64_t c = 0; c < st->v; c++)
        if (ws->chunks[c].n_buckets > 1 && (ag_first || (in->ddp.overlap_grad_reduce && st->plan.combined)))
            return;
    int64_t most = 0;
    for (int k = 0; k < nb; k++)
        most = blocks[k] > most ? blocks[k] : most;
    ahead_bounds c[3] = {{0}}; /* before seq[at], with 0, 1 and 2 copies */
    bool ok[3];
    ok[0] = ahead_run(&c[0], st, r, seq, pair, n, 0, at);
    for (int j = 1; j < 3; j++) {
        c[j] = c[j - 1];
        ok[j] = ok[j - 1] && j <= most && ahead_run(&c[j], st, r, seq, pair, n, at - L, at);
    }
    for (int k = 0; k < nb; k++) {
        const int64_t m = blocks[k];
        ahead_bounds a;
        if (m < 3) {
            if (!ok[m])
                continue;
            a = c[m];
        } else {
            /* copy m - 1 carried forward from the first two (affine in
             * the copy), then the last walked */
            if (!ok[2])
                continue;
            a = c[2];
            if (m > 3 && !ahead_forward(&c[1], &c[2], (uint64_t)(m - 3), &a))
                continue;
            if (!ahead_run(&a, st, r, seq, pair, n, at - L, at))
                continue;
        }
        ahead[k] = ahead_run(&a, st, r, seq, pair, n, at, n) && ahead_end(a);
    }
}

/* Is the host provably ahead of stage r's GPU at every pass, so that its
 * stand-in tasks cannot move any other task?  Then each pass stands as its
 * GPU span alone (one task, as without host ops) and the timeline is the
 * same.  With every pass a stand-in, the host's lead of pass k ends at
 * the sum of its host time so far (its rests and leads; the host waits
 * for nothing) or, after a pass with a sync, at that pass's GPU start +
 * its wait + the host time since; the GPU starts pass k no earlier than
 * the sum of the stage's compute tasks before it, nor than the sync pass's
 * GPU start + the compute tasks since.  When the lead bound stays within
 * the GPU bound at every pass, no pass waits for its lead (and so every
 * sync pass's GPU start is the one the bound assumed); when the host's
 * end bound stays within the last pass's end, the optimizer's host sync
 * waits for the GPU as before.  Stages with passes that keep their ops
 * (DP buckets from inside, several parameter gathers, a trace) or with a
 * zero-length pass (its counters could then change at the same instant
 * in another order) keep the stand-ins.
 *
 * With blocks > 0 the order checked is seq's with that many more copies
 * of its passes [at - L, at) before seq[at], one period later each (a
 * longer step of a periodic schedule, step_period.h): the passes around
 * a copy are those around its original (seq[at] is seq[at - L] one
 * period on), so each position reads seq's.  From the third copy on
 * every bound is the one before plus what the second copy added (each
 * bound grows by sums, or restarts from the same value in each copy), so
 * each check is affine in the copy and holds on copies 3 .. blocks - 1
 * where it holds on the second and the last: those are taken, the
 * others skipped. */
bool step_host_ahead_longer(const step_t *st, const run_inputs *in, const sched_pass *seq, const int32_t *pair,
                            int64_t n, int64_t r, bool ag_first, int64_t at, int64_t L, int64_t blocks)
{
    bool ahead;
    ahead_orders(st, in, seq, pair, n, r, ag_first, blocks > 0 ? at : n, L, &blocks, 1, &ahead);
    return ahead;
}

bool step_host_ahead(const step_t *st, const run_inputs *in, const sched_pass *seq, const int32_t *pair, int64_t n,
                     int64_t r, bool ag_first)
{
    return step_host_ahead_longer(st, in, seq, pair, n, r, ag_first, 0, 0, 0);
}

int64_t step_order_copy_at(const sched_pass *seq, const int32_t *pair, int64_t n, int64_t P, int64_t L)
{
    int64_t run = 0, at = -1;
    for (int64_t i = 0; i + L < n && at < 0; i++) {
        const sched_pass *x = &seq[i], *y = &seq[i + L];
        run = x->kind == y->kind && x->chunk == y->chunk && (int64_t)y->microbatch == (int64_t)x->microbatch + P
                  ? run + 1
                  : 0;
        if (run == L)
            at = i + 1;
    }
    /* A copy holds whole pairs: none runs across its start. */
    if (at < 0 || (pair && (pair[at - 1] >= 0 || (at > L && pair[at - L - 1] >= 0))))
        return -1;
    return at;
}

/* Is stage r's host ahead in the sample's order (step_host_ahead)?  A
 * stage whose host is ahead (or not) stands for longer steps only where
 * their host is too (or is not): they lay out their passes by their own
 * orders, which are the sample's with blocks inserted in its steady run
 * (step_order_copy_at).  *varies where it differs, or where the sample
 * has no such run; all three orders in one walk (ahead_orders). */
static bool host_ahead(const builder *b, int64_t r, bool ag_first, bool *varies)
{
    const step_t *st = b->st;
    if (st->longer_by[0] <= 0 && st->longer_by[1] <= 0)
        return step_host_ahead(st, b->in, b->seq, b->seq_pair, b->n_seq, r, ag_first);
    const int64_t P = sched_plan_period(&st->plan), L = P * st->n_kinds * st->v;
    const int64_t at = step_order_copy_at(b->seq, b->seq_pair, b->n_seq, P, L);
    if (at < 0) {
        *varies = true;
        return step_host_ahead(st, b->in, b->seq, b->seq_pair, b->n_seq, r, ag_first);
    }
    const int64_t blocks[3] = {0, st->longer_by[0], st->longer_by[1]};
    bool ahead[3];
    ahead_orders(st, b->in, b->seq, b->seq_pair, b->n_seq, r, ag_first, at, L, blocks, 3, ahead);
    for (int k = 1; k < 3; k++)
        if (blocks[k] > 0 && ahead[k] != ahead[0])
            *varies = true;
    return ahead[0];
}

/* The stage's passes in schedule order: each as one task of its span or as
 * its ops, its counters, its pipeline send, and the waits for its send
 * where p2p blocks.  Returns the last DP reduction added (NO_TASK if
 * none). */
static eng_task add_scheduled_passes(builder *b, int64_t r, bool ag_first)
{
    step_t *st = b->st;
    const run_inputs *in = b->in;
    const int64_t pp = st->pp, v = st->v;
    const wl_stage *ws = &st->wl->stages[r];
    /* Megatron's p2p is synchronous (the rank waits for its send before
     * the next pass) in the non-interleaved schedule and in the
     * interleaved one without overlap_p2p_comm; with it, sends are
     * asynchronous and only the receiver waits.  The V schedules send
     * asynchronously (DualPipe's p2p is batched and waited on by the
     * receiver). */
    const bool blocking_p2p = st->plan.place == SCHED_PLACE_LOOP && (v == 1 || !b->s->par.overlap_p2p_comm);
    eng_task last_rs = NO_TASK, pending_send = NO_TASK;
    eng_task pending_from = NO_TASK; /* the same where sends are lags: the task it follows */
    /* full_iteration: the host replays one graph of the whole forward and
     * backward; the first pass waits for that launch. */
    const host_params *h = &in->cluster.host;
    eng_task graph = NO_TASK;
    if (in->graphs.impl == GRAPH_FULL_ITERATION && !in->sim.ideal_pipeline && h->graph_launch_s > 0)
        graph = add(b, r, STREAM_HOST, duration_ps(b, h->graph_launch_s, "the CUDA graph launch", r), "graph_launch",
                    -1, -1);
    /* The host never late: passes stand as their GPU spans, the first
     * host pass behind its lead. */
    const bool no_host = graph == NO_TASK && host_ahead(b, r, ag_first, &st->host_varies);
    bool lead_placed = false;
    b->send_made = false;
    for (int64_t c = 0; c < v; c++)
        for (int k = 0; k < SCHED_KINDS; k++)
            b->sends[c * SCHED_KINDS + k] = step_sends(st, r, c, k);
    const sched_kind grad = sched_plan_grad_kind(&st->plan);
    for (int64_t i = 0; i < b->n_seq && b->rc == SIM_OK; i++) {
        /* One item: a pass, or two in an overlapped template. */
        const int32_t pe_i = b->seq_pair[i];
        pair_entry *pe = pe_i >= 0 ? &st->pairs[pe_i] : NULL;
        const int n_unit = pe ? 2 : 1;
        pass_ref *refs[2];
        size_t pis[2];
        /* The common pass: alone, its summary collapsible without a tail
         * op, releasing no buckets from inside and waiting for no
         * parameter gathers, ops not kept.  It stands as the task of its
         * span (behind the stage's first lead when that is still to
         * come), or as its host stand-in: what the general case below
         * places for it, without the case analysis. */
        const sched_pass *itp = &b->seq[i];
        const pass_summary *sump = pe ? NULL : summary_of(st, r, itp->chunk, itp->kind);
        const int32_t nbp = ws->chunks[itp->chunk].n_buckets;
        if (!pe && !in->sim.keep_ops && sump->collapsible && !sump->tail &&
            !(nbp > 1 && itp->kind == grad && in->ddp.overlap_grad_reduce && i == b->last_grad[itp->chunk]) &&
            !(nbp > 1 && itp->kind == SCHED_F && ag_first && !b->first_f_done[itp->chunk])) {
            b->chained = false;
            pis[0] = pass_index(st, r, itp->kind, itp->microbatch, itp->chunk);
            refs[0] = &st->passes[pis[0]];
            st->order[r * st->rank_passes + i] = (int32_t)pis[0];
            st->paired[pis[0]] = false;
            if (!sump->host || no_host) {
                sim_time_ps rel = 0;
                const eng_task lead = first_lead(b, r, sump, itp, &lead_placed, &rel);
                const eng_task t = add_whole(b, r, sump->host ? sump->gpu_ps : sump->span_ps, itp->kind,
                                             itp->microbatch, itp->chunk);
                dep(b, lead, t);
                release_at(b, t, rel);
                *refs[0] = (pass_ref){t, t, t, t, NO_TASK, NO_TASK, NULL};
            } else {
                add_host_pass(b, r, sump, itp, 0, false, refs[0]);
                refs[0]->map = NULL;
            }
            st->collapsed[pis[0]] = true;
        } else {
            bool keep = in->sim.keep_ops, inside = false;
            for (int u = 0; u < n_unit; u++) {
                const sched_pass *it = &b->seq[i + u];
                const wl_chunk *ch = &ws->chunks[it->chunk];
                /* The last pass of a chunk that finishes weight gradients
                 * releases gradient buckets from inside it when reduction
                 * overlaps: a chain (add_chain) where it can stand, else its
                 * ops.  The first forward of a chunk that waits for the
                 * parameter gathers of several buckets keeps its ops. */
                bool rel = it->kind == grad && in->ddp.overlap_grad_reduce && i + u == b->last_grad[it->chunk] &&
                           ch->n_buckets > 1;
                inside = inside || rel;
                keep = keep || (rel && n_unit > 1) ||
                       (it->kind == SCHED_F && ag_first && !b->first_f_done[it->chunk] && ch->n_buckets > 1);
            }
            b->chained = false;
            const sched_pass *it0 = &b->seq[i];
            const pass_summary *sum = pe ? &pe->sum : summary_of(st, r, it0->chunk, it0->kind);
            for (int u = 0; u < n_unit; u++) {
                const sched_pass *it = &b->seq[i + u];
                pis[u] = pass_index(st, r, it->kind, it->microbatch, it->chunk);
                refs[u] = &st->passes[pis[u]];
                st->order[r * st->rank_passes + i + u] = (int32_t)pis[u];
                st->paired[pis[u]] = pe != NULL;
            }
            /* A pair whose passes receive from other stages stands as its
             * gated stand-in (host ahead only); with a host stand-in it keeps
             * its ops. */
            const bool gated = pe && pp > 1;
            if (gated && (!pe->gated || (sum->host && !no_host)))
                keep = true;
            /* A stand-in measured from its ops (a chain, a tail) must run as
             * alone from its GPU start. */
            const wl_chunk *ch0 = &ws->chunks[it0->chunk];
            const sim_time_ps gpu_span = sum->host && sum->collapsible ? sum->gpu_ps : sum->span_ps;
            const bool ahead = !sum->host || no_host;
            if (inside && !keep &&
                !(ahead && sum->collapsible && chain_cuts(b, sum, gpu_span, wl_chunk_pass(ch0, (sched_kind)it0->kind), ch0)))
                keep = true;
            /* A tail pass gated by parameter gathers (a chunk's first
             * forward) does not run as alone from its start: its ops. */
            if (!pe && sum->tail &&
                ((ahead && !sum->shifts_ahead) || (it0->kind == SCHED_F && ag_first && !b->first_f_done[it0->chunk])))
                keep = true;
            /* Nor does one behind the stage's first lead (its GPU starts from
             * the host's): its ops, which then carry the lead. */
            if (!keep && !pe && no_host && sum->host && !lead_placed && (inside || sum->tail)) {
                keep = true;
                lead_placed = true;
            }
            const int32_t chain = inside && !keep ? ch0->n_buckets : 0;
            const bool whole = !keep && stands(b, i, sum);
            if (whole && (!sum->host || no_host)) {
                sim_time_ps rel = 0;
                const eng_task lead = first_lead(b, r, sum, it0, &lead_placed, &rel);
                const sim_time_ps span = sum->host ? sum->gpu_ps : sum->span_ps;
                if (gated) {
                    add_gated_pair(b, r, pe, span, it0, lead, refs);
                    release_at(b, refs[0]->base, rel);
                } else {
                    eng_task end, t = chain ? add_chain(b, r, span, it0, chain, lead, &end)
                                            : add_span(b, r, sum, span, it0, lead, &end);
                    *refs[0] = (pass_ref){t, t, t, end, NO_TASK, NO_TASK, NULL};
                    release_at(b, t, rel);
                }
            } else if (whole) {
                add_host_pass(b, r, sum, it0, chain, !pe && !sum->collapsible, refs[0]);
                refs[0]->map = NULL;
            } else if (pe) {
                pass_ref both;
                const sched_pass *it1 = &b->seq[i + 1];
                add_ops(b, r, &pe->t.pass, pe->t.side, (int32_t[2]){it0->microbatch, it1->microbatch},
                        (int32_t[2]){it0->chunk, it1->chunk}, &both);
                pair_refs(pe, wl_chunk_pass(&ws->chunks[it0->chunk], SCHED_F),
                          wl_chunk_pass(&ws->chunks[b->seq[i + 1].chunk], (sched_kind)b->seq[i + 1].kind), both.base,
                          refs[0], refs[1]);
            } else {
                add_pass(b, r, wl_chunk_pass(&ws->chunks[it0->chunk], (sched_kind)it0->kind), it0->microbatch,
                         it0->chunk, refs[0]);
            }
            if (pe && whole && !gated)
                *refs[1] = *refs[0];
            if (whole && !pe && (chain || !sum->collapsible) && b->rc == SIM_OK) {
                st->shifted[pis[0]] = ahead ? SHIFT_AHEAD : SHIFT_HOST;
                for (eng_task t = refs[0]->span; t <= refs[0]->last; t++)
                    st->info[t + b->tag_shift].replaced = true;
            }
            if (pe && whole)
                pe->standing++;
            for (int u = 0; u < n_unit; u++)
                st->collapsed[pis[u]] = whole;
        }
        if (i == 0)
            dep(b, graph, refs[0]->first);
        for (int u = 0; u < n_unit && blocking_p2p; u++) {
            dep(b, pending_send, refs[u]->first);
            dep_lag(b, pending_from, refs[u]->first, st->send_ps[r]);
        }
        pending_send = pending_from = NO_TASK;
        for (int u = 0; u < n_unit; u++) {
            const sched_pass *it = &b->seq[i + u];
            const sched_kind_desc *kd = b->kd[it->kind];
            const wl_chunk *ch = &ws->chunks[it->chunk];
            pass_ref *ref = refs[u];
            if (it->kind == SCHED_F)
                link_forward(b, r, it, ch, ref, ag_first);
            else
                link_backward(b, r, it, ch, ref);
            /* Pipeline send of the output (forward) or input gradient
             * (backward) to the neighbouring virtual stage. */
            ref->send = NO_TASK;
            if (b->sends[it->chunk * SCHED_KINDS + it->kind]) {
                if (!b->send_made) {
                    st->send_ps[r] = duration_ps(b, ws->p2p_s, "the pipeline send", r);
                    b->send_made = true;
                }
                const sim_time_ps send_ps = st->send_ps[r];
                if (st->lag_sends) {
                    /* Its time counts in the work as a task's would. */
                    if (work_fits(b, send_ps))
                        b->work_ps += send_ps;
                    ref->send = SEND_LAGGED;
                    pending_from = ref->last;
                } else {
                    ref->send = add(b, r, STREAM_PP, send_ps, kd->send, it->microbatch, it->chunk);
                    dep(b, ref->last, ref->send);
                    pending_send = ref->send; /* the PP stream is in order: the later send ends last */
                }
            }
            if (it->kind == grad && in->ddp.overlap_grad_reduce && i + u == b->last_grad[it->chunk])
                last_rs = add_bucket_reductions(b, r, it, ch, ref);
        }
        i += n_unit - 1;
    }
    return last_rs;
}

/* After the stage's last pass: the DP reductions that wait for the end of
 * the pipeline (without overlap_grad_reduce), the tied-embedding
 * all-reduce, the optimizer step after the last reduction, and the
 * parameter all-gathers that follow it (distributed optimizer without
 * overlap_param_gather). */
static void add_tail(builder *b, int64_t r, eng_task last_rs, bool ag_first)
{
    step_t *st = b->st;
    const run_inputs *in = b->in;
    const bool distopt = b->s->zero >= DP_SHARD_OPTIM;
    const wl_stage *ws = &st->wl->stages[r];
    const sched_pass *end = &b->seq[b->n_seq - 1];
    const pass_ref *last = &st->passes[pass_index(st, r, end->kind, end->microbatch, end->chunk)];
    if (!in->ddp.overlap_grad_reduce)
        for (int64_t c = 0; c < st->v; c++)
            for (int32_t k = 0; k < ws->chunks[c].n_buckets; k++) {
                last_rs = add(b, r, STREAM_DP,
                              duration_ps(b, ws->chunks[c].buckets[k].reduce_s, "a DP gradient reduction", r),
                              distopt ? "dp_rs" : "dp_ar", -1, (int32_t)c);
                dep(b, last->last, last_rs);
            }
    if (ws->embedding_grad_s > 0) {
        last_rs = add(b, r, STREAM_DP, duration_ps(b, ws->embedding_grad_s, "the tied-embedding all-reduce", r),
                      "embedding_ar", -1, -1);
        dep(b, last->last, last_rs);
    }
    /* The host's part of the optimizer step: it reads the gradient norm
     * and the found-inf flag back (a sync after the last pass and
     * reduction), then issues the step's kernels while they run. */
    const host_params *h = &in->cluster.host;
    eng_task sync = NO_TASK;
    if (!in->sim.ideal_pipeline && (h->sync_s > 0 || h->optimizer_s > 0)) {
        sync = add(b, r, STREAM_HOST, duration_ps(b, h->sync_s, "the optimizer's host sync", r), "d2h_sync", -1, -1);
        dep(b, last->last, sync);
        dep(b, last_rs, sync);
    }
    eng_task opt = add(b, r, STREAM_COMPUTE, duration_ps(b, ws->optimizer_s, "the optimizer step", r), "optimizer",
                       -1, -1);
    dep(b, last->last, opt);
    dep(b, last_rs, opt); /* the DP stream is in order: the last reduction ends last */
    dep(b, sync, opt);
    if (sync != NO_TASK)
        add(b, r, STREAM_HOST, duration_ps(b, h->optimizer_s, "the optimizer's host issue", r), "host_issue", -1, -1);
    if (distopt && !ag_first)
        for (int64_t c = 0; c < st->v; c++) {
            eng_task ag = add(b, r, STREAM_DP,
                              duration_ps(b, step_chunk_gather_s(&ws->chunks[c]), "a chunk's DP parameter all-gather", r),
                              "dp_ag", -1, (int32_t)c);
            dep(b, opt, ag);
        }
}

/* Cross-stage edges: a pass of a kind that sends waits for the send of
 * the same kind from the virtual stage it receives from (a forward from
 * the previous one, a backward from the next), wherever the plan places
 * that stage. */
static void link_stages(builder *b)
{
    step_t *st = b->st;
    const int64_t pp = st->pp, v = st->v, M = st->M;
    for (int64_t r = 0; r < pp && b->rc == SIM_OK; r++)
        for (int64_t c = 0; c < v; c++)
            for (int k = 0; k < st->n_kinds; k++) {
                const sched_kind_desc *kd = b->kd[k];
                int64_t from = sched_vstage(&st->plan, r, c) - kd->send_dir, fr, fc;
                if (kd->send_dir == 0 || from < 0 || from >= pp * v)
                    continue;
                sched_locate(&st->plan, from, &fr, &fc);
                /* Microbatch mb of a (stage, kind, chunk) is v passes after
                 * mb - 1 (pass_index). */
                const pass_ref *src = &st->passes[pass_index(st, fr, k, 0, fc)];
                const pass_ref *dst = &st->passes[pass_index(st, r, k, 0, c)];
                for (int64_t mb = 0; mb < M; mb++, src += v, dst += v)
                    if (src->send == SEND_LAGGED)
                        dep_lag(b, src->last, dst->first, st->send_ps[fr]);
                    else
                        dep(b, src->send, dst->first);
            }
}

/* The entry of the overlapped template of item `it` (a forward and a
 * backward) on stage r, made and simulated the first time it is met.
 * Returns its index, or -1 with b->rc set. */
static int pair_gates(pair_entry *pe, const wl_pass *fp, const wl_pass *bp, sim_err *err);
static double task_hint(const step_t *st, int64_t M);

static int32_t pair_entry_of(builder *b, int64_t r, const sched_item *it)
{
    step_t *st = b->st;
    const int32_t fc = it->pass[0].chunk, bc = it->pass[1].chunk;
    for (size_t k = st->n_pairs; k-- > 0 && st->pairs[k].stage == r;)
        if (st->pairs[k].fchunk == fc && st->pairs[k].bchunk == bc)
            return (int32_t)k;
    if (st->n_pairs == st->cap_pairs) {
        size_t cap = st->cap_pairs ? 2 * st->cap_pairs : 16;
        pair_entry *p = realloc(st->pairs, cap * sizeof *p);
        if (!p) {
            fail(b, SIM_ENOMEM);
            return -1;
        }
        st->pairs = p;
        st->cap_pairs = cap;
    }
    pair_entry *pe = &st->pairs[st->n_pairs];
    memset(pe, 0, sizeof *pe);
    pe->stage = r;
    pe->fchunk = fc;
    pe->bchunk = bc;
    const wl_stage *ws = &st->wl->stages[r];
    int rc = wl_pair_build(&ws->chunks[fc].fwd, wl_chunk_pass(&ws->chunks[bc], (sched_kind)it->pass[1].kind), &pe->t,
                           b->err);
    if (rc != SIM_OK) {
        fail(b, rc);
        return -1;
    }
    st->n_pairs++; /* owned from here: step_destroy frees it */
    /* Identical templates (middle stages) share one simulation. */
    bool same = false;
    for (size_t k = 0; k + 1 < st->n_pairs && !same; k++)
        if (wl_pass_equal(&st->pairs[k].t.pass, &pe->t.pass)) {
            pe->sum = st->pairs[k].sum;
            same = true;
        }
    if (!same) {
        tmpl_scratch w;
        if (step_scratch_init(&w, (size_t)pe->t.pass.n_ops) != SIM_OK) {
            fail(b, SIM_ENOMEM);
            return -1;
        }
        rc = summarize(&pe->t.pass, &pe->sum, &w, b->err);
        step_scratch_free(&w);
    }
    if (rc == SIM_OK && st->pp > 1)
        rc = pair_gates(pe, &ws->chunks[fc].fwd, wl_chunk_pass(&ws->chunks[bc], (sched_kind)it->pass[1].kind), b->err);
    if (rc != SIM_OK) {
        fail(b, rc);
        return -1;
    }
    return (int32_t)(st->n_pairs - 1);
}

/* The GPU end of pass p swept with its GPU free from gpu_at, its host from
 * 0 and op gate starting no earlier than gate_at. */
static int gated_end(const wl_pass *p, sim_time_ps gpu_at, int32_t gate, sim_time_ps gate_at, sim_time_ps *end,
                     tmpl_scratch *w, sim_err *err)
{
    int rc = sweep_gated(p, gpu_at, 0, gate, gate_at, w, err);
    *end = gpu_at;
    for (int32_t i = 0; i < p->n_ops && rc == SIM_OK; i++)
        if (p->ops[i].stream != STREAM_HOST && w->end[i] > *end)
            *end = w->end[i];
    return rc;
}

/* The gate coefficients of a pair entry (see pair_entry), with the host
 * early when the template has host ops (the stand-in is its GPU span). */
static int pair_gates(pair_entry *pe, const wl_pass *fp, const wl_pass *bp, sim_err *err)
{
    const wl_pass *ps[2] = {fp, bp}, *t = &pe->t.pass;
    sim_time_ps total = 1;
    for (int32_t i = 0; i < t->n_ops; i++)
        total += t->ops[i].duration_ps;
    pe->gated = false;
    if (total > UINT64_MAX / 8 || fp->n_ops == 0 || bp->n_ops == 0)
        return SIM_OK; /* its ends could pass 2^64 ps, or a pass is empty: it keeps its ops */
    for (int k = 0; k < 2; k++) {
        int32_t gpu = 0;
        while (gpu < ps[k]->n_ops - 1 && ps[k]->ops[gpu].stream == STREAM_HOST)
            gpu++;
        pe->gate[k] = pe->t.map[k][gpu];
    }
    tmpl_scratch w;
    if (step_scratch_init(&w, (size_t)t->n_ops) != SIM_OK)
        return SIM_ENOMEM;
    const sim_time_ps g0 = pe->sum.host ? total : 0, late = g0 + total;
    int rc = SIM_OK;
    for (int k = 0; k < 2 && rc == SIM_OK; k++) {
        sim_time_ps end;
        rc = gated_end(t, g0, pe->gate[k], late, &end, &w, err);
        pe->coef[k] = end > late ? end - late : 0;
    }
    step_scratch_free(&w);
    pe->gated = rc == SIM_OK;
    return rc;
}

static int build(step_t *st, const run_inputs *in, const strategy_t *s, sim_err *err)
{
    const int64_t v = s->v;
    builder b = {.st = st, .in = in, .s = s, .err = err, .rc = SIM_OK};
    b.items = malloc((size_t)st->rank_passes * sizeof *b.items);
    b.seq = malloc((size_t)st->rank_passes * sizeof *b.seq);
    b.seq_pair = malloc((size_t)st->rank_passes * sizeof *b.seq_pair);
    b.param_ag = malloc((size_t)v * sizeof *b.param_ag);
    b.first_f_done = malloc((size_t)v * sizeof *b.first_f_done);
    b.last_grad = malloc((size_t)v * sizeof *b.last_grad);
    size_t longest = 1, most_buckets = 1;
    for (int64_t r = 0; r < s->pp; r++)
        for (int64_t c = 0; c < v; c++) {
            const wl_chunk *ch = &st->wl->stages[r].chunks[c];
            most_buckets = (size_t)ch->n_buckets > most_buckets ? (size_t)ch->n_buckets : most_buckets;
            for (int kind = 0; kind < SCHED_KINDS; kind++) {
                size_t n = (size_t)wl_chunk_pass(ch, (sched_kind)kind)->n_ops;
                longest = n > longest ? n : longest;
            }
        }
    tmpl_scratch w;
    int wrc = step_scratch_init(&w, longest);
    b.w = wrc == SIM_OK ? &w : NULL;
    b.bucket_task = malloc(most_buckets * sizeof *b.bucket_task);
    b.op_at = malloc(longest * sizeof *b.op_at);
    b.op_end = malloc(longest * sizeof *b.op_end);
    b.sends = malloc((size_t)v * SCHED_KINDS * sizeof *b.sends);
    for (int k = 0; k < SCHED_KINDS; k++)
        b.kd[k] = sched_kind_of((sched_kind)k);
    for (int k = 0; k < STREAM_KINDS; k++)
        b.host_role[k] = streams_desc((stream_kind)k)->role == STREAM_ROLE_HOST;
    /* Room for a stage's share of the step's tasks (grown if short). */
    b.cap_new = (size_t)(task_hint(st, st->M) / (double)s->pp) + 64;
    b.cap_new_deps = 2 * b.cap_new;
    b.cap_new_deltas = b.cap_new;
    b.new_stream = malloc(b.cap_new * sizeof *b.new_stream);
    b.new_dur = malloc(b.cap_new * sizeof *b.new_dur);
    b.new_deps = malloc(b.cap_new_deps * sizeof *b.new_deps);
    b.new_deltas = malloc(b.cap_new_deltas * sizeof *b.new_deltas);
    b.cap_new_rel = st->fold_host ? b.cap_new : 0;
    b.new_rel_task = st->fold_host ? malloc(b.cap_new_rel * sizeof *b.new_rel_task) : NULL;
    b.new_rel_at = st->fold_host ? malloc(b.cap_new_rel * sizeof *b.new_rel_at) : NULL;
    b.cap_new_lag = st->lag_sends ? b.cap_new : 0;
    b.new_lag_deps = st->lag_sends ? malloc(b.cap_new_lag * sizeof *b.new_lag_deps) : NULL;
    b.new_lags = st->lag_sends ? malloc(b.cap_new_lag * sizeof *b.new_lags) : NULL;
    b.next_id = (int64_t)eng_num_tasks(st->eng);
    b.tag_shift = (int64_t)st->n_info - b.next_id;
    b.new_tag = (int32_t)st->n_info;
    if (!b.items || !b.seq || !b.seq_pair || !b.param_ag || !b.first_f_done || !b.last_grad || !b.w ||
        !b.bucket_task || !b.op_at || !b.op_end || !b.sends || !b.new_stream || !b.new_dur || !b.new_deps || !b.new_deltas ||
        (st->lag_sends && (!b.new_lag_deps || !b.new_lags)) || (st->fold_host && (!b.new_rel_task || !b.new_rel_at)))
        fail(&b, SIM_ENOMEM);
    const bool ag_first = s->zero >= DP_SHARD_OPTIM && in->ddp.overlap_param_gather;
    sched_orders kept = {0};
    for (int64_t r = 0; r < s->pp && b.rc == SIM_OK; r++) {
        int rc = sched_plan_build_kept(&st->plan, r, &kept, b.items, &b.n_items, err);
        if (rc != SIM_OK) {
            fail(&b, rc);
            break;
        }
        /* With the EP overlap, pairs (the combined 1F1B's, DualPipeV's
         * F&B) run as overlapped templates; without it an item's passes
         * run one after the other. */
        b.n_seq = 0;
        for (int64_t i = 0; i < b.n_items && b.rc == SIM_OK; i++) {
            const sched_item *it = &b.items[i];
            bool pair = st->plan.combined && it->n_passes == 2 && it->pass[0].kind == SCHED_F &&
                        it->pass[1].kind != SCHED_F && b.n_seq + 2 <= st->rank_passes;
            int32_t pe = pair ? pair_entry_of(&b, r, it) : -1;
            for (int j = 0; j < it->n_passes && b.n_seq < st->rank_passes; j++) {
                b.seq_pair[b.n_seq] = j == 0 ? pe : -1;
                b.seq[b.n_seq++] = it->pass[j];
            }
        }
        if (b.rc != SIM_OK)
            break;
        if (b.n_seq != st->rank_passes) {
            fail(&b, sim_err_set(err, SIM_ESIM, "the schedule of stage %lld has %lld passes, expected %lld",
                                 (long long)r, (long long)b.n_seq, (long long)st->rank_passes));
            break;
        }
        b.fold = st->fold_host;
        b.host_clock = b.fold_pending = b.fold_own_pending = 0;
        add_param_gathers(&b, r, ag_first);
        eng_task last_rs = add_scheduled_passes(&b, r, ag_first);
        if (b.rc == SIM_OK)
            add_tail(&b, r, last_rs, ag_first);
        host_flush(&b, false); /* the stage's last host task: its end may be the step's */
        flush(&b);
    }
    link_stages(&b);
    flush(&b);
    st->work_ps = b.work_ps;
    free(b.items);
    free(b.seq);
    free(b.seq_pair);
    free(b.param_ag);
    free(b.first_f_done);
    free(b.last_grad);
    free(b.bucket_task);
    free(b.op_at);
    free(b.op_end);
    free(b.sends);
    free(b.new_stream);
    free(b.new_dur);
    free(b.new_deps);
    free(b.new_deltas);
    free(b.new_lag_deps);
    free(b.new_lags);
    free(b.new_rel_task);
    free(b.new_rel_at);
    sched_orders_free(&kept);
    if (b.w)
        step_scratch_free(b.w);
    if (b.rc == SIM_ENOMEM)
        return sim_err_set(err, SIM_ENOMEM, "out of memory building the step");
    return b.rc;
}

/* The engine counts activation bytes per stage in int64: the most a stage
 * could hold, every forward of the step at once, must stay below
 * LIMIT_ACT_BYTES. */
static int check_activations(const step_t *st, sim_err *err)
{
    for (int64_t r = 0; r < st->pp; r++) {
        double held = 0;
        for (int64_t c = 0; c < st->v; c++) {
            const wl_chunk *ch = &st->wl->stages[r].chunks[c];
            held += ((double)ch->act_bytes + (double)ch->bwd_transient_bytes) * (double)st->M;
        }
        if (held > LIMIT_ACT_BYTES)
            return sim_err_set(err, SIM_EINVAL,
                               "the activations of stage %lld's %lld microbatches (%.3g bytes) are beyond what "
                               "parsim counts (%.3g bytes)",
                               (long long)r, (long long)st->M, held, LIMIT_ACT_BYTES);
    }
    return SIM_OK;
}

/* The step's result from its figures. */
static int finish(step_t *st, const step_meas *ms, const run_inputs *in, const strategy_t *s, sim_err *err)
{
    step_result *res = &st->res;
    const int64_t pp = ms->n_stages;
    res->stages = calloc((size_t)pp, sizeof *res->stages);
    if (!res->stages)
        return sim_err_set(err, SIM_ENOMEM, "out of memory measuring the step");
    res->n_stages = pp;
    res->step_time_s = time_as_s(ms->makespan_ps);
    res->pipeline_s = time_as_s(ms->pipe_end_ps);
    const sim_time_ps pipe_end = ms->pipe_end_ps;
    double bubble_sum = 0;
    for (int64_t r = 0; r < pp; r++) {
        const step_stage_meas *mr = &ms->stages[r];
        stage_result *sr = &res->stages[r];
        sr->stage = r;
        sr->busy_s = time_as_s(mr->busy_ps);
        sr->bubble_s = time_as_s(pipe_end - mr->busy_ps);
        if (pipe_end > 0)
            bubble_sum += (double)(pipe_end - mr->busy_ps) / (double)pipe_end;
        for (int k = 0; k < STREAM_KINDS; k++) {
            sr->comm_s[k] = time_as_s(mr->comm_ps[k]);
            sr->exposed_s[k] = time_as_s(mr->exposed_ps[k]);
            if (sr->comm_s[k] > res->comm_s[k])
                res->comm_s[k] = sr->comm_s[k];
            if (sr->exposed_s[k] > res->exposed_s[k])
                res->exposed_s[k] = sr->exposed_s[k];
        }
        double exposed = time_as_s(mr->exposed_total_ps);
        sr->exposed_total_s = exposed;
        if (exposed > res->exposed_total_s)
            res->exposed_total_s = exposed;

        /* Memory. */
        stage_static_mem sm;
        memory_static(in, s, r, &sm);
        sr->weights_bytes = sm.weights_bytes;
        sr->gradients_bytes = sm.gradients_bytes;
        sr->optimizer_bytes = sm.optimizer_bytes;
        sr->activations_peak_bytes = (double)mr->act_peak;
        sr->inflight_microbatches_max = mr->inflight_peak;
        sr->peak_bytes = sm.weights_bytes + sm.gradients_bytes + sm.optimizer_bytes + sr->activations_peak_bytes +
                         memory_graph_pool_bytes(in, s);
        if (sr->peak_bytes > res->peak_bytes)
            res->peak_bytes = sr->peak_bytes;
    }
    res->bubble_fraction = bubble_sum / (double)pp;

    const model_spec *m = &in->model;
    double world = (double)s->world;
    res->model_flops = model_flops_per_step(m, in->train.global_batch_size, s->tp);
    double tokens = (double)in->train.global_batch_size * (double)m->seq_length;
    if (res->step_time_s > 0) {
        res->tokens_per_s_per_gpu = tokens / res->step_time_s / world;
        res->model_tflops_per_gpu = res->model_flops / res->step_time_s / world / TFLOPS;
        res->mfu = res->model_flops / res->step_time_s / world / in->cluster.gpu.peak_bf16_flops_per_s;
    }
    res->events = ms->events;
    res->tasks = ms->tasks;
    return SIM_OK;
}

/* The pass templates of the step, simulated once (their summaries do not
 * depend on the microbatches), and the tasks per microbatch they bring. */
static int summarize_all(step_t *st, const run_inputs *in, wl_cache *cache, sim_err *err)
{
    const int64_t pp = st->pp, v = st->v;
    size_t longest = 0;
    for (int64_t r = 0; r < pp; r++)
        for (int64_t c = 0; c < v; c++) {
            const wl_chunk *ch = &st->wl->stages[r].chunks[c];
            for (int kind = 0; kind < SCHED_KINDS; kind++) {
                size_t n = (size_t)wl_chunk_pass(ch, (sched_kind)kind)->n_ops;
                longest = n > longest ? n : longest;
            }
        }
    tmpl_scratch w;
    if (step_scratch_init(&w, longest) != SIM_OK)
        return sim_err_set(err, SIM_ENOMEM, "out of memory summarizing a pass");
    int rc = SIM_OK;
    st->ops_per_mb = st->ops_fixed = 0;
    for (int64_t r = 0; r < pp && rc == SIM_OK; r++)
        for (int64_t c = 0; c < v && rc == SIM_OK; c++)
            for (int kind = 0; kind < st->n_kinds && rc == SIM_OK; kind++) {
                const wl_chunk *ch = &st->wl->stages[r].chunks[c];
                const wl_pass *p = wl_chunk_pass(ch, (sched_kind)kind);
                pass_summary *ps = summary_of(st, r, c, kind);
                /* Middle stages mostly share a template: reuse the summary
                 * of an identical pass simulated before. */
                const pass_summary *same = NULL;
                for (int64_t q = 0; q < r * v + c && !same; q++) {
                    const wl_chunk *o = &st->wl->stages[q / v].chunks[q % v];
                    const wl_pass *op = wl_chunk_pass(o, (sched_kind)kind);
                    if (wl_pass_equal(op, p))
                        same = summary_of(st, q / v, q % v, kind);
                }
                /* A summary depends on the template's ops alone: one
                 * simulated for an equal template of an earlier step
                 * (wl_cache.h) is this one's, byte for byte. */
                const void *kept = !same && cache ? wl_cache_get(cache, p, WL_CACHE_STEP, sizeof *ps) : NULL;
                if (same)
                    *ps = *same;
                else if (kept)
                    memcpy(ps, kept, sizeof *ps);
                else if ((rc = summarize(p, ps, &w, err)) != SIM_OK)
                    break;
                else if (cache && wl_cache_put(cache, p, WL_CACHE_STEP, ps, sizeof *ps) != SIM_OK) {
                    rc = sim_err_set(err, SIM_ENOMEM, "out of memory keeping a pass summary");
                    break;
                }
                /* A stand-in with host ops: up to 5 tasks, one more with a tail. */
                if (in->sim.keep_ops || !(ps->collapsible || ps->tail)) {
                    st->ops_per_mb += (size_t)p->n_ops;
                } else {
                    st->ops_per_mb += (size_t)((ps->host ? 5 : 1) + ps->tail);
                    st->ops_fixed += (size_t)p->n_ops;
                }
            }
    step_scratch_free(&w);
    return rc;
}

/* Engine tasks to expect for M microbatches (a hint; past INT32_MAX the
 * step cannot be simulated). */
static double task_hint(const step_t *st, int64_t M)
{
    return (double)st->ops_per_mb * (double)M + (double)st->ops_fixed +
           (double)(st->pp * st->v) * ((double)st->n_kinds * (double)M + 3) + 8 + 4 * (double)st->pp;
}

/* May the pipeline sends be lags (step.c, "Sends")?  Not for a trace
 * (it shows them), nor beside overlapped pairs (their sends follow the
 * pair), nor where a send takes no time (a task of none ends a round
 * after the pass, a lag of none with it). */
static bool sends_as_lags(const step_t *st, const run_inputs *in)
{
    if (in->sim.keep_ops || in->sim.plain_graph || st->plan.combined || st->pp < 2)
        return false;
    for (int64_t r = 0; r < st->pp; r++) {
        sim_time_ps t;
        if (!time_from_s_checked(st->wl->stages[r].p2p_s, &t) || t == 0)
            return false;
    }
    return true;
}

/* The sends of a run whose sends are lags, stage by stage in its order,
 * as the PP stream would have run them: *laid when none starts before the
 * one ahead of it has ended (the stream never queues, so each starts as
 * its pass ends and the lags are the timeline), false when one would
 * wait (then the step has them as tasks).  SIM_OK or SIM_ENOMEM. */
static int lay_sends(step_t *st, bool *laid, sim_err *err)
{
    const size_t n = (size_t)(st->pp * st->rank_passes);
    *laid = false;
    st->send_spans = malloc((n ? n : 1) * sizeof *st->send_spans);
    st->send_from = malloc((n ? n : 1) * sizeof *st->send_from);
    st->send_at = malloc((size_t)(st->pp + 1) * sizeof *st->send_at);
    if (!st->send_spans || !st->send_from || !st->send_at)
        return sim_err_set(err, SIM_ENOMEM, "out of memory laying out the pipeline sends");
    size_t k = 0;
    for (int64_t r = 0; r < st->pp; r++) {
        st->send_at[r] = k;
        for (int64_t i = 0; i < st->rank_passes; i++) {
            const pass_ref *p = &st->passes[st->order[r * st->rank_passes + i]];
            if (p->send != SEND_LAGGED)
                continue;
            const sim_time_ps a = eng_task_end(st->eng, p->last);
            if (k > st->send_at[r] && a < st->send_spans[k - 1].b)
                return SIM_OK;
            st->send_from[k] = p->last;
            st->send_spans[k++] = (eng_span){a, a + st->send_ps[r]};
        }
    }
    st->send_at[st->pp] = k;
    *laid = true;
    return SIM_OK;
}

/* Back to no graph, for the build again with the sends as tasks (never
 * beside overlapped pairs, sends_as_lags: their entries stay as built). */
static void unbuild(step_t *st, size_t n_passes)
{
    eng_destroy(st->eng);
    st->eng = NULL;
    st->n_info = 0;
    st->n_fold = st->n_own_fold = 0;
    memset(st->collapsed, 0, n_passes * sizeof *st->collapsed);
    memset(st->paired, 0, n_passes * sizeof *st->paired);
    memset(st->shifted, 0, n_passes * sizeof *st->shifted);
    memset(st->host_own_ps, 0, (size_t)(st->pp * STREAM_KINDS) * sizeof *st->host_own_ps);
    free(st->send_spans);
    free(st->send_from);
    free(st->send_at);
    st->send_spans = NULL;
    st->send_from = NULL;
    st->send_at = NULL;
}

/* Builds, runs and measures the step's graph for M microbatches (the
 * workload and summaries in st already); ms NULL: not measured (yet). */
/* st set to a step of M microbatches (its plan, its passes per stage). */
static void set_microbatches(step_t *st, int64_t M)
{
    st->M = M;
    st->plan.M = M;
    st->rank_passes = st->n_kinds * M * st->v;
}

static int simulate(step_t *st, const run_inputs *in, const strategy_t *s, int64_t M, step_meas *ms, sim_err *err)
{
    set_microbatches(st, M);
    const size_t n_passes = (size_t)(st->pp * st->rank_passes);
    st->collapsed = calloc(n_passes, sizeof *st->collapsed);
    st->paired = calloc(n_passes, sizeof *st->paired);
    st->shifted = calloc(n_passes, sizeof *st->shifted);
    st->passes = malloc(n_passes * sizeof *st->passes);
    st->order = malloc(n_passes * sizeof *st->order);
    st->host_own_ps = calloc((size_t)(st->pp * STREAM_KINDS), sizeof *st->host_own_ps);
    st->send_ps = calloc((size_t)st->pp, sizeof *st->send_ps);
    if (!st->collapsed || !st->paired || !st->shifted || !st->passes || !st->order || !st->host_own_ps ||
        !st->send_ps)
        return sim_err_set(err, SIM_ENOMEM, "out of memory");
    size_t hint = (size_t)task_hint(st, M);
    /* The task descriptions sized as the engine's tasks, not grown from
     * a guess by copies. */
    if (hint > st->cap_info) {
        step_task_info *p = realloc(st->info, hint * sizeof *p);
        if (!p)
            return sim_err_set(err, SIM_ENOMEM, "out of memory");
        st->info = p;
        st->cap_info = hint;
    }
    st->lag_sends = sends_as_lags(st, in);
    st->fold_host = !in->sim.keep_ops && !in->sim.plain_graph;
    int rc;
    for (;;) {
        st->eng = eng_create((int)(st->pp * STREAM_KINDS), (int)(st->pp * CTR_PER_STAGE), hint, hint * 2);
        if (!st->eng)
            return sim_err_set(err, SIM_ENOMEM, "out of memory");
        for (size_t i = 0; i < n_passes; i++)
            st->passes[i] = (pass_ref){-1, -1, -1, -1, -1, -1, NULL};
        rc = build(st, in, s, err);
        if (rc == SIM_OK)
            rc = eng_run(st->eng, err);
        bool laid = true;
        if (rc == SIM_OK && st->lag_sends)
            rc = lay_sends(st, &laid, err);
        if (rc != SIM_OK || laid)
            break;
        /* A send would have waited for the one before it: as tasks. */
        unbuild(st, n_passes);
        st->lag_sends = false;
    }
    if (rc == SIM_OK && ms)
        rc = step_measure(st, ms, NULL, err);
    return rc;
}

/* A step of M microbatches from a sample of M1 and what one period adds
 * to it, or from two samples M1 and M1 + P (step_period.h): SIM_OK with
 * st's result, or 1 to simulate it whole. */
enum { DECLINED = DIRECT_DECLINED };

/* A sample of the step at M microbatches sharing st's workload. */
static step_t *sample_of(const step_t *st)
{
    step_t *x = calloc(1, sizeof *x);
    if (!x)
        return NULL;
    x->wl = st->wl;
    x->summary = st->summary;
    x->borrowed = true;
    x->pp = st->pp;
    x->v = st->v;
    x->plan = st->plan;
    x->n_kinds = st->n_kinds;
    x->ops_per_mb = st->ops_per_mb;
    x->ops_fixed = st->ops_fixed;
    return x;
}

/* step_timeline.same_task: a sample's tasks a and b are the same task one
 * period apart. */
static bool same_task(const void *ctx, eng_task ta, eng_task tb)
{
    const step_t *x = ctx;
    const step_task_info *a = &x->info[x->task_tags[ta]], *b = &x->info[x->task_tags[tb]];
    const int64_t P = x->period_mb;
    return a->name == b->name && a->chunk == b->chunk && a->whole_pass == b->whole_pass &&
           a->replaced == b->replaced && a->stage == b->stage && a->stream == b->stream &&
           (a->microbatch < 0 ? b->microbatch == a->microbatch : (int64_t)b->microbatch == a->microbatch + P);
}

/* The figures of the sample at M, and whether its timeline is periodic:
 * the check first, the figures then only of a sample that can be used
 * (its timeline periodic and long enough: with fit->short_blocks > 0, ms
 * is left as it was); with inc, also what one period adds to them where
 * the sample gives that (*derived, step_measure). */
static int sample(const step_t *st, const run_inputs *in, const strategy_t *s, int64_t M, step_meas *ms,
                  step_period_fit *fit, step_meas *inc, bool *derived)
{
    sim_err quiet;
    sim_err_clear(&quiet);
    step_t *x = sample_of(st);
    int32_t *task_pass = NULL, *block = NULL;
    uint8_t *timed = NULL;
    sched_pass *seq = NULL, *local = NULL;
    sim_time_ps *from = NULL;
    if (derived)
        *derived = false;
    /* The second sample, which only gives figures, walked where the walk
     * takes it (step_direct.h: the graph's figures, for less). */
    if (x && !fit) {
        set_microbatches(x, M);
        const int wr = step_direct(x, in, s, ms, &quiet);
        if (wr != DIRECT_DECLINED) {
            step_destroy(x);
            return wr == SIM_OK ? SIM_OK : DECLINED;
        }
    }
    if (x && fit) {
        const int64_t P = sched_plan_period(&st->plan);
        x->longer_by[0] = 1;
        x->longer_by[1] = (st->M - M) / P;
    }
    bool ok = x && simulate(x, in, s, M, fit ? NULL : ms, &quiet) == SIM_OK && !x->host_varies;
    if (ok && fit) {
        const size_t n = eng_num_tasks(x->eng), np = (size_t)(x->pp * x->rank_passes);
        task_pass = malloc((n ? n : 1) * sizeof *task_pass);
        timed = malloc((n ? n : 1) * sizeof *timed);
        seq = malloc(np * sizeof *seq);
        local = malloc((size_t)x->rank_passes * sizeof *local);
        if (inc) {
            block = malloc((n ? n : 1) * sizeof *block);
            from = malloc((size_t)x->pp * sizeof *from);
        }
        ok = task_pass && timed && seq && local && (!inc || (block && from));
        /* measure() reads the times of the compute and communication
         * streams, and the host lead of a pass placed from its host's
         * start (SHIFT_HOST, below); of the other host tasks only
         * durations. */
        uint8_t timed_kind[STREAM_KINDS];
        for (int k = 0; k < STREAM_KINDS; k++) {
            const stream_role role = streams_desc((stream_kind)k)->role;
            timed_kind[k] = role == STREAM_ROLE_COMPUTE || role == STREAM_ROLE_COMM;
        }
        for (size_t t = 0; ok && t < n; t++)
            task_pass[t] = -1;
        /* Stream by stream from the engine's views (every task is on one). */
        size_t viewed = 0;
        for (int sid = 0; ok && sid < (int)(x->pp * STREAM_KINDS); sid++) {
            const eng_task *ids;
            const size_t k = eng_stream_view(x->eng, sid, &ids);
            for (size_t i = 0; i < k; i++)
                timed[ids[i]] = timed_kind[sid % STREAM_KINDS];
            viewed += k;
        }
        ok = ok && viewed == n;
        /* A stage's passes by their index less the stage's first
         * (pass_index), counted out instead of divided per pass. */
        for (size_t i = 0, k = 0; ok && k < (size_t)x->n_kinds; k++)
            for (int32_t mb = 0; mb < (int32_t)x->M; mb++)
                for (int32_t c = 0; c < (int32_t)x->v; c++)
                    local[i++] = (sched_pass){.kind = (uint8_t)k, .microbatch = mb, .chunk = c};
        /* Each stage's passes in order, and the tasks each placed. */
        for (size_t q = 0, r = 0, stage_at = 0; ok && q < np; q++) {
            if (q - stage_at == (size_t)x->rank_passes) {
                r++;
                stage_at = q;
            }
            const size_t pi = (size_t)x->order[q];
            const pass_ref *ref = &x->passes[pi];
            seq[q] = local[pi - stage_at];
            const eng_task mine[] = {ref->first, ref->span, ref->last, ref->send, ref->lead};
            /* Its ops are placed from its GPU's and its host's starts,
             * unless the host is ahead of its lead there and the pass
             * then runs as from its GPU start alone (shifts_ahead): a
             * lead shifted less keeps it so. */
            if (x->shifted[pi] == SHIFT_HOST && ref->lead >= 0) {
                const pass_summary *ps = summary_of(x, (int64_t)r, seq[q].chunk, seq[q].kind);
                if (!ps->shifts_ahead || eng_task_end(x->eng, ref->lead) > eng_task_start(x->eng, ref->first))
                    timed[ref->lead] = 1;
            }
            if (ref->base >= 0 && ref->last >= ref->base)
                for (eng_task t = ref->base; t <= ref->last; t++)
                    task_pass[t] = (int32_t)q;
            for (size_t k = 0; k < sizeof mine / sizeof *mine; k++)
                if (mine[k] >= 0)
                    task_pass[mine[k]] = (int32_t)q;
        }
        x->period_mb = sched_plan_period(&x->plan);
        x->task_tags = eng_task_tags(x->eng);
        const step_timeline tl = {.eng = x->eng, .same_task = same_task, .ctx = x, .pp = x->pp, .streams_per_stage = STREAM_KINDS,
                                  .rank_passes = x->rank_passes, .seq = seq, .task_pass = task_pass, .timed = timed,
                                  .period_mb = sched_plan_period(&x->plan),
                                  .period_passes = sched_plan_period(&x->plan) * x->n_kinds * x->v,
                                  .block_out = block, .from_out = from};
        ok = ok && step_period_fit_find(&tl, fit);
        /* With what one period adds, off this timeline (step_period.h,
         * "One sample"), where its window holds a whole period. */
        if (ok && fit->short_blocks == 0) {
            const bool one = inc && fit->whole_period && fit->cut + 1 < INT32_MAX;
            const step_period_req per = {.block = block, .blk = one ? (int32_t)(fit->cut + 1) : 0, .from = from,
                                         .lambda = fit->lambda_ps, .timed = timed, .inc = inc, .derived = derived};
            ok = step_measure(x, ms, one ? &per : NULL, &quiet) == SIM_OK;
        }
    }
    free(block);
    free(from);
    free(task_pass);
    free(timed);
    free(seq);
    free(local);
    step_destroy(x);
    return ok ? SIM_OK : DECLINED;
}

static void meas_free(step_meas *m)
{
    free(m->stages);
    m->stages = NULL;
}

/* Every figure of a and b the same. */
static bool meas_equal(const step_meas *a, const step_meas *b)
{
    step_meas x = *a, y = *b;
    x.stages = y.stages = NULL;
    bool same = memcmp(&x, &y, sizeof x) == 0;
    for (int64_t r = 0; same && r < a->n_stages; r++)
        same = memcmp(&a->stages[r], &b->stages[r], sizeof a->stages[r]) == 0;
    return same;
}

/* *K: the blocks of the steady run of the schedule's order at M
 * microbatches (step_period_order_blocks), built without simulating, on
 * the first and the last stage (the longest warm-up and the longest
 * drain: an estimate for the sample's length, which the fit checks on
 * every stage); 0 when the schedule does not run at M.  SIM_OK, or
 * SIM_ENOMEM. */
static int order_blocks(const step_t *st, int64_t M, int64_t P, int64_t *K, sim_err *err)
{
    sched_plan pl = st->plan;
    pl.M = M;
    const int64_t n = st->n_kinds * M * st->v, ranks = st->pp > 1 ? 2 : 1;
    sched_item *items = malloc((size_t)sched_plan_passes(&pl) * sizeof *items);
    sched_pass *seq = malloc((size_t)(ranks * n) * sizeof *seq);
    sched_orders kept = {0};
    sim_err quiet;
    sim_err_clear(&quiet);
    int rc = items && seq ? SIM_OK : SIM_ENOMEM;
    bool runs = true;
    for (int64_t q = 0; rc == SIM_OK && runs && q < ranks; q++) {
        int64_t n_items = 0, k = 0;
        rc = sched_plan_build_kept(&pl, q == 0 ? 0 : st->pp - 1, &kept, items, &n_items, &quiet);
        runs = rc == SIM_OK;
        if (rc == SIM_EINVAL) /* a schedule that does not run at M: no blocks */
            rc = SIM_OK;
        for (int64_t i = 0; runs && i < n_items; i++)
            for (int j = 0; j < items[i].n_passes && k < n; j++)
                seq[q * n + k++] = items[i].pass[j];
        runs = runs && k == n;
    }
    *K = rc == SIM_OK && runs ? step_period_order_blocks(seq, ranks, n, P, P * st->n_kinds * st->v) : 0;
    sched_orders_free(&kept);
    free(items);
    free(seq);
    return rc == SIM_OK ? SIM_OK : sim_err_set(err, rc, "out of memory choosing the step's samples");
}

/* The first sample keeps this many blocks of the order's steady run, and
 * at least this many microbatches in them: the fit needs four blocks
 * that repeat, a cut and the window past it; a period of one microbatch
 * (1F1B, ZB-H1, the V schedules) settles over a few microbatches more
 * than a period of N does blocks. */
enum { SAMPLE_BLOCKS = 5, SAMPLE_STEADY_MBS = 7 };

/* A sample of M1 microbatches gains on a step of M only where it is at
 * most half of it, and two periods short of it: it also pays the check
 * and what one period adds (step_measure with a period), some a retry, and a
 * few the second sample one period longer (step_period.h, "One sample";
 * taken then, as it is shorter than the rest of the step). */
static bool samples_pay(int64_t M1, int64_t P, int64_t M)
{
    return M1 + 2 * P <= M && 2 * M1 <= M;
}

/* The first sample's microbatches before run_periodic trims its blocks
 * (so at least the sample it takes). */
static int64_t first_sample_mbs(const step_t *st, int64_t P)
{
    int64_t M1 = 2 * st->pp + 6 * P;
    return M1 + ((st->M - M1) % P + P) % P;
}

/* Is the whole step walked directly (step_direct.h) cheaper than its
 * samples on the graph?  Only which way the same figures come depends
 * on it.  A task walked costs well under half of one in a sample (its
 * graph, its engine run, its measure and the fit: bench_search's "CPU
 * per engine task" line, about 50 ns against 120 on the 70B search): the
 * walk of M microbatches against samples of M1 while M is at most
 * DIRECT_SAMPLE_RATIO times M1, or where samples do not pay (ratios 2 to
 * 4 measure alike there). */
enum { DIRECT_SAMPLE_RATIO = 2 };
static bool direct_pays(const step_t *st, const run_inputs *in)
{
    if (!in->sim.steady_extension || in->sim.keep_ops)
        return true;
    const int64_t P = sched_plan_period(&st->plan), M1 = first_sample_mbs(st, P);
    return !samples_pay(M1, P, st->M) || st->M <= DIRECT_SAMPLE_RATIO * M1;
}

/* The whole step walked (step_direct.h) into st's result: SIM_OK,
 * DIRECT_DECLINED or an error. */
static int walk(step_t *st, const run_inputs *in, const strategy_t *s, sim_err *err)
{
    step_meas ms = {0};
    int rc = step_direct(st, in, s, &ms, err);
    if (rc == SIM_OK) {
        st->direct = true;
        rc = finish(st, &ms, in, s, err);
    }
    meas_free(&ms);
    return rc;
}

static int run_periodic(step_t *st, const run_inputs *in, const strategy_t *s, sim_err *err)
{
    const int64_t M = st->M, P = sched_plan_period(&st->plan);
    /* The first sample: a few periods past what the schedule's warm-up and
     * cool-down need, in M's residue class; then no longer than leaves
     * the blocks the fit needs in the order's steady run (each period
     * fewer takes one block from it). */
    int64_t M1 = first_sample_mbs(st, P);
    const int64_t want = SAMPLE_BLOCKS > (SAMPLE_STEADY_MBS + P - 1) / P ? SAMPLE_BLOCKS : (SAMPLE_STEADY_MBS + P - 1) / P;
    int64_t K0 = 0, K1 = 0;
    int rc = order_blocks(st, M1, P, &K0, err);
    if (rc == SIM_OK && K0 > want && M1 - (K0 - want) * P > 0)
        rc = order_blocks(st, M1 - (K0 - want) * P, P, &K1, err);
    if (rc != SIM_OK)
        return rc;
    if (K1 >= want)
        M1 -= (K0 - want) * P;
    step_meas a = {0}, b = {0}, inc = {0}, out;
    step_period_fit fit;
    bool derived = false;
    rc = DECLINED;
    for (int attempt = 0; attempt < 4; attempt++) {
        if (!samples_pay(M1, P, M))
            break;
        meas_free(&a);
        meas_free(&inc);
        fit.blocks = 0;
        fit.cut = -2;
        if (sample(st, in, s, M1, &a, &fit, &inc, &derived) != SIM_OK) {
            /* Blocks that repeat but a transient longer than the sample
             * (ZB-H1's and the V schedules' settle over tens of blocks):
             * again with twice the blocks, or as many more as the
             * transient is estimated to last (and a few for the window)
             * where that is more and still leaves a gain. */
            if (fit.cut != -1 || fit.blocks < 4)
                break;
            int64_t grow = fit.blocks;
            if (fit.settle_blocks > 0 && fit.settle_blocks + 3 > grow && fit.settle_blocks + 3 < (M - M1) / P &&
                samples_pay(M1 + (fit.settle_blocks + 3) * P, P, M))
                grow = fit.settle_blocks + 3;
            M1 += grow * P;
            continue;
        }
        if (fit.short_blocks == 0) {
            rc = SIM_OK;
            break;
        }
        if (fit.short_blocks > (M - M1) / P)
            break;
        M1 += fit.short_blocks * P;
    }
    /* The sample one period longer: a plus what one period adds where the
     * first gave that, else simulated (and under sim.period_check both,
     * compared). */
    if (rc == SIM_OK && derived && !step_period_next(&a, &inc, &b))
        derived = false;
    if (rc == SIM_OK && (!derived || in->sim.period_check)) {
        step_meas b2 = {0};
        rc = sample(st, in, s, M1 + P, &b2, NULL, NULL, NULL);
        if (rc == SIM_OK && derived)
            st->period_checked = meas_equal(&b, &b2) ? 1 : -1;
        if (rc == SIM_OK && !derived) {
            b = b2;
            b2.stages = NULL;
        }
        meas_free(&b2);
    }
    st->samples = derived ? 1 : 2;
    /* The two samples are a step apart in the affine range: their ends are
     * lambda apart, past the window. */
    if (rc == SIM_OK &&
        (b.makespan_ps - a.makespan_ps != fit.lambda_ps || b.pipe_end_ps - a.pipe_end_ps != fit.lambda_ps ||
         a.makespan_ps + fit.lambda_ps <= fit.window_ps || a.pipe_end_ps + fit.lambda_ps <= fit.window_ps ||
         !step_period_extend(&a, &b, (M - M1) / P, &out)))
        rc = DECLINED;
    /* A step whose work overflows what the build allows fails there: let
     * the whole simulation say so. */
    if (rc == SIM_OK && !time_s_fits(2 * time_as_s(out.work_ps))) {
        meas_free(&out);
        rc = DECLINED;
    }
    if (rc == SIM_OK) {
        rc = finish(st, &out, in, s, err);
        meas_free(&out);
    }
    meas_free(&a);
    meas_free(&b);
    meas_free(&inc);
    return rc;
}

int step_run(step_t **out, const run_inputs *in, const strategy_t *s, sim_err *err)
{
    return step_run_reuse(out, in, s, NULL, NULL, err);
}

_Static_assert(sizeof(pass_summary) <= WL_CACHE_VALUE_MAX, "a pass summary fits a cache slot");

int step_run_reuse(step_t **out, const run_inputs *in, const strategy_t *s, workload_t *wl, wl_cache *cache,
                   sim_err *err)
{
    *out = NULL;
    step_t *st = calloc(1, sizeof *st);
    if (!st)
        return sim_err_set(err, SIM_ENOMEM, "out of memory");
    st->pp = s->pp;
    st->v = s->v;
    st->M = s->num_microbatches;
    strategy_plan(s, &st->plan);
    const int kinds = sched_plan_kinds(&st->plan);
    /* Every pass of the step is a task: bound their number so that memory
     * stays in reason (about 100 bytes each). */
    double passes = (double)s->pp * kinds * (double)s->num_microbatches * (double)s->v;
    if (passes > LIMIT_PASSES) {
        step_destroy(st);
        return sim_err_set_at(err, SIM_EINVAL, NULL, 0, "train.global_batch_size",
                              "%.3g forward/backward passes (PP %lld x microbatches %lld x chunks %lld x %d) are "
                              "more than parsim simulates (%.0e); microbatches are train.global_batch_size / "
                              "(train.micro_batch_size x DP)",
                              passes, (long long)s->pp, (long long)s->num_microbatches, (long long)s->v, kinds,
                              LIMIT_PASSES);
    }
    st->rank_passes = kinds * s->num_microbatches * s->v;
    st->n_kinds = kinds;
    st->wl = wl;
    st->wl_lent = wl != NULL;
    int rc = wl ? SIM_OK : workload_build(&st->wl, in, s, err);
    if (rc == SIM_OK)
        rc = check_activations(st, err);
    if (rc == SIM_OK) {
        st->summary = calloc((size_t)(s->pp * s->v * st->n_kinds), sizeof *st->summary);
        rc = st->summary ? summarize_all(st, in, cache, err) : sim_err_set(err, SIM_ENOMEM, "out of memory");
    }
    if (rc != SIM_OK) {
        step_destroy(st);
        return rc;
    }
    double hint = task_hint(st, st->M);
    if (hint > (double)INT32_MAX) { /* engine task ids are int32 */
        step_destroy(st);
        return sim_err_set(err, SIM_EINVAL,
                           "the step would have about %.0f tasks, more than parsim's engine holds (%d)%s", hint,
                           INT32_MAX, in->sim.keep_ops ? ": a trace has a task per kernel, try fewer microbatches" : "");
    }
    /* The whole step walked without a graph where step_direct takes it;
     * else samples, or the graph of the whole step.  A trace reads every
     * task off the engine: only the whole simulation has them. */
    const bool walk_first = direct_pays(st, in);
    rc = walk_first ? walk(st, in, s, err) : DIRECT_DECLINED;
    if (rc == DIRECT_DECLINED)
        rc = in->sim.steady_extension && !in->sim.keep_ops ? run_periodic(st, in, s, err) : DECLINED;
    /* Samples that did not fit: the whole step, walked where it can be. */
    if (rc == DECLINED && !walk_first)
        rc = walk(st, in, s, err);
    if (rc == DECLINED) {
        step_meas ms = {0};
        rc = simulate(st, in, s, st->M, &ms, err);
        if (rc == SIM_OK)
            rc = finish(st, &ms, in, s, err);
        meas_free(&ms);
    }
    if (rc != SIM_OK) {
        step_destroy(st);
        return rc;
    }
    *out = st;
    return SIM_OK;
}

const step_result *step_result_get(const step_t *st)
{
    return &st->res;
}

const engine_t *step_engine(const step_t *st)
{
    return st->eng;
}

bool step_extended(const step_t *st)
{
    return st->eng == NULL && !st->direct;
}

int step_samples(const step_t *st)
{
    return step_extended(st) ? st->samples : 0;
}

int step_period_checked(const step_t *st)
{
    return st->period_checked;
}

void step_task_describe(const step_t *st, eng_task t, step_task_info *out)
{
    *out = st->info[eng_task_tag(st->eng, t)];
}

void step_shape(const step_t *st, int64_t *pp, int64_t *v, int64_t *M)
{
    *pp = st->pp;
    *v = st->v;
    *M = st->M;
}

bool step_pass_span(const step_t *st, int64_t stage, int kind, int64_t mb, int64_t chunk,
                    sim_time_ps *start, sim_time_ps *end)
{
    if (kind < 0 || kind >= st->n_kinds)
        return false; /* a kind the schedule does not run */
    const pass_ref *p = &st->passes[pass_index(st, stage, kind, mb, chunk)];
    if (p->span < 0)
        return false;
    *start = eng_task_start(st->eng, p->span);
    *end = eng_task_end(st->eng, p->last);
    return true;
}

void step_destroy(step_t *st)
{
    if (!st)
        return;
    eng_destroy(st->eng);
    if (!st->borrowed) {
        if (!st->wl_lent)
            workload_destroy(st->wl);
        free(st->summary);
    }
    free(st->info);
    free(st->passes);
    free(st->collapsed);
    free(st->paired);
    free(st->shifted);
    for (size_t k = 0; k < st->n_pairs; k++)
        wl_pair_free(&st->pairs[k].t);
    free(st->pairs);
    free(st->order);
    free(st->host_own_ps);
    free(st->send_ps);
    free(st->send_spans);
    free(st->send_from);
    free(st->send_at);
    free(st->fold_task);
    free(st->fold_ps);
    free(st->own_fold_task);
    free(st->own_fold_ps);
    free(st->res.stages);
    free(st);
}
