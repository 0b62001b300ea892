#define _DEFAULT_SOURCE /* mkstemps */
/* The command line: bad input exits 2 with one line naming the key (and
 * file:line where there is one); no input makes parsim crash; the bundled
 * example and the JSON contract. */
#include <criterion/criterion.h>

#include "cli_run.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>


#define BASE "run model.name=llama3-8b cluster.topology=dgx-h100 cluster.num_gpus=8 train.global_batch_size=64 "
#define MOE "run model.name=mixtral-8x7b cluster.topology=dgx-h100 cluster.num_gpus=64 train.global_batch_size=64 "

typedef struct bad_case {
    const char *args;
    const char *key; /* must appear in the message */
} bad_case;

static const bad_case bad[] = {
    {BASE "model.sequence_parallel=true", "model.sequence_parallel"},
    {BASE "model.tensor_model_parallel_size=2 model.context_parallel_size=2 model.seq_length=8190",
     "model.context_parallel_size"},
    {BASE "model.expert_model_parallel_size=2", "model.expert_model_parallel_size"},
    {MOE "model.expert_model_parallel_size=3 model.expert_tensor_parallel_size=1 cluster.num_gpus=48",
     "model.expert_model_parallel_size"},
    {BASE "model.tensor_model_parallel_size=3 cluster.num_gpus=9", "model.tensor_model_parallel_size"},
    {BASE "model.num_query_groups=6 model.num_attention_heads=48 model.tensor_model_parallel_size=4",
     "model.tensor_model_parallel_size"},
    {BASE "model.pipeline_model_parallel_size=3 cluster.num_gpus=9", "model.pipeline_model_parallel_size"},
    {BASE "model.pipeline_model_parallel_size=4 model.virtual_pipeline_model_parallel_size=3",
     "model.virtual_pipeline_model_parallel_size"},
    {BASE "train.global_batch_size=7", "train.global_batch_size"},
    {BASE "cluster.num_gpus=4 model.pipeline_model_parallel_size=4 model.virtual_pipeline_model_parallel_size=2 "
          "train.global_batch_size=6",
     "global_batch_size"},
    {BASE "model.tensor_model_parallel_size=8 cluster.num_gpus=12", "cluster.num_gpus"},
    {MOE "model.tensor_model_parallel_size=2 model.context_parallel_size=3 model.expert_model_parallel_size=4 "
         "model.expert_tensor_parallel_size=1 model.seq_length=6144 model.sequence_parallel=true cluster.num_gpus=6 "
         "train.global_batch_size=1",
     "cluster.num_gpus"},
    {BASE "model.context_parallel_size=2 model.cp_comm_type=a2a+p2p", "hierarchical_context_parallel_sizes"},
    {BASE "model.context_parallel_size=8 model.cp_comm_type=a2a model.num_attention_heads=36 "
          "model.num_query_groups=4 model.hidden_size=4608",
     "model.cp_comm_type"},
    {BASE "ddp.overlap_param_gather=true ddp.overlap_grad_reduce=true", "ddp.overlap_param_gather"},
    {BASE "model.tp_comm_overlap=true model.tensor_model_parallel_size=2", "model.tp_comm_overlap"},
    {BASE "model.hiden_size=4096", "model.hiden_size"},
    {BASE "model.num_layers=abc", "model.num_layers"},
    {BASE "model.num_layers=0", "model.num_layers"},
    {BASE "model.name=no-such-model", "model.name"},
    {BASE "cluster.topology=no-such-system", "cluster.topology"},
    {BASE "model.cp_comm_type=ring", "model.cp_comm_type"},
    {BASE "model.recompute_granularity=some", "model.recompute_granularity"},
    {BASE "model.recompute_modules=[core_attn,bogus]", "model.recompute_modules"},
    {BASE "mixed_precision=fp7", "mixed_precision"},
    {BASE "model.window_size=[128,64]", "model.window_size"},
    {BASE "model.window_size=[0]", "model.window_size"},
    {BASE "model.window_size=[128,0] model.window_attn_skip_freq=[1,0]", "model.window_attn_skip_freq"},
    {BASE "peft.scheme=qlora", "peft.scheme"},
    {MOE "peft.scheme=lora", "peft.scheme"},
    {BASE "peft.scheme=lora peft.target_modules=[]", "peft.target_modules"},
    {BASE "peft.scheme=lora peft.target_modules=[linear_qkv,router]", "peft.target_modules"},
    {BASE "peft.scheme=lora peft.dim=0", "peft.dim"},
    {"run configs/no-such-file.cfg", "no-such-file.cfg"},
    {BASE "--format yaml", "yaml"},
    {BASE "--no-such-option", "--no-such-option"},
    {"frobnicate", "frobnicate"},
    {"validate tests/data/validate_rows.csv --jobs -1", "--jobs"},
    {"calibrate tests/data/validate_mini.csv --max-iter 0", "--max-iter"},
    {"search configs/llama3-70b-h100x64.cfg --top 0", "--top"},
    {"compare tests/data/validate_rows.csv tests/data/validate_rows.csv --list x", "--list"},
};

