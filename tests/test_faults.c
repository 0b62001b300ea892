/* Fault injection, as SQLite tests it: `parsim run` and `parsim search`
 * (cmd_run / cmd_search, in this process) on small configs, with the n-th
 * allocation failing, for every n up to the number of allocations the
 * command makes.  Each must end with status 1 and one "out of memory" line,
 * no partial output (what it wrote before failing is whole), and every
 * block it allocated freed again: never success, never a crash, never a
 * leak.  The engine alone gets the same treatment with hints so short that
 * every one of its arrays grows.
 *
 * This binary is linked with -Wl,--wrap for malloc, calloc, realloc, free,
 * strdup, strndup and open_memstream (CMakeLists.txt), which redirects the
 * calls made by parsim's own objects (the static library and this file) to
 * the __wrap_ functions below.  Calls made inside other libraries are not
 * redirected and never fail here: libconfig (config files), GSL, and the C
 * library's own allocations (stdio buffers, the buffer behind
 * open_memstream, threads).
 *
 * No benign degradation lies on these paths: the one parsim has
 * (memory_peak_lower_bound prunes nothing without memory) allocates only
 * for more than 64 model chunks.  So success at any n is a failure of the
 * test.  Leaks are counted here (blocks allocated while armed and not
 * freed), so the check holds in the Release build too; the sanitizer build
 * (ASAN_OPTIONS=detect_leaks=1) checks the rest.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "engine.h"

/* ---- the allocation hook ---------------------------------------------- */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
FILE *__real_open_memstream(char **buf, size_t *len);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);
FILE *__wrap_open_memstream(char **buf, size_t *len);

/* Live blocks allocated while armed: an open-addressing set of pointers. */
enum { LIVE_CAP = 1 << 16 };

static struct {
    pthread_mutex_t lock;
    bool armed;
    long calls;     /* allocation calls while armed */
    long fail_at;   /* the call that fails (1-based); 0 = none */
    bool failed;    /* it has been made to fail */
    void **live;    /* LIVE_CAP slots; NULL empty, TOMB removed */
    long n_live;
} hook = {.lock = PTHREAD_MUTEX_INITIALIZER};

static char tomb;
#define TOMB ((void *)&tomb)

static size_t slot_of(const void *p)
{
    uintptr_t h = (uintptr_t)p;
    h ^= h >> 17;
    h *= 0xed5ad4bbu;
    h ^= h >> 11;
    return (size_t)h & (LIVE_CAP - 1);
}

static void live_add(void *p)
{
    for (size_t i = slot_of(p), k = 0; k < LIVE_CAP; i = (i + 1) & (LIVE_CAP - 1), k++)
        if (hook.live[i] == NULL || hook.live[i] == TOMB) {
            hook.live[i] = p;
            hook.n_live++;
            return;
        }
    abort(); /* more live blocks than the set holds: a test this small never has */
}

static void live_remove(void *p)
{
    for (size_t i = slot_of(p), k = 0; k < LIVE_CAP && hook.live[i]; i = (i + 1) & (LIVE_CAP - 1), k++)
        if (hook.live[i] == p) {
            hook.live[i] = TOMB;
            hook.n_live--;
            return;
        }
}

/* One allocation call: whether it is the one that fails. */
static bool fail_now(void)
{
    pthread_mutex_lock(&hook.lock);
    bool fail = false;
    if (hook.armed) {
        hook.calls++;
        fail = hook.calls == hook.fail_at;
        hook.failed |= fail;
    }
    pthread_mutex_unlock(&hook.lock);
    return fail;
}

static void *track(void *p)
{
    pthread_mutex_lock(&hook.lock);
    if (p && hook.armed)
        live_add(p);
    pthread_mutex_unlock(&hook.lock);
    return p;
}

static void untrack(void *p)
{
    pthread_mutex_lock(&hook.lock);
    if (p && hook.live)
        live_remove(p);
    pthread_mutex_unlock(&hook.lock);
}

void *__wrap_malloc(size_t n)
{
    return fail_now() ? NULL : track(__real_malloc(n));
}

void *__wrap_calloc(size_t n, size_t size)
{
    return fail_now() ? NULL : track(__real_calloc(n, size));
}

void *__wrap_realloc(void *p, size_t n)
{
    if (fail_now())
        return NULL; /* p stays valid, as realloc leaves it */
    void *q = __real_realloc(p, n);
    if (q) {
        untrack(p);
        track(q);
    }
    return q;
}

