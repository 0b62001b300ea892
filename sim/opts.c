/* opts: the commands' option parser (rules in opts.h). */
#include "opts.h"

#include <string.h>

#include "cli.h"

opts_iter opts_start(int argc, char **argv, int first, const opts_def *defs, size_t n, const char *prefix,
                     const char *hint)
{
    return (opts_iter){ argc, argv, first, defs, n, prefix ? prefix : "", hint ? hint : "", 0 };
}

int opts_next(opts_iter *it, const char **value)
{
    *value = NULL;
    if (it->i >= it->argc)
        return OPTS_END;
    const char *a = it->argv[it->i++];
    for (size_t k = 0; k < it->ndefs; k++) {
        const opts_def *d = &it->defs[k];
        if (strcmp(a, d->name) != 0)
            continue;
        if (d->needs) {
            if (it->i >= it->argc) {
                cli_usage_error("%s%s needs %s%s", it->prefix, a, d->needs, it->hint);
                return OPTS_FAIL;
            }
            *value = it->argv[it->i++];
        }
        return (int)k;
    }
    if (a[0] == '-' && (a[1] == '-' || it->dash_options)) {
        cli_usage_error("%sunknown option '%s'%s", it->prefix, a, it->hint);
        return OPTS_FAIL;
    }
    *value = a;
    return OPTS_ARG;
}
