#define _DEFAULT_SOURCE /* mkdtemp */
/* parsim sweep and merge: the row order and bytes do not depend on how the
 * sweep was run (threads, shards, MPI ranks, a kill and a resume); invalid
 * configurations are rows with reasons; a bad spec exits 2 naming file:line.
 * Also the progress meter, which prints only when asked to or on a tty. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli_run.h"
#include "scratch.h"
#include "progress.h"
#include "sweep.h"


static void assert_same_file(const char *a, const char *b)
{
    size_t na, nb;
    char *x = read_file(a, &na), *y = read_file(b, &nb);
    size_t k = 0;
    while (k < na && k < nb && x[k] == y[k])
        k++;
    cr_assert(na == nb && k == na, "%s (%zu bytes) and %s (%zu bytes) differ at byte %zu", a, na, b, nb, k);
    free(x);
    free(y);
}


/* A small dense sweep (Llama 3 8B on 8 H100s): 4 x 3 x 2 x 2 = 48
 * configurations, some invalid (TP*PP > 8 GPUs; VP without PP > 2). */
#define SMALL_SPEC                                                                                   \
    "# a test sweep\n"                                                                               \
    "sweep: {\n"                                                                                     \
    "  set = [ \"model.name=llama3-8b\", \"cluster.topology=dgx-h100\", \"cluster.num_gpus=8\",\n"   \
    "          \"train.global_batch_size=32\" ];\n"                                                  \
    "  vary = (\n"                                                                                   \
    "    { key = \"model.tensor_model_parallel_size\"; from = 1; to = 8; mul = 2; },\n"              \
    "    { key = \"model.pipeline_model_parallel_size\"; values = [1, 2, 4]; },\n"                   \
    "    { keys = [\"model.virtual_pipeline_model_parallel_size\", \"train.micro_batch_size\"];\n"   \
    "      rows = ( (1, 1), (2, 2) ); },\n"                                                          \
    "    { key = \"model.recompute_granularity\"; values = [\"none\", \"full\"]; }\n"                \
    "  );\n"                                                                                         \
    "};\n"
#define SMALL_TOTAL 48

/* The same with a global-batch axis in front: 192 configurations, long
 * enough to be killed half-way. */
#define LONG_SPEC                                                                                    \
    "sweep: {\n"                                                                                     \
    "  set = [ \"model.name=llama3-8b\", \"cluster.topology=dgx-h100\", \"cluster.num_gpus=8\" ];\n" \
    "  vary = (\n"                                                                                   \
    "    { key = \"train.global_batch_size\"; values = [32, 64, 128, 256]; },\n"                     \
    "    { key = \"model.tensor_model_parallel_size\"; from = 1; to = 8; mul = 2; },\n"              \
    "    { key = \"model.pipeline_model_parallel_size\"; values = [1, 2, 4]; },\n"                   \
    "    { keys = [\"model.virtual_pipeline_model_parallel_size\", \"train.micro_batch_size\"];\n"   \
    "      rows = ( (1, 1), (2, 2) ); },\n"                                                          \
    "    { key = \"model.recompute_granularity\"; values = [\"none\", \"full\"]; }\n"                \
    "  );\n"                                                                                         \
    "};\n"

/* Writes spec text to dir/name.cfg and runs it uninterrupted with --jobs 1
 * into dir/name-ref.csv (the reference every other way must equal). */
static void reference(const char *name, const char *spec_text, char *spec, char *ref, size_t len)
{
    char f[64];
    snprintf(f, sizeof f, "%s.cfg", name);
    path_in(spec, len, f);
    write_file(spec, spec_text);
    snprintf(f, sizeof f, "%s-ref.csv", name);
    path_in(ref, len, f);
    result r;
    runf(&r, "sweep %s --jobs 1 --out %s", spec, ref);
    cr_assert_eq(r.status, 0, "%s", r.out);
}

Test(sweep, jobs_2_writes_the_same_bytes_as_jobs_1, .timeout = 120)
{
    make_dir();
    char spec[256], ref[256], out[256];
    reference("small", SMALL_SPEC, spec, ref, sizeof spec);
    size_t n;
    char *text = read_file(ref, &n);
    cr_assert_eq(count_lines(text), SMALL_TOTAL + 2, "%s", text); /* header, line 2 */
    free(text);
    result r;
    for (int jobs = 2; jobs <= 3; jobs++) {
        path_in(out, sizeof out, "jobs.csv");
        remove(out);
        runf(&r, "sweep %s --jobs %d --out %s", spec, jobs, out);
        cr_assert_eq(r.status, 0, "%s", r.out);
        assert_same_file(ref, out);
    }
    /* stdout is the same stream as --out */
    path_in(out, sizeof out, "stdout.csv");
    runf(&r, "sweep %s --jobs 2 > %s", spec, out);
    cr_assert_eq(r.status, 0, "%s", r.out);
    assert_same_file(ref, out);
    remove_dir();
}

