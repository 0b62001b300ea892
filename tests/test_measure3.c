/* Tests of the one walk that measures a stage's communication streams
 * (exposed_lists in step_measure.h): each list's total and uncovered
 * length and their union's uncovered length, against a plain reference
 * (the instants each list, their union and the compute spans cover,
 * counted one by one), on lists that overlap each other, touch, repeat
 * one another and hold empty intervals. */
#include <criterion/criterion.h>

#include <gsl/gsl_rng.h>
#include <string.h>

#include "step_measure.h"

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
