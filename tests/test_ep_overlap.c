/* EP all-to-all overlap (model.overlap_moe_expert_parallel_comm, Megatron's
 * combined 1F1B) and model.delay_wgrad_compute: the node order of a
 * (forward layer, backward layer) pair read back from the trace, one more
 * microbatch in flight than 1F1B, less exposed EP time on Qwen3-30B-A3B
 * with EP16 on 16 H100s, the two-level step equal to every kernel, and
 * Megatron's constraints as refusals. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scratch.h"
#include "sim_run.h"

#define QWEN                                                                                                   \
    "run model.name=qwen3-30b-a3b cluster.topology=dgx-h100 cluster.num_gpus=16 "                              \
    "model.expert_model_parallel_size=16 model.moe_token_dispatcher_type=alltoall train.micro_batch_size=1 "

/* ---- the trace ----------------------------------------------------------- */

/* An op of the trace on stage 0. */
typedef struct top {
    char name[40];
    int tid, mb;
    double a, b; /* µs */
} top;

typedef struct trace_ops {
    top *op;
    int n;
    int tid_compute, tid_ep;
} trace_ops;

static int tid_named(const char *text, const char *name)
{
    char key[96];
    snprintf(key, sizeof key, "\"args\":{\"name\":\"%s\"}", name);
    for (const char *at = strstr(text, key); at; at = strstr(at + 1, key)) {
        const char *line = at;
        while (line > text && line[-1] != '\n')
            line--;
        if (!strstr(line, "\"pid\":0,"))
            continue;
        const char *t = strstr(line, "\"tid\":");
        cr_assert(t && t < at, "thread name line without tid");
        return atoi(t + 6);
    }
    cr_assert_fail("no thread %s in the trace", name);
    return -1;
}

static void read_ops(const char *path, trace_ops *t)
{
    size_t len;
    char *text = read_file(path, &len);
    t->tid_compute = tid_named(text, "compute");
    t->tid_ep = tid_named(text, "ep");
    t->op = calloc(len / 40 + 1, sizeof *t->op);
    cr_assert_not_null(t->op);
    t->n = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char *at = strstr(line, "\"ph\":\"X\",\"name\":\"");
        if (!at || !strstr(line, "\"pid\":0,"))
            continue;
        at += strlen("\"ph\":\"X\",\"name\":\"");
        top *o = &t->op[t->n];
        size_t k = strcspn(at, "\"");
        if (k >= sizeof o->name)
            continue;
        memcpy(o->name, at, k);
        o->name[k] = '\0';
        char *tid = strstr(at, "\"tid\":"), *ts = strstr(at, "\"ts\":"), *dur = strstr(at, "\"dur\":"),
             *mb = strstr(at, "\"microbatch\":");
        if (!tid || !ts || !dur || !mb)
            continue;
        o->tid = atoi(tid + 6);
        o->a = strtod(ts + 5, NULL);
        o->b = o->a + strtod(dur + 6, NULL);
        o->mb = atoi(mb + 13);
        t->n++;
    }
    free(text);
}

/* The first op of that name of microbatch mb on stream tid. */
static const top *first_op(const trace_ops *t, int tid, int mb, const char *name)
{
    const top *best = NULL;
    for (int i = 0; i < t->n; i++)
        if (t->op[i].tid == tid && t->op[i].mb == mb && !strcmp(t->op[i].name, name) && (!best || t->op[i].a < best->a))
            best = &t->op[i];
    cr_assert_not_null(best, "no %s of microbatch %d on thread %d", name, mb, tid);
    return best;
}

/* Two layers, two microbatches: F0, then B0 beside F1, then B1. */
static void trace_pair(const char *extra, trace_ops *t)
{
    make_dir();
    char path[128];
    result r;
    runf(&r, QWEN "model.num_layers=2 train.global_batch_size=32 model.overlap_moe_expert_parallel_comm=true %s "
                  "--trace '%s'",
         extra, path_in(path, sizeof path, "trace.json"));
    cr_assert_eq(r.status, 0, "%s", r.out);
    read_ops(path, t);
    remove_dir();
}

#define BEFORE(x, y) cr_expect((x)->a <= (y)->a, "%s (%.3f us) should start before %s (%.3f us)", (x)->name, (x)->a, (y)->name, (y)->a)
#define OVERLAP(x, y)                                                                                         \
    cr_expect((x)->a < (y)->b && (y)->a < (x)->b, "%s [%.3f, %.3f] should overlap %s [%.3f, %.3f]", (x)->name, \
              (x)->a, (x)->b, (y)->name, (y)->a, (y)->b)

