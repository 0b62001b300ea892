/* parsim sweep: runs a sweep spec (sweep.h) and streams one CSV row per
 * configuration, in configuration order, to --out or stdout.
 *
 * Durability.  Each row is written and flushed as soon as it and every row
 * before it are done, so a killed sweep leaves whole rows (and at most one
 * partial line, which the next run cuts off).  Rerunning with the same --out
 * resumes after the last complete row (sweep_open_output).
 *
 * Shards.  --shard K/N runs configurations K-1, K-1+N, K-1+2N, ...; every
 * row starts with its configuration index, so `parsim merge` can interleave
 * the shard files back into the unsharded sweep's bytes.
 *
 * MPI.  In a build with -DPARSIM_MPI=ON, a sweep started by mpirun (detected
 * from the launcher's environment) deals the configurations round-robin to
 * the ranks; every rank simulates, rank 0 also collects the rows in order
 * and is the only one that writes.  The output is byte for byte the one
 * --jobs 1 writes, and resuming works the same way.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef PARSIM_MPI
#include <mpi.h>
#endif

#include "cli.h"
#include "bounds.h"
#include "numparse.h"
#include "opts.h"
#include "progress.h"
#include "sweep.h"

typedef struct sweep_args {
    const char *spec;
    const char *out;  /* NULL = stdout */
    int jobs;
    int64_t shard_k, shard_n;
} sweep_args;

/* Where rows go, and the meter. */
typedef struct sink {
    FILE *f;
    const char *name;   /* for messages */
    progress_t prog;
    int64_t done;       /* rows of the shard written, resumed ones included */
} sink;

static int sink_write(sink *s, const char *row, size_t len, sim_err *err)
{
    if (fwrite(row, 1, len, s->f) != len || fflush(s->f) != 0)
        return sim_err_set_at(err, SIM_EIO, s->name, 0, NULL, "cannot write: %s", strerror(errno));
    s->done++;
    progress_update(&s->prog, s->done);
    return SIM_OK;
}

typedef struct emit_ctx {
    sink *s;
    sim_err *err;
} emit_ctx;

static int emit_to_sink(void *ctx, int64_t pos, int64_t index, const char *row, size_t len)
{
    (void)pos;
    (void)index;
    emit_ctx *e = ctx;
    return sink_write(e->s, row, len, e->err);
}

/* "K/N" with 1 <= K <= N <= LIMIT_SWEEP_CONFIGS. */
static bool parse_shard(const char *v, int64_t *k, int64_t *n)
{
    const char *slash = strchr(v, '/');
    char kt[32];
    if (!slash || (size_t)(slash - v) >= sizeof kt)
        return false;
    snprintf(kt, sizeof kt, "%.*s", (int)(slash - v), v);
    return num_parse_int(kt, k) && num_parse_int(slash + 1, n) && *k >= 1 && *k <= *n &&
           *n <= LIMIT_SWEEP_CONFIGS;
}

enum { O_JOBS, O_SHARD, O_OUT };
static const opts_def sweep_opts[] = {
    [O_JOBS] = {"--jobs", "a value"}, [O_SHARD] = {"--shard", "a value"}, [O_OUT] = {"--out", "a value"},
};

static int parse_args(int argc, char **argv, sweep_args *a)
{
    memset(a, 0, sizeof *a);
    a->jobs = 1;
    a->shard_k = a->shard_n = 1;
    opts_iter it = opts_start(argc, argv, 0, sweep_opts, sizeof sweep_opts / sizeof sweep_opts[0], NULL, NULL);
    const char *v;
    for (int opt; (opt = opts_next(&it, &v)) != OPTS_END;) {
        if (opt == OPTS_FAIL)
            return EXIT_BAD_INPUT;
        if (opt == O_OUT) {
            a->out = v;
        } else if (opt == O_JOBS) {
            int rc = cli_jobs_arg("--jobs", v, &a->jobs);
            if (rc)
                return rc;
        } else if (opt == O_SHARD) {
            if (!parse_shard(v, &a->shard_k, &a->shard_n))
                return cli_usage_error("--shard takes K/N with 1 <= K <= N <= %lld, got '%s'",
                                       LIMIT_SWEEP_CONFIGS, v);
        } else if (a->spec) {
            return cli_usage_error("one sweep spec only, got another: '%s'", v);
        } else {
            a->spec = v;
        }
    }
    if (!a->spec)
        return cli_usage_error("sweep needs a spec file: parsim sweep SWEEP.cfg [--jobs N] [--shard K/N] "
                               "[--out FILE.csv]");
    return 0;
}

