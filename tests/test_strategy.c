/* Tests for sim/strategy.c: one test per Megatron rule (fed through cfg +
 * strategy_resolve, checking the key the error names), derived sizes, the
 * Megatron Bridge minimum-GPU examples, Megatron's rank-order examples and
 * the fabric span of groups.  Configs are built from overrides only, so
 * no preset files are needed. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "strategy.h"

/* A dense 32-layer model on 64 GPUs (8 per node), every required key set. */
static const char *const base[] = {
    "model.num_layers=32",
    "model.hidden_size=4096",
    "model.num_attention_heads=32",
    "model.vocab_size=32000",
    "model.seq_length=4096",
    "train.global_batch_size=512",
    "cluster.num_gpus=64",
    "cluster.gpus_per_node=8",
    "cluster.nvlink_domain_gpus=8",
    "cluster.gpu.name=H100",
    "cluster.gpu.peak_bf16_tflops=989",
    "cluster.gpu.hbm_gbytes=80",
    "cluster.gpu.hbm_bw_gbytes_per_s=3350",
    "cluster.compute.gemm_efficiency=0.7",
    "cluster.compute.gemm_fp8_efficiency=0.6",
    "cluster.compute.attention_fwd_efficiency=0.5",
    "cluster.compute.attention_bwd_efficiency=0.4",
    "cluster.compute.hbm_efficiency=0.8",
    "cluster.compute.kernel_overhead_us=4",
    "cluster.nvlink.bw_gbytes_per_s=450",
    "cluster.nvlink.a2a_bw_gbytes_per_s=400",
    "cluster.nvlink.nvls_bw_gbytes_per_s=0",
    "cluster.nvlink.efficiency_size_kib=[]",
    "cluster.nvlink.efficiency=[]",
    "cluster.scaleout.nics_per_node=8",
    "cluster.scaleout.nic_bw_gbytes_per_s=50",
    "cluster.scaleout.a2a_efficiency=0.8",
    "cluster.scaleout.su_nodes=4",
    "cluster.scaleout.spine_oversubscription=2",
    "cluster.scaleout.hier_serial_fraction=0.5",
    "cluster.scaleout.efficiency_size_kib=[]",
    "cluster.scaleout.efficiency=[]",
    /* NCCL 2.30's tuning constants (topologies/nccl/2.30.cfg) */
    "cluster.nccl.base_latency_us.ring=[6.6, 14.0, 8.4]",
    "cluster.nccl.base_latency_us.tree=[6.8, 14.0, 8.4]",
    "cluster.nccl.nvlink_latency_us.ring=[0.6, 1.9, 3.4]",
    "cluster.nccl.nvlink_latency_us.tree=[0.6, 1.25, 4.0]",
    "cluster.nccl.nvlink_latency_us.nvls=25",
    "cluster.nccl.nvlink_latency_us.nvls_tree=25",
    "cluster.nccl.pcie_latency_us.ring=[1.0, 2.5, 5.7]",
    "cluster.nccl.pcie_latency_us.tree=[1.0, 1.9, 4.0]",
    "cluster.nccl.net_latency_us.ring=[2.7, 4.0, 14.0]",
    "cluster.nccl.net_latency_us.tree=[5.0, 8.5, 14.0]",
    "cluster.nccl.net_latency_us.nvls=18",
    "cluster.nccl.net_latency_us.nvls_tree=20.9",
    "cluster.nccl.net_overhead_us=1",
    "cluster.nccl.net_overhead_simple_factor=3",
    "cluster.nccl.ll_max_bw_gbytes_per_s=[141.0, 39.0, 20.4]",
    "cluster.nccl.ring_bw_factor=[0.5, 0.92, 1.0]",
    "cluster.nccl.tree_bw_factor=[0.263, 0.9375, 0.92]",
    "cluster.nccl.tree_ll128_one_node_factor=0.7778",
    "cluster.nccl.ring_plateau_factor=1.4",
    "cluster.nccl.ll128=true",
};

