/* Test helper: model_hybrid_parse on a fresh model_spec, asserting it
 * parses, or that it fails with a message containing `want`. */
#ifndef PARSIM_TESTS_PATTERN_PARSE_H
#define PARSIM_TESTS_PATTERN_PARSE_H

#include <criterion/criterion.h>
#include <string.h>

#include "model.h"

static inline void parse_ok(model_spec *m, const char *pattern)
{
    char msg[160] = "";
    model_defaults(m);
    cr_assert_eq(model_hybrid_parse(m, pattern, msg, sizeof msg), 0, "%s: %s", pattern, msg);
}

static inline void parse_fails(const char *pattern, const char *want)
{
    model_spec m;
    char msg[160] = "";
    model_defaults(&m);
    cr_assert_eq(model_hybrid_parse(&m, pattern, msg, sizeof msg), -1, "%s parsed", pattern);
    cr_assert(strstr(msg, want), "%s: message '%s' lacks '%s'", pattern, msg, want);
}

#endif
