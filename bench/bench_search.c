/* bench_search: how many configurations per second `parsim search` simulates
 * on one core, and where each configuration's time goes.
 *
 * Runs search_run (the entry point of `parsim search`, set up as cmd_search
 * sets it up: config file, KEY=VALUE overrides pinning their dimension,
 * overlapped grad reduce and param gather, the same malloc tuning) with
 * jobs = 1 on:
 *   llama3-70b  Llama 3 70B on 1,024 H100s, seq 8192, GBS 1024, --exhaustive
 *   dsv3        DeepSeek-V3 on 1,024 H100s, seq 4096, GBS 1024, --exhaustive
 *   gpt3        GPT-3 175B on 16,384 H100s, seq 2048, GBS 2048, --exhaustive
 *               (seconds: the default time-bound search simulates 349)
 * and prints the configurations simulated, wall and CPU seconds,
 * configurations per second per core, the cost of one configuration split
 * into its pieces, the engine's tasks and events per configuration, and
 * the peak and current RSS after the search.
 *
 * The split comes from link-time hooks (-Wl,--wrap, CMakeLists.txt) on the
 * public functions the search calls: workload_build ("workload": the one
 * build of a layout, for its time bound and, in an exhaustive search, its
 * step too; "workload(step)": one inside step_run, where the step builds
 * its own), step_run and step_run_reuse, eng_create, eng_run and
 * step_destroy.  Each hook reads the thread's CPU clock on entry and exit,
 * so the search runs its own code unchanged (nothing in parsim knows about
 * the timers) and the figures hold on a loaded machine.  Inside step_run:
 *   templates  workload built -> eng_create (activation check, every pass
 *              template swept once; a step walked without a graph,
 *              step_direct.h, is all templates)
 *   graph      eng_create -> eng_run (the step's tasks, edges, counters)
 *   engine     eng_run
 *   measure    eng_run returned -> step_run returns (bubble, exposed
 *              communication, memory off the timeline; with
 *              sim.steady_extension also the periodicity check of the first
 *              sample and the extension: a step derived from two samples
 *              counts the second here where it is walked, else a second
 *              graph and engine run, and a sample that fails the check is
 *              followed by the whole step's)
 * and how many steps came from two samples.
 * Four lines say where the simulated steps' time goes: CPU inside step_run
 * by how a step's figures came (walked whole without a graph,
 * step_direct.h; whole on its graph with no sample tried, whole after
 * samples that did not fit: more than one engine run, from one sample,
 * from two); the same CPU per task of those steps' engine runs, or of the
 * tasks a walk timed (what a step costs per task simulated, its fixed
 * part and templates included; a walked second sample's tasks are not
 * counted, so "two samples" reads high);
 * the layout shapes (PP x VP) that take the most of it; and the engine
 * runs' tasks by stream (compute, pipeline
 * sends, host, the other communication streams; step.c's layout of a
 * stage's streams, read off each run engine's stream views; sends that
 * are lags and host stand-ins folded into release times are no tasks,
 * step.c's "Sends" and "The host").
 * "other" is the rest of the search (enumeration, strategy_resolve, memory
 * bound, time bound past its workload, ranking).
 *
 * --allocs also counts the allocations of parsim's own code (malloc, calloc,
 * realloc, strdup, strndup: the calls made by the static library, as
 * tests/test_faults.c hooks them) per phase and per call site (return
 * address and phase, resolved with addr2line, inlined frames too: file and
 * line need a build with debug information, such as RelWithDebInfo), and
 * the live heap bytes: peak during the search and what is left after
 * search_result_free (0 when nothing leaks or grows).
 *
 * --verify simulates every step derived from two samples whole as well and
 * compares every figure bit for bit (exit status 1 if any differs; the
 * timings then include the whole simulations).
 *
 *   bench_search [--quick] [--repeat N] [--allocs] [--verify] [--case NAME]...
 *     --quick      pinned subsets of each case (hundreds of configurations,
 *                  seconds in all), for CI-size runs
 *     --repeat N   run each case N times, print every run and the median
 *     --case NAME  llama3-70b, dsv3 or gpt3 (repeatable; default all three)
 */
