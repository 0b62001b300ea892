#define _DEFAULT_SOURCE /* mkstemp */
/* parsim validate: rows of a small fixture (tests/data/validate_rows.csv)
 * predicted and checked against the same runs set up by hand, the FLOP
 * conventions against their closed forms, skip reasons, assumed settings,
 * the error quantiles against a hand computation, and the CLI. */
#include <criterion/criterion.h>

#include "cli_run.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "config.h"
#include "csv.h"
#include "model.h"
#include "step.h"
#include "validate.h"

#define FIXTURE PARSIM_SOURCE_DIR "/tests/data/validate_rows.csv"

static csv_table table;
static vcase cases[32];

/* The cases of a fixture into table and cases. */
static void load_from(const char *path)
{
    sim_err err;
    cr_assert_eq(csv_read_file(path, &table, &err), SIM_OK, "%s", err.msg);
    cr_assert_eq(validate_check_columns(&table, path, &err), SIM_OK, "%s", err.msg);
    cr_assert_leq(table.nrows, 32);
    for (size_t r = 0; r < table.nrows; r++)
        validate_case(&table, r, PARSIM_SOURCE_DIR, &cases[r]);
    cr_assert_eq(validate_number_runs(cases, table.nrows), SIM_OK);
}

static void load(void)
{
    load_from(FIXTURE);
}

static void unload(void)
{
    csv_free(&table);
}

static const vcase *by_id(const char *id)
{
    for (size_t r = 0; r < table.nrows; r++)
        if (!strcmp(cases[r].id, id))
            return &cases[r];
    cr_assert_fail("no row %s in the fixture", id);
    return NULL;
}

static vpred predict(const char *id)
{
    vpred p;
    cr_assert_eq(validate_predict(by_id(id), PARSIM_SOURCE_DIR, NULL, &p), SIM_OK);
    return p;
}

/* The same run set up key by key, independently of validate's mapping. */
typedef struct handrun {
    run_inputs in;
    strategy_t s;
    double step_time_s, peak_bytes;
} handrun;

static void hand(const char *const *kv, handrun *h)
{
    sim_err err;
    cfg_t *cfg = cfg_create(PARSIM_SOURCE_DIR);
    cr_assert_not_null(cfg);
    for (; *kv; kv++)
        cr_assert_eq(cfg_set_override(cfg, *kv, &err), SIM_OK, "%s: %s", *kv, err.msg);
    cr_assert_eq(cfg_resolve_all(cfg, &h->in, &h->s, &err), SIM_OK, "%s", err.msg);
    step_t *st;
    cr_assert_eq(step_run(&st, &h->in, &h->s, &err), SIM_OK, "%s", err.msg);
    h->step_time_s = step_result_get(st)->step_time_s;
    h->peak_bytes = step_result_get(st)->peak_bytes;
    step_destroy(st);
    cfg_destroy(cfg);
}

static const char *const llama16[] = {
    "model.name=llama3-8b", "cluster.topology=dgx-h100", "cluster.num_gpus=16",
    "model.seq_length=4096", "train.global_batch_size=32", "train.micro_batch_size=1",
    "model.tensor_model_parallel_size=2", "model.pipeline_model_parallel_size=2",
    "model.sequence_parallel=true", "mixed_precision=bf16", "ddp.use_distributed_optimizer=true",
    NULL,
};

#define REL_EQ(a, b, tol) (fabs((a) - (b)) <= (tol) * fabs(b))

TestSuite(validate, .init = load, .fini = unload);

Test(validate, stated_row_runs_as_written_without_assumptions)
{
    const vcase *c = by_id("t-001");
    cr_assert_str_empty(c->skip);
    cr_assert_eq(c->n_assumed, 0, "assumed: %s", c->assumed);
    handrun h;
    hand(llama16, &h);
    vpred p = predict("t-001");
    cr_assert(p.ok, "%s", p.skip);
    cr_assert(REL_EQ(p.value, h.step_time_s, 1e-12), "%.9g vs %.9g", p.value, h.step_time_s);
    cr_assert(REL_EQ(p.ape, 100.0 * fabs(h.step_time_s - 1.0), 1e-9));
}

