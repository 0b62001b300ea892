/* HybridEP's SM count (model.moe_hybridep_num_sms): the kernel table's
 * flex points at the published SM count nearest it (kernels.md §3.3, GB200
 * NVL72 at 16 and 32 SMs), the step's EP stream slower at 16 than at 32,
 * an out-of-range count and a table out of SM order refused by name. */
#define _DEFAULT_SOURCE /* mkdtemp */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "acc_cluster.h"
#include "compute.h"
#include "scratch.h"

/* bytes/s of one exchange of 1 GB, less the launch. */
static double rate(const cluster_spec *c, bool combine, double ranks, double sms)
{
    double t;
    cr_assert(compute_flex_s(c, KT_HYBRIDEP, combine, ranks, 1, sms, 1e9, &t));
    return 1e9 / (t - c->compute.kernel_overhead_s);
}

Test(hybridep_sms, the_table_point_of_the_nearest_sm_count)
{
    sim s2, s3;
    const cluster_spec *c = cluster_of(&s2, "gb200-nvl72");
    /* kernels.md §3.3 kernel-only 8 ranks: combine 684 at 16 SMs, 737 at 32, both x 465/605 */
    cr_assert_float_eq(rate(c, true, 8, 16), 525.7e9, 1e-3 * 525.7e9);
    cr_assert_float_eq(rate(c, true, 8, 32), 566.5e9, 1e-3 * 566.5e9);
    cr_assert_float_eq(rate(c, false, 8, 16), 565.4e9, 1e-3 * 565.4e9);
    /* 20 SMs is nearer 16 in log space, 24 nearer 32; 0 reads the largest */
    cr_assert_float_eq(rate(c, true, 8, 20), rate(c, true, 8, 16), 1.0);
    cr_assert_float_eq(rate(c, true, 8, 24), rate(c, true, 8, 32), 1.0);
    cr_assert_float_eq(rate(c, true, 8, 0), rate(c, true, 8, 32), 1.0);
    /* between published rank counts: within the 16-SM curve, never the 32-SM one */
    double r24 = rate(c, true, 24, 16);
    cr_assert(r24 < 461.9e9 && r24 > 420.4e9, "%g", r24);
    /* the network points state no SM count: across two domains the network
     * paces the exchange, the same at either count */
    const cluster_spec *g3 = cluster_of(&s3, "gb300-nvl72");
    double a, b;
    cr_assert(compute_flex_s(g3, KT_HYBRIDEP, true, 64, 2, 16, 1e9, &a));
    cr_assert(compute_flex_s(g3, KT_HYBRIDEP, true, 64, 2, 32, 1e9, &b));
    cr_assert_float_eq(a, b, 1e-15, "16 SMs %g s, 32 SMs %g s", a, b);
    sim_free(&s2);
    sim_free(&s3);
}

Test(hybridep_sms, the_step_sees_it)
{
    sim lo, hi;
    const char *k16[] = { "model.name=qwen3-30b-a3b", "cluster.topology=gb200-nvl72", "cluster.num_gpus=8",
                          "model.seq_length=4096", "train.global_batch_size=8",
                          "model.expert_model_parallel_size=8", "model.expert_tensor_parallel_size=1",
                          "model.moe_token_dispatcher_type=flex", "model.moe_flex_dispatcher_backend=hybridep",
                          "model.moe_hybridep_num_sms=16", NULL };
    const char *k32[] = { "model.name=qwen3-30b-a3b", "cluster.topology=gb200-nvl72", "cluster.num_gpus=8",
                          "model.seq_length=4096", "train.global_batch_size=8",
                          "model.expert_model_parallel_size=8", "model.expert_tensor_parallel_size=1",
                          "model.moe_token_dispatcher_type=flex", "model.moe_flex_dispatcher_backend=hybridep",
                          "model.moe_hybridep_num_sms=32", NULL };
    sim_run(&lo, k16);
    sim_run(&hi, k32);
    double e16 = step_result_get(lo.st)->comm_s[STREAM_EP], e32 = step_result_get(hi.st)->comm_s[STREAM_EP];
    /* half the bytes at 565.4 / 576.0, half at 525.7 / 566.5 (dispatch and combine, both directions) */
    double want = 0.5 * (576.0 / 565.4 + 566.5 / 525.7);
    cr_assert(e16 > e32, "16 SMs %.6f s, 32 SMs %.6f s", e16, e32);
    cr_assert(e16 / e32 < want + 0.005 && e16 / e32 > 1.0 + 0.5 * (want - 1.0), "ratio %.4f, about %.4f",
              e16 / e32, want);
    sim_free(&lo);
    sim_free(&hi);
}

