/* jsonout: JSON text written through yajl's streaming generator.
 *
 * Why yajl: the Chrome trace of one step holds 10^5..10^6 events.  A
 * streaming generator (yajl_gen) writes each token as it is produced and
 * holds only its nesting state (a few hundred bytes), so a trace costs no
 * memory beyond the simulation itself; a DOM library (jansson, cJSON,
 * json-c) would first build a tree of every event, several times the size
 * of the text.  yajl also escapes every string and refuses a non-finite
 * number, so what comes out is JSON whatever the input.
 *
 * Choices made here, for every JSON output of parsim:
 * - A number that is not finite (inf, nan: a ratio over a zero time) is
 *   written as null: JSON has no such number, and null says "no value"
 *   to every reader.  Finite numbers keep the formats the outputs always
 *   had: %.9g for measures, whole bytes without exponent, trace times as
 *   microseconds with 6 decimals (the simulated picoseconds exactly).
 * - A string is written as UTF-8: each byte that is not part of a valid
 *   UTF-8 sequence (RFC 3629: no overlong forms, no surrogates, at most
 *   U+10FFFF) becomes U+FFFD, so a name read from a file in another
 *   encoding still yields valid JSON.  Quotes, backslashes and control
 *   characters are escaped by yajl.
 * - Errors: the first failure (out of memory; a call out of order: a key
 *   that is not a string, a close that does not match the open map or
 *   array, a map closed after a key, a second document) is kept, nothing
 *   more is written after it (not even what waits in the writer's
 *   buffer), and jsonout_end returns it, so a caller never mistakes a cut
 *   document for a whole one.  Write errors of the stream itself are the
 *   caller's (ferror), as for any other output.
 *
 * Ownership: jsonout_begin allocates; jsonout_end frees whatever happened.
 * The FILE stays the caller's.
 */
#ifndef PARSIM_JSONOUT_H
#define PARSIM_JSONOUT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "err.h"

typedef struct jsonout jsonout;

/* pretty: one value per line, indented by two spaces (reports people
 * read); otherwise no whitespace but what jsonout_space adds (traces). */
jsonout *jsonout_begin(FILE *out, bool pretty, sim_err *err);

/* Frees j.  SIM_OK when one whole document was written; otherwise the
 * first failure (SIM_ENOMEM, or SIM_ESIM for a generator error, an
 * unclosed map/array or no document), with err saying which. */
int jsonout_end(jsonout *j, sim_err *err);

void jsonout_map_open(jsonout *j);
void jsonout_map_close(jsonout *j);
void jsonout_array_open(jsonout *j);
void jsonout_array_close(jsonout *j);

/* A map key, or a string value. */
void jsonout_str(jsonout *j, const char *s);
void jsonout_int(jsonout *j, int64_t v);
void jsonout_uint(jsonout *j, uint64_t v);
void jsonout_bool(jsonout *j, bool v);
/* %.9g; null if v is not finite. */
void jsonout_real(jsonout *j, double v);
/* %.*f with `decimals` digits; null if v is not finite. */
void jsonout_fixed(jsonout *j, double v, int decimals);

/* v / 10^decimals written exactly (v = 1234567, 6 -> 1.234567): a count
 * of small units in a larger one, e.g. picoseconds as microseconds.
 * decimals in 0..19. */
void jsonout_scaled(jsonout *j, uint64_t v, int decimals);

/* Writes whitespace (spaces, tabs, newlines only) between two tokens, e.g.
 * a line break before each trace event. */
void jsonout_space(jsonout *j, const char *ws);

/* key + value in one call, for the flat parts of a report. */
void jsonout_kv_str(jsonout *j, const char *key, const char *v);
void jsonout_kv_int(jsonout *j, const char *key, int64_t v);
void jsonout_kv_real(jsonout *j, const char *key, double v);
void jsonout_kv_fixed(jsonout *j, const char *key, double v, int decimals);
void jsonout_kv_scaled(jsonout *j, const char *key, uint64_t v, int decimals);

#endif
