/* Hybrid Mamba models: model.hybrid_layer_pattern (Megatron Core's
 * symbols), the Mamba-2 mixer's TP/CP rules and parameters, and that a
 * pattern of attention and MLP layers alone is today's transformer. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_run.h"
#include "kerneltable.h"
#include "memory.h"
#include "model.h"
#include "pattern_parse.h"
#include "sim_run.h"

#define H100 "cluster.topology=dgx-h100 "
#define NH8B "model.name=nemotron-h-8b " H100 "cluster.num_gpus=8 train.global_batch_size=8 "

Test(hybrid, every_symbol_is_one_layer)
{
    model_spec m;
    parse_ok(&m, "M*-E");
    cr_assert_eq(m.num_layers, 4);
    cr_assert(m.hybrid);
    cr_assert_eq(m.hybrid_segments, 0);
    cr_assert_eq(m.layers[0].mixer, MODEL_MIXER_MAMBA);
    cr_assert_eq(m.layers[0].mlp, MODEL_MLP_NONE);
    cr_assert_eq(m.layers[1].mixer, MODEL_MIXER_ATTENTION);
    cr_assert_eq(m.layers[1].mlp, MODEL_MLP_NONE);
    cr_assert_eq(m.layers[2].mixer, MODEL_MIXER_NONE);
    cr_assert_eq(m.layers[2].mlp, MODEL_MLP_DENSE);
    cr_assert_eq(m.layers[3].mixer, MODEL_MIXER_NONE);
    cr_assert_eq(m.layers[3].mlp, MODEL_MLP_MOE);
}

Test(hybrid, pipes_give_segments)
{
    model_spec m;
    parse_ok(&m, "M-|M*-|-");
    cr_assert_eq(m.num_layers, 6);
    cr_assert_eq(m.hybrid_segments, 3);
    cr_assert_eq(m.hybrid_segment_layers[0], 2);
    cr_assert_eq(m.hybrid_segment_layers[1], 3);
    cr_assert_eq(m.hybrid_segment_layers[2], 1);
}

Test(hybrid, unmodeled_and_unknown_symbols_name_symbol_and_position)
{
    parse_fails("M-G-", "'G' (Gated DeltaNet) at position 2");
    parse_fails("MD", "'D' (DSA attention) at position 1");
    parse_fails("+M", "'+' (MLA) at position 0");
    parse_fails("M-/*|-", "'|' at position 4 is inside an MTP part");
    parse_fails("M-x", "unknown symbol 'x' at position 2");
    parse_fails("M- ", "unknown symbol ' ' at position 2");
    parse_fails("", "has no layers");
    parse_fails("||", "has no layers");
}

Test(hybrid, too_many_layers_is_refused)
{
    char big[MODEL_MAX_LAYERS + 2];
    memset(big, 'M', MODEL_MAX_LAYERS + 1);
    big[MODEL_MAX_LAYERS + 1] = '\0';
    parse_fails(big, "more than 1024 layers");
    big[MODEL_MAX_LAYERS] = '\0';
    model_spec m;
    parse_ok(&m, big);
    cr_assert_eq(m.num_layers, MODEL_MAX_LAYERS);
    static char pipes[4 * MODEL_MAX_LAYERS];
    memset(pipes, '|', sizeof pipes - 1);
    pipes[0] = 'M';
    parse_fails(pipes, "more than 1026 pipeline segments ('|' at position 1026)");
}

Test(hybrid, cli_errors_name_the_key)
{
    static const struct {
        const char *args, *want;
    } cases[] = {
        { "run " NH8B "model.num_layers=50", "model.num_layers: is 50 but model.hybrid_layer_pattern has 52 layers" },
        { "run " NH8B "'model.hybrid_layer_pattern=\"M-G\"'", "model.hybrid_layer_pattern: symbol 'G' (Gated DeltaNet) at position 2" },
        { "run " NH8B "'model.hybrid_override_pattern=\"M-\"'", "model.hybrid_layer_pattern: model.hybrid_override_pattern is already set" },
        { "run " NH8B "'model.hybrid_layer_pattern=\"ME\"'", "layer 1 is MoE (E) but model.num_moe_experts is 0" },
        { "run " NH8B "model.tensor_model_parallel_size=8 model.mamba_num_heads=6 model.mamba_num_groups=2",
          "model.mamba_num_heads: 6 Mamba heads must be divisible by tensor_model_parallel_size (8)" },
        { "run " NH8B "model.tensor_model_parallel_size=4 model.mamba_num_heads=8 model.mamba_num_groups=2",
          "model.mamba_num_groups: 2 Mamba groups must be divisible by tensor_model_parallel_size (4)" },
        { "run " NH8B "model.mamba_num_heads=100", "model.mamba_num_groups: mamba_num_heads (100) must be divisible" },
        { "run " NH8B "model.context_parallel_size=8 model.mamba_num_heads=12 model.mamba_num_groups=4",
          "model.context_parallel_size: the Mamba heads of a TP rank (mamba_num_heads / tensor_model_parallel_size "
          "= 12) must be divisible by context_parallel_size (8)" },
        { "run " NH8B "model.pipeline_model_parallel_size=2 "
          "'model.hybrid_layer_pattern=\"M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-|M-M-M-M-M*-M-M-|M-M-M-M-\"'",
          "model.hybrid_layer_pattern: has 3 pipeline segments ('|'), pipeline x virtual size is 2" },
        { "run " NH8B "model.mtp_num_layers=1", "model.mtp_num_layers: a hybrid model's MTP layers need their symbols" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        result r;
        run(&r, cases[i].args);
        cr_assert_eq(r.status, 2, "%s: status %d\n%s", cases[i].args, r.status, r.out);
        cr_assert(strstr(r.out, cases[i].want), "%s: output lacks '%s':\n%s", cases[i].args, cases[i].want, r.out);
        cr_assert(strchr(r.out, '\n') == r.out + strlen(r.out) - 1, "%s: one line:\n%s", cases[i].args, r.out);
    }
}

static void load_model(const char *name, sim *x)
{
    char assign[128];
    snprintf(assign, sizeof assign, "model.name=%s", name);
    const char *kv[] = { assign, "cluster.topology=dgx-h100", "cluster.num_gpus=8", "train.global_batch_size=8",
                         NULL };
    sim_run(x, kv);
}

/* megatron-features.md B.5: h(2 d_in + 2GN + H) + (d_in + 2GN) x 4 (+ bias)
 * + 3H + d_in + d_in h, written out for Nemotron-H 8B (h 4096, H 128 x P 64
 * = d_in 8192, G 8 x N 128): 76021760 + 51200 + 384 + 8192 + 33554432. */