Test(validate, throughput_and_flop_conventions)
{
    handrun h;
    hand(llama16, &h);
    double t = h.step_time_s, world = 16, B = 32, s = 4096;
    /* tokens/s per GPU */
    vpred p = predict("t-002");
    cr_assert(REL_EQ(p.value, B * s / t / world, 1e-9));
    /* megatron: model_flops_per_step */
    double F = model_flops_per_step(&h.in.model, 32, 2);
    p = predict("t-003");
    cr_assert(REL_EQ(p.value, F / t / world / 1e12, 1e-9), "%.9g", p.value);
    /* nemo-full-attention: the causal core term counted again; for
     * Llama 3 8B (no MLA) Megatron's core term is 3*2*(a*d) * B*s^2 * L
     * with the causal half, so full attention adds the same again */
    double a = 32, d = 128, L = 32;
    double full = F + 6.0 * a * d * B * s * s * L;
    p = predict("t-004");
    cr_assert(REL_EQ(p.value, full / t / world / 1e12, 1e-9), "%.9g vs %.9g", p.value,
              full / t / world / 1e12);
    cr_assert(REL_EQ(validate_conv_flops(FC_NEMO_FULL, &h.in, 2), full, 1e-12));
}

Test(validate, sc21_hardware_flops)
{
    const char *const kv[] = {
        "model.name=megatron-gpt-18b-sc21", "cluster.topology=dgx-a100", "cluster.num_gpus=16",
        "model.seq_length=2048", "train.global_batch_size=64", "train.micro_batch_size=4",
        "model.tensor_model_parallel_size=4", "model.pipeline_model_parallel_size=2",
        "model.recompute_granularity=full", "mixed_precision=fp16", "model.vocab_size=51200", NULL,
    };
    handrun h;
    hand(kv, &h);
    double B = 64, s = 2048, L = 40, hd = 6144, V = 51200;
    double F = 96.0 * B * s * L * hd * hd * (1.0 + s / (6.0 * hd) + V / (16.0 * L * hd));
    vpred p = predict("t-005");
    cr_assert(p.ok, "%s", p.skip);
    cr_assert(REL_EQ(p.value, F / h.step_time_s / 16 / 1e12, 1e-9), "%.9g vs %.9g", p.value,
              F / h.step_time_s / 16 / 1e12);
    /* for a classic GPT with full recompute, "hardware" is the same count */
    cr_assert(REL_EQ(validate_conv_flops(FC_HARDWARE, &h.in, 4), F, 1e-9), "%.9g vs %.9g",
              validate_conv_flops(FC_HARDWARE, &h.in, 4), F);
}

Test(validate, mfu_uses_the_peak_of_the_precision)
{
    const char *const kv[] = {
        "model.name=llama3-8b", "cluster.topology=dgx-h100", "cluster.num_gpus=8",
        "model.seq_length=4096", "train.global_batch_size=16", "mixed_precision=fp8",
        "ddp.use_distributed_optimizer=true", NULL,
    };
    handrun h;
    hand(kv, &h);
    double F = model_flops_per_step(&h.in.model, 16, 1);
    vpred p = predict("t-006");
    cr_assert(REL_EQ(p.value, F / h.step_time_s / 8 / 1979e12, 1e-9), "%.9g", p.value);
    cr_assert(by_id("t-006")->feat[VFEAT_FP8]);
}

