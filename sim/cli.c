#include "cli.h"
#include "numparse.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "outfile.h"

int cli_fail(const sim_err *err)
{
    char buf[1024];
    sim_err_format(err, buf, sizeof buf);
    fprintf(stderr, "parsim: %s\n", buf);
    return err->code == SIM_EINVAL ? EXIT_BAD_INPUT : EXIT_FAILURE;
}

int cli_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("parsim: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs(" (parsim --help for usage)\n", stderr);
    va_end(ap);
    return EXIT_BAD_INPUT;
}

int cli_int_arg(const char *opt, const char *s, long long lo, long long hi, long long *out)
{
    int64_t v = 0;
    if (!num_parse_int(s, &v) || v < lo || v > hi)
        return cli_usage_error("%s needs a whole number in %lld..%lld, got '%s'", opt, lo, hi, s);
    *out = (long long)v;
    return 0;
}

int cli_jobs_arg(const char *opt, const char *s, int *out)
{
    long long n = 0;
    int rc = cli_int_arg(opt, s, 0, 4096, &n);
    if (rc)
        return rc;
    if (n == 0) {
        n = sysconf(_SC_NPROCESSORS_ONLN);
        if (n < 1)
            n = 1;
    }
    *out = (int)n;
    return 0;
}

int cli_config_arg(cfg_t *cfg, const char *arg, bool *have_file, sim_err *err)
{
    if (strchr(arg, '='))
        return cfg_set_override(cfg, arg, err);
    if (*have_file)
        return sim_err_set(err, SIM_EINVAL, "one config file only, got another: '%s'", arg);
    *have_file = true;
    return cfg_load_file(cfg, arg, CFG_PRIO_FILE, err);
}

int cli_write_file(const char *path, cli_writer writer, void *ctx, sim_err *err)
{
    outfile o;
    int rc = outfile_open(&o, path, err);
    if (rc)
        return rc;
    rc = writer(o.f, ctx, err);
    /* A writer that failed drops the output: the old file stays. */
    int close_rc = outfile_close(&o, rc == SIM_OK, err);
    return rc != SIM_OK ? rc : close_rc;
}

int cli_print_whole(cli_writer writer, void *ctx, sim_err *err)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    if (!mem)
        return sim_err_set(err, SIM_ENOMEM, "out of memory");
    int rc = writer(mem, ctx, err);
    int bad = ferror(mem);
    fclose(mem);
    if (rc == SIM_OK && bad)
        rc = sim_err_set(err, SIM_ENOMEM, "out of memory building the report");
    else if (rc == SIM_OK && (fwrite(buf, 1, len, stdout) != len || fflush(stdout) != 0))
        rc = sim_err_set(err, SIM_EIO, "cannot write the report");
    free(buf);
    return rc;
}
