#include "jsonout.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_gen.h>

/* yajl prints token by token (a separator, a quote, a key...); gathering
 * them into blocks makes one fwrite per 64 KiB instead of ~30 per trace
 * event (with them, a 100 MB trace took twice the CPU time of the printf
 * writer). */
#define JSONOUT_BLOCK 65536

/* yajl checks that map keys are strings but neither that a close matches
 * its open nor that a map holds whole key/value pairs ({"a"} and [1} would
 * come out): the writer keeps its own stack for that, as deep as yajl's. */
#define JSONOUT_DEPTH 128

struct jsonout {
    yajl_gen g;
    FILE *out;
    size_t used;    /* bytes in block */
    int depth;      /* open maps and arrays */
    char open[JSONOUT_DEPTH];       /* '{' or '[' per level */
    uint64_t items[JSONOUT_DEPTH];  /* values written at each level (keys count) */
    bool started;   /* a top-level value was begun */
    int status;     /* SIM_OK until the first failure */
    char why[128];  /* what failed */
    char block[JSONOUT_BLOCK];
};

static void flush_block(jsonout *j)
{
    fwrite(j->block, 1, j->used, j->out);
    j->used = 0;
}

static void print_to_file(void *ctx, const char *s, size_t len)
{
    jsonout *j = ctx;
    if (len > sizeof j->block - j->used) {
        flush_block(j);
        if (len > sizeof j->block) {
            fwrite(s, 1, len, j->out);
            return;
        }
    }
    memcpy(j->block + j->used, s, len);
    j->used += len;
}

jsonout *jsonout_begin(FILE *out, bool pretty, sim_err *err)
{
    jsonout *j = calloc(1, sizeof *j);
    if (j)
        j->g = yajl_gen_alloc(NULL);
    if (!j || !j->g) {
        free(j);
        sim_err_set(err, SIM_ENOMEM, "out of memory starting the JSON output");
        return NULL;
    }
    j->out = out;
    yajl_gen_config(j->g, yajl_gen_print_callback, print_to_file, j);
    /* Strings are made valid UTF-8 before they reach yajl (utf8_valid
     * below); yajl's own check stays on so that a gap there is an error,
     * never invalid output. */
    yajl_gen_config(j->g, yajl_gen_validate_utf8, 1);
    if (pretty) {
        yajl_gen_config(j->g, yajl_gen_beautify, 1);
        yajl_gen_config(j->g, yajl_gen_indent_string, "  ");
    }
    return j;
}

static const char *gen_status_text(yajl_gen_status st)
{
    switch (st) {
    case yajl_gen_status_ok: return "ok";
    case yajl_gen_keys_must_be_strings: return "a map key that is not a string";
    case yajl_max_depth_exceeded: return "nesting too deep";
    case yajl_gen_in_error_state: return "a call after an error";
    case yajl_gen_generation_complete: return "a value after the end of the document";
    case yajl_gen_invalid_number: return "a number that is not finite";
    case yajl_gen_no_buf: return "no buffer";
    case yajl_gen_invalid_string: return "a string that is not UTF-8";
    }
    return "unknown generator status";
}

static void fail(jsonout *j, int code, const char *why)
{
    if (j->status == SIM_OK) {
        j->status = code;
        snprintf(j->why, sizeof j->why, "%s", why);
    }
}

/* Records yajl's failure, if st is one; true while all is well. */
static bool check(jsonout *j, yajl_gen_status st)
{
    if (st != yajl_gen_status_ok) {
        char why[96];
        snprintf(why, sizeof why, "JSON generator refused %s", gen_status_text(st));
        fail(j, SIM_ESIM, why);
    }
    return j->status == SIM_OK;
}

/* Before a value (or key): false once anything failed. */
static bool usable(jsonout *j)
{
    if (j->status != SIM_OK)
        return false;
    if (j->depth == 0)
        j->started = true;
    else
        j->items[j->depth - 1]++;
    return true;
}

static void open_level(jsonout *j, char kind, yajl_gen_status (*gen)(yajl_gen))
{
    if (!usable(j))
        return;
    if (j->depth == JSONOUT_DEPTH) {
        fail(j, SIM_ESIM, "JSON nesting too deep");
        return;
    }
    if (check(j, gen(j->g))) {
        j->open[j->depth] = kind;
        j->items[j->depth] = 0;
        j->depth++;
    }
}

static void close_level(jsonout *j, char kind, yajl_gen_status (*gen)(yajl_gen))
{
    if (j->status != SIM_OK)
        return;
    if (j->depth == 0 || j->open[j->depth - 1] != kind)
        fail(j, SIM_ESIM, kind == '{' ? "JSON map closed where none is open" : "JSON array closed where none is open");
    else if (kind == '{' && j->items[j->depth - 1] % 2)
        fail(j, SIM_ESIM, "JSON map closed after a key without its value");
    else if (check(j, gen(j->g)))
        j->depth--;
}

int jsonout_end(jsonout *j, sim_err *err)
{
    if (!j->started)
        fail(j, SIM_ESIM, "JSON document empty");
    else if (j->depth != 0)
        fail(j, SIM_ESIM, "JSON document left open");
    int rc = j->status;
    if (rc == SIM_OK)
        flush_block(j);
    else
        sim_err_set(err, rc, "%s", j->why);
    yajl_gen_free(j->g);
    free(j);
    return rc;
}

void jsonout_map_open(jsonout *j)
{
    open_level(j, '{', yajl_gen_map_open);
}

