#define _DEFAULT_SOURCE /* mkdtemp */
/* parsim validate --recipes: a row matching a recipe runs with its
 * settings, others do not, settings parsim does not model are listed and
 * counted, `--recipes none` runs without, and a malformed recipes file is
 * refused naming file:line and the rule. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csv.h"
#include "scratch.h"

#define HEADER                                                                                     \
    "id,source,gpu_type,num_gpus,model,seq_len,gbs,mbs,tp,pp,vp,cp,ep,etp,dp,sp,recompute,"       \
    "precision,distributed_optimizer,metric_name,metric_value,notes,flop_convention\n"
/* Two runs of one model: the first has a recipe (NeMo 25.11, 8 GPUs), the
 * second (16 GPUs) none. */
#define ROWS                                                                                       \
    HEADER                                                                                         \
    "mbridge-1,bridge docs,H100,8,llama3-8b,8192,128,1,2,1,,1,1,,4,,,bf16,,step_time_s,5.0,"     \
    "release=NeMo 25.11 container; task=pretrain,megatron\n"                                       \
    "mbridge-2,bridge docs,H100,16,llama3-8b,8192,128,1,2,1,,1,1,,8,,,bf16,,step_time_s,2.5,"    \
    "release=NeMo 25.11 container; task=pretrain,megatron\n"

#define RECIPE_HEADER "source,model,gpu_type,precision,num_gpus,release,settings,recipe_ref,notes\n"
#define RECIPE(settings) \
    RECIPE_HEADER "mbridge,llama3-8b,H100,bf16,8,NeMo 25.11,\"" settings "\",ref,rows=mbridge-1\n"

TestSuite(recipes, .init = make_dir, .fini = remove_dir);

/* Runs validate on ROWS with the recipes text (NULL: no file) and extra
 * arguments; reads --out into *out. */
static void validate_with(result *r, const char *recipes, const char *args, csv_table *out)
{
    char rows[128], rec[128], o[128];
    write_file(path_in(rows, sizeof rows, "rows.csv"), ROWS);
    if (recipes)
        write_file(path_in(rec, sizeof rec, "recipes.csv"), recipes);
    runf(r, "validate '%s' --jobs 1 --out '%s' %s", rows, path_in(o, sizeof o, "out.csv"),
         args ? args : "");
    if (out) {
        sim_err err;
        cr_assert_eq(r->status, 0, "%s", r->out);
        cr_assert_eq(csv_read_file(o, out, &err), SIM_OK, "%s", err.msg);
        cr_assert_eq(out->nrows, 2);
    }
}

static const char *cell(const csv_table *t, size_t r, const char *col)
{
    int c = csv_col(t, col);
    cr_assert_geq(c, 0, "no column %s", col);
    return csv_cell(t, r, c);
}

Test(recipes, matching_row_gets_its_settings_and_others_not)
{
    result r;
    csv_table out;
    validate_with(&r, RECIPE("model.sequence_parallel=false;model.recompute_granularity=selective;"
                             "model.recompute_modules=[core_attn];train.manual_gc=true"),
                  NULL, &out);
    const char *ov = cell(&out, 0, "overrides");
    cr_assert(strstr(ov, "model.recompute_granularity=selective"), "%s", ov);
    cr_assert(strstr(ov, "model.recompute_modules=[core_attn]"), "%s", ov);
    cr_assert(!strstr(ov, "model.sequence_parallel=true"), "recipe's SP off replaces the default: %s", ov);
    cr_assert(!strstr(ov, "model.tp_comm_overlap=true"), "TP overlap is off without SP: %s", ov);
    cr_assert(!strstr(cell(&out, 0, "assumed"), "recompute="), "recompute is the recipe's, not assumed");
    cr_assert(strstr(cell(&out, 0, "ignored_same"), "train.manual_gc=true"));
    /* the 16-GPU run has no recipe: framework defaults */
    const char *ov2 = cell(&out, 1, "overrides");
    cr_assert(!strstr(ov2, "recompute"), "%s", ov2);
    cr_assert(strstr(ov2, "model.sequence_parallel=true"), "%s", ov2);
    cr_assert(strstr(cell(&out, 1, "assumed"), "recompute=none"));
    cr_assert(strstr(r.out, "1 rows run with their recipe's settings"), "%s", r.out);
    csv_free(&out);
}

Test(recipes, the_row_wins_over_the_recipe)
{
    result r;
    csv_table out;
    validate_with(&r, RECIPE("mixed_precision=bf16_with_fp8_current_scaling_mixed"), NULL, &out);
    cr_assert(strstr(cell(&out, 0, "overrides"), "mixed_precision=bf16 "), "%s",
              cell(&out, 0, "overrides"));
    cr_assert(strstr(cell(&out, 0, "assumed"),
                     "recipe mixed_precision=bf16_with_fp8_current_scaling_mixed not applied: the "
                     "row gives bf16"),
              "%s", cell(&out, 0, "assumed"));
    csv_free(&out);
}

