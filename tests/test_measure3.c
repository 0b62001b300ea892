/* Tests of the one walk that measures a stage's communication streams
 * (exposed_lists in step_measure.h): each list's total and uncovered
 * length and their union's uncovered length, against a plain reference
 * (the instants each list, their union and the compute spans cover,
 * counted one by one), on lists that overlap each other, touch, repeat
 * one another and hold empty intervals. */
#include <criterion/criterion.h>

#include <gsl/gsl_rng.h>
#include <string.h>

#include "sim_run.h"
#include "step_internal.h"
#include "step_measure.h"
#include "streams.h"
#include "workload.h"

/* A small-expert MoE at a short sequence: short kernels, and the host
 * shows (test_host.c). */
#define SMALL_MOE                                                                                            \
    "model.name=qwen3-30b-a3b", "cluster.topology=dgx-h100", "cluster.num_gpus=8",                           \
        "model.expert_model_parallel_size=8", "model.moe_token_dispatcher_type=alltoall",                    \
        "train.global_batch_size=16", "train.micro_batch_size=1", "model.seq_length=1024"

#define ROOM 120
#define HORIZON (50 + ROOM * (400 + 81))

/* The instants [0, HORIZON) that a list covers (marks them in m). */
static void mark(const interval *u, size_t n, unsigned char *m)
{
    for (size_t i = 0; i < n; i++)
        for (sim_time_ps t = u[i].a; t < u[i].b; t++)
            m[t] = 1;
}

/* The reference: instants covered in m and not in c, one by one. */
static sim_time_ps count_bare(const unsigned char *m, const unsigned char *c)
{
    sim_time_ps n = 0;
    for (size_t t = 0; t < HORIZON; t++)
        n += m[t] && !c[t];
    return n;
}

/* n intervals sorted and disjoint, touching at most, some empty; gaps and
 * lengths up to max_gap and max_len. */
static size_t random_list(gsl_rng *g, interval *out, size_t n, unsigned long max_gap, unsigned long max_len)
{
    sim_time_ps t = gsl_rng_uniform_int(g, 50);
    for (size_t i = 0; i < n; i++) {
        t += gsl_rng_uniform_int(g, 3) == 0 ? 0 : gsl_rng_uniform_int(g, max_gap);
        sim_time_ps len = gsl_rng_uniform_int(g, 5) == 0 ? 0 : 1 + gsl_rng_uniform_int(g, max_len);
        out[i] = (interval){t, t + len};
        t += len;
    }
    return n;
}

/* Checks exposed_lists on u against the reference; returns the union's. */
static sim_time_ps check(const interval *const *u, const size_t *nu, int n, const interval *comp, size_t nc)
{
    static unsigned char cm[HORIZON], one[HORIZON], all[HORIZON];
    memset(cm, 0, sizeof cm);
    memset(all, 0, sizeof all);
    mark(comp, nc, cm);
    sim_time_ps tot[STREAM_KINDS], unc[STREAM_KINDS];
    const sim_time_ps got = exposed_lists(u, nu, n, comp, nc, tot, unc);
    for (int k = 0; k < n; k++) {
        sim_time_ps len = 0;
        for (size_t i = 0; i < nu[k]; i++)
            len += u[k][i].b - u[k][i].a;
        cr_assert_eq(tot[k], len, "list %d", k);
        memset(one, 0, sizeof one);
        mark(u[k], nu[k], one);
        cr_assert_eq(unc[k], count_bare(one, cm), "list %d", k);
        mark(u[k], nu[k], all);
    }
    cr_assert_eq(got, count_bare(all, cm));
    return got;
}

Test(measure3, each_list_and_their_union_as_their_instants_count)
{
    gsl_rng *g = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(g, 23);
    static interval lists[STREAM_KINDS][ROOM], comp[ROOM];
    for (int rep = 0; rep < 600; rep++) {
        /* Dense lists (short gaps) overlap each other often; sparse ones
         * mostly stand alone in the union. */
        const unsigned long gap = rep % 2 ? 400 : 30;
        size_t nc = random_list(g, comp, gsl_rng_uniform_int(g, ROOM), 60, 80);
        const int n = (int)gsl_rng_uniform_int(g, STREAM_KINDS + 1);
        const interval *u[STREAM_KINDS];
        size_t nu[STREAM_KINDS];
        for (int k = 0; k < n; k++) {
            /* Now and then a list repeats the one before it. */
            if (k > 0 && gsl_rng_uniform_int(g, 8) == 0) {
                nu[k] = nu[k - 1];
                memcpy(lists[k], lists[k - 1], nu[k] * sizeof *lists[k]);
            } else {
                nu[k] = random_list(g, lists[k], gsl_rng_uniform_int(g, ROOM), gap, 80);
            }
            u[k] = lists[k];
        }
        check(u, nu, n, comp, nc);
    }
    gsl_rng_free(g);
}

