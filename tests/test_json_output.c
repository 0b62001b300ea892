/* JSON, text and CSV outputs hold only what their readers can parse:
 * the report and the trace read back with yajl's parser, a value that is
 * not finite written as null / "" / "n/a" (never inf or nan), names with
 * quotes, commas, line breaks, control bytes and invalid UTF-8 escaped in
 * JSON and quoted in CSV, misuse of the JSON writer reported, and a failed
 * writer leaving no output behind. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <yajl/yajl_tree.h>

#include "cli.h"
#include "cli_run.h"
#include "config.h"
#include "csv.h"
#include "jsonout.h"
#include "report.h"
#include "step.h"
#include "streams.h"
#include "strategy.h"
#include "trace.h"
#include "sim_run.h"

#define SMALL "model.name=llama3-8b cluster.topology=dgx-h100 cluster.num_gpus=4 " \
              "model.pipeline_model_parallel_size=2 model.tensor_model_parallel_size=2 train.global_batch_size=4"

/* --- helpers -------------------------------------------------------------- */

static yajl_val parse(const char *text)
{
    char why[512] = "";
    yajl_val v = yajl_tree_parse(text, why, sizeof why);
    cr_assert_not_null(v, "not valid JSON: %s\n%.2000s", why, text);
    return v;
}

/* Member at path (NULL-terminated keys) of any type, or NULL. */
static yajl_val member(yajl_val v, const char *k1, const char *k2)
{
    const char *path[] = { k1, k2, NULL };
    return yajl_tree_get(v, path, yajl_t_any);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    cr_assert_not_null(mem);
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        fwrite(chunk, 1, n, mem);
    fclose(f);
    fclose(mem);
    return buf;
}

/* True if text holds "inf" or "nan" as a word (any case): what printf
 * writes for a number that is not finite. */
static bool has_nonfinite_word(const char *text)
{
    for (const char *p = text; *p; p++) {
        if (p > text && isalpha((unsigned char)p[-1]))
            continue;
        if ((!strncasecmp(p, "inf", 3) || !strncasecmp(p, "nan", 3)) && !isalpha((unsigned char)p[3]))
            return true;
    }
    return false;
}


static const char *const SMALL_KV[] = { "model.name=llama3-8b", "cluster.topology=dgx-h100", "cluster.num_gpus=4",
                                        "model.pipeline_model_parallel_size=2",
                                        "model.tensor_model_parallel_size=2", "train.global_batch_size=4", NULL };

typedef enum { OUT_JSON, OUT_TEXT, OUT_CSV } out_kind;

/* One report of r as text (caller frees). */
static char *render(out_kind k, const run_inputs *in, const strategy_t *s, const step_result *r)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    cr_assert_not_null(mem);
    if (k == OUT_JSON) {
        sim_err err;
        sim_err_clear(&err);
        cr_assert_eq(report_json(mem, in, s, r, &err), SIM_OK, "%s", err.msg);
    } else if (k == OUT_TEXT)
        report_text(mem, in, s, r);
    else {
        report_csv_header(mem);
        report_csv_row(mem, in, s, r);
    }
    cr_assert_eq(ferror(mem), 0);
    fclose(mem);
    return buf;
}

/* --- the CLI's outputs parse back ------------------------------------------ */

