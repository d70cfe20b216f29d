/* report.h: `harness report FILE...`: engines side by side from JSON-lines results, as text, JSON,
 * Markdown or CSV tables, plus gnuplot figures (plot.h). The collected rows are plain data shared
 * with plot.c. */
#ifndef SB_HARNESS_REPORT_H
#define SB_HARNESS_REPORT_H
#include <stddef.h>

#define H_LABEL 64
#define H_REPS  16    /* repeated runs of one bench point kept for its median (the latest H_REPS) */

/* One bench point (label, world, bytes): medians over its repeated runs. */
typedef struct {
    char label[H_LABEL];
    char net[32];              /* --net spec of the latest run ("" without) */
    int world, servers;
    double bytes, busbw, algbw, time_us;
    double wrong;              /* wrong elements summed over every run */
    double rep_t[H_REPS], rep_bw[H_REPS], rep_ag[H_REPS];
    size_t nrep;               /* runs seen (may exceed H_REPS) */
    double *traffic;           /* the latest run's traffic matrix, (world + servers)^2 bytes, row = sender
                                  (borrowed from the parsed line; NULL: none) */
    size_t ntraffic;
    double steps;              /* allreduces the matrix covers (iters + warmup) */
} h_rbench_t;

/* One training configuration (label, world): the latest line for it. */
typedef struct {
    char label[H_LABEL];
    char src[256];             /* "file:line" of that line */
    int world, servers;
    double sps, step50, step99, comm50, wait50, imb, eimb;
    double speedup;            /* emulated runs: speedup over one emulated device (NAN otherwise) */
    double *mem;               /* peak bytes per rank (borrowed from the parsed line) */
    size_t nmem, nrep;
    double *emem;              /* engine memory per rank (mem_engine_bytes; borrowed; NULL: none) */
    size_t nemem;
    double *traffic;           /* traffic matrix of the run, ranks^2 bytes, row = sender (borrowed; NULL: none) */
    size_t ntraffic;
    double steps;              /* steps the matrix covers (steps + warmup_steps) */
} h_rtrain_t;

/* One cost-model prediction ("mode":"model" line other than the fit). */
typedef struct {
    char label[H_LABEL];
    char what[16];             /* "bench" (allreduce) or "train" (step) */
    int world;
    double bytes, pred_us, meas_us;   /* meas_us <= 0: none (extrapolation) */
} h_rmodel_t;

/* Every row of a report, each kind sorted (bench: label, world, bytes; train: label, world; model:
 * what, label, bytes, world). */
typedef struct {
    h_rbench_t *b; size_t nb;
    h_rtrain_t *t; size_t nt;
    h_rmodel_t *m; size_t nm;
} h_rdata_t;

/* Reads the files (malformed lines are reported on stderr as file:line and skipped) and prints the
 * tables on stdout in format "text", "json", "md" or "csv". Figures: always with text (into outdir,
 * NULL: "plots" next to the first file); with the other formats only when outdir is given, and
 * their notes then go to stderr so stdout holds only the tables. Returns 0, ERR_INVAL (no file, an
 * unknown format), ERR_IO (a file unreadable or gnuplot failed: the tables are still printed) or
 * ERR_NOMEM; err_detail() says which. */
int h_report(int nfiles, char **files, const char *outdir, const char *format);

/* Engine label of a result as reports show it: engine, "/impl" unless the default host path, a PS
 * layout suffix ("-coloc" when coloc, else "-sN" for N > 0 servers); a descriptive impl that starts
 * with "<engine>-" (ps-sync-servers1) is the label itself. */
void h_engine_label(char *out, size_t len, const char *engine, const char *impl, int servers, int coloc);

/* Scaling efficiency of train row i: sps(n) / (n sps(base)) against the smallest world of the same
 * label (*base: that world; > 1 means approximate). 1 for the base itself, NAN when not computable. */
double h_report_efficiency(const h_rdata_t *d, size_t i, int *base);

#endif
