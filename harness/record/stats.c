/* stats.c: order statistics of measured samples (see stats.h). */
#include "harness/record/stats.h"
#include <math.h>
#include <stdlib.h>

int h_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double h_median(double *v, size_t n)
{
    if (!n) return 0;
    qsort(v, n, sizeof *v, h_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double h_pct(double *v, size_t n, double p)
{
    if (!n) return 0;
    qsort(v, n, sizeof *v, h_cmp_double);
    size_t k = (size_t)ceil(p / 100.0 * (double)n);
    if (k > n) k = n;
    return v[k ? k - 1 : 0];
}