/* b.combine | f.pre_dispatch | b.mlp | f.dispatch | b.dispatch | f.mlp |
 * f.combine | b.pre_dispatch: the compute stream and the EP stream in
 * that order, each all-to-all beside the other microbatch's compute. */
Test(ep_overlap, node_order_of_a_layer_pair_from_the_trace)
{
    trace_ops t;
    trace_pair("", &t);
    const int C = t.tid_compute, E = t.tid_ep, B = 0, F = 1;
    const top *b_unpermute = first_op(&t, C, B, "unpermute_bwd"), *b_combine = first_op(&t, E, B, "ep_combine_bwd"),
              *f_ln1 = first_op(&t, C, F, "ln1"), *f_permute = first_op(&t, C, F, "permute"),
              *b_fc2 = first_op(&t, C, B, "expert_fc2_dgrad"), *f_dispatch = first_op(&t, E, F, "ep_dispatch"),
              *b_fc1w = first_op(&t, C, B, "expert_fc1_wgrad"), *b_dispatch = first_op(&t, E, B, "ep_dispatch_bwd"),
              *f_fc1 = first_op(&t, C, F, "expert_fc1"), *f_combine = first_op(&t, E, F, "ep_combine"),
              *f_unpermute = first_op(&t, C, F, "unpermute"), *b_permute = first_op(&t, C, B, "permute_bwd");
    /* compute stream */
    BEFORE(b_unpermute, f_ln1);
    BEFORE(f_ln1, f_permute);
    BEFORE(f_permute, b_fc2);
    BEFORE(b_fc2, f_fc1);
    BEFORE(f_fc1, f_unpermute);
    BEFORE(f_unpermute, b_permute);
    /* EP stream */
    BEFORE(b_combine, f_dispatch);
    BEFORE(f_dispatch, b_dispatch);
    BEFORE(b_dispatch, f_combine);
    /* what overlaps what */
    OVERLAP(b_combine, f_ln1);
    OVERLAP(f_dispatch, b_fc2);
    /* without delay_wgrad_compute the backward's dispatch waits for the
     * expert wgrad */
    cr_expect(b_dispatch->a >= b_fc1w->b, "ep_dispatch_bwd at %.3f before expert_fc1_wgrad ends at %.3f",
              b_dispatch->a, b_fc1w->b);
    free(t.op);
}

/* delay_wgrad_compute: the expert wgrads are a node after the dgrads, so
 * the backward's dispatch runs beside them. */
Test(ep_overlap, delay_wgrad_compute_lets_the_dispatch_pass_the_wgrads)
{
    trace_ops t;
    trace_pair("model.delay_wgrad_compute=true", &t);
    const int C = t.tid_compute, E = t.tid_ep, B = 0, F = 1;
    const top *b_fc1d = first_op(&t, C, B, "expert_fc1_dgrad"), *b_fc2w = first_op(&t, C, B, "expert_fc2_wgrad"),
              *b_fc1w = first_op(&t, C, B, "expert_fc1_wgrad"), *b_dispatch = first_op(&t, E, B, "ep_dispatch_bwd"),
              *f_dispatch = first_op(&t, E, F, "ep_dispatch"), *f_fc1 = first_op(&t, C, F, "expert_fc1");
    BEFORE(b_fc1d, b_fc2w); /* the dw node follows the dgrads */
    BEFORE(b_fc2w, f_fc1);
    cr_expect(b_fc2w->a >= f_dispatch->a, "the dw node comes after f.dispatch is issued");
    OVERLAP(b_dispatch, b_fc1w);
    free(t.op);
}

/* ---- in flight, exposed EP, the two levels --------------------------------- */

/* Every "inflight_microbatches_max" of a JSON report, in stage order. */
static int inflight(const char *out, int64_t *per_stage, int cap)
{
    int n = 0;
    for (const char *at = strstr(out, "\"inflight_microbatches_max\":"); at && n < cap;
         at = strstr(at + 1, "\"inflight_microbatches_max\":"))
        per_stage[n++] = atoll(at + strlen("\"inflight_microbatches_max\":"));
    return n;
}

