/* cli: what every parsim command shares — exit codes, error printing, the
 * "[CONFIG.cfg] [KEY=VALUE ...]" argument convention, and writing an output
 * file (through outfile.h).  One cmd_<name>() per command, each in
 * sim/cmd_<name>.c; main.c only dispatches.
 */
#ifndef PARSIM_CLI_H
#define PARSIM_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "config.h"
#include "err.h"
#include "step.h"
#include "strategy.h"

#define EXIT_BAD_INPUT 2

/* Prints "parsim: <file:line: key: message>" and returns the exit status
 * for err (2 for SIM_EINVAL, 1 otherwise). */
int cli_fail(const sim_err *err);

/* Prints "parsim: <message>" and returns 2. */
int cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* An option's integer value in lo..hi into *out; otherwise prints a usage
 * error naming the option and returns 2 (0 on success). */
int cli_int_arg(const char *opt, const char *s, long long lo, long long hi, long long *out);

/* A thread count (--jobs): 1..4096, or 0 for every online core. */
int cli_jobs_arg(const char *opt, const char *s, int *out);

/* Feeds one argument to cfg: a KEY=VALUE override, or the config file if
 * none was given yet (*have_file tracks that).  Returns SIM_OK, or
 * SIM_EINVAL for a second file name or a bad override/file. */
int cli_config_arg(cfg_t *cfg, const char *arg, bool *have_file, sim_err *err);

/* What an output is written by: SIM_OK when it wrote the whole output,
 * otherwise a SIM_E* code with err filled (the output is then dropped). */
typedef int (*cli_writer)(FILE *out, void *ctx, sim_err *err);

/* Writes path through writer, whole or not at all for a regular file (a
 * failure of writer or of the file leaves the old file as it was), in
 * place for "-" (stdout), a FIFO or a device (outfile.h: links are
 * followed, a directory is SIM_EINVAL). */
int cli_write_file(const char *path, cli_writer writer, void *ctx, sim_err *err);

/* Writes a report through writer to standard output in one piece (built
 * in memory first), so a failure never leaves half a report.  SIM_OK,
 * writer's failure, SIM_ENOMEM or SIM_EIO (err says which). */
int cli_print_whole(cli_writer writer, void *ctx, sim_err *err);

/* Commands. argv[0] is the first argument after the command name. */
int cmd_run(int argc, char **argv);
int cmd_net(int argc, char **argv);
int cmd_search(int argc, char **argv);
int cmd_validate(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);
int cmd_sweep(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_presets(int argc, char **argv);

#endif
