/* The search's per-configuration path, exact: a pass that ends with one
 * communication op (a last stage's loss all-reduce) stands as a compute
 * task and that op, with the step equal to every kernel a task; and every
 * layout a search reports equals `parsim run` of that layout alone, on
 * small dense, MoE, CP, VP and uneven-split search spaces. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scratch.h"
#include "sim_run.h"

/* Two levels against every kernel: the figures two levels give exactly
 * (step time, pipeline end, memory); returns the two-level task count and
 * the passes of a stage. */
static uint64_t check_exact(const char *const *kv, int64_t *passes)
{
    sim a, b;
    sim_run(&a, kv);
    sim_rerun_every_kernel(&a, &b);
    const step_result *ra = step_result_get(a.st), *rb = step_result_get(b.st);
    cr_assert_eq(ra->step_time_s, rb->step_time_s, "%s: two-level %.12f s, every kernel %.12f s", kv[0],
                 ra->step_time_s, rb->step_time_s);
    cr_assert_eq(ra->pipeline_s, rb->pipeline_s, "%s", kv[0]);
    cr_assert_eq(ra->peak_bytes, rb->peak_bytes, "%s", kv[0]);
    for (int64_t r = 0; r < ra->n_stages; r++) {
        cr_assert_eq(ra->stages[r].activations_peak_bytes, rb->stages[r].activations_peak_bytes);
        cr_assert_eq(ra->stages[r].inflight_microbatches_max, rb->stages[r].inflight_microbatches_max);
    }
    cr_assert(ra->tasks < rb->tasks);
    *passes = 2 * a.s.num_microbatches * a.s.v;
    uint64_t tasks = ra->tasks;
    step_destroy(b.st);
    sim_free(&a);
    return tasks;
}

/* With TP > 1 every forward at PP 1 ends with the loss all-reduce on the
 * TP stream: it stands as two tasks, not as its kernels.  The last
 * backward of a chunk releasing several gradient buckets stands as a
 * chain; each case with the distributed optimizer or without (several
 * buckets, overlapped reduction). */
Test(search_fast, pass_ending_in_a_collective_stands_as_two_tasks)
{
    const char *pp1[] = {"model.name=llama3-8b", "cluster.topology=dgx-h100", "cluster.num_gpus=8",
                         "model.tensor_model_parallel_size=4", "model.sequence_parallel=true",
                         "train.global_batch_size=16", NULL};
    const char *pp1_more[] = {"model.name=llama3-8b", "cluster.topology=dgx-h100", "cluster.num_gpus=8",
                              "model.tensor_model_parallel_size=4", "model.sequence_parallel=true",
                              "train.global_batch_size=48", NULL};
    int64_t passes, more;
    uint64_t tasks = check_exact(pp1, &passes), tasks_more = check_exact(pp1_more, &more);
    /* each pass more: its span, the tail, a host lead and rest at most
     * (the first passes of a chunk may keep their ops) */
    cr_assert(more > passes);
    cr_assert(tasks_more - tasks <= (uint64_t)(4 * (more - passes)), "%llu tasks for %lld passes, %llu for %lld",
              (unsigned long long)tasks, (long long)passes, (unsigned long long)tasks_more, (long long)more);
    const char *buckets[] = {"model.name=llama3-8b", "cluster.topology=dgx-h100", "cluster.num_gpus=16",
                             "model.tensor_model_parallel_size=2", "model.pipeline_model_parallel_size=2",
                             "ddp.use_distributed_optimizer=false", "ddp.overlap_grad_reduce=true",
                             "ddp.overlap_param_gather=false", "train.global_batch_size=32", NULL};
    check_exact(buckets, &passes);
    const char *cp_vp[] = {"model.name=llama3-8b", "cluster.topology=dgx-h100", "cluster.num_gpus=32",
                           "model.tensor_model_parallel_size=2", "model.sequence_parallel=true",
                           "model.pipeline_model_parallel_size=2", "model.virtual_pipeline_model_parallel_size=2",
                           "model.context_parallel_size=2", "model.seq_length=8192", "train.global_batch_size=32",
                           NULL};
    check_exact(cp_vp, &passes);
    const char *moe[] = {"model.name=mixtral-8x7b", "cluster.topology=dgx-h100", "cluster.num_gpus=32",
                         "model.tensor_model_parallel_size=2", "model.sequence_parallel=true",
                         "model.expert_model_parallel_size=8", "model.expert_tensor_parallel_size=1",
                         "model.moe_token_dispatcher_type=alltoall", "model.recompute_granularity=full",
                         "train.global_batch_size=32", NULL};
    check_exact(moe, &passes);
    const char *uneven[] = {"model.name=llama3-8b", "cluster.topology=dgx-h100",
                            "model.tensor_model_parallel_size=2", "model.pipeline_model_parallel_size=3",
                            "model.num_layers_in_first_pipeline_stage=10", "model.num_layers_in_last_pipeline_stage=10",
                            "cluster.num_gpus=12", "train.global_batch_size=24", NULL};
    check_exact(uneven, &passes);
}

