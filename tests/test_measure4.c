/* Tests of what one period adds measured in the same walk as the step's
 * figures (step_measure with a period request), on timelines simulated
 * whole: a window holding the whole timeline, with every task in the
 * block, gives every stage's figures the step's own; windows that split
 * the timeline give the parts of every clipped figure; the block's tasks
 * and work are those of the tasks it holds; the latest ends' check looks
 * at the tasks that end there and only at them; and eng_task_tags, the
 * engine's tags at once, gives each task's eng_task_tag. */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "sim_run.h"
#include "step_internal.h"
#include "step_measure.h"
#include "streams.h"

/* Llama 3 70B on 64 GPUs at PP 4, VP 5, CP 2 (configs/llama3-70b-h100x64.cfg),
 * simulated whole: the last stage's passes are shifted (measured from
 * their ops). */
#define LLAMA_PP4                                                                                           \
    "model.name=llama3-70b", "cluster.topology=dgx-h100", "cluster.num_gpus=64",                            \
        "model.tensor_model_parallel_size=4", "model.pipeline_model_parallel_size=4",                       \
        "model.virtual_pipeline_model_parallel_size=5", "model.context_parallel_size=2",                    \
        "model.sequence_parallel=true", "model.seq_length=8192", "train.global_batch_size=128",             \
        "train.micro_batch_size=1", "ddp.use_distributed_optimizer=true", "ddp.overlap_grad_reduce=true",   \
        "ddp.overlap_param_gather=true", "sim.steady_extension=false"

/* A period request over st's tasks: every task in block 1, timed, each
 * stage's window from 0 (the caller changes them). */
typedef struct request {
    int32_t *block;
    uint8_t *timed;
    sim_time_ps *from;
    step_meas inc;
    bool derived;
    step_period_req per;
} request;

static void request_init(request *q, const step_t *st, sim_time_ps from, sim_time_ps lambda)
{
    const size_t n = eng_num_tasks(st->eng);
    q->block = malloc(n * sizeof *q->block);
    q->timed = malloc(n);
    q->from = malloc((size_t)st->pp * sizeof *q->from);
    cr_assert(q->block && q->timed && q->from);
    for (size_t t = 0; t < n; t++) {
        q->block[t] = 1;
        q->timed[t] = 1;
    }
    for (int64_t r = 0; r < st->pp; r++)
        q->from[r] = from;
    q->derived = false;
    q->per = (step_period_req){.block = q->block, .blk = 1, .from = q->from, .lambda = lambda,
                               .timed = q->timed, .inc = &q->inc, .derived = &q->derived};
}

static void request_free(request *q)
{
    free(q->block);
    free(q->timed);
    free(q->from);
    free(q->inc.stages);
}

/* step_measure of st with q, asserting it succeeds; its own figures in
 * *ms (the caller frees ms->stages). */
static void measure(step_t *st, request *q, step_meas *ms)
{
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(step_measure(st, ms, q ? &q->per : NULL, &err), SIM_OK, "%s", err.msg);
}

static void run_llama(sim *x)
{
    const char *kv[] = {LLAMA_PP4, NULL};
    sim_run_graph(x, kv);
}

/* The layout does shift passes, so that the shifted ops' path is the one
 * measured below. */
static void assert_some_shifted(const step_t *st)
{
    size_t n = 0;
    for (size_t pi = 0; pi < (size_t)(st->pp * st->rank_passes); pi++)
        n += st->shifted[pi] != 0;
    cr_assert_gt(n, 0, "no shifted pass in the layout");
}

