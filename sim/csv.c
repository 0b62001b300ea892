#include "csv.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "numparse.h"

/* A growable array of pointers (fields of one record, or all cells). */
typedef struct ptrvec {
    char **v;
    size_t n, cap;
} ptrvec;

static bool ptrvec_push(ptrvec *p, char *s)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 64;
        char **v = realloc(p->v, cap * sizeof *v);
        if (!v)
            return false;
        p->v = v;
        p->cap = cap;
    }
    p->v[p->n++] = s;
    return true;
}

static void ptrvec_free_all(ptrvec *p)
{
    for (size_t i = 0; i < p->n; i++)
        free(p->v[i]);
    free(p->v);
    memset(p, 0, sizeof *p);
}

/* A growable byte buffer for the field being parsed. */
typedef struct strbuf {
    char *s;
    size_t n, cap;
} strbuf;

static bool strbuf_put(strbuf *b, char c)
{
    if (b->n + 1 >= b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 128;
        char *s = realloc(b->s, cap);
        if (!s)
            return false;
        b->s = s;
        b->cap = cap;
    }
    b->s[b->n++] = c;
    b->s[b->n] = '\0';
    return true;
}

int csv_read_convert(const char *path, csv_convert_fn convert, void *ctx, sim_err *err)
{
    csv_table t;
    int rc = csv_read_file(path, &t, err);
    if (rc != SIM_OK)
        return rc;
    rc = convert(path, &t, ctx, err);
    csv_free(&t);
    return rc;
}

void csv_free(csv_table *t)
{
    if (!t)
        return;
    for (int c = 0; c < t->ncols; c++)
        free(t->header[c]);
    free(t->header);
    free(t->header_raw);
    size_t ncells = t->nrows * (size_t)t->ncols;
    for (size_t i = 0; i < ncells; i++)
        free(t->cells[i]);
    free(t->cells);
    for (size_t r = 0; r < t->nrows; r++)
        free(t->raw[r]);
    free(t->raw);
    free(t->line);
    memset(t, 0, sizeof *t);
}

/* Parses one record starting at *pos.  Appends its fields to `fields`,
 * sets *start and *end to the record's text without the terminator and
 * advances *pos and *line past it.  Returns SIM_OK or an error. */
static int parse_record(const char *text, size_t len, size_t *pos, int *line, ptrvec *fields,
                        size_t *start, size_t *end, const char *name, sim_err *err)
{
    size_t i = *pos;
    int rec_line = *line;
    *start = i;
    strbuf b = { 0 };
    for (;;) {
        /* one field */
        b.n = 0;
        if (b.s)
            b.s[0] = '\0';
        if (i < len && text[i] == '"') {
            i++;
            for (;;) {
                if (i >= len) {
                    free(b.s);
                    return sim_err_set_at(err, SIM_EINVAL, name, rec_line, NULL,
                                          "unterminated quoted field");
                }
                char c = text[i++];
                if (c == '"') {
                    if (i < len && text[i] == '"') {
                        i++;
                        if (!strbuf_put(&b, '"'))
                            goto nomem;
                        continue;
                    }
                    break;
                }
                if (c == '\n')
                    (*line)++;
                if (!strbuf_put(&b, c))
                    goto nomem;
            }
            if (i < len && text[i] != ',' && text[i] != '\n' && text[i] != '\r') {
                free(b.s);
                return sim_err_set_at(err, SIM_EINVAL, name, *line, NULL,
                                      "text after the closing quote of a field (a quote inside "
                                      "a field must be doubled)");
            }
        } else {
            while (i < len && text[i] != ',' && text[i] != '\n' && text[i] != '\r') {
                if (text[i] == '"') {
                    free(b.s);
                    return sim_err_set_at(err, SIM_EINVAL, name, *line, NULL,
                                          "quote inside an unquoted field (quote the whole "
                                          "field and double the quote)");
                }
                if (!strbuf_put(&b, text[i++]))
                    goto nomem;
            }
        }
        char *f = strndup(b.s ? b.s : "", b.n);
        if (!f || !ptrvec_push(fields, f)) {
            free(f);
            goto nomem;
        }
        if (i < len && text[i] == ',') {
            i++;
            continue;
        }
        break;
    }
    free(b.s);
    *end = i;
    if (i < len && text[i] == '\r')
        i++;
    if (i < len && text[i] == '\n') {
        i++;
        (*line)++;
    } else if (i < len) {
        /* a lone CR that is not part of CRLF ends the record too */
        (*line)++;
    }
    *pos = i;
    return SIM_OK;
nomem:
    free(b.s);
    return sim_err_set(err, SIM_ENOMEM, "out of memory reading %s", name);
}

