/* Published kernel tables (cluster.compute.kernels, kernels/<gpu>.cfg): a
 * table shape reproduces its TFLOPS, precision recipes and attention
 * families differ as the tables say, sliding windows and GB300's exponent
 * rate show, the flex dispatcher backends take their own rates, and a bad
 * kernel file is refused naming file:line and key. */
#define _DEFAULT_SOURCE /* mkdtemp */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "compute.h"
#include "config.h"
#include "kerneltable.h"
#include "scratch.h"
#include "sim_run.h"

static run_inputs in_buf;

/* The cluster of a topology preset, resolved as the command line does. */
static const cluster_spec *topo(const char *name)
{
    sim_err err;
    sim_err_clear(&err);
    cfg_t *c = cfg_create(PARSIM_SOURCE_DIR);
    cr_assert_not_null(c);
    char kv[128];
    snprintf(kv, sizeof kv, "cluster.topology=%s", name);
    const char *keys[] = { "model.name=llama3-8b", kv, "cluster.num_gpus=8", "train.global_batch_size=8", NULL };
    for (const char **k = keys; *k; k++)
        cr_assert_eq(cfg_set_override(c, *k, &err), SIM_OK, "%s", err.msg);
    char buf[1024];
    int rc = cfg_resolve(c, &in_buf, &err);
    sim_err_format(&err, buf, sizeof buf);
    cr_assert_eq(rc, SIM_OK, "%s", buf);
    cfg_destroy(c);
    cr_assert(in_buf.cluster.compute.kernels.loaded, "%s names no kernel table", name);
    return &in_buf.cluster;
}

/* Achieved TFLOPS of a GEMM: its flops over its time without the launch. */
static double gemm_tflops(const cluster_spec *c, double m, double n, double k, gemm_dtype dt)
{
    double t = compute_gemm_s(c, m, n, k, dt) - c->compute.kernel_overhead_s;
    return 2.0 * m * n * k / t / 1e12;
}

static double attn_tflops(const cluster_spec *c, kt_family f, bool causal, double window, double head_dim,
                          double seq, bool bwd)
{
    compute_attn a = { f, causal, window, head_dim, seq };
    double flops = 1e15; /* compute-bound: no bytes */
    double t = compute_attention_s(c, &a, flops, 0.0, window > 0 ? window : seq, bwd) - c->compute.kernel_overhead_s;
    return flops / t / 1e12;
}

Test(kernels, table_shape_reproduces_its_tflops)
{
    const cluster_spec *c = topo("gb200-nvl72");
    cr_assert_float_eq(gemm_tflops(c, 8192, 8192, 16384, GEMM_BF16), 1812.0, 1e-6 * 1812.0);
    cr_assert_float_eq(gemm_tflops(c, 8192, 8192, 1024, GEMM_BF16), 1746.0, 1e-6 * 1746.0);
    /* a sweep's best shape (MAMF) is a ceiling: the model's tile and wave
     * loss still applies at it (cuBLAS's own tile choice is unknown) */
    double best = gemm_tflops(c, 4096, 9728, 2048, GEMM_BF16);
    cr_assert(best <= 1822.0 && best > 0.8 * 1822.0, "%.1f", best);
    /* grouped: Megatron's GB200 MXFP8 grouped GEMM */
    double t = compute_grouped_gemm_s(c, 8, 4096, 2048, 7168, GEMM_MXFP8) - c->compute.kernel_overhead_s;
    cr_assert_float_eq(2.0 * 8 * 4096 * 2048 * 7168 / t / 1e12, 2672.0, 1e-6 * 2672.0);
    /* a shape far below the table's sits lower (tile and wave loss) */
    cr_assert_lt(gemm_tflops(c, 256, 512, 1024, GEMM_BF16), 0.5 * 1822.0);
}

