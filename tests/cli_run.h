/* Test helper: runs the parsim binary (PARSIM_BINARY, from the source
 * tree PARSIM_SOURCE_DIR) with shell-quoted arguments and captures its
 * exit status and merged stdout/stderr. */
#ifndef PARSIM_TESTS_CLI_RUN_H
#define PARSIM_TESTS_CLI_RUN_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

typedef struct result {
    int status;       /* exit status, or 128 + signal */
    char out[65536];  /* stdout and stderr, truncated */
} result;

static inline void run(result *r, const char *args)
{
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s 2>&1", PARSIM_SOURCE_DIR, PARSIM_BINARY, args);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t n = fread(r->out, 1, sizeof r->out - 1, p);
    r->out[n] = '\0';
    int st = pclose(p);
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* A refusal: exit status 2, one line, naming each of need1 and need2
 * (NULL: not checked); `what` labels the failure messages. */
static inline void expect_refusal(const result *r, const char *what, const char *need1, const char *need2)
{
    cr_expect_eq(r->status, 2, "%s: status %d: %s", what, r->status, r->out);
    cr_expect(!need1 || strstr(r->out, need1), "%s: want '%s' in: %s", what, need1 ? need1 : "", r->out);
    cr_expect(!need2 || strstr(r->out, need2), "%s: want '%s' in: %s", what, need2 ? need2 : "", r->out);
    cr_expect(r->out[0] && strchr(r->out, '\n') == r->out + strlen(r->out) - 1, "%s: one line: %s", what,
              r->out);
}

#endif