Test(json_output, cli_report_parses_with_every_key_in_order)
{
    result r;
    run(&r, "run configs/llama3-70b-h100x64.cfg --format json");
    cr_assert_eq(r.status, 0, "%s", r.out);
    yajl_val v = parse(r.out);
    cr_assert(YAJL_IS_OBJECT(v));
    static const char *const top[] = { "parallel", "model", "topology", "mixed_precision", "step_time_s",
                                       "pipeline_s", "bubble_fraction", "tokens_per_s_per_gpu",
                                       "model_flops_per_step", "model_tflops_per_gpu", "mfu", "memory", "comm",
                                       "host", "sim" };
    size_t n = sizeof top / sizeof top[0];
    cr_assert_eq(v->u.object.len, n, "%zu top-level keys", v->u.object.len);
    for (size_t i = 0; i < n; i++)
        cr_expect_str_eq(v->u.object.keys[i], top[i]);
    cr_expect_eq(YAJL_GET_INTEGER(member(v, "parallel", "world_size")), 64);
    cr_expect(YAJL_IS_TRUE(member(v, "parallel", "sequence_parallel")));
    cr_expect_str_eq(YAJL_GET_STRING(member(v, "model", NULL)), "llama3-70b");
    cr_expect(YAJL_IS_DOUBLE(member(v, "step_time_s", NULL)) && YAJL_GET_DOUBLE(member(v, "step_time_s", NULL)) > 0);
    cr_expect_eq(YAJL_GET_INTEGER(member(v, "memory", "hbm_capacity_bytes")), 80000000000LL);
    yajl_val stages = member(v, "memory", "stages");
    cr_assert(YAJL_IS_ARRAY(stages));
    cr_assert_eq(stages->u.array.len, 4);
    for (size_t i = 0; i < 4; i++) {
        yajl_val st = stages->u.array.values[i];
        cr_expect_eq(YAJL_GET_INTEGER(member(st, "stage", NULL)), (long long)i);
        cr_expect(YAJL_IS_INTEGER(member(st, "peak_bytes", NULL)));
        cr_expect(YAJL_IS_DOUBLE(member(st, "busy_s", NULL)));
    }
    static const char *const comm[] = { "tp_s", "cp_s", "ep_s", "dp_s", "pp_s", "tp_exposed_s", "dp_exposed_s",
                                        "exposed_s" };
    for (size_t i = 0; i < sizeof comm / sizeof comm[0]; i++)
        cr_expect(YAJL_IS_NUMBER(member(v, "comm", comm[i])), "comm.%s", comm[i]);
    cr_expect(YAJL_GET_INTEGER(member(v, "sim", "tasks")) > 0);
    yajl_tree_free(v);
}

Test(json_output, cli_trace_parses_with_every_event_whole)
{
    char dir[] = "/tmp/parsim-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[64], args[512];
    snprintf(path, sizeof path, "%s/t.json", dir);
    snprintf(args, sizeof args, "run " SMALL " --trace %s", path);
    result r;
    run(&r, args);
    cr_assert_eq(r.status, 0, "%s", r.out);
    char *text = slurp(path);
    remove(path);
    rmdir(dir);
    size_t len = strlen(text);
    cr_assert(len > 3 && !strcmp(text + len - 3, "]}\n"), "trace does not end with ]}\\n");
    yajl_val v = parse(text);
    cr_expect_str_eq(YAJL_GET_STRING(member(v, "displayTimeUnit", NULL)), "ns");
    yajl_val ev = member(v, "traceEvents", NULL);
    cr_assert(YAJL_IS_ARRAY(ev));
    size_t meta = 0, fwd = 0, bwd = 0, kernels = 0;
    for (size_t i = 0; i < ev->u.array.len; i++) {
        yajl_val e = ev->u.array.values[i];
        const char *ph = YAJL_GET_STRING(member(e, "ph", NULL));
        const char *name = YAJL_GET_STRING(member(e, "name", NULL));
        cr_assert(ph && name, "event %zu lacks ph or name", i);
        cr_assert(YAJL_IS_INTEGER(member(e, "pid", NULL)) && YAJL_IS_INTEGER(member(e, "tid", NULL)));
        if (!strcmp(ph, "M")) {
            meta++;
            cr_expect(YAJL_IS_STRING(member(e, "args", "name")));
            continue;
        }
        cr_assert_str_eq(ph, "X");
        yajl_val ts = member(e, "ts", NULL), dur = member(e, "dur", NULL);
        cr_assert(YAJL_IS_DOUBLE(ts) && YAJL_IS_DOUBLE(dur), "event %zu (%s): ts/dur", i, name);
        cr_expect(YAJL_GET_DOUBLE(ts) >= 0 && YAJL_GET_DOUBLE(dur) > 0, "event %zu (%s)", i, name);
        if (!strcmp(name, "F") || !strcmp(name, "B")) {
            *(name[0] == 'F' ? &fwd : &bwd) += 1;
            cr_expect(YAJL_IS_INTEGER(member(e, "args", "microbatch")));
            cr_expect(YAJL_IS_INTEGER(member(e, "args", "chunk")));
        } else
            kernels++;
    }
    /* 2 stages: a process name and one name per stream each (the delay
     * stream is no resource and has none); 4 microbatches of 1 chunk
     * forward and backward per stage. */
    int named = 0;
    for (int k = 0; k < STREAM_KINDS; k++)
        named += streams_desc((stream_kind)k)->role != STREAM_ROLE_DELAY;
    cr_expect_eq(meta, 2 * (1 + named));
    cr_expect_eq(fwd, 2 * 4);
    cr_expect_eq(bwd, 2 * 4);
    cr_expect(kernels > 0);
    yajl_tree_free(v);
    free(text);
}

