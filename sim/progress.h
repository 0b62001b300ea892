/* progress: a one-line progress meter on stderr for long commands (sweep,
 * search, validate).
 *
 * The meter shows "label: done/total (pct%)  rate/s  ETA" and rewrites itself
 * in place with '\r'.  It prints only when stderr is a terminal (isatty), so
 * redirected or CI output stays clean; callers need not check.  All state is
 * in the caller-owned progress_t: no globals, one meter per object.  Redraws
 * are rate-limited (at most ~10 per second) so calling progress_update after
 * every item costs a clock read, not a write.
 *
 * Not thread-safe: call it from one thread (the one that collects results).
 */
#ifndef PARSIM_PROGRESS_H
#define PARSIM_PROGRESS_H

#include <stdbool.h>
#include <stdio.h>

typedef struct progress {
    FILE *out;          /* where the meter goes (stderr); NULL when silent */
    char label[64];     /* prefix, e.g. "sweep" */
    long total;         /* items expected, > 0; 0 if unknown */
    long done;          /* items finished so far */
    long first;         /* items already done at start (resumed), not rated */
    double t_start;     /* monotonic start time, s */
    double t_drawn;     /* monotonic time of the last redraw, s */
    bool drawn;         /* a line is on screen and must be ended */
} progress_t;

/* Starts a meter for total items of which `already` are done (a resumed
 * run; they count in done/total but not in the rate).  label is copied.
 * The meter is silent unless stderr is a terminal. */
void progress_start(progress_t *p, long total, long already, const char *label);

/* Same, but draws on `out` when `force` is true whatever isatty says (for
 * tests); with force false it behaves like progress_start on `out`. */
void progress_start_on(progress_t *p, FILE *out, bool force, long total, long already,
                       const char *label);

/* Sets the number of finished items (absolute, not an increment) and
 * redraws if enough time has passed since the last redraw. */
void progress_update(progress_t *p, long done);

/* Draws the final state and ends the line (no-op when silent). */
void progress_end(progress_t *p);

#endif