Test(validate, memory_in_gib_when_the_notes_say_so)
{
    const char *const kv[] = {
        "model.name=llama3-8b", "cluster.topology=dgx-h100", "cluster.num_gpus=8",
        "model.seq_length=4096", "train.global_batch_size=16", "mixed_precision=bf16",
        "ddp.use_distributed_optimizer=true", NULL,
    };
    handrun h;
    hand(kv, &h);
    vpred p = predict("t-007");
    cr_assert(p.ok, "%s", p.skip);
    cr_assert(REL_EQ(p.value, h.peak_bytes / 1073741824.0, 1e-12));
    cr_assert_eq(by_id("t-007")->family, VFAM_MEMORY);
}

Test(validate, skipped_rows_say_why)
{
    cr_assert(strstr(by_id("t-009")->skip, "gpu_type 'Z900'"), "%s", by_id("t-009")->skip);
    cr_assert(strstr(by_id("t-011")->skip, "flop_convention unknown"), "%s",
              by_id("t-011")->skip);
    /* a strategy Megatron rejects: 32 heads over TP 3 */
    vpred p = predict("t-010");
    cr_assert(!p.ok);
    cr_assert(strstr(p.skip, "num_attention_heads (32)") && strstr(p.skip, "tensor_model_parallel_size"),
              "%s", p.skip);
    /* a skipped case predicts nothing */
    p = predict("t-009");
    cr_assert(!p.ok);
    cr_assert(isnan(p.value));
}

/* LoRA rows run with frozen base weights and the source's adapters (the
 * fixture's prefix is not NeMo's: Megatron Bridge's four targets), and
 * are faster than the same run fully fine-tuned. */
Test(validate, lora_rows_run_with_adapters)
{
    const vcase *c = by_id("t-008");
    cr_assert_str_empty(c->skip, "%s", c->skip);
    bool lora = false, qkv_only = false;
    for (int i = 0; i < c->n_over; i++) {
        lora |= !strcmp(c->over[i], "peft.scheme=lora");
        qkv_only |= !strcmp(c->over[i], "peft.target_modules=linear_qkv");
    }
    cr_assert(lora && !qkv_only);
    cr_assert(strstr(c->assumed, "Megatron Bridge LoRA defaults"), "%s", c->assumed);
    vpred p = predict("t-008");
    cr_assert(p.ok, "%s", p.skip);
    vcase full = *c;
    int n = 0;
    for (int i = 0; i < c->n_over; i++)
        if (strcmp(c->over[i], "peft.scheme=lora"))
            memcpy(full.over[n++], c->over[i], sizeof full.over[0]);
    full.n_over = n;
    vpred q;
    cr_assert_eq(validate_predict(&full, PARSIM_SOURCE_DIR, NULL, &q), SIM_OK);
    cr_assert(q.ok, "%s", q.skip);
    cr_assert_gt(p.value, 1.15 * q.value, "LoRA %g tokens/s vs full %g", p.value, q.value);
}

Test(validate, empty_cells_are_assumed_and_counted)
{
    const vcase *c = by_id("t-012");
    cr_assert_str_empty(c->skip);
    /* mbs, vp, cp, ep is dense so not counted, sp with TP 2, recompute,
     * precision, distributed optimizer */
    cr_assert_eq(c->n_assumed, 7, "%d: %s", c->n_assumed, c->assumed);
    cr_assert(strstr(c->assumed, "mbs=1"));
    cr_assert(strstr(c->assumed, "sp=0"));
    bool layers = false;
    for (int k = 0; k < c->n_over; k++)
        layers = layers || !strcmp(c->over[k], "model.num_layers=16");
    cr_assert(layers, "layers_override from a quoted note with a comma");
    /* a MoE row with everything stated but ETP */
    const vcase *moe = by_id("t-013");
    cr_assert_eq(moe->n_assumed, 1, "%s", moe->assumed);
    cr_assert(strstr(moe->assumed, "etp"));
    cr_assert(moe->feat[VFEAT_EP]);
    /* a fully stated dense row assumes nothing */
    cr_assert_eq(by_id("t-003")->n_assumed, 0, "%s", by_id("t-003")->assumed);
}

