/* step_period: a step derived from two short samples (sim.steady_extension)
 * holds every figure of step_result bit for bit as the whole simulation,
 * on layouts across the schedules, MoE, CP, host modeling, FSDP and PP;
 * and where the timeline is too short or not periodic it simulates the
 * whole step, with the same result; and step_period_fit_find on
 * timelines made by hand, periodic and not. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "engine.h"
#include "step.h"
#include "step_period.h"
#include "strategy.h"
#include "streams.h"
#include "layout_run.h"

/* Runs a layout with the extension on and off; returns whether the first
 * was extended, and asserts that every figure is the same. */
static bool same_both_ways(const layout *l, const char *gbs)
{
    step_t *st[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++)
        st[k] = layout_step(l, gbs, k == 0, false);
    cr_assert(!step_extended(st[1]));
    layout_same_results(l, gbs, st[0], st[1]);
    bool ext = step_extended(st[0]);
    step_destroy(st[0]);
    step_destroy(st[1]);
    return ext;
}

static const layout layouts[] = {
    {"llama3-70b-h100x64.cfg", {NULL}},                                              /* VP 5, host on */
    {"llama3-70b-h100x64.cfg", {"model.virtual_pipeline_model_parallel_size=1", NULL}}, /* 1F1B */
    {"llama3-70b-h100x64.cfg", {"model.virtual_pipeline_model_parallel_size=1", "cluster.host.launch_us=0", "cluster.host.op_overhead_us=0", NULL}},
    {"llama3-70b-h100x64.cfg", {"model.virtual_pipeline_model_parallel_size=1", "sim.pipeline_schedule=\"zb-h1\"", NULL}},
    {"llama3-70b-h100x64.cfg", {"model.virtual_pipeline_model_parallel_size=2", "sim.pipeline_schedule=\"zb-v\"", NULL}},
    {"llama3-70b-h100x64.cfg", {"model.virtual_pipeline_model_parallel_size=2", "sim.pipeline_schedule=\"dualpipev\"", NULL}},
    {"llama3-70b-h100x64.cfg", {"model.virtual_pipeline_model_parallel_size=1", "model.pipeline_model_parallel_size=2",
                                "model.context_parallel_size=4", NULL}},
    {"llama3-70b-h100x64.cfg", {"model.virtual_pipeline_model_parallel_size=1", "model.pipeline_model_parallel_size=8",
                                "model.context_parallel_size=1", NULL}},
    {"llama3-70b-h100x64.cfg", {"model.virtual_pipeline_model_parallel_size=1", "model.pipeline_model_parallel_size=16",
                                "model.context_parallel_size=1", NULL}},
    {"llama3-70b-h100x64.cfg", {"model.virtual_pipeline_model_parallel_size=1", "model.num_layers_in_first_pipeline_stage=17",
                                "model.num_layers_in_last_pipeline_stage=21", NULL}},       /* uneven */
    {"llama3-70b-h100x64.cfg", {"model.virtual_pipeline_model_parallel_size=1", "ddp.use_megatron_fsdp=true",
                                "ddp.data_parallel_sharding_strategy=\"optim_grads_params\"", NULL}},
    {"mixtral-8x7b-h100x64.cfg", {NULL}},
    {"mixtral-8x7b-h100x64.cfg", {"model.overlap_moe_expert_parallel_comm=true", NULL}},
    {"gpt3-175b-h100x1024.cfg", {NULL}},
    {"deepseek-v3-h100x256.cfg", {NULL}},
};

Test(step_period, every_figure_as_the_whole_simulation, .timeout = 600)
{
    const char *gbs[] = {"256", "1024", "2048"};
    int extended = 0, n = 0;
    for (size_t i = 0; i < sizeof layouts / sizeof *layouts; i++)
        for (size_t g = 0; g < sizeof gbs / sizeof *gbs; g++) {
            bool e = same_both_ways(&layouts[i], gbs[g]);
            if (getenv("PERIOD_LIST"))
                printf("%d %s %s %s %s\n", e, layouts[i].file, layouts[i].over[0] ? layouts[i].over[0] : "",
                       layouts[i].over[0] && layouts[i].over[1] ? layouts[i].over[1] : "", gbs[g]);
            extended += e;
            n++;
        }
    /* The extension must engage on a good share of them, or this proves
     * little. */
    cr_assert(extended * 3 >= n, "extended %d of %d", extended, n);
}

/* Too few microbatches for a steady phase: the whole step, the same. */
Test(step_period, short_steps_simulate_whole)
{
    const layout l = {"llama3-70b-h100x64.cfg", {"model.virtual_pipeline_model_parallel_size=1", NULL}};
    cr_assert(!same_both_ways(&l, "32"));
}

