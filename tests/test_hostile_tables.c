/* Hostile tables and logs for validate, calibrate and compare: every bad
 * input ends with exit 2 and one message naming the file, line and field
 * (or, for validate, a row skipped with its reason), never a signal or a
 * hang.  The crafted inputs are tests/data/hostile_*; the large ones are
 * written into a scratch directory. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_run.h"
#include "csv.h"
#include "bounds.h"
#include "validate.h"

/* Lines of the output (one message is one line). */
static int lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* Exit 2 with exactly one line holding want (args: what ran). */
static void check_bad(const result *r, const char *args, const char *want)
{
    cr_expect_eq(r->status, 2, "%s: status %d: %s", args, r->status, r->out);
    cr_expect(strstr(r->out, want), "%s: no '%s' in: %s", args, want, r->out);
    cr_expect_eq(lines(r->out), 1, "%s: not one line: %s", args, r->out);
}

/* Runs args and expects exit 2 with exactly one line holding want. */
static void expect_bad(const char *args, const char *want)
{
    result r;
    run(&r, args);
    check_bad(&r, args, want);
}

/* A scratch directory, and files in it. */
static char scratch[64];

static void scratch_make(void)
{
    snprintf(scratch, sizeof scratch, "/tmp/parsim-XXXXXX");
    cr_assert_not_null(mkdtemp(scratch));
}

static void scratch_path(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", scratch, name);
}

static void scratch_remove(const char *const *names)
{
    char p[256];
    for (; *names; names++) {
        scratch_path(p, sizeof p, *names);
        remove(p);
    }
    rmdir(scratch);
}

/* A new file `name` in a fresh scratch directory, its path into path. */
static FILE *scratch_file(const char *name, char *path, size_t len)
{
    scratch_make();
    scratch_path(path, len, name);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    return f;
}

/* Closes f (the scratch file at path) and runs args_fmt with the path for
 * its %s. */
static void run_file(result *r, FILE *f, const char *path, const char *args_fmt)
{
    cr_assert_eq(fclose(f), 0);
    char args[800];
    snprintf(args, sizeof args, args_fmt, path);
    run(r, args);
}

/* run_file, expecting exit 2 with one line naming "<path><tail>"; removes
 * the scratch file `name`. */
static void expect_bad_file(FILE *f, const char *name, const char *path, const char *args_fmt,
                            const char *tail)
{
    static result r;
    run_file(&r, f, path, args_fmt);
    char want[600];
    snprintf(want, sizeof want, "%s%s", path, tail);
    check_bad(&r, args_fmt, want);
    scratch_remove((const char *const[]){ name, NULL });
}

/* ------------------------------------------------------------ validate */

/* The columns validate reads. */
#define VALIDATE_HEADER                                                                            \
    "id,gpu_type,num_gpus,model,seq_len,gbs,mbs,tp,pp,vp,cp,ep,etp,dp,sp,recompute,precision,"   \
    "distributed_optimizer,metric_name,metric_value,notes,flop_convention\n"

Test(hostile_validate, zero_blank_and_huge_sizes_are_skipped_with_their_reason, .timeout = 120)
{
    scratch_make();
    char out[200], args[512];
    scratch_path(out, sizeof out, "pred.csv");
    snprintf(args, sizeof args, "validate tests/data/hostile_validate_sizes.csv --jobs 1 --out %s",
             out);
    result r;
    run(&r, args);
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "12 rows, 0 predicted, 12 skipped"), "%s", r.out);

    /* each row carries the reason that names its column */
    static const char *const reasons[][2] = {
        { "bad-001", "pp '0' is not an integer in 1..262144" },
        { "bad-002", "vp '0' is not an integer in 1..262144" },
        { "bad-003", "tp '0' is not an integer in 1..262144" },
        { "bad-004", "num_gpus '' is not an integer in 1..262144" },
        { "bad-005", "pp '99999999999999' is not an integer in 1..262144" },
        { "bad-006", "metric_value 'nan' is not a positive number" },
        { "bad-007", "metric_value 'inf' is not a positive number" },
        { "bad-008", "notes: the TP size is not an integer in 1..262144" },
        { "bad-009", "notes: layers_override is not a layer count in 1..1024" },
        { "bad-010", "notes: the TP size is not an integer in 1..262144" },
        { "bad-011", "notes: vocab is not a positive integer that fits in 64 bits" },
        { "bad-012", "notes: layers_override is not a layer count in 1..1024" },
    };
    csv_table t;
    sim_err err;
    cr_assert_eq(csv_read_file(out, &t, &err), SIM_OK, "%s", err.msg);
    int id = csv_col(&t, "id"), skip = csv_col(&t, "skip_reason");
    int pred = csv_col(&t, "predicted_value");
    cr_assert_eq(t.nrows, sizeof reasons / sizeof reasons[0]);
    for (size_t k = 0; k < t.nrows; k++) {
        cr_expect_str_eq(csv_cell(&t, k, id), reasons[k][0]);
        cr_expect(strstr(csv_cell(&t, k, skip), reasons[k][1]), "%s: '%s'", reasons[k][0],
                  csv_cell(&t, k, skip));
        cr_expect_str_eq(csv_cell(&t, k, pred), "");
    }
    csv_free(&t);
    /* parsim reads its own output back */
    snprintf(args, sizeof args, "compare %s %s --fail-above 0", out, out);
    run(&r, args);
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "12 matched, 0 only in OLD, 0 only in NEW; 0 moved"), "%s", r.out);
    scratch_remove((const char *const[]){ "pred.csv", NULL });

    /* calibrate reads the same rows: none is left to fit */
    expect_bad("calibrate tests/data/hostile_validate_sizes.csv --quiet --jobs 1",
               "no time or throughput row to fit");
}