Test(hybrid, mamba_layer_parameters_match_the_closed_form)
{
    sim x;
    load_model("nemotron-h-8b", &x);
    const model_spec *m = &x.in.model;
    cr_assert_eq(m->num_layers, 52);
    cr_assert_eq(m->layers[0].mixer, MODEL_MIXER_MAMBA);
    model_layer_params p;
    model_layer_param_counts_at(m, 0, &p);
    cr_assert_float_eq(p.mamba, 109635968.0, 0.5);
    cr_assert_float_eq(p.attention + p.dense_mlp + p.routed_experts + p.shared_experts, 0.0, 0.0);
    cr_assert_float_eq(p.replicated, 4096.0, 0.0); /* its RMSNorm */
    model_layer_param_counts_at(m, 1, &p); /* '-' */
    cr_assert_float_eq(p.mamba + p.attention, 0.0, 0.0);
    cr_assert_float_eq(p.dense_mlp, 2.0 * 4096 * 21504, 0.5);
    /* the whole model: 8.1e9 (Nemotron-H 8B) */
    double n = model_total_params(m, 1);
    cr_assert(n > 7.9e9 && n < 8.3e9, "%.4g parameters", n);
    /* TP shards the mixer */
    double d1, e1;
    memory_layer_params(&x.in, &x.s, 0, &d1, &e1);
    cr_assert_float_eq(d1, 109635968.0 + 4096.0, 0.5); /* TP 1 */
    step_destroy(x.st);
    cfg_destroy(x.cfg);
}

/* The JSON report of a run, or fails. */
static void json_of(const char *args, result *r)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "run %s --format json", args);
    run(r, cmd);
    cr_assert_eq(r->status, 0, "%s:\n%s", args, r->out);
}

/* '*' + '-' per transformer layer: the same ops in the same order, the
 * same parameters and activations, so the whole report is the same
 * (Bridge's hybrid FLOPs equal Megatron's for attention + MLP). */