typedef struct run {
    cfg_t *cfg;
    run_inputs in;
    strategy_t s;
    sim_err err;
    int rc;          /* of cfg_resolve, else of strategy_resolve */
    bool cfg_failed; /* the error came from config, not strategy */
} run;

/* Builds base + the NULL-terminated overrides, resolves config and strategy. */
static void resolve(run *r, ...)
{
    memset(r, 0, sizeof *r);
    r->cfg = cfg_create("/nonexistent-data-dir");
    cr_assert_not_null(r->cfg);
    for (size_t k = 0; k < sizeof base / sizeof base[0]; k++)
        cr_assert_eq(cfg_set_override(r->cfg, base[k], &r->err), SIM_OK, "%s", base[k]);
    va_list ap;
    va_start(ap, r);
    for (const char *o; (o = va_arg(ap, const char *));)
        cr_assert_eq(cfg_set_override(r->cfg, o, &r->err), SIM_OK, "%s", o);
    va_end(ap);
    r->rc = cfg_resolve(r->cfg, &r->in, &r->err);
    if (r->rc) {
        r->cfg_failed = true;
        return;
    }
    r->rc = strategy_resolve(&r->s, &r->in.model, &r->in.cluster, &r->in.par, &r->in.train,
                             &r->in.ddp, &r->err);
    if (r->rc)
        cfg_err_locate(r->cfg, &r->err);
}

static void done(run *r) { cfg_destroy(r->cfg); }

static void expect_ok(const run *r)
{
    char buf[1024];
    sim_err_format(&r->err, buf, sizeof buf);
    cr_assert_eq(r->rc, SIM_OK, "%s", buf);
}

/* The strategy (not config) rejects it, naming key. */
static void expect_bad(const run *r, const char *key)
{
    char buf[1024];
    sim_err_format(&r->err, buf, sizeof buf);
    cr_assert_eq(r->rc, SIM_EINVAL, "expected an error naming %s", key);
    cr_assert_not(r->cfg_failed, "config rejected it first: %s", buf);
    cr_assert_str_eq(r->err.key, key, "%s", buf);
    /* the origin of the key, or none if it was defaulted */
    const char *file = NULL;
    cfg_origin(r->cfg, key, &file, NULL);
    cr_assert_str_eq(r->err.file, file ? file : "", "%s", buf);
}

static bool msg_has(const run *r, const char *text) { return strstr(r->err.msg, text) != NULL; }

/* ------------------------------------------------------------- rules */

Test(strategy, rule1_sizes_at_least_one)
{
    run r;
    resolve(&r, NULL);
    expect_ok(&r);
    r.in.par.tp = 0;
    r.rc = strategy_resolve(&r.s, &r.in.model, &r.in.cluster, &r.in.par, &r.in.train,
                            &r.in.ddp, &r.err);
    cfg_err_locate(r.cfg, &r.err);
    cr_assert_eq(r.rc, SIM_EINVAL);
    cr_assert_str_eq(r.err.key, "model.tensor_model_parallel_size");
    cr_assert_str_eq(r.err.file, "", "tp was defaulted, so no origin");
    r.in.par.tp = 1;
    r.in.train.micro_batch_size = -2;
    r.rc = strategy_resolve(&r.s, &r.in.model, &r.in.cluster, &r.in.par, &r.in.train,
                            &r.in.ddp, &r.err);
    cr_assert_eq(r.rc, SIM_EINVAL);
    cr_assert_str_eq(r.err.key, "train.micro_batch_size");
    done(&r);

    /* config catches it first when it comes from a key */
    resolve(&r, "model.pipeline_model_parallel_size=0", NULL);
    cr_assert_eq(r.rc, SIM_EINVAL);
    cr_assert_str_eq(r.err.key, "model.pipeline_model_parallel_size");
    done(&r);
}

Test(strategy, rule1_defaults_resolved)
{
    run r;
    resolve(&r, "model.tensor_model_parallel_size=4", "model.pipeline_model_parallel_size=2",
            NULL);
    expect_ok(&r);
    cr_assert_eq(r.s.etp, 4, "etp defaults to tp");
    cr_assert_eq(r.s.par.etp, 4);
    cr_assert_eq(r.s.v, 1, "vp 0 -> v 1");
    cr_assert_eq(r.s.par.vp, 1);
    cr_assert_eq(r.s.group_size_n, 2, "N defaults to pp");
    done(&r);
}