Test(sweep, shards_merged_equal_the_unsharded_sweep, .timeout = 120)
{
    make_dir();
    char spec[256], ref[256], out[256], merged[256];
    reference("small", SMALL_SPEC, spec, ref, sizeof spec);
    result r;
    static const int counts[] = { 1, 2, 3, 5, 50 }; /* 50: more shards than configurations */
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        int n = counts[c];
        char args[8192];
        path_in(merged, sizeof merged, "merged.csv");
        int w = snprintf(args, sizeof args, "merge %s", merged);
        for (int k = 1; k <= n; k++) {
            char name[64];
            snprintf(name, sizeof name, "shard-%d-of-%d.csv", k, n);
            path_in(out, sizeof out, name);
            runf(&r, "sweep %s --shard %d/%d --jobs %d --out %s", spec, k, n, 1 + k % 2, out);
            cr_assert_eq(r.status, 0, "%s", r.out);
            /* every shard's rows are configurations k-1, k-1+n, ... */
            size_t len;
            char *text = read_file(out, &len);
            int expect_rows = SMALL_TOTAL > k - 1 ? (SMALL_TOTAL - (k - 1) + n - 1) / n : 0;
            cr_assert_eq(count_lines(text), expect_rows + 2, "shard %d/%d", k, n);
            free(text);
            /* listed in reverse: merge restores the order by index */
            w += snprintf(args + w, sizeof args - (size_t)w, " %s", out);
        }
        run(&r, args);
        cr_assert_eq(r.status, 0, "%s: %s", args, r.out);
        assert_same_file(ref, merged);
    }
    remove_dir();
}

/* Cuts the reference after `keep` bytes (mid-line as a kill leaves it),
 * resumes, and checks the result equals the reference. */
static void resume_from(const char *spec, const char *ref, size_t keep, int jobs)
{
    size_t n;
    char *text = read_file(ref, &n);
    char out[256];
    path_in(out, sizeof out, "cut.csv");
    FILE *f = fopen(out, "w");
    cr_assert_not_null(f);
    fwrite(text, 1, keep < n ? keep : n, f);
    fclose(f);
    free(text);
    result r;
    runf(&r, "sweep %s --jobs %d --out %s", spec, jobs, out);
    cr_assert_eq(r.status, 0, "cut at %zu: %s", keep, r.out);
    assert_same_file(ref, out);
}

Test(sweep, a_sweep_cut_anywhere_resumes_to_the_same_file, .timeout = 120)
{
    make_dir();
    char spec[256], ref[256];
    reference("small", SMALL_SPEC, spec, ref, sizeof spec);
    size_t n;
    free(read_file(ref, &n));
    /* nothing, inside the header, at a line end, mid-row, complete */
    size_t cuts[] = { 0, 10, n / 3, n / 2, n - 5, n };
    for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++)
        resume_from(spec, ref, cuts[k], 1 + (int)(k % 2));
    /* a cut exactly after a row */
    char *text = read_file(ref, &n);
    char *nl = strchr(strchr(text, '\n') + 1, '\n');
    size_t at = (size_t)(nl - text) + 1;
    free(text);
    resume_from(spec, ref, at, 2);
    remove_dir();
}

Test(sweep, a_sweep_killed_midway_and_rerun_equals_an_uninterrupted_one, .timeout = 120)
{
    make_dir();
    char spec[256], ref[256], out[256];
    reference("long", LONG_SPEC, spec, ref, sizeof spec);
    path_in(out, sizeof out, "killed.csv");

    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        if (chdir(PARSIM_SOURCE_DIR) != 0)
            _exit(127);
        if (!freopen("/dev/null", "w", stderr))
            _exit(127);
        execl(PARSIM_BINARY, PARSIM_BINARY, "sweep", spec, "--jobs", "2", "--out", out, (char *)NULL);
        _exit(127);
    }
    /* wait for a few rows, then SIGKILL: no chance to clean up */
    struct timespec nap = { 0, 200000 };
    int status = 0;
    bool exited = false;
    for (int k = 0; k < 100000 && !exited; k++) {
        struct stat st;
        if (stat(out, &st) == 0 && st.st_size > 4000)
            break;
        exited = waitpid(pid, &status, WNOHANG) == pid;
        nanosleep(&nap, NULL);
    }
    if (!exited) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    /* what the killed run wrote is a prefix of the reference */
    size_t nk, nr;
    char *killed = read_file(out, &nk), *full = read_file(ref, &nr);
    cr_assert(nk <= nr && memcmp(killed, full, nk) == 0, "the killed run wrote something else");
    cr_log_info("killed after %d of %d lines", count_lines(killed), count_lines(full));
    free(killed);
    free(full);

    result r;
    runf(&r, "sweep %s --jobs 2 --out %s", spec, out);
    cr_assert_eq(r.status, 0, "%s", r.out);
    assert_same_file(ref, out);
    remove_dir();
}

