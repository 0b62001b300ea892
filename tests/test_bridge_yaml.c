/* A Megatron Bridge run_config.yaml as parsim's config file
 * (sim/bridge_yaml.h): the same report as the same settings given as
 * KEY=VALUE, the list of what was done with each field, the warnings, and
 * every malformed or hostile file refused with its file and line. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "scratch.h"

#define YAML70B "tests/data/bridge_llama3_70b.yaml"
#define CLUSTER "cluster.topology=dgx-h100 cluster.num_gpus=64"

/* What tests/data/bridge_llama3_70b.yaml says, as parsim's keys: the
 * architecture, the layout and the options (the dataset's sequence
 * length; ETP and the microbatch group are Megatron's defaults there). */
#define SAME_AS_KEYS                                                                                           \
    "model.num_layers=80 model.hidden_size=8192 model.ffn_hidden_size=28672 model.num_attention_heads=64 "    \
    "model.num_query_groups=8 model.kv_channels=128 model.gated_linear_unit=true model.normalization=RMSNorm " \
    "model.share_embeddings_and_output_weights=false model.add_bias_linear=false "                            \
    "model.position_embedding_type=rope model.vocab_size=128256 model.seq_length=8192 "                        \
    "model.tensor_model_parallel_size=4 model.pipeline_model_parallel_size=4 "                                 \
    "model.virtual_pipeline_model_parallel_size=5 model.context_parallel_size=2 model.sequence_parallel=true " \
    "model.tp_comm_overlap=true model.overlap_p2p_comm=true train.global_batch_size=128 "                      \
    "train.micro_batch_size=1 ddp.use_distributed_optimizer=true ddp.overlap_grad_reduce=true "               \
    "ddp.overlap_param_gather=true mixed_precision=bf16 "

Test(bridge_yaml, report_is_that_of_the_same_settings_as_key_value, .timeout = 120)
{
    result a, b;
    run(&a, "run " YAML70B " " CLUSTER);
    cr_assert_eq(a.status, 0, "%s", a.out);
    run(&b, "run " SAME_AS_KEYS CLUSTER);
    cr_assert_eq(b.status, 0, "%s", b.out);
    /* the header names the provider class; the rest is the same bytes */
    const char *want_head = "parsim: Llama31ModelProvider on 64 x ";
    cr_assert(!strncmp(a.out, want_head, strlen(want_head)), "%s", a.out);
    cr_assert(!strncmp(b.out, "parsim: model on 64 x ", 22), "%s", b.out);
    cr_assert_str_eq(strchr(a.out, '\n'), strchr(b.out, '\n'));
    /* and the same CSV numbers (the model column aside) */
    run(&a, "run " YAML70B " " CLUSTER " --format csv");
    run(&b, "run " SAME_AS_KEYS CLUSTER " --format csv");
    cr_assert_eq(a.status, 0, "%s", a.out);
    cr_assert_str_eq(strstr(a.out, "\nLlama31ModelProvider,") + 22, strstr(b.out, "\n,") + 2);
}

Test(bridge_yaml, overrides_go_on_top_of_the_file, .timeout = 120)
{
    result r;
    run(&r, "run " YAML70B " " CLUSTER " model.virtual_pipeline_model_parallel_size=2 --dump-config");
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_assert(strstr(r.out, "model.virtual_pipeline_model_parallel_size = 2;  # command line"), "%s", r.out);
    /* the file's settings name the file and line they come from */
    cr_assert(strstr(r.out, "model.num_layers = 80;  # " YAML70B ":141"), "%s", r.out);
    /* the data loader's length wins over the provider's seq_length */
    cr_assert(strstr(r.out, "model.seq_length = 8192;  # " YAML70B ":31"), "%s", r.out);
    cr_assert(strstr(r.out, "model.attention_backend = \"auto\";  # " YAML70B ":94"), "%s", r.out);
    cr_assert(strstr(r.out, "mixed_precision = \"bf16\";  # " YAML70B ":68"), "%s", r.out);
}

