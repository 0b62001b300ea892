/* Measured efficiency tables (cluster.compute.microbench): the file format
 * bench/gpu_microbench.py writes (tests/data/microbench_synthetic.cfg was
 * written by its write_cfg), GEMM efficiency from the nearest measured
 * shape, attention interpolated in log2(keys), the measured HBM bandwidth,
 * and bad tables rejected with the key and file:line. */
#define _DEFAULT_SOURCE /* mkstemps */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_run.h"
#include "compute.h"
#include "config.h"
#include "microbench.h"

#define TABLE "tests/data/microbench_synthetic.cfg"

static void resolve_with(run_inputs *in, const char *table)
{
    sim_err err;
    sim_err_clear(&err);
    cfg_t *c = cfg_create(PARSIM_SOURCE_DIR);
    cr_assert_not_null(c);
    char kv[600];
    snprintf(kv, sizeof kv, "cluster.compute.microbench=%s", table);
    const char *keys[] = { "model.name=llama3-8b", "cluster.topology=dgx-h100", "cluster.num_gpus=8",
                           "train.global_batch_size=8", kv, NULL };
    for (const char **k = keys; *k; k++)
        cr_assert_eq(cfg_set_override(c, *k, &err), SIM_OK, "%s", err.msg);
    char buf[1024];
    int rc = cfg_resolve(c, in, &err);
    sim_err_format(&err, buf, sizeof buf);
    cr_assert_eq(rc, SIM_OK, "%s", buf);
    cfg_destroy(c);
}

Test(microbench, loads_what_gpu_microbench_writes)
{
    microbench_table t;
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(microbench_load(PARSIM_SOURCE_DIR "/" TABLE, &t, &err), SIM_OK, "%s", err.msg);
    cr_assert_eq(t.n_gemm[0], 2);
    cr_assert_eq(t.n_gemm[1], 1);
    cr_assert_eq(t.n_attn[0], 3);
    cr_assert_eq(t.n_attn[1], 1);
    cr_assert(fabs(t.hbm_bytes_per_s - 2000e9) < 1.0);
    double e;
    /* nearest shape in log space */
    cr_assert(microbench_gemm_efficiency(&t, 0, 6000, 9000, 8192, &e));
    cr_assert_float_eq(e, 0.4, 1e-6);
    cr_assert(microbench_gemm_efficiency(&t, 0, 600, 400, 512, &e));
    cr_assert_float_eq(e, 0.1, 1e-6);
    /* attention: head dim 128, halfway between 1024 and 4096 keys in log2 */
    cr_assert(microbench_attention_efficiency(&t, false, 2048, 128, &e));
    cr_assert_float_eq(e, 0.4, 1e-6);
    /* flat beyond the measured keys; the nearest head dim (64 for 80) */
    cr_assert(microbench_attention_efficiency(&t, false, 65536, 128, &e));
    cr_assert_float_eq(e, 0.5, 1e-6);
    cr_assert(microbench_attention_efficiency(&t, false, 8192, 80, &e));
    cr_assert_float_eq(e, 0.2, 1e-6);
    cr_assert(microbench_attention_efficiency(&t, true, 512, 128, &e));
    cr_assert_float_eq(e, 0.25, 1e-6);
}

/* With the table, a GEMM runs at peak x measured efficiency (x the sustained
 * fraction), attention at the interpolated efficiency, memory-bound kernels
 * at the measured copy bandwidth. */
Test(microbench, compute_uses_the_table)
{
    static run_inputs in;
    resolve_with(&in, PARSIM_SOURCE_DIR "/" TABLE);
    const cluster_spec *c = &in.cluster;
    double m = 8192, n = 8192, k = 8192, ov = c->compute.kernel_overhead_s;
    double t = compute_gemm_s(c, m, n, k, GEMM_BF16);
    cr_assert(fabs((t - ov) / (2 * m * n * k / (c->gpu.peak_bf16_flops_per_s * 0.4)) - 1) < 1e-6, "%.9g s", t);
    double fp8 = compute_gemm_s(c, m, n, k, GEMM_FP8);
    cr_assert(fabs((fp8 - ov) / (2 * m * n * k / (c->gpu.peak_fp8_flops_per_s * 0.3)) - 1) < 1e-6, "%.9g s", fp8);
    double flops = 1e12;
    double a = compute_attention_s(c, &(compute_attn){ .head_dim = 128 }, flops, 0, 2048, false);
    cr_assert(fabs((a - ov) / (flops / (c->gpu.peak_bf16_flops_per_s * 0.4)) - 1) < 1e-6, "%.9g s", a);
    double mem = compute_memory_s(c, 4e9);
    cr_assert(fabs((mem - ov) / (4e9 / 2000e9) - 1) < 1e-9, "%.9g s", mem);

    /* the sustained fraction scales the measured ceilings too */
    in.cluster.compute.sustained_fraction = 0.5;
    double t2 = compute_gemm_s(c, m, n, k, GEMM_BF16);
    cr_assert(fabs((t2 - ov) / (t - ov) - 2.0) < 1e-9, "%.9g s vs %.9g s", t2, t);
}

Test(microbench, bad_tables_exit_2_naming_key_and_line)
{
    char path[] = "/tmp/parsim_microbench_XXXXXX.cfg";
    int fd = mkstemps(path, 4);
    cr_assert_geq(fd, 0);
    FILE *f = fdopen(fd, "w");
    fputs("microbench: {\n  gemm_bf16 = (\n    { m = 64; n = 64; k = 64; efficiency = 1.5; }\n  );\n};\n", f);
    fclose(f);
    result r;
    char args[1024];
    snprintf(args, sizeof args, "run configs/llama3-70b-h100x64.cfg cluster.compute.microbench=%s", path);
    run(&r, args);
    cr_assert_eq(r.status, 2, "%s", r.out);
    cr_assert(strstr(r.out, "cluster.compute.microbench"), "%s", r.out);
    cr_assert(strstr(r.out, ":3"), "no line 3 in: %s", r.out);
    cr_assert(strstr(r.out, "efficiency"), "%s", r.out);
    remove(path);

    run(&r, "run configs/llama3-70b-h100x64.cfg cluster.compute.microbench=no/such/table.cfg");
    cr_assert_eq(r.status, 2, "%s", r.out);
    cr_assert(strstr(r.out, "cluster.compute.microbench"), "%s", r.out);

    run(&r, "run configs/llama3-70b-h100x64.cfg cluster.compute.microbench=configs/llama3-70b-h100x64.cfg");
    cr_assert_eq(r.status, 2, "%s", r.out);
    cr_assert(strstr(r.out, "microbench"), "%s", r.out);
}

/* A table changes the simulated step; the same inputs give the same bytes. */
Test(microbench, a_table_moves_the_step)
{
    result a, b;
    run(&a, "run configs/llama3-70b-h100x64.cfg --format csv");
    run(&b, "run configs/llama3-70b-h100x64.cfg --format csv cluster.compute.microbench=" TABLE);
    cr_assert_eq(a.status, 0, "%s", a.out);
    cr_assert_eq(b.status, 0, "%s", b.out);
    cr_assert(strcmp(a.out, b.out) != 0);
}
