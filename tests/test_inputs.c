/* The input side read one way: a sweep spec's @include is relative to the
 * spec, as a run config's is to the config (one reader, sim/infile.c); a
 * sweep's base file must be a regular file like every other input; and the
 * modules under sim/ include each other without a cycle
 * (tests/include_graph.sh). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "opts.h"
#include "scratch.h"

/* The included files sit beside the spec and the config, in a folder that
 * is not the working directory (the source tree, where run() starts). */
Test(inputs, a_sweep_spec_includes_relative_to_itself_as_a_run_config_does, .init = make_dir, .fini = remove_dir,
     .timeout = 60)
{
    char sub[128], p[256], out[256];
    snprintf(sub, sizeof sub, "%s/specs", dir);
    cr_assert_eq(mkdir(sub, 0700), 0);
    snprintf(p, sizeof p, "%s/inputs_model.cfg", sub);
    write_file(p, "model: { name = \"llama3-8b\"; };\ncluster: { topology = \"dgx-h100\"; num_gpus = 8; };\n");
    snprintf(p, sizeof p, "%s/inputs_axes.cfg", sub);
    write_file(p, "sweep: {\n"
                  "  set = [ \"model.name=llama3-8b\", \"cluster.topology=dgx-h100\", \"cluster.num_gpus=8\",\n"
                  "          \"train.global_batch_size=16\" ];\n"
                  "  vary = ( { key = \"model.tensor_model_parallel_size\"; values = [1, 2]; } );\n"
                  "};\n");
    snprintf(p, sizeof p, "%s/spec.cfg", sub);
    write_file(p, "@include \"inputs_axes.cfg\"\n");
    snprintf(p, sizeof p, "%s/run.cfg", sub);
    write_file(p, "@include \"inputs_model.cfg\"\ntrain: { global_batch_size = 16; };\n");

    result r;
    runf(&r, "run %s/run.cfg --format csv", sub);
    cr_assert_eq(r.status, 0, "run: %s", r.out);

    snprintf(out, sizeof out, "%s/rows.csv", dir);
    runf(&r, "sweep %s/spec.cfg --jobs 1 --out %s", sub, out);
    cr_assert_eq(r.status, 0, "sweep: %s", r.out);
    /* header, the spec line, one row per configuration */
    char *csv = read_file(out, NULL);
    cr_expect_eq(count_lines(csv), 4, "rows in %s: %s", out, csv);
    free(csv);
}

/* An @include that names a file only the working directory has is not
 * found: the name is taken against the spec's folder. */
Test(inputs, a_sweep_spec_include_is_not_taken_against_the_working_directory, .init = make_dir,
     .fini = remove_dir, .timeout = 30)
{
    char p[256];
    snprintf(p, sizeof p, "%s/spec.cfg", dir);
    write_file(p, "@include \"README.md\"\n"); /* README.md is in the working directory */
    result r;
    runf(&r, "sweep %s --jobs 1", p);
    expect_refusal(&r, "include", "spec.cfg:1", "README.md");
}

Test(inputs, a_sweep_base_that_is_a_fifo_is_refused_without_blocking, .init = make_dir, .fini = remove_dir,
     .timeout = 30)
{
    char fifo[256], spec[256];
    snprintf(fifo, sizeof fifo, "%s/base.cfg", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    snprintf(spec, sizeof spec, "%s/spec.cfg", dir);
    write_file(spec, "sweep: {\n  base = \"base.cfg\";\n"
                     "  vary = ( { key = \"model.tensor_model_parallel_size\"; values = [1]; } );\n};\n");
    result r;
    runf(&r, "sweep %s --jobs 1", spec);
    expect_refusal(&r, "fifo base", "base.cfg", "a FIFO");
}

/* tests/include_graph.sh over sim/: no cycle but its known ones (it fails
 * on a new cycle and on a known one that is gone). */
Test(inputs, the_modules_include_each_other_without_a_cycle, .timeout = 60)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "sh '%s/tests/include_graph.sh' '%s/sim' 2>&1", PARSIM_SOURCE_DIR, PARSIM_SOURCE_DIR);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    char out[8192];
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "include_graph.sh: %s", out);
    cr_expect(strstr(out, "no cycle among sim/ modules") != NULL, "%s", out);
}

/* opts_next: options of the table with their values, plain arguments
 * (KEY=VALUE, "-"), and a missing value or an unknown "--x" as OPTS_FAIL
 * (the message goes to stderr). */
Test(inputs, the_option_parser_walks_a_table)
{
    enum { O_OUT, O_QUIET };
    static const opts_def defs[] = { [O_OUT] = {"--out", "a value"}, [O_QUIET] = {"--quiet", NULL} };
    char *ok[] = { "a.cfg", "--out", "x.csv", "k=v", "--quiet", "-", NULL };
    opts_iter it = opts_start(6, ok, 0, defs, 2, NULL, NULL);
    const char *v;
    cr_expect_eq(opts_next(&it, &v), OPTS_ARG);
    cr_expect_str_eq(v, "a.cfg");
    cr_expect_eq(opts_next(&it, &v), O_OUT);
    cr_expect_str_eq(v, "x.csv");
    cr_expect_eq(opts_next(&it, &v), OPTS_ARG);
    cr_expect_str_eq(v, "k=v");
    cr_expect_eq(opts_next(&it, &v), O_QUIET);
    cr_expect_null(v);
    cr_expect_eq(opts_next(&it, &v), OPTS_ARG);
    cr_expect_str_eq(v, "-");
    cr_expect_eq(opts_next(&it, &v), OPTS_END);

    char *missing[] = { "--out", NULL };
    it = opts_start(1, missing, 0, defs, 2, NULL, NULL);
    cr_expect_eq(opts_next(&it, &v), OPTS_FAIL);
    char *unknown[] = { "--outt", "x", NULL };
    it = opts_start(2, unknown, 0, defs, 2, NULL, NULL);
    cr_expect_eq(opts_next(&it, &v), OPTS_FAIL);
    /* with dash_options a single dash is an option too */
    char *dash[] = { "-q", NULL };
    it = opts_start(1, dash, 0, defs, 2, NULL, NULL);
    cr_expect_eq(opts_next(&it, &v), OPTS_ARG);
    it = opts_start(1, dash, 0, defs, 2, NULL, NULL);
    it.dash_options = 1;
    cr_expect_eq(opts_next(&it, &v), OPTS_FAIL);
}