Test(kernels, derate_applies_only_where_the_file_says)
{
    /* H800 DeepGEMM blockwise figures were taken at boost: 1520 x 1575/1980 */
    const cluster_spec *c = topo("h800");
    cr_assert_float_eq(c->compute.kernels.clock_fraction, 0.795, 1e-9);
    cr_assert_float_eq(gemm_tflops(c, 4096, 7168, 16384, GEMM_FP8_BLOCK), 1520.0 * 0.795, 1e-6 * 1520.0);
    /* MAMF includes its throttling: no derate (at most the figure) */
    double mamf = gemm_tflops(c, 1024, 9216, 14336, GEMM_FP8);
    cr_assert(mamf <= 1402.6 && mamf > 0.7 * 1402.6, "%.1f", mamf);
}

Test(kernels, mxfp8_and_per_tensor_fp8_differ_as_the_table_says)
{
    const cluster_spec *c = topo("dgx-b200");
    double mx = gemm_tflops(c, 8192, 8192, 8192, GEMM_MXFP8);
    double pt = gemm_tflops(c, 8192, 8192, 8192, GEMM_FP8);
    cr_assert_float_eq(mx, 2894.5, 1e-6 * 2894.5);
    /* per-tensor: the FP8 MAMF (a best shape) x 8192^3's own tile, wave
     * and prologue loss: 64 x 32 tiles of 128 x 256 in waves of 148 SMs,
     * K 8192 against the topology's 128 of prologue */
    double util = 8192.0 / (8192.0 + 128.0) * 2048.0 / (ceil(2048.0 / 148.0) * 148.0);
    cr_assert_float_eq(pt, 3432.5 * util, 1e-6 * 3432.5);
    cr_assert_float_eq(pt / mx, 3432.5 * util / 2894.5, 1e-6);
    cr_assert_eq(compute_gemm_dtype(PREC_MXFP8), GEMM_MXFP8);
    cr_assert_eq(compute_gemm_dtype(PREC_FP8_CS), GEMM_FP8);
    cr_assert_eq(compute_gemm_dtype(PREC_FP8_DELAYED), GEMM_FP8);
    cr_assert_eq(compute_gemm_dtype(PREC_FP8_BLOCKWISE), GEMM_FP8_BLOCK);
    /* the same shape under the two recipes: per-tensor runs faster */
    cr_assert_gt(compute_gemm_s(c, 8192, 8192, 8192, GEMM_MXFP8), compute_gemm_s(c, 8192, 8192, 8192, GEMM_FP8));
    /* A100 has no fp8: fp8 recipes run the bf16 figures */
    const cluster_spec *a = topo("dgx-a100");
    cr_assert_eq(compute_gemm_s(a, 1024, 10240, 5120, GEMM_FP8), compute_gemm_s(a, 1024, 10240, 5120, GEMM_BF16));
}

Test(kernels, fa2_on_b200_is_a_third_of_cudnn)
{
    const cluster_spec *c = topo("dgx-b200");
    cr_assert_eq(compute_attention_family(c, ATTN_AUTO, false), KT_CUDNN);
    cr_assert_eq(compute_attention_family(c, ATTN_FUSED, false), KT_CUDNN);
    cr_assert_eq(compute_attention_family(c, ATTN_FLASH, false), KT_FA2);
    double fa2 = attn_tflops(c, KT_FA2, true, 0, 128, 8192, false);
    double cudnn = attn_tflops(c, KT_CUDNN, true, 0, 128, 8192, false);
    cr_assert_float_eq(fa2, 400.0, 1e-6 * 400.0);
    cr_assert_float_eq(cudnn, 1171.0, 1e-6 * 1171.0);
    cr_assert(fa2 / cudnn > 0.3 && fa2 / cudnn < 0.4, "FA2 / cuDNN = %.3f", fa2 / cudnn);
    /* between published lengths: linear in log2(seq) */
    double mid = attn_tflops(c, KT_CUDNN, true, 0, 128, 8192 * M_SQRT2, false);
    cr_assert_float_eq(mid, 0.5 * (1171.0 + 1332.0), 1e-6 * 1332.0);
    /* Ampere: auto is flash-attn */
    cr_assert_eq(compute_attention_family(topo("dgx-a100"), ATTN_AUTO, false), KT_FA2);
}

