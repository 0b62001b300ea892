/* Tests of the pipeline schedules beyond Megatron's orders and of the
 * schedule's shape: the pass-kind table, chunk placement (loop and V),
 * items of two overlapped passes. */
#include <criterion/criterion.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "csv.h"
#include "pipe_run.h"
#include "pipe_trace.h"
#include "engine.h"
#include "schedule.h"
#include "scratch.h"
#include "sim_run.h"

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

/* ---- the named schedules run on the engine (pipe_run.h) ----------------- */

Test(pipeline_schedules, zb_h1_bubble_and_memory_against_1f1b)
{
    /* (F, B, W) with W <= F, the paper's setting (W is the weight GEMMs of
     * a backward, F holds every forward kernel). */
    const sim_time_ps d[][3] = {{1000, 1000, 1000}, {1000, 2000, 1000}, {2000, 3000, 1000}, {3000, 2000, 2000},
                                {1300, 2100, 900}};
    const int64_t shape[][2] = {{4, 8}, {4, 4}, {8, 16}, {2, 5}, {8, 24}};
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        for (size_t j = 0; j < sizeof shape / sizeof shape[0]; j++) {
            int64_t p = shape[j][0], M = shape[j][1];
            sim_time_ps F = d[i][0], B = d[i][1], W = d[i][2];
            pipe_run zb = run_plan(SCHED_ZB_H1, p, 1, M, F, B, W);
            pipe_run one = run_plan(SCHED_1F1B, p, 1, M, F, B, W);
            cr_assert_eq(bubble(&zb), (sim_time_ps)(p - 1) * (F + B - W), "p=%lld M=%lld F=%llu B=%llu W=%llu: %llu",
                         (long long)p, (long long)M, (unsigned long long)F, (unsigned long long)B,
                         (unsigned long long)W, (unsigned long long)bubble(&zb));
            cr_assert_eq(bubble(&one), (sim_time_ps)(p - 1) * (F + B + W));
            /* 1F1B's activation memory: p microbatches on the first rank. */
            cr_assert_eq(inflight_max(&zb), p);
            cr_assert_eq(inflight_max(&one), p);
            eng_destroy(zb.e);
            eng_destroy(one.e);
        }
}

Test(pipeline_schedules, dualpipev_bubble_and_inflight)
{
    /* DeepSeek-V3 report / DualPipe: bubble (PP/2-1)(F&B+B-3W) and PP+1
     * activations, PP the stages = 2p virtual stages here, F&B the pair
     * (run one after the other here: F+B+W).  Exact with B = W; with
     * W < B the timeline does better than the formula. */
    const int64_t shape[][2] = {{4, 8}, {4, 10}, {8, 16}, {2, 5}, {4, 20}};
    const sim_time_ps d[][3] = {{1000, 1000, 1000}, {3000, 2000, 2000}, {2000, 2000, 2000},
                                {2000, 2000, 1000}, {2000, 3000, 1000}};
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        for (size_t j = 0; j < sizeof shape / sizeof shape[0]; j++) {
            int64_t p = shape[j][0], M = shape[j][1];
            sim_time_ps F = d[i][0], B = d[i][1], W = d[i][2], FB = F + B + W;
            pipe_run dv = run_plan(SCHED_DUALPIPEV, p, 2, M, F, B, W);
            sim_time_ps want = (sim_time_ps)(p - 1) * (FB + B - 3 * W);
            if (B == W)
                cr_assert_eq(bubble(&dv), want, "p=%lld M=%lld: %llu, formula %llu", (long long)p, (long long)M,
                             (unsigned long long)bubble(&dv), (unsigned long long)want);
            else
                cr_assert_leq(bubble(&dv), want);
            cr_assert_eq(inflight_max(&dv), 2 * p + 1);
            /* F&B pairs: two per microbatch of the main phase on each rank. */
            cr_assert_gt(dv.items_paired, 0);
            eng_destroy(dv.e);
        }
}