/* dladdr: the load address of the executable, for addr2line. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "engine.h"
#include "search.h"
#include "step.h"
#include "streams.h"
#include "workload.h"

#ifndef PARSIM_SOURCE_DIR
#define PARSIM_SOURCE_DIR "."
#endif

/* ---- phases and their clock --------------------------------------------- */

typedef enum {
    PH_OTHER = 0, PH_WL_BOUND, PH_WL_STEP, PH_TEMPLATES, PH_GRAPH, PH_ENGINE, PH_MEASURE, PH_FREE, PH_N
} phase;

static const char *const phase_name[PH_N] = {
    "other", "workload", "workload(step)", "templates", "graph", "engine", "measure", "free",
};

/* How a step's figures came: simulated whole with no sample tried,
 * whole after samples that did not fit (more than one engine run), from
 * one sample, from two. */
typedef enum { WAY_WALKED = 0, WAY_WHOLE, WAY_WHOLE_AFTER_SAMPLE, WAY_ONE, WAY_TWO, WAY_N } way;
static const char *const way_name[WAY_N] = {"walked", "whole", "whole after a sample", "one sample", "two samples"};

/* The streams the engine's tasks lie on, grouped as step.c lays a stage
 * out (stream_of: stage * STREAM_KINDS + kind); host takes the host's
 * waits too. */
typedef enum { MIX_COMPUTE = 0, MIX_PP, MIX_HOST, MIX_OTHER_COMM, MIX_N } mix;
static const char *const mix_name[MIX_N] = {"compute", "pipeline sends as tasks", "host", "TP/CP/EP/DP/offload"};

enum { SHAPES_MAX = 128, SHAPES_SHOWN = 5 };

typedef struct split {
    double cpu_s[PH_N];
    uint64_t allocs[PH_N];
    uint64_t alloc_bytes[PH_N];
    uint64_t step_runs, eng_runs, tasks, events;
    uint64_t extended; /* step_runs whose figures came from samples (step_period) */
    uint64_t one_sample; /* of them, from one sample (step_samples) */
    /* Per way a step's figures came (way_name): steps and their CPU
     * seconds inside step_run, templates and measurement included. */
    uint64_t by_way[WAY_N];
    double way_cpu_s[WAY_N];
    uint64_t way_tasks[WAY_N]; /* the tasks of their engine runs (walked: the tasks the walk timed) */
    /* Per layout shape (PP, VP as the step runs it): steps and their CPU
     * seconds inside step_run; a search has a few dozen shapes. */
    struct shape_cost {
        int64_t pp, v;
        uint64_t steps;
        double cpu_s;
    } shapes[SHAPES_MAX];
    int n_shapes;
    uint64_t shapes_dropped; /* steps of shapes past SHAPES_MAX */
    uint64_t tasks_by_mix[MIX_N]; /* the engine runs' tasks by stream (mix_name) */
} split;

static split acc;          /* the current search */
static phase cur = PH_OTHER;
static double cur_since;   /* thread CPU time when cur began */
static bool in_step;       /* inside step_run */
static bool count_allocs;  /* --allocs */
static bool verify;        /* --verify */
static uint64_t verified, verify_failed;
static uint64_t period_checked, period_failed; /* --verify: one sample against two (sim.period_check) */

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Charges the time since the last switch to the phase that ran, and
 * returns it so that a hook can restore it on exit. */
static phase enter(phase p)
{
    double now = thread_cpu_s();
    acc.cpu_s[cur] += now - cur_since;
    cur_since = now;
    phase was = cur;
    cur = p;
    return was;
}

/* ---- the hooks ------------------------------------------------------------ */

int __real_workload_build(workload_t **out, const run_inputs *in, const strategy_t *s, sim_err *err);
int __wrap_workload_build(workload_t **out, const run_inputs *in, const strategy_t *s, sim_err *err);
int __real_step_run(step_t **out, const run_inputs *in, const strategy_t *s, sim_err *err);
int __wrap_step_run(step_t **out, const run_inputs *in, const strategy_t *s, sim_err *err);
int __real_step_run_reuse(step_t **out, const run_inputs *in, const strategy_t *s, workload_t *wl, wl_cache *cache,
                          sim_err *err);
int __wrap_step_run_reuse(step_t **out, const run_inputs *in, const strategy_t *s, workload_t *wl, wl_cache *cache,
                          sim_err *err);
