/* Test helper: the workload of resolved inputs with every op kept (no pass
 * stands as one task), for tests that read a pass's ops. */
#ifndef PARSIM_TESTS_WL_KEPT_H
#define PARSIM_TESTS_WL_KEPT_H

#include <criterion/criterion.h>

#include "workload.h"

static inline workload_t *wl_kept(const run_inputs *resolved, const strategy_t *s)
{
    run_inputs in = *resolved;
    in.sim.keep_ops = true;
    workload_t *w = NULL;
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(workload_build(&w, &in, s, &err), SIM_OK, "%s", err.msg);
    return w;
}

#endif