/* --- every reported layout equals `parsim run` of it ----------------------- */

/* Field `name` of a CSV header line, as a column index (-1: none). */
static int column(const char *header, const char *name)
{
    int col = 0;
    size_t n = strlen(name);
    for (const char *p = header; *p && *p != '\n'; col++) {
        if (!strncmp(p, name, n) && (p[n] == ',' || p[n] == '\n' || p[n] == '\0'))
            return col;
        while (*p && *p != ',' && *p != '\n')
            p++;
        if (*p == ',')
            p++;
    }
    return -1;
}

/* Field `col` of a CSV line (no quoted commas before the last field) into buf. */
static void field(const char *line, int col, char *buf, size_t len)
{
    const char *p = line;
    for (int c = 0; c < col; c++) {
        p = strchr(p, ',');
        cr_assert_not_null(p);
        p++;
    }
    size_t n = strcspn(p, ",\n");
    cr_assert(n < len);
    memcpy(buf, p, n);
    buf[n] = '\0';
}

/* The value of "key": in a JSON report, as written. */
static void json_value(const char *json, const char *key, char *buf, size_t len)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(json, pat);
    cr_assert_not_null(p, "no %s in the report", key);
    p += strlen(pat);
    size_t n = strcspn(p, ",\n}");
    cr_assert(n < len);
    memcpy(buf, p, n);
    buf[n] = '\0';
}

/* Runs an exhaustive search (settings: the space), and for its first `rows`
 * layouts `parsim run` with the row's overrides: step time, bubble and peak
 * memory the same bytes. */
static void check_search(const char *settings, int rows)
{
    make_dir();
    char csv[128];
    path_in(csv, sizeof csv, "all.csv");
    result *r = malloc(sizeof *r);
    cr_assert_not_null(r);
    runf(r, "search %s --exhaustive --jobs 2 --out '%s'", settings, csv);
    cr_assert_eq(r->status, 0, "%s", r->out);
    size_t len;
    char *text = read_file(csv, &len);
    const int c_kind = column(text, "kind"), c_time = column(text, "step_time_s"),
              c_bubble = column(text, "bubble_fraction"), c_peak = column(text, "peak_bytes");
    cr_assert(c_kind >= 0 && c_time >= 0 && c_bubble >= 0 && c_peak >= 0);
    int seen = 0;
    for (char *line = strchr(text, '\n'); line && line[1] && seen < rows; line = strchr(line + 1, '\n')) {
        char kind[32], want[3][64], got[64];
        field(line + 1, c_kind, kind, sizeof kind);
        if (strcmp(kind, "search") != 0)
            continue;
        field(line + 1, c_time, want[0], sizeof want[0]);
        field(line + 1, c_bubble, want[1], sizeof want[1]);
        field(line + 1, c_peak, want[2], sizeof want[2]);
        const char *ov = strchr(line + 1, '"');
        cr_assert_not_null(ov);
        size_t n = strcspn(ov + 1, "\"");
        char overrides[4096];
        cr_assert(n < sizeof overrides);
        memcpy(overrides, ov + 1, n);
        overrides[n] = '\0';
        runf(r, "run %s %s --format json", settings, overrides);
        cr_assert_eq(r->status, 0, "%s: %s", overrides, r->out);
        const char *keys[3] = {"step_time_s", "bubble_fraction", "peak_bytes"};
        for (int k = 0; k < 3; k++) {
            json_value(r->out, keys[k], got, sizeof got);
            cr_assert_str_eq(got, want[k], "%s: %s %s searched, %s run", overrides, keys[k], want[k], got);
        }
        seen++;
    }
    cr_assert(seen > 0, "no layout simulated for %s", settings);
    free(text);
    free(r);
    remove_dir();
}

Test(search_fast, dense_layouts_equal_run)
{
    check_search("model.name=llama3-8b cluster.topology=dgx-h100 cluster.num_gpus=16 train.global_batch_size=32 "
                 "model.context_parallel_size=1 train.micro_batch_size=1",
                 12);
}

Test(search_fast, cp_vp_layouts_equal_run)
{
    check_search("model.name=llama3-8b cluster.topology=dgx-h100 cluster.num_gpus=32 model.seq_length=8192 "
                 "train.global_batch_size=32 model.context_parallel_size=2 model.pipeline_model_parallel_size=2 "
                 "train.micro_batch_size=1",
                 12);
}

Test(search_fast, moe_layouts_equal_run)
{
    check_search("model.name=mixtral-8x7b cluster.topology=dgx-h100 cluster.num_gpus=32 train.global_batch_size=32 "
                 "model.moe_token_dispatcher_type=alltoall train.micro_batch_size=1 model.context_parallel_size=1 "
                 "model.recompute_granularity=full",
                 10);
}

Test(search_fast, uneven_split_layouts_equal_run)
{
    check_search("model.name=llama3-8b cluster.topology=dgx-h100 cluster.num_gpus=24 train.global_batch_size=24 "
                 "model.pipeline_model_parallel_size=3 model.context_parallel_size=1 train.micro_batch_size=1",
                 8);
}
