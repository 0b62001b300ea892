/* infile: opening an input file, the same way for every reader.
 *
 * Config files, presets, Megatron Bridge YAML, sweep specs, measured
 * (microbench) and kernel tables are all opened here: only regular files
 * (a FIFO, directory or device is SIM_EINVAL naming it, found without
 * blocking on it), and a libconfig file's @include relative to the file
 * that includes it, wherever that file is read from.
 */
#ifndef PARSIM_INFILE_H
#define PARSIM_INFILE_H

#include <stdio.h>

#include "err.h"

/* Opens path for reading if it is a regular file (a FIFO, directory or
 * device is SIM_EINVAL naming it, without blocking on it). */
int infile_open(const char *path, FILE **out, sim_err *err);

/* Reads a libconfig file into *lc (initialized here; the caller destroys
 * it on SIM_OK): @include relative to the file, and on failure a message
 * with the file and line of a syntax error or why it cannot be opened.
 * The file and every file it includes must be regular files, and no
 * integer literal libconfig would misread (lcints.h). */
struct config_t;
int infile_read_libconfig(struct config_t *lc, const char *path, sim_err *err);

#endif
