/* Fuzz target: the nccl-tests log parser (nccl_log_parse), as `parsim
 * calibrate --nccl` reads a log.  The parser takes a buffer, so the input
 * is given as it is (not NUL-terminated), once without and once with an
 * op hint.
 *
 * Checked beyond "no crash": a parsed log has points, each with a finite
 * size >= 0 and a finite positive time, as calibrate relies on.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibrate.h"

#include "fuzz_common.h"

static void fuzz_nccl_once(const uint8_t *data, size_t size, const char *op_hint)
{
    /* a copy of exactly size bytes, so ASan sees a read past the end */
    char *text = malloc(size ? size : 1);
    if (!text)
        return;
    memcpy(text, data, size);
    sim_err err;
    sim_err_clear(&err);
    nccl_log log;
    int rc = nccl_log_parse(text, size, "fuzz.log", op_hint, &log, &err);
    fuzz_check_err(rc, &err);
    if (rc == SIM_OK) {
        if (log.n == 0 || !log.pts) {
            fprintf(stderr, "parsim fuzz: a parsed log without points\n");
            abort();
        }
        for (size_t k = 0; k < log.n; k++) {
            const nccl_point *pt = &log.pts[k];
            if (!(pt->time_s > 0) || !isfinite(pt->time_s) || !(pt->bytes >= 0) || !isfinite(pt->bytes)) {
                fprintf(stderr, "parsim fuzz: point %zu: %g bytes in %g s\n", k, pt->bytes, pt->time_s);
                abort();
            }
        }
        nccl_log_free(&log);
    }
    free(text);
}

int fuzz_nccl(const uint8_t *data, size_t size)
{
    fuzz_nccl_once(data, size, NULL);
    fuzz_nccl_once(data, size, "all_reduce");
    return 0;
}

FUZZ_ENTRY(fuzz_nccl)
