/* The worker pool (sim/pool.h): every item once on its own worker number,
 * the first error in hand-out order whatever the threads, nothing handed
 * out after a failure with stop_on_error, on_done once per item in turn. */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "pool.h"

enum { N_ITEMS = 500 };

typedef struct counts {
    atomic_int runs[N_ITEMS];
    atomic_int by_worker[POOL_MAX_WORKERS];
    int workers;          /* pool_workers of the job */
    atomic_int bad_worker;
    const int *fail_code; /* per item: the code it returns (0: SIM_OK), or NULL */
    int slow_item;        /* sleeps 30 ms first (-1: none) */
    int nap_from;         /* items from this one sleep 1 ms first (-1: none) */
    size_t done_calls, last_done;
    bool done_out_of_turn;
} counts;

static void nap_ms(long ms)
{
    struct timespec t = {0, ms * 1000000L};
    nanosleep(&t, NULL);
}

static int count_item(void *ctx, int worker, size_t item, sim_err *err)
{
    counts *c = ctx;
    if (worker < 0 || worker >= c->workers)
        atomic_store(&c->bad_worker, 1);
    else
        atomic_fetch_add(&c->by_worker[worker], 1);
    if ((int)item == c->slow_item)
        nap_ms(30);
    if (c->nap_from >= 0 && (int)item >= c->nap_from)
        nap_ms(1);
    atomic_fetch_add(&c->runs[item], 1);
    int code = c->fail_code ? c->fail_code[item] : SIM_OK;
    if (code == SIM_EINVAL)
        return sim_err_set(err, code, "item %zu is bad", item);
    return code; /* SIM_EIO: a code without a message */
}

static void on_done(void *ctx, size_t item, size_t done)
{
    counts *c = ctx;
    (void)item;
    c->done_calls++;
    if (done != c->last_done + 1)
        c->done_out_of_turn = true;
    c->last_done = done;
}

static void reset(counts *c)
{
    memset(c, 0, sizeof *c);
    c->slow_item = -1;
    c->nap_from = -1;
}

Test(pool, every_item_once_on_a_worker_of_its_own_number)
{
    static counts c;
    static const int jobs[] = {0, 1, 2, 7, 1000};
    for (size_t k = 0; k < sizeof jobs / sizeof jobs[0]; k++) {
        reset(&c);
        pool_job j = {.jobs = jobs[k], .n = N_ITEMS, .fn = count_item, .ctx = &c, .on_done = on_done};
        c.workers = pool_workers(&j);
        int want = jobs[k] < 1 ? 1 : jobs[k] > POOL_MAX_WORKERS ? POOL_MAX_WORKERS : jobs[k];
        cr_expect_eq(c.workers, want, "--jobs %d: %d workers", jobs[k], c.workers);
        cr_assert_eq(pool_run(&j, NULL), SIM_OK);
        int total = 0;
        for (int i = 0; i < N_ITEMS; i++)
            cr_expect_eq(atomic_load(&c.runs[i]), 1, "jobs %d: item %d ran %d times", jobs[k], i, c.runs[i]);
        for (int w = 0; w < c.workers; w++)
            total += atomic_load(&c.by_worker[w]);
        cr_expect_eq(total, N_ITEMS);
        cr_expect_not(atomic_load(&c.bad_worker), "jobs %d: a worker number outside 0..%d", jobs[k], c.workers - 1);
        cr_expect_eq(c.done_calls, (size_t)N_ITEMS, "on_done once per item");
        cr_expect_not(c.done_out_of_turn, "on_done counts 1, 2, .. one call at a time");
    }
}

Test(pool, an_item_list_runs_those_items_only)
{
    static counts c;
    reset(&c);
    const size_t items[] = {5, 3, 499, 0};
    pool_job j = {.jobs = 3, .n = 4, .items = items, .fn = count_item, .ctx = &c};
    c.workers = pool_workers(&j);
    cr_expect_eq(c.workers, 3);
    cr_assert_eq(pool_run(&j, NULL), SIM_OK);
    for (int i = 0; i < N_ITEMS; i++)
        cr_expect_eq(atomic_load(&c.runs[i]), i == 5 || i == 3 || i == 499 || i == 0, "item %d", i);
    /* no items: nothing runs, one worker */
    pool_job none = {.jobs = 8, .n = 0, .fn = count_item, .ctx = &c};
    cr_expect_eq(pool_workers(&none), 1);
    cr_expect_eq(pool_run(&none, NULL), SIM_OK);
}

/* Items 40 and 300 fail; 40 is slow, so with several threads 300 fails
 * first in time: the error is still 40's. */
Test(pool, the_first_failure_in_hand_out_order_is_the_error)
{
    static counts c;
    static int codes[N_ITEMS];
    codes[40] = SIM_EINVAL;
    codes[300] = SIM_EINVAL;
    for (int jobs = 1; jobs <= 4; jobs++) {
        reset(&c);
        c.fail_code = codes;
        c.slow_item = 40;
        pool_job j = {.jobs = jobs, .n = N_ITEMS, .fn = count_item, .ctx = &c};
        c.workers = pool_workers(&j);
        sim_err err;
        sim_err_clear(&err);
        cr_assert_eq(pool_run(&j, &err), SIM_EINVAL, "jobs %d", jobs);
        cr_expect_str_eq(err.msg, "item 40 is bad", "jobs %d", jobs);
        for (int i = 0; i < N_ITEMS; i++) /* without stop_on_error every item runs */
            cr_expect_eq(atomic_load(&c.runs[i]), 1, "jobs %d: item %d", jobs, i);
    }
}

Test(pool, stop_on_error_hands_out_nothing_after_the_failure)
{
    static counts c;
    static int codes[N_ITEMS];
    codes[10] = SIM_EIO; /* no message: the code travels */
    reset(&c);
    c.fail_code = codes;
    pool_job j = {.jobs = 1, .n = N_ITEMS, .fn = count_item, .ctx = &c, .stop_on_error = true};
    c.workers = pool_workers(&j);
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(pool_run(&j, &err), SIM_EIO);
    cr_expect_eq(err.code, SIM_EIO);
    for (int i = 0; i < N_ITEMS; i++)
        cr_expect_eq(atomic_load(&c.runs[i]), i <= 10, "one thread: item %d ran %d times", i, c.runs[i]);
    /* several threads: everything before the failure runs, and it is the error */
    reset(&c);
    c.fail_code = codes;
    c.nap_from = 11; /* the failure is recorded long before the rest could run */
    j.jobs = 4;
    c.workers = pool_workers(&j);
    cr_assert_eq(pool_run(&j, &err), SIM_EIO);
    int ran = 0;
    for (int i = 0; i < N_ITEMS; i++) {
        if (i <= 10)
            cr_expect_eq(atomic_load(&c.runs[i]), 1, "item %d", i);
        ran += atomic_load(&c.runs[i]);
    }
    cr_expect_lt(ran, N_ITEMS, "items after the failure were handed out: %d ran", ran);
}
