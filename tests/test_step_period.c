/* step_period: a step derived from two short samples (sim.steady_extension)
 * holds every figure of step_result bit for bit as the whole simulation,
 * on layouts across the schedules, MoE, CP, host modeling, FSDP and PP;
 * and where the timeline is too short or not periodic it simulates the
 * whole step, with the same result. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "step.h"
#include "strategy.h"

typedef struct layout {
    const char *file;            /* under configs/ */
    const char *over[8];         /* overrides, NULL-terminated */
} layout;

/* Runs a layout with the extension on and off; returns whether the first
 * was extended, and asserts that every figure is the same. */
static bool same_both_ways(const layout *l, const char *gbs)
{
    step_t *st[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        sim_err err;
        sim_err_clear(&err);
        cfg_t *cfg = cfg_create(PARSIM_SOURCE_DIR);
        cr_assert_not_null(cfg);
        char path[512], a[96];
        snprintf(path, sizeof path, "%s/configs/%s", PARSIM_SOURCE_DIR, l->file);
        int rc = cfg_load_file(cfg, path, CFG_PRIO_FILE, &err);
        for (int i = 0; rc == SIM_OK && l->over[i]; i++)
            rc = cfg_set_override(cfg, l->over[i], &err);
        snprintf(a, sizeof a, "train.global_batch_size=%s", gbs);
        if (rc == SIM_OK)
            rc = cfg_set_override(cfg, a, &err);
        if (rc == SIM_OK)
            rc = cfg_set_override(cfg, k == 0 ? "sim.steady_extension=true" : "sim.steady_extension=false", &err);
        run_inputs in;
        strategy_t s;
        if (rc == SIM_OK)
            rc = cfg_resolve_all(cfg, &in, &s, &err);
        if (rc == SIM_OK)
            rc = step_run(&st[k], &in, &s, &err);
        char msg[1024];
        sim_err_format(&err, msg, sizeof msg);
        cr_assert_eq(rc, SIM_OK, "%s %s gbs %s: %s", l->file, l->over[0] ? l->over[0] : "", gbs, msg);
        cfg_destroy(cfg);
    }
    const step_result *x = step_result_get(st[0]), *y = step_result_get(st[1]);
    cr_assert(!step_extended(st[1]));
    cr_assert_eq(x->n_stages, y->n_stages);
    step_result xs = *x, ys = *y;
    xs.stages = ys.stages = NULL;
    cr_assert(memcmp(&xs, &ys, sizeof xs) == 0,
                 "%s %s gbs %s: step %.17g/%.17g pipeline %.17g/%.17g bubble %.17g/%.17g tasks %llu/%llu "
                 "events %llu/%llu exposed %.17g/%.17g",
                 l->file, l->over[0] ? l->over[0] : "", gbs, x->step_time_s, y->step_time_s, x->pipeline_s,
                 y->pipeline_s, x->bubble_fraction, y->bubble_fraction, (unsigned long long)x->tasks,
                 (unsigned long long)y->tasks, (unsigned long long)x->events, (unsigned long long)y->events,
                 x->exposed_total_s, y->exposed_total_s);
    for (int64_t r = 0; r < x->n_stages; r++)
        cr_assert(memcmp(&x->stages[r], &y->stages[r], sizeof x->stages[r]) == 0,
                     "%s %s gbs %s: stage %lld busy %.17g/%.17g exposed %.17g/%.17g act %.17g/%.17g", l->file,
                     l->over[0] ? l->over[0] : "", gbs, (long long)r, x->stages[r].busy_s, y->stages[r].busy_s,
                     x->stages[r].exposed_total_s, y->stages[r].exposed_total_s,
                     x->stages[r].activations_peak_bytes, y->stages[r].activations_peak_bytes);
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
    {"llama3-70b-h100x64.cfg", {"model.virtual_pipeline_model_parallel_size=1", "ddp.use_megatron_fsdp=true",
                                "ddp.data_parallel_sharding_strategy=\"optim_grads_params\"", NULL}},
    {"mixtral-8x7b-h100x64.cfg", {NULL}},
    {"mixtral-8x7b-h100x64.cfg", {"model.overlap_moe_expert_parallel_comm=true", NULL}},
    {"gpt3-175b-h100x1024.cfg", {NULL}},
    {"deepseek-v3-h100x256.cfg", {NULL}},
};

Test(step_period, every_figure_as_the_whole_simulation, .timeout = 600)
{
    const char *gbs[] = {"256", "1024"};
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
