/* Fuzz target: the sweep spec (sweep_load) and its expansion.
 *
 * The input is written to the scratch directory as spec.cfg, beside links
 * to the .cfg files of the repository's configs/, so that a `base` names
 * one as the shipped specs do.  A spec that loads is expanded: its total, header and
 * shard spans, and the row of its last configuration (one simulation at
 * the most, as `parsim sweep --shard` would compute it).
 */
#include <dirent.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sweep.h"

#include "fuzz_common.h"

/* Links <scratch>/<name> -> PARSIM_SOURCE_DIR/configs/<name> for every
 * .cfg file of configs/ (listed once per process). */
static void fuzz_link_configs(void)
{
    static char names[64][256];
    static int n = -1;
    const char *configs = PARSIM_SOURCE_DIR "/configs";
    if (n < 0) {
        n = 0;
        DIR *d = opendir(configs);
        struct dirent *e;
        while (d && (e = readdir(d)) && n < 64) {
            size_t len = strlen(e->d_name);
            if (len > 4 && len < sizeof names[0] && !strcmp(e->d_name + len - 4, ".cfg"))
                memcpy(names[n++], e->d_name, len + 1);
        }
        if (d)
            closedir(d);
    }
    for (int k = 0; k < n; k++) {
        char from[1024];
        snprintf(from, sizeof from, "%s/%.255s", configs, names[k]);
        fuzz_link(from, names[k]);
    }
}

int fuzz_sweep(const uint8_t *data, size_t size)
{
    fuzz_link_configs();
    char path[512];
    fuzz_write("spec.cfg", data, size, path, sizeof path);
    sim_err err;
    sim_err_clear(&err);
    sweep_t *sw = NULL;
    int rc = sweep_load(&sw, path, NULL, &err);
    fuzz_check_err(rc, &err);
    if (rc != SIM_OK) {
        fuzz_scratch_remove();
        return 0;
    }
    int64_t total = sweep_total(sw);
    const char *header = sweep_header(sw);
    if (total < 0 || !header || !strchr(header, '\n')) {
        fprintf(stderr, "parsim fuzz: sweep of %" PRId64 " configurations, header \"%s\"\n", total,
                header ? header : "(null)");
        abort();
    }
    sweep_span all = sweep_shard_span(sw, 1, 1), third = sweep_shard_span(sw, 2, 3);
    if (all.count != total || third.count > total) {
        fprintf(stderr, "parsim fuzz: shard spans of %" PRId64 " and %" PRId64 " rows for %" PRId64 "\n",
                all.count, third.count, total);
        abort();
    }
    if (total > 0) {
        char *row = NULL;
        size_t len = 0;
        rc = sweep_row(sw, total - 1, &row, &len, &err);
        fuzz_check_err(rc, &err);
        int64_t index = -1;
        if (rc == SIM_OK && (!sweep_row_index(row, &index) || index != total - 1 || !len || row[len - 1] != '\n')) {
            fprintf(stderr, "parsim fuzz: row %" PRId64 " reads as %" PRId64 ": %.*s\n", total - 1, index,
                    (int)len, row);
            abort();
        }
        free(row);
    }
    sweep_destroy(sw);
    fuzz_scratch_remove();
    return 0;
}

FUZZ_ENTRY(fuzz_sweep)
