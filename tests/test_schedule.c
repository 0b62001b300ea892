/* Tests of the pipeline schedules against Megatron Core's schedules.py
 * (reference §3.2-3.3), and of the schedules run on the engine: bubble
 * fraction and in-flight microbatches against their closed forms. */
#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "schedule.h"

static sched_item *build(int64_t p, int64_t v, int64_t M, int64_t N, int64_t rank)
{
    sched_item *out = calloc((size_t)sched_len(M, v), sizeof *out);
    sim_err err;
    sim_err_clear(&err);
    int rc = sched_build(p, v, M, N, rank, out, &err);
    cr_assert_eq(rc, SIM_OK, "sched_build(p=%lld v=%lld M=%lld N=%lld rank=%lld): %s",
                 (long long)p, (long long)v, (long long)M, (long long)N, (long long)rank,
                 err.msg);
    return out;
}

Test(schedule, megatron_code_example_table)
{
    /* get_schedule_table docstring: PP2, N=3, M=5, VP2. */
    const int32_t mb[10] = {0, 1, 2, 0, 1, 2, 3, 4, 3, 4};
    const int32_t ch[10] = {0, 0, 0, 1, 1, 1, 0, 0, 1, 1};
    for (int k = 0; k < 10; k++) {
        int32_t m, c;
        sched_virtual(2, 5, 3, k, &m, &c);
        cr_assert_eq(m, mb[k], "virtual id %d: microbatch %d, expected %d", k, m, mb[k]);
        cr_assert_eq(c, ch[k], "virtual id %d: chunk %d, expected %d", k, c, ch[k]);
    }
}

Test(schedule, table_groups_of_n_with_short_last_group)
{
    /* M=7, N=4, v=3: a group of 4 then the last group of 3. */
    int32_t m, c;
    sched_virtual(3, 7, 4, 0, &m, &c);
    cr_assert(m == 0 && c == 0);
    sched_virtual(3, 7, 4, 5, &m, &c);
    cr_assert(m == 1 && c == 1);
    sched_virtual(3, 7, 4, 11, &m, &c);
    cr_assert(m == 3 && c == 2);
    sched_virtual(3, 7, 4, 12, &m, &c);
    cr_assert(m == 4 && c == 0);
    sched_virtual(3, 7, 4, 16, &m, &c);
    cr_assert(m == 5 && c == 1);
    sched_virtual(3, 7, 4, 20, &m, &c);
    cr_assert(m == 6 && c == 2);
}

Test(schedule, warmup_counts)
{
    /* Non-interleaved: min(p - rank - 1, M). */
    cr_assert_eq(sched_warmup(4, 1, 8, 4, 0), 3);
    cr_assert_eq(sched_warmup(4, 1, 8, 4, 2), 1);
    cr_assert_eq(sched_warmup(4, 1, 8, 4, 3), 0);
    cr_assert_eq(sched_warmup(8, 1, 2, 8, 0), 2);
    cr_assert_eq(sched_warmup(8, 1, 2, 8, 6), 1);
    /* Interleaved: (p - rank - 1)*2 + (v - 1)*N, capped at M*v. */
    cr_assert_eq(sched_warmup(4, 2, 8, 4, 0), 10);
    cr_assert_eq(sched_warmup(4, 2, 8, 4, 3), 4);
    cr_assert_eq(sched_warmup(2, 2, 5, 3, 0), 5);
    cr_assert_eq(sched_warmup(2, 2, 5, 3, 1), 3);
    cr_assert_eq(sched_warmup(8, 3, 16, 8, 0), 30);
    cr_assert_eq(sched_warmup(8, 3, 16, 8, 5), 20);
    cr_assert_eq(sched_warmup(4, 2, 12, 6, 1), 10);
    cr_assert_eq(sched_warmup(4, 2, 4, 4, 0), 8);    /* 10 capped at 8: all warmup */
    cr_assert_eq(sched_warmup(4, 4, 4, 4, 0), 16);   /* 18 capped at 16 */
    /* No pipelining. */
    cr_assert_eq(sched_warmup(1, 1, 8, 1, 0), 0);
}