static double json_num(const char *out, const char *key)
{
    char k[96];
    snprintf(k, sizeof k, "\"%s\":", key);
    const char *at = strstr(out, k);
    cr_assert_not_null(at, "no %s in %s", key, out);
    return strtod(at + strlen(k), NULL);
}

static void expect_one_more_in_flight(const char *args)
{
    result a, b;
    runf(&a, "%s --format json", args);
    runf(&b, "%s model.overlap_moe_expert_parallel_comm=true --format json", args);
    cr_assert_eq(a.status, 0, "%s", a.out);
    cr_assert_eq(b.status, 0, "%s", b.out);
    int64_t fa[8], fb[8];
    int na = inflight(a.out, fa, 8), nb = inflight(b.out, fb, 8);
    cr_assert(na > 0 && na == nb, "%d and %d stages", na, nb);
    for (int r = 0; r < na; r++)
        cr_expect_eq(fb[r], fa[r] + 1, "stage %d: %lld in flight with the overlap, %lld without", r, (long long)fb[r],
                     (long long)fa[r]);
}

Test(ep_overlap, one_more_microbatch_in_flight_than_1f1b)
{
    expect_one_more_in_flight(QWEN "model.num_layers=4 train.global_batch_size=64");
    /* interleaved: one more warm-up forward on every rank */
    expect_one_more_in_flight("run model.name=qwen3-30b-a3b cluster.topology=dgx-h100 cluster.num_gpus=16 "
                              "model.expert_model_parallel_size=8 model.moe_token_dispatcher_type=alltoall "
                              "model.num_layers=8 model.pipeline_model_parallel_size=2 "
                              "model.virtual_pipeline_model_parallel_size=2 train.global_batch_size=64 "
                              "train.micro_batch_size=1");
}

/* Qwen3-30B-A3B on 16 H100s, EP16 alltoall (Megatron Bridge measured
 * 41.25 s -> 31.31 s per step): a configuration that fits in memory with
 * the extra microbatch in flight. */
#define QWEN_FIT                                                                                               \
    QWEN "train.global_batch_size=512 ddp.use_distributed_optimizer=true ddp.grad_reduce_in_fp32=false "       \
         "model.recompute_granularity=selective model.recompute_modules=[core_attn,moe_act,layernorm] "        \
         "--format json"

Test(ep_overlap, exposed_ep_time_lower_on_qwen3_30b_ep16)
{
    result a, b, c;
    runf(&a, "%s", QWEN_FIT);
    runf(&b, "%s model.overlap_moe_expert_parallel_comm=true", QWEN_FIT);
    runf(&c, "%s model.overlap_moe_expert_parallel_comm=true model.delay_wgrad_compute=true", QWEN_FIT);
    cr_assert_eq(a.status, 0, "%s", a.out);
    cr_assert_eq(b.status, 0, "%s", b.out);
    cr_assert_eq(c.status, 0, "%s", c.out);
    double ea = json_num(a.out, "ep_exposed_s"), eb = json_num(b.out, "ep_exposed_s");
    double ta = json_num(a.out, "step_time_s"), tb = json_num(b.out, "step_time_s"), tc = json_num(c.out, "step_time_s");
    cr_expect_lt(eb, 0.75 * ea, "exposed EP %.3f s with the overlap, %.3f s without", eb, ea);
    cr_expect_lt(tb, 0.85 * ta, "step %.3f s with the overlap, %.3f s without", tb, ta);
    cr_expect_leq(tc, tb, "delay_wgrad_compute %.3f s, the overlap alone %.3f s", tc, tb);
    cr_expect_leq(json_num(b.out, "peak_bytes"), json_num(b.out, "hbm_capacity_bytes"), "it fits");
    cr_expect_eq(json_num(a.out, "ep_s"), json_num(b.out, "ep_s"), "the same all-to-alls");
}

/* The step with pairs standing as templates equals the step with every
 * kernel a task: one pipeline rank (one task per pair) and interleaved
 * (pairs gated by their inputs from the other stages). */
static void expect_two_levels_equal(const char *const *kv)
{
    sim a, b;
    sim_run(&a, kv);
    sim_rerun_every_kernel(&a, &b);
    const step_result *ra = step_result_get(a.st), *rb = step_result_get(b.st);
    cr_expect_eq(ra->step_time_s, rb->step_time_s, "step %.9f s two-level, %.9f s every kernel", ra->step_time_s,
                 rb->step_time_s);
    cr_expect_eq(ra->pipeline_s, rb->pipeline_s, "pipeline %.9f / %.9f s", ra->pipeline_s, rb->pipeline_s);
    /* (the bubble differs by where a pass's host lead starts it, as
     * without pairs) */
    cr_expect_eq(ra->peak_bytes, rb->peak_bytes, "peak %.0f / %.0f", ra->peak_bytes, rb->peak_bytes);
    cr_expect_lt(ra->tasks, rb->tasks, "the two-level step has fewer tasks");
    step_destroy(b.st);
    sim_free(&a);
}