Test(hybrid, attention_and_mlp_pattern_is_the_transformer)
{
    char pattern[160] = "", pipes[170] = "";
    for (int i = 0; i < 32; i++)
        strcat(pattern, "*-");
    for (int i = 0; i < 32; i++)
        strcat(pipes, i == 16 ? "|*-" : "*-");
    static const char *const layouts[] = {
        "",
        "model.tensor_model_parallel_size=2 model.sequence_parallel=true",
        "model.tensor_model_parallel_size=2 model.sequence_parallel=true model.pipeline_model_parallel_size=2",
        "model.recompute_granularity=selective",
    };
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) {
        static result a, b;
        char base[1024], hyb[2048];
        snprintf(base, sizeof base, "model.name=llama3-8b " H100 "cluster.num_gpus=8 train.global_batch_size=16 %s",
                 layouts[i]);
        snprintf(hyb, sizeof hyb, "%s model.num_layers=64 'model.hybrid_layer_pattern=\"%s\"'", base, pattern);
        json_of(base, &a);
        json_of(hyb, &b);
        cr_assert_str_eq(a.out, b.out, "%s", layouts[i]);
    }
    /* '|' where the even split would cut: the same */
    static result a, b;
    char base[1024], hyb[2048];
    snprintf(base, sizeof base,
             "model.name=llama3-8b " H100 "cluster.num_gpus=8 train.global_batch_size=16 model.pipeline_model_parallel_size=2");
    snprintf(hyb, sizeof hyb, "%s model.num_layers=64 'model.hybrid_layer_pattern=\"%s\"'", base, pipes);
    json_of(base, &a);
    json_of(hyb, &b);
    cr_assert_str_eq(a.out, b.out);
}

/* '|' sets the split: moving a boundary moves layers between stages, and
 * with the virtual size unset the segments give it (segments / PP). */
Test(hybrid, pipes_split_the_stages_and_give_the_virtual_size)
{
    result r;
    json_of(NH8B "model.pipeline_model_parallel_size=2 model.overlap_p2p_comm=true "
            "'model.hybrid_layer_pattern=\"M-M-M-M*-M-M-|M-M-M*-M-M-M-|M-M-M*-M-M-M-M-M*|-M-M-M-M-M-\"'",
            &r);
    cr_assert(strstr(r.out, "\"vp\": 2"), "%s", r.out);
    cr_assert(strstr(r.out, "\"pp\": 2"), "%s", r.out);
}

Test(hybrid, nemotron_h_56b_runs_on_64_h100)
{
    result r;
    run(&r, "run model.name=nemotron-h-56b " H100 "cluster.num_gpus=64 model.tensor_model_parallel_size=8 "
            "model.sequence_parallel=true train.global_batch_size=64");
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_assert(strstr(r.out, "step time"), "%s", r.out);
}

static double step_time(const char *args)
{
    result r;
    json_of(args, &r);
    const char *p = strstr(r.out, "\"step_time_s\": ");
    cr_assert_not_null(p, "%s", r.out);
    return strtod(p + strlen("\"step_time_s\": "), NULL);
}

/* The SSD scan is its own kernel on the true shapes: the chunk length
 * enters only its flops (and Bridge's FLOPs do not see it). */
Test(hybrid, ssd_scan_grows_with_the_chunk)
{
    double t128 = step_time(NH8B "model.mamba_chunk_size=128");
    double t256 = step_time(NH8B "model.mamba_chunk_size=256");
    cr_assert(t256 > t128 * 1.001, "chunk 256: %.6f s, 128: %.6f s", t256, t128);
}

/* Nemotron-3 Nano: Mamba, attention and MoE layers; 31.6e9 parameters
 * (NVIDIA's model card: 31.6B total). */
Test(hybrid, nemotron_3_nano_runs_with_experts)
{
    sim x;
    const char *kv[] = { "model.name=nemotron-3-nano", "cluster.topology=dgx-h100", "cluster.num_gpus=16",
                         "model.expert_model_parallel_size=8", "train.global_batch_size=16", NULL };
    sim_run(&x, kv);
    const model_spec *m = &x.in.model;
    cr_assert_eq(model_num_moe_layers(m), 23);
    double n = model_total_params(m, 1);
    cr_assert(n > 31.0e9 && n < 32.2e9, "%.4g parameters", n);
    step_destroy(x.st);
    cfg_destroy(x.cfg);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s", path);
    fputs(text, f);
    fclose(f);
}