void jsonout_map_close(jsonout *j)
{
    close_level(j, '{', yajl_gen_map_close);
}

void jsonout_array_open(jsonout *j)
{
    open_level(j, '[', yajl_gen_array_open);
}

void jsonout_array_close(jsonout *j)
{
    close_level(j, '[', yajl_gen_array_close);
}

/* Length of the valid UTF-8 sequence (RFC 3629) at s[0..n), 0 if none:
 * no overlong forms, no surrogates (U+D800..U+DFFF), nothing above
 * U+10FFFF. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c >= 0xC2 && c <= 0xDF)
        len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else
        return 0;
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0;
    return len;
}

static bool utf8_valid(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq(s + i, n - i);
        if (!k)
            return false;
        i += k;
    }
    return true;
}

void jsonout_str(jsonout *j, const char *s)
{
    if (!usable(j))
        return;
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s);
    if (utf8_valid(u, n)) {
        check(j, yajl_gen_string(j->g, u, n));
        return;
    }
    /* Each byte outside a valid sequence becomes U+FFFD (3 bytes). */
    unsigned char *fixed = n <= SIZE_MAX / 3 ? malloc(3 * n) : NULL;
    if (!fixed) {
        fail(j, SIM_ENOMEM, "out of memory writing a JSON string");
        return;
    }
    size_t m = 0;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_seq(u + i, n - i);
        if (k) {
            memcpy(fixed + m, u + i, k);
            m += k;
            i += k;
        } else {
            memcpy(fixed + m, "\xEF\xBF\xBD", 3);
            m += 3;
            i++;
        }
    }
    check(j, yajl_gen_string(j->g, fixed, m));
    free(fixed);
}

static void number_text(jsonout *j, const char *text, int len)
{
    check(j, yajl_gen_number(j->g, text, (size_t)len));
}

/* Digits of v, with a '.' before the last `decimals` of them (at least
 * one digit before it), written backwards from end; returns the start.
 * Integers are formatted here rather than by printf (or yajl_gen_integer,
 * which calls it): a trace has six numbers per event. */
static char *digits(char *end, uint64_t v, int decimals)
{
    char *p = end;
    for (int i = 0; i < decimals; i++) {
        *--p = (char)('0' + v % 10);
        v /= 10;
    }
    if (decimals > 0)
        *--p = '.';
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return p;
}

void jsonout_int(jsonout *j, int64_t v)
{
    if (!usable(j))
        return;
    char buf[24];
    /* magnitude as unsigned: -INT64_MIN does not fit in int64_t */
    uint64_t mag = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    char *p = digits(buf + sizeof buf, mag, 0);
    if (v < 0)
        *--p = '-';
    number_text(j, p, (int)(buf + sizeof buf - p));
}

void jsonout_uint(jsonout *j, uint64_t v)
{
    jsonout_scaled(j, v, 0);
}

void jsonout_scaled(jsonout *j, uint64_t v, int decimals)
{
    if (!usable(j))
        return;
    if (decimals < 0 || decimals > 19) {
        fail(j, SIM_ESIM, "JSON fixed-point number with decimals outside 0..19");
        return;
    }
    char buf[48];
    char *p = digits(buf + sizeof buf, v, decimals);
    number_text(j, p, (int)(buf + sizeof buf - p));
}

void jsonout_bool(jsonout *j, bool v)
{
    if (usable(j))
        check(j, yajl_gen_bool(j->g, v));
}

/* A finite double printed by printf in the C locale (parsim never calls
 * setlocale) is a valid JSON number (digits, '.', 'e', sign); the buffer holds %.0f of DBL_MAX
 * (309 digits) with room for decimals up to 17. */
static void finite_or_null(jsonout *j, double v, const char *fmt, int decimals)
{
    if (!usable(j))
        return;
    if (!isfinite(v)) {
        check(j, yajl_gen_null(j->g));
        return;
    }
    char buf[352];
    int len = snprintf(buf, sizeof buf, fmt, decimals, v);
    if (len < 0 || (size_t)len >= sizeof buf) {
        fail(j, SIM_ESIM, "JSON number too long for its decimals");
        return;
    }
    number_text(j, buf, len);
}

void jsonout_real(jsonout *j, double v)
{
    finite_or_null(j, v, "%.*g", 9);
}

void jsonout_fixed(jsonout *j, double v, int decimals)
{
    finite_or_null(j, v, "%.*f", decimals);
}

void jsonout_space(jsonout *j, const char *ws)
{
    if (j->status != SIM_OK)
        return;
    if (strspn(ws, " \t\r\n") != strlen(ws)) {
        fail(j, SIM_ESIM, "JSON whitespace that is not blank");
        return;
    }
    print_to_file(j, ws, strlen(ws));
}

void jsonout_kv_str(jsonout *j, const char *key, const char *v)
{
    jsonout_str(j, key);
    jsonout_str(j, v);
}

void jsonout_kv_int(jsonout *j, const char *key, int64_t v)
{
    jsonout_str(j, key);
    jsonout_int(j, v);
}

void jsonout_kv_real(jsonout *j, const char *key, double v)
{
    jsonout_str(j, key);
    jsonout_real(j, v);
}

void jsonout_kv_fixed(jsonout *j, const char *key, double v, int decimals)
{
    jsonout_str(j, key);
    jsonout_fixed(j, v, decimals);
}

void jsonout_kv_scaled(jsonout *j, const char *key, uint64_t v, int decimals)
{
    jsonout_str(j, key);
    jsonout_scaled(j, v, decimals);
}
