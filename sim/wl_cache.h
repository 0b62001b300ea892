/* wl_cache: figures of pass templates kept across the steps one search
 * worker simulates, keyed by the template itself.
 *
 * A pass's summary (step.c: its span, busy and exposed time per stream,
 * how it stands in the step) and its bound figures (search_bound.c:
 * compute work, span, critical path) are functions of its ops alone, and
 * layouts that differ elsewhere (PP, VP, DP, distributed optimizer,
 * schedule) run the same templates again and again.  The key is the whole
 * op list, byte for byte (n_ops and every field of every op, names as the
 * static pointers they are): a hit is a template equal in everything
 * either computation reads, so it returns the same bytes a miss computes.
 * Unequal padding only makes a miss.
 *
 * Bounded: at most max_bytes (entries, their copies of the ops and their
 * values together; besides, a fixed table of 128 KiB); inserting past that
 * drops the least recently used entries first, and a template larger than
 * the whole budget is not kept.
 * One cache per thread (no locks).
 */
#ifndef PARSIM_WL_CACHE_H
#define PARSIM_WL_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "workload.h"

/* What a value is: one slot per computation. */
enum { WL_CACHE_STEP = 0, WL_CACHE_BOUND = 1, WL_CACHE_SLOTS = 2 };
#define WL_CACHE_VALUE_MAX 256 /* bytes of one slot's value */

/* A search worker's budget: over a thousand templates of a 70B model (the
 * 70B exhaustive search finds 75% of its lookups with it, 85% with 8x
 * that, for no time saved). */
#define WL_CACHE_BYTES ((size_t)4 << 20)

typedef struct wl_cache wl_cache;

typedef struct wl_cache_stats {
    size_t entries, bytes, max_bytes;
    uint64_t hits, misses, evictions;
} wl_cache_stats;

/* NULL when out of memory. */
wl_cache *wl_cache_create(size_t max_bytes);
void wl_cache_destroy(wl_cache *c);

/* The value of `slot` stored for a pass with exactly these ops (size bytes,
 * as stored; aligned for any type), or NULL. */
const void *wl_cache_get(wl_cache *c, const wl_pass *p, int slot, size_t size);

/* Stores value (size <= WL_CACHE_VALUE_MAX) in `slot` of the pass's entry,
 * making the entry when there is none: SIM_OK (a template larger than the
 * whole budget is not kept: a later get misses), or SIM_ENOMEM with
 * nothing stored. */
int wl_cache_put(wl_cache *c, const wl_pass *p, int slot, const void *value, size_t size);

/* A pass once looked up or stored is found again by the address of its
 * ops, without comparing them: its ops must not change, nor their memory
 * be freed and reused, until this is called (search calls it after
 * destroying each workload). */
void wl_cache_forget(wl_cache *c);

void wl_cache_stats_get(const wl_cache *c, wl_cache_stats *out);

#endif
