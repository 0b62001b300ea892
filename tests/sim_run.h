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

static inline void sim_run_as(sim *x, const char *const *kv, bool graph)
{
    sim_err err;
    sim_err_clear(&err);
    x->cfg = cfg_create(PARSIM_SOURCE_DIR);
    cr_assert_not_null(x->cfg);
    for (; *kv; kv++)
        cr_assert_eq(cfg_set_override(x->cfg, *kv, &err), SIM_OK, "%s: %s", *kv, err.msg);
    char buf[1024];
    int rc = cfg_resolve_all(x->cfg, &x->in, &x->s, &err);
    x->in.sim.graph_only = graph;
    if (rc == SIM_OK)
        rc = step_run(&x->st, &x->in, &x->s, &err);
    sim_err_format(&err, buf, sizeof buf);
    cr_assert_eq(rc, SIM_OK, "%s", buf);
}

static inline void sim_run(sim *x, const char *const *kv)
{
    sim_run_as(x, kv, false);
}

/* sim_run on the step's graph (sim.graph_only): for tests that read its
 * engine (its tasks, a trace). */
static inline void sim_run_graph(sim *x, const char *const *kv)
{
    sim_run_as(x, kv, true);
}

/* Every figure of two steps' results but the tasks and events of their
 * simulations, bit for bit. */
static inline void sim_expect_same_figures(const step_result *a, const step_result *b, const char *what)
{
    cr_assert_eq(a->step_time_s, b->step_time_s, "%s: step time %.12g vs %.12g", what, a->step_time_s, b->step_time_s);
    cr_assert_eq(a->pipeline_s, b->pipeline_s, "%s", what);
    cr_assert_eq(a->bubble_fraction, b->bubble_fraction, "%s", what);
    cr_assert_eq(a->peak_bytes, b->peak_bytes, "%s", what);
    cr_assert_eq(a->exposed_total_s, b->exposed_total_s, "%s", what);
    cr_assert_eq(memcmp(a->comm_s, b->comm_s, sizeof a->comm_s), 0, "%s: busy time per stream", what);
    cr_assert_eq(memcmp(a->exposed_s, b->exposed_s, sizeof a->exposed_s), 0, "%s: exposed time per stream", what);
    cr_assert_eq(a->n_stages, b->n_stages, "%s", what);
    for (int64_t r = 0; r < a->n_stages; r++)
        cr_assert_eq(memcmp(&a->stages[r], &b->stages[r], sizeof a->stages[r]), 0, "%s: stage %lld", what,
                     (long long)r);
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
