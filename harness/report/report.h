/* report.h: `harness report FILE...`: engines side by side from JSON-lines results, as text, JSON,
 * Markdown or CSV tables, plus gnuplot figures (plot.h). The collected rows are plain data shared
 * with plot.c. */
#ifndef SB_HARNESS_REPORT_H
#define SB_HARNESS_REPORT_H
#include <stddef.h>
#include <stdio.h>

#define H_LABEL 160
#define H_REPS  16    /* repeated runs of one bench point kept for its median (the latest H_REPS) */

/* One bench point (configuration, bytes): medians over its repeated runs. A configuration is every
 * field of a line that can change the measurement (report.c: all but the measured figures and the
 * run's metadata); rows whose label and world agree but whose configurations differ get the
 * differing fields appended to their label ("ring+transport=tcp"). */
typedef struct {
    char label[H_LABEL];
    char *cfg;                 /* the configuration key (malloc'd; freed with the rows) */
    const void *obj;           /* the latest line (h_jobj_t, borrowed) */
    char net[32];              /* --net spec of the latest run ("" without) */
    int world, servers;
    double bytes, busbw, algbw, time_us;
    double wrong;              /* wrong elements summed over every run */
    double rep_t[H_REPS], rep_bw[H_REPS], rep_ag[H_REPS];
    size_t nrep;               /* runs seen (may exceed H_REPS) */
    size_t nhb;                /* of them host-bound ("host_bound": the figure measured this machine's CPU) */
    double *traffic;           /* the latest run's traffic matrix, (world + servers)^2 bytes, row = sender
                                  (borrowed from the parsed line; NULL: none) */
    size_t ntraffic;
    double steps;              /* allreduces the matrix covers (iters + warmup) */
} h_rbench_t;

/* One training configuration: samples/s the median of its repeated runs (with their min and max),
 * every other figure the latest line's. */
typedef struct {
    char label[H_LABEL];
    char *cfg;                 /* as for bench */
    const void *obj;
    char src[256];             /* "file:line" of that line */
    int world, servers;
    double sps, step50, step99, comm50, wait50, imb, eimb;   /* sps: the median of its runs, the rest the latest's */
    double sps_min, sps_max;   /* over its runs (the latest H_REPS) */
    double rep_sps[H_REPS];
    double speedup;            /* emulated runs: speedup over one emulated device (NAN otherwise) */
    double eff_emu;            /* emulated runs: their scaling_efficiency, speedup / GPUs, as train printed it (NAN otherwise) */
    size_t nhb;                /* runs that were host-bound ("host_bound") */
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

/* Lines of a kind report has no table for ("model/cluster", "simulate/train"...), how many: counted, said
 * in one line, never a line each. */
#define H_OTHER 16
typedef struct {
    char kind[48];
    size_t n;
} h_rother_t;

/* Every row of a report, each kind sorted (bench: label, world, bytes; train: label, world; model:
 * what, label, bytes, world), and the tally of the lines skipped for their kind. */
typedef struct {
    h_rbench_t *b; size_t nb;
    h_rtrain_t *t; size_t nt;
    h_rmodel_t *m; size_t nm;
    h_rother_t other[H_OTHER]; size_t nother, nother_lines;
} h_rdata_t;

/* Reads the files (malformed lines skipped, counted on stderr in one line a file) and prints the
 * tables on stdout in format "text", "json", "md" or "csv". Figures: always with text (into outdir,
 * NULL: "plots" next to the first file); with the other formats only when outdir is given, and
 * their notes then go to stderr so stdout holds only the tables. Returns 0, ERR_INVAL (no file, an
 * unknown format, a file with no result line: named, after the others' tables), ERR_IO (a file unreadable or gnuplot failed: the tables are still printed) or
 * ERR_NOMEM; err_detail() says which. */
int h_report(int nfiles, char **files, const char *outdir, const char *format);
/* The same, keeping only the lines whose "label" (harness --label) is run_label (NULL: every line). */
int h_report_run(int nfiles, char **files, const char *outdir, const char *format, const char *run_label);
/* The text tables only, no figures (`harness train`'s side-by-side table of its engines). */
int h_report_tables(int nfiles, char **files);
/* The same with every choice: format (NULL: text), the run's label (NULL: every line), table ("bench",
 * "train", "model"; NULL: every kind) in every format, csv_dir (one CSV file per table instead of tables on
 * stdout; not with a format other than csv). */
typedef struct {
    const char *outdir, *format, *run_label, *table, *csv_dir;
} h_report_cfg_t;
int h_report_with(int nfiles, char **files, const h_report_cfg_t *c);

/* Engine labels: h_engine_label (registry/engines.h). */

/* Scaling efficiency of train row i: an emulated run's own (speedup over one emulated device / GPUs, what
 * train printed; *base 1), else sps(n) / (n sps(base)) against the smallest world of the same label (*base:
 * that world; > 1 means approximate). 1 for the base itself, NAN when not computable. */
double h_report_efficiency(const h_rdata_t *d, size_t i, int *base);

/* The ceiling table (report_ceil.c): every bench row that has an op-move twin (same configuration, world
 * and size), its time beside the twin's and their ratio; prints nothing without such pairs. Returns the
 * rows printed. lwid: the engine column's width. */
size_t h_report_ceilings(FILE *out, const h_rdata_t *d, int lwid);

/* The rows as one JSON document {"files":[...],"results":N,"malformed":K,"bench":[...],"train":[...],
 * "model":[...]}, as Markdown tables, or as CSV (report_fmt.c). */
void h_report_json(FILE *out, const h_rdata_t *d, int nfiles, char **files, size_t nres, size_t nbad);
void h_report_md(FILE *out, const h_rdata_t *d);
void h_report_csv(FILE *out, const h_rdata_t *d);
/* The kinds by name: "bench" 0, "train" 1, "model" 2; -1 for any other name. */
int h_report_kind(const char *name);
/* One kind's table as CSV, one header line and a line a row (nothing when it has no rows): what
 * pandas.read_csv reads as is. */
void h_report_csv_table(FILE *out, const h_rdata_t *d, int kind);
/* DIR/bench.csv, DIR/train.csv, DIR/model.csv (those with rows; kind >= 0: that one only), each written
 * whole or not at all, DIR made if missing; a line on note per file. 0, or ERR_IO / ERR_NOSPC / ERR_NOMEM. */
int h_report_csv_dir(const h_rdata_t *d, const char *dir, int kind, FILE *note);

#endif