Test(strategy, rule2_sequence_parallel_needs_tp)
{
    run r;
    resolve(&r, "model.sequence_parallel=true", NULL);
    expect_bad(&r, "model.sequence_parallel");
    cr_assert(msg_has(&r, "tensor_model_parallel_size > 1 (got 1)"), "%s", r.err.msg);
    char buf[1024];
    sim_err_format(&r.err, buf, sizeof buf);
    cr_assert(strstr(buf, "command line: model.sequence_parallel: sequence parallelism requires"),
              "%s", buf);
    done(&r);

    resolve(&r, "model.sequence_parallel=true", "model.tensor_model_parallel_size=2", NULL);
    expect_ok(&r);
    done(&r);
}

Test(strategy, rule2_error_names_file_and_line)
{
    char path[] = "/tmp/parsim_test_strategy_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs("# run\nmodel: {\n  sequence_parallel = true;\n};\n", f);
    fclose(f);

    run r;
    memset(&r, 0, sizeof r);
    r.cfg = cfg_create("/nonexistent-data-dir");
    for (size_t k = 0; k < sizeof base / sizeof base[0]; k++)
        cfg_set_override(r.cfg, base[k], &r.err);
    cr_assert_eq(cfg_load_file(r.cfg, path, CFG_PRIO_FILE, &r.err), SIM_OK);
    cr_assert_eq(cfg_resolve(r.cfg, &r.in, &r.err), SIM_OK);
    r.rc = strategy_resolve(&r.s, &r.in.model, &r.in.cluster, &r.in.par, &r.in.train,
                            &r.in.ddp, &r.err);
    cfg_err_locate(r.cfg, &r.err);
    cr_assert_eq(r.rc, SIM_EINVAL);
    cr_assert_str_eq(r.err.file, path);
    cr_assert_eq(r.err.line, 3);
    cr_assert_str_eq(r.err.key, "model.sequence_parallel");
    done(&r);
    unlink(path);
}

Test(strategy, rule3_cp_divides_sequence)
{
    run r;
    resolve(&r, "model.context_parallel_size=3", "cluster.num_gpus=48", NULL);
    expect_bad(&r, "model.context_parallel_size");
    cr_assert(msg_has(&r, "4096") && msg_has(&r, "6"), "%s", r.err.msg);
    done(&r);

    resolve(&r, "model.context_parallel_size=4", NULL);
    expect_ok(&r);
    done(&r);
}

Test(strategy, rule4_ep_needs_moe_and_divides_experts)
{
    run r;
    resolve(&r, "model.expert_model_parallel_size=2", NULL);
    expect_bad(&r, "model.expert_model_parallel_size");
    cr_assert(msg_has(&r, "MoE"), "%s", r.err.msg);
    done(&r);

    resolve(&r, "model.num_moe_experts=6", "model.expert_model_parallel_size=4", NULL);
    expect_bad(&r, "model.expert_model_parallel_size");
    cr_assert(msg_has(&r, "num_moe_experts (6)"), "%s", r.err.msg);
    done(&r);

    resolve(&r, "model.num_moe_experts=8", "model.expert_model_parallel_size=8", NULL);
    expect_ok(&r);
    done(&r);
}

Test(strategy, rule5_heads_and_query_groups_split_over_tp)
{
    run r;
    resolve(&r, "model.tensor_model_parallel_size=3", "cluster.num_gpus=48", NULL);
    expect_bad(&r, "model.tensor_model_parallel_size");
    cr_assert(msg_has(&r, "num_attention_heads (32)"), "%s", r.err.msg);
    done(&r);

    /* 12 groups on TP 8: neither a multiple nor a divisor */
    resolve(&r, "model.num_attention_heads=48", "model.num_query_groups=12",
            "model.tensor_model_parallel_size=8", NULL);
    expect_bad(&r, "model.tensor_model_parallel_size");
    cr_assert(msg_has(&r, "multiple or a divisor"), "%s", r.err.msg);
    done(&r);

    /* 8 groups on TP 16: a divisor, allowed (KV heads replicated) */
    resolve(&r, "model.num_query_groups=8", "model.tensor_model_parallel_size=16", NULL);
    expect_ok(&r);
    done(&r);
}