static void expect_order(const sched_item *got, const char *want)
{
    /* want: "F0.0 B0.0 ..." = kind, microbatch, '.', chunk */
    const char *s = want;
    int k = 0;
    while (*s) {
        char kind;
        int m, c, used;
        cr_assert_eq(sscanf(s, " %c%d.%d%n", &kind, &m, &c, &used), 3);
        cr_assert_eq(got[k].pass[0].kind, kind == 'F' ? SCHED_F : SCHED_B, "item %d", k);
        cr_assert_eq(got[k].pass[0].microbatch, m, "item %d", k);
        cr_assert_eq(got[k].pass[0].chunk, c, "item %d", k);
        k++;
        s += used;
        while (*s == ' ')
            s++;
    }
}

Test(schedule, no_pipelining_alternates)
{
    sched_item *s = build(1, 1, 3, 1, 0);
    expect_order(s, "F0.0 B0.0 F1.0 B1.0 F2.0 B2.0");
    free(s);
}

Test(schedule, one_f_one_b_orders)
{
    sched_item *s = build(2, 1, 3, 2, 0);
    expect_order(s, "F0.0 F1.0 B0.0 F2.0 B1.0 B2.0");
    free(s);
    s = build(2, 1, 3, 2, 1);
    expect_order(s, "F0.0 B0.0 F1.0 B1.0 F2.0 B2.0");
    free(s);
    s = build(4, 1, 2, 4, 0);   /* all forwards in warmup */
    expect_order(s, "F0.0 F1.0 B0.0 B1.0");
    free(s);
}

Test(schedule, interleaved_order)
{
    /* p=2, v=2, M=4, N=2, rank 0: warmup 2 + 2 = 4; table
     * (0,0) (1,0) (0,1) (1,1) (2,0) (3,0) (2,1) (3,1). */
    sched_item *s = build(2, 2, 4, 2, 0);
    expect_order(s, "F0.0 F1.0 F0.1 F1.1 "
                    "F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 "
                    "B2.1 B3.1 B2.0 B3.0");
    free(s);
    s = build(2, 2, 4, 2, 1);   /* warmup 2 */
    expect_order(s, "F0.0 F1.0 "
                    "F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 "
                    "B2.0 B3.0");
    free(s);
}

/* Checks every (kind, microbatch, chunk) once, B after its F, and the
 * warmup prefix of forwards. */
static void check_schedule(int64_t p, int64_t v, int64_t M, int64_t N)
{
    for (int64_t r = 0; r < p; r++) {
        sched_item *s = build(p, v, M, N, r);
        int64_t len = sched_len(M, v);
        int *seen = calloc((size_t)(2 * M * v), sizeof *seen);
        int64_t *f_at = calloc((size_t)(M * v), sizeof *f_at);
        for (int64_t k = 0; k < len; k++) {
            cr_assert_leq(s[k].pass[0].kind, SCHED_B);
            cr_assert(s[k].pass[0].microbatch >= 0 && s[k].pass[0].microbatch < M);
            cr_assert(s[k].pass[0].chunk >= 0 && s[k].pass[0].chunk < v);
            int64_t slot = s[k].pass[0].microbatch * v + s[k].pass[0].chunk;
            cr_assert_eq(seen[s[k].pass[0].kind * M * v + slot]++, 0,
                         "p=%lld v=%lld M=%lld r=%lld: %c%d.%d twice", (long long)p,
                         (long long)v, (long long)M, (long long)r, s[k].pass[0].kind ? 'B' : 'F',
                         s[k].pass[0].microbatch, s[k].pass[0].chunk);
            if (s[k].pass[0].kind == SCHED_F)
                f_at[slot] = k;
            else
                cr_assert(seen[slot] && f_at[slot] < k, "B before F");
        }
        int64_t w = sched_warmup(p, v, M, N, r);
        for (int64_t k = 0; k < w; k++)
            cr_assert_eq(s[k].pass[0].kind, SCHED_F);
        if (w < M * v)
            cr_assert_eq(s[w].pass[0].kind, SCHED_F);   /* steady state opens with a forward */
        free(seen);
        free(f_at);
        free(s);
    }
}