Test(hostile_validate, configurations_are_numbered_in_order_of_first_appearance)
{
    /* setups A B A C B A: runs 0 1 0 2 1 0 */
    static const char *const setup[] = { "A", "B", "A", "C", "B", "A" };
    static const size_t want[] = { 0, 1, 0, 2, 1, 0 };
    size_t n = sizeof setup / sizeof setup[0];
    vcase *cases = calloc(n, sizeof *cases);
    cr_assert_not_null(cases);
    for (size_t i = 0; i < n; i++) {
        cases[i].n_over = 2;
        snprintf(cases[i].over[0], VCASE_OVER_LEN, "model.name=x");
        snprintf(cases[i].over[1], VCASE_OVER_LEN, "cluster.num_gpus=%s", setup[i]);
        cases[i].run = 99;
    }
    cases[5].n_over = 1; /* a prefix of A's settings is another setup */
    cr_assert_eq(validate_number_runs(cases, n), SIM_OK);
    for (size_t i = 0; i < 5; i++)
        cr_expect_eq(cases[i].run, want[i], "row %zu: run %zu", i, cases[i].run);
    cr_expect_eq(cases[5].run, 3);
    free(cases);
}

Test(hostile_validate, the_summary_lists_at_most_100_reasons, .timeout = 120)
{
    char path[200];
    FILE *f = scratch_file("reasons.csv", path, sizeof path);
    fputs(VALIDATE_HEADER, f);
    for (int k = 0; k < 150; k++)
        fprintf(f, "r-%d,H100,-%d,llama3-8b,4096,32,1,1,1,1,1,1,,8,,,bf16,,step_time_s,1,,megatron\n",
                k, k + 1);
    result r;
    run_file(&r, f, path, "validate %s --jobs 1");
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "150 rows, 0 predicted, 150 skipped"), "%s", r.out);
    /* in order of first appearance: the first and the 100th, not the 101st */
    cr_expect(strstr(r.out, "num_gpus '-1' is not an integer in 1..262144  [r-0]"), "%s", r.out);
    cr_expect(strstr(r.out, "num_gpus '-100' is not an integer"), "%s", r.out);
    cr_expect(!strstr(r.out, "num_gpus '-101'"), "%s", r.out);
    cr_expect(strstr(r.out, "... and 50 more reasons"), "%s", r.out);
    scratch_remove((const char *const[]){ "reasons.csv", NULL });
}

Test(hostile_validate, more_rows_than_validate_runs_is_bad_input, .timeout = 120)
{
    char path[200], tail[200];
    FILE *f = scratch_file("many.csv", path, sizeof path);
    fputs(VALIDATE_HEADER, f);
    for (long long k = 0; k <= LIMIT_VALIDATE_ROWS; k++)
        fprintf(f, "r-%lld,H100,8,llama3-8b,4096,32,1,1,1,1,1,1,,8,,,bf16,,step_time_s,1,,megatron\n",
                k);
    snprintf(tail, sizeof tail, ":%lld: more than %lld rows to run (LIMIT_VALIDATE_ROWS)",
             LIMIT_VALIDATE_ROWS + 2, LIMIT_VALIDATE_ROWS);
    expect_bad_file(f, "many.csv", path, "validate %s", tail);
}