Test(recipes, unknown_setting_is_listed_and_counted)
{
    result r;
    csv_table out;
    validate_with(&r, RECIPE("foo.bar_baz=3;model.fine_grained_activation_offloading=true"), NULL, &out);
    const char *ig = cell(&out, 0, "ignored");
    cr_assert(strstr(ig, "foo.bar_baz=3"), "%s", ig);
    cr_assert(strstr(ig, "model.fine_grained_activation_offloading=true"), "%s", ig);
    cr_assert_str_empty(cell(&out, 1, "ignored"));
    cr_assert(strstr(r.out, "1 rows with settings parsim does not model; most frequent: "
                            "foo.bar_baz (1), model.fine_grained_activation_offloading (1)"),
              "%s", r.out);
    csv_free(&out);
}

Test(recipes, none_is_the_run_without_recipes)
{
    result with, without, none;
    char o[128];
    size_t n1, n2;
    validate_with(&without, NULL, NULL, NULL);
    cr_assert_eq(without.status, 0, "%s", without.out);
    char *a = read_file(path_in(o, sizeof o, "out.csv"), &n1);
    validate_with(&none, RECIPE("model.recompute_granularity=full"), "--recipes none", NULL);
    cr_assert_eq(none.status, 0, "%s", none.out);
    char *b = read_file(o, &n2);
    cr_assert(n1 == n2 && !memcmp(a, b, n1), "--recipes none differs from no recipes file");
    cr_assert_str_eq(without.out, none.out);
    /* and the file beside the input is the default */
    validate_with(&with, RECIPE("model.recompute_granularity=full"), NULL, NULL);
    char *c = read_file(o, &n2);
    cr_assert(strstr(c, "model.recompute_granularity=full"));
    cr_assert(!strstr(a, "model.recompute_granularity=full"));
    free(a);
    free(b);
    free(c);
}

/* A malformed recipes file: exit 2 and one message naming file:line. */
static void refused(const char *recipes, const char *line, const char *rule)
{
    result r;
    validate_with(&r, recipes, NULL, NULL);
    char where[160];
    snprintf(where, sizeof where, "%s/recipes.csv:%s", dir, line);
    expect_refusal(&r, "recipes file", where, rule);
}

Test(recipes, malformed_files_are_refused_with_file_line)
{
    refused(RECIPE("model.recompute_granularity=full;oops"), "2", "\"oops\" is not key=value");
    refused(RECIPE("=3"), "2", "is not key=value");
    refused(RECIPE("model.num_layers=0"), "2", "must be in [1,");
    refused(RECIPE("model.recompute_granularity=sometimes"), "2", "unknown value \"sometimes\"");
    refused(RECIPE("train.manual_gc=true;train.manual_gc=false"), "2", "'train.manual_gc' given twice");
    refused(RECIPE_HEADER "mbridge,llama3-8b,H100,bf16,8,NeMo 25.11,a=1,ref,\n"
                          "mbridge,llama3-8b,H100,bf16,8,NeMo 25.11,a=2,ref,\n",
            "3", "configuration of line 2 again, with other settings");
    refused(RECIPE_HEADER "mbridge,llama3-8b,H100,bf16,0,NeMo 25.11,a=1,ref,\n", "2",
            "num_gpus '0' is not an integer");
    refused("source,model,gpu_type,precision,num_gpus,settings\nmbridge,m,H100,bf16,8,a=1\n", "1",
            "no column 'release'");
    refused(RECIPE_HEADER "mbridge,llama3-8b,H100,bf16,8,NeMo 25.11,\"a=1,ref,\n", "2",
            "quote");
}

Test(recipes, the_same_configuration_twice_with_the_same_settings_is_accepted)
{
    result r;
    csv_table out;
    validate_with(&r,
                  RECIPE_HEADER "mbridge,llama3-8b,H100,bf16,8,NeMo 25.11,model.recompute_granularity=full,r,\n"
                                "mbridge,llama3-8b,H100,bf16,8,NeMo 25.11,model.recompute_granularity=full,r,\n",
                  NULL, &out);
    cr_assert(strstr(cell(&out, 0, "overrides"), "model.recompute_granularity=full"));
    csv_free(&out);
}

Test(recipes, the_bundled_file_reads_and_matches)
{
    result r;
    char o[128];
    runf(&r, "validate bench/validation/public.csv --jobs 2 --rows 'id=dgxc-00[12]' --out '%s'",
         path_in(o, sizeof o, "out.csv"));
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_assert(strstr(r.out, "2 rows run with their recipe's settings"), "%s", r.out);
    char *text = read_file(o, NULL);
    cr_assert(strstr(text, "model.attention_backend=fused"));
    free(text);
}

