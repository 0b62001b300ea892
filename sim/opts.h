/* opts: the commands' option parser, one table per command.
 *
 * A command lists its options (name, and what the value is called when it
 * takes one) and walks its arguments with opts_next: each argument is an
 * option of the table (with its value), a plain argument (a config file,
 * KEY=VALUE, a CSV file; "-" is plain), or an error printed here in the
 * command's words:
 *     <prefix><option> needs <what><hint>        the value is missing
 *     <prefix>unknown option '<arg>'<hint>        "--..." not in the table
 *                                                 (or "-...", dash_options)
 * so every command says the same thing the same way.  The command checks
 * the value itself (numbers through cli_int_arg, numparse.h).
 */
#ifndef PARSIM_OPTS_H
#define PARSIM_OPTS_H

#include <stddef.h>

typedef struct opts_def {
    const char *name;  /* "--out", "-h" */
    const char *needs; /* what the value is ("a value", "a file name"); NULL: a flag */
} opts_def;

typedef struct opts_iter {
    int argc;
    char **argv;
    int i;                 /* next argument */
    const opts_def *defs;
    size_t ndefs;
    const char *prefix;    /* before every message ("net: "), "" for none */
    const char *hint;      /* after the two messages above (" (usage ...)"), "" for none */
    int dash_options;      /* an unknown "-x" (not only "--x") is an unknown option */
} opts_iter;

enum {
    OPTS_ARG = -1,   /* a plain argument, in *value */
    OPTS_END = -2,   /* no more arguments */
    OPTS_FAIL = -3,  /* a usage error, printed: exit with EXIT_BAD_INPUT */
};

/* Arguments argv[first..argc) against the table defs[0..n). */
opts_iter opts_start(int argc, char **argv, int first, const opts_def *defs, size_t n, const char *prefix,
                     const char *hint);

/* The next argument: the index of its option in the table (*value its
 * value, NULL for a flag), OPTS_ARG, OPTS_END or OPTS_FAIL. */
int opts_next(opts_iter *it, const char **value);

#endif