Test(hostile_validate, a_rows_condition_too_long_is_not_cut_short)
{
    char args[1024];
    int n = snprintf(args, sizeof args, "validate tests/data/validate_mini.csv --rows id=");
    memset(args + n, 'x', 300);
    args[n + 300] = '\0';
    /* the message quotes its first 40 characters */
    char want[200];
    n = snprintf(want, sizeof want, "--rows: 'id=");
    memset(want + n, 'x', 37);
    snprintf(want + n + 37, sizeof want - (size_t)n - 37,
             "...' is not NAME=PATTERN or NAME!=PATTERN (at most 255 characters)");
    expect_bad(args, want);
}

/* ----------------------------------------------------------------- CSV */

Test(hostile_csv, a_nul_byte_is_rejected_naming_the_line)
{
    scratch_make();
    char out[200], args[512];
    scratch_path(out, sizeof out, "pred.csv");
    snprintf(args, sizeof args, "validate tests/data/hostile_nul.csv --out %s", out);
    expect_bad(args, "tests/data/hostile_nul.csv:3: byte 0x00 is not text");
    cr_expect_neq(access(out, F_OK), 0, "no output is written for a rejected input");
    rmdir(scratch);
    expect_bad("calibrate tests/data/hostile_nul.csv --quiet",
               "tests/data/hostile_nul.csv:3: byte 0x00 is not text");
    expect_bad("compare tests/data/validate_mini.csv tests/data/hostile_nul.csv",
               "tests/data/hostile_nul.csv:3: byte 0x00 is not text");
}

Test(hostile_csv, control_characters_are_not_text)
{
    static const char *const bad[][2] = {
        { "a,b\n1,x\x1fy\n", "t.csv:2: byte 0x1f" },
        { "a,b\n1,2\n\"q\x01\",3\n", "t.csv:3: byte 0x01" },
        { "a,b\n1,2\x7f\n", "t.csv:2: byte 0x7f" },
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        csv_table t;
        sim_err err;
        sim_err_clear(&err);
        cr_expect_eq(csv_parse(bad[k][0], strlen(bad[k][0]), "t.csv", &t, &err), SIM_EINVAL);
        char msg[1024];
        sim_err_format(&err, msg, sizeof msg);
        cr_expect(strstr(msg, bad[k][1]), "want '%s', got '%s'", bad[k][1], msg);
        cr_expect_eq(t.nrows, 0);
    }
    /* tabs and CRLF are text */
    csv_table t;
    sim_err err;
    const char *ok = "a,b\r\n\t1 ,2\r\n";
    cr_assert_eq(csv_parse(ok, strlen(ok), "t.csv", &t, &err), SIM_OK, "%s", err.msg);
    int64_t v = 0;
    cr_expect(csv_num_int(csv_cell(&t, 0, 0), &v) && v == 1, "blanks around a number are trimmed");
    csv_free(&t);
}

Test(hostile_csv, cells_are_finite_numbers)
{
    double d = 7;
    int64_t i = 7;
    static const char *const not_numbers[] = { "", " ", "nan", "inf", "-inf", "1e999", "0x1p3",
                                               "1.5x", "1 2" };
    for (size_t k = 0; k < sizeof not_numbers / sizeof not_numbers[0]; k++)
        cr_expect(!csv_num_double(not_numbers[k], &d), "'%s' taken as a number", not_numbers[k]);
    cr_expect_eq(d, 7);
    cr_expect(csv_num_double(" 2.5\t", &d) && d == 2.5);
    cr_expect(!csv_num_int("2.5", &i) && !csv_num_int("99999999999999999999", &i));
    cr_expect(csv_num_int(" 12 ", &i) && i == 12);
}

Test(hostile_csv, more_rows_than_the_limit_is_bad_input, .timeout = 120)
{
    char path[200], tail[200];
    FILE *f = scratch_file("big.csv", path, sizeof path);
    fputs("id,step_time_s\n", f);
    for (long long r = 0; r <= LIMIT_CSV_ROWS; r++)
        fprintf(f, "%lld,1\n", r);
    snprintf(tail, sizeof tail, ":%lld: more than %lld data rows (LIMIT_CSV_ROWS)",
             LIMIT_CSV_ROWS + 2, LIMIT_CSV_ROWS);
    /* the file is given twice: the first is read first */
    char args[600];
    snprintf(args, sizeof args, "compare %s %%s", path);
    expect_bad_file(f, "big.csv", path, args, tail);
}

/* ------------------------------------------------------------- compare */

