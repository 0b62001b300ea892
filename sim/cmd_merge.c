/* parsim merge OUT.csv SHARD.csv ...: joins the outputs of `parsim sweep
 * --shard K/N` into the unsharded sweep's bytes.
 *
 * Every sweep row starts with its configuration index and each shard file
 * is in index order, so this is a k-way merge on that column, streaming (one
 * line per input in memory).  It checks what makes the result trustworthy:
 * the headers and the specs named on line 2 are identical (same sweep),
 * every shard has the rows its line 2 promises and only rows of its shard
 * (a shard killed even after a whole row has fewer: rerun it with the same
 * --out to finish), no index appears twice and none of 0..total-1 is
 * missing.  OUT is written through
 * outfile.h: a regular file is whole or untouched.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "cli.h"
#include "opts.h"
#include "outfile.h"
#include "sweep.h"

typedef struct shard_in {
    const char *path;
    FILE *f;
    char *line;      /* current row, NULL at the end */
    size_t cap;
    ssize_t len;
    int64_t lineno;
    sweep_meta meta; /* its line 2 */
    int64_t rows;    /* rows read so far */
    int64_t index;   /* of the current row */
} shard_in;

/* Reads the next row of in; in->line is NULL at the end of the file, which
 * must come after exactly the rows line 2 promises. */
static int next_row(shard_in *in, sim_err *err)
{
    int64_t prev = in->rows > 0 ? in->index : -1;
    in->len = getline(&in->line, &in->cap, in->f);
    if (in->len <= 0) {
        if (ferror(in->f))
            return sim_err_set_at(err, SIM_EIO, in->path, 0, NULL, "cannot read: %s", strerror(errno));
        free(in->line);
        in->line = NULL;
        if (in->rows != in->meta.rows)
            return sim_err_set_at(err, SIM_EINVAL, in->path, (int)in->lineno, NULL,
                                  "%" PRId64 " of the %" PRId64 " rows of shard %" PRId64 "/%" PRId64
                                  ": this shard did not finish (rerun its sweep with the same --out)",
                                  in->rows, in->meta.rows, in->meta.shard_k, in->meta.shard_n);
        return SIM_OK;
    }
    in->lineno++;
    if (in->line[in->len - 1] != '\n')
        return sim_err_set_at(err, SIM_EINVAL, in->path, (int)in->lineno, NULL,
                              "row cut short: this shard did not finish (rerun its sweep with the same --out)");
    if (!sweep_row_index(in->line, &in->index))
        return sim_err_set_at(err, SIM_EINVAL, in->path, (int)in->lineno, NULL,
                              "a sweep row starts with its configuration index");
    if (in->index <= prev)
        return sim_err_set_at(err, SIM_EINVAL, in->path, (int)in->lineno, NULL,
                              "configuration %" PRId64 " after %" PRId64 ": rows out of order", in->index, prev);
    if (in->index >= in->meta.total || in->index % in->meta.shard_n != in->meta.shard_k - 1)
        return sim_err_set_at(err, SIM_EINVAL, in->path, (int)in->lineno, NULL,
                              "configuration %" PRId64 " is not one of shard %" PRId64 "/%" PRId64
                              " of %" PRId64 " configurations",
                              in->index, in->meta.shard_k, in->meta.shard_n, in->meta.total);
    in->rows++;
    return SIM_OK;
}

/* Opens a shard and reads its header and line 2. */
static int open_shard(shard_in *in, const shard_in *first, sim_err *err)
{
    in->f = fopen(in->path, "r");
    if (!in->f)
        return sim_err_set_at(err, SIM_EINVAL, in->path, 0, NULL, "cannot open: %s", strerror(errno));
    in->len = getline(&in->line, &in->cap, in->f);
    in->lineno = 1;
    if (in->len <= 0 || in->line[in->len - 1] != '\n' || strncmp(in->line, "index,", 6) != 0)
        return sim_err_set_at(err, SIM_EINVAL, in->path, 1, NULL, "not a sweep output (no header)");
    if (first && strcmp(in->line, first->line) != 0)
        return sim_err_set_at(err, SIM_EINVAL, in->path, 1, NULL,
                              "header differs from %s's: shards of different sweeps", first->path);
    char *header = in->line;
    size_t hcap = in->cap;
    in->line = NULL;
    in->cap = 0;
    in->len = getline(&in->line, &in->cap, in->f);
    in->lineno = 2;
    bool ok = in->len > 0 && in->line[in->len - 1] == '\n' && sweep_meta_parse(in->line, &in->meta);
    free(in->line);
    in->line = header;
    in->cap = hcap;
    if (!ok)
        return sim_err_set_at(err, SIM_EINVAL, in->path, 2, NULL,
                              "no `# parsim sweep` line: not a finished sweep output (rerun its sweep with the "
                              "same --out)");
    if (first && (in->meta.spec != first->meta.spec || in->meta.total != first->meta.total))
        return sim_err_set_at(err, SIM_EINVAL, in->path, 2, NULL,
                              "a shard of another spec (%016" PRIx64 ", %s has %016" PRIx64 ")", in->meta.spec,
                              first->path, first->meta.spec);
    return SIM_OK;
}