Test(validate, quoted_fields_survive)
{
    const vcase *c = by_id("t-005");
    cr_assert_str_eq(csv_cell(&table, c->row, csv_col(&table, "source")),
                     "test fixture, SC'21 style \"hardware\" FLOPs");
    cr_assert_str_eq(csv_cell(&table, c->row, csv_col(&table, "notes")),
                     "vocab 51200; --checkpoint-activations, per \"run script\"");
    bool vocab = false;
    for (int k = 0; k < c->n_over; k++)
        vocab = vocab || !strcmp(c->over[k], "model.vocab_size=51200");
    cr_assert(vocab);
}

Test(validate_stats, quantiles_by_hand)
{
    double ape[] = { 10.0, 1.0, 4.0, 3.0, 2.0 };
    vstats st;
    validate_stats(ape, 5, &st);
    cr_assert_eq(st.n, 5);
    cr_assert_float_eq(st.median, 3.0, 1e-12);
    /* GSL: index 0.9 * (n - 1) = 3.6 of the sorted data 1 2 3 4 10:
     * 4 + 0.6 * (10 - 4) = 7.6 */
    cr_assert_float_eq(st.p90, 7.6, 1e-12);
    cr_assert_float_eq(st.mean, 4.0, 1e-12);
    double even[] = { 5.0, 1.0, 3.0, 7.0 };
    validate_stats(even, 4, &st);
    cr_assert_float_eq(st.median, 4.0, 1e-12);
    validate_stats(NULL, 0, &st);
    cr_assert(isnan(st.median) && isnan(st.p90) && isnan(st.mean));
}

Test(validate_stats, id_prefix)
{
    char p[48];
    validate_id_prefix("mbridge-meas-001", p, sizeof p);
    cr_assert_str_eq(p, "mbridge-meas");
    validate_id_prefix("dgxc-141", p, sizeof p);
    cr_assert_str_eq(p, "dgxc");
    validate_id_prefix("nemo2407-015", p, sizeof p);
    cr_assert_str_eq(p, "nemo2407");
    validate_id_prefix("plain", p, sizeof p);
    cr_assert_str_eq(p, "plain");
}

Test(validate, row_filters)
{
    sim_err err;
    cr_assert_eq(validate_filter_check(&table, "gpu_type=H100,family=time", &err), SIM_OK);
    cr_assert_eq(validate_filter_check(&table, "nosuch=1", &err), SIM_EINVAL);
    cr_assert(strstr(err.msg, "nosuch"));
    cr_assert_eq(validate_filter_check(&table, "gpu_type", &err), SIM_EINVAL);
    cr_assert(validate_filter_match(&table, by_id("t-001"), "gpu_type=H100,metric_name=step_*"));
    cr_assert(!validate_filter_match(&table, by_id("t-002"), "metric_name=step_*"));
    cr_assert(!validate_filter_match(&table, by_id("t-005"), "gpu_type!=A100*"));
    cr_assert(validate_filter_match(&table, by_id("t-001"), "row=even"));
    cr_assert(!validate_filter_match(&table, by_id("t-002"), "row=even"));
    cr_assert(validate_filter_match(&table, by_id("t-007"), "family=memory"));
    /* t-001 and t-002 are one run (step time and tokens/s): one configuration,
     * so a split by run parity keeps them together. */
    cr_assert_eq(by_id("t-001")->run, by_id("t-002")->run);
    cr_assert_neq(by_id("t-001")->run, by_id("t-005")->run);
    cr_assert_eq(validate_filter_match(&table, by_id("t-001"), "run=odd"),
                 validate_filter_match(&table, by_id("t-002"), "run=odd"));
    cr_assert(validate_filter_match(&table, by_id("t-001"), "run=0"));
}

/* ------------------------------------------------------------------ CLI */


