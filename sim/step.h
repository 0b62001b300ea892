/* step: one training step, simulated.  Builds the engine graph from the
 * workload templates and the per-stage schedules, runs it, and measures
 * step time, bubble, exposed communication and memory from the timeline.
 *
 * One rank per pipeline stage is simulated: DP replicas and the ranks of a
 * TP/CP/EP group behave alike, so the cost grows with PP x microbatches x
 * layers, never with the GPU count.
 * Ownership: step_run allocates a step_t, step_destroy frees it.
 */
#ifndef PARSIM_STEP_H
#define PARSIM_STEP_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "engine.h"
#include "strategy.h"
#include "wl_cache.h"
#include "workload.h"

typedef struct stage_result {
    int64_t stage;
    double weights_bytes, gradients_bytes, optimizer_bytes;
    double activations_peak_bytes;
    int64_t inflight_microbatches_max;   /* (microbatch, chunk) passes held */
    double peak_bytes;
    double busy_s;                       /* F/B spans on the compute stream */
    double bubble_s;                     /* idle during the pipeline phase */
    double comm_s[STREAM_KINDS];         /* busy time per stream (communication, host) */
    double exposed_s[STREAM_KINDS];      /* per comm stream: its time with compute idle */
    double exposed_total_s;              /* all comm streams together with compute idle */
} stage_result;

typedef struct step_result {
    double step_time_s;
    double pipeline_s;           /* end of the last forward/backward pass */
    double bubble_fraction;      /* mean over stages of bubble_s / pipeline_s */
    double model_flops;          /* Megatron num_floating_point_operations, per step */
    double tokens_per_s_per_gpu;
    double model_tflops_per_gpu;
    double mfu;                  /* vs the bf16 dense peak */
    double peak_bytes;           /* max over stages */
    double comm_s[STREAM_KINDS]; /* max over stages, per stream (communication, host) */
    double exposed_s[STREAM_KINDS];
    double exposed_total_s;      /* max over stages of all exposed comm */
    int64_t n_stages;
    stage_result *stages;
    uint64_t events;
    uint64_t tasks;
} step_result;

typedef struct step step_t;

/* SIM_OK and *out, or NULL and: SIM_EINVAL for inputs beyond what parsim
 * simulates (more than LIMIT_PASSES passes, a duration outside
 * [0, LIMIT_DURATION_S], activations past LIMIT_ACT_BYTES, more tasks than
 * the engine holds), SIM_ENOMEM, or SIM_ESIM from the engine; err says
 * which. */
int step_run(step_t **out, const run_inputs *in, const strategy_t *s, sim_err *err);
/* step_run for a caller that runs many steps (search's workers), with the
 * same results: wl, when not NULL, is workload_build's for these very
 * inputs, lent (the step reads it; the caller frees it after
 * step_destroy); cache, when not NULL, keeps pass summaries across steps
 * (wl_cache.h). */
int step_run_reuse(step_t **out, const run_inputs *in, const strategy_t *s, workload_t *wl, wl_cache *cache,
                   sim_err *err);
const step_result *step_result_get(const step_t *st);
void step_destroy(step_t *st);

/* What a task of the step's engine is, for the trace. */
typedef struct step_task_info {
    int64_t stage;
    stream_kind stream;
    bool whole_pass;       /* stands for a whole pass (or its GPU span); in
                              what was padding, so the table stays as large */
    bool replaced;         /* a stand-in whose pass measure takes from its ops */
    const char *name;      /* pass kind name (sched_kind_of), op or collective name */
    int32_t microbatch;    /* -1 if none */
    int32_t chunk;         /* -1 if none */
} step_task_info;

/* The step's engine; NULL when the figures came from short samples
 * (sim.steady_extension, step_period.h), which a trace never does. */
const engine_t *step_engine(const step_t *st);
/* Did the figures come from short samples (step_period.h)? */
bool step_extended(const step_t *st);
/* How many samples they came from: 0 (simulated whole), 1 (the
 * increments of one period measured on the first, step_period.h's "One
 * sample") or 2 (the second sample taken). */
int step_samples(const step_t *st);
/* Under sim.period_check, for a step from one sample: 1 when the second
 * sample has every figure one period adds bit for bit, -1 when not; 0
 * when not checked. */
int step_period_checked(const step_t *st);

/* Pipeline size, chunks per stage and microbatches of the step. */
void step_shape(const step_t *st, int64_t *pp, int64_t *v, int64_t *M);

/* Span of one pass of kind `kind` (sched_kind): from its first op's start
 * to its last op's end.  False if the pass has no ops or the step's
 * schedule runs no pass of that kind. */
bool step_pass_span(const step_t *st, int64_t stage, int kind, int64_t mb, int64_t chunk,
                    sim_time_ps *start, sim_time_ps *end);
void step_task_describe(const step_t *st, eng_task t, step_task_info *out);

#endif
