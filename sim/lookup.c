#include "lookup.h"

#include <gsl/gsl_interp.h>
#include <math.h>

size_t lookup_nearest(const void *pts, size_t n, size_t stride, const float *q, int dims)
{
    size_t best_i = 0;
    double best = INFINITY;
    for (size_t i = 0; i < n; i++) {
        const float *p = (const float *)(const void *)((const char *)pts + i * stride);
        double d = 0.0;
        for (int j = 0; j < dims; j++)
            d += ((double)q[j] - p[j]) * ((double)q[j] - p[j]);
        if (d < best) {
            best = d;
            best_i = i;
        }
    }
    return best_i;
}

double lookup_curve(const double *xs, const double *ys, size_t n, double x)
{
    if (n == 1 || x <= xs[0])
        return ys[0];
    if (x >= xs[n - 1])
        return ys[n - 1];
    /* the segment found as gsl_interp_linear would, without allocating */
    size_t i = gsl_interp_bsearch(xs, x, 0, n - 1);
    double f = (x - xs[i]) / (xs[i + 1] - xs[i]);
    return ys[i] + f * (ys[i + 1] - ys[i]);
}
