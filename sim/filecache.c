/* filecache: see filecache.h. */
#include "filecache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct fc_entry {
    filecache_kind kind;
    char *path;
    void *value;
    void (*free_value)(void *);
} fc_entry;

struct filecache {
    pthread_mutex_t mu;
    size_t n;
    fc_entry e[FILECACHE_MAX];
};

filecache *filecache_create(void)
{
    filecache *fc = calloc(1, sizeof *fc);
    if (fc && pthread_mutex_init(&fc->mu, NULL) != 0) {
        free(fc);
        return NULL;
    }
    return fc;
}

void filecache_destroy(filecache *fc)
{
    if (!fc)
        return;
    for (size_t k = 0; k < fc->n; k++) {
        if (fc->e[k].free_value)
            fc->e[k].free_value(fc->e[k].value);
        free(fc->e[k].path);
    }
    pthread_mutex_destroy(&fc->mu);
    free(fc);
}

/* The entry for (kind, path) among the first n; the lock held. */
static const fc_entry *lookup(const filecache *fc, filecache_kind kind, const char *path)
{
    for (size_t k = 0; k < fc->n; k++)
        if (fc->e[k].kind == kind && strcmp(fc->e[k].path, path) == 0)
            return &fc->e[k];
    return NULL;
}

const void *filecache_get(filecache *fc, filecache_kind kind, const char *path)
{
    pthread_mutex_lock(&fc->mu);
    const fc_entry *e = lookup(fc, kind, path);
    const void *v = e ? e->value : NULL;
    pthread_mutex_unlock(&fc->mu);
    return v;
}

const void *filecache_put(filecache *fc, filecache_kind kind, const char *path, void *value,
                          void (*free_value)(void *))
{
    pthread_mutex_lock(&fc->mu);
    const fc_entry *e = lookup(fc, kind, path);
    const void *kept = e ? e->value : NULL;
    char *p = !e && fc->n < FILECACHE_MAX ? strdup(path) : NULL;
    if (p) {
        fc->e[fc->n++] = (fc_entry){kind, p, value, free_value};
        kept = value;
    }
    pthread_mutex_unlock(&fc->mu);
    if (kept != value && free_value)
        free_value(value);
    return kept;
}
