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

/* l at gbs from one sample: the second sample agrees, and every figure is
 * the whole simulation's. */
static void one_sample_exact(const layout *l, const char *gbs)
{
    step_t *one = layout_step(l, gbs, true, true), *whole = layout_step(l, gbs, false, false);
    cr_assert_eq(step_samples(one), 1, "%s %s gbs %s: from %d samples", l->file, l->over[0] ? l->over[0] : "", gbs,
                 step_samples(one));
    cr_assert_eq(step_period_checked(one), 1, "%s %s gbs %s: the second sample differs", l->file,
                 l->over[0] ? l->over[0] : "", gbs);
    cr_assert_eq(step_samples(whole), 0);
    layout_same_results(l, gbs, one, whole);
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
    step_t *st = layout_step(&l, "32", true, true);
    cr_assert_eq(step_samples(st), 0);
    cr_assert_eq(step_period_checked(st), 0);
    step_destroy(st);
}
