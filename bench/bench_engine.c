/* bench_engine: raw throughput of the discrete-event engine.
 *
 * Builds a synthetic graph shaped like a real step: p pipeline stages, each
 * with a compute, a TP and a PP stream; the passes of every stage in
 * Megatron's 1F1B (or interleaved) order; every pass a chain of per-layer
 * ops (forward: 5 GEMM/attention ops and 2 TP all-reduces per layer;
 * backward: 10 compute ops and 2 all-reduces), then a P2P send to the next
 * (or previous) stage; an activation counter per stage.  Times eng_run
 * alone (CLOCK_MONOTONIC) and prints tasks, events, wall time and events
 * per second.  Durations carry a deterministic jitter (fixed LCG seed) so
 * that completions are not all ties.
 *
 *   bench_engine [stages] [microbatches] [layers_per_chunk] [chunks] [repeats]
 *   defaults:     16       256            16                 1        3
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "engine.h"
#include "schedule.h"

#define F_COMPUTE 5
#define B_COMPUTE 10
#define TP_PER_LAYER 2

typedef struct bench {
    int64_t p, M, L, v;
    uint64_t lcg;
    eng_task *first;     /* first op of pass (stage, kind, m, c) */
    eng_task *send;      /* its P2P send */
} bench;

static size_t pass_idx(const bench *b, int64_t r, int kind, int64_t m, int64_t c)
{
    return (size_t)(((r * 2 + kind) * b->M + m) * b->v + c);
}

