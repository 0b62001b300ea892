#include "numparse.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>

/* Does s start like a decimal number: [+-] digit, or [+-] . digit?  strtod
 * alone would also take "inf", "nan", "0x1p3" and leading blanks. */
static bool decimal_start(const char *s)
{
    const char *p = s + (s[0] == '-' || s[0] == '+');
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
        return false;
    return isdigit((unsigned char)p[0]) || (p[0] == '.' && isdigit((unsigned char)p[1]));
}

bool num_parse_int(const char *s, int64_t *out)
{
    const char *p = s + (s[0] == '-' || s[0] == '+');
    bool hex = p[0] == '0' && (p[1] == 'x' || p[1] == 'X');
    if (!(hex ? isxdigit((unsigned char)p[2]) : isdigit((unsigned char)p[0])))
        return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, hex ? 16 : 10);
    if (errno || *end)
        return false;
    *out = v;
    return true;
}

/* The number at the start of s into *v and its end into *end; false if s
 * does not start with a finite decimal number. */
static bool leading_double(const char *s, double *v, char **end)
{
    if (!decimal_start(s))
        return false;
    errno = 0;
    *v = strtod(s, end);
    return errno != ERANGE && isfinite(*v);
}

bool num_parse_double(const char *s, double *out)
{
    double v;
    char *end;
    if (!leading_double(s, &v, &end) || *end)
        return false;
    *out = v;
    return true;
}

bool num_parse_count(const char *s, double *out)
{
    double v;
    char *end;
    if (!leading_double(s, &v, &end))
        return false;
    double mul = 1;
    if (*end) {
        switch (*end) {
        case 'k': case 'K': mul = 1e3; break;
        case 'M': mul = 1e6; break;
        case 'G': case 'B': mul = 1e9; break;
        case 'T': mul = 1e12; break;
        default: return false;
        }
        if (end[1])
            return false;
    }
    if (!isfinite(v * mul))
        return false;
    *out = v * mul;
    return true;
}

bool num_parse_bytes(const char *s, double *out)
{
    if (!isdigit((unsigned char)s[0]))
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return false;
    double mul = 1;
    switch (*end) {
    case 'k': case 'K': mul = 0x1p10; end++; break;
    case 'm': case 'M': mul = 0x1p20; end++; break;
    case 'g': case 'G': mul = 0x1p30; end++; break;
    case 't': case 'T': mul = 0x1p40; end++; break;
    default: break;
    }
    if (*end == 'B')
        end++;
    if (*end)
        return false;
    *out = (double)v * mul;
    return true;
}
