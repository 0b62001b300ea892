/* intmath: integer helpers the placement and layout arithmetic shares.
 *
 * Arguments are non-negative int64 (ranks, sizes); none of these
 * overflows for any such arguments.  Checked products and sums use GCC's
 * __builtin_mul_overflow / __builtin_add_overflow at the call site.
 */
#ifndef PARSIM_INTMATH_H
#define PARSIM_INTMATH_H

#include <stdint.h>

static inline int64_t imath_gcd(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* ceil(a / b) for a >= 0, b > 0, without forming a + b - 1. */
static inline int64_t imath_ceil_div(int64_t a, int64_t b)
{
    return a / b + (a % b != 0);
}

#endif
