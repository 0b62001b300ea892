/* numparse: each convention on its own, and what every parser refuses. */
#include <criterion/criterion.h>
#include <math.h>

#include "numparse.h"

Test(numparse, integers_whole_and_in_range)
{
    int64_t v = 0;
    cr_assert(num_parse_int("42", &v) && v == 42);
    cr_assert(num_parse_int("-7", &v) && v == -7);
    cr_assert(num_parse_int("0x10", &v) && v == 16);
    cr_assert(num_parse_int("9223372036854775807", &v) && v == INT64_MAX);
    v = 5;
    cr_assert(!num_parse_int("9223372036854775808", &v));
    cr_assert(!num_parse_int("", &v));
    cr_assert(!num_parse_int(" 1", &v));
    cr_assert(!num_parse_int("1 ", &v));
    cr_assert(!num_parse_int("1.0", &v));
    cr_assert(!num_parse_int("0x", &v));
    cr_assert(!num_parse_int("-", &v));
    cr_assert_eq(v, 5, "a refused string leaves *out alone");
}

Test(numparse, doubles_are_finite_decimals)
{
    double v = 0;
    cr_assert(num_parse_double("1.5", &v) && v == 1.5);
    cr_assert(num_parse_double(".5", &v) && v == 0.5);
    cr_assert(num_parse_double("-2e-3", &v) && v == -2e-3);
    cr_assert(num_parse_double("1e308", &v));
    cr_assert(!num_parse_double("1e400", &v));
    cr_assert(!num_parse_double("inf", &v));
    cr_assert(!num_parse_double("nan", &v));
    cr_assert(!num_parse_double("-inf", &v));
    cr_assert(!num_parse_double("0x1p3", &v));
    cr_assert(!num_parse_double("1.5x", &v));
    cr_assert(!num_parse_double("", &v));
}

Test(numparse, counts_use_decimal_multiples)
{
    double v = 0;
    cr_assert(num_parse_count("2T", &v) && v == 2e12);
    cr_assert(num_parse_count("70B", &v) && v == 70e9);
    cr_assert(num_parse_count("1.5M", &v) && v == 1.5e6);
    cr_assert(num_parse_count("3k", &v) && v == 3e3);
    cr_assert(num_parse_count("1e12", &v) && v == 1e12);
    cr_assert(!num_parse_count("1MB", &v));
    cr_assert(!num_parse_count("1e308T", &v));
    cr_assert(!num_parse_count("nanT", &v));
}

Test(numparse, bytes_use_binary_multiples)
{
    double v = 0;
    cr_assert(num_parse_bytes("8", &v) && v == 8);
    cr_assert(num_parse_bytes("1M", &v) && v == 1048576);
    cr_assert(num_parse_bytes("256K", &v) && v == 262144);
    cr_assert(num_parse_bytes("8GB", &v) && v == 8.0 * 1073741824.0);
    cr_assert(num_parse_bytes("16B", &v) && v == 16);
    cr_assert(!num_parse_bytes("1.5M", &v));
    cr_assert(!num_parse_bytes("-1", &v));
    cr_assert(!num_parse_bytes("1X", &v));
    cr_assert(!num_parse_bytes("99999999999999999999", &v));
}
