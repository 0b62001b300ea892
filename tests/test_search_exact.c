/* The search reports what parsim run simulates, and prunes nothing that
 * matters: on small spaces (dense, MoE with EP and its overlap, CP with
 * its communication types, VP, uneven splits, zero-bubble schedules)
 *   - every row of `search --exhaustive --out` reruns, from its overrides
 *     column, to the same step time, tokens/s, peak memory, bubble and
 *     exposed communication (each stream and the total) as printed;
 *   - the default (time-bound) search lists the exhaustive search's top N:
 *     the same rows, in the same order, byte for byte;
 *   - --jobs 1 and --jobs 2 write the same report and CSV.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csv_cells.h"
#include "scratch.h"

#define TOP 5 /* rows the pruned search must get right */

typedef struct space {
    const char *name;
    const char *settings;      /* the model, system and pinned dimensions */
    const char *flags;         /* search options that widen the space */
    const char *column, *not_value; /* a row must have column != not_value: the space has what it claims */
} space;

static const space spaces[] = {
    {"dense",
     "model.name=llama3-8b cluster.topology=dgx-h100 cluster.num_gpus=16 train.global_batch_size=32 "
     "model.context_parallel_size=1 train.micro_batch_size=1 model.recompute_granularity=none",
     "", "tp", "1"},
    {"moe",
     "model.name=mixtral-8x7b cluster.topology=dgx-h100 cluster.num_gpus=32 train.global_batch_size=32 "
     "model.moe_token_dispatcher_type=alltoall train.micro_batch_size=1 model.context_parallel_size=1 "
     "model.recompute_granularity=selective model.tensor_model_parallel_size=2",
     "--ep-overlap",
     "overlap_moe_expert_parallel_comm", "false"},
    {"cp",
     "model.name=llama3-8b cluster.topology=dgx-h100 cluster.num_gpus=32 model.seq_length=8192 "
     "train.global_batch_size=32 model.pipeline_model_parallel_size=2 train.micro_batch_size=1 "
     "model.recompute_granularity=none model.tensor_model_parallel_size=2",
     "", "cp_comm_type", "-"},
    {"vp",
     "model.name=llama3-8b cluster.topology=dgx-h100 cluster.num_gpus=32 train.global_batch_size=32 "
     "model.pipeline_model_parallel_size=4 model.context_parallel_size=1 train.micro_batch_size=1 "
     "model.recompute_granularity=none",
     "", "vp", "1"},
    {"uneven",
     "model.name=llama3-8b cluster.topology=dgx-h100 cluster.num_gpus=24 train.global_batch_size=24 "
     "model.pipeline_model_parallel_size=3 model.context_parallel_size=1 train.micro_batch_size=1 "
     "model.recompute_granularity=none",
     "", "num_layers_in_first_pipeline_stage", "0"},
    {"schedules",
     "model.name=llama3-8b cluster.topology=dgx-h100 cluster.num_gpus=16 train.global_batch_size=32 "
     "model.context_parallel_size=1 train.micro_batch_size=1 model.recompute_granularity=none "
     "model.tensor_model_parallel_size=2",
     "--schedules zb-h1,zb-v,dualpipev",
     "pipeline_schedule", "megatron"},
};

/* The search CSV column of a figure and the key of `run --format json`
 * that holds it (the first with that name: memory's peak_bytes comes
 * before the stages'). */
static const char *const figures[][2] = {
    {"step_time_s", "step_time_s"},      {"tokens_per_s_per_gpu", "tokens_per_s_per_gpu"},
    {"peak_bytes", "peak_bytes"},        {"bubble_fraction", "bubble_fraction"},
    {"exposed_tp_s", "tp_exposed_s"},    {"exposed_cp_s", "cp_exposed_s"},
    {"exposed_ep_s", "ep_exposed_s"},    {"exposed_dp_s", "dp_exposed_s"},
    {"exposed_pp_s", "pp_exposed_s"},    {"exposed_total_s", "exposed_s"},
};

/* The number written for "key" in a JSON report, as written. */
static void json_number(const char *json, const char *key, char *buf, size_t len)
{
    char quoted[64];
    snprintf(quoted, sizeof quoted, "\"%s\": ", key);
    const char *at = strstr(json, quoted);
    cr_assert_not_null(at, "no \"%s\" in: %s", key, json);
    at += strlen(quoted);
    size_t n = strspn(at, "0123456789+-.eE");
    cr_assert(n > 0 && n < len, "\"%s\": %.40s", key, at);
    memcpy(buf, at, n);
    buf[n] = '\0';
}
#define N_FIGURES (sizeof figures / sizeof figures[0])

/* Runs `search SETTINGS EXTRA --out CSV` and returns the CSV (caller
 * frees); the report (stdout and stderr) into r. */
static char *search_csv(result *r, const char *settings, const char *extra, const char *name)
{
    char csv[128];
    path_in(csv, sizeof csv, name);
    runf(r, "search %s %s --out '%s'", settings, extra, csv);
    cr_assert_eq(r->status, 0, "search %s %s: %s", settings, extra, r->out);
    return read_file(csv, NULL);
}

/* Number of "search" rows (the baseline row comes last). */
static int search_rows(const char *csv)
{
    int n = 0;
    for (const char *p = strchr(csv, '\n'); p && !strncmp(p + 1, "search,", 7); p = strchr(p + 1, '\n'))
        n++;
    return n;
}

