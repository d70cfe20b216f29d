/* report.h: `harness report FILE...`: engines side by side from JSON-lines results, plus gnuplot
 * figures (PNG + SVG). */
#ifndef SB_HARNESS_REPORT_H
#define SB_HARNESS_REPORT_H

/* Reads the files (malformed lines are reported on stderr as file:line and skipped), prints the
 * tables on stdout and writes the figures into outdir (NULL: "plots" next to the first file). Returns
 * the exit code: 0, 1 (a file unreadable, gnuplot failed), 2 (no file given). */
int h_report(int nfiles, char **files, const char *outdir, const char *format);

#endif
