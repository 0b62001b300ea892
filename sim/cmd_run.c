/* parsim run: one training step, simulated and reported.
 *
 * A config argument ending in .yaml / .yml is a Megatron Bridge saved
 * config (bridge_yaml.h): its fields that would change the result but are
 * not modeled are warnings on stderr, and --explain-config lists what was
 * done with each field (without simulating). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bridge_yaml.h"
#include "cli.h"
#include "config.h"
#include "opts.h"
#include "report.h"
#include "sizing.h"
#include "step.h"
#include "strategy.h"
#include "trace.h"

typedef enum { FMT_TEXT, FMT_JSON, FMT_CSV } out_format;

typedef struct report_ctx {
    out_format fmt;
    const run_inputs *in;
    const strategy_t *s;
    const step_result *res;
} report_ctx;

static int report_writer(FILE *out, void *ctx, sim_err *err)
{
    const report_ctx *r = ctx;
    if (r->fmt == FMT_JSON)
        return report_json(out, r->in, r->s, r->res, err);
    if (r->fmt == FMT_CSV) {
        report_csv_header(out);
        report_csv_row(out, r->in, r->s, r->res);
    } else
        report_text(out, r->in, r->s, r->res);
    return SIM_OK;
}

static int trace_writer(FILE *out, void *ctx, sim_err *err)
{
    return trace_write(out, ctx, err);
}

static int explain_writer(FILE *out, void *ctx, sim_err *err)
{
    (void)err;
    bridge_notes_explain(ctx, out);
    return SIM_OK;
}


int cmd_run(int argc, char **argv)
{
    out_format fmt = FMT_TEXT;
    const char *trace_path = NULL;
    int layout = 0, dump = 0, explain = 0;
    sim_err err;
    sim_err_clear(&err);
    cfg_t *cfg = cfg_create(NULL);
    if (!cfg) {
        fputs("parsim: out of memory\n", stderr);
        return EXIT_FAILURE;
    }
    int rc = EXIT_SUCCESS;
    bool have_file = false;
    enum { O_FORMAT, O_TRACE, O_LAYOUT, O_DUMP, O_EXPLAIN };
    static const opts_def defs[] = {
        [O_FORMAT] = {"--format", "a value"}, [O_TRACE] = {"--trace", "a file name"},
        [O_LAYOUT] = {"--layout", NULL},      [O_DUMP] = {"--dump-config", NULL},
        [O_EXPLAIN] = {"--explain-config", NULL},
    };
    opts_iter it = opts_start(argc, argv, 0, defs, sizeof defs / sizeof defs[0], NULL, NULL);
    const char *a;
    for (int opt; (opt = opts_next(&it, &a)) != OPTS_END;) {
        if (opt == OPTS_FAIL) {
            rc = EXIT_BAD_INPUT;
            goto out;
        }
        if (opt == O_FORMAT) {
            if (!strcmp(a, "text"))
                fmt = FMT_TEXT;
            else if (!strcmp(a, "json"))
                fmt = FMT_JSON;
            else if (!strcmp(a, "csv"))
                fmt = FMT_CSV;
            else {
                rc = cli_usage_error("unknown format '%s' (text, json or csv)", a);
                goto out;
            }
        } else if (opt == O_TRACE) {
            trace_path = a;
        } else if (opt == O_LAYOUT) {
            layout = 1;
        } else if (opt == O_DUMP) {
            dump = 1;
        } else if (opt == O_EXPLAIN) {
            explain = 1;
        } else if (cli_config_arg(cfg, a, &have_file, &err) != SIM_OK) {
            rc = cli_fail(&err);
            goto out;
        }
    }

    const bridge_notes *notes = cfg_bridge_notes(cfg);
    if (explain) {
        if (!notes)
            rc = cli_usage_error("--explain-config lists the fields of a Megatron Bridge config: give a .yaml file");
        else if (cli_print_whole(explain_writer, (void *)notes, &err) != SIM_OK)
            rc = cli_fail(&err);
        goto out;
    }
    bridge_notes_warn(notes, stderr);

    run_inputs in;
    strategy_t s;
    if (cfg_resolve_all(cfg, &in, &s, &err) != SIM_OK) {
        rc = cli_fail(&err);
        goto out;
    }
    if (dump) {
        cfg_dump(cfg, stdout);
        goto out;
    }
    if (layout) {
        strategy_print_layout(&s, &in.cluster, stdout);
        sizing_print(&in.model, &s, &in.cluster, stdout);
        goto out;
    }
    step_t *st = NULL;
    in.sim.keep_ops = trace_path != NULL; /* the trace shows every kernel */
    if (step_run(&st, &in, &s, &err) != SIM_OK) {
        rc = cli_fail(&err);
        goto out;
    }
    if (trace_path && cli_write_file(trace_path, trace_writer, st, &err) != SIM_OK) {
        rc = cli_fail(&err);
        step_destroy(st);
        goto out;
    }
    report_ctx rc_ctx = { fmt, &in, &s, step_result_get(st) };
    if (cli_print_whole(report_writer, &rc_ctx, &err) != SIM_OK)
        rc = cli_fail(&err);
    step_destroy(st);
out:
    cfg_destroy(cfg);
    return rc;
}
