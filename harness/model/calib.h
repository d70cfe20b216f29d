/* calib.h (harness/model): the emulated cluster's cost model calibration: every constant the model fits,
 * fitted once from collective-alone bench lines (mode "bench") and never from the training runs it is
 * checked against (mode "train"), with the files and line counts each came from; written to and read
 * from a calibration JSON document (`harness model fit BENCH... > calibration.json`). */
#ifndef SB_HARNESS_MODEL_CALIB_H
#define SB_HARNESS_MODEL_CALIB_H
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include "harness/model/conf.h"

/* The split, declared before any check was looked at; stated in every calibration and check output. */
#define H_CAL_SPLIT "fit only on collective-alone bench lines (mode \"bench\"); check only on training lines (mode \"train\")"

typedef enum {
    H_CAL_ALPHA = 0,   /* s per message in series (ring and tree bench lines on shaped links): value */
    H_CAL_INCAST,      /* c of the law 1 + c (f - 1) (one PS server, a shaped link per rank): value */
    H_CAL_LAYOUT,      /* a PS layout with servers on the GPU machines on N x G: its NIC slowdown, value */
    H_CAL_SERVERS,     /* PS servers on K machines of their own, N x G: slowdown value + slope (K - 1), K <= kmax */
    H_CAL_NKINDS
} h_cal_kind_t;

typedef struct {
    h_cal_kind_t kind;
    char   layout[40];      /* H_CAL_LAYOUT: the model's layout label */
    int    nodes, gpn;      /* H_CAL_LAYOUT, H_CAL_SERVERS */
    int    kmin, kmax;      /* H_CAL_SERVERS: the server machines measured; H_CAL_INCAST: the pushing workers */
    double part_wire;       /* H_CAL_INCAST, _LAYOUT, _SERVERS: a partition's wire time (s) on its lines' links */
    double value, slope;    /* the constant (and the slope per server machine beyond one) */
    double raw;             /* H_CAL_ALPHA: the least-squares value before holding it at 0 */
    int    lines;           /* bench lines it was fitted from */
    uint64_t files;         /* bit i: the calibration's file i gave a line */
} h_cal_const_t;

typedef struct {
    char  *path;
    long   lines, bench, used; /* lines in the file, bench lines among them, lines a constant was fitted from */
} h_cal_file_t;

typedef struct h_cal_s {
    char cc[16];             /* the TCP congestion control the calibrating lines ran (the model's) */
    int nfiles;
    h_cal_file_t *files;
    int n;
    h_cal_const_t *c;
} h_cal_t;

/* One bench line as a sample of the constant it calibrates. */
typedef struct {
    h_cal_kind_t kind;
    int    file;            /* index into the files given */
    h_mc_conf_t conf;       /* the configuration the line ran (model/conf.h) */
    int    layout;          /* its row (h_mc_conf_t.row: the registry's order, a run's own after) */
    int    glayout;         /* the row where the constant is per layout (H_CAL_LAYOUT), else -1 */
    int    N, G, K, P;      /* machines, GPUs (ranks) a machine, server machines, ranks */
    double bytes, beta, part, part_wire; /* per worker; s a payload byte; the partition; its wire time (s) */
    double measured;        /* s: loop_us */
    double t_beta, msgs;    /* the model without a slowdown: its bytes' time (s) and its messages in series */
} h_cal_sample_t;

/* The samples of the files' bench lines under cc, sorted (not in the files' order); finfo (may be NULL,
 * else nfiles entries) gets each file's lines and bench lines. 0, ERR_IO, ERR_CORRUPT or ERR_NOMEM. */
int  h_cal_samples(int nfiles, char **files, const char *cc, h_cal_sample_t **out, size_t *nout, h_cal_file_t *finfo);
/* measured / modelled time of the bytes, after alpha's messages */
double h_cal_sample_ratio(const h_cal_sample_t *s, double alpha);
/* The calibration's prediction (s) of a bench line's collective: the in-sample check. */
double h_cal_bench_predict(const struct h_cal_s *cal, const h_cal_sample_t *s);
const char *h_cal_kind_name(h_cal_kind_t k);

/* Fit from the bench lines of the files (at most 64), lines under congestion control cc only: 0, or
 * ERR_IO / ERR_CORRUPT (a file that cannot be read or holds a malformed line: err_set names it) /
 * ERR_NOMEM. The result does not depend on the files' order. */
int  h_cal_fit(h_cal_t *cal, int nfiles, char **files, const char *cc);
void h_cal_free(h_cal_t *cal);
/* The calibration as a JSON document (new reference), and back: 0 or ERR_CORRUPT (err_set says why). */
json_t *h_cal_json(const h_cal_t *cal);
int  h_cal_load(h_cal_t *cal, const char *path);

/* Lookups for a prediction; part_wire: the modelled partition's wire time (s). The constant of its kind
 * whose lines' partition wire time is nearest (in ratio) to part_wire. */
double h_cal_alpha(const h_cal_t *cal);
double h_cal_incast(const h_cal_t *cal, double part_wire, int *fmax);
/* A layout's measured slowdown on N x G: servers on the GPU machines (layout's own); servers on K machines
 * of their own (K held within the measured range). 0: not measured there (the law). */
double h_cal_layout_slow(const h_cal_t *cal, const char *layout, int N, int G, double part_wire);
double h_cal_servers_slow(const h_cal_t *cal, int N, int G, int K, double part_wire);

#endif