Test(sweep, resume_refuses_another_sweeps_output, .timeout = 60)
{
    make_dir();
    char spec[256], ref[256], other[256];
    reference("small", SMALL_SPEC, spec, ref, sizeof spec);
    path_in(other, sizeof other, "other.csv");
    write_file(other, "a,b,c\n1,2,3\n");
    result r;
    runf(&r, "sweep %s --out %s", spec, other);
    cr_assert_eq(r.status, 2, "%s", r.out);
    cr_assert(strstr(r.out, "other.csv:1") != NULL, "%s", r.out);
    size_t n;
    char *text = read_file(other, &n);
    cr_assert_str_eq(text, "a,b,c\n1,2,3\n", "the foreign file was changed");
    free(text);
    /* one long line that is no header: refused, not read whole or cut */
    size_t big = 4 << 20;
    char *blob = malloc(big + 1);
    memset(blob, 'i', big);
    blob[big] = '\0';
    write_file(other, blob);
    runf(&r, "sweep %s --out %s", spec, other);
    cr_assert_eq(r.status, 2, "%s", r.out);
    cr_assert(strstr(r.out, "other.csv:1") != NULL, "%s", r.out);
    text = read_file(other, &n);
    cr_assert(n == big && !memcmp(text, blob, big), "the foreign file was changed");
    free(text);
    free(blob);
    /* a shard's output is not the unsharded sweep's */
    runf(&r, "sweep %s --shard 2/2 --out %s/shard.csv", spec, dir);
    cr_assert_eq(r.status, 0, "%s", r.out);
    runf(&r, "sweep %s --out %s/shard.csv", spec, dir);
    cr_assert_eq(r.status, 2, "%s", r.out);
    cr_assert(strstr(r.out, "shard.csv:2") != NULL, "%s", r.out);
    remove_dir();
}

Test(sweep, invalid_configurations_are_rows_with_the_reason, .timeout = 60)
{
    make_dir();
    char spec[256], ref[256];
    reference("small", SMALL_SPEC, spec, ref, sizeof spec);
    size_t n;
    char *text = read_file(ref, &n);
    char *save = NULL;
    char *line = strtok_r(text, "\n", &save);
    static const char head[] = "index,model.tensor_model_parallel_size,model.pipeline_model_parallel_size,"
                               "model.virtual_pipeline_model_parallel_size,train.micro_batch_size,"
                               "model.recompute_granularity,model,topology,world_size,";
    cr_assert(strncmp(line, head, sizeof head - 1) == 0, "header: %s", line);
    cr_assert(strlen(line) > 6 && !strcmp(line + strlen(line) - 6, ",error"), "header: %s", line);
    /* line 2 names the spec, the shard and the rows of a finished file */
    line = strtok_r(NULL, "\n", &save);
    sweep_meta m;
    cr_assert(sweep_meta_parse(line, &m), "line 2: %s", line);
    cr_assert(m.total == SMALL_TOTAL && m.shard_k == 1 && m.shard_n == 1 && m.rows == SMALL_TOTAL, "%s", line);
    int ok = 0, bad = 0;
    for (int64_t want = 0; (line = strtok_r(NULL, "\n", &save)); want++) {
        int64_t idx;
        cr_assert(sweep_row_index(line, &idx) && idx == want, "row %ld: %s", (long)want, line);
        size_t len = strlen(line);
        if (line[len - 1] == ',') {
            ok++;
            cr_assert(strstr(line, ",llama3-8b,dgx-h100,8,") != NULL, "%s", line);
        } else {
            bad++;
            /* TP 8 x PP 2 > 8 GPUs: the reason names the key */
            if (!strncmp(line, "40,", 3))
                cr_assert(strstr(line, "cluster.num_gpus") != NULL, "%s", line);
        }
    }
    cr_assert(ok > 0 && bad > 0, "%d valid, %d invalid", ok, bad);
    free(text);
    /* compare reads a sweep output (its line 2 is a comment) */
    result r;
    runf(&r, "compare %s %s", ref, ref);
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_assert(strstr(r.out, "48 matched") != NULL, "%s", r.out);
    remove_dir();
}

typedef struct bad_spec {
    const char *text;
    const char *where; /* ":line" that must follow the file name */
    const char *what;  /* text the message must hold */
} bad_spec;