void __real_step_destroy(step_t *st);
void __wrap_step_destroy(step_t *st);
engine_t *__real_eng_create(int n_streams, int n_counters, size_t task_hint, size_t dep_hint);
int __wrap_step_run(step_t **out, const run_inputs *in, const strategy_t *s, sim_err *err)
{
    return __wrap_step_run_reuse(out, in, s, NULL, NULL, err);
}

engine_t *__wrap_eng_create(int n_streams, int n_counters, size_t task_hint, size_t dep_hint);
int __real_eng_run(engine_t *e, sim_err *err);
int __wrap_eng_run(engine_t *e, sim_err *err);

int __wrap_workload_build(workload_t **out, const run_inputs *in, const strategy_t *s, sim_err *err)
{
    phase was = enter(in_step ? PH_WL_STEP : PH_WL_BOUND);
    int rc = __real_workload_build(out, in, s, err);
    /* In step_run the pass templates come next. */
    enter(in_step ? PH_TEMPLATES : was);
    return rc;
}

/* --verify: the step simulated whole as well; every figure must be the
 * same bit for bit. */
static void verify_whole(const step_t *st, const run_inputs *in, const strategy_t *s)
{
    run_inputs whole = *in;
    whole.sim.steady_extension = false;
    step_t *w = NULL;
    sim_err err;
    sim_err_clear(&err);
    bool same = __real_step_run(&w, &whole, s, &err) == SIM_OK;
    if (same) {
        const step_result *x = step_result_get(st), *y = step_result_get(w);
        step_result xs = *x, ys = *y;
        xs.stages = ys.stages = NULL;
        same = memcmp(&xs, &ys, sizeof xs) == 0 && x->n_stages == y->n_stages;
        for (int64_t r = 0; same && r < x->n_stages; r++)
            same = memcmp(&x->stages[r], &y->stages[r], sizeof x->stages[r]) == 0;
    }
    __real_step_destroy(w);
    verified++;
    if (!same && verify_failed++ < 10)
        fprintf(stderr, "bench_search: --verify: PP %lld VP %lld M %lld differs from the whole simulation\n",
                (long long)s->pp, (long long)s->v, (long long)s->num_microbatches);
}

/* One step of shape (pp, v) took cpu seconds. */
static void add_shape(int64_t pp, int64_t v, double cpu)
{
    int i = 0;
    while (i < acc.n_shapes && (acc.shapes[i].pp != pp || acc.shapes[i].v != v))
        i++;
    if (i == acc.n_shapes) {
        if (i == SHAPES_MAX) {
            acc.shapes_dropped++;
            return;
        }
        acc.shapes[acc.n_shapes++] = (struct shape_cost){pp, v, 0, 0.0};
    }
    acc.shapes[i].steps++;
    acc.shapes[i].cpu_s += cpu;
}

int __wrap_step_run_reuse(step_t **out, const run_inputs *in, const strategy_t *s, workload_t *wl, wl_cache *cache,
                          sim_err *err)
{
    phase was = enter(PH_TEMPLATES);
    in_step = true;
    acc.step_runs++;
    /* --verify: a step from one sample takes the second as well and
     * compares what one period adds. */
    run_inputs checked;
    if (verify) {
        checked = *in;
        checked.sim.period_check = true;
    }
    const uint64_t runs0 = acc.eng_runs, tasks0 = acc.tasks;
    const double t0 = thread_cpu_s();
    int rc = __real_step_run_reuse(out, verify ? &checked : in, s, wl, cache, err);
    if (rc == SIM_OK) {
        const bool walked = !step_extended(*out) && !step_engine(*out);
        const way w = walked                ? WAY_WALKED
                      : !step_extended(*out) ? (acc.eng_runs - runs0 > 1 ? WAY_WHOLE_AFTER_SAMPLE : WAY_WHOLE)
                                             : (step_samples(*out) == 1 ? WAY_ONE : WAY_TWO);
        const double cpu = thread_cpu_s() - t0;
        acc.by_way[w]++;
        acc.way_cpu_s[w] += cpu;
        acc.way_tasks[w] += walked ? step_result_get(*out)->tasks : acc.tasks - tasks0;
        add_shape(s->pp, s->v, cpu);
    }
    if (rc == SIM_OK && step_extended(*out)) {
        acc.extended++;
        acc.one_sample += step_samples(*out) == 1;
        if (verify) {
            verify_whole(*out, in, s);
            const int c = step_period_checked(*out);
            period_checked += c != 0;
            if (c < 0 && period_failed++ < 10)
                fprintf(stderr, "bench_search: --verify: PP %lld VP %lld M %lld: one sample's period differs from two samples'\n",
                        (long long)s->pp, (long long)s->v, (long long)s->num_microbatches);
        }
    }
    in_step = false;
    enter(was);
    return rc;
}

