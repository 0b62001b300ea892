/* Test helper: the step of a bundled configuration (configs/FILE) with
 * overrides, a global batch, and the steady extension on or off, resolved
 * the way the command line does (cfg_resolve_all); period_check makes a
 * step from one sample simulate its second sample too and compare. */
#ifndef PARSIM_TESTS_LAYOUT_RUN_H
#define PARSIM_TESTS_LAYOUT_RUN_H

#include <criterion/criterion.h>

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "step.h"
#include "strategy.h"

typedef struct layout {
    const char *file;    /* under configs/ */
    const char *over[12]; /* overrides, NULL-terminated */
} layout;

static inline step_t *layout_step(const layout *l, const char *gbs, bool extended, bool period_check)
{
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
        rc = cfg_set_override(cfg, extended ? "sim.steady_extension=true" : "sim.steady_extension=false", &err);
    run_inputs in;
    strategy_t s;
    if (rc == SIM_OK)
        rc = cfg_resolve_all(cfg, &in, &s, &err);
    step_t *st = NULL;
    if (rc == SIM_OK) {
        in.sim.period_check = period_check;
        rc = step_run(&st, &in, &s, &err);
    }
    char msg[1024];
    sim_err_format(&err, msg, sizeof msg);
    cr_assert_eq(rc, SIM_OK, "%s %s gbs %s: %s", l->file, l->over[0] ? l->over[0] : "", gbs, msg);
    cfg_destroy(cfg);
    return st;
}

/* Every figure of a's result and b's (steps of l at gbs) the same, bit
 * for bit. */
static inline void layout_same_results(const layout *l, const char *gbs, const step_t *a, const step_t *b)
{
    const step_result *x = step_result_get(a), *y = step_result_get(b);
    const char *o = l->over[0] ? l->over[0] : "";
    cr_assert_eq(x->n_stages, y->n_stages);
    step_result xs = *x, ys = *y;
    xs.stages = ys.stages = NULL;
    cr_assert(memcmp(&xs, &ys, sizeof xs) == 0,
              "%s %s gbs %s: step %.17g/%.17g pipeline %.17g/%.17g bubble %.17g/%.17g tasks %llu/%llu "
              "events %llu/%llu exposed %.17g/%.17g",
              l->file, o, gbs, x->step_time_s, y->step_time_s, x->pipeline_s, y->pipeline_s, x->bubble_fraction,
              y->bubble_fraction, (unsigned long long)x->tasks, (unsigned long long)y->tasks,
              (unsigned long long)x->events, (unsigned long long)y->events, x->exposed_total_s, y->exposed_total_s);
    for (int64_t r = 0; r < x->n_stages; r++)
        cr_assert(memcmp(&x->stages[r], &y->stages[r], sizeof x->stages[r]) == 0,
                  "%s %s gbs %s: stage %lld busy %.17g/%.17g exposed %.17g/%.17g act %.17g/%.17g", l->file, o, gbs,
                  (long long)r, x->stages[r].busy_s, y->stages[r].busy_s, x->stages[r].exposed_total_s,
                  y->stages[r].exposed_total_s, x->stages[r].activations_peak_bytes,
                  y->stages[r].activations_peak_bytes);
}

#endif