static const bad_spec bad_specs[] = {
    {"sweep: {\n  vary = (\n    { key = \"model.hiden_size\"; values = [1, 2]; }\n  );\n};\n", ":3",
     "model.hidden_size"},
    {"sweep: {\n  vary = (\n    { key = \"model.num_layers\"; values = [1, 2 ; }\n  );\n};\n", ":3", "syntax"},
    {"sweep: {\n  base = \"no-such-run.cfg\";\n};\n", ":2", "no-such-run.cfg"},
    {"sweep: {\n  sett = [\"a=1\"];\n};\n", ":2", "sett"},
    {"sweep: {\n  vary = (\n    { key = \"train.micro_batch_size\"; from = 4; to = 1; }\n  );\n};\n", ":3",
     "step"},
    {"sweep: {\n  vary = (\n    { key = \"train.micro_batch_size\"; values = []; }\n  );\n};\n", ":3", "empty"},
    {"sweep: {\n  vary = (\n    { keys = [\"train.micro_batch_size\", \"model.num_layers\"];\n"
     "      rows = ( (1, 2),\n               (3) ); }\n  );\n};\n",
     ":5", "2 values"},
    {"sweep: {\n  set = [\"train.micro_batch_size=2\"];\n  vary = (\n"
     "    { key = \"train.micro_batch_size\"; values = [1]; }\n  );\n};\n",
     ":4", "train.micro_batch_size"},
    {"sweep: {\n  vary = (\n    { key = \"train.micro_batch_size\"; values = [1]; },\n"
     "    { key = \"train.micro_batch_size\"; values = [2]; }\n  );\n};\n",
     ":4", "twice"},
    {"sweep: {\n  set = [ \"model.num_layers\" ];\n};\n", ":2", "KEY=VALUE"},
    {"runs = 3;\n", ":1", "runs"},
    /* a key holding '=' would split into another key and value */
    {"sweep: {\n  vary = (\n    { key = \"model.num_layers=2\"; values = [1]; }\n  );\n};\n", ":3",
     "model.num_layers=2: a key name cannot hold '='"},
    {"sweep: {\n  vary = (\n    { keys = [\"train.micro_batch_size\", \"a=b\"];\n      rows = ( (1, 2) ); }\n"
     "  );\n};\n",
     ":3", "a=b: a key name cannot hold '='"},
    /* the limit on configurations, checked before anything is expanded */
    {"sweep: {\n  vary = (\n    { key = \"sim.seed\"; from = 1; to = 1000; },\n"
     "    { key = \"train.micro_batch_size\"; from = 1; to = 1001; }\n  );\n};\n",
     ":2", "vary: the axes make more than 1000000 configurations"},
    {"sweep: {\n  vary = (\n    { key = \"sim.seed\"; from = -9223372036854775807L; to = 9223372036854775807L; }\n"
     "  );\n};\n",
     ":3", "sim.seed: range has more than 1000000 values"},
    {"sweep: {\n  vary = (\n    { key = \"sim.seed\"; from = 1; to = 1e300; mul = 1.0000001; }\n  );\n};\n", ":3",
     "more than 1000000 values"},
    {"sweep: {\n  vary = (\n    { key = \"sim.seed\"; from = -1e308; to = 1e308; step = 1e307; }\n  );\n};\n", ":3",
     "more than 1000000 values"},
    /* the count rounds up to 2^1024, which is no double */
    {"sweep: {\n  vary = (\n    { key = \"sim.seed\"; from = 1.0; to = 1.7976931348623157e308; mul = 2.0; }\n  );\n};\n",
     ":3", "sim.seed: range value 1024 overflows"},
    /* libconfig 1.5 would read these as other numbers */
    {"sweep: {\n  vary = (\n    { key = \"sim.seed\"; from = 1;\n      to = 9223372036854775807; }\n  );\n};\n", ":4",
     "integer 9223372036854775807 does not fit in 32 bits: write 9223372036854775807L"},
    {"sweep: {\n  vary = (\n    { key = \"sim.seed\"; values = [ 9223372036854775808L ]; }\n  );\n};\n", ":3",
     "beyond the 64-bit range"},
};

Test(sweep, a_bad_spec_exits_2_naming_file_and_line, .timeout = 60)
{
    make_dir();
    char spec[256];
    path_in(spec, sizeof spec, "bad.cfg");
    result r;
    for (size_t k = 0; k < sizeof bad_specs / sizeof bad_specs[0]; k++) {
        write_file(spec, bad_specs[k].text);
        runf(&r, "sweep %s", spec);
        char where[300];
        snprintf(where, sizeof where, "%s%s", spec, bad_specs[k].where);
        cr_expect_eq(r.status, 2, "case %zu exited %d: %s", k, r.status, r.out);
        cr_expect(strstr(r.out, where) != NULL, "case %zu: no %s in: %s", k, where, r.out);
        cr_expect(strstr(r.out, bad_specs[k].what) != NULL, "case %zu: no '%s' in: %s", k, bad_specs[k].what,
                  r.out);
        cr_expect(strncmp(r.out, "parsim: ", 8) == 0 && count_lines(r.out) == 1, "case %zu: %s", k, r.out);
    }
    /* bad command lines */
    static const char *const args[] = { "sweep", "sweep x.cfg --shard 3/2", "sweep x.cfg --shard 0/2",
                                        "sweep x.cfg --shard 1/9223372036854775807", "sweep x.cfg --shard 1/0x",
                                        "sweep x.cfg --jobs -1", "sweep x.cfg --frob", "sweep x.cfg y.cfg",
                                        "merge out.csv" };
    for (size_t k = 0; k < sizeof args / sizeof args[0]; k++) {
        run(&r, args[k]);
        cr_expect_eq(r.status, 2, "`%s` exited %d: %s", args[k], r.status, r.out);
    }
    remove_dir();
}

