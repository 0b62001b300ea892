/* CPU activation offloading (model.cpu_offloading): the activation peak
 * without the offloaded layers but the two in flight, Megatron's refusals
 * as exit 2 naming the key, the copies on the offload stream (in the trace
 * at bytes / host-link bandwidth), the step slower on a slow link and
 * unchanged when the copies hide behind compute, and the CSV's offload
 * column. */
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

/* ---- the copies in time ------------------------------------------------- */

static double step_s(const char *const *kv, double *exposed_offload, double *copy_s, double *layer_bytes)
{
    sim x;
    sim_run(&x, kv);
    const step_result *r = step_result_get(x.st);
    double t = r->step_time_s;
    *exposed_offload = r->exposed_s[STREAM_OFFLOAD];
    *copy_s = r->comm_s[STREAM_OFFLOAD];
    *layer_bytes = memory_layer_activation_bytes_at(&x.in, &x.s, 0);
    sim_free(&x);
    return t;
}

/* A slow link makes the step wait for the copies (they run one after the
 * other on the offload stream: the step is at least their sum); a fast
 * one hides them behind the next layer's compute: the step of no
 * offloading, to the picosecond. */
Test(cpu_offload, step_slower_on_a_slow_link_unchanged_on_a_fast_one)
{
    const char *none[] = {BASE, NULL};
    const char *slow[] = {BASE, "model.cpu_offloading=true", "model.cpu_offloading_num_layers=4",
                          "cluster.gpu.host_link_gbytes_per_s=2", NULL};
    const char *fast[] = {BASE, "model.cpu_offloading=true", "model.cpu_offloading_num_layers=4",
                          "cluster.gpu.host_link_gbytes_per_s=100000", NULL};
    double e0, c0, e1, c1, e2, c2, bytes;
    double t0 = step_s(none, &e0, &c0, &bytes);
    double t1 = step_s(slow, &e1, &c1, &bytes);
    double t2 = step_s(fast, &e2, &c2, &bytes);
    cr_expect_eq(c0, 0.0);
    /* 2 microbatches x 4 layers x (D2H + H2D) */
    double copies = 2 * 4 * 2 * bytes / 2e9;
    cr_expect(fabs(c1 - copies) <= 1e-9 * copies, "offload busy %.9g s, want %.9g s", c1, copies);
    cr_expect_gt(t1, t0);
    cr_expect_geq(t1, copies, "step %.6g s shorter than its copies %.6g s", t1, copies);
    cr_expect_gt(e1, 0.0);
    cr_expect_gt(c2, 0.0);
    cr_expect_eq(e2, 0.0, "fast link: %.9g s of copies exposed", e2);
    cr_expect(fabs(t2 - t0) <= 1e-12 * t0, "fast link: step %.12g s, without offloading %.12g s", t2, t0);
}

/* The copies in the trace: one D2H and one H2D per offloaded layer and
 * microbatch on the offload thread, each bytes / bandwidth long. */
Test(cpu_offload, copies_in_the_trace_at_bytes_over_bandwidth)
{
    const char *kv[] = {BASE, NULL};
    double e, c, bytes;
    step_s(kv, &e, &c, &bytes);
    make_dir();
    char p[256];
    path_in(p, sizeof p, "trace.json");
    result r;
    runf(&r, "run " BASE_CLI " model.cpu_offloading=true model.cpu_offloading_num_layers=3 "
             "cluster.gpu.host_link_gbytes_per_s=50 --trace '%s'", p);
    cr_assert_eq(r.status, 0, "%s", r.out);
    size_t len;
    char *text = read_file(p, &len);
    cr_assert(strstr(text, "\"args\":{\"name\":\"offload\"}"), "no offload thread in the trace");
    const double want_us = bytes / 50e9 * 1e6;
    int n[2] = {0, 0};
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        for (int d = 0; d < 2; d++) {
            char key[64];
            snprintf(key, sizeof key, "\"ph\":\"X\",\"name\":\"%s\"", d ? "offload_h2d" : "offload_d2h");
            if (!strstr(line, key) || !strstr(line, "\"pid\":0,"))
                continue;
            const char *dur = strstr(line, "\"dur\":");
            cr_assert_not_null(dur, "%s", line);
            double us = strtod(dur + 6, NULL);
            cr_expect(fabs(us - want_us) <= 1e-6 * want_us + 1e-6, "%s: %.6f us, want %.6f", line, us, want_us);
            n[d]++;
        }
    }
    cr_expect_eq(n[0], 3 * 2, "D2H copies: %d", n[0]);
    cr_expect_eq(n[1], 3 * 2, "H2D copies: %d", n[1]);
    free(text);
    remove_dir();
}

/* The CSV has an offload_s column from the stream table, after pp_s, and
 * every row as many fields as the header. */
Test(cpu_offload, csv_header_and_rows_carry_the_offload_column)
{
    for (int with = 0; with < 2; with++) {
        result r;
        runf(&r, "run " BASE_CLI " %s --format csv",
             with ? "model.cpu_offloading=true model.cpu_offloading_num_layers=3" : "");
        cr_assert_eq(r.status, 0, "%s", r.out);
        char *nl = strchr(r.out, '\n');
        cr_assert_not_null(nl);
        *nl = '\0';
        cr_assert(strstr(r.out, ",pp_s,offload_s,host_s,"), "%s", r.out);
        int col = 1, hcols = 1, rcols = 1; /* offload_s is field 1 + the commas before ",offload_s," */
        for (const char *q = r.out; q < strstr(r.out, ",offload_s,"); q++)
            col += *q == ',';
        for (const char *q = r.out; *q; q++)
            hcols += *q == ',';
        const char *row = nl + 1, *field = row;
        for (const char *q = row; *q && *q != '\n'; q++)
            if (*q == ',' && ++rcols == col + 1)
                field = q + 1;
        cr_expect_eq(rcols, hcols, "header %d fields, row %d", hcols, rcols);
        double v = strtod(field, NULL);
        if (with)
            cr_expect_gt(v, 0.0, "offload_s %s", field);
        else
            cr_expect_eq(v, 0.0, "offload_s %s", field);
    }
}