static sim_time_ps jitter(bench *b, sim_time_ps base_ps)
{
    b->lcg = b->lcg * 6364136223846793005ULL + 1442695040888963407ULL;
    return base_ps + (b->lcg >> 40) % (base_ps / 8 + 1);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int add_dep(engine_t *e, eng_task a, eng_task b)
{
    if (eng_add_dep(e, a, b) != SIM_OK) {
        fprintf(stderr, "bench_engine: out of memory\n");
        exit(1);
    }
    return 0;
}

/* Adds one pass of stage r (kind, m, c) on its streams; returns its last op. */
static eng_task add_pass(bench *b, engine_t *e, int64_t r, const sched_pass *it)
{
    int compute = (int)(3 * r), tp = compute + 1, pp = compute + 2;
    int n_compute = it->kind == SCHED_F ? F_COMPUTE : B_COMPUTE;
    eng_task prev = -1;
    for (int64_t l = 0; l < b->L; l++) {
        for (int k = 0; k < n_compute + TP_PER_LAYER; k++) {
            /* A TP all-reduce after the attention block and after the MLP. */
            int is_tp = k == n_compute / 2 || k == n_compute + 1;
            eng_task t = eng_add_task(e, is_tp ? tp : compute,
                                      jitter(b, is_tp ? 60000000u : 150000000u), 0);
            if (t < 0) {
                fprintf(stderr, "bench_engine: out of memory\n");
                exit(1);
            }
            if (prev >= 0)
                add_dep(e, prev, t);
            else
                b->first[pass_idx(b, r, it->kind, it->microbatch, it->chunk)] = t;
            prev = t;
        }
    }
    eng_task s = eng_add_task(e, pp, jitter(b, 20000000u), 0);
    add_dep(e, prev, s);
    b->send[pass_idx(b, r, it->kind, it->microbatch, it->chunk)] = s;
    int64_t m = it->microbatch;
    eng_task first = b->first[pass_idx(b, r, it->kind, m, it->chunk)];
    if (it->kind == SCHED_F)
        eng_add_counter_delta(e, first, (int)r, 1, 0);
    else
        eng_add_counter_delta(e, prev, (int)r, 0, -1);
    return prev;
}

static engine_t *build(bench *b)
{
    int64_t p = b->p, M = b->M, v = b->v;
    size_t per_pass_f = (size_t)b->L * (F_COMPUTE + TP_PER_LAYER) + 1;
    size_t per_pass_b = (size_t)b->L * (B_COMPUTE + TP_PER_LAYER) + 1;
    size_t n_tasks = (size_t)(p * M * v) * (per_pass_f + per_pass_b);
    engine_t *e = eng_create((int)(3 * p), (int)p, n_tasks, n_tasks + (size_t)(4 * p * M * v));
    sched_item *s = malloc((size_t)sched_len(M, v) * sizeof *s);
    if (!e || !s)
        return NULL;
    b->lcg = 0x5eed;
    for (int64_t r = 0; r < p; r++) {
        sim_err err;
        if (sched_build(p, v, M, p, r, s, &err) != SIM_OK) {
            fprintf(stderr, "bench_engine: %s\n", err.msg);
            exit(2);
        }
        for (int64_t k = 0; k < sched_len(M, v); k++)
            add_pass(b, e, r, &s[k].pass[0]);
    }
    free(s);
    /* Cross-stage edges: a pass waits for the send of its upstream pass. */
    for (int64_t r = 0; r < p; r++)
        for (int64_t m = 0; m < M; m++)
            for (int64_t c = 0; c < v; c++) {
                eng_task f = b->first[pass_idx(b, r, SCHED_F, m, c)];
                eng_task bw = b->first[pass_idx(b, r, SCHED_B, m, c)];
                if (r > 0)
                    add_dep(e, b->send[pass_idx(b, r - 1, SCHED_F, m, c)], f);
                else if (c > 0)
                    add_dep(e, b->send[pass_idx(b, p - 1, SCHED_F, m, c - 1)], f);
                if (r < p - 1)
                    add_dep(e, b->send[pass_idx(b, r + 1, SCHED_B, m, c)], bw);
                else if (c < v - 1)
                    add_dep(e, b->send[pass_idx(b, 0, SCHED_B, m, c + 1)], bw);
                else
                    add_dep(e, b->send[pass_idx(b, r, SCHED_F, m, c)], bw);
            }
    return e;
}

int main(int argc, char **argv)
{
    bench b = {.p = 16, .M = 256, .L = 16, .v = 1};
    int repeats = 3;
    if (argc > 1) b.p = atoll(argv[1]);
    if (argc > 2) b.M = atoll(argv[2]);
    if (argc > 3) b.L = atoll(argv[3]);
    if (argc > 4) b.v = atoll(argv[4]);
    if (argc > 5) repeats = atoi(argv[5]);
    if (b.p < 1 || b.M < 1 || b.L < 1 || b.v < 1 || repeats < 1) {
        fprintf(stderr, "usage: bench_engine [stages] [microbatches] [layers_per_chunk] "
                        "[chunks] [repeats]\n");
        return 2;
    }
    size_t n_pass = (size_t)(2 * b.p * b.M * b.v);
    b.first = malloc(n_pass * sizeof *b.first);
    b.send = malloc(n_pass * sizeof *b.send);
    if (!b.first || !b.send)
        return 1;

    printf("bench_engine: %lld stages x %lld microbatches x %lld chunks, %lld layers per chunk\n",
           (long long)b.p, (long long)b.M, (long long)b.v, (long long)b.L);
    double best = 0.0;
    for (int rep = 0; rep < repeats; rep++) {
        double t0 = now_s();
        engine_t *e = build(&b);
        if (!e) {
            fprintf(stderr, "bench_engine: out of memory\n");
            return 1;
        }
        double t1 = now_s();
        sim_err err;
        sim_err_clear(&err);
        if (eng_run(e, &err) != SIM_OK) {
            fprintf(stderr, "bench_engine: %s\n", err.msg);
            return 1;
        }
        double t2 = now_s();
        uint64_t events = eng_events(e);
        double eps = (double)events / (t2 - t1);
        if (eps > best)
            best = eps;
        printf("run %d: tasks %zu  events %llu  build %.3f s  run %.3f s  %.1f M events/s  "
               "makespan %.3f s  stage-0 counter peak %lld\n",
               rep, eng_num_tasks(e), (unsigned long long)events, t1 - t0, t2 - t1, eps / 1e6,
               time_as_s(eng_makespan(e)), (long long)eng_counter_peak(e, 0));
        eng_destroy(e);
    }
    printf("best: %.1f M events/s\n", best / 1e6);
    free(b.first);
    free(b.send);
    return 0;
}
