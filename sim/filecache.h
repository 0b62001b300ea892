/* filecache: input files parsed once for a run of many configurations.
 *
 * A sweep builds every configuration from its base file and the presets
 * it names (a model, a topology and the files a topology names, a kernel
 * table), and parsing those files was most of a sweep's time per
 * configuration.  A filecache keeps what a file parsed into, by its path
 * as the configuration named it and by what it was parsed for (kind): the
 * next configuration that names the same path gets the same settings or
 * table without reading the file again.  So a sweep reads each input file
 * once, and every row comes from the same inputs even where a file
 * changes while it runs.  Only a parse that succeeded is kept: a file
 * that fails is read again each time, with the same error.
 *
 * sweep_run and validate_predict_many each hold one for their run.
 * Shared by the threads of one run (a mutex); a value, once kept, never
 * changes until the cache is destroyed.  Bounded: at most FILECACHE_MAX
 * files (later ones are parsed each time), each its one parse.
 */
#ifndef PARSIM_FILECACHE_H
#define PARSIM_FILECACHE_H

#include <stddef.h>

/* What a path was parsed for: the same file read as settings and as a
 * table are two entries. */
typedef enum { FILECACHE_SETTINGS = 0, FILECACHE_KERNELS, FILECACHE_MICROBENCH } filecache_kind;

#define FILECACHE_MAX 256

typedef struct filecache filecache;

/* NULL when out of memory. */
filecache *filecache_create(void);
/* Frees every value with the function it was kept with (NULL: no-op). */
void filecache_destroy(filecache *fc);

/* The value kept for (kind, path), or NULL. */
const void *filecache_get(filecache *fc, filecache_kind kind, const char *path);

/* Keeps value for (kind, path), which the cache then owns and frees with
 * free_value: returns what is kept for it after the call (value, or the
 * one another thread kept first, value then freed).  NULL, value freed,
 * when the cache is full or out of memory: the caller parses again next
 * time. */
const void *filecache_put(filecache *fc, filecache_kind kind, const char *path, void *value,
                          void (*free_value)(void *));

#endif
