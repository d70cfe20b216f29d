/* plot.h: the gnuplot figures of `harness report` (PNG + SVG): bus bandwidth against size, training
 * step time, scaling efficiency and memory per rank, cost model predicted against measured and its
 * extrapolation in P. */
#ifndef SB_HARNESS_PLOT_H
#define SB_HARNESS_PLOT_H
#include "harness/report/report.h"
#include <stdio.h>

/* Writes the data files and report.gp into dir (created as needed), then runs gnuplot on it (found on
 * PATH, or SYNCBENCH_GNUPLOT; set empty: none). Notes (gnuplot missing or failed) go to `note`.
 * *nfig: figures drawn (0 without gnuplot). Returns 0 (also without gnuplot: the data and script are
 * still written), or ERR_IO (dir not writable, gnuplot failed) with err_set detail. */
int h_plot_report(const h_rdata_t *d, const char *dir, FILE *note, int *nfig);

/* The gnuplot the figures are drawn with: $SYNCBENCH_GNUPLOT (empty: none), else the first on PATH; NULL when none. */
const char *h_plot_gnuplot(void);

#endif
