/* Test helper: the step of a bundled configuration (configs/FILE) with
 * overrides, a global batch, and the steady extension on or off, resolved
 * the way the command line does (cfg_resolve_all); period_check makes a
 * step from one sample simulate its second sample too and compare. */
#ifndef PARSIM_TESTS_LAYOUT_RUN_H
#define PARSIM_TESTS_LAYOUT_RUN_H

#include <criterion/criterion.h>

#include <stdbool.h>
#include <stdio.h>

#include "config.h"
#include "step.h"
#include "strategy.h"

typedef struct layout {
    const char *file;    /* under configs/ */
    const char *over[8]; /* overrides, NULL-terminated */
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

#endif
