/* outfile: writing a file the user named (--out, --trace, merge's OUT)
 * without damaging whatever is at that path.
 *
 * The path is resolved first (outfile_resolve): symbolic links are followed
 * to their final target (at most OUTFILE_MAX_LINKS of them), then
 *   - a regular file, or a path where nothing is yet (a dangling link's
 *     target included), is written whole or not at all: into a temporary
 *     file beside the resolved path (same directory, so the rename is
 *     atomic) that is renamed over it at the end.  A link stays a link and
 *     its target gets the content; an existing file keeps its permissions.
 *   - "-" (standard output), a FIFO, a character or a block device is a
 *     stream: written directly, never truncated, renamed or removed.  What
 *     the kernel reaches through the links decides, so /dev/stdout (a link
 *     to /proc/self/fd/1, whose text "pipe:[123]" names no file) is the
 *     pipe or terminal it stands for.
 *   - a directory (or a socket) is refused: SIM_EINVAL naming the path.
 *
 * A temporary file is removed when the process is stopped by SIGINT,
 * SIGTERM, SIGHUP or SIGPIPE (the signal then takes its default action), so
 * a killed command leaves no `*.tmp<pid>` behind; only SIGKILL can.
 */
#ifndef PARSIM_OUTFILE_H
#define PARSIM_OUTFILE_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include "err.h"

/* Linux's own bound on links followed in one path (MAXSYMLINKS). */
#define OUTFILE_MAX_LINKS 40

typedef enum outfile_kind {
    OUTFILE_NEW,     /* nothing at the resolved path yet */
    OUTFILE_REGULAR, /* an existing regular file */
    OUTFILE_STREAM,  /* "-", a FIFO or a device: written in place */
} outfile_kind;

typedef struct outfile_target {
    outfile_kind kind;
    char *path;  /* resolved path (malloc'd); NULL for "-" */
    mode_t mode; /* permissions of an existing regular file */
} outfile_target;

/* Resolves path as described above.  SIM_EINVAL for an empty name, a
 * directory, a socket or a link loop; SIM_EIO if a component cannot be
 * examined; SIM_ENOMEM.  On success free t with outfile_target_free. */
int outfile_resolve(const char *path, outfile_target *t, sim_err *err);
void outfile_target_free(outfile_target *t);

/* A file being written. */
typedef struct outfile {
    FILE *f;          /* write here */
    const char *name; /* the path as given, for messages */
    outfile_target t;
    char *tmp;        /* temporary file, NULL when written in place */
    int slot;         /* cleanup slot of tmp, -1 if none */
} outfile;

/* Opens path for writing (a stream is opened in place; a FIFO blocks until
 * a reader opens it, as a shell's `>` does).  Errors as outfile_resolve,
 * plus SIM_EIO when it cannot be opened. */
int outfile_open(outfile *o, const char *path, sim_err *err);

/* Finishes o: with keep, flushes and closes it and renames the temporary
 * file into place (SIM_EIO if any of that fails, and the target is then
 * untouched); without keep, discards the temporary file (a stream keeps
 * what was written).  Always releases o. */
int outfile_close(outfile *o, bool keep, sim_err *err);

/* Opens an already-resolved stream target (not "-") for writing only,
 * without truncating it; NULL with errno set on failure. */
FILE *outfile_open_stream(const outfile_target *t);

#endif