void __wrap_free(void *p)
{
    untrack(p);
    __real_free(p);
}

char *__wrap_strdup(const char *s)
{
    return fail_now() ? NULL : track(__real_strdup(s));
}

char *__wrap_strndup(const char *s, size_t n)
{
    return fail_now() ? NULL : track(__real_strndup(s, n));
}

/* The stream's buffer belongs to the C library (freed by our free, which
 * ignores what it did not track). */
FILE *__wrap_open_memstream(char **buf, size_t *len)
{
    return fail_now() ? NULL : __real_open_memstream(buf, len);
}

static void hook_arm(long fail_at)
{
    pthread_mutex_lock(&hook.lock);
    if (!hook.live)
        hook.live = __real_calloc(LIVE_CAP, sizeof *hook.live);
    cr_assert_not_null(hook.live);
    memset(hook.live, 0, LIVE_CAP * sizeof *hook.live);
    hook.n_live = 0;
    hook.calls = 0;
    hook.fail_at = fail_at;
    hook.failed = false;
    hook.armed = true;
    pthread_mutex_unlock(&hook.lock);
}

static void hook_disarm(void)
{
    pthread_mutex_lock(&hook.lock);
    hook.armed = false;
    pthread_mutex_unlock(&hook.lock);
}

/* ---- running a command in this process ------------------------------- */

typedef struct outcome {
    int status;
    long calls, live;
    bool failed;
    char out[1 << 16], err[4096];
} outcome;

static char scratch[64];

static void scratch_make(void)
{
    strcpy(scratch, "/tmp/parsim-XXXXXX");
    cr_assert_not_null(mkdtemp(scratch));
}

/* Files in scratch other than the captured out and err. */
static int scratch_extra(char *first, size_t cap, const char *keep)
{
    DIR *d = opendir(scratch);
    cr_assert_not_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, "out") ||
            !strcmp(e->d_name, "err") || (keep && !strcmp(e->d_name, keep)))
            continue;
        if (n++ == 0)
            snprintf(first, cap, "%s", e->d_name);
    }
    closedir(d);
    return n;
}

static void scratch_clear(bool all)
{
    DIR *d = opendir(scratch);
    cr_assert_not_null(d);
    for (struct dirent *e; (e = readdir(d));) {
        char p[512];
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (!all && (!strcmp(e->d_name, "out") || !strcmp(e->d_name, "err")))
            continue;
        snprintf(p, sizeof p, "%s/%s", scratch, e->d_name);
        unlink(p);
    }
    closedir(d);
}

static void scratch_remove(void)
{
    scratch_clear(true);
    rmdir(scratch);
}

static void slurp(const char *name, char *buf, size_t cap)
{
    char p[128];
    snprintf(p, sizeof p, "%s/%s", scratch, name);
    FILE *f = fopen(p, "r");
    cr_assert_not_null(f);
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
}

/* Runs cmd on args with stdout and stderr in scratch files and the n-th
 * allocation failing (0: none). */
static void run_cmd(int (*cmd)(int, char **), const char *const *args, long fail_at, outcome *o)
{
    char *argv[32];
    int argc = 0;
    for (; args[argc]; argc++) {
        cr_assert_lt(argc, 31);
        argv[argc] = (char *)args[argc];
    }
    argv[argc] = NULL;
    char po[128], pe[128];
    snprintf(po, sizeof po, "%s/out", scratch);
    snprintf(pe, sizeof pe, "%s/err", scratch);
    fflush(stdout);
    fflush(stderr);
    int save_out = dup(1), save_err = dup(2);
    int fo = open(po, O_WRONLY | O_CREAT | O_TRUNC, 0600), fe = open(pe, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    cr_assert(save_out >= 0 && save_err >= 0 && fo >= 0 && fe >= 0);
    dup2(fo, 1);
    dup2(fe, 2);
    close(fo);
    close(fe);
    hook_arm(fail_at);
    o->status = cmd(argc, argv);
    hook_disarm();
    fflush(stdout);
    fflush(stderr);
    dup2(save_out, 1);
    dup2(save_err, 2);
    close(save_out);
    close(save_err);
    o->calls = hook.calls;
    o->live = hook.n_live;
    o->failed = hook.failed;
    slurp("out", o->out, sizeof o->out);
    slurp("err", o->err, sizeof o->err);
}

/* Contents of a scratch file, malloc'ed ("" if absent); *len its size. */
static char *scratch_file(const char *name, size_t *len)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", scratch, name);
    char *buf = NULL;
    *len = 0;
    FILE *f = fopen(p, "r");
    if (f && fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        rewind(f);
        buf = n >= 0 ? __real_malloc((size_t)n + 1) : NULL;
        if (buf) {
            *len = fread(buf, 1, (size_t)n, f);
            buf[*len] = '\0';
        }
    }
    if (f)
        fclose(f);
    return buf;
}