#define QWEN_KV                                                                                               \
    "model.name=qwen3-30b-a3b", "cluster.topology=dgx-h100", "cluster.num_gpus=16",                          \
        "model.moe_token_dispatcher_type=alltoall", "train.micro_batch_size=1", "model.num_layers=8",        \
        "model.overlap_moe_expert_parallel_comm=true"

Test(ep_overlap, two_level_step_equals_every_kernel)
{
    expect_two_levels_equal((const char *const[]){QWEN_KV, "model.expert_model_parallel_size=16",
                                                  "train.global_batch_size=64", NULL});
    expect_two_levels_equal((const char *const[]){QWEN_KV, "model.expert_model_parallel_size=8",
                                                  "model.pipeline_model_parallel_size=2",
                                                  "model.virtual_pipeline_model_parallel_size=2",
                                                  "train.global_batch_size=64", "model.delay_wgrad_compute=true",
                                                  NULL});
    expect_two_levels_equal((const char *const[]){QWEN_KV, "model.expert_model_parallel_size=4",
                                                  "model.pipeline_model_parallel_size=4",
                                                  "model.virtual_pipeline_model_parallel_size=2",
                                                  "train.global_batch_size=32", NULL});
}

/* DualPipeV's F&B pairs run as the same overlapped templates with the
 * overlap (its order as without): exact two levels, less exposed EP. */
Test(ep_overlap, dualpipev_pairs_overlap)
{
    expect_two_levels_equal((const char *const[]){QWEN_KV, "model.expert_model_parallel_size=4",
                                                  "model.pipeline_model_parallel_size=4",
                                                  "sim.pipeline_schedule=dualpipev", "train.global_batch_size=64",
                                                  NULL});
    const char *args = "run model.name=qwen3-30b-a3b cluster.topology=dgx-h100 cluster.num_gpus=16 "
                       "model.expert_model_parallel_size=4 model.moe_token_dispatcher_type=alltoall "
                       "train.micro_batch_size=1 model.num_layers=16 model.pipeline_model_parallel_size=4 "
                       "sim.pipeline_schedule=dualpipev train.global_batch_size=64 --format json";
    result a, b;
    runf(&a, "%s", args);
    runf(&b, "%s model.overlap_moe_expert_parallel_comm=true", args);
    cr_assert_eq(a.status, 0, "%s", a.out);
    cr_assert_eq(b.status, 0, "%s", b.out);
    cr_expect_lt(json_num(b.out, "ep_exposed_s"), json_num(a.out, "ep_exposed_s"));
    cr_expect_lt(json_num(b.out, "step_time_s"), json_num(a.out, "step_time_s"));
    int64_t fa[8], fb[8];
    int n = inflight(a.out, fa, 8);
    cr_assert_eq(inflight(b.out, fb, 8), n);
    for (int r = 0; r < n; r++)
        cr_expect_eq(fa[r], fb[r], "stage %d: DualPipeV's order keeps its in-flight count", r);
}

/* ---- the schedule --------------------------------------------------------- */

Test(ep_overlap, combined_1f1b_order)
{
    sched_plan pl;
    sched_plan_init(&pl, SCHED_MEGATRON, 1, 1, 4, 1);
    pl.combined = true;
    sched_item it[8];
    int64_t n;
    sim_err err;
    cr_assert_eq(sched_plan_build(&pl, 0, it, &n, &err), SIM_OK, "%s", err.msg);
    cr_assert_eq(n, 5);
    cr_expect(it[0].n_passes == 1 && it[0].pass[0].kind == SCHED_F && it[0].pass[0].microbatch == 0);
    for (int i = 1; i < 4; i++) {
        cr_expect_eq(it[i].n_passes, 2);
        cr_expect(it[i].pass[0].kind == SCHED_F && it[i].pass[0].microbatch == i, "item %d: F%d", i, i);
        cr_expect(it[i].pass[1].kind == SCHED_B && it[i].pass[1].microbatch == i - 1, "item %d: B%d", i, i - 1);
    }
    cr_expect(it[4].n_passes == 1 && it[4].pass[0].kind == SCHED_B && it[4].pass[0].microbatch == 3);
    /* interleaved: one more warm-up forward than Megatron's */
    sched_plan_init(&pl, SCHED_MEGATRON, 4, 2, 8, 4);
    pl.combined = true;
    for (int64_t r = 0; r < 4; r++)
        cr_expect_eq(sched_combined_warmup(&pl, r), sched_warmup(4, 2, 8, 4, r) + 1, "rank %lld", (long long)r);
}

