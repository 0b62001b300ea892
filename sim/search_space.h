/* search_space: which layouts a search considers, before any is judged.
 *
 * The GPU counts (search_opts.gpus_min/max), the check that a pinned
 * dimension can be legal at all, and the enumeration of every combination
 * of the searched dimensions over the ranges search.h lists, each with its
 * enumeration index (search_cand.order, the last tie-break of the
 * ranking).  Only divisibility, the Mamba (TP, CP) rules, the layer split
 * (strategy_split_layers) and where each schedule and the EP overlap apply
 * are decided here; strategy_resolve judges the rest when search.c
 * prepares each candidate.
 */
#ifndef PARSIM_SEARCH_SPACE_H
#define PARSIM_SEARCH_SPACE_H

#include <stddef.h>
#include <stdint.h>

#include "search.h"

/* The GPU counts searched into r->worlds / r->n_worlds: gpus_min 0 the
 * base's cluster.num_gpus; min == max that count; else the power-of-two
 * multiples of the node size in [min, max] (at most 32).  SIM_EINVAL when
 * the range holds none. */
int search_space_worlds(const run_inputs *b, const search_opts *o, search_result *r, sim_err *err);

/* A pinned TP, CP or EP that breaks a rule of its own against the model
 * (strategy_check_*) is the user's to change: no layout can make it
 * legal.  SIM_OK or SIM_EINVAL naming the key. */
int search_space_check_pinned(const run_inputs *b, const search_opts *o, sim_err *err);

/* Every combination for the GPU counts, in enumeration order, into
 * *cands (caller frees; NULL when none) and *n; cnt->enumerated counts
 * them.  SIM_OK or SIM_ENOMEM. */
int search_space_enumerate(const run_inputs *b, const search_opts *o, const int64_t *worlds, int n_worlds,
                           search_cand **cands, size_t *n, search_counts *cnt, sim_err *err);

#endif