Test(json_output, cli_infinite_capacity_is_refused)
{
    /* 1e306 GB is inf bytes: the key's range refuses it before any output
     * exists (a non-finite value that does reach a writer is tested below,
     * library level). */
    static const char *const fmts[] = { "json", "text", "csv" };
    for (size_t i = 0; i < 3; i++) {
        char args[512];
        snprintf(args, sizeof args, "run " SMALL " cluster.gpu.hbm_gbytes=1e306 --format %s", fmts[i]);
        result r;
        run(&r, args);
        cr_expect_eq(r.status, 2, "%s: %s", fmts[i], r.out);
        cr_expect(strstr(r.out, "command line: cluster.gpu.hbm_gbytes: must be in (0, 100000]") != NULL &&
                      strchr(r.out, '\n') == r.out + strlen(r.out) - 1,
                  "%s: %s", fmts[i], r.out);
    }
}

/* --- values that are not finite, library level ----------------------------- */

/* Simulates SMALL_KV into x; returns its result with not-finite values in
 * the fields a zero time or an overflow would spoil, the stages copied
 * into *stages (caller frees). */
static step_result spoiled(sim *x, stage_result **stages)
{
    sim_run(x, SMALL_KV);
    const step_result *r0 = step_result_get(x->st);
    step_result r = *r0;
    *stages = malloc((size_t)r.n_stages * sizeof **stages);
    cr_assert_not_null(*stages);
    memcpy(*stages, r0->stages, (size_t)r.n_stages * sizeof **stages);
    r.stages = *stages;
    r.step_time_s = NAN;
    r.tokens_per_s_per_gpu = INFINITY;
    r.model_tflops_per_gpu = -INFINITY;
    r.mfu = NAN;
    r.bubble_fraction = INFINITY;
    r.peak_bytes = INFINITY;
    r.comm_s[STREAM_TP] = NAN;
    r.exposed_total_s = -INFINITY;
    r.stages[0].busy_s = NAN;
    r.stages[0].weights_bytes = INFINITY;
    return r;
}

Test(json_output, nonfinite_values_are_null_in_json)
{
    sim x;
    stage_result *stages;
    step_result r = spoiled(&x, &stages);
    char *text = render(OUT_JSON, &x.in, &x.s, &r);
    cr_expect(!has_nonfinite_word(text), "%s", text);
    yajl_val v = parse(text);
    static const char *const nulls[] = { "step_time_s", "tokens_per_s_per_gpu", "model_tflops_per_gpu", "mfu",
                                         "bubble_fraction" };
    for (size_t i = 0; i < sizeof nulls / sizeof nulls[0]; i++)
        cr_expect(YAJL_IS_NULL(member(v, nulls[i], NULL)), "%s is not null", nulls[i]);
    cr_expect(YAJL_IS_NULL(member(v, "memory", "peak_bytes")));
    cr_expect(YAJL_IS_NULL(member(v, "comm", "tp_s")));
    cr_expect(YAJL_IS_NULL(member(v, "comm", "exposed_s")));
    yajl_val st0 = member(v, "memory", "stages")->u.array.values[0];
    cr_expect(YAJL_IS_NULL(member(st0, "busy_s", NULL)));
    cr_expect(YAJL_IS_NULL(member(st0, "weights_bytes", NULL)));
    /* the finite neighbours are still numbers */
    cr_expect(YAJL_IS_NUMBER(member(v, "pipeline_s", NULL)));
    cr_expect(YAJL_IS_NUMBER(member(st0, "gradients_bytes", NULL)));
    cr_expect(YAJL_IS_NUMBER(member(v, "comm", "dp_s")));
    yajl_tree_free(v);
    free(text);
    free(stages);
    sim_free(&x);
}