Test(validate_cli, out_file_keeps_every_row)
{
    char path[] = "/tmp/parsim_validate_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    result r;
    char args[512];
    snprintf(args, sizeof args, "validate tests/data/validate_rows.csv --jobs 2 --out %s", path);
    run(&r, args);
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_assert(strstr(r.out, "validate: 13 rows, 10 predicted, 3 skipped"), "%s", r.out);
    cr_assert(strstr(r.out, "feature FP8"), "%s", r.out);
    cr_assert(strstr(r.out, "skipped rows by reason"), "%s", r.out);
    csv_table in, out;
    sim_err err;
    cr_assert_eq(csv_read_file(FIXTURE, &in, &err), SIM_OK);
    cr_assert_eq(csv_read_file(path, &out, &err), SIM_OK, "%s", err.msg);
    cr_assert_eq(out.nrows, in.nrows);
    cr_assert_eq(out.ncols, in.ncols + 10);
    int pv = csv_col(&out, "predicted_value"), sk = csv_col(&out, "skip_reason");
    cr_assert_geq(pv, 0);
    for (size_t k = 0; k < out.nrows; k++) {
        /* every row has a prediction or a reason, never neither */
        bool has_pred = csv_cell(&out, k, pv)[0] != '\0';
        bool has_skip = csv_cell(&out, k, sk)[0] != '\0';
        cr_assert(has_pred != has_skip, "row %zu", k);
        /* the input columns are unchanged */
        for (int c = 0; c < in.ncols; c++)
            cr_assert_str_eq(csv_cell(&out, k, c), csv_cell(&in, k, c));
    }
    csv_free(&in);
    csv_free(&out);
    remove(path);
}

Test(validate_cli, bad_input_exits_2)
{
    result r;
    run(&r, "validate tests/data/no_such_file.csv");
    cr_assert_eq(r.status, 1, "%s", r.out); /* I/O failure */
    run(&r, "validate bench/validation/models.csv");
    cr_assert_eq(r.status, 2, "%s", r.out);
    cr_assert(strstr(r.out, "no column"), "%s", r.out);
    run(&r, "validate tests/data/validate_rows.csv --rows nosuch=1");
    cr_assert_eq(r.status, 2, "%s", r.out);
    run(&r, "validate");
    cr_assert_eq(r.status, 2);
}

Test(validate_cli, overrides_apply_to_every_row)
{
    result a, b;
    run(&a, "validate tests/data/validate_rows.csv --rows id=t-001");
    run(&b, "validate tests/data/validate_rows.csv --rows id=t-001 cluster.compute.gemm_efficiency=0.5");
    cr_assert_eq(a.status, 0, "%s", a.out);
    cr_assert_eq(b.status, 0, "%s", b.out);
    cr_assert(strstr(a.out, "validate: 1 rows, 1 predicted"), "%s", a.out);
    cr_assert_str_neq(a.out, b.out);
}

/* The signed error is + on the optimistic side: a shorter step than
 * measured, or more tokens/s; its size is the APE. */
Test(validate, bias_is_signed_ape)
{
    vpred p = predict("t-001"); /* step_time_s, measured 1.0 */
    cr_assert(p.ok, "%s", p.skip);
    cr_assert(fabs(p.bias - 100.0 * (1.0 - p.value)) < 1e-9, "bias %g for %g s", p.bias, p.value);
    cr_assert(fabs(fabs(p.bias) - p.ape) < 1e-9);
    vpred q = predict("t-002"); /* tokens_per_s_per_gpu, measured 5000 */
    cr_assert(q.ok, "%s", q.skip);
    cr_assert(fabs(q.bias - 100.0 * (q.value / 5000.0 - 1.0)) < 1e-9, "bias %g for %g", q.bias, q.value);
}

/* ------------------------------------------------- framework recipes */

#define RECIPES PARSIM_SOURCE_DIR "/tests/data/validate_recipes.csv"

static void load_recipes(void)
{
    load_from(RECIPES);
}