Test(measure4, window_of_the_whole_timeline_gives_the_steps_figures)
{
    sim x;
    run_llama(&x);
    step_t *st = x.st;
    assert_some_shifted(st);
    step_meas plain = {0}, ms = {0};
    measure(st, NULL, &plain);
    request q;
    request_init(&q, st, 0, eng_makespan(st->eng));
    measure(st, &q, &ms);
    cr_assert(q.derived, "the whole timeline's window was not derived");
    /* The step's own figures do not change with a period asked for. */
    cr_assert_eq(memcmp(plain.stages, ms.stages, (size_t)st->pp * sizeof *ms.stages), 0);
    cr_assert_eq(q.inc.n_stages, st->pp);
    cr_assert_eq(q.inc.tasks, eng_num_tasks(st->eng));
    cr_assert_eq(q.inc.events, eng_events(st->eng));
    cr_assert_eq(q.inc.makespan_ps, eng_makespan(st->eng));
    cr_assert_eq(q.inc.pipe_end_ps, eng_makespan(st->eng));
    sim_time_ps work = 0;
    for (size_t t = 0; t < eng_num_tasks(st->eng); t++)
        work += eng_task_end(st->eng, (eng_task)t) - eng_task_start(st->eng, (eng_task)t);
    /* The sends, lags here (step.lag_sends), count in the work as tasks would. */
    cr_assert(st->lag_sends, "the layout's sends are not lags");
    for (size_t i = 0; i < st->send_at[st->pp]; i++)
        work += st->send_spans[i].b - st->send_spans[i].a;
    /* So does the host time folded into release times. */
    for (size_t i = 0; i < st->n_fold; i++)
        work += st->fold_ps[i];
    cr_assert_eq(q.inc.work_ps, work);
    cr_assert_eq(work, st->work_ps, "the build's work");
    for (int64_t r = 0; r < st->pp; r++) {
        const step_stage_meas *a = &ms.stages[r], *b = &q.inc.stages[r];
        cr_assert_eq(b->busy_ps, a->busy_ps, "stage %lld", (long long)r);
        cr_assert_eq(b->exposed_total_ps, a->exposed_total_ps, "stage %lld", (long long)r);
        for (int k = 0; k < STREAM_KINDS; k++) {
            cr_assert_eq(b->comm_ps[k], a->comm_ps[k], "stage %lld stream %d", (long long)r, k);
            cr_assert_eq(b->exposed_ps[k], a->exposed_ps[k], "stage %lld stream %d", (long long)r, k);
        }
        /* Peaks and finals stay: a period adds none. */
        cr_assert_eq(b->act_peak, 0);
        cr_assert_eq(b->inflight_final, 0);
    }
    free(plain.stages);
    free(ms.stages);
    request_free(&q);
    sim_free(&x);
}

/* Every kernel a task (no summaries), the timeline cut at t: the two
 * windows' busy, communication and exposed times add up to the whole's. */
Test(measure4, windows_that_split_the_timeline_add_up)
{
    sim a, x;
    run_llama(&a);
    sim_rerun_every_kernel(&a, &x);
    step_t *st = x.st;
    const sim_time_ps end = eng_makespan(st->eng);
    step_meas whole = {0};
    measure(st, NULL, &whole);
    const sim_time_ps cuts[] = {end / 3, end / 2 + 12345, end - end / 7};
    for (size_t c = 0; c < sizeof cuts / sizeof *cuts; c++) {
        const sim_time_ps t = cuts[c];
        request lo, hi;
        step_meas m1 = {0}, m2 = {0};
        request_init(&lo, st, 0, t);
        request_init(&hi, st, t, end - t);
        measure(st, &lo, &m1);
        measure(st, &hi, &m2);
        cr_assert(lo.derived && hi.derived, "cut %llu", (unsigned long long)t);
        for (int64_t r = 0; r < st->pp; r++) {
            const step_stage_meas *w = &whole.stages[r], *p = &lo.inc.stages[r], *s = &hi.inc.stages[r];
            cr_assert_eq(p->busy_ps + s->busy_ps, w->busy_ps, "cut %llu stage %lld", (unsigned long long)t,
                         (long long)r);
            cr_assert_eq(p->exposed_total_ps + s->exposed_total_ps, w->exposed_total_ps, "cut %llu stage %lld",
                         (unsigned long long)t, (long long)r);
            for (int k = 0; k < STREAM_KINDS; k++) {
                if (!streams_is_comm((stream_kind)k))
                    continue;
                cr_assert_eq(p->comm_ps[k] + s->comm_ps[k], w->comm_ps[k], "stage %lld stream %d", (long long)r, k);
                cr_assert_eq(p->exposed_ps[k] + s->exposed_ps[k], w->exposed_ps[k], "stage %lld stream %d",
                             (long long)r, k);
            }
        }
        free(m1.stages);
        free(m2.stages);
        request_free(&lo);
        request_free(&hi);
    }
    free(whole.stages);
    step_destroy(x.st);
    sim_free(&a);
}

/* The block's sums are those of the tasks it holds, else (a counter it
 * changes) nothing at all. */
