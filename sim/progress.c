#include "progress.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

/* Redraw at most this often, s: a terminal line is cheap, but thousands of
 * writes per second would slow a fast sweep and flicker. */
#define PROGRESS_REDRAW_S 0.1

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Writes seconds as "1h02m", "3m05s" or "12s". */
static void fmt_duration(char *buf, size_t len, double s)
{
    if (s < 0 || s != s)
        s = 0;
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, len, "%ldh%02ldm", t / 3600, (t % 3600) / 60);
    else if (t >= 60)
        snprintf(buf, len, "%ldm%02lds", t / 60, t % 60);
    else
        snprintf(buf, len, "%lds", t);
}

static void draw(progress_t *p, double t)
{
    double elapsed = t - p->t_start;
    long fresh = p->done - p->first;
    double rate = elapsed > 0 ? (double)fresh / elapsed : 0;
    char eta[32] = "?";
    if (rate > 0 && p->total > 0)
        fmt_duration(eta, sizeof eta, (double)(p->total - p->done) / rate);
    if (p->total > 0)
        fprintf(p->out, "\r%s: %ld/%ld (%.0f%%)  %.1f/s  %s left\033[K", p->label, p->done,
                p->total, 100.0 * (double)p->done / (double)p->total, rate, eta);
    else
        fprintf(p->out, "\r%s: %ld  %.1f/s\033[K", p->label, p->done, rate);
    fflush(p->out);
    p->t_drawn = t;
    p->drawn = true;
}

void progress_start_on(progress_t *p, FILE *out, bool force, long total, long already,
                       const char *label)
{
    memset(p, 0, sizeof *p);
    p->out = (out && (force || isatty(fileno(out)))) ? out : NULL;
    snprintf(p->label, sizeof p->label, "%s", label ? label : "");
    p->total = total;
    p->done = already;
    p->first = already;
    p->t_start = now_s();
    p->t_drawn = p->t_start - PROGRESS_REDRAW_S;
}

void progress_start(progress_t *p, long total, long already, const char *label)
{
    progress_start_on(p, stderr, false, total, already, label);
}

void progress_update(progress_t *p, long done)
{
    p->done = done;
    if (!p->out)
        return;
    double t = now_s();
    if (t - p->t_drawn >= PROGRESS_REDRAW_S)
        draw(p, t);
}

void progress_end(progress_t *p)
{
    if (!p->out)
        return;
    draw(p, now_s());
    fputc('\n', p->out);
    fflush(p->out);
    p->drawn = false;
}
