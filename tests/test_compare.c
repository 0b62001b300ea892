#define _DEFAULT_SOURCE /* mkstemps */
/* parsim compare: rows lined up by configuration or by id, what moved and
 * by how much, the error change of validate outputs, and the exit status
 * (0 nothing moved beyond the threshold, 1 something did, 2 bad input). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compare.h"
#include "csv.h"

/* sweep-like outputs: tp, pp are the configuration */
static const char *sweep_old = "index,tp,pp,step_time_s,mfu,peak_bytes,error\n"
                               "0,1,1,10.0,0.40,1000,\n"
                               "1,2,1,6.0,0.35,800,\n"
                               "2,2,2,5.0,0.30,600,\n";
/* tp=2,pp=1 5% faster; tp=2,pp=2 now fails; tp=4 is new; rows reordered */
static const char *sweep_new = "index,tp,pp,step_time_s,mfu,peak_bytes,error\n"
                               "0,2,1,5.7,0.3684,800,\n"
                               "1,1,1,10.0,0.40,1000,\n"
                               "2,2,2,,,,out of memory\n";

typedef struct result {
    int status;
    char out[65536];
} result;

static void write_tmp(char *path, const char *text)
{
    strcpy(path, "/tmp/parsim_compare_XXXXXX.csv");
    int fd = mkstemps(path, 4);
    cr_assert_geq(fd, 0);
    FILE *f = fdopen(fd, "w");
    fputs(text, f);
    fclose(f);
}

static void run(result *r, const char *args)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s 2>&1", PARSIM_SOURCE_DIR, PARSIM_BINARY, args);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(r->out, 1, sizeof r->out - 1, p);
    r->out[n] = '\0';
    int st = pclose(p);
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void compare_text(const char *a, const char *b, const compare_opts *o, compare_summary *s,
                         char **report)
{
    csv_table ta, tb;
    sim_err err;
    cr_assert_eq(csv_parse(a, strlen(a), "old", &ta, &err), SIM_OK);
    cr_assert_eq(csv_parse(b, strlen(b), "new", &tb, &err), SIM_OK);
    size_t len;
    FILE *f = open_memstream(report, &len);
    cr_assert_eq(compare_tables(&ta, "old", &tb, "new", o, f, s, &err), SIM_OK, "%s", err.msg);
    fclose(f);
    csv_free(&ta);
    csv_free(&tb);
}

Test(compare, result_columns)
{
    const char *res[] = { "step_time_s", "tokens_per_s_per_gpu", "model_tflops_per_gpu", "mfu",
                          "bubble_fraction", "peak_bytes", "exposed_tp_s", "predicted_value",
                          "ape_percent", "skip_reason", "rank", "index", "gpu_hours" };
    const char *cfg[] = { "tp", "model", "seq_length", "num_microbatches", "mixed_precision",
                          "model.tensor_model_parallel_size", "id", "case", "kind" };
    for (size_t k = 0; k < sizeof res / sizeof res[0]; k++)
        cr_assert(compare_is_result_column(res[k]), "%s", res[k]);
    for (size_t k = 0; k < sizeof cfg / sizeof cfg[0]; k++)
        cr_assert(!compare_is_result_column(cfg[k]), "%s", cfg[k]);
}

Test(compare, lines_up_by_configuration)
{
    compare_opts o = { .fail_above_pct = 10.0, .max_listed = 0 };
    compare_summary s;
    char *rep;
    compare_text(sweep_old, sweep_new, &o, &s, &rep);
    cr_assert(!s.validate_kind);
    cr_assert_eq(s.matched, 3);
    cr_assert_eq(s.only_old, 0);
    cr_assert_eq(s.only_new, 0);
    /* 5% and 5.3% changes stay under 10%; the failed run moved */
    cr_assert_eq(s.moved, 1, "%s", rep);
    cr_assert_eq(s.status_changed, 1);
    /* largest finite change: mfu 0.35 -> 0.3684 */
    cr_assert(fabs(s.max_abs_change_pct - 100.0 * 0.0184 / 0.35) < 1e-6, "%g",
              s.max_abs_change_pct);
    cr_assert(strstr(rep, "step_time_s"), "%s", rep);
    cr_assert(strstr(rep, "-5.000%"), "%s", rep);
    cr_assert(strstr(rep, "tp=2 pp=2"), "%s", rep);
    cr_assert(strstr(rep, "key columns: tp pp"), "%s", rep);
    free(rep);

    o.fail_above_pct = 1.0;
    compare_text(sweep_old, sweep_new, &o, &s, &rep);
    cr_assert_eq(s.moved, 2, "%s", rep);
    free(rep);
}

Test(compare, rows_on_one_side_and_repeated_keys)
{
    const char *a = "tp,step_time_s\n1,1.0\n1,2.0\n2,3.0\n";
    const char *b = "tp,step_time_s\n1,1.0\n1,2.0\n4,3.0\n";
    compare_opts o = { .fail_above_pct = 0.0 };
    compare_summary s;
    char *rep;
    compare_text(a, b, &o, &s, &rep);
    /* the repeated tp=1 rows pair up in file order */
    cr_assert_eq(s.matched, 2, "%s", rep);
    cr_assert_eq(s.moved, 0, "%s", rep);
    cr_assert_eq(s.only_old, 1);
    cr_assert_eq(s.only_new, 1);
    cr_assert(strstr(rep, "only in OLD\n  tp=2"), "%s", rep);
    cr_assert(strstr(rep, "only in NEW\n  tp=4"), "%s", rep);
    free(rep);
}

