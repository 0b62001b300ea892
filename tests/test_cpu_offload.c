/* CPU activation offloading (model.cpu_offloading): the activation peak
 * without the offloaded layers but the two in flight, Megatron's refusals
 * as exit 2 naming the key, a Megatron Bridge config's fields applied. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli_run.h"
#include "memory.h"
#include "scratch.h"
#include "sim_run.h"

/* A small dense model with uniform layers, PP 1 (offloading's only
 * layout): 2 microbatches of 6 layers. */
#define BASE "model.name=llama3-8b", "model.num_layers=6", "model.seq_length=4096", "cluster.topology=dgx-h100", \
             "cluster.num_gpus=8", "train.global_batch_size=16", "train.micro_batch_size=1"
#define BASE_CLI "model.name=llama3-8b model.num_layers=6 model.seq_length=4096 cluster.topology=dgx-h100 " \
                 "cluster.num_gpus=8 train.global_batch_size=16 train.micro_batch_size=1"

static double peak_act(const char *const *kv, double *layer_bytes)
{
    sim x;
    sim_run(&x, kv);
    double act = step_result_get(x.st)->stages[0].activations_peak_bytes;
    *layer_bytes = memory_layer_activation_bytes_at(&x.in, &x.s, 0);
    sim_free(&x);
    return act;
}

/* The offloaded layers leave the GPU except two in flight: N offloaded
 * layers save (N - 2) layers' activations, none for N <= 2. */
Test(cpu_offload, activation_peak_drops_by_the_offloaded_layers_but_two)
{
    const char *none[] = {BASE, NULL};
    double layer, layer2;
    double base = peak_act(none, &layer);
    cr_assert_gt(layer, 0);
    for (int n = 0; n <= 5; n++) {
        char num[64];
        snprintf(num, sizeof num, "model.cpu_offloading_num_layers=%d", n);
        const char *kv[] = {BASE, "model.cpu_offloading=true", num, NULL};
        double act = peak_act(kv, &layer2);
        double want = base - (n > 2 ? n - 2 : 0) * layer;
        cr_expect(fabs(act - want) <= 1.0 + 1e-12 * base, "N=%d: peak %.0f, want %.0f (base %.0f, layer %.0f)", n,
                  act, want, base, layer);
    }
    /* activations not offloaded: nothing leaves */
    const char *off[] = {BASE, "model.cpu_offloading=true", "model.cpu_offloading_num_layers=5",
                         "model.cpu_offloading_activations=false", NULL};
    cr_expect_eq(peak_act(off, &layer2), base);
}

/* Megatron's rules (and parsim's limits) are bad input naming the key. */
Test(cpu_offload, refusals_are_exit_2_naming_the_key)
{
    static const struct {
        const char *args, *key, *rule;
    } cases[] = {
        {"model.cpu_offloading_num_layers=6", "model.cpu_offloading_num_layers", "less than model.num_layers (6)"},
        {"model.cpu_offloading_num_layers=3 model.pipeline_model_parallel_size=2", "model.cpu_offloading",
         "pipeline parallelism"},
        {"model.cpu_offloading_num_layers=3 model.recompute_granularity=full", "model.cpu_offloading",
         "activation recompute"},
        {"model.cpu_offloading_num_layers=3 model.recompute_granularity=selective", "model.cpu_offloading",
         "activation recompute"},
        {"model.cpu_offloading_num_layers=3 model.cuda_graph_impl=local", "model.cpu_offloading", "CUDA graphs"},
        {"model.cpu_offloading_num_layers=3 model.cuda_graph_impl=full_iteration", "model.cpu_offloading",
         "CUDA graphs"},
        {"model.cpu_offloading_num_layers=3 model.cpu_offloading_weights=true", "model.cpu_offloading_weights",
         "not modeled"},
        {"model.cpu_offloading_num_layers=3 cluster.gpu.host_link_gbytes_per_s=0",
         "cluster.gpu.host_link_gbytes_per_s", "needed for CPU offloading"},
        {"model.cpu_offloading_num_layers=-1", "model.cpu_offloading_num_layers", NULL},
        {"model.cpu_offloading=maybe", "model.cpu_offloading", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        result r;
        char args[1024];
        snprintf(args, sizeof args, "run " BASE_CLI " model.cpu_offloading=true %s", cases[i].args);
        run(&r, args);
        expect_refusal(&r, cases[i].args, cases[i].key, cases[i].rule);
    }
    /* without cpu_offloading the other keys are not checked, as in Megatron */
    result r;
    run(&r, "run " BASE_CLI " model.cpu_offloading_num_layers=3 model.pipeline_model_parallel_size=2");
    cr_expect_eq(r.status, 0, "%s", r.out);
}

/* The first number after "key": in JSON text. */
static double json_num(const char *text, const char *key)
{
    char k[96];
    snprintf(k, sizeof k, "\"%s\"", key);
    const char *at = strstr(text, k);
    cr_assert_not_null(at, "no %s in %s", key, text);
    at = strchr(at, ':');
    cr_assert_not_null(at);
    return strtod(at + 1, NULL);
}

/* A Megatron Bridge config's offloading is applied, not warned about. */
Test(cpu_offload, bridge_config_fields_are_applied)
{
    make_dir();
    char p[256];
    path_in(p, sizeof p, "offload.yaml");
    write_file(p, "_target_: megatron.bridge.training.config.ConfigContainer\nmodel:\n"
                  "  _target_: megatron.bridge.models.llama.llama_provider.Llama32ModelProvider1B\n"
                  "  num_layers: 6\n  hidden_size: 2048\n  ffn_hidden_size: 8192\n  num_attention_heads: 32\n"
                  "  num_query_groups: 8\n  seq_length: 4096\n  vocab_size: 128256\n"
                  "  cpu_offloading: true\n  cpu_offloading_num_layers: 5\n  cpu_offloading_weights: false\n"
                  "train:\n  global_batch_size: 16\n  micro_batch_size: 1\n");
    result with, without;
    runf(&with, "run %s cluster.topology=dgx-h100 cluster.num_gpus=8 --format json", p);
    runf(&without, "run %s cluster.topology=dgx-h100 cluster.num_gpus=8 model.cpu_offloading=false --format json", p);
    cr_assert_eq(with.status, 0, "%s", with.out);
    cr_assert_eq(without.status, 0, "%s", without.out);
    cr_expect_null(strstr(with.out, "not modeled"), "%s", with.out);
    cr_expect_lt(json_num(with.out, "activations_peak_bytes"), json_num(without.out, "activations_peak_bytes"));
    remove_dir();
}

