/* Handing a plan over (sim/handover.h): the overrides column of search and
 * sweep reruns each row with parsim run, --emit-overrides prints the best
 * layout for Megatron Bridge's run_recipe.py, --emit-sbatch writes a Slurm
 * script that runs it. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "csv_cells.h"
#include "scratch.h"

#define LLAMA70B "configs/llama3-70b-h100x64.cfg"
#define SMALL "model.name=llama3-8b cluster.topology=dgx-h100 cluster.num_gpus=8 train.global_batch_size=32"

/* Runs `parsim run BASE OVERRIDES --format csv` and checks that its step
 * time and peak memory are those of the row. */
static void rerun_matches(const char *base, const char *ovr, const char *step, const char *peak, const char *what)
{
    result r;
    runf(&r, "run %s %s --format csv", base, ovr);
    cr_assert_eq(r.status, 0, "%s: parsim run %s %s: %s", what, base, ovr, r.out);
    char got_step[64], got_peak[64];
    cell(line_at(r.out, 1), column(r.out, "step_time_s"), got_step, sizeof got_step);
    cell(line_at(r.out, 1), column(r.out, "peak_bytes"), got_peak, sizeof got_peak);
    cr_expect_str_eq(got_step, step, "%s: step time (overrides %s)", what, ovr);
    cr_expect_str_eq(got_peak, peak, "%s: peak memory (overrides %s)", what, ovr);
}

/* Reruns row `row` of a search or sweep CSV from its overrides column and
 * checks its step time and peak memory; the overrides into ovr. */
static void rerun_row(const char *base, const char *csv, int row, const char *what, char *ovr, size_t len)
{
    int c_ovr = column(csv, "overrides"), c_step = column(csv, "step_time_s"), c_peak = column(csv, "peak_bytes");
    cr_assert(c_ovr > 0 && c_step > 0 && c_peak > 0, "%s", csv);
    char step[64], peak[64];
    const char *line = line_at(csv, row);
    cell(line, c_ovr, ovr, len);
    cell(line, c_step, step, sizeof step);
    cell(line, c_peak, peak, sizeof peak);
    rerun_matches(base, ovr, step, peak, what);
}

Test(handover, search_rows_rerun_to_the_same_step_and_memory, .timeout = 300)
{
    make_dir();
    char out[256];
    path_in(out, sizeof out, "search.csv");
    result r;
    runf(&r, "search " LLAMA70B " --top 4 --jobs 1 --out %s", out);
    cr_assert_eq(r.status, 0, "%s", r.out);
    char *csv = read_file(out, NULL);
    for (int row = 1; row <= 4; row++) {
        char ovr[4096], what[32];
        snprintf(what, sizeof what, "row %d", row);
        rerun_row(LLAMA70B, csv, row, what, ovr, sizeof ovr);
        cr_expect(strstr(ovr, "cluster.num_gpus=64 model.tensor_model_parallel_size="), "%s: %s", what, ovr);
    }
    free(csv);
    remove_dir();
}

/* Rows of a search over Megatron-FSDP and the pipeline schedules rerun
 * too: their overrides carry the sharding and the schedule. */
Test(handover, fsdp_and_schedule_rows_rerun, .timeout = 120)
{
    make_dir();
    char out[256];
    path_in(out, sizeof out, "search.csv");
    result r;
    const char *base = "model.name=llama3-8b cluster.topology=dgx-h100 cluster.num_gpus=16 train.global_batch_size=64";
    runf(&r, "search %s model.pipeline_model_parallel_size=4 model.tensor_model_parallel_size=1 "
             "model.context_parallel_size=1 train.micro_batch_size=1 model.recompute_granularity=none "
             "--fsdp --schedules all --top 12 --jobs 1 --out %s",
         base, out);
    cr_assert_eq(r.status, 0, "%s", r.out);
    char *csv = read_file(out, NULL);
    int c_sched = column(csv, "pipeline_schedule"), c_shard = column(csv, "dp_sharding");
    cr_assert(c_sched > 0 && c_shard > 0, "%s", csv);
    bool beyond = false, fsdp = false;
    for (int row = 1; row <= 12; row++) {
        char ovr[4096], sched[32], shard[32], what[96];
        cell(line_at(csv, row), c_sched, sched, sizeof sched);
        cell(line_at(csv, row), c_shard, shard, sizeof shard);
        snprintf(what, sizeof what, "row %d (%s, %s)", row, sched, shard);
        rerun_row(base, csv, row, what, ovr, sizeof ovr);
        if (strcmp(sched, "megatron")) {
            beyond = true;
            cr_expect(strstr(ovr, "sim.pipeline_schedule="), "%s: %s", what, ovr);
        }
        if (!strncmp(shard, "fsdp", 4)) {
            fsdp = true;
            cr_expect(strstr(ovr, "ddp.use_megatron_fsdp=true ddp.data_parallel_sharding_strategy="), "%s: %s", what,
                      ovr);
        }
    }
    cr_expect(beyond && fsdp, "the top rows have a schedule beyond Megatron's and an FSDP row:\n%s", csv);
    free(csv);
    remove_dir();
}