Test(json_output, nonfinite_values_are_na_in_text_and_empty_in_csv)
{
    sim x;
    stage_result *stages;
    step_result r = spoiled(&x, &stages);

    char *text = render(OUT_TEXT, &x.in, &x.s, &r);
    cr_expect(!has_nonfinite_word(text), "%s", text);
    cr_expect(strstr(text, "step time                   n/a s") != NULL, "%s", text);
    cr_expect(strstr(text, "MFU                         n/a %") != NULL, "%s", text);
    free(text);

    text = render(OUT_CSV, &x.in, &x.s, &r);
    cr_expect(!has_nonfinite_word(text), "%s", text);
    csv_table t;
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(csv_parse(text, strlen(text), "report.csv", &t, &err), SIM_OK, "%s", err.msg);
    cr_assert_eq(t.nrows, 1);
    static const char *const empty[] = { "step_time_s", "bubble_fraction", "tokens_per_s_per_gpu",
                                         "model_tflops_per_gpu", "mfu", "peak_bytes", "tp_s", "exposed_s" };
    for (size_t i = 0; i < sizeof empty / sizeof empty[0]; i++) {
        int c = csv_col(&t, empty[i]);
        cr_assert_geq(c, 0, "no column %s", empty[i]);
        cr_expect_str_eq(csv_cell(&t, 0, c), "", "%s", empty[i]);
    }
    cr_expect_str_neq(csv_cell(&t, 0, csv_col(&t, "dp_s")), "");
    cr_expect_str_eq(csv_cell(&t, 0, csv_col(&t, "model")), "llama3-8b");
    csv_free(&t);
    free(text);
    free(stages);
    sim_free(&x);
}

/* --- names --------------------------------------------------------------- */

#define HOSTILE_NAME "a\"b,c\nd\001e\\f"

Test(json_output, names_escaped_in_json_and_quoted_in_csv)
{
    sim x;
    sim_run(&x, SMALL_KV);
    snprintf(x.in.model.name, sizeof x.in.model.name, "%s", HOSTILE_NAME);
    /* \xff never starts UTF-8; \xc0\xaf is an overlong '/'; \xed\xa0\x80
     * a surrogate: each invalid byte becomes U+FFFD; U+1F600 (4 bytes)
     * and U+00E9 are valid and stay */
    snprintf(x.in.cluster.name, sizeof x.in.cluster.name, "x\xffy\xc0\xafz\xed\xa0\x80\xf0\x9f\x98\x80\xc3\xa9");
    const step_result *r = step_result_get(x.st);

    char *text = render(OUT_JSON, &x.in, &x.s, r);
    cr_expect(strstr(text, "\"a\\\"b,c\\nd\\u0001e\\\\f\"") != NULL, "%s", text);
    yajl_val v = parse(text);
    cr_expect_str_eq(YAJL_GET_STRING(member(v, "model", NULL)), HOSTILE_NAME);
    cr_expect_str_eq(YAJL_GET_STRING(member(v, "topology", NULL)),
                     "x\xEF\xBF\xBDy\xEF\xBF\xBD\xEF\xBF\xBDz\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"
                     "\xF0\x9F\x98\x80\xC3\xA9");
    yajl_tree_free(v);
    free(text);

    text = render(OUT_CSV, &x.in, &x.s, r);
    /* the control byte is '?': parsim's CSV reader refuses control bytes */
    cr_expect(strstr(text, "\n\"a\"\"b,c\nd?e\\f\",") != NULL, "%s", text);
    csv_table t;
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(csv_parse(text, strlen(text), "report.csv", &t, &err), SIM_OK, "%s", err.msg);
    cr_assert_eq(t.nrows, 1);
    cr_expect_str_eq(csv_cell(&t, 0, csv_col(&t, "model")), "a\"b,c\nd?e\\f");
    cr_expect_str_eq(csv_cell(&t, 0, csv_col(&t, "topology")), x.in.cluster.name);
    cr_expect_str_eq(csv_cell(&t, 0, csv_col(&t, "world_size")), "4");
    csv_free(&t);
    free(text);
    sim_free(&x);
}

/* --- the writer itself ----------------------------------------------------- */

typedef void (*json_steps)(jsonout *j);

/* Runs steps through a jsonout; returns its status, the text in *text. */
static int write_json(json_steps steps, bool pretty, char **text, sim_err *err)
{
    size_t len = 0;
    FILE *mem = open_memstream(text, &len);
    cr_assert_not_null(mem);
    sim_err_clear(err);
    jsonout *j = jsonout_begin(mem, pretty, err);
    cr_assert_not_null(j);
    steps(j);
    int rc = jsonout_end(j, err);
    fclose(mem);
    return rc;
}

static void numbers(jsonout *j)
{
    jsonout_array_open(j);
    jsonout_int(j, INT64_MIN);
    jsonout_int(j, INT64_MAX);
    jsonout_int(j, 0);
    jsonout_uint(j, UINT64_MAX);
    jsonout_scaled(j, 1234567, 6);
    jsonout_scaled(j, 7, 6);
    jsonout_scaled(j, UINT64_MAX, 6);
    jsonout_real(j, 0.1);
    jsonout_real(j, -1e300);
    jsonout_real(j, NAN);
    jsonout_fixed(j, 1e300 * 1e10, 0);
    jsonout_fixed(j, 2.5, 0);
    jsonout_array_close(j);
}