/* The override that starts with `key=`, or NULL. */
static const char *override_of(const vcase *c, const char *key)
{
    size_t n = strlen(key);
    for (int k = 0; k < c->n_over; k++)
        if (!strncmp(c->over[k], key, n) && c->over[k][n] == '=')
            return c->over[k] + n + 1;
    return NULL;
}

TestSuite(validate_recipes, .init = load_recipes, .fini = unload);

/* DGX Cloud rows are NeMo runs: their MoE recipes dispatch with
 * all-to-all like NeMo's own, not with Megatron Core's allgather. */
Test(validate_recipes, nemo_and_dgx_cloud_moe_rows_use_alltoall)
{
    const char *d = override_of(by_id("dgxc-901"), "model.moe_token_dispatcher_type");
    cr_assert_not_null(d, "dgxc MoE row runs the allgather default");
    cr_assert_str_eq(d, "alltoall");
    d = override_of(by_id("nemo-901"), "model.moe_token_dispatcher_type");
    cr_assert_not_null(d);
    cr_assert_str_eq(d, "alltoall");
    /* a source of unknown framework keeps Megatron Core's default */
    cr_assert_null(override_of(by_id("x-901"), "model.moe_token_dispatcher_type"));
    /* dense rows of the same frameworks set no dispatcher */
    cr_assert_null(override_of(by_id("nemo-904"), "model.moe_token_dispatcher_type"));
}

/* VP listed with PP 1 (a README table's column): run without
 * interleaving, say so, and predict the row as the same run without VP. */
Test(validate_recipes, vp_with_pp1_runs_without_interleaving)
{
    const vcase *c = by_id("nemo-902");
    cr_assert_str_empty(c->skip);
    cr_assert_null(override_of(c, "model.virtual_pipeline_model_parallel_size"));
    cr_assert(strstr(c->assumed, "VP 5 listed with PP 1: Megatron interleaves only with PP > 1; "
                                 "run without"),
              "%s", c->assumed);
    cr_assert_not(c->feat[VFEAT_VP]);
    vpred p, q;
    cr_assert_eq(validate_predict(c, PARSIM_SOURCE_DIR, NULL, &p), SIM_OK);
    cr_assert(p.ok, "%s", p.skip);
    cr_assert_eq(validate_predict(by_id("nemo-904"), PARSIM_SOURCE_DIR, NULL, &q), SIM_OK);
    cr_assert(q.ok, "%s", q.skip);
    cr_assert_eq(p.value, q.value, "VP row %.9g vs the same row without VP %.9g", p.value, q.value);
}

/* Runs validate on a fixture with --out into a scratch folder dir (a
 * mkdtemp template) and reads the output into out; the caller removes
 * path and dir. */
static void validate_to_scratch(const char *fixture, char *dir, char *path, size_t len,
                                result *r, csv_table *out)
{
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, len, "%s/out.csv", dir);
    char args[256];
    snprintf(args, sizeof args, "validate %s --jobs 1 --out %s", fixture, path);
    run(r, args);
    cr_assert_eq(r->status, 0, "%s", r->out);
    sim_err err;
    cr_assert_eq(csv_read_file(path, out, &err), SIM_OK, "%s", err.msg);
}

/* A predicted configuration whose peak exceeds the GPU's memory is
 * flagged in --out (peak_gib, hbm_gib, fits) and in the summary. */
