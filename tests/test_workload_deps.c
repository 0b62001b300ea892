/* Op templates keep every dependency, however far back, through fusing and
 * on the engine; durations past LIMIT_DURATION_S and activations past
 * LIMIT_ACT_BYTES are bad input naming what they are. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_run.h"
#include "engine.h"
#include "workload.h"

/* Op 0 (1 s on the TP stream) starts a pass; ops 1..LONG alternate between
 * the compute and CP streams in a chain of 1 ms ops (alternating, so that
 * fusing keeps them apart); op LONG+1 waits for the chain and for op 0,
 * LONG+1 ops back. */
#define LONG 300

static void long_template(wl_opbuf *b)
{
    memset(b, 0, sizeof *b);
    cr_assert_eq(wl_push(b, "long", STREAM_TP, 1.0, WL_NONE, WL_NONE), 0);
    for (int32_t i = 1; i <= LONG; i++)
        wl_push(b, "step", i % 2 ? STREAM_COMPUTE : STREAM_CP, 1e-3, i > 1 ? i - 1 : WL_NONE, WL_NONE);
    cr_assert_eq(wl_push(b, "last", STREAM_COMPUTE, 1e-3, LONG, 0), LONG + 1);
    cr_assert_eq(b->oom, 0);
    cr_assert_null(b->too_long_name);
}

/* Start of the template's last op when its ops run alone on an engine. */
static sim_time_ps last_start(const wl_opbuf *b)
{
    engine_t *e = eng_create(STREAM_KINDS, 0, (size_t)b->n, 2 * (size_t)b->n);
    cr_assert_not_null(e);
    for (int32_t i = 0; i < b->n; i++) {
        eng_task t = eng_add_task(e, b->ops[i].stream, b->ops[i].duration_ps, i);
        cr_assert_eq(t, i);
        for (int j = 0; j < 2; j++)
            if (b->ops[i].dep_back[j])
                cr_assert_eq(eng_add_dep(e, t - b->ops[i].dep_back[j], t), SIM_OK);
    }
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(eng_run(e, &err), SIM_OK, "%s", err.msg);
    sim_time_ps s = eng_task_start(e, b->n - 1);
    eng_destroy(e);
    return s;
}

Test(workload_deps, dependency_far_back_is_kept)
{
    wl_opbuf b;
    long_template(&b);
    const wl_op *last = &b.ops[LONG + 1];
    cr_assert_eq(last->dep_back[0], 1);
    cr_assert_eq(last->dep_back[1], LONG + 1, "dependency %d back stored as %d", LONG + 1, (int)last->dep_back[1]);
    /* Without the far dependency the last op would start when the chain
     * ends (0.3 s); with it, when op 0 ends (1 s). */
    cr_assert_eq(last_start(&b), time_from_s(1.0));
    free(b.ops);
}

Test(workload_deps, dependency_far_back_survives_fusing)
{
    wl_opbuf b;
    long_template(&b);
    /* Every link of the chain changes stream and the last op has two
     * dependencies: nothing fuses, and the far edge stays as it is. */
    int32_t *map = malloc((size_t)b.n * sizeof *map);
    cr_assert_not_null(map);
    cr_assert_eq(wl_fuse_chains(&b, map, NULL, 0), SIM_OK);
    cr_assert_eq(b.n, LONG + 2);
    cr_assert_eq(map[LONG + 1], LONG + 1);
    cr_assert_eq(b.ops[LONG + 1].dep_back[1], LONG + 1);
    cr_assert_eq(last_start(&b), time_from_s(1.0));
    free(map);
    free(b.ops);
}

/* A chain on one stream fuses to one op; the far dependency of the op
 * after it is renumbered to the fused indices, not dropped. */
Test(workload_deps, dependency_far_back_renumbered_by_fusing)
{
    wl_opbuf b;
    memset(&b, 0, sizeof b);
    wl_push(&b, "long", STREAM_TP, 1.0, WL_NONE, WL_NONE);
    wl_push(&b, "head", STREAM_COMPUTE, 1e-3, WL_NONE, WL_NONE);
    for (int32_t i = 2; i <= LONG; i++)
        wl_push(&b, "step", STREAM_COMPUTE, 1e-3, i - 1, WL_NONE);
    /* A CP op after the chain, then the last op waits for it and op 0. */
    wl_push(&b, "cp", STREAM_CP, 1e-3, LONG, WL_NONE);
    wl_push(&b, "last", STREAM_COMPUTE, 1e-3, LONG + 1, 0);
    cr_assert_eq(b.ops[LONG + 2].dep_back[1], LONG + 2);
    cr_assert_eq(wl_fuse_chains(&b, NULL, NULL, 0), SIM_OK);
    cr_assert_eq(b.n, 4, "ops after fusing: %d", (int)b.n); /* long, fused chain, cp, last */
    cr_assert_eq(b.ops[3].dep_back[1], 3);
    cr_assert_eq(b.ops[1].duration_ps, (sim_time_ps)LONG * time_from_s(1e-3));
    cr_assert_eq(last_start(&b), time_from_s(1.0));
    free(b.ops);
}