Test(schedule, every_pass_once_and_backward_after_forward)
{
    check_schedule(1, 1, 5, 1);
    check_schedule(4, 1, 1, 4);
    check_schedule(4, 1, 3, 4);
    check_schedule(4, 1, 9, 4);
    check_schedule(2, 2, 5, 3);
    check_schedule(4, 2, 8, 4);
    check_schedule(4, 2, 4, 4);
    check_schedule(4, 3, 12, 6);
    check_schedule(4, 2, 10, 6);   /* remainder 4 >= p */
    check_schedule(8, 3, 16, 8);
    check_schedule(3, 5, 7, 7);
    check_schedule(3, 2, 7, 4);   /* remainder 3 >= p */
}

static void expect_einval(int64_t p, int64_t v, int64_t M, int64_t N, int64_t rank,
                          const char *needle)
{
    sched_item out[256];
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(sched_build(p, v, M, N, rank, out, &err), SIM_EINVAL,
                 "p=%lld v=%lld M=%lld N=%lld accepted", (long long)p, (long long)v,
                 (long long)M, (long long)N);
    cr_assert_eq(err.code, SIM_EINVAL);
    cr_assert_not_null(strstr(err.msg, needle), "message: %s", err.msg);
}

Test(schedule, invalid_parameters_are_rejected)
{
    expect_einval(1, 2, 4, 1, 0, "greater than 1 with interleaved");
    expect_einval(4, 2, 8, 3, 0, "should range in [PP=4 , M=8]");
    expect_einval(4, 2, 8, 9, 0, "should range in [PP=4 , M=8]");
    expect_einval(4, 2, 3, 4, 0, "should range in [PP=4 , M=3]");
    expect_einval(4, 2, 10, 4, 0, "remainder of M (10) divided by N (4)");
    expect_einval(4, 1, 0, 4, 0, "microbatches");
    expect_einval(4, 1, 4, 4, 4, "rank");
    expect_einval(0, 1, 4, 4, 0, "pipeline-parallel size");
    expect_einval(4, 0, 4, 4, 0, "virtual");
}

/* ---- schedules run on the engine -------------------------------------- */

typedef struct pipe_sim {
    engine_t *e;
    int64_t p, v, M;
} pipe_sim;

/* Task ids of pass (kind, m, c) on stage r. */
static size_t pass_index(const pipe_sim *ps, int64_t r, int kind, int64_t m, int64_t c)
{
    return (size_t)(((r * 2 + kind) * ps->M + m) * ps->v + c);
}

/* One stream per stage in schedule order; F takes tf, B takes tb; no
 * communication.  Counter r counts the passes of stage r between the start
 * of their F and the end of their B. */
static pipe_sim pipe_run(int64_t p, int64_t v, int64_t M, int64_t N, sim_time_ps tf,
                         sim_time_ps tb)
{
    pipe_sim ps = {.p = p, .v = v, .M = M};
    size_t n = (size_t)(2 * p * M * v);
    ps.e = eng_create((int)p, (int)p, n, 2 * n);
    cr_assert_not_null(ps.e);
    eng_task *id = malloc(n * sizeof *id);
    for (int64_t r = 0; r < p; r++) {
        sched_item *s = build(p, v, M, N, r);
        for (int64_t k = 0; k < sched_len(M, v); k++) {
            eng_task t = eng_add_task(ps.e, (int)r, s[k].pass[0].kind == SCHED_F ? tf : tb, (int32_t)k);
            cr_assert_geq(t, 0);
            id[pass_index(&ps, r, s[k].pass[0].kind, s[k].pass[0].microbatch, s[k].pass[0].chunk)] = t;
            if (s[k].pass[0].kind == SCHED_F)
                cr_assert_eq(eng_add_counter_delta(ps.e, t, (int)r, 1, 0), SIM_OK);
            else
                cr_assert_eq(eng_add_counter_delta(ps.e, t, (int)r, 0, -1), SIM_OK);
        }
        free(s);
    }
    for (int64_t r = 0; r < p; r++)
        for (int64_t m = 0; m < M; m++)
            for (int64_t c = 0; c < v; c++) {
                eng_task f = id[pass_index(&ps, r, SCHED_F, m, c)];
                eng_task b = id[pass_index(&ps, r, SCHED_B, m, c)];
                if (r > 0)
                    eng_add_dep(ps.e, id[pass_index(&ps, r - 1, SCHED_F, m, c)], f);
                else if (c > 0)
                    eng_add_dep(ps.e, id[pass_index(&ps, p - 1, SCHED_F, m, c - 1)], f);
                if (r < p - 1)
                    eng_add_dep(ps.e, id[pass_index(&ps, r + 1, SCHED_B, m, c)], b);
                else if (c < v - 1)
                    eng_add_dep(ps.e, id[pass_index(&ps, 0, SCHED_B, m, c + 1)], b);
                else
                    eng_add_dep(ps.e, f, b);
            }
    free(id);
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(eng_run(ps.e, &err), SIM_OK, "p=%lld v=%lld M=%lld: %s", (long long)p,
                 (long long)v, (long long)M, err.msg);
    return ps;
}