Test(sweep, merge_rejects_missing_duplicate_and_unfinished_shards, .timeout = 60)
{
    make_dir();
    char spec[256], ref[256];
    reference("small", SMALL_SPEC, spec, ref, sizeof spec);
    result r;
    for (int k = 1; k <= 3; k++) {
        runf(&r, "sweep %s --shard %d/3 --out %s/s%d.csv", spec, k, dir, k);
        cr_assert_eq(r.status, 0, "%s", r.out);
    }
    runf(&r, "merge %s/m.csv %s/s1.csv %s/s3.csv", dir, dir, dir);
    cr_expect_eq(r.status, 2, "%s", r.out);
    cr_expect(strstr(r.out, "configuration 1 is in no shard") != NULL, "%s", r.out);
    runf(&r, "merge %s/m.csv %s/s1.csv %s/s2.csv %s/s3.csv %s/s2.csv", dir, dir, dir, dir, dir);
    cr_expect_eq(r.status, 2, "%s", r.out);
    cr_expect(strstr(r.out, "in two shards") != NULL, "%s", r.out);
    /* s2 cut mid-row */
    char s2[256];
    size_t n;
    path_in(s2, sizeof s2, "s2.csv");
    char *text = read_file(s2, &n);
    text[n - 7] = '\0';
    write_file(s2, text);
    free(text);
    runf(&r, "merge %s/m.csv %s/s1.csv %s/s2.csv %s/s3.csv", dir, dir, dir, dir);
    cr_expect_eq(r.status, 2, "%s", r.out);
    cr_expect(strstr(r.out, "did not finish") != NULL, "%s", r.out);
    struct stat st;
    cr_expect(stat(path_in(s2, sizeof s2, "m.csv"), &st) != 0, "a failed merge left its output");
    /* headers of different sweeps */
    write_file(path_in(s2, sizeof s2, "s2.csv"), "index,x,error\n");
    runf(&r, "merge %s/m.csv %s/s1.csv %s/s2.csv", dir, dir, dir);
    cr_expect_eq(r.status, 2, "%s", r.out);
    cr_expect(strstr(r.out, "header") != NULL, "%s", r.out);
    remove_dir();
}

/* Keeps the first `lines` lines of path (cut exactly after a line). */
static void keep_lines(const char *path, int lines)
{
    size_t n;
    char *text = read_file(path, &n);
    char *p = text;
    for (int k = 0; k < lines; k++) {
        p = strchr(p, '\n');
        cr_assert_not_null(p, "%s has fewer than %d lines", path, lines);
        p++;
    }
    *p = '\0';
    write_file(path, text);
    free(text);
}

Test(sweep, merge_refuses_a_shard_killed_after_a_whole_row, .timeout = 60)
{
    make_dir();
    char spec[256], ref[256], s2[256];
    reference("small", SMALL_SPEC, spec, ref, sizeof spec);
    result r;
    for (int k = 1; k <= 3; k++) {
        runf(&r, "sweep %s --shard %d/3 --out %s/s%d.csv", spec, k, dir, k);
        cr_assert_eq(r.status, 0, "%s", r.out);
    }
    /* header, line 2 and 5 of its 16 rows: every row whole */
    keep_lines(path_in(s2, sizeof s2, "s2.csv"), 7);
    runf(&r, "merge %s/m.csv %s/s1.csv %s/s2.csv %s/s3.csv", dir, dir, dir, dir);
    cr_assert_eq(r.status, 2, "%s", r.out);
    cr_assert(strstr(r.out, s2) && strstr(r.out, "5 of the 16 rows of shard 2/3") && strstr(r.out, "did not finish"),
              "%s", r.out);
    cr_assert_eq(count_lines(r.out), 1, "%s", r.out);
    /* the last shard cut after a whole row: nothing follows it to notice a gap */
    runf(&r, "sweep %s --shard 2/3 --out %s", spec, s2);
    cr_assert_eq(r.status, 0, "%s", r.out);
    keep_lines(path_in(s2, sizeof s2, "s3.csv"), 17);
    runf(&r, "merge %s/m.csv %s/s1.csv %s/s2.csv %s/s3.csv", dir, dir, dir, dir);
    cr_assert_eq(r.status, 2, "%s", r.out);
    cr_assert(strstr(r.out, s2) && strstr(r.out, "15 of the 16 rows"), "%s", r.out);
    struct stat st;
    cr_assert(stat(path_in(s2, sizeof s2, "m.csv"), &st) != 0, "a refused merge left its output");
    /* finished again, the merge equals the unsharded sweep */
    runf(&r, "sweep %s --shard 3/3 --out %s/s3.csv", spec, dir);
    cr_assert_eq(r.status, 0, "%s", r.out);
    runf(&r, "merge %s/m.csv %s/s1.csv %s/s2.csv %s/s3.csv", dir, dir, dir, dir);
    cr_assert_eq(r.status, 0, "%s", r.out);
    assert_same_file(ref, path_in(s2, sizeof s2, "m.csv"));
    /* a shard without line 2 (nothing proves it finished) */
    char *text = read_file(path_in(s2, sizeof s2, "s2.csv"), NULL);
    char *second = strchr(text, '\n') + 1;
    memmove(second, strchr(second, '\n') + 1, strlen(strchr(second, '\n') + 1) + 1);
    write_file(s2, text);
    free(text);
    runf(&r, "merge %s/m.csv %s/s1.csv %s/s2.csv %s/s3.csv", dir, dir, dir, dir);
    cr_assert_eq(r.status, 2, "%s", r.out);
    cr_assert(strstr(r.out, "s2.csv:2") && strstr(r.out, "# parsim sweep"), "%s", r.out);
    /* a line 2 no sweep writes (no shard 1/0, no more rows than configurations) */
    static const char *const forged[] = { "shard=1/0 rows=0", "shard=2/1 rows=0", "shard=1/3 rows=49",
                                          "shard=1/3 rows=-1" };
    for (size_t k = 0; k < sizeof forged / sizeof forged[0]; k++) {
        char text2[512];
        snprintf(text2, sizeof text2, "index,x,error\n# parsim sweep spec=0000000000000001 configurations=48 %s\n0,1,\n",
                 forged[k]);
        write_file(s2, text2);
        runf(&r, "merge %s/m.csv %s", dir, s2);
        cr_assert_eq(r.status, 2, "%s: %s", forged[k], r.out);
        cr_assert(strstr(r.out, "s2.csv:2") && count_lines(r.out) == 1, "%s: %s", forged[k], r.out);
    }
    remove_dir();
}

