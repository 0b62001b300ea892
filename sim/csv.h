/* csv: an RFC 4180 reader for the tables parsim reads back (the validation
 * set, the outputs of validate, sweep and search), and the one quoting rule
 * it writes with.
 *
 * Accepted: fields separated by ',', records by LF or CRLF; a field that
 * starts with '"' is quoted, may hold commas, line breaks and doubled quotes
 * ("" stands for one "); a UTF-8 byte-order mark before the header is
 * skipped; blank lines (between or after records) and lines starting with
 * '#' (comments, such as line 2 of a sweep output) are ignored.  Every record
 * must have as many fields as the header: a short or long record is an
 * error naming the file and line, never padded silently.
 *
 * Each record keeps its original text (without the line terminator), so a
 * command can write the input rows back byte for byte and append columns.
 *
 * Ownership: csv_read_* fill a caller-owned csv_table, csv_free releases
 * everything it holds.  Cells are NUL-terminated copies; the empty string
 * stands for an empty field.
 * Rejected as not text: a NUL byte, the other C0 control characters but
 * tab, CR and LF, and DEL (the error names the line).  At most
 * LIMIT_CSV_ROWS data records (sim/limits.h).
 * Complexity: one pass over the text, O(bytes).
 */
#ifndef PARSIM_CSV_H
#define PARSIM_CSV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "err.h"

typedef struct csv_table {
    int ncols;             /* fields per record (from the header) */
    char **header;         /* ncols column names */
    char *header_raw;      /* the header line as written */
    size_t nrows;          /* data records */
    char **cells;          /* nrows * ncols, row-major: cells[r*ncols + c] */
    char **raw;            /* nrows original record texts */
    int *line;             /* nrows: line number (1-based) where each record starts */
} csv_table;

/* Parses text[0..len) (need not be NUL-terminated).  name is used in error
 * messages (a file name).  Returns SIM_OK, SIM_EINVAL for malformed input
 * (unterminated quote, a quote inside an unquoted field, wrong field count,
 * no header, a byte that is not text, too many records) or SIM_ENOMEM.  On
 * error the table is left empty. */
int csv_parse(const char *text, size_t len, const char *name, csv_table *out, sim_err *err);

/* Reads and parses a whole file ("-" is stdin).  SIM_EIO if it cannot be
 * read. */
int csv_read_file(const char *path, csv_table *out, sim_err *err);

void csv_free(csv_table *t);

/* Reads path (csv_read_file) and hands the table to convert, which fills
 * ctx from it; the table is freed afterwards.  Returns the first error. */
typedef int (*csv_convert_fn)(const char *path, const csv_table *t, void *ctx, sim_err *err);
int csv_read_convert(const char *path, csv_convert_fn convert, void *ctx, sim_err *err);

/* Index of the column named `name`, or -1. */
int csv_col(const csv_table *t, const char *name);

/* Cell (row r, column c); "" when c < 0 (a missing optional column). */
const char *csv_cell(const csv_table *t, size_t r, int c);

/* A cell as a number (sim/numparse.h: whole, finite, decimal) after
 * trimming the spaces and tabs around it; false for an empty cell or any
 * other text.  *out is untouched then. */
bool csv_num_int(const char *cell, int64_t *out);
bool csv_num_double(const char *cell, double *out);

/* Writes s as one CSV field: quoted (with doubled quotes) when it holds a
 * comma, quote, CR or LF, or starts or ends with a space; as it is
 * otherwise.  A byte that is not text (a control character but tab, CR and
 * LF) is written as '?', so parsim's own reader takes every file it writes. */
void csv_write_field(FILE *out, const char *s);

#endif