/* The union of two lists, the rest of one past the other's end as it is:
 * sorted, disjoint (touching at most), its ends never decreasing, and it
 * covers what the two cover, instant by instant. */
Test(measure3, unite_covers_both_lists_and_stays_sorted)
{
    gsl_rng *g = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_rng_set(g, 31);
    static interval x[ROOM], y[ROOM], out[2 * ROOM];
    static unsigned char want[HORIZON], got[HORIZON];
    for (int rep = 0; rep < 400; rep++) {
        /* One list often ends long before the other. */
        size_t nx = random_list(g, x, gsl_rng_uniform_int(g, ROOM), rep % 3 ? 400 : 30, 80);
        size_t ny = random_list(g, y, gsl_rng_uniform_int(g, rep % 2 ? ROOM : 8), 400, 80);
        const size_t n = unite(x, nx, y, ny, out);
        cr_assert_leq(n, nx + ny);
        for (size_t i = 1; i < n; i++) {
            cr_assert_geq(out[i].a, out[i - 1].b, "rep %d interval %zu", rep, i);
            cr_assert_geq(out[i].b, out[i].a);
        }
        memset(want, 0, sizeof want);
        memset(got, 0, sizeof got);
        mark(x, nx, want);
        mark(y, ny, want);
        mark(out, n, got);
        cr_assert(memcmp(want, got, sizeof want) == 0, "rep %d", rep);
    }
    gsl_rng_free(g);
}

Test(measure3, touching_pieces_of_several_lists_and_overlapping_ones)
{
    /* Compute busy over [10, 20) and [40, 50). */
    const interval comp[] = {{10, 20}, {40, 50}};
    /* Two lists whose pieces touch (one piece of the union, [0, 30), no
     * overlap) and then overlap ([35, 60) and [45, 70): [35, 70)). */
    const interval a[] = {{0, 15}, {35, 60}}, b[] = {{15, 30}, {45, 70}};
    const interval *u[] = {a, b};
    const size_t nu[] = {2, 2};
    /* [0, 30) less [10, 20): 20; [35, 70) less [40, 50): 25. */
    cr_assert_eq(check(u, nu, 2, comp, 2), 45);
    /* An empty list and an empty interval add nothing. */
    const interval e[] = {{12, 12}};
    const interval *v[] = {a, e, b};
    const size_t nv[] = {2, 1, 2};
    cr_assert_eq(check(v, nv, 3, comp, 2), 45);
    const size_t nz[] = {0, 0};
    cr_assert_eq(check(u, nz, 2, comp, 2), 0);
    /* The same list twice: its own uncovered length, once. */
    const interval *w[] = {a, a};
    cr_assert_eq(check(w, nu, 2, comp, 2), 10 + 15);
}

/* The measurement keeps one sweep of each (chunk, kind)'s template per
 * stage for its passes measured from their ops: one from the GPU's and
 * the host's starts stands for every pass whose two starts lie as far
 * apart, its times later by as much as their starts (the sweep is
 * max-plus), and one that would overflow 2^64 ps is swept and fails as
 * before.  Every template of a workload with host ops, both sides late in
 * turn. */
