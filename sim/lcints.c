/* lcints: a small scanner of libconfig's lexical rules (comments, strings,
 * names, numbers, @include) that checks the range of integer literals; see
 * lcints.h. */
#include "lcints.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* libconfig's own bound on nested @include. */
#define MAX_INCLUDE_DEPTH 10
/* Longer than any number libconfig reads right (a hex64 with L is 20). */
#define TOKEN_MAX 64

typedef struct scan {
    FILE *f;
    const char *path;
    const char *include_dir; /* where @include names are found, as infile_read_libconfig sets it */
    int line;
} scan;

static int next(scan *s)
{
    int c = getc(s->f);
    if (c == '\n')
        s->line++;
    return c;
}

static void back(scan *s, int c)
{
    if (c == EOF)
        return;
    if (c == '\n')
        s->line--;
    ungetc(c, s->f);
}

/* Skips a string whose opening quote was read; its text goes to buf (if
 * not NULL, truncated to len). */
static void skip_string(scan *s, char *buf, size_t len)
{
    size_t n = 0;
    int c;
    while ((c = next(s)) != EOF && c != '"') {
        if (c == '\\')
            c = next(s);
        if (buf && n + 1 < len)
            buf[n++] = (char)c;
    }
    if (buf)
        buf[n] = '\0';
}

static void skip_line(scan *s)
{
    int c;
    while ((c = next(s)) != EOF && c != '\n')
        ;
    back(s, c);
}

static void skip_block_comment(scan *s)
{
    int c, prev = 0;
    while ((c = next(s)) != EOF && !(prev == '*' && c == '/'))
        prev = c;
}

/* Checks one number token (sign included). */
static int check_number(const scan *s, const char *tok, sim_err *err)
{
    const char *p = tok + (tok[0] == '-' || tok[0] == '+');
    bool hex = p[0] == '0' && (p[1] == 'x' || p[1] == 'X');
    if (!hex && strpbrk(p, ".eE"))
        return SIM_OK; /* a float */
    size_t n = strlen(p);
    bool wide = n && p[n - 1] == 'L';
    char digits[TOKEN_MAX + 1];
    snprintf(digits, sizeof digits, "%.*s", (int)(n - (wide && n > 1 && p[n - 2] == 'L') - wide), p);
    errno = 0;
    char *end;
    bool fits32;
    if (hex) {
        unsigned long long v = strtoull(digits + 2, &end, 16);
        if (*end || end == digits + 2)
            return SIM_OK; /* not a number libconfig reads: its syntax error says so */
        if (errno == ERANGE)
            return sim_err_set_at(err, SIM_EINVAL, s->path, s->line, NULL, "integer %s is beyond the 64-bit range",
                                  tok);
        fits32 = v <= 0xFFFFFFFFULL;
    } else {
        char signed_digits[TOKEN_MAX + 2];
        snprintf(signed_digits, sizeof signed_digits, "%s%s", tok[0] == '-' ? "-" : "", digits);
        long long v = strtoll(signed_digits, &end, 10);
        if (*end)
            return SIM_OK;
        if (errno == ERANGE)
            return sim_err_set_at(err, SIM_EINVAL, s->path, s->line, NULL, "integer %s is beyond the 64-bit range",
                                  tok);
        fits32 = v >= INT32_MIN && v <= INT32_MAX;
    }
    if (!fits32 && !wide)
        return sim_err_set_at(err, SIM_EINVAL, s->path, s->line, NULL,
                              "integer %s does not fit in 32 bits: write %sL (without the L, libconfig keeps "
                              "only its low 32 bits)",
                              tok, tok);
    return SIM_OK;
}

static int check_file(const char *path, const char *include_dir, int depth, sim_err *err);

/* After '@' at the start of a line: `include "file"`. */
static int do_include(scan *s, int depth, sim_err *err)
{
    char word[16];
    size_t n = 0;
    int c;
    while ((c = next(s)) != EOF && isalpha(c))
        if (n + 1 < sizeof word)
            word[n++] = (char)c;
    word[n] = '\0';
    while (c == ' ' || c == '\t')
        c = next(s);
    if (strcmp(word, "include") != 0 || c != '"') {
        back(s, c);
        return SIM_OK; /* libconfig's syntax error */
    }
    char name[1024];
    skip_string(s, name, sizeof name);
    char full[2048];
    if (name[0] == '/' || !s->include_dir)
        snprintf(full, sizeof full, "%s", name);
    else
        snprintf(full, sizeof full, "%s/%s", s->include_dir, name);
    return check_file(full, s->include_dir, depth + 1, err);
}

static int check_file(const char *path, const char *include_dir, int depth, sim_err *err)
{
    struct stat st;
    if (depth > MAX_INCLUDE_DEPTH || stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return SIM_OK;
    scan s = { fopen(path, "r"), path, include_dir, 1 };
    if (!s.f)
        return SIM_OK;
    int rc = SIM_OK;
    bool line_start = true;
    int c;
    while (rc == SIM_OK && (c = next(&s)) != EOF) {
        if (c == '\n') {
            line_start = true;
            continue;
        }
        if (isspace(c))
            continue;
        bool at_start = line_start;
        line_start = false;
        int d;
        if (c == '#') {
            skip_line(&s);
        } else if (c == '/' && ((d = next(&s)) == '/' || d == '*')) {
            if (d == '/')
                skip_line(&s);
            else
                skip_block_comment(&s);
        } else if (c == '/') {
            back(&s, d);
        } else if (c == '"') {
            skip_string(&s, NULL, 0);
        } else if (c == '@' && at_start) {
            rc = do_include(&s, depth, err);
        } else if (isalpha(c) || c == '*') {
            while ((c = next(&s)) != EOF && (isalnum(c) || c == '-' || c == '_' || c == '*'))
                ;
            back(&s, c);
        } else if (isdigit(c) || c == '-' || c == '+' || c == '.') {
            char tok[TOKEN_MAX + 1];
            size_t n = 0;
            int prev = 0;
            tok[n++] = (char)c;
            /* digits, letters (hex, L, e) and '.', a sign only after an exponent's e */
            while ((c = next(&s)) != EOF &&
                   (isalnum(c) || c == '.' || ((c == '-' || c == '+') && (prev == 'e' || prev == 'E')))) {
                if (n < TOKEN_MAX)
                    tok[n++] = (char)c;
                prev = c;
            }
            back(&s, c);
            tok[n] = '\0';
            if (isdigit((unsigned char)tok[0]) || (n > 1 && isdigit((unsigned char)tok[1])))
                rc = check_number(&s, tok, err);
        }
    }
    fclose(s.f);
    return rc;
}

int lcints_check_file(const char *path, sim_err *err)
{
    /* infile_read_libconfig points @include at the top file's folder */
    char dir[1024];
    const char *slash = strrchr(path, '/');
    const char *inc = NULL;
    if (slash && (size_t)(slash - path) < sizeof dir) {
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
        inc = dir[0] ? dir : "/";
    }
    return check_file(path, inc, 0, err);
}
