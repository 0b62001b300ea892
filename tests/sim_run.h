/* Test helper: resolves KEY=VALUE overrides (NULL-terminated, presets from
 * the source tree PARSIM_SOURCE_DIR) the way the command line does
 * (cfg_resolve_all) and runs the step, asserting each stage succeeds. */
#ifndef PARSIM_TESTS_SIM_RUN_H
#define PARSIM_TESTS_SIM_RUN_H

#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "config.h"
#include "step.h"
#include "strategy.h"

typedef struct sim {
    cfg_t *cfg;
    run_inputs in;
    strategy_t s;
    step_t *st;
} sim;

static inline void sim_run(sim *x, const char *const *kv)
{
    sim_err err;
    sim_err_clear(&err);
    x->cfg = cfg_create(PARSIM_SOURCE_DIR);
    cr_assert_not_null(x->cfg);
    for (; *kv; kv++)
        cr_assert_eq(cfg_set_override(x->cfg, *kv, &err), SIM_OK, "%s: %s", *kv, err.msg);
    char buf[1024];
    int rc = cfg_resolve_all(x->cfg, &x->in, &x->s, &err);
    if (rc == SIM_OK)
        rc = step_run(&x->st, &x->in, &x->s, &err);
    sim_err_format(&err, buf, sizeof buf);
    cr_assert_eq(rc, SIM_OK, "%s", buf);
}

/* The same inputs as a, simulated with every kernel a task (no pass
 * stands as one task): b owns only its step (step_destroy(b->st)). */
static inline void sim_rerun_every_kernel(const sim *a, sim *b)
{
    sim_err err;
    sim_err_clear(&err);
    b->cfg = NULL;
    b->in = a->in;
    b->s = a->s;
    b->in.sim.keep_ops = true;
    cr_assert_eq(step_run(&b->st, &b->in, &b->s, &err), SIM_OK, "%s", err.msg);
}

/* Resolves "KEY=VALUE KEY=VALUE ..." as the command line does into *in and
 * *s, asserting it succeeds. */
static inline void sim_resolve_args(const char *args, run_inputs *in, strategy_t *s)
{
    sim_err err;
    sim_err_clear(&err);
    cfg_t *cfg = cfg_create(PARSIM_SOURCE_DIR);
    cr_assert_not_null(cfg);
    char buf[2048], *save = NULL;
    snprintf(buf, sizeof buf, "%s", args);
    for (char *kv = strtok_r(buf, " ", &save); kv; kv = strtok_r(NULL, " ", &save))
        cr_assert_eq(cfg_set_override(cfg, kv, &err), SIM_OK, "%s: %s", kv, err.msg);
    char msg[1024];
    int rc = cfg_resolve_all(cfg, in, s, &err);
    sim_err_format(&err, msg, sizeof msg);
    cr_assert_eq(rc, SIM_OK, "%s: %s", args, msg);
    cfg_destroy(cfg);
}

static inline void sim_free(sim *x)
{
    step_destroy(x->st);
    cfg_destroy(x->cfg);
}

#endif