Test(handover, sbatch_for_llama3_70b_on_64_h100s, .timeout = 300)
{
    make_dir();
    char job[256];
    path_in(job, sizeof job, "job.sbatch");
    result r;
    runf(&r, "search " LLAMA70B " --jobs 1 --emit-overrides --emit-sbatch %s", job);
    cr_assert_eq(r.status, 0, "%s", r.out);
    /* stdout: one line of Bridge overrides, no parsim-only keys (then the
     * timing line of stderr) */
    cr_assert_eq(count_lines(r.out), 2, "%s", r.out);
    cr_assert(!strncmp(line_at(r.out, 1), "parsim search: ", 15), "%s", r.out);
    *strchr(r.out, '\n') = '\0';
    cr_expect(!strncmp(r.out, "model.tensor_model_parallel_size=", 33), "%s", r.out);
    cr_expect_null(strstr(r.out, "cluster."), "%s", r.out);
    cr_expect(strstr(r.out, " train.global_batch_size=128 "), "%s", r.out);
    cr_expect(strstr(r.out, " model.recompute_granularity=null ") || strstr(r.out, "granularity=full") ||
                  strstr(r.out, "granularity=selective"), "%s", r.out);
    char *text = read_file(job, NULL);
    cr_expect(!strncmp(text, "#!/bin/bash\n", 12), "%s", text);
    static const char *const want[] = {
        "\n#SBATCH --nodes=8\n", "\n#SBATCH --ntasks-per-node=1\n", "\n#SBATCH --gpus-per-node=8\n",
        "PP x lcm(TP x CP, EP x ETP) = ", "--nproc-per-node=8", "scripts/training/run_recipe.py --recipe \"$RECIPE\"",
        "\nRECIPE=${RECIPE:?",
    };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++)
        cr_expect(strstr(text, want[k]), "want '%s' in:\n%s", want[k], text);
    /* the script carries the same overrides */
    cr_expect(strstr(text, r.out), "overrides '%s' not in:\n%s", r.out, text);
    /* the comment states the DP the 64 GPUs give */
    cr_expect(strstr(text, "; on 64: DP "), "%s", text);
    cr_expect(strstr(text, " GPUs (DP "), "%s", text);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "bash -n '%s'", job);
    int st = system(cmd);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "bash -n %s: status %d", job, st);
    /* with a recipe name it is in the script */
    runf(&r, "search " LLAMA70B " --jobs 1 --emit-sbatch %s --recipe llama3_70b_pretrain_config", job);
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_expect(strstr(r.out, "parsim search: llama3-70b "), "the report still goes to stdout: %s", r.out);
    free(text);
    text = read_file(job, NULL);
    cr_expect(strstr(text, "\nRECIPE=llama3_70b_pretrain_config\n"), "%s", text);
    free(text);
    remove_dir();
}