engine_t *__wrap_eng_create(int n_streams, int n_counters, size_t task_hint, size_t dep_hint)
{
    if (in_step)
        enter(PH_GRAPH);
    return __real_eng_create(n_streams, n_counters, task_hint, dep_hint);
}

/* Tasks of a run engine by stream: a walk over its streams (a few
 * hundred), not its tasks, charged to the engine's phase. */
static void count_mix(const engine_t *e)
{
    for (int sid = 0; sid < eng_num_streams(e); sid++) {
        const eng_task *ids;
        const size_t n = eng_stream_view(e, sid, &ids);
        const stream_kind k = (stream_kind)(sid % STREAM_KINDS);
        const stream_role role = streams_desc(k)->role;
        const mix m = role == STREAM_ROLE_COMPUTE ? MIX_COMPUTE
                      : k == STREAM_PP            ? MIX_PP
                      : role == STREAM_ROLE_COMM  ? MIX_OTHER_COMM
                                                  : MIX_HOST;
        acc.tasks_by_mix[m] += n;
    }
}

int __wrap_eng_run(engine_t *e, sim_err *err)
{
    phase was = enter(PH_ENGINE);
    int rc = __real_eng_run(e, err);
    acc.eng_runs++;
    acc.tasks += eng_num_tasks(e);
    acc.events += eng_events(e);
    if (rc == SIM_OK)
        count_mix(e);
    enter(in_step ? PH_MEASURE : was);
    return rc;
}

void __wrap_step_destroy(step_t *st)
{
    phase was = enter(PH_FREE);
    __real_step_destroy(st);
    enter(was);
}

/* ---- allocation counting (--allocs) --------------------------------------- */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);

/* Call sites: an open-addressing table keyed by return address and phase
 * (the workload's sites run in both of its builds). */
enum { SITE_CAP = 1 << 12 };
typedef struct site {
    uintptr_t pc;
    phase ph;
    uint64_t calls, bytes;
} site;
static site sites[SITE_CAP];
static size_t n_sites;
static int64_t live_bytes, live_peak;

static void note_alloc(void *p, size_t want, uintptr_t pc)
{
    if (!p || !count_allocs)
        return;
    acc.allocs[cur]++;
    acc.alloc_bytes[cur] += want;
    live_bytes += (int64_t)malloc_usable_size(p);
    if (live_bytes > live_peak)
        live_peak = live_bytes;
    size_t h = (size_t)(((pc + (uintptr_t)cur) * 0x9E3779B97F4A7C15ULL) >> 52) & (SITE_CAP - 1);
    for (size_t k = 0; k < SITE_CAP; k++, h = (h + 1) & (SITE_CAP - 1)) {
        if ((sites[h].pc == pc && sites[h].ph == cur) || sites[h].pc == 0) {
            if (sites[h].pc == 0) {
                if (n_sites + 1 >= SITE_CAP)
                    return; /* full: the site tally stops growing, totals go on */
                sites[h] = (site){.pc = pc, .ph = cur};
                n_sites++;
            }
            sites[h].calls++;
            sites[h].bytes += want;
            return;
        }
    }
}

static void note_free(void *p)
{
    if (p && count_allocs)
        live_bytes -= (int64_t)malloc_usable_size(p);
}

#define CALLER ((uintptr_t)__builtin_extract_return_addr(__builtin_return_address(0)))

void *__wrap_malloc(size_t n)
{
    void *p = __real_malloc(n);
    note_alloc(p, n, CALLER);
    return p;
}

void *__wrap_calloc(size_t n, size_t size)
{
    void *p = __real_calloc(n, size);
    note_alloc(p, n * size, CALLER);
    return p;
}

