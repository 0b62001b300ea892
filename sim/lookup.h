/* lookup: reading a figure off a table of kernel measurements.
 *
 * The two lookups the measured (microbench) and published (kerneltable)
 * tables share: the point nearest a query in log space (GEMM shapes), and
 * a curve read linearly between its points and held flat beyond its ends
 * (attention by log2 of the sequence length).  Pure, allocation-free.
 */
#ifndef PARSIM_LOOKUP_H
#define PARSIM_LOOKUP_H

#include <stddef.h>

/* Index of the point of pts[0..n) nearest q[0..dims) in squared Euclidean
 * distance; each point starts with `dims` floats (log coordinates) and
 * points are `stride` bytes apart.  n must be > 0; ties keep the first. */
size_t lookup_nearest(const void *pts, size_t n, size_t stride, const float *q, int dims);

/* ys at x on the polyline through (xs[i], ys[i]), xs strictly increasing,
 * n > 0: ys[0] below xs[0], ys[n-1] beyond xs[n-1]. */
double lookup_curve(const double *xs, const double *ys, size_t n, double x);

#endif