Test(kernels, softmax_sinks_run_a_family_that_has_them)
{
    const cluster_spec *c = topo("dgx-b200");
    cr_assert_eq(compute_attention_family(c, ATTN_FLASH, true), KT_CUDNN);
    /* gpt-oss with learnable sinks and the flash backend: as fused */
    sim a, b;
    const char *base[] = { "model.name=gpt-oss-120b", "cluster.topology=dgx-b200", "cluster.num_gpus=8",
                           "train.global_batch_size=8", "model.expert_model_parallel_size=8",
                           "model.attention_backend=flash", "model.softmax_type=learnable", NULL };
    sim_run(&a, base);
    const char *fused[] = { "model.name=gpt-oss-120b", "cluster.topology=dgx-b200", "cluster.num_gpus=8",
                            "train.global_batch_size=8", "model.expert_model_parallel_size=8",
                            "model.attention_backend=fused", NULL };
    sim_run(&b, fused);
    cr_assert_float_eq(step_result_get(a.st)->step_time_s, step_result_get(b.st)->step_time_s, 1e-12);
    sim_free(&a);
    sim_free(&b);
}

Test(kernels, window_128_on_gb200_is_under_a_tenth_of_peak)
{
    const cluster_spec *c = topo("gb200-nvl72");
    double swa = attn_tflops(c, KT_CUDNN, true, 128, 64, 4096, false);
    cr_assert_float_eq(swa, 161.0, 1e-6 * 161.0);
    cr_assert_lt(swa * 1e12, 0.1 * c->gpu.peak_bf16_flops_per_s);
    /* the window picks the window curve, not the full one at 128 keys */
    cr_assert_gt(attn_tflops(c, KT_CUDNN, true, 1024, 64, 4096, false), 4.0 * swa);
}

Test(kernels, gb300_attention_is_faster_than_gb200_by_the_tables_ratio)
{
    double gb200 = attn_tflops(topo("gb200-nvl72"), KT_CUDNN, true, 0, 128, 8192, false);
    double gb300 = attn_tflops(topo("gb300-nvl72"), KT_CUDNN, true, 0, 128, 8192, false);
    cr_assert_float_eq(gb300 / gb200, 1899.0 / 1584.0, 1e-9);
    cr_assert_float_eq(attn_tflops(topo("gb300-nvl72"), KT_CUDNN, true, 0, 128, 8192, true) /
                           attn_tflops(topo("gb200-nvl72"), KT_CUDNN, true, 0, 128, 8192, true),
                       1292.0 / 1211.0, 1e-9);
}

Test(kernels, flex_backends_take_their_rates)
{
    const cluster_spec *c = topo("gb200-nvl72");
    double bytes = 1e9, deep, hyb;
    cr_assert(compute_flex_s(c, KT_DEEPEP, true, 32, 1, 0, bytes, &deep));
    cr_assert(compute_flex_s(c, KT_HYBRIDEP, true, 32, 1, 0, bytes, &hyb));
    double oh = c->compute.kernel_overhead_s;
    cr_assert_float_eq(bytes / (deep - oh), 190e9, 1e-3 * 190e9); /* Megatron's GB200 blog, EP32 combine */
    cr_assert_float_eq(bytes / (hyb - oh), 465e9, 1e-3 * 465e9);  /* HybridEP Torch API, 32 ranks */
    cr_assert(compute_flex_s(c, KT_DEEPEP, false, 32, 1, 0, bytes, &deep));
    cr_assert_float_eq(bytes / (deep - oh), 400e9, 1e-3 * 400e9);
    /* A100 has none: the caller times an all-to-all */
    cr_assert(!compute_flex_s(topo("dgx-a100"), KT_DEEPEP, false, 8, 1, 0, bytes, &deep));

    /* the step sees it: HybridEP's faster combine shortens the EP stream */
    sim d, h;
    const char *kd[] = { "model.name=qwen3-30b-a3b", "cluster.topology=gb200-nvl72", "cluster.num_gpus=32",
                         "model.seq_length=4096", "train.global_batch_size=32",
                         "model.expert_model_parallel_size=32", "model.expert_tensor_parallel_size=1",
                         "model.moe_token_dispatcher_type=flex", NULL };
    const char *kh[] = { "model.name=qwen3-30b-a3b", "cluster.topology=gb200-nvl72", "cluster.num_gpus=32",
                         "model.seq_length=4096", "train.global_batch_size=32",
                         "model.expert_model_parallel_size=32", "model.expert_tensor_parallel_size=1",
                         "model.moe_token_dispatcher_type=flex", "model.moe_flex_dispatcher_backend=hybridep",
                         NULL };
    sim_run(&d, kd);
    sim_run(&h, kh);
    double ed = step_result_get(d.st)->comm_s[STREAM_EP], eh = step_result_get(h.st)->comm_s[STREAM_EP];
    cr_assert(eh < 0.8 * ed, "hybridep %.4f s vs deepep %.4f s", eh, ed);
    sim_free(&d);
    sim_free(&h);
}