/* The bundled frameworks file with line `line` (1-based) replaced. */
static void frameworks_with(const char *path, int line, const char *text)
{
    char *src = read_file(PARSIM_SOURCE_DIR "/bench/validation/frameworks.csv", NULL);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    int l = 1;
    for (char *p = src; *p;) {
        char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) + 1 : strlen(p);
        if (l == line)
            fprintf(f, "%s\n", text);
        else
            fwrite(p, 1, n, f);
        p += n;
        l++;
    }
    cr_assert_eq(fclose(f), 0);
    free(src);
}

/* Line 3 of the bundled file is the mbridge framework. */
#define MBRIDGE_ROW(recompute, sp)                                                                 \
    "mbridge,,Megatron Bridge,bridge," sp ",true," recompute ",bf16,true,true,true,alltoall,"      \
    "megatron,why,,,true,,lora text,,,,"

Test(recipes, framework_defaults_come_from_the_file)
{
    char fw[128];
    frameworks_with(path_in(fw, sizeof fw, "fw.csv"), 3, MBRIDGE_ROW("selective", "true"));
    char args[256];
    snprintf(args, sizeof args, "--recipes none --frameworks '%s'", fw);
    result r;
    csv_table out;
    validate_with(&r, NULL, args, &out);
    cr_assert(strstr(cell(&out, 1, "overrides"), "model.recompute_granularity=selective"), "%s",
              cell(&out, 1, "overrides"));
    cr_assert(strstr(cell(&out, 1, "assumed"), "recompute=selective (Megatron Bridge default)"));
    csv_free(&out);
}

/* A frameworks file with line `line` replaced is refused: exit 2, one
 * message naming fw.csv:line and the rule. */
static void fw_refused(int line, const char *text, int at, const char *rule)
{
    char fw[128], args[256], where[160];
    frameworks_with(path_in(fw, sizeof fw, "fw.csv"), line, text);
    snprintf(args, sizeof args, "--frameworks '%s'", fw);
    result r;
    validate_with(&r, NULL, args, NULL);
    snprintf(where, sizeof where, "%s:%d", fw, at);
    expect_refusal(&r, "frameworks file", where, rule);
}

Test(recipes, framework_file_errors_name_file_and_line)
{
    fw_refused(3, MBRIDGE_ROW("none", "maybe"), 3, "sp_when_tp 'maybe': must be true or false");
    fw_refused(3, MBRIDGE_ROW("sometimes", "true"), 3,
               "recompute 'sometimes': not a value of model.recompute_granularity");
    fw_refused(3, "mbridge,,Megatron Bridge,bridge", 3, "fields");
    fw_refused(11, "x,,X,bridge,true,true,none,bf16,true,true,true,,megatron,why,,,true,,lora,,,,", 1,
               "no fallback framework");
    fw_refused(12, ",deepseek*,,bridge,,,full,,,,,flex,,,,,,,,,a,,", 12,
               "a model exception sets only family, moe_dispatcher, vocab_size, assumed and "
               "flops_flagged");
    fw_refused(12, ",deepseek*,,cuda,,,,,,,,flex,,,,,,,,,a,,", 12, "families are bridge");
    fw_refused(12, ",deepseek*,,bridge,,,,,,,,,,,,,,,,,a,maybe,", 12,
               "flops_flagged 'maybe': must be true or false");
    fw_refused(12, ",deepseek*,,bridge,,,,,,,,carrier-pigeon,,,,,,,,,a,,", 12,
               "not a value of model.moe_token_dispatcher_type");
    fw_refused(1,
               "prefix,model,name,kind,sp_when_tp,distributed_optimizer,recompute,precision,over"
               "lap_dp,tp_comm_overlap,moe_etp1,moe_dispatcher,flop_convention,flop_convention_w"
               "hy,attention_backend,attention_why,split_counts_embedding,lora_target_modules,lora_assumed,vocab_size,assumed,flops_flagged,notes",
               1, "no column 'family'");
}

/* Line 16 of the bundled file flags qwen3-30b-a3b; flag llama3-8b there. */
Test(recipes, flops_flagged_models_come_from_the_file)
{
    char rows[128], fw[128];
    write_file(path_in(rows, sizeof rows, "rows.csv"),
               HEADER "mbridge-1,bridge docs,H100,8,llama3-8b,8192,128,1,2,1,,1,1,,4,,,bf16,,"
                      "tflops_per_gpu,400,release=NeMo 25.11 container,megatron\n");
    frameworks_with(path_in(fw, sizeof fw, "fw.csv"), 16, ",llama3-8b,,,,,,,,,,,,,,,,,,,,true,why");
    result r;
    runf(&r, "validate '%s' --jobs 1 --rows family=tflops-flagged --frameworks '%s'", rows, fw);
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_assert(strstr(r.out, "validate: 1 rows, 1 predicted"), "%s", r.out);
    runf(&r, "validate '%s' --jobs 1 --rows family=tflops-flagged", rows);
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_assert(strstr(r.out, "validate: 0 rows"), "the bundled file does not flag llama3-8b: %s", r.out);
}