Test(json_output, writer_numbers_exact_and_nonfinite_null)
{
    char *text;
    sim_err err;
    cr_assert_eq(write_json(numbers, false, &text, &err), SIM_OK, "%s", err.msg);
    cr_expect_str_eq(text, "[-9223372036854775808,9223372036854775807,0,18446744073709551615,1.234567,0.000007,"
                           "18446744073709.551615,0.1,-1e+300,null,null,2]");
    yajl_tree_free(parse(text));
    free(text);
}

static void key_not_string(jsonout *j)
{
    jsonout_map_open(j);
    jsonout_int(j, 1);
    jsonout_int(j, 2);
    jsonout_map_close(j);
}
static void left_open(jsonout *j)
{
    jsonout_array_open(j);
    jsonout_int(j, 1);
}
static void nothing(jsonout *j)
{
    (void)j;
}
static void two_documents(jsonout *j)
{
    jsonout_int(j, 1);
    jsonout_int(j, 2);
}
static void close_too_many(jsonout *j)
{
    jsonout_array_open(j);
    jsonout_array_close(j);
    jsonout_array_close(j);
}
static void key_without_value(jsonout *j)
{
    jsonout_map_open(j);
    jsonout_str(j, "a");
    jsonout_map_close(j);
}
static void mismatched_close(jsonout *j)
{
    jsonout_array_open(j);
    jsonout_int(j, 1);
    jsonout_map_close(j);
}
static void not_blank(jsonout *j)
{
    jsonout_array_open(j);
    jsonout_space(j, "\n,");
    jsonout_array_close(j);
}

Test(json_output, writer_misuse_is_an_error_and_writes_nothing_after_it)
{
    static const struct {
        json_steps steps;
        const char *why;
    } cases[] = {
        { key_not_string, "map key that is not a string" },
        { left_open, "left open" },
        { nothing, "empty" },
        { two_documents, "after the end of the document" },
        { close_too_many, "array closed where none is open" },
        { key_without_value, "key without its value" },
        { mismatched_close, "map closed where none is open" },
        { not_blank, "not blank" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *text;
        sim_err err;
        int rc = write_json(cases[i].steps, false, &text, &err);
        cr_expect_eq(rc, SIM_ESIM, "case %zu: status %d", i, rc);
        cr_expect_eq(err.code, SIM_ESIM, "case %zu", i);
        cr_expect(strstr(err.msg, cases[i].why) != NULL, "case %zu: '%s'", i, err.msg);
        /* a short document stays in the writer's block: nothing reaches
         * the stream once the writer has failed */
        cr_expect_str_eq(text, "", "case %zu wrote '%s'", i, text);
        free(text);
    }
}

/* --- a failed writer leaves no output -------------------------------------- */

static int failing_writer(FILE *out, void *ctx, sim_err *err)
{
    (void)ctx;
    fputs("{\"half\":", out);
    return sim_err_set(err, SIM_ESIM, "JSON generator refused something");
}

Test(json_output, failed_writer_keeps_the_old_file)
{
    char dir[] = "/tmp/parsim-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[64];
    snprintf(path, sizeof path, "%s/out.json", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("old\n", f);
    fclose(f);
    sim_err err;
    sim_err_clear(&err);
    cr_expect_eq(cli_write_file(path, failing_writer, NULL, &err), SIM_ESIM);
    cr_expect(strstr(err.msg, "refused") != NULL, "%s", err.msg);
    char *text = slurp(path);
    cr_expect_str_eq(text, "old\n");
    free(text);
    /* and no temporary file is left beside it */
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    int entries = 0;
    for (struct dirent *e; (e = readdir(d));)
        entries += e->d_name[0] != '.';
    closedir(d);
    cr_expect_eq(entries, 1);
    remove(path);
    rmdir(dir);
}

Test(json_output, failed_writer_prints_nothing, .init = cr_redirect_stdout)
{
    sim_err err;
    sim_err_clear(&err);
    cr_expect_eq(cli_print_whole(failing_writer, NULL, &err), SIM_ESIM);
    fflush(stdout);
    cr_expect_stdout_eq_str("");
}