/* ---- search ---------------------------------------------------------------- */

/* The ranked rows of a search report (from the header to the rules'). */
static void ranked_rows(const char *out, char *buf, size_t len)
{
    const char *a = strstr(out, "\nrank "), *b = a ? strstr(a, "\nrules ") : NULL;
    cr_assert(a && b, "no ranking in: %s", out);
    size_t n = (size_t)(b - a) < len - 1 ? (size_t)(b - a) : len - 1;
    memcpy(buf, a, n);
    buf[n] = '\0';
}

/* The base's overlap goes to every layout that allows it (EP 1 and plain
 * PP > 1 run without it instead of being refused), and the time bound
 * stays a bound: the pruned search ranks what simulating every layout
 * does. */
Test(ep_overlap, search_keeps_the_overlap_where_legal)
{
    const char *args = "search model.name=qwen3-30b-a3b cluster.topology=dgx-h100 cluster.num_gpus=16 "
                       "model.moe_token_dispatcher_type=alltoall train.global_batch_size=64 model.num_layers=8 "
                       "model.tensor_model_parallel_size=1 model.context_parallel_size=1 "
                       "model.overlap_moe_expert_parallel_comm=true --top 20 --jobs 1";
    static result a, b;
    runf(&a, "%s", args);
    runf(&b, "%s --exhaustive", args);
    cr_assert_eq(a.status, 0, "%s", a.out);
    cr_assert_eq(b.status, 0, "%s", b.out);
    static char ra[32768], rb[32768];
    ranked_rows(a.out, ra, sizeof ra);
    ranked_rows(b.out, rb, sizeof rb);
    cr_expect_str_eq(ra, rb);
    cr_expect(strstr(ra, "\n1           16   1   1 even       1   1    1 "), "EP 1 ranks first: %s", ra);
}

/* ---- Megatron's constraints ----------------------------------------------- */

#define OVL QWEN "train.global_batch_size=64 model.overlap_moe_expert_parallel_comm=true "