/* A kernel file with one bad entry: exit 2, the file:line and the key. */
static void bad_file(const char *body, int line, const char *key, const char *rule)
{
    make_dir();
    char path[128];
    path_in(path, sizeof path, "bad.cfg");
    write_file(path, body);
    result r;
    runf(&r, "run model.name=llama3-8b cluster.topology=dgx-h100 cluster.num_gpus=8 train.global_batch_size=8 "
             "cluster.compute.kernels=%s", path);
    cr_assert_eq(r.status, 2, "%s", r.out);
    char where[256];
    snprintf(where, sizeof where, "%s:%d: %s: %s", path, line, key, rule);
    cr_assert(strstr(r.out, where), "expected '%s' in: %s", where, r.out);
    cr_assert(strstr(r.out, "cluster.compute.kernels"), "%s", r.out);
    cr_assert_eq(count_lines(r.out), 1, "%s", r.out);
    remove_dir();
}

#define ATTN_OK                                                                                           \
    "attention: { auto = \"cudnn\"; flash = \"cudnn\"; curves = (\n"                                        \
    "{ family = \"cudnn\"; pass = \"fwd\"; causal = true; window = 0; head_dim = 128; derate = false;\n"     \
    "  seq = [1024, 4096]; tflops = [300.0, 500.0]; src = \"x\"; },\n"                                       \
    "{ family = \"cudnn\"; pass = \"bwd\"; causal = true; window = 0; head_dim = 128; derate = false;\n"     \
    "  seq = [1024]; tflops = [300.0]; src = \"x\"; }); };\n"