Test(bridge_yaml, explain_lists_every_field_once, .timeout = 60)
{
    result r;
    run(&r, "run " YAML70B " --explain-config");
    cr_assert_eq(r.status, 0, "%s", r.out);
    static const char *const want[] = {
        YAML70B ":141: model.num_layers: mapped to model.num_layers=80\n",
        YAML70B ":31: dataset.sequence_length: mapped to model.seq_length=8192\n",
        YAML70B ":198: tokenizer.vocab_size: mapped to model.vocab_size=128256 (superseded by model.vocab_size, line "
                "166)\n",
        YAML70B ":94: model.attention_backend: mapped to model.attention_backend=\"auto\"\n",
        YAML70B ":144: model.num_moe_experts: null: Megatron's default (the default of model.num_moe_experts)\n",
        YAML70B ":108: model.expert_tensor_parallel_size: ignored (Megatron's default, tensor_model_parallel_size)\n",
        YAML70B ":42: ddp.data_parallel_sharding_strategy: ignored (read only with ddp.use_megatron_fsdp)\n",
        /* a section parsim does not know: ignored and listed */
        YAML70B ":169: my_site_settings.cluster_name: ignored (a section parsim does not read)\n",
        YAML70B ":170: my_site_settings.partition: ignored (a section parsim does not read)\n",
        YAML70B ":90: model.activation_func: mapped to model.activation_func=silu\n",
        YAML70B ":161: model.seq_length: mapped to model.seq_length=131072 (superseded by dataset.sequence_length, "
                "line 31)\n",
        YAML70B ":18: comm_overlap.tp_comm_overlap: mapped to model.tp_comm_overlap=true (superseded by "
                "model.tp_comm_overlap, line 165)\n",
    };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++)
        cr_expect(strstr(r.out, want[k]), "want '%s' in:\n%s", want[k], r.out);
    /* one line a field, each once */
    cr_expect_eq(count_lines(r.out), 167, "%s", r.out);
    cr_expect_null(strstr(strstr(r.out, "model.num_layers:") + 1, "model.num_layers:"));
    /* nothing to warn about in this file */
    run(&r, "run " YAML70B " " CLUSTER);
    cr_expect_null(strstr(r.out, "warning"), "%s", r.out);
}

Test(bridge_yaml, explain_needs_a_yaml_file)
{
    result r;
    run(&r, "run configs/llama3-70b-h100x64.cfg --explain-config");
    expect_refusal(&r, "explain of a .cfg", "--explain-config", ".yaml");
}

Test(bridge_yaml, broken_yaml_names_file_and_line)
{
    result r;
    run(&r, "run tests/data/bridge_broken.yaml " CLUSTER);
    expect_refusal(&r, "broken", "tests/data/bridge_broken.yaml:6:", "YAML syntax error");
}

/* A scratch file name.yaml holding text; its path in buf. */
static const char *yaml_file(char *buf, size_t len, const char *name, const char *text)
{
    path_in(buf, len, name);
    write_file(buf, text);
    return buf;
}

/* A small dense model in Bridge's form, with room for more fields. */
#define SMALL_MODEL(extra)                                                                                   \
    "_target_: megatron.bridge.training.config.ConfigContainer\n"                                        \
    "model:\n"                                                                                            \
    "  _target_: megatron.bridge.models.llama.llama_provider.Llama32ModelProvider1B\n"                    \
    "  num_layers: 16\n"                                                                                  \
    "  hidden_size: 2048\n"                                                                               \
    "  ffn_hidden_size: 8192\n"                                                                           \
    "  num_attention_heads: 32\n"                                                                         \
    "  num_query_groups: 8\n"                                                                             \
    "  seq_length: 4096\n"                                                                                \
    "  vocab_size: null\n" extra                                                                          \
    "tokenizer:\n"                                                                                        \
    "  vocab_size: 128256\n"                                                                              \
    "train:\n"                                                                                            \
    "  global_batch_size: 32\n"                                                                           \
    "  micro_batch_size: 1\n"

