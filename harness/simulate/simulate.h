/* simulate.h: `harness simulate --engine E[,E...]|all --nodes N --gpus-per-node G --net inter=RATE --lat US`
 * on a simulated cluster (sim.h), from the engines' declared schedules in the segments they pipeline
 * (sched_env_t.segmented). With --sizes MIN:MAX, the allreduce alone, one line per size (simulated time,
 * algbw, busbw, the busiest NIC's bytes, communications, how long simulating took); with --model M,
 * training steps (simulate_train.c), one line per engine or layout and machine count (--scaling). */
#ifndef SB_HARNESS_SIMULATE_H
#define SB_HARNESS_SIMULATE_H
#include <stddef.h>
#include "harness/registry/engines.h"
#include "harness/record/result.h"

#define H_SIM_MAX_SCALE 16
typedef struct {
    const char *engines[H_MAX_ENGINES];
    int nengines;
    int nodes, gpus_per_node, server_nodes;
    const char *net;                  /* --net inter=RATE (its rate: each machine's NIC) */
    double lat_us;                    /* --lat (< 0: not given, refused) */
    double intra_bps;                 /* --intra (0: PCIe 3.0 x16) */
    double server_rate;               /* --server-rate, bytes/s (< 0: not given: the default; 0: infinite) */
    int server_cores;                 /* --server-cores (0: 1) */
    const char *fabric;               /* --fabric (NULL: star) */
    size_t size_min, size_max;        /* --sizes */
    double factor;                    /* --factor */
    size_t esz;                       /* bytes an element (--dtype) */
    int timeout_s;
    int engine_all;                   /* --engine all: every layout (registry/layouts.h) */
    /* training steps (--model) */
    const char *model, *device;       /* --model (a real model's profile), --device (default v100) */
    int batch_per_gpu;                /* --batch-per-gpu (0: 64) */
    double bucket_mb;                 /* --bucket-mb */
    int no_overlap;                   /* --no-overlap: every bucket waits for the whole backward */
    int steps;                        /* --steps (simulated steps, 1 .. H_SIM_MAX_STEPS) */
    unsigned long long seed;          /* --seed: the stragglers' draw */
    const char *spread;               /* --spread DIST (NULL: the cited default) */
    int max_groups;                   /* --sim-groups (0: every step of a schedule replayed as its own) */
    int min_stream;                   /* --sim-streams (0: every piece of a dataflow schedule its own; < 0 auto) */
    int join;                         /* --sim-join (1: a stream takes in the released ones after it; 0: never) */
    int fan_bundle;                   /* --sim-bundles (0: every fan-out transfer its own; < 0 auto: 1 past 200 k communications) */
    int scaling[H_SIM_MAX_SCALE];     /* --scaling: machine counts (none: --nodes) */
    int nscaling;
    int emulated;                     /* --emulated FILE...: the check against the emulated runs (sim_check.c) */
    const char *check_from;           /* --check-from FILE: its runs alone are the check points (NULL: every file's) */
    int nfiles;
    char **files;
    h_engset_t es;
    h_out_t out;
} h_simulate_cfg_t;

/* Runs in the calling process; 0, ERR_INVAL (usage: err_detail says why), ERR_NODEV (no SimGrid), or
 * a simulation's failure. */
int h_simulate(const h_simulate_cfg_t *o);
/* A model's step on one GPU as the simulator replays it: its profile and device, DDP's buckets (a first
 * bucket of 1 MiB, then bucket_mb) with their element counts and ready times, forward + backward, and the
 * optimizer's update on the GPU (SGD with momentum: 20 bytes a parameter). */
#include "trainer/workload.h"
typedef struct {
    workload_t *wl;
    wl_device_t dev;
    int nb;
    size_t *counts;
    double *ready;
    double fwd_s, total_s, update_s;
} h_sim_point_t;
int  h_sim_point(h_sim_point_t *p, const char *model, const char *device, size_t local_batch, double bucket_mb,
                 int no_overlap);
void h_sim_point_free(h_sim_point_t *p);
/* simulate_train.c: the training steps of --model on base's platform (its nodes, or each of --scaling) */
struct h_sim_platform;
int h_simulate_train(const h_simulate_cfg_t *o, const struct h_sim_platform *base);
/* sim_check.c: the simulator against the emulated training runs of o->files (constants fitted from their
 * bench lines only) */
int h_simulate_check(const h_simulate_cfg_t *o);

#endif
