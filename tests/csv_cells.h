/* Test helper: reading the cells of CSV text that parsim writes (search,
 * sweep and run CSVs: a header line, RFC 4180 quotes around the overrides). */
#ifndef PARSIM_TESTS_CSV_CELLS_H
#define PARSIM_TESTS_CSV_CELLS_H

#include <criterion/criterion.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* Cell col of a CSV line (RFC 4180 quotes), into buf. */
static inline void cell(const char *line, int col, char *buf, size_t len)
{
    int c = 0;
    size_t n = 0;
    bool q = false;
    for (const char *p = line; *p && *p != '\n'; p++) {
        if (q && *p == '"' && p[1] == '"') {
            if (c == col && n + 1 < len)
                buf[n++] = '"';
            p++;
        } else if (*p == '"') {
            q = !q;
        } else if (*p == ',' && !q) {
            c++;
        } else if (c == col && n + 1 < len) {
            buf[n++] = *p;
        }
    }
    buf[n] = '\0';
}

/* The index of column name in a header line, -1 if none. */
static inline int column(const char *header, const char *name)
{
    char buf[256];
    for (int c = 0; c < 400; c++) {
        cell(header, c, buf, sizeof buf);
        if (!strcmp(buf, name))
            return c;
    }
    return -1;
}

/* Line k (0 = the first) of text. */
static inline const char *line_at(const char *text, int k)
{
    for (; k > 0 && text; k--) {
        text = strchr(text, '\n');
        text = text ? text + 1 : NULL;
    }
    cr_assert(text && *text, "no line %d", k);
    return text;
}

#endif
