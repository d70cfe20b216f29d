/* cluster_int.h: what the emulated cluster's model (cluster.c) shares with its check against the
 * measured runs (cluster_check.c): the layouts, a model point and the step from a calibration (calib.h). */
#ifndef SB_HARNESS_MODEL_CLUSTER_INT_H
#define SB_HARNESS_MODEL_CLUSTER_INT_H
#include "harness/registry/engines.h"
#include "harness/record/result.h"
#include "harness/model/cluster.h"
#include "harness/emulate/train_emu.h"
#include "harness/model/cluster_cost.h"
#include "harness/model/calib.h"
#include "harness/record/jsonl.h"
#include "harness/emulate/netspec.h"
#include "harness/record/stats.h"
#include "trainer/emu.h"
#include "trainer/workload.h"

#define S_WIRE (1514.0 / 1448.0)
/* The PS's default partition (bytes), read from its declared schedule through the registry; a bench line's
 * own (lines from before the field had the default). */
double h_mc_ps_part(void);
#define S_PART h_mc_ps_part()
#define S_LINE_PART(r) (h_jget((r), "ps_partition_bytes") ? h_jnum((r), "ps_partition_bytes", 0) : S_PART)

/* One engine layout of the model's rows: its label, the registry's engine it runs, its pattern and PS
 * placement. */
typedef struct {
    const char *label;
    const char *engine;
    h_cl_engine_t e;
    int update_on_worker;    /* allreduce engines leave the update to the device */
} s_layout_t;

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

/* cluster.c: the model's layouts (H_MC_NLAYOUTS rows, ring first), a model point (the workload's
 * buckets and ready times at one device and batch; device_sps > 0: the device's samples/s a run recorded) and its release, the predicted step of layout l on
 * N machines of G, the congestion control the model runs at (--net's cc=, else the default) and whether
 * a line ran under it, and the layout a measured line ran (-1: none of the model's). */
extern const s_layout_t h_mc_layouts[];
#define H_MC_NLAYOUTS 7
void h_mc_point_free(s_point_t *p);
int h_mc_point(s_point_t *p, const char *model, const char *device, double device_sps, size_t local_batch,
               double bucket_mb, int no_overlap);
double h_mc_step(const s_point_t *p, const h_cal_t *cal, int l, int N, int G, int K, double bps, double *exposed);
const char *h_mc_model_cc(const h_model_cluster_cfg_t *o, char *buf, size_t len);
int h_mc_line_cc_is(const h_jobj_t *r, const char *cc);
/* --straggler RANK:MS (a train line's "straggler"): *rank and *s (MS / 1000); "" or NULL: rank -1. 0, or -1
 * when it is not RANK:MS. */
int h_mc_straggler(const char *spec, int *rank, double *s);
int h_mc_layout_of(const h_jobj_t *r, int N);
/* An allreduce engine's traffic on N machines of G from its declared schedule (h_engine_schedule): the
 * busiest NIC direction's bytes per byte allreduced and its steps; 0 or a code. e gets them (from_sched). */
int h_mc_sched_traffic(const char *engine, int N, int G, h_cl_engine_t *e);

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