/* ---- step_period_fit_find on a timeline made by hand -------------------- */

/* One stage running F0 B0 F1 B1 ... on its compute stream, each F sending
 * on the pp stream; tag = pass position, tasks named by kind. */
typedef struct toy {
    engine_t *e;
    sched_pass seq[64];
    int32_t task_pass[256];
    uint8_t timed[256]; /* all: compute and pp tasks */
    int32_t tag_mb[256];
    const char *tag_name[256];
    int n;
} toy;

static bool toy_same(const void *ctx, eng_task a, eng_task b)
{
    const toy *t = ctx;
    int32_t x = eng_task_tag(t->e, a), y = eng_task_tag(t->e, b);
    return t->tag_name[x] == t->tag_name[y] && t->tag_mb[y] == t->tag_mb[x] + 1;
}

static const char TOY_F[] = "F", TOY_B[] = "B", TOY_SEND[] = "send";

/* M microbatches; with `cycle3` each B lasts 1 ns more than the last,
 * every third microbatch back to the first: a period of three. */
static void toy_build(toy *t, int M, bool cycle3)
{
    memset(t, 0, sizeof *t);
    t->e = eng_create(STREAM_KINDS, 2, 64, 64);
    cr_assert_not_null(t->e);
    for (int i = 0; i < 2 * M; i++) {
        const int mb = i / 2, kind = i % 2;
        t->seq[i] = (sched_pass){.kind = (uint8_t)kind, .microbatch = mb, .chunk = 0};
        sim_time_ps d = kind == 0 ? 3000 : 5000 + (cycle3 ? 1000 * (sim_time_ps)(mb % 3) : 0);
        eng_task p = eng_add_task(t->e, STREAM_COMPUTE, d, t->n);
        t->tag_mb[t->n] = mb;
        t->tag_name[t->n] = kind == 0 ? TOY_F : TOY_B;
        t->task_pass[p] = i;
        t->n++;
        cr_assert_eq(eng_add_counter_delta(t->e, p, 0, kind == 0 ? 1 : 0, kind == 0 ? 0 : -1), SIM_OK);
        if (kind == 0) {
            eng_task s = eng_add_task(t->e, STREAM_PP, 1000, t->n);
            t->tag_mb[t->n] = mb;
            t->tag_name[t->n] = TOY_SEND;
            t->task_pass[s] = i;
            t->n++;
            cr_assert_eq(eng_add_dep(t->e, p, s), SIM_OK);
        }
    }
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(eng_run(t->e, &err), SIM_OK);
}

static bool toy_fit(toy *t, int M, step_period_fit *fit)
{
    const step_timeline tl = {.eng = t->e, .same_task = toy_same, .ctx = t, .pp = 1,
                              .streams_per_stage = STREAM_KINDS, .rank_passes = 2 * M, .seq = t->seq,
                              .task_pass = t->task_pass, .timed = t->timed, .period_mb = 1, .period_passes = 2};
    memset(t->timed, 1, sizeof t->timed);
    return step_period_fit_find(&tl, fit);
}

Test(step_period, a_periodic_timeline_fits)
{
    toy t;
    step_period_fit fit;
    toy_build(&t, 12, false);
    cr_assert(toy_fit(&t, 12, &fit));
    cr_assert_eq(fit.lambda_ps, 8000); /* F + B: the compute stream is the cycle */
    cr_assert(fit.cut >= 0 && fit.cut + 2 < fit.blocks);
    eng_destroy(t.e);
}

Test(step_period, a_timeline_that_does_not_repeat_each_period_does_not)
{
    toy t;
    step_period_fit fit;
    /* Periodic, but over three microbatches, not one. */
    toy_build(&t, 12, true);
    cr_assert(!toy_fit(&t, 12, &fit));
    eng_destroy(t.e);
    /* And a shift that changes along the step: each B longer than the last. */
    memset(&t, 0, sizeof t);
    t.e = eng_create(STREAM_KINDS, 2, 64, 64);
    for (int i = 0; i < 24; i++) {
        t.seq[i] = (sched_pass){.kind = (uint8_t)(i % 2), .microbatch = i / 2, .chunk = 0};
        eng_task p = eng_add_task(t.e, STREAM_COMPUTE, i % 2 ? 5000 + 100 * (sim_time_ps)i : 3000, t.n);
        t.tag_mb[t.n] = i / 2;
        t.tag_name[t.n] = i % 2 ? TOY_B : TOY_F;
        t.task_pass[p] = i;
        t.n++;
    }
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(eng_run(t.e, &err), SIM_OK);
    cr_assert(!toy_fit(&t, 12, &fit));
    eng_destroy(t.e);
}