Test(kernels, bad_kernel_files_name_file_line_and_key)
{
    bad_file("kernels: {\n gemm: { bf16 = (\n { m = 8; n = 8; k = 8; tflops = \"fast\"; derate = false; src = \"x\"; }\n"
             "); };\n" ATTN_OK "};\n",
             3, "kernels.gemm.bf16[0].tflops", "must be a number");
    bad_file("kernels: {\n gemm: { bf16 = (\n { m = 8; n = 8; k = 8; tflops = 100.0; derate = false; }\n"
             "); };\n" ATTN_OK "};\n",
             3, "kernels.gemm.bf16[0].src", "every figure needs its source");
    bad_file("kernels: {\n gemm: { bf16 = (\n { m = 8; n = 8; k = 8; tflops = -5.0; derate = false; src = \"x\"; }\n"
             "); };\n" ATTN_OK "};\n",
             3, "kernels.gemm.bf16[0].tflops", "out of range");
    bad_file("kernels: {\n gemm: { bf16 = (\n { m = 8; n = 8; k = 8; tflops = 100.0; src = \"x\"; }\n"
             "); };\n" ATTN_OK "};\n",
             3, "kernels.gemm.bf16[0].derate", "required true/false missing");
    bad_file("kernels: {\n gemm: { bf16 = ( { m = 8; n = 8; k = 8; tflops = 100.0; derate = false; src = \"x\"; } ); };\n"
             "attention: { auto = \"cudnn\"; flash = \"cudnn\"; curves = (\n"
             "{ family = \"cudnn\"; pass = \"fwd\"; causal = true; window = 0; head_dim = 128; derate = false;\n"
             "  seq = [4096,\n 1024]; tflops = [300.0, 500.0]; src = \"x\"; }); };\n};\n",
             6, "kernels.attention.curves[0].seq", "sequence lengths must increase strictly");
    bad_file("kernels: {\n gemm: { bf16 = ( { m = 8; n = 8; k = 8; tflops = 100.0; derate = false; src = \"x\"; } ); };\n"
             ATTN_OK "flex: { deepep = (\n"
             "{ scope = \"nvlink\"; ranks = 8; dispatch_gbytes_per_s = 100.0; combine_gbytes_per_s = 90.0; src = \"x\"; },\n"
             "{ scope = \"nvlink\"; ranks = 4; dispatch_gbytes_per_s = 100.0; combine_gbytes_per_s = 90.0; src = \"x\"; }\n"
             "); };\n};\n",
             10, "kernels.flex.deepep[1].ranks", "list the nvlink points, then the network points, each by strictly");
    bad_file("kernels: {\n gemm: { bf16 = ( { m = 8; n = 8; k = 8; tflops = 100.0; derate = false; src = \"x\"; } ); };\n"
             "attention: { auto = \"fa9\"; flash = \"cudnn\"; curves = (); };\n};\n",
             3, "kernels.attention.auto", "unknown name \"fa9\"");
    bad_file("kernels: {\n gemm: { bf16 = ( { m = 8; n = 8; k = 8; tflops = 100.0; derate = false; src = \"x\"; } ); };\n"
             "attention: { auto = \"fa2\"; flash = \"cudnn\"; curves = (\n"
             "{ family = \"cudnn\"; pass = \"fwd\"; causal = true; window = 0; head_dim = 128; derate = false;\n"
             "  seq = [1024]; tflops = [300.0]; src = \"x\"; }); };\n};\n",
             3, "kernels.attention.curves", "family cudnn (run by auto, flash, fused or sinks) needs a fwd and a bwd curve");
}

Test(kernels, no_table_and_no_efficiencies_is_refused)
{
    result r;
    run(&r, "run model.name=llama3-8b cluster.topology=dgx-h100 cluster.num_gpus=8 train.global_batch_size=8 "
            "cluster.compute.kernels=\"\"");
    cr_assert_eq(r.status, 2, "%s", r.out);
    cr_assert(strstr(r.out, "cluster.compute.kernels: no kernel table with GEMM figures"), "%s", r.out);
    /* the analytic efficiencies still replace the table where set */
    run(&r, "run model.name=llama3-8b cluster.topology=dgx-h100 cluster.num_gpus=8 train.global_batch_size=8 "
            "cluster.compute.kernels=\"\" cluster.compute.gemm_efficiency=0.8 "
            "cluster.compute.attention_fwd_efficiency=0.6 cluster.compute.attention_bwd_efficiency=0.4");
    cr_assert_eq(r.status, 0, "%s", r.out);
}

/* A window no narrower than the sequence is full attention: the full
 * curves, not the windowed ones. */
Test(kernels, window_as_wide_as_the_sequence_is_full_attention)
{
    sim w, f;
    const char *kw[] = { "model.name=gpt-oss-120b", "cluster.topology=gb200-nvl72", "cluster.num_gpus=8",
                         "train.global_batch_size=8", "model.expert_model_parallel_size=8", "model.seq_length=4096",
                         "model.window_size=[4096, 0]", NULL };
    const char *kf[] = { "model.name=gpt-oss-120b", "cluster.topology=gb200-nvl72", "cluster.num_gpus=8",
                         "train.global_batch_size=8", "model.expert_model_parallel_size=8", "model.seq_length=4096",
                         "model.window_size=[]", NULL };
    sim_run(&w, kw);
    sim_run(&f, kf);
    cr_assert_float_eq(step_result_get(w.st)->step_time_s, step_result_get(f.st)->step_time_s,
                       1e-3 * step_result_get(f.st)->step_time_s);
    sim_free(&w);
    sim_free(&f);
}