Test(strategy, rule6_layers_split_over_stages)
{
    run r;
    resolve(&r, "model.pipeline_model_parallel_size=3", "cluster.num_gpus=48", NULL);
    expect_bad(&r, "model.pipeline_model_parallel_size");
    cr_assert(msg_has(&r, "num_layers (32)"), "%s", r.err.msg);
    done(&r);

    resolve(&r, "model.pipeline_model_parallel_size=4",
            "model.virtual_pipeline_model_parallel_size=3", NULL);
    expect_bad(&r, "model.virtual_pipeline_model_parallel_size");
    cr_assert(msg_has(&r, "(8 = 32/4)"), "%s", r.err.msg);
    done(&r);

    resolve(&r, "model.virtual_pipeline_model_parallel_size=2", NULL);
    expect_bad(&r, "model.virtual_pipeline_model_parallel_size");
    cr_assert(msg_has(&r, "pipeline_model_parallel_size > 1"), "%s", r.err.msg);
    done(&r);

    resolve(&r, "model.pipeline_model_parallel_size=2",
            "model.virtual_pipeline_model_parallel_size=2", "model.overlap_p2p_comm=false", NULL);
    expect_bad(&r, "model.virtual_pipeline_model_parallel_size");
    cr_assert(msg_has(&r, "> 2"), "%s", r.err.msg);
    done(&r);

    resolve(&r, "model.pipeline_model_parallel_size=2",
            "model.virtual_pipeline_model_parallel_size=2", NULL);
    expect_ok(&r);
    cr_assert_eq(r.s.layers_per_chunk, 8);
    done(&r);
}

Test(strategy, rule7_world_divisible_and_large_enough)
{
    run r;
    resolve(&r, "model.tensor_model_parallel_size=8", "model.pipeline_model_parallel_size=4",
            "cluster.num_gpus=48", NULL);
    expect_bad(&r, "cluster.num_gpus");
    cr_assert(msg_has(&r, "tp*cp*pp = 32"), "%s", r.err.msg);
    done(&r);

    /* expert side: etp*ep*pp must divide the world too */
    resolve(&r, "model.num_moe_experts=16", "model.expert_model_parallel_size=16",
            "model.expert_tensor_parallel_size=1", "cluster.num_gpus=8", NULL);
    expect_bad(&r, "cluster.num_gpus");
    cr_assert(msg_has(&r, "etp*ep*pp = 16"), "%s", r.err.msg);
    done(&r);
}

Test(strategy, rule8_global_batch_divisible)
{
    run r;
    resolve(&r, "train.global_batch_size=100", NULL);
    expect_bad(&r, "train.global_batch_size");
    cr_assert(msg_has(&r, "global batch size (100)") && msg_has(&r, "data parallel size (64)"),
              "%s", r.err.msg);
    done(&r);

    resolve(&r, "train.global_batch_size=512", "train.micro_batch_size=4", NULL);
    expect_ok(&r);
    cr_assert_eq(r.s.num_microbatches, 2);
    done(&r);
}

