/* step_period's one sample: a step whose figures come from its first
 * sample and what one period adds, measured on it (step_measure given a period request),
 * holds every figure of step_result bit for bit as the whole simulation,
 * and the second sample one period longer has exactly the figures the
 * first plus one period's give (sim.period_check), on a dense PP layout
 * with VP, a CP layout and an MoE layout with DP buckets. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "step.h"
#include "strategy.h"
#include "layout_run.h"

/* The step of l at gbs: extended on (with the second sample compared)
 * or simulated whole. */
static step_t *run_layout(const layout *l, const char *gbs, bool extended)
{
    return layout_step(l, gbs, extended, extended);
}

/* l at gbs from one sample: the second sample agrees, and every figure is
 * the whole simulation's. */
static void one_sample_exact(const layout *l, const char *gbs)
{
    step_t *one = run_layout(l, gbs, true), *whole = run_layout(l, gbs, false);
    cr_assert_eq(step_samples(one), 1, "%s %s gbs %s: from %d samples", l->file, l->over[0] ? l->over[0] : "", gbs,
                 step_samples(one));
    cr_assert_eq(step_period_checked(one), 1, "%s %s gbs %s: the second sample differs", l->file,
                 l->over[0] ? l->over[0] : "", gbs);
    cr_assert_eq(step_samples(whole), 0);
    const step_result *x = step_result_get(one), *y = step_result_get(whole);
    cr_assert_eq(x->n_stages, y->n_stages);
    step_result xs = *x, ys = *y;
    xs.stages = ys.stages = NULL;
    cr_assert(memcmp(&xs, &ys, sizeof xs) == 0,
              "%s gbs %s: step %.17g/%.17g pipeline %.17g/%.17g bubble %.17g/%.17g tasks %llu/%llu exposed "
              "%.17g/%.17g",
              l->file, gbs, x->step_time_s, y->step_time_s, x->pipeline_s, y->pipeline_s, x->bubble_fraction,
              y->bubble_fraction, (unsigned long long)x->tasks, (unsigned long long)y->tasks, x->exposed_total_s,
              y->exposed_total_s);
    for (int64_t r = 0; r < x->n_stages; r++)
        cr_assert(memcmp(&x->stages[r], &y->stages[r], sizeof x->stages[r]) == 0,
                  "%s gbs %s: stage %lld busy %.17g/%.17g exposed %.17g/%.17g act %.17g/%.17g", l->file, gbs,
                  (long long)r, x->stages[r].busy_s, y->stages[r].busy_s, x->stages[r].exposed_total_s,
                  y->stages[r].exposed_total_s, x->stages[r].activations_peak_bytes,
                  y->stages[r].activations_peak_bytes);
    step_destroy(one);
    step_destroy(whole);
}

Test(step_one_sample, dense_pp_with_vp)
{
    const layout l = {"llama3-70b-h100x64.cfg", {"model.context_parallel_size=1", NULL}}; /* PP 4, VP 5 */
    one_sample_exact(&l, "1024");
    one_sample_exact(&l, "2048");
}

Test(step_one_sample, context_parallel)
{
    const layout l = {"llama3-70b-h100x64.cfg",
                      {"model.virtual_pipeline_model_parallel_size=1", "model.pipeline_model_parallel_size=2",
                       "model.context_parallel_size=4", NULL}};
    one_sample_exact(&l, "1024");
    one_sample_exact(&l, "2048");
}

Test(step_one_sample, moe_with_dp_buckets)
{
    const layout l = {"mixtral-8x7b-h100x64.cfg", {NULL}}; /* PP 4, VP 8, EP 8, overlapped DP buckets */
    one_sample_exact(&l, "1024");
    one_sample_exact(&l, "2048");
}

/* Too few microbatches for sampling: the whole step. */
Test(step_one_sample, short_steps_simulate_whole)
{
    const layout l = {"llama3-70b-h100x64.cfg", {"model.virtual_pipeline_model_parallel_size=1", NULL}};
    step_t *st = run_layout(&l, "32", true);
    cr_assert_eq(step_samples(st), 0);
    cr_assert_eq(step_period_checked(st), 0);
    step_destroy(st);
}
