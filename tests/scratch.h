/* Test helper: a scratch folder per test (mkdtemp under /tmp, removed at
 * the end), files in it, and running the parsim binary with printf-style
 * arguments (cli_run.h). */
#ifndef PARSIM_TESTS_SCRATCH_H
#define PARSIM_TESTS_SCRATCH_H

#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli_run.h"

static inline void runf(result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void runf(result *r, const char *fmt, ...)
{
    char args[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    run(r, args);
}

/* A scratch folder per test, removed at the end. */
static char dir[64];

static inline void make_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/parsim-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static inline void remove_dir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

static inline const char *path_in(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", dir, name);
    return buf;
}

static inline void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s", path);
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
}

/* Reads a whole file; caller frees.  *len gets its size. */
static inline char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot read %s", path);
    char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n + 4096 > cap) {
            cap = cap ? cap * 2 : 65536;
            buf = realloc(buf, cap);
            cr_assert_not_null(buf);
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0)
            break;
    }
    fclose(f);
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}


static inline int count_lines(const char *text)
{
    int n = 0;
    for (; *text; text++)
        n += *text == '\n';
    return n;
}

#endif