static int merge(shard_in *in, int n, FILE *out, sim_err *err)
{
    for (int k = 0; k < n; k++) {
        int rc = open_shard(&in[k], k ? &in[0] : NULL, err);
        if (rc)
            return rc;
    }
    sweep_meta all = { in[0].meta.spec, in[0].meta.total, 1, 1, in[0].meta.total };
    char mline[192];
    sweep_meta_format(&all, mline, sizeof mline);
    if (fputs(in[0].line, out) == EOF || fputs(mline, out) == EOF)
        return sim_err_set(err, SIM_EIO, "cannot write");
    for (int k = 0; k < n; k++) {
        int rc = next_row(&in[k], err);
        if (rc)
            return rc;
    }
    for (int64_t expect = 0;; expect++) {
        int best = -1;
        for (int k = 0; k < n; k++)
            if (in[k].line && (best < 0 || in[k].index < in[best].index))
                best = k;
        if (best < 0) {
            if (expect < all.total)
                return sim_err_set(err, SIM_EINVAL,
                                   "configurations %" PRId64 " to %" PRId64 " are in no shard (a shard missing?)",
                                   expect, all.total - 1);
            return SIM_OK;
        }
        shard_in *b = &in[best];
        if (b->index < expect)
            return sim_err_set_at(err, SIM_EINVAL, b->path, (int)b->lineno, NULL,
                                  "configuration %" PRId64 " is in two shards", b->index);
        if (b->index > expect)
            return sim_err_set_at(err, SIM_EINVAL, b->path, (int)b->lineno, NULL,
                                  "configuration %" PRId64 " is in no shard (a shard missing or unfinished?)",
                                  expect);
        if (fwrite(b->line, 1, (size_t)b->len, out) != (size_t)b->len)
            return sim_err_set(err, SIM_EIO, "cannot write");
        int rc = next_row(b, err);
        if (rc)
            return rc;
    }
}

int cmd_merge(int argc, char **argv)
{
    /* no options: every "--..." is an unknown one */
    opts_iter it = opts_start(argc, argv, 0, NULL, 0, NULL, NULL);
    const char *v;
    for (int opt; (opt = opts_next(&it, &v)) != OPTS_END;)
        if (opt == OPTS_FAIL)
            return EXIT_BAD_INPUT;
    if (argc < 2)
        return cli_usage_error("merge needs an output and the shard files: parsim merge OUT.csv SHARD.csv ...");
    const char *path = argv[0];
    int n = argc - 1;
    shard_in *in = calloc((size_t)n, sizeof *in);
    if (!in) {
        fputs("parsim: out of memory\n", stderr);
        return EXIT_FAILURE;
    }
    for (int k = 0; k < n; k++)
        in[k].path = argv[k + 1];

    sim_err err;
    sim_err_clear(&err);
    outfile out;
    int rc = outfile_open(&out, path, &err);
    if (rc == SIM_OK) {
        rc = merge(in, n, out.f, &err);
        sim_err cerr;
        sim_err_clear(&cerr);
        if (outfile_close(&out, rc == SIM_OK, &cerr) != SIM_OK && rc == SIM_OK) {
            rc = SIM_EIO;
            err = cerr;
        }
    }
    for (int k = 0; k < n; k++) {
        if (in[k].f)
            fclose(in[k].f);
        free(in[k].line);
    }
    free(in);
    return rc == SIM_OK ? EXIT_SUCCESS : cli_fail(&err);
}
