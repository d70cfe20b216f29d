/* simulate.h: `harness simulate --engine E[,E...] --nodes N --gpus-per-node G --net inter=RATE --lat US
 * --sizes MIN:MAX`: each engine's declared allreduce schedule replayed on a simulated cluster (sim.h),
 * one line per size: simulated time, algbw, busbw, the busiest NIC's bytes, and how many communications
 * and how long simulating took. The schedules are the engines' segmented ones (sched_env_t.segmented).
 * The collective alone; training steps are not simulated yet. */
#ifndef SB_HARNESS_SIMULATE_H
#define SB_HARNESS_SIMULATE_H
#include <stddef.h>
#include "harness/registry/engines.h"
#include "harness/record/result.h"

typedef struct {
    const char *engines[H_MAX_ENGINES];
    int nengines;
    int nodes, gpus_per_node, server_nodes;
    const char *net;                  /* --net inter=RATE (its rate: each machine's NIC) */
    double lat_us;                    /* --lat (< 0: not given, refused) */
    double intra_bps;                 /* --intra (0: PCIe 3.0 x16) */
    size_t size_min, size_max;        /* --sizes */
    double factor;                    /* --factor */
    size_t esz;                       /* bytes an element (--dtype) */
    int timeout_s;
    h_engset_t es;
    h_out_t out;
} h_simulate_cfg_t;

/* Runs in the calling process; 0, ERR_INVAL (usage: err_detail says why), ERR_NODEV (no SimGrid), or
 * a simulation's failure. */
int h_simulate(const h_simulate_cfg_t *o);

#endif