Test(bridge_yaml, precision_enum_peft_and_fallbacks, .timeout = 60)
{
    make_dir();
    char p[256];
    result r;
    yaml_file(p, sizeof p, "fp8.yaml",
              SMALL_MODEL("  attention_backend: {_target_: megatron.core.transformer.enums.AttnBackend, _call_: true,\n"
                          "                      _args_: [1], _name_: flash}\n")
              "mixed_precision:\n  bf16: true\n  fp8: hybrid\n  fp8_recipe: delayed\n"
              "peft:\n  _target_: megatron.bridge.peft.lora.LoRA\n  dim: 16\n  alpha: 32\n"
              "  target_modules: [linear_qkv, linear_proj]\n");
    runf(&r, "run %s cluster.topology=dgx-h100 cluster.num_gpus=8 --dump-config", p);
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "mixed_precision = \"fp8-delayed\";"), "%s", r.out);
    cr_expect(strstr(r.out, "model.attention_backend = \"flash\";"), "%s", r.out);
    cr_expect(strstr(r.out, "peft.scheme = \"lora\";"), "%s", r.out);
    cr_expect(strstr(r.out, "peft.dim = 16;"), "%s", r.out);
    cr_expect(strstr(r.out, "peft.target_modules = [\"linear_qkv\", \"linear_proj\"];"), "%s", r.out);
    /* model.vocab_size is null: the tokenizer's */
    cr_expect(strstr(r.out, "model.vocab_size = 128256;  # "), "%s", r.out);
    /* a recipe name as the whole section */
    yaml_file(p, sizeof p, "recipe.yaml", SMALL_MODEL("") "mixed_precision: bf16_with_fp8_current_scaling_mixed\n");
    runf(&r, "run %s cluster.topology=dgx-h100 cluster.num_gpus=8 --dump-config", p);
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "mixed_precision = \"bf16_with_fp8_current_scaling_mixed\";"), "%s", r.out);
    /* the run itself: the provider in the header, the precision in the options */
    runf(&r, "run %s cluster.topology=dgx-h100 cluster.num_gpus=8", p);
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_expect(!strncmp(r.out, "parsim: Llama32ModelProvider1B on 8 x", 37), "%s", r.out);
    cr_expect(strstr(r.out, "options     fp8-cs"), "%s", r.out);
    remove_dir();
}

Test(bridge_yaml, not_modeled_fields_warn_once_each, .timeout = 60)
{
    make_dir();
    char p[256];
    result r;
    yaml_file(p, sizeof p, "warn.yaml",
              SMALL_MODEL("  recompute_method: block\n")
              "ddp:\n  use_megatron_fsdp: true\n  data_parallel_sharding_strategy: optim_grads_params\n");
    runf(&r, "run %s cluster.topology=dgx-h100 cluster.num_gpus=8", p);
    cr_assert_eq(r.status, 0, "%s", r.out);
    char want[512];
    snprintf(want, sizeof want, "parsim: warning: %s:11: model.recompute_method=block: block recompute is not "
                                "modeled (full recompute is uniform); the result may differ\n", p);
    cr_expect(strstr(r.out, want), "want '%s' in:\n%s", want, r.out);
    /* Megatron-FSDP is modeled: no warning, the report shows its sharding */
    cr_expect_null(strstr(r.out, "use_megatron_fsdp="), "%s", r.out);
    cr_expect_null(strstr(r.out, "sharding_strategy="), "%s", r.out);
    cr_expect_null(strstr(strstr(r.out, "recompute_method") + 1, "recompute_method"), "%s", r.out);
    remove_dir();
}

/* comm_overlap's EP overlap and delayed wgrads reach the model's keys, as
 * the other comm_overlap fields do: applied first, the model's own fields
 * win. */
#define SMALL_MOE(extra)                                                                                   \
    SMALL_MODEL("  num_moe_experts: 8\n  moe_router_topk: 2\n  moe_ffn_hidden_size: 1024\n"                \
                "  expert_model_parallel_size: 8\n  moe_token_dispatcher_type: alltoall\n" extra)         \
    "comm_overlap:\n  overlap_moe_expert_parallel_comm: true\n  delay_wgrad_compute: true\n"