/* What is wrong with a run that had allocation n fail ("" if nothing).
 * Outputs finished before the failure (stdout, the file `keep`) may stay,
 * whole: as the clean run wrote them. */
static void judge(const outcome *o, const outcome *clean, long n, const char *keep, const char *kept,
                  size_t kept_len, char *why, size_t cap)
{
    size_t len = strlen(o->err);
    char extra[256];
    why[0] = '\0';
    if (!o->failed)
        snprintf(why, cap, "allocation %ld was never made (%ld made)", n, o->calls);
    else if (o->status != 1)
        snprintf(why, cap, "status %d, stderr: %.300s", o->status, o->err);
    else if (strncmp(o->err, "parsim: ", 8) || !strstr(o->err, "out of memory") || !len ||
             strchr(o->err, '\n') != o->err + len - 1)
        snprintf(why, cap, "expected one 'out of memory' line, got: %.300s", o->err);
    else if (o->out[0] && strcmp(o->out, clean->out))
        snprintf(why, cap, "part of a report on stdout: %.200s", o->out);
    else if (o->live)
        snprintf(why, cap, "%ld blocks leaked", o->live);
    else if (scratch_extra(extra, sizeof extra, keep))
        snprintf(why, cap, "left %s behind", extra);
    else if (keep) {
        size_t l;
        char *got = scratch_file(keep, &l);
        if (got && (l != kept_len || memcmp(got, kept, l)))
            snprintf(why, cap, "left %s differing from the clean run's (%zu bytes, not %zu)", keep, l, kept_len);
        __real_free(got);
    }
}

/* Every n from 1 to the count of a clean run must fail cleanly.  Output
 * files go to scratch; only `keep` (NULL: none) may be left by a failed
 * run, and only as the clean run writes it.  Reports the first few n that
 * go wrong. */
static void every_failure(int (*cmd)(int, char **), const char *const *args, const char *keep)
{
    static outcome clean, o;
    run_cmd(cmd, args, 0, &clean);
    cr_assert_eq(clean.status, 0, "clean run failed: %s", clean.err);
    cr_assert_eq(clean.live, 0, "clean run leaves %ld blocks", clean.live);
    cr_assert_gt(clean.calls, 10, "only %ld allocations: is the hook linked in?", clean.calls);
    size_t kept_len = 0;
    char *kept = keep ? scratch_file(keep, &kept_len) : NULL;
    cr_assert(!keep || kept, "the clean run wrote no %s", keep);
    scratch_clear(false);
    int bad = 0;
    for (long n = 1; n <= clean.calls && bad < 8; n++) {
        run_cmd(cmd, args, n, &o);
        char why[512];
        judge(&o, &clean, n, keep, kept, kept_len, why, sizeof why);
        if (why[0]) {
            bad++;
            cr_log_error("allocation %ld of %ld failed: %s", n, clean.calls, why);
        }
        scratch_clear(false);
    }
    __real_free(kept);
    cr_assert_eq(bad, 0, "%d allocation failures handled wrongly (first ones above)", bad);
}

/* Small but with every part of a step: PP 2 with two chunks, TP 2 with SP,
 * DP 2 with the distributed optimizer, overlapped buckets and gathers. */
#define SMALL "model.name=llama3-8b", "model.num_layers=4", "cluster.topology=dgx-h100", "cluster.num_gpus=8", \
              "train.global_batch_size=8", "model.seq_length=2048"

Test(faults, run_fails_cleanly_at_every_allocation, .timeout = 120)
{
    static const char *const args[] = {SMALL,
                                       "model.tensor_model_parallel_size=2",
                                       "model.sequence_parallel=true",
                                       "model.pipeline_model_parallel_size=2",
                                       "model.virtual_pipeline_model_parallel_size=2",
                                       "ddp.use_distributed_optimizer=true",
                                       "ddp.overlap_grad_reduce=true",
                                       "ddp.overlap_param_gather=true",
                                       "ddp.bucket_size=100000000",
                                       NULL};
    scratch_make();
    every_failure(cmd_run, args, NULL);
    scratch_remove();
}