/* Durations out of range from the op buffer itself: not finite, negative
 * or past the limit; the first one is named. */
Test(workload_deps, op_duration_out_of_range_is_flagged)
{
    const double bad[] = {-1e-9, 2e7, INFINITY, NAN};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        wl_opbuf b;
        memset(&b, 0, sizeof b);
        wl_push(&b, "fine", STREAM_COMPUTE, 1.0, WL_NONE, WL_NONE);
        wl_push(&b, "bad", STREAM_COMPUTE, bad[i], 0, WL_NONE);
        wl_push(&b, "worse", STREAM_COMPUTE, 3e7, 1, WL_NONE);
        cr_assert_not_null(b.too_long_name, "%g not flagged", bad[i]);
        cr_assert_str_eq(b.too_long_name, "bad");
        free(b.ops);
    }
}

#define BASE "run model.name=llama3-8b cluster.topology=dgx-h100 train.global_batch_size=64 "
/* The analytic efficiencies make kernels scale with the raised peak (the
 * kernel table's published rates do not). */
#define FAST                                                                                               \
    "run model.name=llama3-8b cluster.topology=dgx-h100 cluster.num_gpus=1 model.num_layers=1 "           \
    "cluster.compute.gemm_efficiency=0.8 cluster.compute.attention_fwd_efficiency=0.6 "                   \
    "cluster.compute.attention_bwd_efficiency=0.4 "                                                       \
    "cluster.gpu.hbm_bw_gbytes_per_s=1e6 cluster.gpu.peak_bf16_tflops=1e6 model.seq_length=2000000 model.hidden_size=262144 "

Test(workload_deps, quantities_past_the_limits_are_bad_input, .timeout = 60)
{
    static const struct {
        const char *args;
        const char *msg;
    } cases[] = {
        /* A DP bucket over a NIC of 1 byte/s. */
        {BASE "cluster.num_gpus=16 cluster.scaleout.nic_bw_gbytes_per_s=1e-9 ddp.bucket_size=100000000000 "
              "ddp.overlap_grad_reduce=true",
         "the DP gradient reduction of bucket 0 of stage 0 chunk 0 (sized by ddp.bucket_size"},
        /* The pipeline send between two nodes over the same NIC. */
        {BASE "cluster.num_gpus=16 cluster.scaleout.nic_bw_gbytes_per_s=1e-9 model.pipeline_model_parallel_size=2",
         "the pipeline send of one microbatch's activations of stage 0 would take"},
        /* A GPU of 1e-6 TFLOPS: one pass alone is beyond the limit. */
        {BASE "cluster.num_gpus=8 cluster.gpu.peak_bf16_tflops=0.000001",
         "the forward pass of stage 0 chunk 0 (its kernels and transfers together) would take"},
        /* 1e-4 TFLOPS: each pass fits, the step's 128 passes do not. */
        {BASE "cluster.num_gpus=8 cluster.gpu.peak_bf16_tflops=0.0001",
         "the step's kernels and transfers together would take"},
        /* One kernel alone past the limit: HBM of 1e-12 GB/s. */
        {BASE "cluster.num_gpus=8 cluster.gpu.hbm_bw_gbytes_per_s=1e-12", "kernel or transfer '"},
        /* Activations past LIMIT_ACT_BYTES on a GPU fast enough to make
         * them in time: one microbatch of 8e18 bytes, then 2048 of 4e15. */
        {FAST "train.micro_batch_size=1048576 train.global_batch_size=1048576",
         "the activations of one microbatch on stage 0 chunk 0 ("},
        {FAST "train.micro_batch_size=512 train.global_batch_size=1048576",
         "the activations of stage 0's 2048 microbatches ("},
    };
    result r;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run(&r, cases[i].args);
        cr_expect_eq(r.status, 2, "`%s` exited %d: %s", cases[i].args, r.status, r.out);
        cr_expect(strncmp(r.out, "parsim: ", 8) == 0 && strstr(r.out, cases[i].msg) != NULL &&
                      strchr(r.out, '\n') == r.out + strlen(r.out) - 1,
                  "`%s`: expected one line with '%s', got: %s", cases[i].args, cases[i].msg, r.out);
    }
}

/* A trace of 4e6 microbatches would have a task per kernel: more than the
 * engine's int32 task ids; refused before anything is allocated for it,
 * and no trace file appears. */
Test(workload_deps, task_limit_is_bad_input, .timeout = 60)
{
    char dir[] = "/tmp/parsim-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char args[512], path[64];
    snprintf(path, sizeof path, "%s/t.json", dir);
    snprintf(args, sizeof args, "run model.name=llama3-8b cluster.topology=dgx-h100 cluster.num_gpus=1 "
                                "model.num_layers=1024 train.global_batch_size=1048576 --trace %s", path);
    result r;
    run(&r, args);
    cr_expect_eq(r.status, 2, "exited %d: %s", r.status, r.out);
    cr_expect(strstr(r.out, "more than parsim's engine holds (2147483647): a trace has a task per kernel") != NULL,
              "%s", r.out);
    cr_expect_eq(access(path, F_OK), -1, "a trace was written");
    cr_assert_eq(rmdir(dir), 0);
}
