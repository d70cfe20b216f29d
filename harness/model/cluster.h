/* cluster.h (harness/model): `harness model --model NAME [--device D --nodes N --gpus-per-node G --net inter=RATE
 * ...] [FILE...]`: the cost model of the emulated GPU cluster (model/cluster_cost.h) from the workload's
 * per-layer timing, its buckets and the cluster's links; every engine's predicted speedup from 1 to
 * 1024 GPUs, and predicted against measured for the emulated runs in FILE... Runs in one process. */
#ifndef SB_HARNESS_MODEL_CLUSTER_H
#define SB_HARNESS_MODEL_CLUSTER_H
#include "core/dtype.h"
#include "harness/record/result.h"

typedef struct {
    const char *model;                /* --model NAME: a real model's gradient profile */
    const char *emu_device;           /* --device */
    int nodes, gpus_per_node;         /* --nodes, --gpus-per-node */
    int batch;                        /* --batch, global (0: not given) */
    int batch_per_gpu;                /* --batch-per-gpu (0: not given; neither: 64) */
    double bucket_mb;                 /* --bucket-mb */
    int no_overlap;                   /* --no-overlap */
    const char *straggler;            /* --straggler RANK:MS: the slowest GPU's extra compute a step */
    dtype_t grad_dtype;               /* --grad-dtype */
    const char *net;                  /* --net inter=RATE... */
    int nfiles;                       /* measured results files (positional, --measured) */
    char **files;
    int no_check;                     /* --no-check */
    h_out_t out;
} h_model_cluster_cfg_t;

int h_model_cluster(const h_model_cluster_cfg_t *o);

/* `harness model fit BENCH...` (the calibration JSON on stdout) and `harness model check CALIBRATION RUN...`
 * (model/fitcheck.c). */
typedef struct {
    const char *action;               /* "fit" or "check" */
    const char *calibration;          /* check: the calibration document */
    int nfiles;                       /* fit: bench results files; check: training results files */
    char **files;
    const char *net;                  /* fit: --net's cc= picks the lines' congestion control (default bbr) */
    h_out_t out;                      /* check: --json appends its lines */
} h_model_fc_cfg_t;
int h_model_fitcheck(const h_model_fc_cfg_t *o);

#endif
