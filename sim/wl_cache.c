/* wl_cache: figures of pass templates keyed by their ops (contract in
 * wl_cache.h).  A chained hash table of a fixed number of buckets and a
 * recency list; each entry is one allocation holding its copy of the ops. */
#include "wl_cache.h"

#include "err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

enum { BUCKETS = 1 << 14 }; /* heads: the fixed 128 KiB of wl_cache.h */

typedef struct entry {
    struct entry *next;          /* in its bucket */
    struct entry *newer, *older; /* recency list */
    uint64_t hash;
    size_t bytes;                /* what it counts against the budget */
    int32_t n_ops;
    bool has[WL_CACHE_SLOTS];
    uint16_t size[WL_CACHE_SLOTS];
    _Alignas(max_align_t) unsigned char val[WL_CACHE_SLOTS][WL_CACHE_VALUE_MAX]; /* any type's alignment */
    wl_op ops[];
} entry;

/* The entries of the passes looked up since the last wl_cache_forget, by
 * the address of their ops: a pass of the live workload looked up again
 * (the step after the bound) is found without comparing its ops. */
enum { MEMO = 64 };
typedef struct memo {
    const wl_op *ops;
    int32_t n_ops;
    entry *e;
} memo;

struct wl_cache {
    memo recent[MEMO];
    entry *bucket[BUCKETS];
    entry *newest, *oldest;
    size_t entries, bytes, max_bytes;
    uint64_t hits, misses, evictions;
};

wl_cache *wl_cache_create(size_t max_bytes)
{
    wl_cache *c = calloc(1, sizeof *c);
    if (c)
        c->max_bytes = max_bytes;
    return c;
}

void wl_cache_destroy(wl_cache *c)
{
    if (!c)
        return;
    for (entry *e = c->newest, *next; e; e = next) {
        next = e->older;
        free(e);
    }
    free(c);
}

/* Over n_ops and at most HASH_OPS ops spread over the list: hashing every
 * op would cost as much as what the cache saves.  Equality is decided by
 * comparing the whole lists (same_ops), so a sampled hash costs at most a
 * comparison more, never a wrong hit. */
enum { HASH_OPS = 32 };

static uint64_t mix(uint64_t h, uint64_t w)
{
    h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
    return h ^ (h >> 32);
}

static uint64_t hash_of(const wl_pass *p)
{
    _Static_assert(sizeof(wl_op) % sizeof(uint64_t) == 0, "wl_op is hashed by words");
    uint64_t h = mix(0x9E3779B97F4A7C15ULL, (uint64_t)(uint32_t)p->n_ops);
    const int32_t n = p->n_ops, step = n > HASH_OPS ? n / HASH_OPS : 1;
    for (int32_t i = n - 1, k = 0; i >= 0 && k < HASH_OPS; i -= step, k++) {
        uint64_t w[sizeof(wl_op) / sizeof(uint64_t)];
        memcpy(w, &p->ops[i], sizeof w);
        for (size_t j = 0; j < sizeof w / sizeof *w; j++)
            h = mix(h, w[j]);
    }
    return h;
}

static bool same_ops(const entry *e, uint64_t h, const wl_pass *p)
{
    return e->hash == h && e->n_ops == p->n_ops &&
           (p->n_ops == 0 || memcmp(e->ops, p->ops, (size_t)p->n_ops * sizeof *p->ops) == 0);
}

static memo *memo_of(wl_cache *c, const wl_pass *p)
{
    uintptr_t a = (uintptr_t)p->ops;
    return &c->recent[((a >> 4) ^ (a >> 12)) & (MEMO - 1)];
}

static entry *find(wl_cache *c, const wl_pass *p)
{
    memo *m = memo_of(c, p);
    if (p->n_ops > 0 && m->e && m->ops == p->ops && m->n_ops == p->n_ops)
        return m->e;
    const uint64_t h = hash_of(p);
    for (entry *e = c->bucket[h & (BUCKETS - 1)]; e; e = e->next)
        if (same_ops(e, h, p)) {
            *m = (memo){p->ops, p->n_ops, e};
            return e;
        }
    return NULL;
}

void wl_cache_forget(wl_cache *c)
{
    memset(c->recent, 0, sizeof c->recent);
}

static void unlink_recency(wl_cache *c, entry *e)
{
    if (e->newer)
        e->newer->older = e->older;
    else
        c->newest = e->older;
    if (e->older)
        e->older->newer = e->newer;
    else
        c->oldest = e->newer;
    e->newer = e->older = NULL;
}

static void make_newest(wl_cache *c, entry *e)
{
    e->older = c->newest;
    e->newer = NULL;
    if (c->newest)
        c->newest->newer = e;
    c->newest = e;
    if (!c->oldest)
        c->oldest = e;
}

static void evict_oldest(wl_cache *c)
{
    entry *e = c->oldest;
    entry **at = &c->bucket[e->hash & (BUCKETS - 1)];
    while (*at != e)
        at = &(*at)->next;
    *at = e->next;
    unlink_recency(c, e);
    c->entries--;
    c->bytes -= e->bytes;
    c->evictions++;
    for (int k = 0; k < MEMO; k++)
        if (c->recent[k].e == e)
            c->recent[k].e = NULL;
    free(e);
}

const void *wl_cache_get(wl_cache *c, const wl_pass *p, int slot, size_t size)
{
    entry *e = find(c, p);
    if (!e || !e->has[slot] || e->size[slot] != size) {
        c->misses++;
        return NULL;
    }
    c->hits++;
    if (c->newest != e) {
        unlink_recency(c, e);
        make_newest(c, e);
    }
    return e->val[slot];
}

int wl_cache_put(wl_cache *c, const wl_pass *p, int slot, const void *value, size_t size)
{
    if (slot < 0 || slot >= WL_CACHE_SLOTS || size > WL_CACHE_VALUE_MAX || p->n_ops < 0)
        return SIM_OK; /* nothing such is kept */
    entry *e = find(c, p);
    if (!e) {
        const uint64_t h = hash_of(p);
        const size_t bytes = sizeof *e + (size_t)p->n_ops * sizeof *p->ops;
        if (bytes > c->max_bytes)
            return SIM_OK;
        while (c->oldest && c->bytes + bytes > c->max_bytes)
            evict_oldest(c);
        if (!(e = malloc(bytes)))
            return SIM_ENOMEM;
        memset(e, 0, sizeof *e);
        e->hash = h;
        e->bytes = bytes;
        e->n_ops = p->n_ops;
        if (p->n_ops > 0)
            memcpy(e->ops, p->ops, (size_t)p->n_ops * sizeof *p->ops);
        entry **b = &c->bucket[h & (BUCKETS - 1)];
        e->next = *b;
        *b = e;
        make_newest(c, e);
        if (p->n_ops > 0)
            *memo_of(c, p) = (memo){p->ops, p->n_ops, e};
        c->entries++;
        c->bytes += bytes;
    }
    memcpy(e->val[slot], value, size);
    e->size[slot] = (uint16_t)size;
    e->has[slot] = true;
    return SIM_OK;
}

void wl_cache_stats_get(const wl_cache *c, wl_cache_stats *out)
{
    *out = (wl_cache_stats){c->entries, c->bytes, c->max_bytes, c->hits, c->misses, c->evictions};
}