Test(pipeline_schedules, zb_v_bubble_and_inflight)
{
    /* ZB-V: 1F1B's activation memory (2p chunk passes = p microbatches of
     * a whole rank) and, at T_F = T_B = T_W (the point the schedule is
     * built for), no bubble but the fill (p-1)F that the last rank waits
     * for its first forward; interleaved 1F1B with two chunks has
     * (p-1)(F+B+W) there. */
    const int64_t shape[][2] = {{2, 4}, {4, 8}, {4, 12}, {8, 16}, {8, 24}};
    for (size_t j = 0; j < sizeof shape / sizeof shape[0]; j++) {
        int64_t p = shape[j][0], M = shape[j][1];
        const sim_time_ps t = 1000;
        pipe_run zv = run_plan(SCHED_ZB_V, p, 2, M, t, t, t);
        cr_assert_eq(bubble(&zv), (sim_time_ps)(p - 1) * t, "p=%lld M=%lld: %llu", (long long)p, (long long)M,
                     (unsigned long long)bubble(&zv));
        cr_assert_eq(inflight_max(&zv), 2 * p);
        cr_assert_eq(zv.items_paired, 0);
        pipe_run il = run_plan(SCHED_INTERLEAVED, p, 2, M, t, t, t);
        cr_assert_eq(bubble(&il), (sim_time_ps)(p - 1) * 3 * t);
        eng_destroy(zv.e);
        eng_destroy(il.e);
    }
    /* Other ratios: 1F1B's memory still, bubble below interleaved's. */
    pipe_run zv = run_plan(SCHED_ZB_V, 4, 2, 12, 2000, 3000, 1000);
    pipe_run il = run_plan(SCHED_INTERLEAVED, 4, 2, 12, 2000, 3000, 1000);
    cr_assert_eq(inflight_max(&zv), 8);
    cr_assert_lt(bubble(&zv), bubble(&il));
    eng_destroy(zv.e);
    eng_destroy(il.e);
}

Test(pipeline_schedules, refusals)
{
    sched_item s[64];
    int64_t n;
    sim_err err;
    sched_plan pl;
    sim_err_clear(&err);
    sched_plan_init(&pl, SCHED_ZB_H1, 4, 2, 8, 4);
    cr_assert_eq(sched_plan_build(&pl, 0, s, &n, &err), SIM_EINVAL);
    cr_assert(strstr(err.msg, "one chunk"), "%s", err.msg);
    sched_plan_init(&pl, SCHED_DUALPIPEV, 4, 2, 7, 4);
    cr_assert_eq(sched_plan_build(&pl, 0, s, &n, &err), SIM_EINVAL);
    cr_assert(strstr(err.msg, "2 x 4 microbatches"), "%s", err.msg);
    /* ZB-V's refusals: tests/test_zb_v.c. */
}

/* ---- the schedules in parsim run: trace and report ---------------------- */

static trace_rd tr_a, tr_b;
static result res_a, res_b;

