/* units: simulated time and the one place durations are rounded.
 *
 * Simulated time is an unsigned count of picoseconds (2^64 ps ~ 213 days).
 * Cost models compute durations in double seconds; time_from_s_checked()
 * is the conversion into simulated time (round to nearest): it refuses
 * NaN, negative durations and any longer than LIMIT_DURATION_S, which
 * callers turn into an error naming what was being timed.  time_from_s()
 * is for callers that have checked the duration already.
 */
#ifndef PARSIM_UNITS_H
#define PARSIM_UNITS_H

#include <assert.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "bounds.h"

typedef uint64_t sim_time_ps;

#define PS_PER_S 1e12

/* Whether s seconds may become simulated time: in [0, LIMIT_DURATION_S]
 * (false for NaN). */
static inline bool time_s_fits(double s)
{
    return s >= 0.0 && s <= LIMIT_DURATION_S;
}

static inline bool time_from_s_checked(double s, sim_time_ps *out)
{
    if (!time_s_fits(s))
        return false;
    /* round(), not llround(): above 9.2e6 s the count passes int64. */
    *out = (sim_time_ps)round(s * PS_PER_S);
    return true;
}

static inline sim_time_ps time_from_s(double s)
{
    sim_time_ps t = 0;
    bool ok = time_from_s_checked(s, &t);
    assert(ok && "durations are checked before conversion");
    if (!ok) /* NDEBUG: past any step, so that the engine reports the overflow */
        t = s < 0.0 ? 0 : UINT64_MAX;
    return t;
}

static inline double time_as_s(sim_time_ps t) { return (double)t / PS_PER_S; }
static inline double time_as_us(sim_time_ps t) { return (double)t / 1e6; }

#define GB 1e9      /* decimal gigabyte, bytes */
#define GIB 1073741824.0
#define TFLOPS 1e12 /* flop/s */

#endif