Test(compare, validate_outputs_by_id_with_error_change)
{
    const char *hdr = "id,gpu_type,model,pp,vp,cp,ep,precision,metric_name,metric_value,notes,"
                      "predicted_value,ape_percent,skip_reason,assumed,overrides\n";
    char a[2048], b[2048];
    snprintf(a, sizeof a,
             "%sx-1,H100,m,1,1,1,1,bf16,step_time_s,10,,11,10,,,\n"
             "x-2,H100,m,2,1,1,1,bf16,step_time_s,10,,12,20,,,\n"
             "x-3,B200,m,1,1,1,1,fp8,step_time_s,10,,,,\"rejected: pp\",,\n",
             hdr);
    snprintf(b, sizeof b,
             "%sx-3,B200,m,1,1,1,1,fp8,step_time_s,10,,10.5,5,,,\n"
             "x-2,H100,m,2,1,1,1,bf16,step_time_s,10,,10.2,2,,,\n"
             "x-1,H100,m,1,1,1,1,bf16,step_time_s,10,,11,10,,,\n",
             hdr);
    compare_opts o = { .fail_above_pct = 5.0 };
    compare_summary s;
    char *rep;
    compare_text(a, b, &o, &s, &rep);
    cr_assert(s.validate_kind);
    cr_assert_eq(s.matched, 3);
    cr_assert_eq(s.moved, 2, "%s", rep); /* x-2 by -15%, x-3 gained a prediction */
    cr_assert_eq(s.status_changed, 1);
    cr_assert(strstr(rep, "id=x-2 metric_name=step_time_s"), "%s", rep);
    cr_assert(strstr(rep, "-15.000%"), "%s", rep);
    /* error over the rows predicted in both (x-1, x-2): median 15 -> 6 */
    cr_assert(strstr(rep, "2 rows predicted in OLD, 3 in NEW"), "%s", rep);
    cr_assert(strstr(rep, "15.0 -> 6.0"), "%s", rep);
    cr_assert(strstr(rep, "feature PP>1"), "%s", rep);
    free(rep);
}

Test(compare_cli, exit_status)
{
    char old_p[64], new_p[64], bad_p[64], other_p[64];
    write_tmp(old_p, sweep_old);
    write_tmp(new_p, sweep_new);
    write_tmp(bad_p, "tp,step_time_s\n1,\"2\n");
    write_tmp(other_p, "step_time_s\n1.0\n");
    result r;
    char args[512];
    snprintf(args, sizeof args, "compare %s %s", old_p, old_p);
    run(&r, args);
    cr_assert_eq(r.status, 0, "%s", r.out);
    snprintf(args, sizeof args, "compare %s %s", old_p, new_p);
    run(&r, args);
    cr_assert_eq(r.status, 1, "%s", r.out);
    snprintf(args, sizeof args, "compare %s %s --fail-above 10", old_p, new_p);
    run(&r, args);
    cr_assert_eq(r.status, 1, "the failed run still moved: %s", r.out);
    snprintf(args, sizeof args, "compare %s %s --fail-above 10 --key index", old_p, new_p);
    run(&r, args);
    cr_assert_eq(r.status, 1, "%s", r.out);
    snprintf(args, sizeof args, "compare %s %s", old_p, bad_p);
    run(&r, args);
    cr_assert_eq(r.status, 2, "%s", r.out);
    cr_assert(strstr(r.out, "unterminated"), "%s", r.out);
    snprintf(args, sizeof args, "compare %s %s", old_p, other_p);
    run(&r, args);
    cr_assert_eq(r.status, 2, "%s", r.out);
    cr_assert(strstr(r.out, "no configuration column"), "%s", r.out);
    snprintf(args, sizeof args, "compare %s %s --key nosuch", old_p, new_p);
    run(&r, args);
    cr_assert_eq(r.status, 2, "%s", r.out);
    snprintf(args, sizeof args, "compare %s", old_p);
    run(&r, args);
    cr_assert_eq(r.status, 2, "%s", r.out);
    snprintf(args, sizeof args, "compare %s %s --fail-above -1", old_p, old_p);
    run(&r, args);
    cr_assert_eq(r.status, 2, "%s", r.out);
    remove(old_p);
    remove(new_p);
    remove(bad_p);
    remove(other_p);
}

Test(compare_cli, threshold_separates_small_from_large_moves)
{
    char a_p[64], b_p[64];
    write_tmp(a_p, "tp,step_time_s\n1,10.0\n2,5.0\n");
    write_tmp(b_p, "tp,step_time_s\n1,10.3\n2,5.0\n");
    result r;
    char args[512];
    snprintf(args, sizeof args, "compare %s %s --fail-above 5", a_p, b_p);
    run(&r, args);
    cr_assert_eq(r.status, 0, "3%% < 5%%: %s", r.out);
    snprintf(args, sizeof args, "compare %s %s --fail-above 2.5", a_p, b_p);
    run(&r, args);
    cr_assert_eq(r.status, 1, "3%% > 2.5%%: %s", r.out);
    cr_assert(strstr(r.out, "+3.000%"), "%s", r.out);
    remove(a_p);
    remove(b_p);
}