/* Opens the sink: resumes --out, or writes the header to stdout.  Returns
 * the rows of span already done. */
static int open_sink(sink *s, const sweep_args *a, const sweep_t *sw, sweep_span span, sim_err *err)
{
    memset(s, 0, sizeof *s);
    sweep_meta meta = sweep_meta_of(sw, a->shard_k, a->shard_n);
    s->name = a->out ? a->out : "standard output";
    return sweep_open_output(a->out ? a->out : "-", sweep_header(sw), &meta, span, &s->f, &s->done, err);
}

static int close_sink(sink *s, sim_err *err)
{
    progress_end(&s->prog);
    if (s->f && s->f != stdout && fclose(s->f) != 0)
        return sim_err_set_at(err, SIM_EIO, s->name, 0, NULL, "cannot write: %s", strerror(errno));
    return SIM_OK;
}

/* The rows after the first `done` of span. */
static sweep_span remaining(sweep_span span, int64_t done)
{
    sweep_span r = { span.first + done * span.stride, span.stride, span.count - done };
    return r;
}

static int run_local(const sweep_args *a, const sweep_t *sw, sweep_span span)
{
    sim_err err;
    sim_err_clear(&err);
    sink s;
    if (open_sink(&s, a, sw, span, &err) != SIM_OK)
        return cli_fail(&err);
    progress_start(&s.prog, span.count, s.done, "sweep");
    emit_ctx ec = { &s, &err };
    int rc = sweep_run(sw, remaining(span, s.done), a->jobs, emit_to_sink, &ec, &err);
    sim_err cerr;
    sim_err_clear(&cerr);
    int crc = close_sink(&s, &cerr);
    if (rc != SIM_OK)
        return cli_fail(&err);
    if (crc != SIM_OK)
        return cli_fail(&cerr);
    return EXIT_SUCCESS;
}

#ifdef PARSIM_MPI

#define ROW_TAG 17

/* Launched by mpirun (Open MPI, or a PMI-based launcher such as srun)? */
static bool under_mpi(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}

/* This process's rank as the launcher tells it, before MPI_Init; 0 if it
 * does not. */
static long launcher_rank(void)
{
    const char *v = getenv("OMPI_COMM_WORLD_RANK");
    if (!v)
        v = getenv("PMI_RANK");
    if (!v)
        v = getenv("PMIX_RANK");
    return v ? strtol(v, NULL, 10) : 0;
}

typedef struct mpi_ctx {
    sink *s;
    sim_err *err;
    int size;
    int64_t next;   /* rank 0: positions of the remaining span written */
    char *buf;      /* rank 0: receive buffer */
    int cap;
} mpi_ctx;

