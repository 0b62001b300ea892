/* What the fuzz targets share: the entry functions, a scratch directory
 * for APIs that take a path, and writing an input there.
 *
 * Each target file defines fuzz_<name>(data, size) and, unless
 * PARSIM_FUZZ_NO_MAIN is defined, libFuzzer's LLVMFuzzerTestOneInput
 * calling it.  tests/test_fuzz_regressions.c includes every target file
 * with PARSIM_FUZZ_NO_MAIN and replays the corpus and regressions/ through
 * the fuzz_* functions, so the normal test suite needs no libFuzzer.
 *
 * The scratch directory is mkdtemp("/tmp/parsim-fuzz-XXXXXX"), created on
 * first use in an input and removed with its files when the target
 * returns (fuzz_scratch_remove): libFuzzer ends its processes with _Exit,
 * so an atexit handler alone would leave one directory per run.
 */
#ifndef PARSIM_FUZZ_COMMON_H
#define PARSIM_FUZZ_COMMON_H

#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "config.h"
#include "err.h"
#include "strategy.h"

int fuzz_config(const uint8_t *data, size_t size);
int fuzz_csv(const uint8_t *data, size_t size);
int fuzz_sweep(const uint8_t *data, size_t size);
int fuzz_nccl(const uint8_t *data, size_t size);
int fuzz_yaml(const uint8_t *data, size_t size);

/* LeakSanitizer's suppressions, for the fuzzers and the replay test alike
 * (ASan's runtime calls this; other builds never do).
 * libconfig 1.7's scanner leaks on a syntax error: the buffer of a quoted
 * string that the error breaks (strbuf_append) and an empty string between
 * adjacent quoted strings ("" "" ...: libconfig_yylex).  A program that
 * only calls config_init, config_read_file and config_destroy on such a
 * file leaks the same bytes: the leak is the library's, not parsim's. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:strbuf_append\nleak:libconfig_yylex\n";
}

static char fuzz_dir[64];

/* Removes the files of the scratch directory, then the directory.  Only
 * plain files and links are ever put there. */
static inline void fuzz_scratch_remove(void)
{
    if (!fuzz_dir[0])
        return;
    DIR *d = opendir(fuzz_dir);
    if (d) {
        struct dirent *e;
        char path[512];
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            snprintf(path, sizeof path, "%s/%s", fuzz_dir, e->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(fuzz_dir);
    fuzz_dir[0] = '\0';
}

/* The scratch directory, created on first use; aborts if it cannot be (a
 * target without it would test nothing).  Removed at exit as well, for a
 * target that stops half-way. */
static inline const char *fuzz_scratch(void)
{
    if (!fuzz_dir[0]) {
        snprintf(fuzz_dir, sizeof fuzz_dir, "/tmp/parsim-fuzz-XXXXXX");
        if (!mkdtemp(fuzz_dir)) {
            perror("parsim fuzz: mkdtemp");
            abort();
        }
        static bool registered;
        if (!registered)
            atexit(fuzz_scratch_remove);
        registered = true;
    }
    return fuzz_dir;
}

/* Writes data[0..size) to <scratch>/name and puts that path in path. */
static inline void fuzz_write(const char *name, const void *data, size_t size, char *path, size_t len)
{
    snprintf(path, len, "%s/%s", fuzz_scratch(), name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) {
        perror("parsim fuzz: writing the input");
        abort();
    }
}

/* A scratch file, empty, for what a target writes (reports, tables): the
 * writers run as the commands run them.  The caller closes it. */
static inline FILE *fuzz_out(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/out.txt", fuzz_scratch());
    FILE *f = fopen(path, "w");
    if (!f) {
        perror("parsim fuzz: opening the output");
        abort();
    }
    return f;
}

/* Links <scratch>/name to target (an absolute path). */
static inline void fuzz_link(const char *target, const char *name)
{
    char to[512];
    snprintf(to, sizeof to, "%s/%.255s", fuzz_scratch(), name);
    if (symlink(target, to) != 0) {
        perror("parsim fuzz: symlink");
        abort();
    }
}

/* Aborts unless a failed call left a one-line message (what cli_fail prints). */
static inline void fuzz_check_err(int rc, const sim_err *err)
{
    if (rc == SIM_OK)
        return;
    char msg[1024];
    sim_err_format(err, msg, sizeof msg);
    if (!err->msg[0] || strchr(msg, '\n')) {
        fprintf(stderr, "parsim fuzz: status %d with message \"%s\"\n", rc, msg);
        abort();
    }
}

/* cfg_resolve_all as cmd_run does it; on success the resolved settings and the
 * layout are written out.  Returns its status. */
static inline int fuzz_resolve(cfg_t *cfg, run_inputs *in, strategy_t *s)
{
    sim_err err;
    sim_err_clear(&err);
    int rc = cfg_resolve_all(cfg, in, s, &err);
    fuzz_check_err(rc, &err);
    if (rc == SIM_OK) {
        FILE *out = fuzz_out();
        cfg_dump(cfg, out);
        strategy_print_layout(s, &in->cluster, out);
        fclose(out);
    }
    return rc;
}

/* Simulate only steps of at most this many passes (stages x chunks x
 * microbatches) on at most this many layers: a step costs O(passes x
 * layers) and the fuzzer wants thousands of inputs a second. */
#define FUZZ_MAX_PASSES 4096
#define FUZZ_MAX_LAYERS 256
static inline bool fuzz_step_small(const run_inputs *in, const strategy_t *s)
{
    int64_t passes = 0;
    return !__builtin_mul_overflow(s->pp, s->v, &passes) &&
           !__builtin_mul_overflow(passes, s->num_microbatches, &passes) && passes <= FUZZ_MAX_PASSES &&
           in->model.num_layers <= FUZZ_MAX_LAYERS;
}

/* libFuzzer's entry, calling fn (left out with PARSIM_FUZZ_NO_MAIN). */
#ifdef PARSIM_FUZZ_NO_MAIN
#define FUZZ_ENTRY(fn)
#else
#define FUZZ_ENTRY(fn)                                                  \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);       \
    int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)        \
    {                                                                   \
        return fn(data, size);                                          \
    }
#endif

#endif