/* Bytes a text table never holds: C0 controls but tab, CR and LF, and DEL.
 * A NUL would end a cell early (the record's text would no longer match
 * its cells), and compare joins key cells with \x1f and \x1e. */
static bool is_binary_byte(unsigned char c)
{
    return (c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f;
}

/* Rejects a byte that cannot be in a text CSV and a text of more lines
 * than an int counts, before parsing: a line break is LF, CRLF or a lone
 * CR, as parse_record counts them. */
static int check_text(const char *text, size_t len, const char *name, sim_err *err)
{
    size_t breaks = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == '\n' || (c == '\r' && (i + 1 >= len || text[i + 1] != '\n'))) {
            if (++breaks >= (size_t)__INT_MAX__)
                return sim_err_set_at(err, SIM_EINVAL, name, 0, NULL,
                                      "more than %d lines", __INT_MAX__ - 1);
        } else if (is_binary_byte(c))
            return sim_err_set_at(err, SIM_EINVAL, name, (int)breaks + 1, NULL,
                                  "byte 0x%02x is not text (a CSV file holds no control "
                                  "characters but tab, CR and LF)",
                                  c);
    }
    return SIM_OK;
}

int csv_parse(const char *text, size_t len, const char *name, csv_table *out, sim_err *err)
{
    memset(out, 0, sizeof *out);
    int rc = check_text(text, len, name, err);
    if (rc != SIM_OK)
        return rc;
    size_t pos = 0;
    int line = 1;
    if (len >= 3 && (unsigned char)text[0] == 0xEF && (unsigned char)text[1] == 0xBB &&
        (unsigned char)text[2] == 0xBF)
        pos = 3;

    ptrvec cells = { 0 }, raws = { 0 }, fields = { 0 };
    int *lines = NULL;
    size_t lines_cap = 0;
    bool have_header = false;

    while (pos < len) {
        /* blank line */
        if (text[pos] == '\n' || text[pos] == '\r') {
            if (text[pos] == '\r' && pos + 1 < len && text[pos + 1] == '\n')
                pos++;
            pos++;
            line++;
            continue;
        }
        /* a comment line (a sweep output's line 2): not a record */
        if (text[pos] == '#') {
            while (pos < len && text[pos] != '\n')
                pos++;
            continue;
        }
        int rec_line = line;
        size_t start = 0, end = 0;
        fields.n = 0;
        rc = parse_record(text, len, &pos, &line, &fields, &start, &end, name, err);
        if (rc)
            goto fail;
        if (!have_header) {
            out->ncols = (int)fields.n;
            out->header = fields.v;
            fields = (ptrvec){ 0 };
            out->header_raw = strndup(text + start, end - start);
            if (!out->header_raw)
                goto nomem;
            have_header = true;
            continue;
        }
        if ((int)fields.n != out->ncols) {
            rc = sim_err_set_at(err, SIM_EINVAL, name, rec_line, NULL,
                                "record has %zu fields, the header has %d", fields.n, out->ncols);
            ptrvec_free_all(&fields);
            goto fail;
        }
        if (raws.n >= (size_t)LIMIT_CSV_ROWS) {
            rc = sim_err_set_at(err, SIM_EINVAL, name, rec_line, NULL,
                                "more than %lld data rows (LIMIT_CSV_ROWS)", LIMIT_CSV_ROWS);
            ptrvec_free_all(&fields);
            goto fail;
        }
        for (size_t k = 0; k < fields.n; k++) {
            if (!ptrvec_push(&cells, fields.v[k])) {
                for (size_t j = k; j < fields.n; j++)
                    free(fields.v[j]);
                fields.n = 0;
                goto nomem;
            }
        }
        fields.n = 0;
        char *raw = strndup(text + start, end - start);
        if (!raw || !ptrvec_push(&raws, raw)) {
            free(raw);
            goto nomem;
        }
        if (raws.n > lines_cap) {
            size_t cap = lines_cap ? 2 * lines_cap : 64;
            int *l = realloc(lines, cap * sizeof *l);
            if (!l)
                goto nomem;
            lines = l;
            lines_cap = cap;
        }
        lines[raws.n - 1] = rec_line;
    }
    free(fields.v);
    if (!have_header) {
        rc = sim_err_set_at(err, SIM_EINVAL, name, 0, NULL, "empty file: no header line");
        goto fail;
    }
    out->nrows = raws.n;
    out->cells = cells.v;
    out->raw = raws.v;
    out->line = lines;
    return SIM_OK;

nomem:
    rc = sim_err_set(err, SIM_ENOMEM, "out of memory reading %s", name);
fail:
    ptrvec_free_all(&fields);
    ptrvec_free_all(&cells);
    ptrvec_free_all(&raws);
    free(lines);
    out->nrows = 0;
    csv_free(out);
    return rc;
}