/* A kernel file's GEMM and attention groups (8 lines), before its flex group. */
#define KERNELS_HEAD                                                                                      \
    "kernels: {\n gemm: { bf16 = ( { m = 8; n = 8; k = 8; tflops = 100.0; derate = false; src = \"x\"; } ); };\n" \
    "attention: { auto = \"cudnn\"; flash = \"cudnn\"; curves = (\n"                                        \
    "{ family = \"cudnn\"; pass = \"fwd\"; causal = true; window = 0; head_dim = 128; derate = false;\n"     \
    "  seq = [1024]; tflops = [300.0]; src = \"x\"; },\n"                                                     \
    "{ family = \"cudnn\"; pass = \"bwd\"; causal = true; window = 0; head_dim = 128; derate = false;\n"     \
    "  seq = [1024]; tflops = [300.0]; src = \"x\"; }); };\n"

Test(hybridep_sms, bad_counts_are_refused_by_name)
{
    result r;
    run(&r, "run model.name=qwen3-30b-a3b cluster.topology=gb200-nvl72 cluster.num_gpus=8 "
            "train.global_batch_size=8 model.expert_model_parallel_size=8 model.moe_hybridep_num_sms=0");
    cr_assert_eq(r.status, 2, "%s", r.out);
    cr_assert(strstr(r.out, "model.moe_hybridep_num_sms"), "%s", r.out);
    cr_assert_eq(count_lines(r.out), 1, "%s", r.out);

    /* a kernel file whose points go back to fewer SMs */
    make_dir();
    char path[128];
    path_in(path, sizeof path, "bad.cfg");
    write_file(path,
               KERNELS_HEAD
               "flex: { hybridep = (\n"
               "{ scope = \"nvlink\"; ranks = 8; sms = 32; dispatch_gbytes_per_s = 100.0; combine_gbytes_per_s = 90.0; src = \"x\"; },\n"
               "{ scope = \"nvlink\"; ranks = 16; sms = 16; dispatch_gbytes_per_s = 100.0; combine_gbytes_per_s = 90.0; src = \"x\"; }\n"
               "); };\n};\n");
    runf(&r, "run model.name=llama3-8b cluster.topology=dgx-h100 cluster.num_gpus=8 train.global_batch_size=8 "
             "cluster.compute.kernels=%s", path);
    cr_assert_eq(r.status, 2, "%s", r.out);
    char where[256];
    snprintf(where, sizeof where, "%s:10: kernels.flex.hybridep[1].ranks: list the nvlink points", path);
    cr_assert(strstr(r.out, where), "expected '%s' in: %s", where, r.out);
    cr_assert(strstr(r.out, "by increasing sms first"), "%s", r.out);
    cr_assert_eq(count_lines(r.out), 1, "%s", r.out);

    /* sms out of range names its member */
    write_file(path,
               KERNELS_HEAD
               "flex: { hybridep = (\n"
               "{ scope = \"nvlink\"; ranks = 8; sms = 0; dispatch_gbytes_per_s = 100.0; combine_gbytes_per_s = 90.0; src = \"x\"; }\n"
               "); };\n};\n");
    runf(&r, "run model.name=llama3-8b cluster.topology=dgx-h100 cluster.num_gpus=8 train.global_batch_size=8 "
             "cluster.compute.kernels=%s", path);
    cr_assert_eq(r.status, 2, "%s", r.out);
    snprintf(where, sizeof where, "%s:9: kernels.flex.hybridep[0].sms: out of range", path);
    cr_assert(strstr(r.out, where), "expected '%s' in: %s", where, r.out);
    cr_assert_eq(count_lines(r.out), 1, "%s", r.out);
    remove_dir();
}
