/* cluster_int.h: what the emulated cluster's model (cluster.c) shares with its check against the
 * measured runs (cluster_check.c): a model point and the step of a configuration (conf.h) from a calibration
 * (calib.h). */
#ifndef SB_HARNESS_MODEL_CLUSTER_INT_H
#define SB_HARNESS_MODEL_CLUSTER_INT_H
#include "harness/registry/engines.h"
#include "harness/record/result.h"
#include "harness/model/cluster.h"
#include "harness/emulate/train_emu.h"
#include "harness/model/cluster_cost.h"
#include "harness/model/calib.h"
#include "harness/model/conf.h"
#include "harness/record/jsonl.h"
#include "harness/emulate/netspec.h"
#include "harness/record/stats.h"
#include "trainer/emu.h"
#include "trainer/workload.h"

#define S_WIRE (1514.0 / 1448.0)
/* A bench line's partition (bytes): its own, else (lines from before the field) its configuration's default */
#define S_LINE_PART(r, dflt) (h_jget((r), "ps_partition_bytes") ? h_jnum((r), "ps_partition_bytes", 0) : (dflt))

typedef struct {
    workload_t *wl;
    wl_device_t dev;
    size_t local_batch;
    double bucket_mb, bps, eff, update_s;
    int no_overlap;
    int ps_pipelined;        /* the PS commits each partition with its last push (f32 gradients, no loss scaling) */
    int nb;
    double *ready, *bytes;   /* per bucket */
    /* the slowest GPU's compute: worker straggler_rank (-1: none) waits straggler_s before its backward
     * (--straggler RANK:MS, as trainer/emu.c waits it out); a run without that worker has none */
    int straggler_rank;
    double straggler_s;
} s_point_t;

/* cluster.c: a model point (the workload's buckets and ready times at one device and batch; device_sps > 0:
 * the device's samples/s a run recorded) and its release, the predicted step of configuration c on N machines
 * of G (NAN: its schedule could not be read), the congestion control the model runs at (--net's cc=, else the
 * default) and whether a line ran under it. */
void h_mc_point_free(s_point_t *p);
int h_mc_point(s_point_t *p, const char *model, const char *device, double device_sps, size_t local_batch,
               double bucket_mb, int no_overlap);
double h_mc_step(const s_point_t *p, const h_cal_t *cal, const h_mc_conf_t *c, int N, int G, double bps, double *exposed);
const char *h_mc_model_cc(const h_model_cluster_cfg_t *o, char *buf, size_t len);
int h_mc_line_cc_is(const h_jobj_t *r, const char *cc);
/* --straggler RANK:MS (a train line's "straggler"): *rank and *s (MS / 1000); "" or NULL: rank -1. 0, or -1
 * when it is not RANK:MS. */
int h_mc_straggler(const char *spec, int *rank, double *s);

/* cluster.c: the calibration's constants, one line each */
void h_mc_print_cal(const h_cal_t *cal);
/* cluster_check.c: an error distribution (percent, signed): its header, then all and per group (groups[i]
 * names err[i]'s), |err| median, p90, the worst and the count; with lines, "kind":"error" lines too. */
void h_mc_err_head(void);
void h_mc_err_table(const char *sample, const char *const *groups, const double *err, int n, h_lines_t *lines);
/* cluster_check.c: predicted from cal against measured for every emulated training run in the files,
 * the error distribution printed and, with out->json, its lines added to lines (NULL: its own, appended
 * in one write): 0 or a code. */
int h_mc_check(const h_cal_t *cal, int nfiles, char **files, const h_out_t *out, h_lines_t *lines);

#endif
