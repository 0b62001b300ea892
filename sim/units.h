/* units: simulated time and the one place durations are rounded.
 *
 * Simulated time is an unsigned count of picoseconds (2^64 ps ~ 213 days).
 * Cost models compute durations in double seconds; time_from_s() is the only
 * conversion into simulated time (round to nearest, negative clamps to 0 is
 * NOT done: callers must not pass negative durations).
 */
#ifndef PARSIM_UNITS_H
#define PARSIM_UNITS_H

#include <assert.h>
#include <math.h>
#include <stdint.h>

typedef uint64_t sim_time_ps;

#define PS_PER_S 1e12

static inline sim_time_ps time_from_s(double s)
{
    /* Callers keep durations within [0, 1.8e7 s] (cost models reject
     * longer ones), so the product fits in 64 bits. */
    assert(s >= 0.0 && s < 1.8e7);
    return (sim_time_ps)llround(s * PS_PER_S);
}

static inline double time_as_s(sim_time_ps t) { return (double)t / PS_PER_S; }
static inline double time_as_us(sim_time_ps t) { return (double)t / 1e6; }

#define GB 1e9      /* decimal gigabyte, bytes */
#define GIB 1073741824.0
#define TFLOPS 1e12 /* flop/s */

#endif
