/* search_rank: the order of layouts, simulated or only bounded.
 *
 * One total order for the search (search.h, "Ranking keys"): the key
 * (step time, or step time x GPUs for tokens/s and GPU-hours), then fewer
 * GPUs, then lower peak memory, then enumeration order, so the output never
 * depends on the jobs or on qsort.  The same order sorts candidates by
 * their time bound before simulating (bound key and memory bound in place
 * of the simulated ones).  Beside it: the running top K that sets the time
 * bound's threshold, and the Pareto front over (step time, GPUs, peak
 * memory), both final and while simulating (--pareto's pruning).
 */
#ifndef PARSIM_SEARCH_RANK_H
#define PARSIM_SEARCH_RANK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "search.h"

/* What ranking compares, copied out of the candidates (qsort has no
 * context argument for the rank mode). */
typedef struct search_ranked {
    double key;           /* search_key, or the bound's key for ordering */
    int64_t world;
    double peak;
    int64_t order;
    size_t idx;
} search_ranked;

/* Keeps the K smallest keys seen (insertion into a sorted array). */
typedef struct search_topk {
    search_ranked *v;
    size_t n, k;
} search_topk;

/* qsort comparator of search_ranked: the order above. */
int search_rank_cmp(const void *x, const void *y);

/* A simulated candidate's entry (search_key), and the key of its time
 * bound in the same units. */
search_ranked search_rank_of(const search_opts *o, const search_cand *c, size_t idx);
double search_rank_bound_key(const search_opts *o, const search_cand *c);

/* Adds r to t when it is among the t->k smallest so far. */
void search_topk_add(search_topk *t, const search_ranked *r);

/* The Pareto front over (step time, GPUs, peak bytes), all minimised, of
 * c[0 .. n-1] (ranked, feasible): its indices into out, by step time;
 * equal points keep the first in rank order.  Returns its size. */
size_t search_rank_pareto(const search_cand *c, size_t n, size_t *out);

/* While simulating: is c, by its time and memory lower bounds, dominated
 * by a point of the front (indices front[0 .. n-1] into all)?  And
 * search_rank_front_add puts simulated point i into the front (unless
 * dominated), dropping what it dominates; returns the new size. */
bool search_rank_front_dominates(const search_cand *all, const size_t *front, size_t n, const search_cand *c);
size_t search_rank_front_add(const search_cand *all, size_t *front, size_t n, size_t i);

#endif
