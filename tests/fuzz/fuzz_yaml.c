/* Fuzz target: a Megatron Bridge run_config.yaml as `parsim run` reads it.
 *
 * Input: the YAML text, written to the scratch directory as
 * run_config.yaml and loaded with cfg_load_file (sim/bridge_yaml.c: the
 * event pass against the limits, libyaml's document, the walk over its
 * fields and aliases, the rule table).  A file that loads gets the system
 * the YAML lacks (cluster.topology=dgx-h100, cluster.num_gpus=8) and is
 * resolved with cfg_resolve_all as cmd_run does; the field list
 * (--explain-config), the warnings and the resolved settings are written
 * to a scratch file.
 *
 * Checked beyond "no crash": every failure carries a message of one line,
 * as cli_fail prints it.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bridge_yaml.h"
#include "cli.h"
#include "config.h"
#include "strategy.h"

#include "fuzz_common.h"

int fuzz_yaml(const uint8_t *data, size_t size)
{
    cfg_t *cfg = cfg_create(NULL);
    if (!cfg)
        return 0;
    char path[512];
    fuzz_write("run_config.yaml", data, size, path, sizeof path);
    sim_err err;
    sim_err_clear(&err);
    int rc = cfg_load_file(cfg, path, CFG_PRIO_FILE, &err);
    fuzz_check_err(rc, &err);
    if (rc == SIM_OK) {
        FILE *out = fuzz_out();
        bridge_notes_explain(cfg_bridge_notes(cfg), out);
        bridge_notes_warn(cfg_bridge_notes(cfg), out);
        fclose(out);
        rc = cfg_set_override(cfg, "cluster.topology=dgx-h100", &err);
        if (rc == SIM_OK)
            rc = cfg_set_override(cfg, "cluster.num_gpus=8", &err);
        fuzz_check_err(rc, &err);
    }
    run_inputs in;
    strategy_t s;
    if (rc == SIM_OK)
        fuzz_resolve(cfg, &in, &s);
    cfg_destroy(cfg);
    fuzz_scratch_remove();
    return 0;
}

FUZZ_ENTRY(fuzz_yaml)