static void expect_line(const char *out, const char *fmt, const char *p, int line)
{
    char want[512];
    snprintf(want, sizeof want, fmt, p, line);
    cr_expect(strstr(out, want), "want '%s' in:\n%s", want, out);
}

Test(bridge_yaml, ep_overlap_and_delayed_wgrads_reach_their_keys, .timeout = 60)
{
    make_dir();
    char p[256];
    result r;
    yaml_file(p, sizeof p, "overlap.yaml", SMALL_MOE(""));
    runf(&r, "run %s --explain-config", p);
    cr_assert_eq(r.status, 0, "%s", r.out);
    expect_line(r.out, "%s:%d: comm_overlap.overlap_moe_expert_parallel_comm: mapped to "
                       "model.overlap_moe_expert_parallel_comm=true\n", p, 22);
    expect_line(r.out, "%s:%d: comm_overlap.delay_wgrad_compute: mapped to model.delay_wgrad_compute=true\n", p, 23);
    runf(&r, "run %s cluster.topology=dgx-h100 cluster.num_gpus=8 --dump-config", p);
    cr_assert_eq(r.status, 0, "%s", r.out);
    expect_line(r.out, "model.overlap_moe_expert_parallel_comm = true;  # %s:%d\n", p, 22);
    expect_line(r.out, "model.delay_wgrad_compute = true;  # %s:%d\n", p, 23);
    /* simulated, so no warning */
    runf(&r, "run %s cluster.topology=dgx-h100 cluster.num_gpus=8", p);
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_expect_null(strstr(r.out, "warning"), "%s", r.out);
    /* the model section's own fields are the values in effect */
    yaml_file(p, sizeof p, "own.yaml",
              SMALL_MOE("  overlap_moe_expert_parallel_comm: false\n  delay_wgrad_compute: false\n"));
    runf(&r, "run %s cluster.topology=dgx-h100 cluster.num_gpus=8 --dump-config", p);
    cr_assert_eq(r.status, 0, "%s", r.out);
    expect_line(r.out, "model.overlap_moe_expert_parallel_comm = false;  # %s:%d\n", p, 16);
    expect_line(r.out, "model.delay_wgrad_compute = false;  # %s:%d\n", p, 17);
    runf(&r, "run %s --explain-config", p);
    expect_line(r.out, "%s:%d: comm_overlap.delay_wgrad_compute: mapped to model.delay_wgrad_compute=true "
                       "(superseded by model.delay_wgrad_compute, line 17)\n", p, 25);
    remove_dir();
}

