/* parsim command line: argument parsing and dispatch only. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gsl/gsl_errno.h>

#include "config.h"
#include "report.h"
#include "step.h"
#include "strategy.h"
#include "trace.h"

#define EXIT_BAD_INPUT 2

static void usage(FILE *out)
{
    fputs("usage: parsim run [CONFIG.cfg] [KEY=VALUE ...] [options]\n"
          "\n"
          "Simulates one training step and reports step time, throughput, MFU,\n"
          "pipeline bubble, communication and memory per pipeline stage.\n"
          "\n"
          "options:\n"
          "  --format text|json|csv   report format (default text)\n"
          "  --trace FILE.json        write the step's timeline as a Chrome trace (Perfetto)\n"
          "  --layout                 print the rank layout and group placement, then exit\n"
          "  --dump-config            print every resolved key and where it was set, then exit\n"
          "  --help-config            list every config key with its default\n"
          "  --help                   this text\n"
          "\n"
          "Keys use Megatron Bridge names, e.g. model.tensor_model_parallel_size=4;\n"
          "model.name loads models/<name>.cfg, cluster.topology loads topologies/<name>.cfg.\n"
          "Exit status: 0 success, 1 simulation or I/O failure, 2 bad input.\n",
          out);
}

static int fail(const sim_err *err)
{
    char buf[1024];
    sim_err_format(err, buf, sizeof buf);
    fprintf(stderr, "parsim: %s\n", buf);
    return err->code == SIM_EINVAL ? EXIT_BAD_INPUT : EXIT_FAILURE;
}

static int bad_usage(const char *fmt, const char *arg)
{
    fputs("parsim: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\n", stderr);
    usage(stderr);
    return EXIT_BAD_INPUT;
}

/* Writes a whole file or nothing: to a temporary beside it, then renamed. */
static int write_trace(const char *path, const step_t *st, sim_err *err)
{
    size_t n = strlen(path);
    char *tmp = malloc(n + 16);
    if (!tmp)
        return sim_err_set(err, SIM_ENOMEM, "out of memory");
    snprintf(tmp, n + 16, "%s.tmp%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        sim_err_set_at(err, SIM_EIO, path, 0, NULL, "cannot write: %s", strerror(errno));
        free(tmp);
        return SIM_EIO;
    }
    trace_write(f, st);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
        sim_err_set_at(err, SIM_EIO, path, 0, NULL, "cannot write: %s", strerror(errno));
        remove(tmp);
        free(tmp);
        return SIM_EIO;
    }
    free(tmp);
    return SIM_OK;
}

typedef enum { FMT_TEXT, FMT_JSON, FMT_CSV } out_format;

static int cmd_run(int argc, char **argv)
{
    out_format fmt = FMT_TEXT;
    const char *trace_path = NULL;
    int layout = 0, dump = 0;
    sim_err err;
    sim_err_clear(&err);
    cfg_t *cfg = cfg_create(NULL);
    if (!cfg) {
        fputs("parsim: out of memory\n", stderr);
        return EXIT_FAILURE;
    }
    int rc = EXIT_SUCCESS, have_file = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--format")) {
            if (++i >= argc) {
                rc = bad_usage("%s needs a value", a);
                goto out;
            }
            if (!strcmp(argv[i], "text"))
                fmt = FMT_TEXT;
            else if (!strcmp(argv[i], "json"))
                fmt = FMT_JSON;
            else if (!strcmp(argv[i], "csv"))
                fmt = FMT_CSV;
            else {
                rc = bad_usage("unknown format '%s' (text, json or csv)", argv[i]);
                goto out;
            }
        } else if (!strcmp(a, "--trace")) {
            if (++i >= argc) {
                rc = bad_usage("%s needs a file name", a);
                goto out;
            }
            trace_path = argv[i];
        } else if (!strcmp(a, "--layout")) {
            layout = 1;
        } else if (!strcmp(a, "--dump-config")) {
            dump = 1;
        } else if (a[0] == '-' && a[1] == '-') {
            rc = bad_usage("unknown option '%s'", a);
            goto out;
        } else if (strchr(a, '=')) {
            if (cfg_set_override(cfg, a, &err) != SIM_OK) {
                rc = fail(&err);
                goto out;
            }
        } else if (!have_file) {
            have_file = 1;
            if (cfg_load_file(cfg, a, CFG_PRIO_FILE, &err) != SIM_OK) {
                rc = fail(&err);
                goto out;
            }
        } else {
            rc = bad_usage("one config file only, got another: '%s'", a);
            goto out;
        }
    }

    run_inputs in;
    strategy_t s;
    if (cfg_resolve(cfg, &in, &err) != SIM_OK ||
        strategy_resolve(&s, &in.model, &in.cluster, &in.par, &in.train, &in.ddp, cfg, &err) != SIM_OK) {
        rc = fail(&err);
        goto out;
    }
    if (dump) {
        cfg_dump(cfg, stdout);
        goto out;
    }
    if (layout) {
        strategy_print_layout(&s, &in.cluster, stdout);
        goto out;
    }
    step_t *st = NULL;
    if (step_run(&st, &in, &s, &err) != SIM_OK) {
        rc = fail(&err);
        goto out;
    }
    if (trace_path && write_trace(trace_path, st, &err) != SIM_OK) {
        rc = fail(&err);
        step_destroy(st);
        goto out;
    }
    /* The report is built in memory and written in one piece. */
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (!mem) {
        step_destroy(st);
        fputs("parsim: out of memory\n", stderr);
        rc = EXIT_FAILURE;
        goto out;
    }
    const step_result *res = step_result_get(st);
    if (fmt == FMT_JSON)
        report_json(mem, &in, &s, res);
    else if (fmt == FMT_CSV) {
        report_csv_header(mem);
        report_csv_row(mem, &in, &s, res);
    } else
        report_text(mem, &in, &s, res);
    fclose(mem);
    if (fwrite(buf, 1, len, stdout) != len || fflush(stdout) != 0) {
        fputs("parsim: cannot write the report\n", stderr);
        rc = EXIT_FAILURE;
    }
    free(buf);
    step_destroy(st);
out:
    cfg_destroy(cfg);
    return rc;
}

int main(int argc, char **argv)
{
    /* GSL reports through return codes, never by aborting. */
    gsl_set_error_handler_off();
    if (argc < 2) {
        usage(stderr);
        return EXIT_BAD_INPUT;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return EXIT_SUCCESS;
    }
    if (!strcmp(cmd, "--help-config")) {
        cfg_print_keys(stdout);
        return EXIT_SUCCESS;
    }
    if (!strcmp(cmd, "run"))
        return cmd_run(argc - 2, argv + 2);
    return bad_usage("unknown command '%s'", cmd);
}