Test(search_exact, every_exhaustive_row_equals_parsim_run, .timeout = 600)
{
    make_dir();
    result *r = malloc(sizeof *r);
    cr_assert_not_null(r);
    for (size_t s = 0; s < sizeof spaces / sizeof spaces[0]; s++) {
        const space *sp = &spaces[s];
        char flags[256];
        snprintf(flags, sizeof flags, "%s --exhaustive --jobs 2", sp->flags);
        char *csv = search_csv(r, sp->settings, flags, "all.csv");
        const int rows = search_rows(csv), c_ovr = column(csv, "overrides"), c_claim = column(csv, sp->column);
        cr_assert(rows > 0 && c_ovr > 0 && c_claim > 0, "%s: %d rows:\n%s", sp->name, rows, csv);
        int claimed = 0;
        for (int row = 1; row <= rows; row++) {
            const char *line = line_at(csv, row);
            char ovr[4096], v[64];
            cell(line, c_ovr, ovr, sizeof ovr);
            cell(line, c_claim, v, sizeof v);
            claimed += strcmp(v, sp->not_value) != 0;
            runf(r, "run %s %s --format json", sp->settings, ovr);
            cr_assert_eq(r->status, 0, "%s row %d: parsim run %s: %s", sp->name, row, ovr, r->out);
            for (size_t f = 0; f < N_FIGURES; f++) {
                char want[64], got[64];
                int cw = column(csv, figures[f][0]);
                cr_assert(cw > 0, "%s: no column %s", sp->name, figures[f][0]);
                cell(line, cw, want, sizeof want);
                json_number(r->out, figures[f][1], got, sizeof got);
                cr_expect_str_eq(got, want, "%s row %d: %s searched %s, run %s (overrides %s)", sp->name, row,
                                 figures[f][0], want, got, ovr);
            }
        }
        cr_expect(claimed > 0, "%s: no row with %s other than %s", sp->name, sp->column, sp->not_value);
        free(csv);
    }
    free(r);
    remove_dir();
}

Test(search_exact, pruned_search_lists_the_exhaustive_top, .timeout = 300)
{
    make_dir();
    result *r = malloc(sizeof *r);
    cr_assert_not_null(r);
    int pruned_somewhere = 0;
    for (size_t s = 0; s < sizeof spaces / sizeof spaces[0]; s++) {
        const space *sp = &spaces[s];
        char ex[256], def[256];
        snprintf(ex, sizeof ex, "%s --exhaustive --jobs 1 --top %d", sp->flags, TOP);
        snprintf(def, sizeof def, "%s --jobs 1 --top %d", sp->flags, TOP);
        char *all = search_csv(r, sp->settings, ex, "all.csv");
        char *top = search_csv(r, sp->settings, def, "top.csv");
        pruned_somewhere += strstr(r->out, " 0 skipped by the time bound") == NULL;
        cr_assert_geq(search_rows(all), TOP, "%s: fewer than %d layouts", sp->name, TOP);
        for (int row = 0; row <= TOP; row++) { /* the header, then ranks 1..TOP */
            const char *a = line_at(all, row), *b = line_at(top, row);
            size_t na = strcspn(a, "\n"), nb = strcspn(b, "\n");
            cr_expect(na == nb && !memcmp(a, b, na), "%s rank %d:\nexhaustive %.*s\npruned     %.*s", sp->name, row,
                      (int)na, a, (int)nb, b);
        }
        free(all);
        free(top);
    }
    cr_expect(pruned_somewhere > 0, "the time bound skipped nothing in any space: the test compares nothing");
    free(r);
    remove_dir();
}

/* The report without the timing line (stderr: wall-clock figures). */
static void drop_timing(char *out)
{
    char *p = strstr(out, "parsim search: ");
    for (; p; p = strstr(p + 1, "parsim search: ")) {
        char *end = strchr(p, '\n');
        if (end && strstr(p, " configurations simulated in ") && strstr(p, " configurations simulated in ") < end) {
            memmove(p, end + 1, strlen(end + 1) + 1);
            return;
        }
    }
    cr_assert_fail("no timing line in: %s", out);
}

Test(search_exact, jobs_1_and_2_write_the_same, .timeout = 300)
{
    make_dir();
    result *r1 = malloc(sizeof *r1), *r2 = malloc(sizeof *r2);
    cr_assert(r1 && r2);
    static const char *const modes[] = {"--exhaustive --pareto --top 3", "--top 3", "--pareto --top 4"};
    for (size_t s = 0; s < sizeof spaces / sizeof spaces[0]; s++)
        for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
            char e1[256], e2[256];
            snprintf(e1, sizeof e1, "%s %s --jobs 1", spaces[s].flags, modes[m]);
            snprintf(e2, sizeof e2, "%s %s --jobs 2", spaces[s].flags, modes[m]);
            char *a = search_csv(r1, spaces[s].settings, e1, "j1.csv");
            char *b = search_csv(r2, spaces[s].settings, e2, "j2.csv");
            cr_expect_str_eq(a, b, "%s %s: the CSVs differ", spaces[s].name, modes[m]);
            drop_timing(r1->out);
            drop_timing(r2->out);
            cr_expect_str_eq(r1->out, r2->out, "%s %s: the reports differ", spaces[s].name, modes[m]);
            free(a);
            free(b);
        }
    free(r1);
    free(r2);
    remove_dir();
}