Test(handover, bad_recipe_and_output_are_refused, .timeout = 120)
{
    make_dir();
    result r;
    run(&r, "search " SMALL " --jobs 1 --emit-sbatch x.sbatch --recipe 'a;rm -rf b'");
    expect_refusal(&r, "recipe", "--recipe", "a;rm -rf b");
    runf(&r, "search " SMALL " --jobs 1 --emit-sbatch %s", dir);
    cr_expect_eq(r.status, 2, "%s", r.out);
    char want[128];
    snprintf(want, sizeof want, "parsim: %s: is a directory", dir);
    cr_expect(strstr(r.out, want), "%s", r.out);
    run(&r, "search " SMALL " --jobs 1 --emit-sbatch");
    expect_refusal(&r, "no file", "--emit-sbatch", "needs a value");
    /* 12 GPUs are one and a half nodes: no script, the file not written */
    char job[256];
    path_in(job, sizeof job, "job.sbatch");
    runf(&r, "search " SMALL " cluster.num_gpus=12 train.global_batch_size=24 --jobs 1 --emit-sbatch %s", job);
    cr_expect_eq(r.status, 2, "%s", r.out);
    cr_expect(strstr(r.out, "parsim: cluster.num_gpus: 12 GPUs are not whole nodes of 8"), "%s", r.out);
    cr_expect_neq(access(job, F_OK), 0, "%s was written", job);
    remove_dir();
}

Test(handover, sweep_rows_rerun_to_the_same_step_and_memory, .timeout = 300)
{
    make_dir();
    char spec[256], out[256];
    path_in(spec, sizeof spec, "sweep.cfg");
    write_file(spec, "sweep: {\n"
                     "  set = [ \"model.name=llama3-8b\", \"cluster.topology=dgx-h100\", \"cluster.num_gpus=8\",\n"
                     "          \"train.global_batch_size=32\" ];\n"
                     "  vary = (\n"
                     "    { key = \"model.tensor_model_parallel_size\"; values = [2, 4]; },\n"
                     "    { key = \"model.context_parallel_size\"; values = [1, 2]; },\n"
                     "    { key = \"model.cp_comm_type\"; values = [\"p2p\", \"a2a+p2p\"]; },\n"
                     "    { key = \"model.hierarchical_context_parallel_sizes\"; values = ( [], [1, 2] ); }\n"
                     "  );\n};\n");
    path_in(out, sizeof out, "sweep.csv");
    result r;
    runf(&r, "sweep %s --out %s", spec, out);
    cr_assert_eq(r.status, 0, "%s", r.out);
    char *csv = read_file(out, NULL);
    int c_ovr = column(csv, "overrides"), c_step = column(csv, "step_time_s"), c_peak = column(csv, "peak_bytes"),
        c_err = column(csv, "error");
    cr_assert(c_ovr > 0 && c_err == c_ovr + 1, "%s", csv);
    int rerun = 0;
    for (int row = 2; row < count_lines(csv); row++) {
        char ovr[4096], step[64], peak[64], err[512], what[32];
        const char *line = line_at(csv, row);
        cell(line, c_ovr, ovr, sizeof ovr);
        cell(line, c_step, step, sizeof step);
        cell(line, c_peak, peak, sizeof peak);
        cell(line, c_err, err, sizeof err);
        snprintf(what, sizeof what, "row %d", row);
        cr_assert(!strncmp(ovr, "model.name=llama3-8b cluster.topology=dgx-h100 ", 47), "%s: %s", what, ovr);
        if (err[0]) {
            /* a refused row is refused again with the same reason */
            runf(&r, "run %s", ovr);
            cr_expect_eq(r.status, 2, "%s: %s", what, r.out);
            continue;
        }
        rerun_matches("", ovr, step, peak, what);
        rerun++;
    }
    cr_expect(rerun >= 4, "%d rows rerun:\n%s", rerun, csv);
    free(csv);
    remove_dir();
}

/* The text report names the words that rerun #1; they give #1's step. */
Test(handover, text_report_names_the_winners_overrides, .timeout = 120)
{
    make_dir();
    char out[256];
    path_in(out, sizeof out, "search.csv");
    result r;
    runf(&r, "search " SMALL " --top 1 --jobs 1 --out %s", out);
    cr_assert_eq(r.status, 0, "%s", r.out);
    const char *at = strstr(r.out, "#1 reruns as: parsim run CONFIG ");
    cr_assert(at, "%s", r.out);
    char ovr[4096];
    at += strlen("#1 reruns as: parsim run CONFIG ");
    snprintf(ovr, sizeof ovr, "%.*s", (int)strcspn(at, "\n"), at);
    char *csv = read_file(out, NULL);
    char row_ovr[4096];
    rerun_row(SMALL, csv, 1, "#1 of the text report", row_ovr, sizeof row_ovr);
    cr_expect_str_eq(ovr, row_ovr, "the report's words are the CSV's");
    free(csv);
    remove_dir();
}
