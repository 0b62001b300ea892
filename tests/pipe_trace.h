/* pipe_trace.h: the schedules run by `parsim run` on an ideal four-stage
 * pipeline, read back from the trace (every F, B, W pass with its stage,
 * microbatch, chunk and times), for the schedule tests. */
#ifndef PARSIM_TEST_PIPE_TRACE_H
#define PARSIM_TEST_PIPE_TRACE_H

#include <criterion/criterion.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"
#include "scratch.h"

/* Four stages, 16 microbatches, the ideal pipeline (no communication,
 * every stage and chunk the same work). */
#define IDEAL                                                                                                  \
    "run model.name=llama3-8b model.pipeline_model_parallel_size=4 model.seq_length=1024 "                     \
    "cluster.topology=dgx-h100 cluster.num_gpus=4 train.global_batch_size=16 train.micro_batch_size=1 "        \
    "sim.ideal_pipeline=true "
enum { P = 4, MB = 16 };

/* A pass of the trace. */
typedef struct tpass {
    int kind, stage, mb, chunk;
    int64_t a, b; /* ps */
} tpass;

typedef struct trace_rd {
    tpass p[P * MB * 2 * SCHED_KINDS + 1];
    int n;
} trace_rd;

/* "12.345678" µs as picoseconds (the trace writes them exactly). */
static inline int64_t us_ps(const char *s)
{
    char *end;
    long long whole = strtoll(s, &end, 10), frac = 0;
    cr_assert_eq(*end, '.', "time %s", s);
    for (int i = 1; i <= 6; i++) {
        cr_assert(end[i] >= '0' && end[i] <= '9', "time %s", s);
        frac = frac * 10 + (end[i] - '0');
    }
    return whole * 1000000 + frac;
}

static inline void read_trace(const char *path, trace_rd *t)
{
    size_t len;
    char *text = read_file(path, &len);
    t->n = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char *at = strstr(line, "\"ph\":\"X\",\"name\":\"");
        if (!at)
            continue;
        at += strlen("\"ph\":\"X\",\"name\":\"");
        int kind = -1;
        for (int k = 0; k < SCHED_KINDS; k++)
            if (!strncmp(at, sched_kind_of((sched_kind)k)->name, 1) && at[1] == '"')
                kind = k;
        if (kind < 0)
            continue;
        cr_assert_lt(t->n, (int)(sizeof t->p / sizeof t->p[0]), "more passes than the step has");
        tpass *p = &t->p[t->n++];
        p->kind = kind;
        char *pid = strstr(at, "\"pid\":"), *ts = strstr(at, "\"ts\":"), *dur = strstr(at, "\"dur\":"),
             *mb = strstr(at, "\"microbatch\":"), *ch = strstr(at, "\"chunk\":");
        cr_assert(pid && ts && dur && mb && ch, "%s", line);
        p->stage = atoi(pid + 6);
        p->a = us_ps(ts + 5);
        p->b = p->a + us_ps(dur + 6);
        p->mb = atoi(mb + 13);
        p->chunk = atoi(ch + 8);
    }
    free(text);
}

/* Runs one schedule with a trace; out gets the JSON report. */
static inline void run_schedule(const char *sched, const char *extra, trace_rd *t, result *r)
{
    make_dir();
    char path[128];
    path_in(path, sizeof path, "trace.json");
    runf(r, IDEAL "sim.pipeline_schedule=%s %s --format json --trace '%s'", sched, extra, path);
    cr_assert_eq(r->status, 0, "%s: %s", sched, r->out);
    read_trace(path, t);
    remove_dir();
}

/* Every microbatch's F, B (and W where split) exactly once per chunk of
 * every stage, nothing else. */
static inline void expect_each_once(const trace_rd *t, const char *sched, int v, bool split)
{
    static int seen[P][MB][2][SCHED_KINDS];
    memset(seen, 0, sizeof seen);
    for (int i = 0; i < t->n; i++) {
        const tpass *p = &t->p[i];
        cr_assert(p->stage >= 0 && p->stage < P && p->mb >= 0 && p->mb < MB && p->chunk >= 0 && p->chunk < v,
                  "%s: pass %d.%d on stage %d", sched, p->mb, p->chunk, p->stage);
        seen[p->stage][p->mb][p->chunk][p->kind]++;
    }
    for (int r = 0; r < P; r++)
        for (int m = 0; m < MB; m++)
            for (int c = 0; c < v; c++)
                for (int k = 0; k < SCHED_KINDS; k++)
                    cr_assert_eq(seen[r][m][c][k], k == SCHED_W && !split ? 0 : 1, "%s: stage %d %s%d.%d runs %d times",
                                 sched, r, sched_kind_of((sched_kind)k)->name, m, c, seen[r][m][c][k]);
}

/* The duration of every pass of a kind (the ideal pipeline makes them
 * equal; checked). */
static inline int64_t kind_ps(const trace_rd *t, int kind)
{
    int64_t d = -1;
    for (int i = 0; i < t->n; i++)
        if (t->p[i].kind == kind) {
            int64_t x = t->p[i].b - t->p[i].a;
            cr_assert(d < 0 || d == x, "%s passes of %lld and %lld ps", sched_kind_of((sched_kind)kind)->name,
                      (long long)d, (long long)x);
            d = x;
        }
    return d;
}

/* Bubble of a stage from the trace: idle on its compute stream until the
 * end of the step's last pass. */
static inline int64_t trace_bubble(const trace_rd *t, int stage)
{
    int64_t end = 0, busy = 0;
    for (int i = 0; i < t->n; i++) {
        end = t->p[i].b > end ? t->p[i].b : end;
        if (t->p[i].stage == stage)
            busy += t->p[i].b - t->p[i].a;
    }
    return end - busy;
}

/* The largest value of "key": N in the JSON report. */
static inline double json_max(const char *out, const char *key)
{
    char pat[96];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    double most = -1;
    for (const char *at = strstr(out, pat); at; at = strstr(at + 1, pat)) {
        double x = strtod(at + strlen(pat), NULL);
        most = x > most ? x : most;
    }
    cr_assert_geq(most, 0, "no %s in %s", key, out);
    return most;
}

#endif