void *__wrap_realloc(void *p, size_t n)
{
    note_free(p);
    void *q = __real_realloc(p, n);
    if (!q && p && count_allocs) /* failed: p is still there */
        live_bytes += (int64_t)malloc_usable_size(p);
    note_alloc(q, n, CALLER);
    return q;
}

void __wrap_free(void *p)
{
    note_free(p);
    __real_free(p);
}

char *__wrap_strdup(const char *s)
{
    char *p = __real_strdup(s);
    note_alloc(p, p ? strlen(p) + 1 : 0, CALLER);
    return p;
}

char *__wrap_strndup(const char *s, size_t n)
{
    char *p = __real_strndup(s, n);
    note_alloc(p, p ? strlen(p) + 1 : 0, CALLER);
    return p;
}

static int cmp_site(const void *a, const void *b)
{
    const site *x = a, *y = b;
    return x->calls < y->calls ? 1 : x->calls > y->calls ? -1 : (x->pc > y->pc) - (x->pc < y->pc);
}

/* The busiest call sites of one search, per configuration, with function
 * and line from addr2line (the executable is position independent: the
 * offset from its load address is what addr2line reads). */
static void print_sites(double n_cfg)
{
    /* Its own allocations are not part of the figures (and must not add
     * sites while they are copied). */
    count_allocs = false;
    site *v = malloc(SITE_CAP * sizeof *v);
    if (!v)
        return;
    size_t n = 0;
    for (size_t h = 0; h < SITE_CAP; h++)
        if (sites[h].pc)
            v[n++] = sites[h];
    qsort(v, n, sizeof *v, cmp_site);
    Dl_info info;
    uintptr_t base = dladdr((void *)&print_sites, &info) ? (uintptr_t)info.dli_fbase : 0;
    char exe[4096];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[len > 0 ? len : 0] = '\0';
    printf("  allocation call sites (per configuration, by phase):\n");
    size_t show = n < 40 ? n : 40;
    for (size_t k = 0; k < show; k++) {
        char where[512] = "?";
        char cmd[4200 + 64];
        /* pc is the return address: the call is the instruction before it. */
        snprintf(cmd, sizeof cmd, "addr2line -f -i -s -C -e '%s' 0x%" PRIxPTR " 2>/dev/null", exe,
                 v[k].pc - base - 1);
        FILE *f = len > 0 ? popen(cmd, "r") : NULL;
        if (f) {
            /* With inlining: the innermost frame (the call), then the
             * function it was inlined into. */
            char fn[256], line[256];
            int frames = 0;
            size_t used = 0;
            while (fgets(fn, sizeof fn, f) && fgets(line, sizeof line, f)) {
                fn[strcspn(fn, "\n")] = '\0';
                line[strcspn(line, "\n")] = '\0';
                if (frames < 3 && used < sizeof where) {
                    int w = snprintf(where + used, sizeof where - used, "%s%s (%s)", frames ? " in " : "", fn, line);
                    used += w > 0 ? (size_t)w : 0;
                }
                frames++;
            }
            pclose(f);
        }
        printf("    %8.2f calls %10.0f bytes  %-16s %s\n", (double)v[k].calls / n_cfg,
               (double)v[k].bytes / n_cfg, phase_name[v[k].ph], where);
    }
    free(v);
    count_allocs = true;
}

/* ---- the cases ------------------------------------------------------------ */

typedef struct bench_case {
    const char *name;
    const char *what;
    const char *file;          /* under PARSIM_SOURCE_DIR */
    const char *overrides[8];  /* NULL-terminated */
    const char *quick[4];      /* added with --quick: pinned dimensions */
    bool exhaustive;
} bench_case;

