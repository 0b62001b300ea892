/* Tests for sim/config.c: files, presets, overrides, the key table and its
 * errors (file:line, key).  Every test builds its own data dir with minimal
 * presets under /tmp, so nothing depends on the real models/ and topologies/. */
/* nftw (temp dir cleanup) is an XSI function */
#define _XOPEN_SOURCE 700

#include <criterion/criterion.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"

#define SIM_ASSERT_OK(expr, err)                                                    \
    do {                                                                            \
        int rc_ = (expr);                                                           \
        char buf_[1024];                                                            \
        sim_err_format(&(err), buf_, sizeof buf_);                                  \
        cr_assert_eq(rc_, SIM_OK, "%s -> %s: %s", #expr, sim_strerror(rc_), buf_); \
    } while (0)

#define SIM_ASSERT_ERR(expr, code)                                                  \
    do {                                                                            \
        int rc_ = (expr);                                                           \
        cr_assert_eq(rc_, (code), "%s -> %s, expected %s", #expr, sim_strerror(rc_), \
                     sim_strerror(code));                                           \
    } while (0)

static char tmpdir[256];

static const char *model_tiny =
    "model: {\n"
    "  num_layers = 4;\n"
    "  hidden_size = 256;\n"
    "  num_attention_heads = 8;\n"
    "  vocab_size = 1000;\n"
    "  seq_length = 128;\n"
    "};\n";

static const char *model_moe =
    "model: {\n"
    "  num_layers = 4;\n"
    "  hidden_size = 256;\n"
    "  num_attention_heads = 8;\n"
    "  vocab_size = 1000;\n"
    "  seq_length = 128;\n"
    "  num_moe_experts = 8;\n"
    "  moe_layer_freq = [0, 1, 1, 1];\n"
    "};\n";

static const char *topo_box =
    "cluster: {\n"
    "  gpus_per_node = 8;\n"
    "  nvlink_domain_gpus = 8;\n"
    "  gpu: { name = \"TestGPU\"; peak_bf16_tflops = 989; hbm_gbytes = 80.0;\n"
    "         hbm_bw_gbytes_per_s = 3350.0; peak_fp8_tflops = 1979.0; };\n"
    "  compute: { gemm_efficiency = 0.7; gemm_fp8_efficiency = 0.6;\n"
    "             attention_fwd_efficiency = 0.5; attention_bwd_efficiency = 0.4;\n"
    "             hbm_efficiency = 0.8; kernel_overhead_us = 5.0; };\n"
    "  nvlink: { bw_gbytes_per_s = 450.0; a2a_bw_gbytes_per_s = 400.0;\n"
    "            nvls_bw_gbytes_per_s = 0.0;\n"
    "            efficiency_size_kib = [64, 1024]; efficiency = (0.5, 1); };\n"
    "  scaleout: { kind = \"roce\"; nics_per_node = 4; nic_bw_gbytes_per_s = 50;\n"
    "              a2a_efficiency = 0.8; su_nodes = 32; spine_oversubscription = 2.0;\n"
    "              hier_serial_fraction = 0.5; efficiency_size_kib = []; efficiency = []; };\n"
    "  nccl: {\n"
    "    base_latency_us: { ring = [6.6, 14.0, 8.4]; tree = [6.8, 14.0, 8.4]; };\n"
    "    nvlink_latency_us: { ring = [0.6, 1.9, 3.4]; tree = [0.6, 1.25, 4.0];\n"
    "                         nvls = 25.0; nvls_tree = 25.0; };\n"
    "    pcie_latency_us: { ring = [1.0, 2.5, 5.7]; tree = [1.0, 1.9, 4.0]; };\n"
    "    net_latency_us: { ring = [2.7, 4.0, 14.0]; tree = [5.0, 8.5, 14.0];\n"
    "                      nvls = 18.0; nvls_tree = 20.9; };\n"
    "    net_overhead_us = 1.0; net_overhead_simple_factor = 3.0;\n"
    "    ll_max_bw_gbytes_per_s = [141.0, 39.0, 20.4];\n"
    "    ring_bw_factor = [0.5, 0.92, 1.0]; tree_bw_factor = [0.263, 0.9375, 0.92];\n"
    "    tree_ll128_one_node_factor = 0.7778; ring_plateau_factor = 1.4; ll128 = true;\n"
    "  };\n"
    "};\n";

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

/* Path of name inside the test's temp dir (static buffer rotation). */
static const char *tpath(const char *name)
{
    static char bufs[4][512];
    static int next;
    char *b = bufs[next++ % 4];
    snprintf(b, 512, "%s/%s", tmpdir, name);
    return b;
}

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/parsim_test_config_XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
    cr_assert_eq(mkdir(tpath("models"), 0700), 0);
    cr_assert_eq(mkdir(tpath("topologies"), 0700), 0);
    write_file(tpath("models/tiny.cfg"), model_tiny);
    write_file(tpath("models/tinymoe.cfg"), model_moe);
    write_file(tpath("topologies/box.cfg"), topo_box);
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static void teardown(void)
{
    nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* A run file using both presets (line numbers matter to the tests). */
static const char *run_cfg =
    "# run\n"                                          /* 1 */
    "model: { name = \"tiny\"; };\n"                   /* 2 */
    "cluster: { topology = \"box\"; num_gpus = 8; };\n" /* 3 */
    "train: { global_batch_size = 16; };\n";           /* 4 */

static cfg_t *load_run(const char *text, sim_err *err)
{
    write_file(tpath("run.cfg"), text);
    cfg_t *c = cfg_create(tmpdir);
    cr_assert_not_null(c);
    SIM_ASSERT_OK(cfg_load_file(c, tpath("run.cfg"), CFG_PRIO_FILE, err), *err);
    return c;
}

TestSuite(config, .init = setup, .fini = teardown);

Test(config, loads_file_and_presets)
{
    sim_err err;
    sim_err_clear(&err);
    cfg_t *c = load_run(run_cfg, &err);
    run_inputs in;
    SIM_ASSERT_OK(cfg_resolve(c, &in, &err), err);

    cr_assert_str_eq(in.model.name, "tiny");
    cr_assert_eq(in.model.num_layers, 4);
    cr_assert_eq(in.model.hidden_size, 256);
    cr_assert_eq(in.model.ffn_hidden_size, 4 * 256, "ffn 0 means 4*hidden");
    cr_assert_eq(in.model.make_vocab_size_divisible_by, 128);
    cr_assert_eq(in.model.normalization, NORM_LAYERNORM);
    cr_assert_str_eq(in.model.position_embedding_type, "learned_absolute");
    cr_assert(in.model.share_embeddings_and_output_weights);
    for (int i = 0; i < 4; i++)
        cr_assert_eq((in.model.layers[i].mlp == MODEL_MLP_MOE), 0, "dense model has no MoE layers");

    cr_assert_eq(in.par.tp, 1);
    cr_assert_eq(in.par.vp, 0);
    cr_assert_eq(in.par.etp, 0);
    cr_assert(in.par.overlap_p2p_comm);
    cr_assert_eq(in.par.recompute_granularity, RECOMPUTE_NONE);
    cr_assert_eq(in.par.recompute_modules, (unsigned)RECOMPUTE_MOD_CORE_ATTN);
    cr_assert_eq(in.par.precision, PREC_BF16);
    cr_assert_eq(in.train.global_batch_size, 16);
    cr_assert_eq(in.train.micro_batch_size, 1);
    cr_assert(in.ddp.grad_reduce_in_fp32);

    cr_assert_str_eq(in.cluster.name, "box");
    cr_assert_str_eq(in.cluster.gpu.name, "TestGPU");
    cr_assert_eq(in.cluster.num_gpus, 8);
    /* an int is accepted where a float is expected; units converted */
    cr_assert_float_eq(in.cluster.gpu.peak_bf16_flops_per_s, 989e12, 1);
    cr_assert_float_eq(in.cluster.gpu.peak_fp8_flops_per_s, 1979e12, 1);
    cr_assert_float_eq(in.cluster.gpu.peak_fp4_flops_per_s, 0, 1e-9);
    cr_assert_float_eq(in.cluster.gpu.hbm_capacity_bytes, 80e9, 1);
    cr_assert_float_eq(in.cluster.compute.kernel_overhead_s, 5e-6, 1e-15);
    cr_assert_float_eq(in.cluster.scaleup.bw_bytes_per_s, 450e9, 1);
    cr_assert_eq(in.cluster.scaleup.kind, SCALEUP_NVLINK);
    cr_assert_eq(in.cluster.scaleout.kind, FABRIC_ROCE);
    cr_assert_eq(in.cluster.scaleout.nics_per_node, 4);
    cr_assert_float_eq(in.cluster.scaleout.nic_bw_bytes_per_s, 50e9, 1);
    cr_assert_float_eq(in.cluster.scaleout.spine_oversubscription, 2.0, 1e-12);
    /* curves: KiB -> log2 bytes; an int in a float list is a number */
    cr_assert_eq(in.cluster.scaleup.efficiency.n, 2);
    cr_assert_float_eq(in.cluster.scaleup.efficiency.log2_bytes[0], 16.0, 1e-12);
    cr_assert_float_eq(in.cluster.scaleup.efficiency.efficiency[1], 1.0, 1e-12);
    cr_assert_eq(in.cluster.scaleout.efficiency.n, 0);
    /* NCCL lists per protocol, in seconds */
    cr_assert_float_eq(in.cluster.nccl.net.ring[NET_PROTO_SIMPLE], 14e-6, 1e-15);
    cr_assert_float_eq(in.cluster.nccl.ll_max_bw_bytes_per_s[2], 20.4e9, 1);
    cr_assert(in.cluster.nccl.ll128);
    cr_assert_eq(in.cluster.force_algo, NET_ALGO_AUTO);
    cr_assert_eq(in.cluster.force_proto, NET_PROTO_AUTO);
    cr_assert_eq(in.par.moe_token_dispatcher, MOE_DISPATCHER_ALLGATHER);
    cr_assert_eq(in.ddp.bucket_size, 0);
    cr_assert_eq(in.sim.seed, 1);

    const char *file;
    int line;
    cr_assert(cfg_origin(c, "cluster.num_gpus", &file, &line));
    cr_assert_str_eq(file, tpath("run.cfg"));
    cr_assert_eq(line, 3);
    cr_assert(cfg_origin(c, "model.hidden_size", &file, &line));
    cr_assert_str_eq(file, tpath("models/tiny.cfg"));
    cr_assert_eq(line, 3);
    cr_assert_not(cfg_origin(c, "model.ffn_hidden_size", &file, &line), "defaulted");
    cfg_destroy(c);
}

Test(config, syntax_error_names_file_and_line)
{
    write_file(tpath("bad.cfg"), "model: {\n  num_layers = 4;\n  hidden_size = ;\n};\n");
    cfg_t *c = cfg_create(tmpdir);
    sim_err err;
    sim_err_clear(&err);
    SIM_ASSERT_ERR(cfg_load_file(c, tpath("bad.cfg"), CFG_PRIO_FILE, &err), SIM_EINVAL);
    cr_assert_str_eq(err.file, tpath("bad.cfg"));
    cr_assert_eq(err.line, 3);
    cr_assert(strstr(err.msg, "syntax"), "%s", err.msg);
    cfg_destroy(c);
}

Test(config, missing_file_cannot_open)
{
    cfg_t *c = cfg_create(tmpdir);
    sim_err err;
    sim_err_clear(&err);
    SIM_ASSERT_ERR(cfg_load_file(c, tpath("nope.cfg"), CFG_PRIO_FILE, &err), SIM_EINVAL);
    cr_assert(strstr(err.msg, "cannot open"), "%s", err.msg);
    cr_assert_str_eq(err.file, tpath("nope.cfg"));
    cfg_destroy(c);
}

Test(config, unknown_key_names_file_line_and_key)
{
    sim_err err;
    sim_err_clear(&err);
    cfg_t *c = load_run("model: { name = \"tiny\"; };\n"
                        "cluster: { topology = \"box\"; num_gpus = 8; };\n"
                        "train: { global_batch_size = 16;\n"
                        "         micro_batch_sise = 2; };\n",
                        &err);
    run_inputs in;
    SIM_ASSERT_ERR(cfg_resolve(c, &in, &err), SIM_EINVAL);
    cr_assert_str_eq(err.key, "train.micro_batch_sise");
    cr_assert_str_eq(err.file, tpath("run.cfg"));
    cr_assert_eq(err.line, 4);
    cr_assert(strstr(err.msg, "unknown key"), "%s", err.msg);
    cr_assert(strstr(err.msg, "train.micro_batch_size"), "suggestion: %s", err.msg);
    char buf[1024];
    sim_err_format(&err, buf, sizeof buf);
    char want[600];
    snprintf(want, sizeof want, "%s:4: train.micro_batch_sise: unknown key", tpath("run.cfg"));
    cr_assert(strncmp(buf, want, strlen(want)) == 0, "%s", buf);
    cfg_destroy(c);
}

Test(config, unknown_key_in_other_group_suggests_same_name)
{
    sim_err err;
    sim_err_clear(&err);
    cfg_t *c = load_run(run_cfg, &err);
    SIM_ASSERT_OK(cfg_set_override(c, "parallel.tensor_model_parallel_size=2", &err), err);
    run_inputs in;
    SIM_ASSERT_ERR(cfg_resolve(c, &in, &err), SIM_EINVAL);
    cr_assert_str_eq(err.key, "parallel.tensor_model_parallel_size");
    cr_assert_str_eq(err.file, "command line");
    cr_assert(strstr(err.msg, "model.tensor_model_parallel_size"), "%s", err.msg);
    cfg_destroy(c);
}

Test(config, wrong_type_names_key_and_line)
{
    sim_err err;
    sim_err_clear(&err);
    cfg_t *c = load_run("model: { name = \"tiny\";\n"
                        "  hidden_size = \"big\"; };\n"
                        "cluster: { topology = \"box\"; num_gpus = 8; };\n"
                        "train: { global_batch_size = 16; };\n",
                        &err);
    run_inputs in;
    SIM_ASSERT_ERR(cfg_resolve(c, &in, &err), SIM_EINVAL);
    cr_assert_str_eq(err.key, "model.hidden_size");
    cr_assert_str_eq(err.file, tpath("run.cfg"));
    cr_assert_eq(err.line, 2);
    cr_assert(strstr(err.msg, "expected an integer"), "%s", err.msg);
    cfg_destroy(c);

    /* a float where an int is expected, on the command line */
    c = load_run(run_cfg, &err);
    SIM_ASSERT_OK(cfg_set_override(c, "train.global_batch_size=16.5", &err), err);
    SIM_ASSERT_ERR(cfg_resolve(c, &in, &err), SIM_EINVAL);
    cr_assert_str_eq(err.key, "train.global_batch_size");
    cr_assert_str_eq(err.file, "command line");
    cfg_destroy(c);

    /* a bool key given a number */
    c = load_run(run_cfg, &err);
    SIM_ASSERT_OK(cfg_set_override(c, "model.sequence_parallel=1", &err), err);
    SIM_ASSERT_ERR(cfg_resolve(c, &in, &err), SIM_EINVAL);
    cr_assert_str_eq(err.key, "model.sequence_parallel");
    cfg_destroy(c);
}

Test(config, override_precedence_cli_over_file_over_preset)
{
    sim_err err;
    sim_err_clear(&err);
    run_inputs in;
    const char *file;
    int line;

    /* preset only */
    cfg_t *c = load_run(run_cfg, &err);
    SIM_ASSERT_OK(cfg_resolve(c, &in, &err), err);
    cr_assert_eq(in.model.hidden_size, 256);
    cfg_destroy(c);

    /* file beats preset, whatever the order of loading */
    c = load_run("model: { name = \"tiny\"; hidden_size = 512; };\n"
                 "cluster: { topology = \"box\"; num_gpus = 8; };\n"
                 "train: { global_batch_size = 16; };\n",
                 &err);
    SIM_ASSERT_OK(cfg_resolve(c, &in, &err), err);
    cr_assert_eq(in.model.hidden_size, 512);
    cr_assert(cfg_origin(c, "model.hidden_size", &file, &line));
    cr_assert_str_eq(file, tpath("run.cfg"));
    cr_assert_eq(line, 1);

    /* command line beats file; a later override beats an earlier one */
    SIM_ASSERT_OK(cfg_set_override(c, "model.hidden_size=768", &err), err);
    SIM_ASSERT_OK(cfg_set_override(c, " model.hidden_size = 1024 ", &err), err);
    SIM_ASSERT_OK(cfg_resolve(c, &in, &err), err);
    cr_assert_eq(in.model.hidden_size, 1024);
    cr_assert(cfg_origin(c, "model.hidden_size", &file, &line));
    cr_assert_str_eq(file, "command line");
    cr_assert_eq(line, 0);

    /* a file loaded later at FILE priority does not beat the command line */
    write_file(tpath("more.cfg"), "model: { hidden_size = 2048; };\n");
    SIM_ASSERT_OK(cfg_load_file(c, tpath("more.cfg"), CFG_PRIO_FILE, &err), err);
    SIM_ASSERT_OK(cfg_resolve(c, &in, &err), err);
    cr_assert_eq(in.model.hidden_size, 1024);
    cfg_destroy(c);
}

Test(config, preset_changed_by_override_resolves_again)
{
    sim_err err;
    sim_err_clear(&err);
    run_inputs in;
    cfg_t *c = load_run(run_cfg, &err);
    SIM_ASSERT_OK(cfg_resolve(c, &in, &err), err);
    cr_assert_eq(in.model.num_moe_experts, 0);
    SIM_ASSERT_OK(cfg_set_override(c, "model.name=tinymoe", &err), err);
    SIM_ASSERT_OK(cfg_resolve(c, &in, &err), err);
    cr_assert_str_eq(in.model.name, "tinymoe");
    cr_assert_eq(in.model.num_moe_experts, 8);
    SIM_ASSERT_OK(cfg_set_override(c, "model.name=tiny", &err), err);
    SIM_ASSERT_OK(cfg_resolve(c, &in, &err), err);
    cr_assert_eq(in.model.num_moe_experts, 0, "the previous preset must not leak");
    cfg_destroy(c);
}

Test(config, list_parsing)
{
    sim_err err;
    sim_err_clear(&err);
    run_inputs in;
    cfg_t *c = load_run(run_cfg, &err);
    SIM_ASSERT_OK(cfg_set_override(c, "model.recompute_modules=[core_attn, mlp, \"moe_act\"]",
                                   &err), err);
    SIM_ASSERT_OK(cfg_set_override(c, "model.hierarchical_context_parallel_sizes=[2,4]", &err),
                  err);
    SIM_ASSERT_OK(cfg_set_override(c, "model.recompute_granularity=selective", &err), err);
    SIM_ASSERT_OK(cfg_resolve(c, &in, &err), err);
    cr_assert_eq(in.par.recompute_modules,
                 (unsigned)(RECOMPUTE_MOD_CORE_ATTN | RECOMPUTE_MOD_MLP | RECOMPUTE_MOD_MOE_ACT));
    cr_assert_eq(in.par.recompute_granularity, RECOMPUTE_SELECTIVE);
    cr_assert_eq(in.par.n_hierarchical_cp_sizes, 2);
    cr_assert_eq(in.par.hierarchical_cp_sizes[0], 2);
    cr_assert_eq(in.par.hierarchical_cp_sizes[1], 4);

    /* one name for a name list; an empty list */
    SIM_ASSERT_OK(cfg_set_override(c, "model.recompute_modules=layernorm", &err), err);
    SIM_ASSERT_OK(cfg_set_override(c, "model.hierarchical_context_parallel_sizes=[]", &err), err);
    SIM_ASSERT_OK(cfg_resolve(c, &in, &err), err);
    cr_assert_eq(in.par.recompute_modules, (unsigned)RECOMPUTE_MOD_LAYERNORM);
    cr_assert_eq(in.par.n_hierarchical_cp_sizes, 0);

    /* unknown module name */
    SIM_ASSERT_OK(cfg_set_override(c, "model.recompute_modules=[core_attn, attn]", &err), err);
    SIM_ASSERT_ERR(cfg_resolve(c, &in, &err), SIM_EINVAL);
    cr_assert_str_eq(err.key, "model.recompute_modules");
    cr_assert(strstr(err.msg, "attn") && strstr(err.msg, "shared_experts"), "%s", err.msg);
    cfg_destroy(c);

    /* lists in files: arrays of strings */
    c = load_run("model: { name = \"tiny\"; recompute_modules = [\"mlp\", \"layernorm\"]; };\n"
                 "cluster: { topology = \"box\"; num_gpus = 8; };\n"
                 "train: { global_batch_size = 16; };\n",
                 &err);
    SIM_ASSERT_OK(cfg_resolve(c, &in, &err), err);
    cr_assert_eq(in.par.recompute_modules,
                 (unsigned)(RECOMPUTE_MOD_MLP | RECOMPUTE_MOD_LAYERNORM));
    cfg_destroy(c);
}

Test(config, override_syntax)
{
    cfg_t *c = cfg_create(tmpdir);
    sim_err err;
    sim_err_clear(&err);
    SIM_ASSERT_ERR(cfg_set_override(c, "model.tensor_model_parallel_size", &err), SIM_EINVAL);
    cr_assert_str_eq(err.file, "command line");
    SIM_ASSERT_ERR(cfg_set_override(c, "=4", &err), SIM_EINVAL);
    SIM_ASSERT_ERR(cfg_set_override(c, "model..x=4", &err), SIM_EINVAL);
    SIM_ASSERT_ERR(cfg_set_override(c, "model.recompute_modules=[mlp, core_attn", &err),
                   SIM_EINVAL);
    SIM_ASSERT_ERR(cfg_set_override(c, "model.recompute_modules=[mlp,,core_attn]", &err),
                   SIM_EINVAL);
    SIM_ASSERT_ERR(cfg_set_override(c, "model.name=\"tiny", &err), SIM_EINVAL);
    /* values of every kind */
    SIM_ASSERT_OK(cfg_set_override(c, "model.name='tiny'", &err), err);
    SIM_ASSERT_OK(cfg_set_override(c, "cluster.topology=box", &err), err);
    SIM_ASSERT_OK(cfg_set_override(c, "cluster.num_gpus=8", &err), err);
    SIM_ASSERT_OK(cfg_set_override(c, "train.global_batch_size=0x10", &err), err);
    SIM_ASSERT_OK(cfg_set_override(c, "cluster.compute.gemm_efficiency=.65", &err), err);
    SIM_ASSERT_OK(cfg_set_override(c, "cluster.gpu.peak_bf16_tflops=1e3", &err), err);
    SIM_ASSERT_OK(cfg_set_override(c, "ddp.use_distributed_optimizer=True", &err), err);
    SIM_ASSERT_OK(cfg_set_override(c, "cluster.gpu.name=1234", &err), err); /* bare text */
    SIM_ASSERT_OK(cfg_set_override(c, "mixed_precision=bf16_with_fp8_current_scaling_mixed",
                                   &err), err);
    run_inputs in;
    SIM_ASSERT_OK(cfg_resolve(c, &in, &err), err);
    cr_assert_str_eq(in.model.name, "tiny");
    cr_assert_eq(in.train.global_batch_size, 16);
    cr_assert_float_eq(in.cluster.compute.gemm_efficiency, 0.65, 1e-12);
    cr_assert_float_eq(in.cluster.gpu.peak_bf16_flops_per_s, 1e15, 1);
    cr_assert(in.ddp.use_distributed_optimizer);
    cr_assert_str_eq(in.cluster.gpu.name, "1234");
    cr_assert_eq(in.par.precision, PREC_FP8_CS);
    cfg_destroy(c);
}

Test(config, moe_layer_freq_int_and_list)
{
    sim_err err;
    sim_err_clear(&err);
    run_inputs in;
    cfg_t *c = load_run(run_cfg, &err);

    /* list from the preset */
    SIM_ASSERT_OK(cfg_set_override(c, "model.name=tinymoe", &err), err);
    SIM_ASSERT_OK(cfg_resolve(c, &in, &err), err);
    const uint8_t want_list[4] = { 0, 1, 1, 1 };
    for (int i = 0; i < 4; i++)
        cr_assert_eq((in.model.layers[i].mlp == MODEL_MLP_MOE), want_list[i], "layer %d", i);

    /* int f: layer i is MoE iff i % f == 0 */
    SIM_ASSERT_OK(cfg_set_override(c, "model.moe_layer_freq=2", &err), err);
    SIM_ASSERT_OK(cfg_resolve(c, &in, &err), err);
    const uint8_t want_f2[4] = { 1, 0, 1, 0 };
    for (int i = 0; i < 4; i++)
        cr_assert_eq((in.model.layers[i].mlp == MODEL_MLP_MOE), want_f2[i], "layer %d", i);

    /* list of the wrong length */
    SIM_ASSERT_OK(cfg_set_override(c, "model.moe_layer_freq=[0,1]", &err), err);
    SIM_ASSERT_ERR(cfg_resolve(c, &in, &err), SIM_EINVAL);
    cr_assert_str_eq(err.key, "model.moe_layer_freq");
    cr_assert(strstr(err.msg, "2 entries") && strstr(err.msg, "4"), "%s", err.msg);

    /* entries other than 0/1 */
    SIM_ASSERT_OK(cfg_set_override(c, "model.moe_layer_freq=[0,1,2,1]", &err), err);
    SIM_ASSERT_ERR(cfg_resolve(c, &in, &err), SIM_EINVAL);
    cr_assert_str_eq(err.key, "model.moe_layer_freq");

    /* a dense model has no MoE layers whatever the frequency */
    SIM_ASSERT_OK(cfg_set_override(c, "model.moe_layer_freq=1", &err), err);
    SIM_ASSERT_OK(cfg_set_override(c, "model.num_moe_experts=0", &err), err);
    SIM_ASSERT_OK(cfg_resolve(c, &in, &err), err);
    for (int i = 0; i < 4; i++)
        cr_assert_eq((in.model.layers[i].mlp == MODEL_MLP_MOE), 0);
    cfg_destroy(c);
}

Test(config, required_key_missing)
{
    sim_err err;
    sim_err_clear(&err);
    cfg_t *c = load_run("model: { name = \"tiny\"; };\n"
                        "cluster: { topology = \"box\"; };\n"
                        "train: { global_batch_size = 16; };\n",
                        &err);
    run_inputs in;
    SIM_ASSERT_ERR(cfg_resolve(c, &in, &err), SIM_EINVAL);
    cr_assert_str_eq(err.key, "cluster.num_gpus");
    cr_assert_str_eq(err.file, "", "an unset key has no origin");
    cr_assert(strstr(err.msg, "required key not set"), "%s", err.msg);
    cfg_destroy(c);

    /* no model preset at all: the first required model key is reported */
    c = cfg_create(tmpdir);
    SIM_ASSERT_ERR(cfg_resolve(c, &in, &err), SIM_EINVAL);
    cr_assert_str_eq(err.key, "model.num_layers");
    cfg_destroy(c);
}

Test(config, unknown_preset_name)
{
    sim_err err;
    sim_err_clear(&err);
    cfg_t *c = load_run("model: { name = \"llama-nope\"; };\n"
                        "cluster: { topology = \"box\"; num_gpus = 8; };\n"
                        "train: { global_batch_size = 16; };\n",
                        &err);
    run_inputs in;
    SIM_ASSERT_ERR(cfg_resolve(c, &in, &err), SIM_EINVAL);
    cr_assert_str_eq(err.key, "model.name");
    cr_assert_str_eq(err.file, tpath("run.cfg"));
    cr_assert_eq(err.line, 1);
    cr_assert(strstr(err.msg, "llama-nope"), "%s", err.msg);
    cr_assert(strstr(err.msg, tpath("models/llama-nope.cfg")), "where it looked: %s", err.msg);
    cr_assert(strstr(err.msg, "tiny, tinymoe"), "available presets: %s", err.msg);
    cfg_destroy(c);

    c = load_run(run_cfg, &err);
    SIM_ASSERT_OK(cfg_set_override(c, "cluster.topology=nobox", &err), err);
    SIM_ASSERT_ERR(cfg_resolve(c, &in, &err), SIM_EINVAL);
    cr_assert_str_eq(err.key, "cluster.topology");
    cr_assert_str_eq(err.file, "command line");
    cr_assert(strstr(err.msg, tpath("topologies/nobox.cfg")), "%s", err.msg);
    cfg_destroy(c);
}

Test(config, data_dir_from_environment)
{
    setenv("PARSIM_DATA_DIR", tmpdir, 1);
    cfg_t *c = cfg_create(NULL);
    sim_err err;
    sim_err_clear(&err);
    write_file(tpath("run.cfg"), run_cfg);
    SIM_ASSERT_OK(cfg_load_file(c, tpath("run.cfg"), CFG_PRIO_FILE, &err), err);
    run_inputs in;
    SIM_ASSERT_OK(cfg_resolve(c, &in, &err), err);
    cr_assert_eq(in.model.num_layers, 4);
    cfg_destroy(c);
    unsetenv("PARSIM_DATA_DIR");
}

Test(config, params_file_relative_to_config_and_overrides_topology)
{
    cr_assert_eq(mkdir(tpath("runs"), 0700), 0);
    write_file(tpath("runs/params.cfg"), "cluster: { compute: { gemm_efficiency = 0.55; }; };\n");
    write_file(tpath("runs/run.cfg"), "model: { name = \"tiny\"; };\n"
                                      "cluster: { topology = \"box\"; num_gpus = 8; };\n"
                                      "train: { global_batch_size = 16; };\n"
                                      "sim: { params = \"params.cfg\"; };\n");
    cfg_t *c = cfg_create(tmpdir);
    sim_err err;
    sim_err_clear(&err);
    SIM_ASSERT_OK(cfg_load_file(c, tpath("runs/run.cfg"), CFG_PRIO_FILE, &err), err);
    run_inputs in;
    SIM_ASSERT_OK(cfg_resolve(c, &in, &err), err);
    cr_assert_float_eq(in.cluster.compute.gemm_efficiency, 0.55, 1e-12);
    cr_assert_str_eq(in.sim.params_file, "params.cfg");

    SIM_ASSERT_OK(cfg_set_override(c, "sim.params=/nonexistent/p.cfg", &err), err);
    SIM_ASSERT_ERR(cfg_resolve(c, &in, &err), SIM_EINVAL);
    cr_assert_str_eq(err.key, "sim.params");
    cr_assert(strstr(err.msg, "/nonexistent/p.cfg"), "%s", err.msg);
    cfg_destroy(c);
}

Test(config, range_errors)
{
    sim_err err;
    sim_err_clear(&err);
    run_inputs in;
    const char *bad[][2] = {
        { "cluster.compute.gemm_efficiency=1.5", "cluster.compute.gemm_efficiency" },
        { "cluster.compute.hbm_efficiency=0", "cluster.compute.hbm_efficiency" },
        { "model.num_layers=2000", "model.num_layers" },
        { "model.tensor_model_parallel_size=0", "model.tensor_model_parallel_size" },
        { "cluster.nvlink.bw_gbytes_per_s=-1", "cluster.nvlink.bw_gbytes_per_s" },
        { "model.normalization=BatchNorm", "model.normalization" },
        { "model.cp_comm_type=ring", "model.cp_comm_type" },
        { "cluster.scaleout.kind=carrier-pigeon", "cluster.scaleout.kind" },
        { "cluster.nvlink.kind=ethernet", "cluster.nvlink.kind" },
        { "cluster.scaleout.spine_oversubscription=0.5", "cluster.scaleout.spine_oversubscription" },
        { "cluster.scaleout.hier_serial_fraction=1.5", "cluster.scaleout.hier_serial_fraction" },
        { "cluster.nccl.ring_bw_factor=[0.5, 0.92]", "cluster.nccl.ring_bw_factor" },
        { "cluster.nccl.ring_bw_factor=[0.5, 0.92, 1.5]", "cluster.nccl.ring_bw_factor" },
        { "cluster.nccl.base_latency_us.ring=[a, b, c]", "cluster.nccl.base_latency_us.ring" },
        { "cluster.nvlink.efficiency=[0.5]", "cluster.nvlink.efficiency" },
        { "cluster.nvlink.efficiency=[0.5, 0]", "cluster.nvlink.efficiency" },
        { "cluster.nvlink.efficiency_size_kib=[64, 32]", "cluster.nvlink.efficiency_size_kib" },
        { "cluster.nvlink.efficiency_size_kib=[64.5, 128]", "cluster.nvlink.efficiency_size_kib" },
        { "sim.nccl_algo=butterfly", "sim.nccl_algo" },
        { "sim.nccl_proto=ll64", "sim.nccl_proto" },
        { "model.moe_token_dispatcher_type=deepep", "model.moe_token_dispatcher_type" },
        { "ddp.bucket_size=-1", "ddp.bucket_size" },
        { "mixed_precision=fp7", "mixed_precision" },
        { "model.position_embedding_type=sinusoid", "model.position_embedding_type" },
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        cfg_t *c = load_run(run_cfg, &err);
        SIM_ASSERT_OK(cfg_set_override(c, bad[k][0], &err), err);
        SIM_ASSERT_ERR(cfg_resolve(c, &in, &err), SIM_EINVAL);
        cr_assert_str_eq(err.key, bad[k][1], "%s", bad[k][0]);
        cr_assert_str_eq(err.file, "command line");
        cfg_destroy(c);
    }
}

Test(config, precision_names)
{
    const struct {
        const char *name;
        precision_kind kind;
    } cases[] = {
        { "bf16", PREC_BF16 },
        { "fp16", PREC_FP16 },
        { "fp8", PREC_FP8_CS },
        { "fp8-cs", PREC_FP8_CS },
        { "fp8-delayed", PREC_FP8_DELAYED },
        { "mxfp8", PREC_MXFP8 },
        { "fp8-blockwise", PREC_FP8_BLOCKWISE },
        { "nvfp4", PREC_NVFP4 },
        { "bf16_mixed", PREC_BF16 },
        { "fp16_mixed", PREC_FP16 },
        { "bf16_with_fp8_delayed_scaling_mixed", PREC_FP8_DELAYED },
        { "bf16_with_fp8_current_scaling_mixed", PREC_FP8_CS },
        { "bf16_with_mxfp8_mixed", PREC_MXFP8 },
        { "bf16_with_fp8_subchannel_scaling_mixed", PREC_FP8_BLOCKWISE },
        { "bf16_with_nvfp4_mixed", PREC_NVFP4 },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        precision_kind p;
        cr_assert(precision_from_name(cases[k].name, &p), "%s", cases[k].name);
        cr_assert_eq(p, cases[k].kind, "%s", cases[k].name);
        /* the canonical name reads back to the same kind */
        precision_kind q;
        cr_assert(precision_from_name(precision_name(p), &q));
        cr_assert_eq(q, p);
    }
    precision_kind p;
    cr_assert_not(precision_from_name("int8", &p));
    cr_assert_str_eq(precision_name(PREC_FP8_CS), "fp8-cs");
}

Test(config, err_key_and_dump)
{
    sim_err err;
    sim_err_clear(&err);
    run_inputs in;
    cfg_t *c = load_run(run_cfg, &err);
    SIM_ASSERT_OK(cfg_set_override(c, "train.micro_batch_size=2", &err), err);
    SIM_ASSERT_OK(cfg_resolve(c, &in, &err), err);

    cr_assert_eq(cfg_err_key(c, &err, SIM_EINVAL, "cluster.num_gpus", "too few (%d)", 8),
                 SIM_EINVAL);
    cr_assert_str_eq(err.file, tpath("run.cfg"));
    cr_assert_eq(err.line, 3);
    cr_assert_str_eq(err.key, "cluster.num_gpus");
    cr_assert_str_eq(err.msg, "too few (8)");
    cfg_err_key(c, &err, SIM_EINVAL, "model.sequence_parallel", "x");
    cr_assert_str_eq(err.file, "");
    cr_assert_eq(err.line, 0);
    cfg_err_key(NULL, &err, SIM_EINVAL, "model.sequence_parallel", "y");
    cr_assert_str_eq(err.key, "model.sequence_parallel");

    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cfg_dump(c, f);
    fclose(f);
    char want[600];
    snprintf(want, sizeof want, "cluster.num_gpus = 8;  # %s:3\n", tpath("run.cfg"));
    cr_assert(strstr(text, want), "%s", text);
    snprintf(want, sizeof want, "model.hidden_size = 256;  # %s:3\n", tpath("models/tiny.cfg"));
    cr_assert(strstr(text, want), "%s", text);
    cr_assert(strstr(text, "train.micro_batch_size = 2;  # command line\n"), "%s", text);
    cr_assert(strstr(text, "model.tensor_model_parallel_size = 1;  # default\n"), "%s", text);
    cr_assert(strstr(text, "cluster.gpu.peak_bf16_tflops = 989;"), "%s", text);
    free(text);

    text = NULL;
    f = open_memstream(&text, &len);
    cfg_print_keys(f);
    fclose(f);
    cr_assert(strstr(text, "model.tensor_model_parallel_size"));
    cr_assert(strstr(text, "(required)"));
    free(text);
    cfg_destroy(c);
}

Test(config, mla_and_moe_cross_checks)
{
    sim_err err;
    sim_err_clear(&err);
    run_inputs in;
    cfg_t *c = load_run(run_cfg, &err);
    SIM_ASSERT_OK(cfg_set_override(c, "model.multi_latent_attention=true", &err), err);
    SIM_ASSERT_ERR(cfg_resolve(c, &in, &err), SIM_EINVAL);
    cr_assert_str_eq(err.key, "model.kv_lora_rank");
    cfg_destroy(c);

    c = load_run(run_cfg, &err);
    SIM_ASSERT_OK(cfg_set_override(c, "model.name=tinymoe", &err), err);
    SIM_ASSERT_OK(cfg_set_override(c, "model.moe_router_topk=9", &err), err);
    SIM_ASSERT_ERR(cfg_resolve(c, &in, &err), SIM_EINVAL);
    cr_assert_str_eq(err.key, "model.moe_router_topk");
    cfg_destroy(c);
}

Test(config, destroy_null_is_noop)
{
    cfg_destroy(NULL);
}