Test(hostile_compare, a_non_finite_value_where_the_baseline_has_a_number_fails_the_gate)
{
    result r;
    run(&r, "compare tests/data/hostile_compare_base.csv tests/data/hostile_compare_nonfinite.csv "
            "--fail-above 1");
    cr_expect_eq(r.status, 1, "%s", r.out);
    cr_expect(strstr(r.out, "2 moved more than 1% (2 of them gained or lost a value)"), "%s", r.out);
    cr_expect(strstr(r.out, "\"1.25\" -> \"nan\" (no longer a finite number)"), "%s", r.out);
    cr_expect(strstr(r.out, "\"8800\" -> \"inf\" (no longer a finite number)"), "%s", r.out);
    /* " 11.0 " is 11.0: not a change */
    cr_expect(!strstr(r.out, "num_gpus=128"), "%s", r.out);

    /* and back */
    run(&r, "compare tests/data/hostile_compare_nonfinite.csv tests/data/hostile_compare_base.csv "
            "--fail-above 1");
    cr_expect_eq(r.status, 1, "%s", r.out);
    cr_expect(strstr(r.out, "\"nan\" -> \"1.25\" (now a finite number)"), "%s", r.out);

    /* the same file against itself passes */
    run(&r, "compare tests/data/hostile_compare_nonfinite.csv "
            "tests/data/hostile_compare_nonfinite.csv --fail-above 1");
    cr_expect_eq(r.status, 0, "%s", r.out);

    /* validate outputs: predicted_value nan or -inf */
    run(&r, "compare tests/data/hostile_compare_validate_base.csv "
            "tests/data/hostile_compare_validate_nonfinite.csv --fail-above 1");
    cr_expect_eq(r.status, 1, "%s", r.out);
    cr_expect(strstr(r.out, "2 moved more than 1% (2 of them gained or lost a value)"), "%s", r.out);
    cr_expect(strstr(r.out, "\"0.45\" -> \"-inf\" (no longer a finite number)"), "%s", r.out);
}

Test(hostile_compare, fail_above_is_a_finite_percentage)
{
    static const char *const bad[] = { "nan", "inf", "1e999", "-1", "''", "1x", "5%%", "0x10" };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char args[512];
        snprintf(args, sizeof args,
                 "compare tests/data/hostile_compare_base.csv tests/data/hostile_compare_base.csv "
                 "--fail-above %s",
                 bad[k]);
        expect_bad(args, "--fail-above needs a finite percentage >= 0");
    }
    result r;
    run(&r, "compare tests/data/hostile_compare_base.csv tests/data/hostile_compare_base.csv "
            "--fail-above 2.5%");
    cr_expect_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "moved more than 2.5%"), "%s", r.out);
}

Test(hostile_compare, rows_in_one_file_only_are_listed_up_to_list)
{
    char path[200];
    FILE *f = scratch_file("more.csv", path, sizeof path);
    fputs("model,num_gpus,step_time_s\n", f);
    for (int k = 0; k < 1000; k++)
        fprintf(f, "m%d,8,1.0\n", k);
    result r;
    run_file(&r, f, path, "compare tests/data/hostile_compare_base.csv %s --list 3");
    cr_expect_eq(r.status, 1, "%s", r.out);
    cr_expect(strstr(r.out, "  ... and 997 more only in NEW\n"), "%s", r.out);
    cr_expect(strstr(r.out, "only in OLD\n  model=llama3-70b num_gpus=128\n"), "%s", r.out);
    cr_expect(strstr(r.out, "  ... and 1 more only in OLD\n"), "%s", r.out);
    cr_expect_lt(lines(r.out), 30, "%s", r.out);
    scratch_remove((const char *const[]){ "more.csv", NULL });
}

/* ---------------------------------------------------- calibrate --nccl-tests */

#define NCCL_ARGS "cluster.topology=dgx-a100 --quiet"
#define NCCL_CMD "calibrate --nccl-tests %s " NCCL_ARGS

Test(hostile_nccl, non_finite_and_negative_fields_name_line_and_field)
{
    expect_bad("calibrate --nccl-tests tests/data/hostile_nccl_nan_size.log " NCCL_ARGS,
               "tests/data/hostile_nccl_nan_size.log:10: size: 'nan' is not a whole number of "
               "bytes in 0..2^53");
    expect_bad("calibrate --nccl-tests tests/data/hostile_nccl_negative_size.log " NCCL_ARGS,
               "tests/data/hostile_nccl_negative_size.log:10: size: '-65536' is not a whole "
               "number of bytes in 0..2^53");
    expect_bad("calibrate --nccl-tests tests/data/hostile_nccl_inf_time.log " NCCL_ARGS,
               "tests/data/hostile_nccl_inf_time.log:10: time: 'inf' is not a time in "
               "microseconds, > 0 and at most 1.8e+13 (LIMIT_DURATION_S)");
    expect_bad("calibrate --nccl-tests tests/data/hostile_nccl_negative_time.log " NCCL_ARGS,
               "tests/data/hostile_nccl_negative_time.log:10: time: '-46.80' is not a time in "
               "microseconds, > 0");
    expect_bad("calibrate --nccl-tests tests/data/hostile_nccl_huge_size.log " NCCL_ARGS,
               "tests/data/hostile_nccl_huge_size.log:10: size: '1e300' is not a whole number of "
               "bytes in 0..2^53");
    expect_bad("calibrate --nccl-tests tests/data/hostile_nccl_huge_time.log " NCCL_ARGS,
               "tests/data/hostile_nccl_huge_time.log:10: time: '1e300' is not a time in "
               "microseconds, > 0 and at most 1.8e+13 (LIMIT_DURATION_S)");
}

