/* err: status codes and the error record every fallible function fills.
 *
 * Functions that can fail because of their inputs return an int status
 * (0 = SIM_OK, negative = a SIM_E* code) and fill a caller-owned sim_err with
 * a one-line message and, where the error comes from a config file, the file,
 * line and key it concerns.  Printed form (sim_err_format):
 *     configs/run.cfg:12: model.tensor_model_parallel_size: must divide ...
 * The CLI maps SIM_EINVAL to exit status 2 and everything else to 1.
 */
#ifndef PARSIM_ERR_H
#define PARSIM_ERR_H

#include <stddef.h>

#define SIM_ERR_MAP(XX)                                         \
    XX(EINVAL, -1, "invalid input")                             \
    XX(EIO, -2, "input/output error")                           \
    XX(ENOMEM, -3, "out of memory")                             \
    XX(ESIM, -4, "simulation failure")

enum {
    SIM_OK = 0,
#define XX(name, val, text) SIM_##name = val,
    SIM_ERR_MAP(XX)
#undef XX
};

typedef struct sim_err {
    int code;           /* SIM_OK or a SIM_E* code */
    char file[256];     /* config file the error comes from, "" if none */
    int line;           /* line in file, 0 if unknown */
    char key[128];      /* config key concerned, "" if none */
    char msg[512];      /* what is wrong, one line, no trailing newline
                           (control characters are stored as '?') */
} sim_err;

/* Resets err to SIM_OK with empty fields. */
void sim_err_clear(sim_err *err);

/* Sets code and message; keeps file/line/key as they are.  Returns code so
 * callers can write `return sim_err_set(err, SIM_EINVAL, "...")`.
 * err may be NULL (the error is then only returned). */
int sim_err_set(sim_err *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Same, naming the origin of the error: file (may be NULL), line, key. */
int sim_err_set_at(sim_err *err, int code, const char *file, int line,
                   const char *key, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* Writes "file:line: key: msg" (parts that are empty are left out). */
void sim_err_format(const sim_err *err, char *buf, size_t len);

/* Short text for a code ("invalid input", ...). */
const char *sim_strerror(int code);

#endif
