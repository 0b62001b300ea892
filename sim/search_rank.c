/* search_rank: ordering simulated layouts (contract in search_rank.h). */
#include "search_rank.h"

#include <stdbool.h>

double search_rank_bound_key(const search_opts *o, const search_cand *c)
{
    return o->rank == SEARCH_RANK_TIME ? c->time_lb_s : c->time_lb_s * (double)c->world;
}

static int cmp3(double a, double b)
{
    return a < b ? -1 : a > b;
}

int search_rank_cmp(const void *x, const void *y)
{
    const search_ranked *a = x, *b = y;
    int c = cmp3(a->key, b->key);
    if (!c)
        c = a->world < b->world ? -1 : a->world > b->world;
    if (!c)
        c = cmp3(a->peak, b->peak);
    if (!c)
        c = a->order < b->order ? -1 : a->order > b->order;
    return c;
}

void search_topk_add(search_topk *t, const search_ranked *r)
{
    if (t->n == t->k && search_rank_cmp(r, &t->v[t->n - 1]) >= 0)
        return;
    size_t i = t->n < t->k ? t->n++ : t->n - 1;
    while (i > 0 && search_rank_cmp(r, &t->v[i - 1]) < 0) {
        t->v[i] = t->v[i - 1];
        i--;
    }
    t->v[i] = *r;
}

search_ranked search_rank_of(const search_opts *o, const search_cand *c, size_t idx)
{
    return (search_ranked){search_key(o, c), c->world, c->peak_bytes, c->order, idx};
}

/* Pareto front over (step time, GPUs, peak bytes), all minimised, of the
 * first n (feasible) candidates; indices in step-time order. */
size_t search_rank_pareto(const search_cand *c, size_t n, size_t *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        bool dominated = false;
        for (size_t j = 0; j < n && !dominated; j++) {
            if (j == i)
                continue;
            bool le = c[j].step_time_s <= c[i].step_time_s && c[j].world <= c[i].world &&
                      c[j].peak_bytes <= c[i].peak_bytes;
            bool lt = c[j].step_time_s < c[i].step_time_s || c[j].world < c[i].world ||
                      c[j].peak_bytes < c[i].peak_bytes;
            /* Equal points: keep the first in rank order only. */
            dominated = le && (lt || j < i);
        }
        if (!dominated)
            out[k++] = i;
    }
    /* Already in rank order; sort by step time (stable by index). */
    for (size_t i = 1; i < k; i++) {
        size_t v = out[i], j = i;
        while (j > 0 && (c[out[j - 1]].step_time_s > c[v].step_time_s)) {
            out[j] = out[j - 1];
            j--;
        }
        out[j] = v;
    }
    return k;
}

/* Is candidate c (by its time and memory lower bounds) certainly
 * dominated by a simulated feasible point of the front: no slower, no
 * more GPUs, no more memory, and better in one of them? */
bool search_rank_front_dominates(const search_cand *all, const size_t *front, size_t n, const search_cand *c)
{
    for (size_t i = 0; i < n; i++) {
        const search_cand *q = &all[front[i]];
        if (q->step_time_s <= c->time_lb_s && q->world <= c->world && q->peak_bytes <= c->peak_lb_bytes &&
            (q->step_time_s < c->time_lb_s || q->world < c->world || q->peak_bytes < c->peak_lb_bytes))
            return true;
    }
    return false;
}

static bool dominates(const search_cand *q, const search_cand *c)
{
    return q->step_time_s <= c->step_time_s && q->world <= c->world && q->peak_bytes <= c->peak_bytes &&
           (q->step_time_s < c->step_time_s || q->world < c->world || q->peak_bytes < c->peak_bytes);
}

/* Adds simulated point i to the front (indices into all) unless a point
 * there dominates it; drops the points it dominates.  Returns the size. */
size_t search_rank_front_add(const search_cand *all, size_t *front, size_t n, size_t i)
{
    for (size_t k = 0; k < n; k++)
        if (dominates(&all[front[k]], &all[i]))
            return n;
    size_t w = 0;
    for (size_t k = 0; k < n; k++)
        if (!dominates(&all[i], &all[front[k]]))
            front[w++] = front[k];
    front[w++] = i;
    return w;
}