Test(strategy, rule9_interleaved_group_size)
{
    /* tp 8, pp 4, v 2 on 64 GPUs: dp 2, M = gbs/2 */
    const char *il[] = { "model.tensor_model_parallel_size=8",
                         "model.pipeline_model_parallel_size=4",
                         "model.virtual_pipeline_model_parallel_size=2" };
    run r;
    /* M 6, N = pp 4: remainder 2 < 4; the default N blames the batch */
    resolve(&r, il[0], il[1], il[2], "train.global_batch_size=12", NULL);
    expect_bad(&r, "train.global_batch_size");
    cr_assert(msg_has(&r, "M = 6") && msg_has(&r, "N = 4") && msg_has(&r, "is 2"), "%s",
              r.err.msg);
    done(&r);

    /* M 2 < pp: N = 4 is out of [pp, M] */
    resolve(&r, il[0], il[1], il[2], "train.global_batch_size=4", NULL);
    expect_bad(&r, "train.global_batch_size");
    done(&r);

    /* explicit N below pp, above M, and with a bad remainder */
    resolve(&r, il[0], il[1], il[2], "train.global_batch_size=12",
            "model.microbatch_group_size_per_vp_stage=3", NULL);
    expect_bad(&r, "model.microbatch_group_size_per_vp_stage");
    cr_assert(msg_has(&r, "[pp = 4, M = 6]"), "%s", r.err.msg);
    done(&r);
    resolve(&r, il[0], il[1], il[2], "train.global_batch_size=12",
            "model.microbatch_group_size_per_vp_stage=8", NULL);
    expect_bad(&r, "model.microbatch_group_size_per_vp_stage");
    done(&r);
    resolve(&r, il[0], il[1], il[2], "train.global_batch_size=12",
            "model.microbatch_group_size_per_vp_stage=5", NULL);
    expect_bad(&r, "model.microbatch_group_size_per_vp_stage");
    done(&r);

    /* M 9, N 5: remainder 4 >= pp, allowed since core_v0.10.0 */
    resolve(&r, il[0], il[1], il[2], "train.global_batch_size=18",
            "model.microbatch_group_size_per_vp_stage=5", NULL);
    expect_ok(&r);
    cr_assert_eq(r.s.num_microbatches, 9);
    cr_assert_eq(r.s.group_size_n, 5);
    done(&r);

    /* non-interleaved: no constraint on M */
    resolve(&r, il[0], il[1], "train.global_batch_size=12", NULL);
    expect_ok(&r);
    done(&r);
}

Test(strategy, rule10_cp_comm_type)
{
    run r;
    /* 32 heads / tp 8 = 4 per rank, not a multiple of cp 8 */
    resolve(&r, "model.tensor_model_parallel_size=8", "model.context_parallel_size=8",
            "model.cp_comm_type=a2a", NULL);
    expect_bad(&r, "model.cp_comm_type");
    cr_assert(msg_has(&r, "(4 = 32/8)"), "%s", r.err.msg);
    done(&r);

    resolve(&r, "model.tensor_model_parallel_size=2", "model.context_parallel_size=4",
            "model.cp_comm_type=a2a", NULL);
    expect_ok(&r);
    done(&r);

    resolve(&r, "model.context_parallel_size=4", "model.cp_comm_type=a2a+p2p", NULL);
    expect_bad(&r, "model.hierarchical_context_parallel_sizes");
    cr_assert(msg_has(&r, "must be set"), "%s", r.err.msg);
    done(&r);

    resolve(&r, "model.context_parallel_size=8", "model.cp_comm_type=a2a+p2p",
            "model.hierarchical_context_parallel_sizes=[2,2]", NULL);
    expect_bad(&r, "model.hierarchical_context_parallel_sizes");
    cr_assert(msg_has(&r, "(4)") && msg_has(&r, "(8)"), "%s", r.err.msg);
    done(&r);

    resolve(&r, "model.context_parallel_size=8", "model.cp_comm_type=a2a+p2p",
            "model.hierarchical_context_parallel_sizes=[2,4]", NULL);
    expect_ok(&r);
    done(&r);
}

Test(strategy, rule11_overlap_options)
{
    run r;
    resolve(&r, "ddp.overlap_param_gather=true", "ddp.overlap_grad_reduce=true", NULL);
    expect_bad(&r, "ddp.overlap_param_gather");
    done(&r);
    resolve(&r, "ddp.overlap_param_gather=true", "ddp.use_distributed_optimizer=true", NULL);
    expect_bad(&r, "ddp.overlap_param_gather");
    done(&r);
    resolve(&r, "ddp.overlap_param_gather=true", "ddp.use_distributed_optimizer=true",
            "ddp.overlap_grad_reduce=true", NULL);
    expect_ok(&r);
    done(&r);

    resolve(&r, "model.tp_comm_overlap=true", "model.tensor_model_parallel_size=2", NULL);
    expect_bad(&r, "model.tp_comm_overlap");
    done(&r);
    resolve(&r, "model.tp_comm_overlap=true", "model.tensor_model_parallel_size=2",
            "model.sequence_parallel=true", NULL);
    expect_ok(&r);
    done(&r);
}