Test(measure4, block_sums_are_its_tasks)
{
    sim x;
    run_llama(&x);
    step_t *st = x.st;
    const size_t n = eng_num_tasks(st->eng);
    for (int parity = 0; parity < 2; parity++) {
        request q;
        request_init(&q, st, 0, eng_makespan(st->eng));
        uint64_t tasks = 0;
        sim_time_ps work = 0;
        for (size_t t = 0; t < n; t++) {
            q.block[t] = (int32_t)(t % 2 == (size_t)parity) + 1;
            if (q.block[t] == 2) {
                tasks++;
                work += eng_task_end(st->eng, (eng_task)t) - eng_task_start(st->eng, (eng_task)t);
            }
        }
        q.per.blk = 2;
        step_meas ms = {0};
        measure(st, &q, &ms);
        if (q.derived) {
            cr_assert_eq(q.inc.tasks, tasks);
            cr_assert_eq(q.inc.work_ps, work);
        } else {
            cr_assert_null(q.inc.stages);
            cr_assert_eq(q.inc.tasks, 0);
            cr_assert_eq(q.inc.work_ps, 0);
        }
        free(ms.stages);
        request_free(&q);
    }
    sim_free(&x);
}

/* Derived where a timed task after the cut holds the latest end and a
 * timed pass's last task the passes' latest end; the other tasks, timed
 * or not, change nothing. */
Test(measure4, latest_ends_need_a_timed_task_that_holds_them)
{
    sim x;
    run_llama(&x);
    step_t *st = x.st;
    const engine_t *e = st->eng;
    const size_t n = eng_num_tasks(e);
    const sim_time_ps latest = eng_makespan(e);
    sim_time_ps pipe_end = 0;
    for (size_t pi = 0; pi < (size_t)(st->pp * st->rank_passes); pi++)
        if (st->passes[pi].last >= 0 && eng_task_end(e, st->passes[pi].last) > pipe_end)
            pipe_end = eng_task_end(e, st->passes[pi].last);
    /* holds[t]: 1 at the latest end, 2 a pass's last at the passes'. */
    uint8_t *holds = calloc(n, 1);
    cr_assert_not_null(holds);
    for (size_t t = 0; t < n; t++)
        holds[t] = eng_task_end(e, (eng_task)t) == latest;
    for (size_t pi = 0; pi < (size_t)(st->pp * st->rank_passes); pi++) {
        const eng_task t = st->passes[pi].last;
        if (t >= 0 && eng_task_end(e, t) == pipe_end)
            holds[t] |= 2;
    }
    /* Which tasks are timed, and whether that is derived. */
    const struct {
        int mode;
        bool want;
    } cases[] = {{0, true}, {1, false}, {2, false}, {3, false}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        request q;
        request_init(&q, st, 0, latest);
        for (size_t t = 0; t < n; t++) {
            switch (cases[c].mode) {
            case 0: /* only those that hold a latest end */
                q.timed[t] = holds[t] != 0;
                break;
            case 1: /* all but those at the latest end */
                q.timed[t] = !(holds[t] & 1);
                break;
            case 2: /* all but the passes' last at their latest end */
                q.timed[t] = !(holds[t] & 2);
                break;
            default: /* those that hold one, all in the block before */
                q.timed[t] = holds[t] != 0;
                q.block[t] = holds[t] ? 0 : 1;
                break;
            }
        }
        step_meas ms = {0};
        measure(st, &q, &ms);
        cr_assert_eq(q.derived, cases[c].want, "case %zu", c);
        if (!q.derived)
            cr_assert_null(q.inc.stages, "case %zu", c);
        free(ms.stages);
        request_free(&q);
    }
    free(holds);
    sim_free(&x);
}

Test(measure4, task_tags_at_once_are_each_tasks_tag)
{
    engine_t *e = eng_create(2, 1, 4, 4);
    cr_assert_not_null(e);
    const int32_t streams[] = {0, 1, 0, 1, 1};
    const sim_time_ps durations[] = {5, 7, 3, 0, 11};
    cr_assert_eq(eng_add_tasks(e, 5, streams, durations, 40), 0);
    cr_assert_eq(eng_add_task(e, 0, 9, -3), 5);
    /* Added after the first read: the array is read again. */
    cr_assert_eq(eng_add_tasks(e, 3, streams, durations, 1000), 6);
    const int32_t *tags = eng_task_tags(e);
    const int32_t want[] = {40, 41, 42, 43, 44, -3, 1000, 1001, 1002};
    cr_assert_eq(eng_num_tasks(e), 9);
    for (size_t t = 0; t < 9; t++) {
        cr_assert_eq(tags[t], want[t], "task %zu", t);
        cr_assert_eq(tags[t], eng_task_tag(e, (eng_task)t), "task %zu", t);
    }
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(eng_run(e, &err), SIM_OK, "%s", err.msg);
    cr_assert_eq(eng_task_tags(e)[8], 1002);
    eng_destroy(e);
}