static const bench_case cases[] = {
    {"llama3-70b", "Llama 3 70B, 1024 H100s, seq 8192, GBS 1024, exhaustive",
     "configs/llama3-70b-h100x64.cfg",
     {"cluster.num_gpus=1024", "train.global_batch_size=1024", NULL},
     {"model.tensor_model_parallel_size=4", "model.pipeline_model_parallel_size=4", NULL},
     true},
    {"dsv3", "DeepSeek-V3, 1024 H100s, seq 4096, GBS 1024, exhaustive",
     "configs/deepseek-v3-h100x256.cfg",
     {"cluster.num_gpus=1024", NULL},
     {"model.tensor_model_parallel_size=2", "model.pipeline_model_parallel_size=8", NULL},
     true},
    {"gpt3", "GPT-3 175B, 16384 H100s, seq 2048, GBS 2048, exhaustive",
     "configs/gpt3-175b-h100x1024.cfg",
     {"cluster.num_gpus=16384", NULL},
     {"model.tensor_model_parallel_size=8", "model.pipeline_model_parallel_size=16", NULL},
     true},
};
enum { N_CASES = sizeof cases / sizeof cases[0] };

typedef struct outcome {
    int64_t simulated, enumerated;
    double wall_s, cpu_s;
    split sp;
    long maxrss_kib, rss_kib;
    int64_t live_peak, live_after;
} outcome;

static long rss_now_kib(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static double process_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec +
           1e-6 * (double)ru.ru_stime.tv_usec;
}