/* Rank 0: writes the rows of other ranks up to position `upto`. */
static int drain(mpi_ctx *m, int64_t upto)
{
    for (; m->next < upto; m->next++) {
        int src = (int)(m->next % m->size);
        if (src == 0)
            return sim_err_set(m->err, SIM_ESIM, "internal: rank 0's own row missing");
        MPI_Status st;
        int n;
        MPI_Probe(src, ROW_TAG, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_CHAR, &n);
        if (n > m->cap) {
            char *b = realloc(m->buf, (size_t)n);
            if (!b)
                return sim_err_set(m->err, SIM_ENOMEM, "out of memory");
            m->buf = b;
            m->cap = n;
        }
        MPI_Recv(m->buf, n, MPI_CHAR, src, ROW_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        int rc = sink_write(m->s, m->buf, (size_t)n, m->err);
        if (rc)
            return rc;
    }
    return SIM_OK;
}

/* Rank 0's own rows: position pos of its span is global position pos*size. */
static int emit_rank0(void *ctx, int64_t pos, int64_t index, const char *row, size_t len)
{
    (void)index;
    mpi_ctx *m = ctx;
    int rc = drain(m, pos * m->size);
    if (rc == SIM_OK)
        rc = sink_write(m->s, row, len, m->err);
    m->next++;
    return rc;
}

static int emit_send(void *ctx, int64_t pos, int64_t index, const char *row, size_t len)
{
    (void)ctx;
    (void)pos;
    (void)index;
    MPI_Send(row, (int)len, MPI_CHAR, 0, ROW_TAG, MPI_COMM_WORLD);
    return SIM_OK;
}

static int run_mpi(const sweep_args *a, const sweep_t *sw, sweep_span span)
{
    int provided, rank, size;
    MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    sim_err err;
    sim_err_clear(&err);
    sink s;
    memset(&s, 0, sizeof s);
    /* rank 0 opens (and resumes) the output; everyone learns how far it got */
    int64_t hello[2] = { EXIT_SUCCESS, 0 };
    if (rank == 0) {
        if (open_sink(&s, a, sw, span, &err) != SIM_OK)
            hello[0] = cli_fail(&err);
        hello[1] = s.done;
    }
    MPI_Bcast(hello, 2, MPI_INT64_T, 0, MPI_COMM_WORLD);
    if (hello[0] != EXIT_SUCCESS) {
        MPI_Finalize();
        return (int)hello[0];
    }
    sweep_span rest = remaining(span, hello[1]);
    sweep_span mine = { rest.first + rank * rest.stride, rest.stride * size, 0 };
    if (rest.count > rank)
        mine.count = (rest.count - rank + size - 1) / size;

    int rc;
    if (rank == 0) {
        progress_start(&s.prog, span.count, s.done, "sweep");
        mpi_ctx m = { .s = &s, .err = &err, .size = size };
        rc = sweep_run(sw, mine, a->jobs, emit_rank0, &m, &err);
        if (rc == SIM_OK)
            rc = drain(&m, rest.count);
        free(m.buf);
        sim_err cerr;
        sim_err_clear(&cerr);
        if (close_sink(&s, &cerr) != SIM_OK && rc == SIM_OK) {
            rc = SIM_EIO;
            err = cerr;
        }
    } else {
        rc = sweep_run(sw, mine, a->jobs, emit_send, NULL, &err);
    }
    if (rc != SIM_OK) {
        /* the other ranks may wait on this one forever: stop them all */
        int code = cli_fail(&err);
        MPI_Abort(MPI_COMM_WORLD, code);
        return code;
    }
    MPI_Finalize();
    return EXIT_SUCCESS;
}

#endif /* PARSIM_MPI */

int cmd_sweep(int argc, char **argv)
{
    sweep_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc)
        return rc;
    sim_err err;
    sim_err_clear(&err);
    sweep_t *sw;
    if (sweep_load(&sw, a.spec, NULL, &err) != SIM_OK) {
#ifdef PARSIM_MPI
        /* every rank finds the same fault: let one of them say it */
        if (under_mpi() && launcher_rank() != 0)
            return err.code == SIM_EINVAL ? EXIT_BAD_INPUT : EXIT_FAILURE;
#endif
        return cli_fail(&err);
    }
    sweep_span span = sweep_shard_span(sw, a.shard_k, a.shard_n);
#ifdef PARSIM_MPI
    if (under_mpi())
        rc = run_mpi(&a, sw, span);
    else
#endif
        rc = run_local(&a, sw, span);
    sweep_destroy(sw);
    return rc;
}