Test(ep_overlap, constraints_are_refused)
{
    static const struct {
        const char *args, *key, *rule;
    } cases[] = {
        {OVL "model.expert_model_parallel_size=1", "model.overlap_moe_expert_parallel_comm",
         "expert_model_parallel_size > 1"},
        {OVL "model.moe_token_dispatcher_type=allgather", "model.overlap_moe_expert_parallel_comm", "alltoall or flex"},
        {OVL "model.expert_model_parallel_size=8 model.pipeline_model_parallel_size=2",
         "model.overlap_moe_expert_parallel_comm", "virtual_pipeline_model_parallel_size > 1"},
        {OVL "model.recompute_granularity=full", "model.overlap_moe_expert_parallel_comm", "full recompute"},
        {OVL "model.recompute_num_layers=2", "model.overlap_moe_expert_parallel_comm", "model.recompute_num_layers"},
        {OVL "model.recompute_granularity=selective model.recompute_modules=[moe]",
         "model.overlap_moe_expert_parallel_comm", "moe in model.recompute_modules"},
        {OVL "model.mtp_num_layers=2", "model.overlap_moe_expert_parallel_comm", "at most one MTP layer"},
        {OVL "sim.pipeline_schedule=zb-h1", "model.overlap_moe_expert_parallel_comm", "zb-h1 has no paired passes"},
        {OVL "model.expert_model_parallel_size=8 model.pipeline_model_parallel_size=2 sim.pipeline_schedule=zb-v",
         "model.overlap_moe_expert_parallel_comm", "zb-v has no paired passes"},
        {OVL "model.cuda_graph_impl=transformer_engine model.cuda_graph_modules=[attn,mlp]",
         "model.cuda_graph_modules", "overlap_moe_expert_parallel_comm"},
        {OVL "model.cuda_graph_impl=transformer_engine model.cuda_graph_modules=[moe_router,moe] "
             "model.moe_expert_capacity_factor=1 model.moe_pad_expert_input_to_capacity=true",
         "model.cuda_graph_modules", "moe scope"},
        {OVL "model.cuda_graph_impl=transformer_engine", "model.cuda_graph_modules", "whole layer"},
        {QWEN "train.global_batch_size=64 model.delay_wgrad_compute=true", "model.delay_wgrad_compute",
         "requires model.overlap_moe_expert_parallel_comm"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        result r;
        run(&r, cases[i].args);
        expect_refusal(&r, cases[i].args, cases[i].key, cases[i].rule);
    }
    /* legal: attention graphs, flex, a single MTP layer */
    result r;
    run(&r, OVL "model.cuda_graph_impl=transformer_engine model.cuda_graph_modules=[attn]");
    cr_expect_eq(r.status, 0, "%s", r.out);
    run(&r, OVL "model.moe_token_dispatcher_type=flex");
    cr_expect_eq(r.status, 0, "%s", r.out);
}

/* The text report and the JSON say the overlap is on. */
Test(ep_overlap, the_report_names_the_overlap)
{
    result r;
    run(&r, QWEN " train.global_batch_size=64 model.overlap_moe_expert_parallel_comm=true model.delay_wgrad_compute=true");
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "schedule    megatron (combined 1F1B, EP all-to-all overlapped, weight gradients "
                            "delayed)"),
              "%s", r.out);
    run(&r, QWEN " train.global_batch_size=64 model.overlap_moe_expert_parallel_comm=true --format json");
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "\"overlap_moe_expert_parallel_comm\": true,\n    \"delay_wgrad_compute\": false"), "%s", r.out);
    run(&r, QWEN " train.global_batch_size=64 --format json");
    cr_expect(strstr(r.out, "\"overlap_moe_expert_parallel_comm\": false"), "%s", r.out);
    cr_expect(strstr(r.out, "\"megatron_fsdp\": \"off\""), "%s", r.out);
}

/* The epov cell of a MoE table row: the 21st word (rank, GPUs, TP, PP,
 * split, VP, CP, EP, ETP, SP, MBS, recompute, cp_comm, dopt, step, tok/s,
 * MFU, peak, free, bubble, epov). */
static const char *epov_cell(const char *line)
{
    static char word[32];
    const char *p = line;
    for (int k = 0; k < 21; k++) {
        while (*p == ' ')
            p++;
        size_t n = strcspn(p, " ");
        snprintf(word, sizeof word, "%.*s", (int)n, p);
        p += n;
    }
    return word;
}

/* search --ep-overlap tries the overlap off and on where Megatron allows
 * it: on the pinned Qwen3 layout the overlapped one ranks first, and the
 * table says which is which. */
Test(ep_overlap, search_tries_it_off_and_on)
{
    result r;
    run(&r, "search model.name=qwen3-30b-a3b cluster.topology=dgx-h100 cluster.num_gpus=16 "
            "model.moe_token_dispatcher_type=alltoall train.global_batch_size=512 model.seq_length=4096 "
            "model.tensor_model_parallel_size=1 model.pipeline_model_parallel_size=1 model.context_parallel_size=1 "
            "model.expert_model_parallel_size=16 train.micro_batch_size=1 model.recompute_granularity=selective "
            "'model.recompute_modules=[core_attn,moe_act,layernorm]' ddp.grad_reduce_in_fp32=false "
            "--ep-overlap --top 2 --jobs 1");
    cr_assert_eq(r.status, 0, "%s", r.out);
    const char *one = strstr(r.out, "\n1 "), *two = strstr(r.out, "\n2 ");
    cr_assert(one && two && strstr(r.out, " epov "), "%s", r.out);
    char l1[512], l2[512];
    snprintf(l1, sizeof l1, "%.*s", (int)strcspn(one + 1, "\n"), one + 1);
    snprintf(l2, sizeof l2, "%.*s", (int)strcspn(two + 1, "\n"), two + 1);
    cr_expect_str_eq(epov_cell(l1), "on", "#1 overlapped: %s", l1);
    cr_expect_str_eq(epov_cell(l2), "off", "#2 not: %s", l2);
    cr_expect(strstr(r.out, "model.overlap_moe_expert_parallel_comm=true"), "#1's rerun words say so: %s", r.out);
}