Test(strategy, first_rule_violated_wins)
{
    run r;
    /* SP without TP (rule 2) and a bad batch (rule 8): rule 2 is reported */
    resolve(&r, "model.sequence_parallel=true", "train.global_batch_size=100", NULL);
    expect_bad(&r, "model.sequence_parallel");
    done(&r);
}

/* ------------------------------------------------------------- derived */

Test(strategy, derived_sizes)
{
    run r;
    resolve(&r, "model.tensor_model_parallel_size=2", "model.pipeline_model_parallel_size=4",
            "model.context_parallel_size=2", "model.virtual_pipeline_model_parallel_size=2",
            "train.micro_batch_size=2", NULL);
    expect_ok(&r);
    cr_assert_eq(r.s.world, 64);
    cr_assert_eq(r.s.tp, 2);
    cr_assert_eq(r.s.pp, 4);
    cr_assert_eq(r.s.cp, 2);
    cr_assert_eq(r.s.v, 2);
    cr_assert_eq(r.s.dp, 4);
    cr_assert_eq(r.s.etp, 2);
    cr_assert_eq(r.s.ep, 1);
    cr_assert_eq(r.s.edp, 8);
    cr_assert_eq(r.s.num_microbatches, 64);
    cr_assert_eq(r.s.group_size_n, 4);
    cr_assert_eq(r.s.layers_per_chunk, 4);
    cr_assert_eq(r.s.min_gpus, 16);
    cr_assert_eq(r.s.min_gpus_common, 16);
    cr_assert_eq(r.s.train.micro_batch_size, 2);
    done(&r);
}

/* Megatron Bridge guide: min_gpus = PP * max(TP*CP, EP*ETP), exact form lcm. */
static void check_min_gpus(const char *tp, const char *pp, const char *cp, const char *ep,
                           const char *etp, const char *seq, const char *world, int64_t want,
                           int64_t want_common)
{
    run r;
    resolve(&r, "model.num_moe_experts=8", tp, pp, cp, ep, etp, seq, world, NULL);
    expect_ok(&r);
    cr_assert_eq(r.s.min_gpus, want, "%s %s %s %s %s", tp, pp, cp, ep, etp);
    cr_assert_eq(r.s.min_gpus_common, want_common);
    done(&r);
}

Test(strategy, min_gpus_bridge_examples)
{
    check_min_gpus("model.tensor_model_parallel_size=2", "model.pipeline_model_parallel_size=1",
                   "model.context_parallel_size=1", "model.expert_model_parallel_size=8",
                   "model.expert_tensor_parallel_size=1", "model.seq_length=4096",
                   "cluster.num_gpus=8", 8, 8);
    check_min_gpus("model.tensor_model_parallel_size=2", "model.pipeline_model_parallel_size=2",
                   "model.context_parallel_size=1", "model.expert_model_parallel_size=8",
                   "model.expert_tensor_parallel_size=1", "model.seq_length=4096",
                   "cluster.num_gpus=16", 16, 16);
    check_min_gpus("model.tensor_model_parallel_size=2", "model.pipeline_model_parallel_size=1",
                   "model.context_parallel_size=1", "model.expert_model_parallel_size=4",
                   "model.expert_tensor_parallel_size=2", "model.seq_length=4096",
                   "cluster.num_gpus=8", 8, 8);
    /* TP 2 x CP 3 = 6 and EP 4 x ETP 1 = 4: lcm 12, not max 6 */
    check_min_gpus("model.tensor_model_parallel_size=2", "model.pipeline_model_parallel_size=1",
                   "model.context_parallel_size=3", "model.expert_model_parallel_size=4",
                   "model.expert_tensor_parallel_size=1", "model.seq_length=6144",
                   "cluster.num_gpus=12", 12, 6);
}