int csv_read_file(const char *path, csv_table *out, sim_err *err)
{
    memset(out, 0, sizeof *out);
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f)
        return sim_err_set_at(err, SIM_EIO, path, 0, NULL, "cannot open: %s", strerror(errno));
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (cap - len < 65536) {
            size_t ncap = cap ? 2 * cap : 1 << 20;
            char *nb = realloc(buf, ncap);
            if (!nb) {
                free(buf);
                if (f != stdin)
                    fclose(f);
                return sim_err_set(err, SIM_ENOMEM, "out of memory reading %s", path);
            }
            buf = nb;
            cap = ncap;
        }
        size_t n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0)
            break;
    }
    int bad = ferror(f) ? errno : 0;
    if (f != stdin)
        fclose(f);
    if (bad) {
        free(buf);
        return sim_err_set_at(err, SIM_EIO, path, 0, NULL, "cannot read: %s", strerror(bad));
    }
    int rc = csv_parse(buf, len, path, out, err);
    free(buf);
    return rc;
}

int csv_col(const csv_table *t, const char *name)
{
    for (int c = 0; c < t->ncols; c++)
        if (strcmp(t->header[c], name) == 0)
            return c;
    return -1;
}

/* The cell without the blanks (spaces, tabs) around it into buf; false
 * if that does not fit (no number is that long). */
static bool trimmed(const char *s, char *buf, size_t cap)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    if (n >= cap)
        return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    return true;
}

bool csv_num_int(const char *cell, int64_t *out)
{
    char buf[64];
    return trimmed(cell, buf, sizeof buf) && num_parse_int(buf, out);
}

bool csv_num_double(const char *cell, double *out)
{
    char buf[512];
    return trimmed(cell, buf, sizeof buf) && num_parse_double(buf, out);
}

const char *csv_cell(const csv_table *t, size_t r, int c)
{
    if (c < 0 || c >= t->ncols || r >= t->nrows)
        return "";
    return t->cells[r * (size_t)t->ncols + (size_t)c];
}

void csv_write_field(FILE *out, const char *s)
{
    size_t n = strlen(s);
    bool quote = n > 0 && (s[0] == ' ' || s[n - 1] == ' ');
    for (const char *p = s; *p && !quote; p++)
        if (*p == ',' || *p == '"' || *p == '\n' || *p == '\r')
            quote = true;
    if (quote)
        fputc('"', out);
    for (const char *p = s; *p; p++) {
        if (*p == '"')
            fputc('"', out);
        /* what parsim writes, parsim reads back */
        fputc(is_binary_byte((unsigned char)*p) ? '?' : *p, out);
    }
    if (quote)
        fputc('"', out);
}