/* SMALL_SPEC with other values on the same keys. */
static char *edited_spec(const char *from, const char *to)
{
    const char *at = strstr(SMALL_SPEC, from);
    cr_assert_not_null(at, "%s", from);
    size_t n = strlen(SMALL_SPEC) + strlen(to) + 1;
    char *s = malloc(n);
    snprintf(s, n, "%.*s%s%s", (int)(at - SMALL_SPEC), SMALL_SPEC, to, at + strlen(from));
    return s;
}

Test(sweep, an_edited_spec_does_not_resume_or_merge_with_the_old_rows, .timeout = 60)
{
    make_dir();
    char spec[256], ref[256], cut[256], edited[256];
    reference("small", SMALL_SPEC, spec, ref, sizeof spec);
    static const char *const edits[][2] = {
        { "values = [\"none\", \"full\"]", "values = [\"none\", \"selective\"]" }, /* an axis's values */
        { "train.global_batch_size=32", "train.global_batch_size=64" },           /* `set` */
        { "from = 1; to = 8; mul = 2;", "values = [1, 2, 4, 8];" },               /* same values: resumes */
    };
    result r;
    for (size_t e = 0; e < sizeof edits / sizeof edits[0]; e++) {
        /* a run killed after a whole row */
        path_in(cut, sizeof cut, "cut.csv");
        runf(&r, "sweep %s --out %s", spec, cut);
        cr_assert_eq(r.status, 0, "%s", r.out);
        keep_lines(cut, 12);
        char *text = edited_spec(edits[e][0], edits[e][1]);
        write_file(path_in(edited, sizeof edited, "edited.cfg"), text);
        free(text);
        runf(&r, "sweep %s --out %s", edited, cut);
        if (e == 2) {
            cr_assert_eq(r.status, 0, "%s", r.out);
            assert_same_file(ref, cut);
            continue;
        }
        char where[300];
        snprintf(where, sizeof where, "%s:2", cut);
        cr_assert_eq(r.status, 2, "edit %zu: %s", e, r.out);
        cr_assert(strstr(r.out, where) && strstr(r.out, "different spec") && count_lines(r.out) == 1, "%s", r.out);
        size_t n;
        text = read_file(cut, &n);
        cr_assert_eq(count_lines(text), 12, "the refused resume changed %s", cut);
        free(text);
        /* shards of the two specs do not merge */
        runf(&r, "sweep %s --shard 1/2 --out %s/a1.csv", spec, dir);
        cr_assert_eq(r.status, 0, "%s", r.out);
        runf(&r, "sweep %s --shard 2/2 --out %s/b2.csv", edited, dir);
        cr_assert_eq(r.status, 0, "%s", r.out);
        runf(&r, "merge %s/m.csv %s/a1.csv %s/b2.csv", dir, dir, dir);
        cr_assert_eq(r.status, 2, "%s", r.out);
        cr_assert(strstr(r.out, "b2.csv:2") && strstr(r.out, "another spec"), "%s", r.out);
        remove(path_in(cut, sizeof cut, "b2.csv"));
        remove(path_in(cut, sizeof cut, "a1.csv"));
    }
    remove_dir();
}

Test(sweep, configurations_are_numbered_last_axis_fastest)
{
    make_dir();
    char spec[256];
    path_in(spec, sizeof spec, "order.cfg");
    write_file(spec, "sweep: {\n  vary = (\n"
                     "    { key = \"train.micro_batch_size\"; values = [1, 2, 3]; },\n"
                     "    { key = \"model.seq_length\"; from = 1024; to = 4096; mul = 2; },\n"
                     "    { key = \"sim.ideal_pipeline\"; values = [true, false]; }\n  );\n};\n");
    sim_err err;
    sim_err_clear(&err);
    sweep_t *sw = NULL;
    cr_assert_eq(sweep_load(&sw, spec, PARSIM_SOURCE_DIR, &err), SIM_OK, "%s", err.msg);
    cr_assert_eq(sweep_total(sw), 3 * 3 * 2);
    char *row;
    size_t len;
    cr_assert_eq(sweep_row(sw, 7, &row, &len, &err), SIM_OK);
    /* 7 = (1 * 3 + 0) * 2 + 1: mbs 2, seq 1024, ideal false */
    cr_assert(strncmp(row, "7,2,1024,false,", 15) == 0, "%s", row);
    cr_assert_eq(row[len - 1], '\n');
    free(row);
    sweep_span sp = sweep_shard_span(sw, 2, 4);
    cr_assert(sp.first == 1 && sp.stride == 4 && sp.count == 5, "%ld %ld %ld", (long)sp.first, (long)sp.stride,
              (long)sp.count);
    sweep_destroy(sw);
    remove_dir();
}