Test(validate_recipes, rows_that_do_not_fit_are_flagged)
{
    vpred p;
    cr_assert_eq(validate_predict(by_id("nemo-903"), PARSIM_SOURCE_DIR, NULL, &p), SIM_OK);
    cr_assert(p.ok, "%s", p.skip);
    cr_assert_gt(p.peak_bytes, p.hbm_bytes);
    cr_assert_not(validate_pred_fits(&p));
    cr_assert_eq(validate_predict(by_id("nemo-904"), PARSIM_SOURCE_DIR, NULL, &p), SIM_OK);
    cr_assert(p.ok, "%s", p.skip);
    cr_assert_gt(p.hbm_bytes, 70e9); /* H100: 80 GB */
    cr_assert(validate_pred_fits(&p), "%g of %g bytes", p.peak_bytes, p.hbm_bytes);

    char dir[] = "/tmp/parsim-XXXXXX", path[64], args[256];
    result r;
    csv_table out;
    validate_to_scratch("tests/data/validate_recipes.csv", dir, path, sizeof path, &r, &out);
    cr_assert(strstr(r.out, "\n3 predicted rows do not fit in HBM (peak > capacity): their assumed "
                            "settings are likely wrong\n  nemo-901 x-901 nemo-903\n"),
              "%s", r.out);
    int fits = csv_col(&out, "fits"), peak = csv_col(&out, "peak_gib"), hbm = csv_col(&out, "hbm_gib");
    cr_assert_eq(fits, out.ncols - 3, "fits is followed by ignored and ignored_same");
    cr_assert_eq(csv_col(&out, "ignored"), fits + 1);
    cr_assert_eq(peak, csv_col(&out, "overrides") + 1, "after the existing columns");
    cr_assert_eq(hbm, peak + 1);
    for (size_t k = 0; k < out.nrows; k++) {
        const char *id = csv_cell(&out, k, csv_col(&out, "id"));
        double pg, hg;
        cr_assert(csv_num_double(csv_cell(&out, k, peak), &pg), "%s", id);
        cr_assert(csv_num_double(csv_cell(&out, k, hbm), &hg), "%s", id);
        cr_assert(fabs(hg - 74.51) < 0.01, "%s: %g GiB", id, hg);
        bool expect_no = !strcmp(id, "nemo-901") || !strcmp(id, "x-901") || !strcmp(id, "nemo-903");
        cr_assert_str_eq(csv_cell(&out, k, fits), expect_no ? "no" : "yes", "%s", id);
        cr_assert_eq(pg > hg, expect_no, "%s: %g of %g GiB", id, pg, hg);
    }
    csv_free(&out);
    /* compare reads the new columns */
    snprintf(args, sizeof args, "compare %s %s", path, path);
    run(&r, args);
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_assert(strstr(r.out, "6 matched"), "%s", r.out);
    remove(path);
    rmdir(dir);
}

/* A row that is not predicted has empty memory columns. */
Test(validate_cli, skipped_rows_have_no_fit_verdict)
{
    char dir[] = "/tmp/parsim-XXXXXX", path[64];
    result r;
    csv_table out;
    validate_to_scratch("tests/data/validate_rows.csv", dir, path, sizeof path, &r, &out);
    int fits = csv_col(&out, "fits"), sk = csv_col(&out, "skip_reason");
    size_t skipped = 0;
    for (size_t k = 0; k < out.nrows; k++) {
        bool skip = csv_cell(&out, k, sk)[0] != '\0';
        skipped += skip;
        cr_assert_eq(csv_cell(&out, k, fits)[0] == '\0', skip, "row %zu", k);
        cr_assert_eq(csv_cell(&out, k, csv_col(&out, "peak_gib"))[0] == '\0', skip, "row %zu", k);
    }
    cr_assert_eq(skipped, 3);
    csv_free(&out);
    remove(path);
    rmdir(dir);
}

/* A hybrid Mamba row is its own feature group; a transformer row is not in it. */
Test(validate_cli, mamba_rows_are_a_feature_group)
{
    result r;
    run(&r, "validate tests/data/validate_hybrid.csv");
    cr_assert_eq(r.status, 0, "%s", r.out);
    const char *g = strstr(r.out, "feature Mamba");
    cr_assert(g, "%s", r.out);
    int rows = -1, predicted = -1;
    cr_assert_eq(sscanf(g, "feature Mamba %d %d", &rows, &predicted), 2, "%s", g);
    cr_assert_eq(rows, 1, "%s", g);
    cr_assert_eq(predicted, 1, "%s", g);
}