Test(pipeline_schedules, run_zb_h1_against_1f1b)
{
    run_schedule("zb-h1", "", &tr_a, &res_a);
    run_schedule("1f1b", "", &tr_b, &res_b);
    expect_each_once(&tr_a, "zb-h1", 1, true);
    expect_each_once(&tr_b, "1f1b", 1, false);
    int64_t F = kind_ps(&tr_a, SCHED_F), B = kind_ps(&tr_a, SCHED_B), W = kind_ps(&tr_a, SCHED_W);
    /* 1F1B's backward is B and W together; the forward is the same pass. */
    cr_assert_eq(kind_ps(&tr_b, SCHED_F), F);
    cr_assert_eq(kind_ps(&tr_b, SCHED_B), B + W);
    cr_assert(W > 0 && W <= F, "F %lld B %lld W %lld: the formula holds for W <= F", (long long)F, (long long)B,
              (long long)W);
    for (int r = 0; r < P; r++) {
        cr_assert_eq(trace_bubble(&tr_a, r), (P - 1) * (F + B - W), "zb-h1 stage %d: %lld ps, (p-1)(F+B-W) = %lld", r,
                     (long long)trace_bubble(&tr_a, r), (long long)((P - 1) * (F + B - W)));
        cr_assert_eq(trace_bubble(&tr_b, r), (P - 1) * (F + B + W), "1f1b stage %d", r);
    }
    /* The report's bubble is the trace's. */
    cr_assert_float_eq(json_max(res_a.out, "bubble_s"), (double)((P - 1) * (F + B - W)) * 1e-12, 1e-9);
    /* 1F1B's activation memory: its first stage's p microbatches. */
    cr_assert_eq(json_max(res_a.out, "activations_peak_bytes"), json_max(res_b.out, "activations_peak_bytes"));
    cr_assert_eq(json_max(res_a.out, "inflight_microbatches_max"), P);
    cr_assert(strstr(res_a.out, "\"pipeline_schedule\": \"zb-h1\""), "%s", res_a.out);
}

Test(pipeline_schedules, run_dualpipev_and_zb_v)
{
    run_schedule("dualpipev", "", &tr_a, &res_a);
    run_schedule("zb-v", "", &tr_b, &res_b);
    expect_each_once(&tr_a, "dualpipev", 2, true);
    expect_each_once(&tr_b, "zb-v", 2, true);
    int64_t F = kind_ps(&tr_a, SCHED_F), B = kind_ps(&tr_a, SCHED_B), W = kind_ps(&tr_a, SCHED_W);
    cr_assert_eq(kind_ps(&tr_b, SCHED_F), F);
    cr_assert_eq(kind_ps(&tr_b, SCHED_B), B);
    cr_assert_eq(kind_ps(&tr_b, SCHED_W), W);
    /* DualPipe's (PP/2-1)(F&B+B-3W), PP = 2p stages, F&B = F+B+W here (the
     * pair runs one after the other): equal when B = W, below with
     * W < B; PP+1 = 2p+1 chunk activations in flight. */
    cr_assert_lt(W, B);
    int64_t formula = (P - 1) * ((F + B + W) + B - 3 * W);
    for (int r = 0; r < P; r++) {
        cr_assert_leq(trace_bubble(&tr_a, r), formula, "dualpipev stage %d", r);
        /* The fill: the last stage waits (p-1)F for its first forward. */
        cr_assert_geq(trace_bubble(&tr_a, r), (P - 1) * F);
        cr_assert_geq(trace_bubble(&tr_b, r), (P - 1) * F);
    }
    cr_assert_eq(json_max(res_a.out, "inflight_microbatches_max"), 2 * P + 1);
    /* ZB-V: 2p chunk passes in flight, 1F1B's activation memory. */
    cr_assert_eq(json_max(res_b.out, "inflight_microbatches_max"), 2 * P);
    cr_assert(strstr(res_b.out, "\"pipeline_schedule\": \"zb-v\""), "%s", res_b.out);
}

