/* Fuzz target: the config loader with overrides, as `parsim run` uses it.
 *
 * Input: a libconfig run file, optionally followed by a line "#overrides"
 * (a libconfig comment, so the file part stays a valid file) and then one
 * KEY=VALUE override per line.  The file part is written to the scratch
 * directory and loaded with cfg_load_file, the overrides applied with
 * cfg_set_override, then cfg_resolve + strategy_resolve (cfg_resolve_all), as
 * cmd_run does.  A strategy that resolves and is small is simulated once
 * (step_run) and reported in every format (to a scratch file).  The
 * scratch directory links nccl/ to topologies/nccl, so a topology file
 * given as the run file finds the NCCL constants it includes.
 *
 * Checked beyond "no crash": every failure carries a message of one line,
 * as cli_fail prints it.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "config.h"
#include "report.h"
#include "step.h"
#include "strategy.h"

#include "fuzz_common.h"

#define FUZZ_MAX_OVERRIDES 16

static void fuzz_simulate(const run_inputs *in, const strategy_t *s)
{
    if (!fuzz_step_small(in, s))
        return;
    sim_err err;
    sim_err_clear(&err);
    step_t *st = NULL;
    int rc = step_run(&st, in, s, &err);
    fuzz_check_err(rc, &err);
    if (rc == SIM_OK) {
        FILE *out = fuzz_out();
        const step_result *r = step_result_get(st);
        report_text(out, in, s, r);
        /* valid JSON whatever the input: the writer never fails on values */
        if (report_json(out, in, s, r, &err) != SIM_OK)
            abort();
        report_csv_header(out);
        report_csv_row(out, in, s, r);
        fclose(out);
    }
    step_destroy(st);
}

int fuzz_config(const uint8_t *data, size_t size)
{
    static const char marker[] = "#overrides\n";
    size_t file_len = size;
    for (size_t k = 0; k + sizeof marker - 1 <= size; k++)
        if ((k == 0 || data[k - 1] == '\n') && !memcmp(data + k, marker, sizeof marker - 1))
            file_len = k;
    cfg_t *cfg = cfg_create(NULL);
    if (!cfg)
        return 0;
    fuzz_link(PARSIM_SOURCE_DIR "/topologies/nccl", "nccl");
    char path[512];
    fuzz_write("run.cfg", data, file_len, path, sizeof path);
    sim_err err;
    sim_err_clear(&err);
    int rc = cfg_load_file(cfg, path, CFG_PRIO_FILE, &err);
    fuzz_check_err(rc, &err);

    /* the overrides: the lines after the marker */
    size_t pos = file_len < size ? file_len + sizeof marker - 1 : size;
    for (int n = 0; rc == SIM_OK && pos < size && n < FUZZ_MAX_OVERRIDES; n++) {
        const uint8_t *nl = memchr(data + pos, '\n', size - pos);
        size_t ll = nl ? (size_t)(nl - (data + pos)) : size - pos;
        char *ovr = strndup((const char *)data + pos, ll);
        pos += ll + 1;
        if (!ovr)
            break;
        rc = cfg_set_override(cfg, ovr, &err);
        fuzz_check_err(rc, &err);
        free(ovr);
    }

    run_inputs in;
    strategy_t s;
    if (rc == SIM_OK && fuzz_resolve(cfg, &in, &s) == SIM_OK)
        fuzz_simulate(&in, &s);
    cfg_destroy(cfg);
    fuzz_scratch_remove();
    return 0;
}

FUZZ_ENTRY(fuzz_config)
