/* Tests of the pipeline schedules beyond Megatron's orders and of the
 * schedule's shape: the pass-kind table, chunk placement (loop and V),
 * items of two overlapped passes. */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "schedule.h"

Test(pipeline_schedules, pass_kind_table)
{
    /* F sends downstream, B upstream, W nowhere; B follows F, W follows B. */
    cr_assert_str_eq(sched_kind_of(SCHED_F)->name, "F");
    cr_assert_str_eq(sched_kind_of(SCHED_B)->name, "B");
    cr_assert_str_eq(sched_kind_of(SCHED_W)->name, "W");
    cr_assert_eq(sched_kind_of(SCHED_F)->send_dir, 1);
    cr_assert_eq(sched_kind_of(SCHED_B)->send_dir, -1);
    cr_assert_eq(sched_kind_of(SCHED_W)->send_dir, 0);
    cr_assert_null(sched_kind_of(SCHED_W)->send);
    cr_assert_eq(sched_kind_of(SCHED_F)->after, -1);
    cr_assert_eq(sched_kind_of(SCHED_B)->after, SCHED_F);
    cr_assert_eq(sched_kind_of(SCHED_W)->after, SCHED_B);

    sched_plan whole = {.p = 4, .v = 1, .M = 8, .N = 4}, split = whole;
    split.split = true;
    cr_assert_eq(sched_plan_kinds(&whole), 2);
    cr_assert_eq(sched_plan_kinds(&split), 3);
    cr_assert(!sched_plan_has(&whole, SCHED_W));
    cr_assert(sched_plan_has(&split, SCHED_W));
    /* Activations live until the last pass of a microbatch that reads them. */
    cr_assert_eq(sched_plan_free_kind(&whole), SCHED_B);
    cr_assert_eq(sched_plan_free_kind(&split), SCHED_W);
    cr_assert_eq(sched_plan_grad_kind(&whole), SCHED_B);
    cr_assert_eq(sched_plan_grad_kind(&split), SCHED_W);
    /* Megatron's orders: F and B per (microbatch, chunk). */
    cr_assert_eq(sched_len(8, 3), 2 * 8 * 3);
}

Test(pipeline_schedules, loop_placement_is_megatrons)
{
    sched_plan pl = {.p = 4, .v = 3, .M = 8, .N = 4, .place = SCHED_PLACE_LOOP};
    for (int64_t r = 0; r < pl.p; r++)
        for (int64_t c = 0; c < pl.v; c++) {
            int64_t vs = sched_vstage(&pl, r, c), rr, cc;
            cr_assert_eq(vs, c * pl.p + r);
            sched_locate(&pl, vs, &rr, &cc);
            cr_assert_eq(rr, r);
            cr_assert_eq(cc, c);
        }
}

Test(pipeline_schedules, v_placement_folds_the_chunks)
{
    /* p = 4: rank 0 holds virtual stages 0 and 7, rank 3 holds 3 and 4
     * (the bottom of the V, one rank runs both in a row). */
    sched_plan pl = {.p = 4, .v = 2, .M = 8, .N = 4, .place = SCHED_PLACE_V};
    const int64_t want[4][2] = {{0, 7}, {1, 6}, {2, 5}, {3, 4}};
    bool seen[8] = {false};
    for (int64_t r = 0; r < pl.p; r++)
        for (int64_t c = 0; c < pl.v; c++) {
            int64_t vs = sched_vstage(&pl, r, c), rr, cc;
            cr_assert_eq(vs, want[r][c], "rank %lld chunk %lld: vstage %lld", (long long)r, (long long)c,
                         (long long)vs);
            cr_assert(!seen[vs]);
            seen[vs] = true;
            sched_locate(&pl, vs, &rr, &cc);
            cr_assert_eq(rr, r);
            cr_assert_eq(cc, c);
        }
}

Test(pipeline_schedules, item_of_two_overlapped_passes)
{
    sched_item one = sched_one(SCHED_B, 5, 1);
    cr_assert_eq(one.n_passes, 1);
    cr_assert_eq(one.pass[0].kind, SCHED_B);
    cr_assert_eq(one.pass[0].microbatch, 5);
    cr_assert_eq(one.pass[0].chunk, 1);
    sched_item fb = sched_pair((sched_pass){SCHED_F, 7, 0}, (sched_pass){SCHED_B, 2, 1});
    cr_assert_eq(fb.n_passes, 2);
    cr_assert_eq(fb.pass[0].kind, SCHED_F);
    cr_assert_eq(fb.pass[0].microbatch, 7);
    cr_assert_eq(fb.pass[0].chunk, 0);
    cr_assert_eq(fb.pass[1].kind, SCHED_B);
    cr_assert_eq(fb.pass[1].microbatch, 2);
    cr_assert_eq(fb.pass[1].chunk, 1);
}

Test(pipeline_schedules, megatron_items_hold_one_pass)
{
    const int64_t p = 4, v = 2, M = 8;
    sched_item *s = calloc((size_t)sched_len(M, v), sizeof *s);
    sim_err err;
    sim_err_clear(&err);
    for (int64_t r = 0; r < p; r++) {
        cr_assert_eq(sched_build(p, v, M, p, r, s, &err), SIM_OK, "%s", err.msg);
        for (int64_t k = 0; k < sched_len(M, v); k++)
            cr_assert_eq(s[k].n_passes, 1);
    }
    free(s);
}