static int run_case(const bench_case *bc, bool quick, outcome *out)
{
    sim_err err;
    sim_err_clear(&err);
    search_opts o;
    search_opts_default(&o);
    o.jobs = 1;
    o.exhaustive = bc->exhaustive;
    cfg_t *cfg = cfg_create(NULL);
    if (!cfg) {
        fprintf(stderr, "bench_search: out of memory\n");
        return 1;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", PARSIM_SOURCE_DIR, bc->file);
    int rc = cfg_load_file(cfg, path, CFG_PRIO_FILE, &err);
    for (int k = 0; rc == SIM_OK && bc->overrides[k]; k++)
        rc = cfg_set_override(cfg, bc->overrides[k], &err);
    for (int k = 0; rc == SIM_OK && quick && bc->quick[k]; k++) {
        rc = cfg_set_override(cfg, bc->quick[k], &err);
        /* As cmd_search: a searched key given as KEY=VALUE pins it. */
        char key[128];
        size_t n = strcspn(bc->quick[k], "=");
        snprintf(key, sizeof key, "%.*s", (int)n, bc->quick[k]);
        int d = search_dim_of_key(key);
        if (d >= 0)
            o.pinned |= 1u << d;
    }
    run_inputs in;
    if (rc == SIM_OK)
        rc = cfg_resolve(cfg, &in, &err);
    if (rc != SIM_OK) {
        char buf[1024];
        sim_err_format(&err, buf, sizeof buf);
        fprintf(stderr, "bench_search: %s: %s\n", bc->name, buf);
        cfg_destroy(cfg);
        return 1;
    }
    if (!cfg_origin(cfg, "ddp.overlap_grad_reduce", NULL, NULL))
        in.ddp.overlap_grad_reduce = true;
    if (!cfg_origin(cfg, "ddp.overlap_param_gather", NULL, NULL))
        in.ddp.overlap_param_gather = in.ddp.overlap_grad_reduce;

    memset(&acc, 0, sizeof acc);
    memset(sites, 0, sizeof sites);
    n_sites = 0;
    int64_t live0 = live_bytes;
    live_peak = live_bytes;
    cur = PH_OTHER;
    double w0 = wall_s(), c0 = process_cpu_s();
    cur_since = thread_cpu_s();
    search_result res;
    rc = search_run(&in, &o, &res, &err);
    enter(PH_OTHER);
    double w1 = wall_s(), c1 = process_cpu_s();
    if (rc != SIM_OK) {
        char buf[1024];
        sim_err_format(&err, buf, sizeof buf);
        fprintf(stderr, "bench_search: %s: %s\n", bc->name, buf);
        cfg_destroy(cfg);
        return 1;
    }
    out->simulated = res.counts.simulated;
    out->enumerated = res.counts.enumerated;
    search_result_free(&res);
    out->wall_s = w1 - w0;
    out->cpu_s = c1 - c0;
    out->sp = acc;
    out->live_peak = live_peak - live0;
    out->live_after = live_bytes - live0;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    out->maxrss_kib = ru.ru_maxrss;
    out->rss_kib = rss_now_kib();
    cfg_destroy(cfg);
    return 0;
}

static void print_outcome(const outcome *r, const char *label)
{
    double n = r->simulated > 0 ? (double)r->simulated : 1.0;
    printf("  %-7s %7" PRId64 " configurations simulated (%" PRId64 " enumerated)  wall %7.2f s  cpu %7.2f s"
           "  %6.0f configs/s/core (wall)  %6.0f (cpu)\n",
           label, r->simulated, r->enumerated, r->wall_s, r->cpu_s, (double)r->simulated / r->wall_s,
           (double)r->simulated / r->cpu_s);
    double total = 0;
    for (int p = 0; p < PH_N; p++)
        total += r->sp.cpu_s[p];
    printf("          per configuration, us of CPU:");
    for (int p = 0; p < PH_N; p++)
        printf(" %s %.0f", phase_name[p], 1e6 * r->sp.cpu_s[p] / n);
    printf("  = %.0f\n", 1e6 * total / n);
    printf("          shares:");
    for (int p = 0; p < PH_N; p++)
        printf(" %s %.1f%%", phase_name[p], total > 0 ? 100 * r->sp.cpu_s[p] / total : 0.0);
    printf("\n          engine per run: %.0f tasks, %.0f events (%" PRIu64 " runs)"
           "   peak RSS %.1f MiB, RSS now %.1f MiB\n",
           r->sp.eng_runs ? (double)r->sp.tasks / (double)r->sp.eng_runs : 0.0,
           r->sp.eng_runs ? (double)r->sp.events / (double)r->sp.eng_runs : 0.0, r->sp.eng_runs,
           (double)r->maxrss_kib / 1024, (double)r->rss_kib / 1024);
    printf("          steps from samples (sim.steady_extension): %" PRIu64 " of %" PRIu64 ", %" PRIu64
           " of them from one\n",
           r->sp.extended, r->sp.step_runs, r->sp.one_sample);
    double in_steps = 0;
    for (int w = 0; w < WAY_N; w++)
        in_steps += r->sp.way_cpu_s[w];
    printf("          CPU in steps by how their figures came:");
    for (int w = 0; w < WAY_N; w++)
        printf("%s %s %" PRIu64 " (%.1f%%, %.0f us each)", w ? ";" : "", way_name[w], r->sp.by_way[w],
               in_steps > 0 ? 100 * r->sp.way_cpu_s[w] / in_steps : 0.0,
               r->sp.by_way[w] ? 1e6 * r->sp.way_cpu_s[w] / (double)r->sp.by_way[w] : 0.0);
    /* What a step costs per task it simulates, templates and the fixed
     * part of a step included: the floor a faster evaluator has to beat. */
    printf("\n          CPU per engine task, by the same ways:");
    for (int w = 0; w < WAY_N; w++)
        printf("%s %s %.0f ns", w ? "," : "", way_name[w],
               r->sp.way_tasks[w] ? 1e9 * r->sp.way_cpu_s[w] / (double)r->sp.way_tasks[w] : 0.0);
    /* The layout shapes that take the most of it. */
    bool shown[SHAPES_MAX] = {false};
    printf("\n          CPU in steps by PP x VP, the largest:");
    for (int k = 0; k < SHAPES_SHOWN && k < r->sp.n_shapes; k++) {
        int best = -1;
        for (int i = 0; i < r->sp.n_shapes; i++)
            if (!shown[i] && (best < 0 || r->sp.shapes[i].cpu_s > r->sp.shapes[best].cpu_s))
                best = i;
        shown[best] = true;
        const struct shape_cost *c = &r->sp.shapes[best];
        printf("%s %lldx%lld %.1f%% (%" PRIu64 " steps, %.0f us each)", k ? ";" : "", (long long)c->pp,
               (long long)c->v, in_steps > 0 ? 100 * c->cpu_s / in_steps : 0.0, c->steps,
               1e6 * c->cpu_s / (double)c->steps);
    }
    if (r->sp.shapes_dropped)
        printf(" (%" PRIu64 " steps of further shapes not counted)", r->sp.shapes_dropped);
    uint64_t mixed = 0;
    for (int m = 0; m < MIX_N; m++)
        mixed += r->sp.tasks_by_mix[m];
    printf("\n          tasks by stream:");
    for (int m = 0; m < MIX_N; m++)
        printf("%s %s %.1f%%", m ? "," : "", mix_name[m], mixed ? 100.0 * (double)r->sp.tasks_by_mix[m] / (double)mixed : 0.0);
    printf("\n");
    if (count_allocs) {
        uint64_t a = 0, b = 0;
        for (int p = 0; p < PH_N; p++) {
            a += r->sp.allocs[p];
            b += r->sp.alloc_bytes[p];
        }
        printf("          allocations per configuration: %.1f (%.2f MB)  by phase:", (double)a / n, (double)b / n / 1e6);
        for (int p = 0; p < PH_N; p++)
            printf(" %s %.1f", phase_name[p], (double)r->sp.allocs[p] / n);
        printf("\n          live heap: peak %.1f MiB above the start, %" PRId64 " bytes left after the search\n",
               (double)r->live_peak / 1048576.0, r->live_after);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_search [--quick] [--repeat N] [--allocs] [--verify] [--case llama3-70b|dsv3|gpt3]...\n");
}

int main(int argc, char **argv)
{
    bool quick = false, want[N_CASES] = {false}, any = false;
    int repeat = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = true;
        else if (!strcmp(argv[i], "--allocs"))
            count_allocs = true;
        else if (!strcmp(argv[i], "--verify"))
            verify = true;
        else if (!strcmp(argv[i], "--repeat") && i + 1 < argc) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 1 || v > 1000) {
                usage();
                return 2;
            }
            repeat = (int)v;
        } else if (!strcmp(argv[i], "--case") && i + 1 < argc) {
            const char *c = argv[++i];
            int k = 0;
            while (k < N_CASES && strcmp(cases[k].name, c))
                k++;
            if (k == N_CASES) {
                usage();
                return 2;
            }
            want[k] = any = true;
        } else {
            usage();
            return 2;
        }
    }
