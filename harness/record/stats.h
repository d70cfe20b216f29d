/* stats.h: order statistics of measured samples (median, nearest-rank percentile) for every harness
 * mode that summarises repeated timings: report, model, and any mode that wants one median. */
#ifndef SB_HARNESS_STATS_H
#define SB_HARNESS_STATS_H
#include <stddef.h>

/* qsort comparator for doubles, ascending. */
int    h_cmp_double(const void *a, const void *b);
/* Median of n values: the middle one, or the mean of the two middle ones when n is even; 0 when n is
 * 0. Sorts v in place. */
double h_median(double *v, size_t n);
/* Percentile p (0..100) by nearest rank: the ceil(p/100 n)-th smallest value (the smallest for p 0);
 * 0 when n is 0. Sorts v in place. */
double h_pct(double *v, size_t n, double p);

#endif
