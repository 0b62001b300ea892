#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void sim_err_clear(sim_err *err)
{
    if (err)
        memset(err, 0, sizeof *err);
}

/* Messages quote input (a string value may hold a line break): control
 * characters become '?' so that the printed error stays one line. */
static void one_line(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = '?';
}

static void vset(sim_err *err, int code, const char *fmt, va_list ap)
{
    err->code = code;
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    one_line(err->msg);
}

int sim_err_set(sim_err *err, int code, const char *fmt, ...)
{
    if (!err)
        return code;
    va_list ap;
    va_start(ap, fmt);
    vset(err, code, fmt, ap);
    va_end(ap);
    return code;
}

int sim_err_set_at(sim_err *err, int code, const char *file, int line,
                   const char *key, const char *fmt, ...)
{
    if (!err)
        return code;
    snprintf(err->file, sizeof err->file, "%s", file ? file : "");
    err->line = line;
    snprintf(err->key, sizeof err->key, "%s", key ? key : "");
    one_line(err->file);
    one_line(err->key);
    va_list ap;
    va_start(ap, fmt);
    vset(err, code, fmt, ap);
    va_end(ap);
    return code;
}

void sim_err_format(const sim_err *err, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    if (err->file[0]) {
        if (err->line > 0)
            n += (size_t)snprintf(buf + n, len - n, "%s:%d: ", err->file, err->line);
        else
            n += (size_t)snprintf(buf + n, len - n, "%s: ", err->file);
    }
    if (n < len && err->key[0])
        n += (size_t)snprintf(buf + n, len - n, "%s: ", err->key);
    if (n < len)
        snprintf(buf + n, len - n, "%s", err->msg[0] ? err->msg : sim_strerror(err->code));
}

const char *sim_strerror(int code)
{
    switch (code) {
    case SIM_OK: return "ok";
#define XX(name, val, text) case SIM_##name: return text;
    SIM_ERR_MAP(XX)
#undef XX
    default: return "unknown error";
    }
}
