/* step_period on host-bound CP layouts (H100 host costs as fitted: the host
 * issues a period's passes in more time than their compute takes): the
 * GPU waits on a host that catches up by a fraction of a percent a block,
 * so the first sample ends inside that transient.  A layout whose
 * transient ends inside a sample that still pays is derived from two
 * samples, and one whose transient outlasts every such sample is
 * simulated whole; both hold every figure of step_result bit for bit as
 * the whole simulation. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "step.h"
#include "strategy.h"

/* Llama 3 70B on 64 H100s, TP 4 PP 2 CP 8 (1F1B), the host's launch cost
 * and the compute fraction of topologies/fitted/dgx-h100.cfg. */
static const char *const base[] = {
    "model.tensor_model_parallel_size=4", "model.pipeline_model_parallel_size=2",
    "model.virtual_pipeline_model_parallel_size=1", "model.context_parallel_size=8",
    "model.sequence_parallel=false", "cluster.host.launch_us=53.4251", "cluster.compute.sustained_fraction=0.852106",
    "ddp.overlap_grad_reduce=true", "ddp.overlap_param_gather=true", NULL,
};

/* Runs the layout with the extension on and off (the same inputs
 * otherwise), asserts every figure equal, and returns whether the first
 * was derived from samples. */
static bool same_both_ways(const char *extra)
{
    sim_err err;
    sim_err_clear(&err);
    cfg_t *cfg = cfg_create(PARSIM_SOURCE_DIR);
    cr_assert_not_null(cfg);
    char path[512];
    snprintf(path, sizeof path, "%s/configs/llama3-70b-h100x64.cfg", PARSIM_SOURCE_DIR);
    int rc = cfg_load_file(cfg, path, CFG_PRIO_FILE, &err);
    for (int i = 0; rc == SIM_OK && base[i]; i++)
        rc = cfg_set_override(cfg, base[i], &err);
    if (rc == SIM_OK)
        rc = cfg_set_override(cfg, extra, &err);
    run_inputs in;
    strategy_t s;
    if (rc == SIM_OK)
        rc = cfg_resolve_all(cfg, &in, &s, &err);
    step_t *st[2] = {NULL, NULL};
    for (int k = 0; k < 2 && rc == SIM_OK; k++) {
        in.sim.steady_extension = k == 0;
        rc = step_run(&st[k], &in, &s, &err);
    }
    char msg[1024];
    sim_err_format(&err, msg, sizeof msg);
    cr_assert_eq(rc, SIM_OK, "%s: %s", extra, msg);
    const step_result *a = step_result_get(st[0]), *b = step_result_get(st[1]);
    cr_assert(!step_extended(st[1]));
    cr_assert_eq(a->n_stages, b->n_stages);
    step_result as = *a, bs = *b;
    as.stages = bs.stages = NULL;
    cr_assert(memcmp(&as, &bs, sizeof as) == 0, "%s: step %.17g/%.17g bubble %.17g/%.17g tasks %llu/%llu", extra,
              a->step_time_s, b->step_time_s, a->bubble_fraction, b->bubble_fraction, (unsigned long long)a->tasks,
              (unsigned long long)b->tasks);
    for (int64_t r = 0; r < a->n_stages; r++)
        cr_assert(memcmp(&a->stages[r], &b->stages[r], sizeof a->stages[r]) == 0, "%s: stage %lld busy %.17g/%.17g",
                  extra, (long long)r, a->stages[r].busy_s, b->stages[r].busy_s);
    const bool ext = step_extended(st[0]);
    step_destroy(st[0]);
    step_destroy(st[1]);
    cfg_destroy(cfg);
    return ext;
}

/* all_gather CP: the transient lasts a few blocks past the first sample;
 * a longer one fits, exact against the whole step. */
Test(step_period3, a_host_bound_cp_layout_fits_exactly, .timeout = 120)
{
    cr_assert(same_both_ways("model.cp_comm_type=\"all_gather\""));
}

/* VP 2 with p2p CP: the host catches up over more blocks than any sample
 * that pays holds: the whole step, the same. */
Test(step_period3, a_transient_past_every_sample_simulates_whole, .timeout = 120)
{
    cr_assert(!same_both_ways("model.virtual_pipeline_model_parallel_size=2"));
}