static double bubble_fraction(const pipe_sim *ps)
{
    double makespan = (double)eng_makespan(ps->e), sum = 0.0;
    size_t n = eng_num_tasks(ps->e);
    double *busy = calloc((size_t)ps->p, sizeof *busy);
    for (eng_task t = 0; t < (eng_task)n; t++)
        busy[eng_task_stream(ps->e, t)] +=
            (double)(eng_task_end(ps->e, t) - eng_task_start(ps->e, t));
    for (int64_t r = 0; r < ps->p; r++)
        sum += (makespan - busy[r]) / makespan;
    free(busy);
    return sum / (double)ps->p;
}

static void check_bubble(int64_t p, int64_t v, int64_t M, sim_time_ps tf, sim_time_ps tb)
{
    pipe_sim ps = pipe_run(p, v, M, p, tf, tb);
    double got = bubble_fraction(&ps);
    double want = (double)(p - 1) / (double)(v * M + p - 1);
    cr_assert(fabs(got - want) <= 1e-9 * want,
              "p=%lld v=%lld M=%lld tf=%llu tb=%llu: bubble %.12f, formula %.12f "
              "(makespan %llu)",
              (long long)p, (long long)v, (long long)M, (unsigned long long)tf,
              (unsigned long long)tb, got, want, (unsigned long long)eng_makespan(ps.e));
    cr_assert_eq(eng_makespan(ps.e), (sim_time_ps)(v * M + p - 1) * (tf + tb));
    eng_destroy(ps.e);
}

Test(schedule, bubble_fraction_one_f_one_b)
{
    check_bubble(4, 1, 8, 1000, 1000);
    check_bubble(4, 1, 8, 1000, 2000);
    check_bubble(8, 1, 16, 1000, 2000);
    check_bubble(2, 1, 6, 700, 1300);
}

Test(schedule, bubble_fraction_interleaved)
{
    check_bubble(4, 2, 8, 1000, 1000);
    check_bubble(4, 2, 8, 1000, 2000);
    check_bubble(8, 3, 16, 1000, 1000);
    check_bubble(8, 3, 16, 1000, 2000);
    check_bubble(2, 4, 6, 1000, 1000);
    check_bubble(2, 4, 6, 1000, 2000);
}

Test(schedule, no_pipelining_has_no_bubble)
{
    pipe_sim ps = pipe_run(1, 1, 5, 1, 10, 20);
    cr_assert_eq(eng_makespan(ps.e), 150);
    cr_assert_eq(eng_counter_peak(ps.e, 0), 1);
    eng_destroy(ps.e);
}

Test(schedule, inflight_microbatches_one_f_one_b)
{
    const int64_t cases[][2] = {{4, 8}, {4, 2}, {8, 16}, {8, 3}, {2, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t p = cases[i][0], M = cases[i][1];
        pipe_sim ps = pipe_run(p, 1, M, p, 1000, 2000);
        for (int64_t r = 0; r < p; r++) {
            int64_t want = p - r < M ? p - r : M;
            cr_assert_eq(eng_counter_peak(ps.e, (int)r), want, "p=%lld M=%lld stage %lld",
                         (long long)p, (long long)M, (long long)r);
            cr_assert_eq(eng_counter_final(ps.e, (int)r), 0);
        }
        eng_destroy(ps.e);
    }
}

Test(schedule, inflight_microbatches_interleaved_first_stage)
{
    /* Reference §2.4: rank 0 holds warmup + 1 = 2(p-1) + (v-1)N + 1 chunks. */
    pipe_sim ps = pipe_run(4, 2, 8, 4, 1000, 2000);
    cr_assert_eq(eng_counter_peak(ps.e, 0), 2 * 3 + 4 + 1);
    eng_destroy(ps.e);
}
