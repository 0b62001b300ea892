/* step_period's two samples: a step whose figures come from a first
 * sample and a second one period longer, because the first does not give
 * what a period adds (its window holds less than a period, or
 * step_measure's period request declines), holds every figure of
 * step_result bit for bit as the whole simulation (and says it came from
 * two: a step whose samples fail is walked whole and says 0).  Llama 3
 * 70B on 1,024 H100s with CP 4 (all-gather, hierarchical a2a+p2p), PP 2
 * and 4, with and without VP, its host's launches and sustained clock as
 * the H100 fit has them (topologies/fitted, set here so that a refit does
 * not move the test): layouts the exhaustive search takes from two. */
#include <criterion/criterion.h>
#include <stdio.h>

#include "config.h"
#include "step.h"
#include "strategy.h"
#include "layout_run.h"

/* l at gbs from two samples, and every figure the whole simulation's. */
static void two_samples_exact(const layout *l, const char *gbs)
{
    step_t *two = layout_step(l, gbs, true, false), *whole = layout_step(l, gbs, false, false);
    cr_assert_eq(step_samples(two), 2, "%s %s gbs %s: from %d samples", l->file, l->over[0] ? l->over[0] : "", gbs,
                 step_samples(two));
    cr_assert_eq(step_samples(whole), 0);
    layout_same_results(l, gbs, two, whole);
    step_destroy(two);
    step_destroy(whole);
}



#define FITTED_H100 "cluster.num_gpus=1024", "cluster.host.launch_us=54.1911", "cluster.compute.sustained_fraction=0.842683"

Test(step_two_samples, interleaved_pp4)
{
    const layout l = {"llama3-70b-h100x64.cfg",
                      {FITTED_H100, "model.tensor_model_parallel_size=8", "model.pipeline_model_parallel_size=4",
                       "model.virtual_pipeline_model_parallel_size=4", "model.context_parallel_size=4", NULL}};
    two_samples_exact(&l, "1024");
}

Test(step_two_samples, interleaved_pp2)
{
    const layout l = {"llama3-70b-h100x64.cfg",
                      {FITTED_H100, "model.tensor_model_parallel_size=8", "model.pipeline_model_parallel_size=2",
                       "model.virtual_pipeline_model_parallel_size=5", "model.context_parallel_size=4", "model.cp_comm_type=all_gather", NULL}};
    two_samples_exact(&l, "1024");
}

Test(step_two_samples, one_f_one_b)
{
    const layout l = {"llama3-70b-h100x64.cfg",
                      {FITTED_H100, "model.tensor_model_parallel_size=8", "model.pipeline_model_parallel_size=2",
                       "model.virtual_pipeline_model_parallel_size=1", "model.context_parallel_size=4",
                       "model.cp_comm_type=a2a+p2p", "model.hierarchical_context_parallel_sizes=[2,2]", NULL}};
    two_samples_exact(&l, "1024");
}