Test(recipes, a_semicolon_in_parentheses_belongs_to_the_value)
{
    result r;
    csv_table out;
    validate_with(&r, RECIPE("tokenizer=GPT2BPETokenizer (vocab 50257 proxy; padded);dataset=mock"),
                  NULL, &out);
    cr_assert(strstr(cell(&out, 0, "overrides"), "model.vocab_size=50257"), "%s",
              cell(&out, 0, "overrides"));
    cr_assert(strstr(cell(&out, 0, "ignored_same"), "dataset=mock"));
    csv_free(&out);
}

Test(recipes, a_long_ignored_list_ends_with_more_and_counts_every_setting)
{
    char settings[8192] = "";
    for (int k = 0; k < 12; k++)
        snprintf(settings + strlen(settings), sizeof settings - strlen(settings),
                 "%sunknown.k%d=%0150d", k ? ";" : "", k, k);
    char text[9000];
    snprintf(text, sizeof text,
             RECIPE_HEADER "mbridge,llama3-8b,H100,bf16,8,NeMo 25.11,\"%s\",ref,\n", settings);
    result r;
    csv_table out;
    validate_with(&r, text, NULL, &out);
    const char *ig = cell(&out, 0, "ignored");
    cr_assert(strlen(ig) > 6 && !strcmp(ig + strlen(ig) - 6, "(more)"), "%s", ig);
    cr_assert(strstr(r.out, "1 rows with settings parsim does not model; most frequent: "
                            "unknown.k0 (1)"),
              "%s", r.out);
    cr_assert(!strstr(r.out, "(more) ("), "the marker is not a key: %s", r.out);
    csv_free(&out);
}

Test(recipes, bounded_rows_and_settings)
{
    char settings[4096] = "";
    for (int k = 0; k < 129; k++)
        snprintf(settings + strlen(settings), sizeof settings - strlen(settings), "%sk%d=1",
                 k ? ";" : "", k);
    char text[5000];
    snprintf(text, sizeof text,
             RECIPE_HEADER "mbridge,llama3-8b,H100,bf16,8,NeMo 25.11,\"%s\",ref,\n", settings);
    refused(text, "2", "more than 128 settings in a row");
    char key[200];
    memset(key, 'k', 150);
    key[150] = '\0';
    snprintf(text, sizeof text,
             RECIPE_HEADER "mbridge,llama3-8b,H100,bf16,8,NeMo 25.11,%s=1,ref,\n", key);
    refused(text, "2", "is longer than 95 characters (key)");
}

Test(recipes, at_most_limit_recipe_settings_in_a_file)
{
    char rec[128];
    FILE *f = fopen(path_in(rec, sizeof rec, "recipes.csv"), "w");
    cr_assert_not_null(f);
    fputs(RECIPE_HEADER, f);
    for (int i = 0; i < 10001; i++) /* 10 settings a row: the 10001st row crosses 1e5 */
        fprintf(f, "mbridge,m%d,H100,bf16,8,R,a=1;b=1;c=1;d=1;e=1;f=1;g=1;h=1;i=1;j=1,r,\n", i);
    cr_assert_eq(fclose(f), 0);
    char rows[128];
    write_file(path_in(rows, sizeof rows, "rows.csv"), ROWS);
    result r;
    runf(&r, "validate '%s' --jobs 1", rows);
    cr_assert_eq(r.status, 2, "%s", r.out);
    char where[160];
    snprintf(where, sizeof where, "%s:10002", rec);
    cr_assert(strstr(r.out, where), "%s", r.out);
    cr_assert(strstr(r.out, "more than 100000 settings in the file (LIMIT_RECIPE_SETTINGS)"), "%s",
              r.out);
}

/* A key of parsim's key table that no mapping rule names is applied as it
 * is: keys added to the table later are picked up the same way. */
Test(recipes, any_key_of_the_key_table_is_applied)
{
    result r;
    csv_table out;
    validate_with(&r, RECIPE("model.cp_comm_type=a2a;model.make_vocab_size_divisible_by=256"), NULL,
                  &out);
    const char *ov = cell(&out, 0, "overrides");
    cr_assert(strstr(ov, "model.cp_comm_type=a2a"), "%s", ov);
    cr_assert(strstr(ov, "model.make_vocab_size_divisible_by=256"), "%s", ov);
    cr_assert_str_empty(cell(&out, 0, "ignored"));
    csv_free(&out);
}
