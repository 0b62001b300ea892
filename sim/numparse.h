/* numparse: reading numbers from text, one function per convention.
 *
 * Every parser takes a whole NUL-terminated string: leading or trailing
 * characters, an empty string, a value out of range and anything that is
 * not finite ("inf", "nan", 1e400) are rejected.  None allocates; none
 * touches *out unless it returns true.  The conventions:
 *
 *   num_parse_int     decimal integer ("-12", "+3"; "0x1f" hex too), int64
 *   num_parse_double  decimal number ("1.5", "2e-3", ".5"); no hex floats
 *   num_parse_count   a count, decimal multiples: k/K = 1e3, M = 1e6,
 *                     G or B (billion) = 1e9, T = 1e12 ("2T" tokens, "70B")
 *   num_parse_bytes   a size in bytes, binary multiples as nccl-tests'
 *                     -b/-e: K = 2^10, M = 2^20, G = 2^30, T = 2^40, an
 *                     optional trailing B ("8", "256K", "8GB"); whole bytes
 *
 * Callers that accept surrounding blanks (CSV cells) trim them first.
 */
#ifndef PARSIM_NUMPARSE_H
#define PARSIM_NUMPARSE_H

#include <stdbool.h>
#include <stdint.h>

bool num_parse_int(const char *s, int64_t *out);
bool num_parse_double(const char *s, double *out);
bool num_parse_count(const char *s, double *out);
bool num_parse_bytes(const char *s, double *out);

#endif