Test(cli, every_rule_exits_2_naming_the_key, .timeout = 120)
{
    result r;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        run(&r, bad[i].args);
        cr_expect_eq(r.status, 2, "`%s` exited %d: %s", bad[i].args, r.status, r.out);
        cr_expect(strstr(r.out, bad[i].key) != NULL, "`%s`: message does not name %s: %s", bad[i].args, bad[i].key,
                  r.out);
        cr_expect(strncmp(r.out, "parsim: ", 8) == 0, "`%s`: %s", bad[i].args, r.out);
    }
}

Test(cli, min_gpus_lcm_example_runs_on_12)
{
    result r;
    run(&r, MOE "model.tensor_model_parallel_size=2 model.context_parallel_size=3 model.expert_model_parallel_size=4 "
                "model.expert_tensor_parallel_size=1 model.seq_length=6144 model.sequence_parallel=true "
                "cluster.num_gpus=12 train.global_batch_size=2 --format json");
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_assert(strstr(r.out, "\"min_gpus\": 12") != NULL, "%s", r.out);
}

Test(cli, syntax_error_names_file_and_line)
{
    char path[] = "/tmp/parsim_cli_XXXXXX.cfg";
    int fd = mkstemps(path, 4);
    cr_assert(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs("# a run\nmodel: {\n  num_layers = ;\n};\n", f);
    fclose(f);
    result r;
    char args[512];
    snprintf(args, sizeof args, "run %s", path);
    run(&r, args);
    remove(path);
    cr_assert_eq(r.status, 2, "%s", r.out);
    char where[600];
    snprintf(where, sizeof where, "%s:3", path);
    cr_assert(strstr(r.out, where) != NULL, "no %s in: %s", where, r.out);
}

Test(cli, unknown_key_in_file_names_file_line_and_key)
{
    char path[] = "/tmp/parsim_cli_XXXXXX.cfg";
    int fd = mkstemps(path, 4);
    cr_assert(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs("model: {\n  name = \"llama3-8b\";\n  tensor_model_paralel_size = 2;\n};\n"
          "cluster: { topology = \"dgx-h100\"; num_gpus = 8; };\ntrain: { global_batch_size = 64; };\n",
          f);
    fclose(f);
    result r;
    char args[512];
    snprintf(args, sizeof args, "run %s", path);
    run(&r, args);
    remove(path);
    cr_assert_eq(r.status, 2, "%s", r.out);
    char where[600];
    snprintf(where, sizeof where, "%s:3: model.tensor_model_paralel_size", path);
    cr_assert(strstr(r.out, where) != NULL, "no '%s' in: %s", where, r.out);
}

/* Every value in a set of hostile ones, for a set of keys: parsim answers
 * 0, 1 or 2 and is never killed by a signal. */
Test(cli, no_input_crashes, .timeout = 300)
{
    static const char *const keys[] = {
        "model.num_layers", "model.hidden_size", "model.num_attention_heads", "model.num_query_groups",
        "model.seq_length", "model.vocab_size", "model.tensor_model_parallel_size",
        "model.pipeline_model_parallel_size", "model.virtual_pipeline_model_parallel_size",
        "model.context_parallel_size", "model.expert_model_parallel_size", "train.global_batch_size",
        "train.micro_batch_size", "cluster.num_gpus", "cluster.gpus_per_node", "cluster.gpu.peak_bf16_tflops",
        "model.moe_layer_freq", "model.recompute_modules", "model.kv_channels", "model.ffn_hidden_size",
        "model.window_size", "model.window_attn_skip_freq", "peft.dim", "peft.target_modules",
        "cluster.compute.sustained_fraction", "cluster.compute.microbench",
    };
    static const char *const values[] = {"-1", "0", "3", "99999999999999999999", "1e308", "nan", "\\\"\\\"",
                                         "[", "[1,2", "true", "x"};
    result r;
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        for (size_t v = 0; v < sizeof values / sizeof values[0]; v++) {
            char args[512];
            snprintf(args, sizeof args, BASE "%s=%s --format csv", keys[k], values[v]);
            run(&r, args);
            cr_expect(r.status <= 2, "`%s` ended with status %d: %s", args, r.status, r.out);
        }
}

Test(cli, default_example_runs)
{
    result r;
    run(&r, "run configs/llama3-70b-h100x64.cfg");
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_assert(strstr(r.out, "step time") != NULL, "%s", r.out);
}

Test(cli, json_has_contract_fields)
{
    result r;
    run(&r, "run configs/llama3-70b-h100x64.cfg --format json");
    cr_assert_eq(r.status, 0, "%s", r.out);
    static const char *const fields[] = {
        "\"parallel\"", "\"world_size\"", "\"tp\"", "\"pp\"", "\"vp\"", "\"cp\"", "\"ep\"", "\"etp\"", "\"dp\"",
        "\"edp\"", "\"num_microbatches\"", "\"min_gpus\"", "\"step_time_s\"", "\"bubble_fraction\"",
        "\"tokens_per_s_per_gpu\"", "\"model_tflops_per_gpu\"", "\"mfu\"", "\"memory\"", "\"peak_bytes\"",
        "\"stages\"", "\"stage\"", "\"weights_bytes\"", "\"gradients_bytes\"", "\"optimizer_bytes\"",
        "\"activations_peak_bytes\"", "\"inflight_microbatches_max\"", "\"comm\"", "\"tp_s\"", "\"cp_s\"",
        "\"ep_s\"", "\"dp_s\"", "\"pp_s\"", "\"exposed_s\"",
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        cr_expect(strstr(r.out, fields[i]) != NULL, "missing %s", fields[i]);
}

Test(cli, trace_is_written_whole)
{
    result r;
    const char *path = "/tmp/parsim_cli_trace.json";
    remove(path);
    char args[512];
    snprintf(args, sizeof args, BASE "model.pipeline_model_parallel_size=2 --trace %s", path);
    run(&r, args);
    cr_assert_eq(r.status, 0, "%s", r.out);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    char head[64] = {0};
    cr_assert(fread(head, 1, sizeof head - 1, f) > 0);
    fseek(f, -3, SEEK_END);
    char tail[4] = {0};
    cr_assert(fread(tail, 1, 3, f) == 3);
    fclose(f);
    remove(path);
    cr_assert(strstr(head, "traceEvents") != NULL, "%s", head);
    cr_assert_str_eq(tail, "]}\n");
}

Test(cli, layout_warns_when_tp_leaves_nvlink)
{
    result r;
    run(&r, "run model.name=llama3-70b cluster.topology=dgx-h100 cluster.num_gpus=16 "
            "model.tensor_model_parallel_size=16 model.num_attention_heads=64 model.num_query_groups=16 "
            "train.global_batch_size=16 --layout");
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_assert(strstr(r.out, "warning") != NULL, "%s", r.out);
}

/* Inputs far beyond what can be simulated end with a reason, not with a
 * crash, an overflowed clock or memory exhaustion: beyond a key's range
 * status 2 naming the range, a duration past LIMIT_DURATION_S status 2
 * naming what would take that long, a step past LIMIT_PASSES status 2. */
Test(cli, extreme_inputs_fail_cleanly, .timeout = 60)
{
    static const struct {
        const char *args;
        int status;
        const char *says;
    } cases[] = {
        { BASE "model.seq_length=100000000", 2, "model.seq_length: must be in [1, 16777216]" },
        { BASE "train.global_batch_size=800000000", 2, "train.global_batch_size: must be in [1, 1048576]" },
        { BASE "cluster.gpu.peak_bf16_tflops=0.000001", 2, "would take" }, /* kernels of years */
        { BASE "train.global_batch_size=1048576 model.pipeline_model_parallel_size=8", 2,
          "forward/backward passes" }, /* 10^6 microbatches on 8 stages */
    };
    result r;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run(&r, cases[i].args);
        cr_expect_eq(r.status, cases[i].status, "`%s` exited %d: %s", cases[i].args, r.status, r.out);
        cr_expect(strncmp(r.out, "parsim: ", 8) == 0, "`%s`: %s", cases[i].args, r.out);
        cr_expect(strstr(r.out, cases[i].says) != NULL, "`%s`: %s", cases[i].args, r.out);
    }
}
