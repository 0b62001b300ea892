/* lcints: integer literals libconfig would read wrongly.
 *
 * libconfig 1.5 (Debian's) reads an integer literal without the L suffix
 * as 32 bits and keeps only the low 32 bits of a larger one, silently:
 * `to = 9223372036854775807;` reads as -1 and `4294967304` as 8.  An L
 * literal beyond the 64-bit range saturates, as silently.  lcints scans a
 * libconfig file (and the files it @includes) for such literals before
 * libconfig reads it, so they are an error naming the file and line
 * instead of another number.  Comments and strings are skipped; floats are
 * left alone.  Only regular files are scanned (a FIFO could not be read
 * twice); libconfig reports files it cannot open.
 */
#ifndef PARSIM_LCINTS_H
#define PARSIM_LCINTS_H

#include "err.h"

/* SIM_OK, or SIM_EINVAL naming the file, line and literal. */
int lcints_check_file(const char *path, sim_err *err);

#endif