/* A kernel table's ssd entry: a group with an efficiency in (0, 1]. */
Test(hybrid, kernel_table_ssd_entry_is_checked)
{
    char dir[] = "/tmp/parsim-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    static const struct {
        const char *text, *want;
    } cases[] = {
        { "kernels: { ssd = 0.14; };\n", "kernels.ssd: must be a group" },
        { "kernels: { ssd = { efficiency = 1.5; src = \"x\"; }; };\n", "ssd.efficiency" },
        { "kernels: { ssd = { src = \"x\"; }; };\n", "ssd.efficiency" },
    };
    char path[600];
    snprintf(path, sizeof path, "%s/k.cfg", dir);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_file(path, cases[i].text);
        kernel_table t;
        sim_err err;
        sim_err_clear(&err);
        cr_assert_eq(kerneltable_load(path, &t, &err), SIM_EINVAL, "%s", cases[i].text);
        char msg[1024];
        sim_err_format(&err, msg, sizeof msg);
        cr_assert(strstr(msg, cases[i].want) && strstr(msg, "k.cfg"), "%s: %s", cases[i].text, msg);
    }
    write_file(path, "kernels: { ssd = { efficiency = 0.2; src = \"x\"; }; };\n");
    kernel_table t;
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(kerneltable_load(path, &t, &err), SIM_OK, "%s", err.msg);
    cr_assert_float_eq(t.ssd_efficiency, 0.2, 1e-12);
    remove(path);
    rmdir(dir);
}

/* Bridge's hybrid FLOPs (megatron-features.md B.4) with d_in = 2h: the
 * Nemotron-3 Nano Mamba layer is 102.9M forward flops a token (B.4's own
 * figure, against 81.1M for the true shapes); the rest of the model by
 * the per-layer formulas. */
Test(hybrid, bridge_flops_count_mamba_with_d_inner_2h)
{
    sim x;
    load_model("nemotron-3-nano", &x);
    const model_spec *m = &x.in.model;
    double s = 8192, h = 2688, T = s, V = 131072; /* one sequence; V already a multiple of 128 */
    double q = 32 * 128, kv = 2 * 128;
    double attn = 4 * T * h * (q + kv) + 2 * s * s * q;
    double moe = 4 * T * h * 1856 * 6 + 4 * T * h * 3712;
    double rest = 6 * attn + 23 * moe + 2 * T * h * V;
    double mamba_per_token = (model_flops_per_step(m, 1, 1) / 3.0 - rest) / (23 * T);
    cr_assert_float_eq(mamba_per_token, 102875136.0, 1.0, "%.1f", mamba_per_token);
    step_destroy(x.st);
    cfg_destroy(x.cfg);
}

/* Megatron Bridge's FLOPs per token of Nemotron-3 Nano at sequence 8192:
 * 22.28 GFLOP, the measured TFLOP/s over tokens/s of every published Nano
 * run (bench/validation/public.csv, e.g. mbridge-021/022). */
Test(hybrid, nemotron_3_nano_flops_per_token_are_bridges)
{
    const char *const kv[] = { "model.name=nemotron-3-nano", "cluster.topology=dgx-h100", "cluster.num_gpus=8",
                               "model.expert_model_parallel_size=8", "model.seq_length=8192",
                               "train.global_batch_size=8", NULL };
    sim x;
    sim_run(&x, kv);
    double per_token = step_result_get(x.st)->model_flops / (8.0 * 8192.0);
    cr_assert(fabs(per_token / 22.28e9 - 1.0) < 5e-4, "%.4f GFLOP per token", per_token / 1e9);
    sim_free(&x);
}

/* A preset resolves with num_layers the length of its pattern (§B.2's
 * string, written out here) and each layer the kind its symbol names, and
 * the layout in args runs, fitting in HBM. */