/* Integer ranges at the ends of int64: the count and every value exact, no
 * overflow on the way (UBSan checks the arithmetic in the sanitizer build). */
Test(sweep, integer_ranges_near_the_int64_limits_have_every_value)
{
    make_dir();
    static const struct {
        const char *range;
        int n;
        const char *first, *last;
    } cases[] = {
        { "from = 9223372036854775801L; to = 9223372036854775807L; step = 2;", 4, "9223372036854775801",
          "9223372036854775807" },
        { "from = 9223372036854775807L; to = 9223372036854775803L; step = -1;", 5, "9223372036854775807",
          "9223372036854775803" },
        { "from = 1152921504606846976L; to = 9223372036854775807L; mul = 2;", 3, "1152921504606846976",
          "4611686018427387904" },
        { "from = 1; to = 9223372036854775807L; mul = 32768;", 5, "1", "1152921504606846976" },
        { "from = -9223372036854775807L; to = 9223372036854775807L; step = 4611686018427387904L;", 4,
          "-9223372036854775807", "4611686018427387905" },
        { "from = -9223372036854775807L; to = -9223372036854775804L;", 4, "-9223372036854775807",
          "-9223372036854775804" },
    };
    char spec[256], text[512];
    path_in(spec, sizeof spec, "edge.cfg");
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        snprintf(text, sizeof text, "sweep: {\n  vary = ( { key = \"sim.seed\"; %s } );\n};\n", cases[c].range);
        write_file(spec, text);
        sim_err err;
        sim_err_clear(&err);
        sweep_t *sw = NULL;
        cr_assert_eq(sweep_load(&sw, spec, PARSIM_SOURCE_DIR, &err), SIM_OK, "%s: %s", cases[c].range, err.msg);
        cr_expect_eq(sweep_total(sw), cases[c].n, "%s: %ld values", cases[c].range, (long)sweep_total(sw));
        char *row;
        size_t len;
        char want[64];
        int64_t ends[2] = { 0, sweep_total(sw) - 1 };
        const char *vals[2] = { cases[c].first, cases[c].last };
        for (int e = 0; e < 2; e++) {
            cr_assert_eq(sweep_row(sw, ends[e], &row, &len, &err), SIM_OK);
            snprintf(want, sizeof want, "%ld,%s,", (long)ends[e], vals[e]);
            cr_expect(strncmp(row, want, strlen(want)) == 0, "%s: row %s", cases[c].range, row);
            free(row);
        }
        sweep_destroy(sw);
    }
    remove_dir();
}

Test(sweep, a_wide_integer_without_L_in_the_base_file_is_refused)
{
    make_dir();
    char spec[256], base[256];
    write_file(path_in(base, sizeof base, "base.cfg"),
               "model: { name = \"llama3-8b\"; };\n# 4294967304 in a comment is fine\n"
               "cluster: { topology = \"dgx-h100\";\n  num_gpus = 4294967304; };\n");
    write_file(path_in(spec, sizeof spec, "spec.cfg"),
               "sweep: {\n  base = \"base.cfg\";\n  vary = ( { key = \"train.global_batch_size\"; values = [8]; } );\n};\n");
    result r;
    runf(&r, "sweep %s", spec);
    char where[400];
    snprintf(where, sizeof where, "%s:4: integer 4294967304 does not fit in 32 bits", base);
    cr_assert_eq(r.status, 2, "%s", r.out);
    cr_assert(strstr(r.out, where) && count_lines(r.out) == 1, "%s", r.out);
    /* parsim run reads configs the same way */
    runf(&r, "run %s", base);
    cr_assert_eq(r.status, 2, "%s", r.out);
    cr_assert(strstr(r.out, where) && count_lines(r.out) == 1, "%s", r.out);
    remove_dir();
}

Test(sweep, shards_up_to_the_limit_keep_configuration_0)
{
    make_dir();
    char spec[256], out[256];
    path_in(spec, sizeof spec, "small.cfg");
    write_file(spec, SMALL_SPEC);
    result r;
    runf(&r, "sweep %s --shard 1/1000000 --out %s", spec, path_in(out, sizeof out, "first.csv"));
    cr_assert_eq(r.status, 0, "%s", r.out);
    size_t n;
    char *text = read_file(out, &n);
    char *row = strchr(strchr(text, '\n') + 1, '\n');
    cr_assert(row && !strncmp(row + 1, "0,", 2) && count_lines(text) == 3, "no configuration 0 alone in %s", text);
    free(text);
    /* more shards than configurations: the last one is empty */
    runf(&r, "sweep %s --shard 1000000/1000000 --out %s", spec, path_in(out, sizeof out, "last.csv"));
    cr_assert_eq(r.status, 0, "%s", r.out);
    text = read_file(out, &n);
    cr_assert_eq(count_lines(text), 2, "%s", text);
    free(text);
    runf(&r, "sweep %s --shard 1/9223372036854775807", spec);
    cr_assert_eq(r.status, 2, "%s", r.out);
    cr_assert(strstr(r.out, "--shard") && strstr(r.out, "1000000") && count_lines(r.out) == 1, "%s", r.out);
    remove_dir();
}

