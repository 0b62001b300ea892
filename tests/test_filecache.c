#define _DEFAULT_SOURCE /* mkdtemp */
/* filecache: a value kept per (kind, path), the first kept winning, at most
 * FILECACHE_MAX of them; and a sweep, which parses each input file once
 * through one, writes the rows a sweep that reads every file each time
 * writes (sweep_row), error rows included: a file that fails to parse is
 * not kept, and fails the same way for every row that names it. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "filecache.h"
#include "scratch.h"
#include "sweep.h"

static int freed;
static void count_free(void *p)
{
    freed++;
    free(p);
}

static int *boxed(int v)
{
    int *p = malloc(sizeof *p);
    cr_assert_not_null(p);
    *p = v;
    return p;
}

Test(filecache, keeps_the_first_value_per_kind_and_path_up_to_its_bound)
{
    freed = 0;
    filecache *fc = filecache_create();
    cr_assert_not_null(fc);
    cr_assert_null(filecache_get(fc, FILECACHE_SETTINGS, "a.cfg"));
    const int *a = filecache_put(fc, FILECACHE_SETTINGS, "a.cfg", boxed(1), count_free);
    cr_assert(a && *a == 1);
    /* another thread's parse of the same file: the first stays */
    const int *again = filecache_put(fc, FILECACHE_SETTINGS, "a.cfg", boxed(2), count_free);
    cr_assert_eq(again, a);
    cr_assert_eq(freed, 1);
    /* the same path read as a table is another entry */
    cr_assert_null(filecache_get(fc, FILECACHE_KERNELS, "a.cfg"));
    const int *k = filecache_put(fc, FILECACHE_KERNELS, "a.cfg", boxed(3), count_free);
    cr_assert(k && *k == 3 && filecache_get(fc, FILECACHE_SETTINGS, "a.cfg") == a);
    /* full: the value is freed and nothing kept */
    char path[32];
    for (int n = 2; n < FILECACHE_MAX; n++) {
        snprintf(path, sizeof path, "f%d.cfg", n);
        cr_assert_not_null(filecache_put(fc, FILECACHE_SETTINGS, path, boxed(n), count_free));
    }
    cr_assert_null(filecache_put(fc, FILECACHE_SETTINGS, "one-more.cfg", boxed(0), count_free));
    cr_assert_null(filecache_get(fc, FILECACHE_SETTINGS, "one-more.cfg"));
    cr_assert_eq(freed, 2);
    filecache_destroy(fc);
    cr_assert_eq(freed, 2 + FILECACHE_MAX);
}

typedef struct rows {
    char *text[64];
    int64_t n;
} rows;

static int keep_row(void *ctx, int64_t pos, int64_t index, const char *row, size_t len)
{
    rows *r = ctx;
    cr_assert(pos == r->n && index == pos && pos < 64);
    r->text[r->n++] = strndup(row, len);
    return 0;
}

/* Two models, three parameter files (none, one that parses, one that
 * does not), with and without a measured table, two TP sizes: 24 rows, 8
 * of them errors naming the bad file.  The topology names a kernel table:
 * every kind of file the cache keeps is read through it. */
Test(filecache, sweep_rows_through_it_are_the_rows_read_file_by_file, .timeout = 120)
{
    make_dir();
    char good[256], bad[256], spec[256], text[2048];
    path_in(good, sizeof good, "good.cfg");
    path_in(bad, sizeof bad, "bad.cfg");
    path_in(spec, sizeof spec, "spec.cfg");
    write_file(good, "cluster: { compute: { sustained_fraction = 0.8; }; };\n");
    write_file(bad, "cluster: { compute: { sustained_fraction = ; }; };\n");
    snprintf(text, sizeof text,
             "sweep: {\n"
             "  set = [ \"cluster.topology=dgx-h100\", \"cluster.num_gpus=8\", \"train.global_batch_size=16\" ];\n"
             "  vary = (\n"
             "    { key = \"model.name\"; values = [\"llama3-8b\", \"qwen3-30b-a3b\"]; },\n"
             "    { key = \"sim.params\"; values = [\"\", \"%s\", \"%s\"]; },\n"
             "    { key = \"cluster.compute.microbench\"; values = [\"\", \"%s\"]; },\n"
             "    { key = \"model.tensor_model_parallel_size\"; values = [1, 2]; }\n"
             "  );\n};\n",
             good, bad, PARSIM_SOURCE_DIR "/tests/data/microbench_synthetic.cfg");
    write_file(spec, text);
    sim_err err;
    sim_err_clear(&err);
    sweep_t *sw = NULL;
    cr_assert_eq(sweep_load(&sw, spec, PARSIM_SOURCE_DIR, &err), SIM_OK, "%s", err.msg);
    const int64_t total = sweep_total(sw);
    cr_assert_eq(total, 24);
    for (int jobs = 1; jobs <= 2; jobs++) {
        rows r = {0};
        cr_assert_eq(sweep_run(sw, sweep_shard_span(sw, 1, 1), jobs, keep_row, &r, &err), SIM_OK, "%s", err.msg);
        cr_assert_eq(r.n, total);
        int errors = 0, done = 0;
        for (int64_t i = 0; i < total; i++) {
            char *row;
            size_t len;
            cr_assert_eq(sweep_row(sw, i, &row, &len, &err), SIM_OK, "%s", err.msg);
            cr_assert_str_eq(r.text[i], row, "row %ld with --jobs %d", (long)i, jobs);
            errors += strstr(row, "bad.cfg") != NULL && strstr(row, "syntax error") != NULL;
            done += strstr(row, "syntax error") == NULL && strstr(row, ",\n") != NULL;
            free(row);
            free(r.text[i]);
        }
        cr_assert_eq(errors, 8, "every row naming the bad file reports it");
        cr_assert_geq(done, 8, "rows that simulate");
    }
    sweep_destroy(sw);
    remove_dir();
}