Test(strategy, min_gpus_lcm_rejects_max_form)
{
    run r;
    resolve(&r, "model.num_moe_experts=8", "model.tensor_model_parallel_size=2",
            "model.context_parallel_size=3", "model.expert_model_parallel_size=4",
            "model.expert_tensor_parallel_size=1", "model.seq_length=6144",
            "cluster.num_gpus=6", NULL);
    expect_bad(&r, "cluster.num_gpus");
    cr_assert(msg_has(&r, "pp*lcm(tp*cp, ep*etp) = 12"), "%s", r.err.msg);
    cr_assert(msg_has(&r, "not pp*max(tp*cp, ep*etp) = 6"), "%s", r.err.msg);
    done(&r);
}

/* ------------------------------------------------------------- layout */

Test(strategy, rank_coords_megatron_docstring)
{
    /* 16 GPUs, tp 2, pp 4: TP [0,1], DP [0,2], PP [0,4,8,12] */
    run r;
    resolve(&r, "cluster.num_gpus=16", "model.tensor_model_parallel_size=2",
            "model.pipeline_model_parallel_size=4", NULL);
    expect_ok(&r);
    cr_assert_eq(r.s.dp, 2);
    cr_assert_eq(r.s.groups[GROUP_TP].size, 2);
    cr_assert_eq(r.s.groups[GROUP_TP].stride, 1);
    cr_assert_eq(r.s.groups[GROUP_DP].size, 2);
    cr_assert_eq(r.s.groups[GROUP_DP].stride, 2);
    cr_assert_eq(r.s.groups[GROUP_PP].size, 4);
    cr_assert_eq(r.s.groups[GROUP_PP].stride, 4);
    for (int64_t rank = 0; rank < 16; rank++) {
        rank_coords c;
        strategy_coords(&r.s, rank, &c);
        cr_assert_eq(c.tp + 2 * c.dp + 4 * c.pp, rank, "rank %ld", (long)rank);
        cr_assert_eq(c.cp, 0);
    }
    rank_coords c;
    strategy_coords(&r.s, 13, &c); /* PP group [1,5,9,13], DP group [12,14]... */
    cr_assert_eq(c.tp, 1);
    cr_assert_eq(c.dp, 0);
    cr_assert_eq(c.pp, 3);
    strategy_coords(&r.s, 6, &c); /* TP [6,7], DP [4,6] */
    cr_assert_eq(c.tp, 0);
    cr_assert_eq(c.dp, 1);
    cr_assert_eq(c.pp, 1);
    done(&r);
}

Test(strategy, rank_coords_cp_example)
{
    /* 8 GPUs, tp 4, cp 2: CP groups [0,4], [1,5], ... */
    run r;
    resolve(&r, "cluster.num_gpus=8", "model.tensor_model_parallel_size=4",
            "model.context_parallel_size=2", NULL);
    expect_ok(&r);
    cr_assert_eq(r.s.groups[GROUP_CP].size, 2);
    cr_assert_eq(r.s.groups[GROUP_CP].stride, 4);
    rank_coords c;
    strategy_coords(&r.s, 4, &c);
    cr_assert_eq(c.tp, 0);
    cr_assert_eq(c.cp, 1);
    strategy_coords(&r.s, 5, &c);
    cr_assert_eq(c.tp, 1);
    cr_assert_eq(c.cp, 1);
    done(&r);
}