static void preset_matches_and_runs(const char *name, const char *pattern, const char *args)
{
    sim x;
    load_model(name, &x);
    const model_spec *m = &x.in.model;
    cr_assert_eq(m->num_layers, (int)strlen(pattern), "%s: %d layers", name, m->num_layers);
    for (int i = 0; i < m->num_layers; i++) {
        const model_layer *l = &m->layers[i];
        int want_mixer = pattern[i] == 'M' ? MODEL_MIXER_MAMBA
                         : pattern[i] == '*' ? MODEL_MIXER_ATTENTION : MODEL_MIXER_NONE;
        int want_mlp = pattern[i] == '-' ? MODEL_MLP_DENSE : MODEL_MLP_NONE;
        cr_assert(l->mixer == want_mixer && l->mlp == want_mlp, "%s: layer %d is not '%c'", name, i, pattern[i]);
    }
    step_destroy(x.st);
    cfg_destroy(x.cfg);

    result r;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "run model.name=%s " H100 "%s", name, args);
    run(&r, cmd);
    cr_assert_eq(r.status, 0, "%s:\n%s", cmd, r.out);
    cr_assert(strstr(r.out, "step time"), "%s", r.out);
    cr_assert_null(strstr(r.out, "DOES NOT FIT"), "%s", r.out);
}

Test(hybrid, nemotron_h_4b_preset)
{
    preset_matches_and_runs("nemotron-h-4b", "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-",
                            "cluster.num_gpus=8 model.tensor_model_parallel_size=2 train.global_batch_size=16");
}

Test(hybrid, nemotron_h_47b_preset)
{
    preset_matches_and_runs("nemotron-h-47b",
                            "M-M-M-M-M-M-M-M-M*-M-M-M-M-M-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-M-M---MM---M-M*-"
                            "M-M-M-M-M-",
                            "cluster.num_gpus=16 model.tensor_model_parallel_size=8 model.sequence_parallel=true "
                            "model.pipeline_model_parallel_size=2 train.global_batch_size=16");
}

/* Sequence 131072 without CP (not modelled with Mamba layers): TP 8 and
 * full recompute fit it. */
#define NANO_V2_LAYOUT                                                                                        \
    "cluster.num_gpus=8 model.tensor_model_parallel_size=8 model.sequence_parallel=true "                   \
    "model.recompute_granularity=full train.global_batch_size=8"

Test(hybrid, nemotron_nano_v2_9b_preset)
{
    preset_matches_and_runs("nemotron-nano-v2-9b", "M-M-M-MM-M-M-M*-M-M-M*-M-M-M-M*-M-M-M-M*-M-MM-M-M-M-M-M-",
                            NANO_V2_LAYOUT);
}

Test(hybrid, nemotron_nano_v2_12b_preset)
{
    preset_matches_and_runs("nemotron-nano-v2-12b",
                            "M-M-M-M*-M-M-M-M*-M-M-M-M*-M-M-M-M*-M-M-M-M*-M-M-M-M*-M-M-M-M-", NANO_V2_LAYOUT);
}

Test(hybrid, nemotron_3_nano_4b_preset)
{
    preset_matches_and_runs("nemotron-3-nano-4b", "M-M-M-MM-M-M*-M-M*-M-M-M*-M-M-MM*-MMM-M-M-",
                            "cluster.num_gpus=8 model.tensor_model_parallel_size=2 train.global_batch_size=16");
}

/* The SSD scan's rate is a kernel-table figure: a topology whose table has
 * no ssd entry (a scratch copy of the H100 one without it) refuses Mamba
 * layers, naming the key. */
Test(hybrid, mamba_layers_need_the_tables_ssd_entry)
{
    char dir[] = "/tmp/parsim-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "grep -v '^  ssd = ' '%s/kernels/h100.cfg' > '%s/h100-nossd.cfg'", PARSIM_SOURCE_DIR,
             dir);
    cr_assert_eq(system(cmd), 0);
    char args[1024];
    snprintf(args, sizeof args,
             "run model.name=nemotron-h-8b cluster.topology=dgx-h100 cluster.num_gpus=8 "
             "train.global_batch_size=8 cluster.compute.kernels='%s/h100-nossd.cfg'", dir);
    result r;
    run(&r, args);
    expect_refusal(&r, "no ssd entry", "cluster.compute.kernels", "ssd");
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

/* Whether a model has Mamba mixers counts its MTP depths too. */
Test(hybrid, mamba_layers_in_the_main_pattern_or_an_mtp_depth)
{
    model_spec m;
    parse_ok(&m, "*-*-");
    cr_expect_not(model_has_mamba(&m));
    parse_ok(&m, "*-M-");
    cr_expect(model_has_mamba(&m));
    parse_ok(&m, "*-*-/M-");
    cr_expect(model_has_mamba(&m), "a Mamba layer in the MTP depth only");
}