Test(measure3, a_sweep_later_by_d_from_both_starts_is_every_time_later_by_d)
{
    const char *kv[] = {SMALL_MOE, "cluster.host.launch_us=50", NULL};
    sim x;
    sim_run(&x, kv);
    workload_t *wl = NULL;
    sim_err err;
    sim_err_clear(&err);
    cr_assert_eq(workload_build(&wl, &x.in, &x.s, &err), SIM_OK, "%s", err.msg);
    tmpl_scratch w0, w1;
    size_t longest = 1, host_ops = 0;
    for (int64_t c = 0; c < wl->v; c++)
        for (int k = 0; k < 3; k++) {
            const wl_pass *p = wl_chunk_pass(&wl->stages[0].chunks[c], (sched_kind)k);
            longest = (size_t)p->n_ops > longest ? (size_t)p->n_ops : longest;
        }
    cr_assert_eq(step_scratch_init(&w0, longest), SIM_OK);
    cr_assert_eq(step_scratch_init(&w1, longest), SIM_OK);
    const sim_time_ps starts[][2] = {{0, 0}, {1000, 0}, {0, 1000}, {12345678, 12}, {3, 987654321}};
    const sim_time_ps later[] = {1, 777, 1000000007};
    for (int64_t c = 0; c < wl->v; c++)
        for (int k = 0; k < 3; k++) {
            const wl_pass *p = wl_chunk_pass(&wl->stages[0].chunks[c], (sched_kind)k);
            for (int32_t j = 0; j < p->n_ops; j++)
                host_ops += p->ops[j].stream == STREAM_HOST;
            for (size_t s = 0; s < sizeof starts / sizeof *starts; s++) {
                const sim_time_ps g = starts[s][0], h = starts[s][1];
                cr_assert_eq(step_sweep(p, g, h, &w0, &err), SIM_OK);
                for (size_t d = 0; d < sizeof later / sizeof *later; d++) {
                    cr_assert_eq(step_sweep(p, g + later[d], h + later[d], &w1, &err), SIM_OK);
                    for (int32_t j = 0; j < p->n_ops; j++) {
                        cr_assert_eq(w1.start[j], w0.start[j] + later[d], "chunk %lld kind %d op %d",
                                     (long long)c, k, j);
                        cr_assert_eq(w1.end[j], w0.end[j] + later[d]);
                    }
                }
            }
            /* Past 2^64 ps the sweep fails, whichever side is late. */
            if (p->n_ops > 0) {
                cr_assert_eq(step_sweep(p, UINT64_MAX - 1, UINT64_MAX - 1, &w1, &err), SIM_ESIM);
                cr_assert(strstr(err.msg, "overflows 2^64 ps") != NULL, "%s", err.msg);
            }
        }
    cr_assert_gt(host_ops, 0, "the workload has host ops");
    step_scratch_free(&w0);
    step_scratch_free(&w1);
    workload_destroy(wl);
    sim_free(&x);
}

/* A step whose passes stand as their stand-ins, some of them measured
 * from their ops (DP buckets released inside the last backward, run as
 * alone from the GPU's start; with a host that falls behind its GPU, from
 * the GPU's and the host's starts), against the same step with every
 * kernel a task: every stage's communication and exposed time the same. */
Test(measure3, stand_ins_measured_from_their_ops_as_every_kernel)
{
#define MIXTRAL_PP                                                                                             \
    "model.name=mixtral-8x7b", "cluster.topology=dgx-h100", "cluster.num_gpus=64",                             \
        "model.tensor_model_parallel_size=2", "model.sequence_parallel=true", "model.pipeline_model_parallel_size=4", \
        "model.expert_model_parallel_size=8", "model.expert_tensor_parallel_size=1",                           \
        "model.moe_token_dispatcher_type=alltoall", "train.global_batch_size=64", "model.seq_length=1024"
    const char *gpu[] = {MIXTRAL_PP, NULL}, *host[] = {MIXTRAL_PP, "cluster.host.launch_us=20", NULL};
    const char *const *cases[] = {gpu, host};
    for (int i = 0; i < 2; i++) {
        sim a, b;
        sim_run(&a, cases[i]);
        sim_rerun_every_kernel(&a, &b);
        const step_result *ra = step_result_get(a.st), *rb = step_result_get(b.st);
        cr_assert_lt(ra->tasks, rb->tasks);
        cr_assert_eq(ra->n_stages, rb->n_stages);
        for (int64_t r = 0; r < ra->n_stages; r++) {
            const stage_result *x = &ra->stages[r], *y = &rb->stages[r];
            cr_assert_eq(x->exposed_total_s, y->exposed_total_s, "case %d stage %lld: %.17g s, every kernel %.17g s",
                         i, (long long)r, x->exposed_total_s, y->exposed_total_s);
            for (int k = 0; k < STREAM_KINDS; k++) {
                if (k == STREAM_HOST)
                    continue; /* summed from summaries: rounding apart (test_host) */
                cr_assert_eq(x->comm_s[k], y->comm_s[k], "case %d stage %lld stream %d", i, (long long)r, k);
                cr_assert_eq(x->exposed_s[k], y->exposed_s[k], "case %d stage %lld stream %d: %.17g s, every kernel %.17g s",
                             i, (long long)r, k, x->exposed_s[k], y->exposed_s[k]);
            }
        }
        step_destroy(b.st);
        sim_free(&a);
    }
}