/* The other emitters and the DP tail: MoE with sliding-window layers, EP,
 * CP, selective recompute, reductions after the pipeline; JSON report. */
Test(faults, run_moe_fails_cleanly_at_every_allocation, .timeout = 120)
{
    static const char *const args[] = {"model.name=gpt-oss-120b",
                                       "model.num_layers=4",
                                       "cluster.topology=dgx-h100",
                                       "cluster.num_gpus=8",
                                       "train.global_batch_size=8",
                                       "model.seq_length=2048",
                                       "model.expert_model_parallel_size=4",
                                       "model.context_parallel_size=2",
                                       "model.recompute_granularity=selective",
                                       "ddp.overlap_grad_reduce=false",
                                       "ddp.use_distributed_optimizer=true",
                                       "--format",
                                       "json",
                                       NULL};
    scratch_make();
    every_failure(cmd_run, args, NULL);
    scratch_remove();
}

/* The trace path: every kernel a task, and the trace file written. */
Test(faults, run_with_trace_fails_cleanly_at_every_allocation, .timeout = 120)
{
    char trace[128];
    scratch_make();
    snprintf(trace, sizeof trace, "%s/trace.json", scratch);
    const char *const args[] = {SMALL, "model.pipeline_model_parallel_size=2", "--trace", trace, NULL};
    every_failure(cmd_run, args, "trace.json");
    scratch_remove();
}

/* Search with all but VP, SP and the distributed optimizer pinned: eight
 * layouts. */
#define PINNED                                                                                       \
    "model.tensor_model_parallel_size=2", "model.pipeline_model_parallel_size=2",                    \
        "model.context_parallel_size=1", "model.expert_model_parallel_size=1", "train.micro_batch_size=1", \
        "model.recompute_granularity=none", "--jobs", "1"

Test(faults, search_fails_cleanly_at_every_allocation, .timeout = 120)
{
    static const char *const args[] = {SMALL, PINNED, NULL};
    scratch_make();
    every_failure(cmd_search, args, NULL);
    scratch_remove();
}

/* The CSV of every simulated layout and the Pareto front. */
Test(faults, search_out_pareto_fails_cleanly_at_every_allocation, .timeout = 120)
{
    char csv[128];
    scratch_make();
    snprintf(csv, sizeof csv, "%s/search.csv", scratch);
    const char *const args[] = {SMALL, PINNED, "--pareto", "--out", csv, NULL};
    every_failure(cmd_search, args, "search.csv");
    scratch_remove();
}

/* The engine alone, from hints of one task and one edge, so that every
 * array grows: a chain of tasks over two streams with a counter.  Returns
 * the first failure, or SIM_OK with the makespan checked. */
static int engine_chain(sim_err *err)
{
    engine_t *e = eng_create(2, 1, 1, 1);
    if (!e)
        return SIM_ENOMEM;
    int rc = SIM_OK;
    eng_task prev = -1;
    for (int32_t i = 0; i < 100 && rc == SIM_OK; i++) {
        eng_task t = eng_add_task(e, i % 2, 10, i);
        if (t < 0)
            rc = SIM_ENOMEM;
        if (rc == SIM_OK && prev >= 0)
            rc = eng_add_dep(e, prev, t);
        if (rc == SIM_OK)
            rc = eng_add_counter_delta(e, t, 0, 1, -1);
        prev = t;
    }
    if (rc == SIM_OK)
        rc = eng_run(e, err);
    if (rc == SIM_OK && (eng_makespan(e) != 1000 || eng_counter_peak(e, 0) != 1))
        rc = SIM_ESIM;
    eng_destroy(e);
    return rc;
}

Test(faults, engine_fails_cleanly_at_every_allocation)
{
    sim_err err;
    sim_err_clear(&err);
    hook_arm(0);
    int rc = engine_chain(&err);
    hook_disarm();
    long total = hook.calls;
    cr_assert_eq(rc, SIM_OK, "clean run: %d %s", rc, err.msg);
    cr_assert_gt(total, 5, "only %ld allocations", total);
    for (long n = 1; n <= total; n++) {
        sim_err_clear(&err);
        hook_arm(n);
        rc = engine_chain(&err);
        hook_disarm();
        cr_assert(hook.failed, "n=%ld: never made", n);
        cr_assert_eq(rc, SIM_ENOMEM, "n=%ld of %ld: %d %s", n, total, rc, err.msg);
        cr_assert_eq(hook.n_live, 0, "n=%ld of %ld: %ld blocks leaked", n, total, hook.n_live);
    }
}