#ifdef __GLIBC__
    /* As cmd_search: the simulations' large arrays stay on the heap. */
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
    printf("bench_search: jobs 1%s, %d repeat%s%s\n", quick ? ", quick subsets" : "", repeat, repeat > 1 ? "s" : "",
           count_allocs ? ", counting allocations" : "");
    int rc = 0;
    for (int k = 0; k < N_CASES; k++) {
        if (any && !want[k])
            continue;
        const bench_case *bc = &cases[k];
        printf("%s: %s%s\n", bc->name, bc->what, quick ? " (quick: TP and PP pinned)" : "");
        double *rate = malloc((size_t)repeat * sizeof *rate);
        double *per_phase = malloc((size_t)repeat * PH_N * sizeof *per_phase);
        if (!rate || !per_phase)
            return 1;
        outcome last = {0};
        for (int r = 0; r < repeat; r++) {
            outcome o = {0};
            if (run_case(bc, quick, &o)) {
                rc = 1;
                break;
            }
            char label[32];
            snprintf(label, sizeof label, "run %d", r + 1);
            print_outcome(&o, label);
            double n = o.simulated > 0 ? (double)o.simulated : 1.0;
            rate[r] = (double)o.simulated / o.cpu_s;
            for (int p = 0; p < PH_N; p++)
                per_phase[p * repeat + r] = 1e6 * o.sp.cpu_s[p] / n;
            last = o;
        }
        if (rc == 0 && count_allocs && last.simulated > 0)
            print_sites((double)last.simulated);
        if (rc == 0 && repeat > 1) {
            printf("  median of %d: %.0f configs/s/core (cpu); per configuration, us:", repeat, median(rate, repeat));
            double total = 0;
            for (int p = 0; p < PH_N; p++) {
                double m = median(per_phase + p * repeat, repeat);
                total += m;
                printf(" %s %.0f", phase_name[p], m);
            }
            printf("  = %.0f; RSS after the last %.1f MiB\n", total, (double)last.rss_kib / 1024);
        }
        free(rate);
        free(per_phase);
        fflush(stdout);
    }
    if (verify) {
        printf("verify: %" PRIu64 " steps from samples, %" PRIu64 " differ from the whole simulation\n", verified,
               verify_failed);
        printf("verify: %" PRIu64 " steps from one sample, %" PRIu64 " differ from their second sample\n",
               period_checked, period_failed);
        if (verify_failed || period_failed)
            rc = 1;
    }
    return rc;
}