Test(strategy, groups_dense_and_expert_order)
{
    /* reference §5.2: 16 GPUs, tp 2, cp 2, pp 2 (dp 2): DP [0,4], DP-CP
     * [0,2,4,6], PP [0,8]; experts etp 1, ep 4 (edp 2): EP [0..3], EDP [0,4] */
    run r;
    resolve(&r, "cluster.num_gpus=16", "model.tensor_model_parallel_size=2",
            "model.context_parallel_size=2", "model.pipeline_model_parallel_size=2",
            "model.num_moe_experts=8", "model.expert_model_parallel_size=4",
            "model.expert_tensor_parallel_size=1", NULL);
    expect_ok(&r);
    const group_span *g = r.s.groups;
    cr_assert_eq(g[GROUP_CP].stride, 2);
    cr_assert_eq(g[GROUP_DP].size, 2);
    cr_assert_eq(g[GROUP_DP].stride, 4);
    cr_assert_eq(g[GROUP_DP_CP].size, 4);
    cr_assert_eq(g[GROUP_DP_CP].stride, 2);
    cr_assert_eq(g[GROUP_PP].size, 2);
    cr_assert_eq(g[GROUP_PP].stride, 8);
    cr_assert_eq(g[GROUP_ETP].size, 1);
    cr_assert_eq(g[GROUP_EP].size, 4);
    cr_assert_eq(g[GROUP_EP].stride, 1);
    cr_assert_eq(r.s.edp, 2);
    cr_assert_eq(g[GROUP_EDP].size, 2);
    cr_assert_eq(g[GROUP_EDP].stride, 4);
    rank_coords c;
    strategy_coords(&r.s, 6, &c);
    cr_assert_eq(c.ep, 2);
    cr_assert_eq(c.edp, 1);
    cr_assert_eq(c.etp, 0);
    cr_assert_str_eq(group_kind_name(GROUP_DP_CP), "dp_cp");
    done(&r);
}

Test(strategy, group_spans_and_warnings)
{
    /* TP 16 on 8-GPU nodes: two nodes, outside the NVLink domain */
    run r;
    resolve(&r, "model.tensor_model_parallel_size=16", NULL);
    expect_ok(&r);
    const group_span *tp = &r.s.groups[GROUP_TP];
    cr_assert_eq(tp->nodes, 2);
    cr_assert_eq(tp->ranks_per_node, 8);
    cr_assert_eq(tp->domains, 2);
    cr_assert_not(tp->in_nvlink_domain);
    cr_assert_eq(r.s.groups[GROUP_DP].nodes, 4); /* dp 4 with stride 16 */
    char buf[512];
    cr_assert_eq(strategy_layout_warnings(&r.s, buf, sizeof buf), 2, "%s", buf); /* TP, ETP */
    cr_assert(strstr(buf, "warning: TP group spans 2 nodes: its collectives leave the NVLink "
                          "domain"), "%s", buf);
    cr_assert_eq(strategy_layout_warnings(&r.s, NULL, 0), 2);
    done(&r);

    /* TP 8 fits in a node */
    resolve(&r, "model.tensor_model_parallel_size=8", NULL);
    expect_ok(&r);
    cr_assert(r.s.groups[GROUP_TP].in_nvlink_domain);
    cr_assert_eq(r.s.groups[GROUP_TP].nodes, 1);
    cr_assert_eq(strategy_layout_warnings(&r.s, buf, sizeof buf), 0);
    done(&r);

    /* NVL72: 4-GPU nodes in a 72-GPU NVLink domain; TP 8 spans 2 nodes but
     * stays on NVLink */
    resolve(&r, "cluster.num_gpus=72", "cluster.gpus_per_node=4",
            "cluster.nvlink_domain_gpus=72", "model.tensor_model_parallel_size=8",
            "train.global_batch_size=9", NULL);
    expect_ok(&r);
    cr_assert_eq(r.s.groups[GROUP_TP].nodes, 2);
    cr_assert(r.s.groups[GROUP_TP].in_nvlink_domain);
    cr_assert_eq(strategy_layout_warnings(&r.s, buf, sizeof buf), 0);
    done(&r);
}

Test(strategy, print_layout)
{
    run r;
    resolve(&r, "cluster.num_gpus=128", "model.tensor_model_parallel_size=16",
            "train.global_batch_size=64", NULL);
    expect_ok(&r);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    strategy_print_layout(&r.s, &r.in.cluster, f);
    fclose(f);
    cr_assert(strstr(text, "64 more ranks omitted"), "%s", text);
    cr_assert(strstr(text, "warning: TP group spans 2 nodes"), "%s", text);
    cr_assert(strstr(text, "infiniband"), "%s", text);
    cr_assert(strstr(text, "[0, 16, 32, 48, 64, 80, 96, 112]"), "DP group of rank 0: %s", text);
    free(text);
    done(&r);
}