Test(pipeline_schedules, rule_refusals)
{
    static const struct {
        const char *args, *key, *rule;
    } cases[] = {
        {"sim.pipeline_schedule=1f1b model.virtual_pipeline_model_parallel_size=2", "sim.pipeline_schedule",
         "one model chunk"},
        {"sim.pipeline_schedule=zb-h1 model.virtual_pipeline_model_parallel_size=2", "sim.pipeline_schedule",
         "one model chunk"},
        {"sim.pipeline_schedule=interleaved", "sim.pipeline_schedule", ">= 2"},
        {"sim.pipeline_schedule=zb-v model.virtual_pipeline_model_parallel_size=4", "sim.pipeline_schedule",
         "two model chunks"},
        {"sim.pipeline_schedule=dualpipev model.pipeline_model_parallel_size=1", "sim.pipeline_schedule",
         "pipeline_model_parallel_size >= 2"},
        {"sim.pipeline_schedule=dualpipev train.global_batch_size=4", "train.global_batch_size",
         "at least 2 x pipeline_model_parallel_size = 8 microbatches"},
        {"sim.pipeline_schedule=zb-h2", "sim.pipeline_schedule", "dualpipev"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        result r;
        runf(&r, IDEAL "%s", cases[i].args);
        expect_refusal(&r, cases[i].args, cases[i].key, cases[i].rule);
    }
}

/* ---- two-level simulation stays exact with B and W ----------------------- */

Test(pipeline_schedules, two_level_equals_every_kernel)
{
    static const char *const names[] = {"sim.pipeline_schedule=1f1b", "sim.pipeline_schedule=zb-h1", "sim.pipeline_schedule=zb-v",
                                        "sim.pipeline_schedule=dualpipev"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        /* Host issue, TP with SP, DP buckets reduced from inside the last
         * W of a chunk and gathered before the first forward. */
        const char *kv[] = {names[i], "model.name=llama3-8b", "cluster.topology=dgx-h100", "cluster.num_gpus=16",
                            "model.tensor_model_parallel_size=2", "model.sequence_parallel=true",
                            "model.pipeline_model_parallel_size=4", "train.global_batch_size=32",
                            "ddp.use_distributed_optimizer=true", "ddp.overlap_grad_reduce=true",
                            "ddp.overlap_param_gather=true", "ddp.bucket_size=20000000", NULL};
        sim a, b;
        sim_run(&a, kv);
        sim_rerun_every_kernel(&a, &b);
        const step_result *ra = step_result_get(a.st), *rb = step_result_get(b.st);
        cr_assert_eq(ra->step_time_s, rb->step_time_s, "%s: two-level %.9f s, every kernel %.9f s", names[i],
                     ra->step_time_s, rb->step_time_s);
        cr_assert_eq(ra->bubble_fraction, rb->bubble_fraction, "%s", names[i]);
        for (int64_t r = 0; r < ra->n_stages; r++) {
            cr_assert_eq(ra->stages[r].activations_peak_bytes, rb->stages[r].activations_peak_bytes, "%s", names[i]);
            cr_assert_eq(ra->stages[r].inflight_microbatches_max, rb->stages[r].inflight_microbatches_max);
        }
        cr_assert_lt(ra->tasks, rb->tasks);
        cr_assert(fabs(ra->comm_s[STREAM_TP] - rb->comm_s[STREAM_TP]) <= 1e-9 * rb->comm_s[STREAM_TP] + 1e-12);
        cr_assert(fabs(ra->comm_s[STREAM_DP] - rb->comm_s[STREAM_DP]) <= 1e-9 * rb->comm_s[STREAM_DP] + 1e-12);
        step_destroy(b.st);
        sim_free(&a);
    }
}

/* ---- search and sweep ---------------------------------------------------- */

#define SEARCH_SMALL                                                                                           \
    "search model.name=llama3-8b model.seq_length=2048 cluster.topology=dgx-h100 cluster.num_gpus=8 "          \
    "train.global_batch_size=32 model.tensor_model_parallel_size=1 model.context_parallel_size=1 "             \
    "train.micro_batch_size=1 model.recompute_granularity=none --exhaustive --top 3 "

/* Runs a search with --out into the scratch folder and reads the CSV. */
static void search_csv(const char *extra, csv_table *t)
{
    make_dir();
    char path[128];
    path_in(path, sizeof path, "search.csv");
    result r;
    runf(&r, SEARCH_SMALL "%s --out '%s'", extra, path);
    cr_assert_eq(r.status, 0, "%s: %s", extra, r.out);
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(csv_read_file(path, t, &err), SIM_OK, "%s", err.msg);
    remove_dir();
}

Test(pipeline_schedules, search_schedules_dimension)
{
    csv_table t;
    search_csv("--schedules all", &t);
    int cs = csv_col(&t, "pipeline_schedule"), cpp = csv_col(&t, "pp"), cvp = csv_col(&t, "vp"),
        ckind = csv_col(&t, "kind"), cpeak = csv_col(&t, "peak_bytes"), clb = csv_col(&t, "peak_lower_bound_bytes"),
        ct = csv_col(&t, "step_time_s"), ctlb = csv_col(&t, "time_lower_bound_s");
    cr_assert(cs >= 0 && cpp >= 0 && cvp >= 0 && ckind >= 0 && cpeak >= 0 && clb >= 0 && ct >= 0 && ctlb >= 0);
    int seen[SCHED_NAMES] = {0};
    for (size_t i = 0; i < t.nrows; i++) {
        if (strcmp(csv_cell(&t, i, ckind), "search"))
            continue;
        const char *name = csv_cell(&t, i, cs);
        int n = -1;
        for (int k = 0; k < SCHED_NAMES; k++)
            if (!strcmp(name, sched_name_str((sched_name)k)))
                n = k;
        cr_assert_geq(n, 0, "row %zu: schedule '%s'", i, name);
        seen[n]++;
        long pp = atol(csv_cell(&t, i, cpp)), vp = atol(csv_cell(&t, i, cvp));
        if (n == SCHED_ZB_H1)
            cr_assert(pp > 1 && vp == 1, "zb-h1 at PP %ld VP %ld", pp, vp);
        if (n == SCHED_ZB_V || n == SCHED_DUALPIPEV)
            cr_assert(pp > 1 && vp == 2, "%s at PP %ld VP %ld", name, pp, vp);
        /* Both bounds hold for every schedule: pruning drops nothing that
         * fits, the time bound skips nothing that could rank. */
        cr_assert_leq(atof(csv_cell(&t, i, clb)), atof(csv_cell(&t, i, cpeak)), "%s row %zu: memory bound", name, i);
        cr_assert_leq(atof(csv_cell(&t, i, ctlb)), atof(csv_cell(&t, i, ct)), "%s row %zu: time bound", name, i);
    }
    cr_assert_gt(seen[SCHED_MEGATRON], 0);
    cr_assert_gt(seen[SCHED_ZB_H1], 0);
    cr_assert_gt(seen[SCHED_ZB_V], 0);
    cr_assert_gt(seen[SCHED_DUALPIPEV], 0);
    /* Megatron's own orders are searched as megatron. */
    cr_assert_eq(seen[SCHED_1F1B] + seen[SCHED_INTERLEAVED], 0);
    csv_free(&t);

    /* Pinned: every layout runs that schedule. */
    search_csv("sim.pipeline_schedule=zb-h1", &t);
    cs = csv_col(&t, "pipeline_schedule");
    ckind = csv_col(&t, "kind");
    size_t n = 0;
    for (size_t i = 0; i < t.nrows; i++)
        if (!strcmp(csv_cell(&t, i, ckind), "search")) {
            cr_assert_str_eq(csv_cell(&t, i, cs), "zb-h1");
            n++;
        }
    cr_assert_gt(n, 0);
    csv_free(&t);

    /* Without --schedules, the config's schedule alone (as before). */
    search_csv("", &t);
    cs = csv_col(&t, "pipeline_schedule");
    for (size_t i = 0; i < t.nrows; i++)
        cr_assert_str_eq(csv_cell(&t, i, cs), "megatron");
    csv_free(&t);
}

Test(pipeline_schedules, search_schedules_refusals)
{
    result r;
    runf(&r, SEARCH_SMALL "--schedules zb-v,zb-h2");
    expect_refusal(&r, "unknown schedule", "--schedules", "zb-h2");
    runf(&r, SEARCH_SMALL "--schedules all sim.pipeline_schedule=zb-v");
    expect_refusal(&r, "pinned and searched", "--schedules", "sim.pipeline_schedule");
    /* A name with a newline and a long one: still one short line. */
    runf(&r, SEARCH_SMALL "--schedules 'zb-v,bad\nname'");
    expect_refusal(&r, "newline in a name", "--schedules", "'bad?name'");
    char arg[600];
    memset(arg, 'x', sizeof arg - 1);
    arg[sizeof arg - 1] = '\0';
    runf(&r, SEARCH_SMALL "--schedules %s", arg);
    expect_refusal(&r, "long name", "--schedules", "...'");
    cr_assert_lt(strlen(r.out), 300, "%s", r.out);
    runf(&r, SEARCH_SMALL "--schedules ''");
    expect_refusal(&r, "empty", "--schedules", "''");
}

Test(pipeline_schedules, sweep_over_the_schedule)
{
    make_dir();
    char spec[128], out[128];
    path_in(spec, sizeof spec, "sweep.cfg");
    path_in(out, sizeof out, "sweep.csv");
    write_file(spec, "sweep: {\n"
                     "  set = [ \"model.name=llama3-8b\", \"model.pipeline_model_parallel_size=4\",\n"
                     "          \"model.seq_length=1024\", \"cluster.topology=dgx-h100\", \"cluster.num_gpus=4\",\n"
                     "          \"train.global_batch_size=16\" ];\n"
                     "  vary = ( { key = \"sim.pipeline_schedule\"; values = [ \"megatron\", \"zb-h1\", \"zb-v\",\n"
                     "             \"dualpipev\", \"interleaved\" ]; } );\n"
                     "};\n");
    result r;
    runf(&r, "sweep '%s' --out '%s'", spec, out);
    cr_assert_eq(r.status, 0, "%s", r.out);
    csv_table t;
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(csv_read_file(out, &t, &err), SIM_OK, "%s", err.msg);
    int ck = csv_col(&t, "sim.pipeline_schedule"), ct = csv_col(&t, "step_time_s"), ce = csv_col(&t, "error");
    cr_assert(ck >= 0 && ct >= 0 && ce >= 0);
    cr_assert_eq(t.nrows, 5);
    for (size_t i = 0; i < 4; i++)
        cr_assert(atof(csv_cell(&t, i, ct)) > 0 && !csv_cell(&t, i, ce)[0], "row %zu: %s", i, csv_cell(&t, i, ce));
    /* The zero-bubble schedules beat 1F1B here. */
    cr_assert_lt(atof(csv_cell(&t, 1, ct)), atof(csv_cell(&t, 0, ct)));
    /* interleaved without VP: the row says why. */
    cr_assert(strstr(csv_cell(&t, 4, ce), "sim.pipeline_schedule"), "%s", csv_cell(&t, 4, ce));
    csv_free(&t);
    remove_dir();
}

Test(pipeline_schedules, first_backward_matches_the_order)
{
    static const struct {
        sched_name n;
        int64_t v;
    } plans[] = {{SCHED_MEGATRON, 1}, {SCHED_MEGATRON, 2}, {SCHED_MEGATRON, 3}, {SCHED_ZB_H1, 1},
                 {SCHED_ZB_V, 2},     {SCHED_DUALPIPEV, 2}};
    const int64_t shapes[][2] = {{2, 4}, {4, 8}, {4, 12}, {8, 16}, {3, 6}, {1, 3}};
    for (size_t i = 0; i < sizeof plans / sizeof plans[0]; i++)
        for (size_t j = 0; j < sizeof shapes / sizeof shapes[0]; j++) {
            sched_plan pl;
            int64_t p = shapes[j][0], M = shapes[j][1];
            sched_plan_init(&pl, plans[i].n, p, plans[i].v, M, p);
            sched_item *s = calloc((size_t)sched_plan_passes(&pl), sizeof *s);
            sim_err err;
            sim_err_clear(&err);
            for (int64_t r = 0; r < p; r++) {
                int64_t n = 0;
                if (sched_plan_build(&pl, r, s, &n, &err) != SIM_OK)
                    break; /* a shape the schedule refuses */
                int64_t want[3] = {0, 0, 0}, got[3], want_b = -1;
                for (int64_t k = 0; k < n && want_b < 0; k++)
                    for (int q = 0; q < s[k].n_passes && want_b < 0; q++) {
                        if (s[k].pass[q].kind == SCHED_F)
                            want[s[k].pass[q].chunk]++;
                        else if (s[k].pass[q].kind == SCHED_B)
                            want_b = s[k].pass[q].chunk;
                    }
                cr_assert_eq(sched_plan_first_b(&pl, r, got), want_b, "%s v=%lld p=%lld M=%lld rank %lld",
                             sched_name_str(plans[i].n), (long long)plans[i].v, (long long)p, (long long)M,
                             (long long)r);
                for (int64_t c = 0; c < plans[i].v; c++)
                    cr_assert_eq(got[c], want[c], "%s v=%lld p=%lld M=%lld rank %lld chunk %lld: %lld forwards, not %lld",
                                 sched_name_str(plans[i].n), (long long)plans[i].v, (long long)p, (long long)M,
                                 (long long)r, (long long)c, (long long)got[c], (long long)want[c]);
            }
            free(s);
        }
}

/* ---- Megatron-FSDP with the backward split ------------------------------- */

/* A unit's gradients are final after its weight gradients: with B and W
 * apart, each fsdp_rs of (microbatch, chunk) starts no earlier than that
 * W on its stage; and two-level simulation still equals every kernel
 * (ZeRO-2: with ZeRO-3's gathers and two chunks per rank it does not, as
 * under Megatron's interleaved schedule). */
Test(pipeline_schedules, fsdp_reduce_scatter_follows_w)
{
    static const char *const names[] = {"sim.pipeline_schedule=zb-h1", "sim.pipeline_schedule=dualpipev"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *kv[] = {names[i], "model.name=llama3-8b", "cluster.topology=dgx-h100", "cluster.num_gpus=16",
                            "model.tensor_model_parallel_size=2", "model.pipeline_model_parallel_size=4",
                            "train.global_batch_size=32", "ddp.use_megatron_fsdp=true",
                            "ddp.data_parallel_sharding_strategy=optim_grads", NULL};
        sim a, b;
        sim_run(&a, kv);
        sim_rerun_every_kernel(&a, &b);
        const step_result *ra = step_result_get(a.st), *rb = step_result_get(b.st);
        cr_assert_eq(ra->step_time_s, rb->step_time_s, "%s: two-level %.9f s, every kernel %.9f s", names[i],
                     ra->step_time_s, rb->step_time_s);
        cr_assert(fabs(ra->comm_s[STREAM_DP] - rb->comm_s[STREAM_DP]) <= 1e-9 * rb->comm_s[STREAM_DP] + 1e-12);
        const engine_t *e = step_engine(b.st);
        size_t n = eng_num_tasks(e), rs = 0;
        for (size_t t = 0; t < n; t++) {
            step_task_info info;
            step_task_describe(b.st, (eng_task)t, &info);
            if (strcmp(info.name, "fsdp_rs"))
                continue;
            sim_time_ps w0, w1;
            cr_assert(step_pass_span(b.st, info.stage, SCHED_W, info.microbatch, info.chunk, &w0, &w1));
            cr_assert_geq(eng_task_start(e, (eng_task)t), w0, "%s: stage %lld fsdp_rs of %d.%d before its W", names[i],
                          (long long)info.stage, info.microbatch, info.chunk);
            rs++;
        }
        cr_assert_gt(rs, 0, "%s: no per-unit reduce-scatter", names[i]);
        step_destroy(b.st);
        sim_free(&a);
    }
}