Test(progress, draws_done_total_rate_and_time_left_only_when_asked)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    progress_t p;
    progress_start_on(&p, f, true, 10, 2, "sweep");
    progress_update(&p, 3);
    progress_end(&p);
    fclose(f);
    cr_assert(strstr(buf, "sweep: 3/10 (30%)") != NULL, "%s", buf);
    cr_assert(strstr(buf, "/s") != NULL && strstr(buf, "left") != NULL, "%s", buf);
    cr_assert_eq(buf[len - 1], '\n');
    free(buf);

    /* not a terminal, not forced: silent */
    buf = NULL;
    f = open_memstream(&buf, &len);
    progress_start_on(&p, f, false, 10, 0, "sweep");
    progress_update(&p, 5);
    progress_end(&p);
    fclose(f);
    cr_assert_eq(len, 0, "%s", buf);
    free(buf);
}

#ifdef PARSIM_MPIEXEC
/* Registered only in a -DPARSIM_MPI=ON build.  The environment lets Open
 * MPI run as root, oversubscribe a small machine and skip ssh and the
 * shared-memory single-copy path that containers often forbid. */
#define MPI_ENV                                                                                      \
    "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 " \
    "OMPI_MCA_plm_rsh_agent= OMPI_MCA_btl_vader_single_copy_mechanism=none "                         \
    "OMPI_MCA_hwloc_base_binding_policy=none "

static void mpi_run(result *r, int np, const char *args)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "cd '%s' && " MPI_ENV "'%s' -np %d '%s' %s 2>&1", PARSIM_SOURCE_DIR, PARSIM_MPIEXEC,
             np, PARSIM_BINARY, args);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(r->out, 1, sizeof r->out - 1, p);
    r->out[n] = '\0';
    int st = pclose(p);
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

Test(sweep_mpi, mpirun_np_2_writes_the_same_rows_as_jobs_1, .timeout = 180)
{
    make_dir();
    char spec[256], ref[256], out[256], args[1024];
    reference("small", SMALL_SPEC, spec, ref, sizeof spec);
    result r;
    for (int np = 2; np <= 3; np++) {
        path_in(out, sizeof out, "mpi.csv");
        remove(out);
        snprintf(args, sizeof args, "sweep %s --out %s", spec, out);
        mpi_run(&r, np, args);
        cr_assert_eq(r.status, 0, "np %d: %s", np, r.out);
        assert_same_file(ref, out);
    }
    /* resuming a cut file under MPI */
    size_t n;
    char *text = read_file(ref, &n);
    text[n / 2] = '\0';
    write_file(out, text);
    free(text);
    mpi_run(&r, 2, args);
    cr_assert_eq(r.status, 0, "%s", r.out);
    assert_same_file(ref, out);
    remove_dir();
}
#endif

/* plots/make_plots.sh draws PNGs from parsim's own outputs (the README's
 * commands; the validation plot is exercised by `make_plots.sh OUTDIR`). */
static bool is_png(const char *path)
{
    FILE *f = fopen(path, "rb");
    unsigned char sig[8] = { 0 };
    bool ok = f && fread(sig, 1, 8, f) == 8 && !memcmp(sig, "\x89PNG\r\n\x1a\n", 8);
    if (f)
        fclose(f);
    return ok;
}

Test(plots, timeline_pareto_and_scaling_render_to_png, .timeout = 120)
{
    if (system("command -v gnuplot >/dev/null 2>&1") != 0)
        cr_skip_test("gnuplot is not installed (apt-get install gnuplot-nox)");
    make_dir();
    char spec[256], ref[256], cmd[2048];
    reference("small", SMALL_SPEC, spec, ref, sizeof spec);
    result r;
    runf(&r, "run model.name=llama3-8b cluster.topology=dgx-h100 cluster.num_gpus=8 "
             "model.tensor_model_parallel_size=2 model.pipeline_model_parallel_size=4 "
             "model.virtual_pipeline_model_parallel_size=2 train.global_batch_size=8 --trace %s/t.json",
         dir);
    cr_assert_eq(r.status, 0, "%s", r.out);
    static const char *const kinds[][3] = { { "--timeline", "t.json", "timeline.png" },
                                            { "--pareto", "small-ref.csv", "pareto.png" },
                                            { "--scaling", "small-ref.csv", "scaling.png" } };
    for (size_t k = 0; k < 3; k++) {
        snprintf(cmd, sizeof cmd, "cd '%s' && PARSIM='%s' plots/make_plots.sh %s %s/%s %s/%s 2>&1",
                 PARSIM_SOURCE_DIR, PARSIM_BINARY, kinds[k][0], dir, kinds[k][1], dir, kinds[k][2]);
        int st = system(cmd);
        char png[256];
        path_in(png, sizeof png, kinds[k][2]);
        cr_expect(st == 0 && is_png(png), "%s: status %d, no PNG", cmd, st);
    }
    remove_dir();
}