Test(hostile_nccl, ranks_beyond_the_gpu_limit, .timeout = 120)
{
    /* a parsim net table that claims 99,999,999,999 GPUs */
    expect_bad("calibrate --nccl-tests tests/data/hostile_nccl_ranks.log " NCCL_ARGS,
               "tests/data/hostile_nccl_ranks.log:1: GPUs: '99999999999' is not a GPU count in "
               "1..262144 (LIMIT_GPUS)");

    /* one "# Rank" line more than the limit */
    char path[200], tail[200];
    FILE *f = scratch_file("ranks.log", path, sizeof path);
    fputs("# all_reduce_perf\n", f);
    for (long long k = 0; k <= LIMIT_GPUS; k++)
        fprintf(f, "#  Rank %lld Group 0 Pid 1 on h device 0 [0x0] GPU\n", k);
    snprintf(tail, sizeof tail, ":%lld: Rank: more than %lld ranks (LIMIT_GPUS)", LIMIT_GPUS + 2,
             LIMIT_GPUS);
    expect_bad_file(f, "ranks.log", path, NCCL_CMD, tail);
}

Test(hostile_nccl, lines_beyond_the_log_limit, .timeout = 120)
{
    char path[200], tail[200];
    FILE *f = scratch_file("long.log", path, sizeof path);
    for (long long k = 0; k <= LIMIT_LOG_LINES; k++)
        fputs("#\n", f);
    snprintf(tail, sizeof tail, ":%lld: more than %lld lines (LIMIT_LOG_LINES)",
             LIMIT_LOG_LINES + 1, LIMIT_LOG_LINES);
    expect_bad_file(f, "long.log", path, NCCL_CMD, tail);
}

Test(hostile_nccl, a_nul_byte_in_the_log)
{
    static const char text[] = "# all_reduce_perf\n"
                               "#       size         count      type   redop    root     time\n"
                               "       32768          8192     float     sum      -1    43.83\n"
                               "       65536         16384     float     sum      -1  \0 46.80\n";
    char path[200];
    FILE *f = scratch_file("nul.log", path, sizeof path);
    cr_assert_eq(fwrite(text, 1, sizeof text - 1, f), sizeof text - 1);
    expect_bad_file(f, "nul.log", path, NCCL_CMD, ":4: a NUL byte");
}

/* ------------------------------------------------------ SOURCE_DATE_EPOCH */

Test(hostile_calibrate, source_date_epoch_gives_the_same_bytes, .timeout = 120)
{
    /* without --out the parameter file goes to standard output after the
     * report, through the same writer */
    cr_assert_eq(setenv("SOURCE_DATE_EPOCH", "1700000000", 1), 0);
    static result r[2];
    for (int k = 0; k < 2; k++) {
        run(&r[k], "calibrate --nccl-tests tests/data/nccl_allreduce_8xa100.log " NCCL_ARGS);
        cr_assert_eq(r[k].status, 0, "%s", r[k].out);
    }
    /* the date is the epoch's, not today's */
    cr_expect(strstr(r[0].out, "# parsim calibrate, 2023-11-14:"), "%s", r[0].out);
    cr_expect_str_eq(r[0].out, r[1].out);

    static const char *const bad[] = { "", "abc", "-5", "0x10", "1.5", "99999999999999999999" };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        cr_assert_eq(setenv("SOURCE_DATE_EPOCH", bad[k], 1), 0);
        char want[200];
        snprintf(want, sizeof want, "SOURCE_DATE_EPOCH: '%s' is not a decimal count of seconds",
                 bad[k]);
        expect_bad("calibrate --nccl-tests tests/data/nccl_allreduce_8xa100.log " NCCL_ARGS, want);
    }
    unsetenv("SOURCE_DATE_EPOCH");
}