/* Each hostile file: exit 2, one line naming file:line (and the field). */
Test(bridge_yaml, hostile_files_are_refused_with_file_and_line, .timeout = 120)
{
    make_dir();
    static const struct {
        const char *name, *text, *where, *what;
    } cases[] = {
        { "utf.yaml", "model:\n  normalization: \"\xff\xfe\"\n", ":2:", "UTF-8" },
        { "deep.yaml",
          "a: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"
          "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n", ":1:", "LIMIT_YAML_DEPTH" },
        { "scalar.yaml", "model: 5\n", ":1: model:", "expected a mapping" },
        { "mapval.yaml", "model:\n  num_layers:\n    a: 1\n", ":3: model.num_layers:", "expected a value" },
        { "list.yaml", "- model\n- train\n", ":1:", "expected a mapping of sections" },
        { "empty.yaml", "", ":1:", "empty" },
        { "twodoc.yaml", "model: {}\n---\ntrain: {}\n", ":2:", "second YAML document" },
        { "nul.yaml", "model:\n  normalization: \"RMS\\0Norm\"\n", ":2: model.normalization:", "NUL" },
        { "cycle.yaml", "x: &a {y: *a}\n", ":1:", "LIMIT_YAML_DEPTH" },
        { "alias.yaml", "model: *nowhere\n", ":1:", "YAML syntax error" },
        { "type.yaml", SMALL_MODEL("  kv_channels: sixty-four\n"), ":11: model.kv_channels:", "expected an integer" },
        { "range.yaml", SMALL_MODEL("  kv_channels: -1\n"), ":11: model.kv_channels:", "[0, 1048576]" },
    };
    char p[256];
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        yaml_file(p, sizeof p, cases[k].name, cases[k].text);
        result r;
        runf(&r, "run %s cluster.topology=dgx-h100 cluster.num_gpus=8", p);
        char where[320];
        snprintf(where, sizeof where, "%s%s", p, cases[k].where);
        expect_refusal(&r, cases[k].name, where, cases[k].what);
    }
    /* an alias bomb: 10^9 fields from a few lines, stopped by the node count */
    char bomb[4096] = "a0: &a0 {x: 1, y: 2, z: 3, w: 4, v: 5, u: 6, t: 7, s: 8, r: 9, q: 10}\n";
    for (int i = 1; i < 10; i++) {
        size_t n = strlen(bomb);
        n += (size_t)snprintf(bomb + n, sizeof bomb - n, "a%d: &a%d {", i, i);
        for (int j = 0; j < 10; j++)
            n += (size_t)snprintf(bomb + n, sizeof bomb - n, "%sk%d: *a%d", j ? ", " : "", j, i - 1);
        snprintf(bomb + n, sizeof bomb - n, "}\n");
    }
    yaml_file(p, sizeof p, "bomb.yaml", bomb);
    result r;
    runf(&r, "run %s cluster.topology=dgx-h100 cluster.num_gpus=8", p);
    expect_refusal(&r, "alias bomb", "bomb.yaml:1:", "LIMIT_YAML_NODES");
    /* beyond the byte limit */
    path_in(p, sizeof p, "huge.yaml");
    FILE *f = fopen(p, "w");
    cr_assert_not_null(f);
    fputs("a: \"", f);
    for (int i = 0; i < (17 << 10); i++)
        fprintf(f, "%01023d", 0);
    fputs("\"\n", f);
    cr_assert_eq(fclose(f), 0);
    runf(&r, "run %s cluster.topology=dgx-h100 cluster.num_gpus=8", p);
    expect_refusal(&r, "huge", "huge.yaml", "LIMIT_YAML_BYTES");
    /* not a regular file: refused without blocking */
    path_in(p, sizeof p, "fifo.yaml");
    cr_assert_eq(mkfifo(p, 0600), 0);
    runf(&r, "run %s", p);
    expect_refusal(&r, "fifo", "fifo.yaml", "regular file");
    remove_dir();
}

Test(bridge_yaml, search_and_sweep_take_it_as_their_base, .timeout = 300)
{
    make_dir();
    char p[256], spec[256], out[256];
    result r;
    yaml_file(p, sizeof p, "small.yaml", SMALL_MODEL(""));
    runf(&r, "search %s cluster.topology=dgx-h100 cluster.num_gpus=8 --top 2 --jobs 1", p);
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "Llama32ModelProvider1B"), "%s", r.out);
    path_in(spec, sizeof spec, "sweep.cfg");
    write_file(spec, "sweep: {\n  base = \"small.yaml\";\n  set = [ \"cluster.topology=dgx-h100\", \"cluster.num_gpus=8\" ];\n"
                     "  vary = ( { key = \"model.tensor_model_parallel_size\"; values = [1, 2]; } );\n};\n");
    path_in(out, sizeof out, "sweep.csv");
    runf(&r, "sweep %s --out %s", spec, out);
    cr_assert_eq(r.status, 0, "%s", r.out);
    char *text = read_file(out, NULL);
    cr_expect_eq(count_lines(text), 4, "%s", text);
    cr_expect(strstr(text, "\n0,1,Llama32ModelProvider1B,dgx-h100,8,1,"), "%s", text);
    cr_expect(strstr(text, "\n1,2,Llama32ModelProvider1B,dgx-h100,8,2,"), "%s", text);
    free(text);
    remove_dir();
}
