/* Replays the fuzz corpora and the saved crash inputs through the fuzz
 * targets' entry functions (tests/fuzz/README.md), so an input that once
 * crashed parsim stays fixed in every build, without libFuzzer.
 *
 * Each file of tests/fuzz/corpus/<target>/ and tests/fuzz/regressions/<target>/
 * is one parameter, run in its own process: a crash (or, in the sanitizer
 * build, a leak) fails that parameter (its path is printed first).  regressions/pending/ holds inputs that
 * still crash today; it is not replayed.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#if defined(__SANITIZE_ADDRESS__)
/* The sanitizer build checks each replay for leaks before the test ends
 * (at exit, a leak report would come after the test has passed). */
#include <sanitizer/lsan_interface.h>
#define LEAKS() __lsan_do_recoverable_leak_check()
#else
#define LEAKS() 0
#endif

#include "cli_run.h"
#include "err.h"

#define PARSIM_FUZZ_NO_MAIN
#include "fuzz/fuzz_config.c"
#include "fuzz/fuzz_csv.c"
#include "fuzz/fuzz_nccl.c"
#include "fuzz/fuzz_sweep.c"
#include "fuzz/fuzz_yaml.c"

typedef struct replay {
    int target;       /* index in targets[] */
    char path[720];      /* a folder (< 400) and a file name (< 256) */
} replay;

static const struct {
    const char *name;
    int (*fn)(const uint8_t *, size_t);
} targets[] = {
    { "config", fuzz_config },
    { "csv", fuzz_csv },
    { "sweep", fuzz_sweep },
    { "nccl", fuzz_nccl },
    { "yaml", fuzz_yaml },
};
#define NTARGETS (sizeof targets / sizeof targets[0])

/* Puts the plain files of dir (skipping dot files) at list[n], ... (list
 * NULL: only counts them); returns the new n. */
static size_t add_dir(replay *list, size_t n, int target, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return n;
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[sizeof list->path];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (e->d_name[0] == '.' || stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (list) {
            list[n].target = target;
            memcpy(list[n].path, path, sizeof path);
        }
        n++;
    }
    closedir(d);
    return n;
}

/* The corpus and regressions of every target into list (NULL: counts). */
static size_t add_all(replay *list)
{
    size_t n = 0;
    char dir[400];
    for (size_t t = 0; t < NTARGETS; t++) {
        snprintf(dir, sizeof dir, "%s/tests/fuzz/corpus/%s", PARSIM_SOURCE_DIR, targets[t].name);
        n = add_dir(list, n, (int)t, dir);
        snprintf(dir, sizeof dir, "%s/tests/fuzz/regressions/%s", PARSIM_SOURCE_DIR, targets[t].name);
        n = add_dir(list, n, (int)t, dir);
    }
    return n;
}

static void free_params(struct criterion_test_params *p)
{
    cr_free(p->params);
}

ParameterizedTestParameters(fuzz_regressions, replay)
{
    /* counted first: the files do not change in between */
    size_t n = add_all(NULL);
    replay *list = cr_malloc((n ? n : 1) * sizeof *list);
    cr_assert_not_null(list);
    return cr_make_param_array(replay, list, add_all(list), free_params);
}

ParameterizedTest(replay *r, fuzz_regressions, replay)
{
    fprintf(stderr, "fuzz replay: %s %s\n", targets[r->target].name, r->path);
    FILE *f = fopen(r->path, "rb");
    cr_assert_not_null(f, "cannot open %s", r->path);
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0, got;
    do {
        if (len == cap) {
            cap = cap ? 2 * cap : 4096;
            buf = realloc(buf, cap);
            cr_assert_not_null(buf);
        }
        got = fread(buf + len, 1, cap - len, f);
        len += got;
    } while (got > 0);
    fclose(f);
    cr_assert_eq(targets[r->target].fn(buf, len), 0, "%s", r->path);
    free(buf);
    fuzz_scratch_remove();
    cr_assert_eq(LEAKS(), 0, "%s leaks memory (report above)", r->path);
}

/* Every target has a seed corpus: a missing folder would replay nothing. */
Test(fuzz_regressions, every_target_has_a_corpus)
{
    for (size_t t = 0; t < NTARGETS; t++) {
        char dir[400];
        snprintf(dir, sizeof dir, "%s/tests/fuzz/corpus/%s", PARSIM_SOURCE_DIR, targets[t].name);
        cr_expect_gt(add_dir(NULL, 0, (int)t, dir), 0, "no seed inputs in %s", dir);
    }
}

/* Found by fuzz_config (regressions/config/newline-in-topology-name.cfg): a
 * string value with a line break made a two-line error. */
Test(fuzz_regressions, error_quoting_a_line_break_is_one_line)
{
    char dir[] = "/tmp/parsim-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[64];
    snprintf(path, sizeof path, "%s/run.cfg", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs("cluster: { topology = \"gb\n200\"; };\n", f);
    fclose(f);
    char args[128];
    snprintf(args, sizeof args, "run '%s'", path);
    result r;
    run(&r, args);
    remove(path);
    rmdir(dir);
    cr_assert_eq(r.status, 2, "%s", r.out);
    cr_assert_not_null(strstr(r.out, "run.cfg:1: cluster.topology: \"gb?200\" is not a topology preset name"), "%s", r.out);
    cr_assert_eq(strchr(r.out, '\n'), r.out + strlen(r.out) - 1, "more than one line: %s", r.out);

    sim_err err;
    sim_err_clear(&err);
    sim_err_set_at(&err, SIM_EINVAL, "a\rb.cfg", 3, "k\te", "x\ny\x7f");
    char msg[256];
    sim_err_format(&err, msg, sizeof msg);
    cr_assert_str_eq(msg, "a?b.cfg:3: k?e: x?y?");
}
