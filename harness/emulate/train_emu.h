/* train_emu.h: what `harness train` reports for an emulated real model on the emulated cluster:
 * emulated samples/s, speedup over one emulated device, scaling efficiency, exposed communication
 * per step, and whether the host's CPUs rather than the emulated links and devices bounded the run. */
#ifndef SB_HARNESS_EMULATE_TRAIN_EMU_H
#define SB_HARNESS_EMULATE_TRAIN_EMU_H
#include <stddef.h>
#include <jansson.h>

struct emu;

/* An emulated real model's batch a GPU when neither --batch nor --batch-per-gpu is given: 64, the batch
 * of Horovod's and BytePS's published benchmarks. */
#define H_EMU_BATCH_PER_GPU 64

/* The emulated cluster's layout and time scale, as a run gave them: --nodes N --gpus-per-node G
 * --server-nodes K, --shrink, --dilate and the --net spec (NULL: none). */
typedef struct {
    int nodes, gpus_per_node, server_nodes;
    double shrink, dilate;
    const char *net;
} h_emu_cfg_t;

typedef struct {
    int    on;
    char   model[64], device[32], basis[320];
    int    derived;                  /* the device's throughput on this model is derived, not published */
    int    nodes, gpus_per_node;
    double shrink, dilate;
    size_t params_full, params;      /* the model's parameters, and after --shrink */
    double emu_sps;                  /* emulated samples/s, all workers (measured samples/s x dilate) */
    double dev_sps;                  /* one emulated device alone on its local batch */
    double speedup, efficiency;      /* emu_sps / dev_sps, and that / workers */
    double step_ms, compute_ms, exposed_ms; /* emulated per step: the slowest worker's p50, its device time, the rest */
    double busy;                     /* host CPU busy: sum over ranks of CPU / wall, over the cores */
    double cpu_max;                  /* the busiest rank's CPU / wall */
    double system_busy;              /* the whole machine over the timed steps, every process (-1 unknown) */
    double host_wait;                /* the ranks' threads' run delay (runnable, waiting for a CPU) over wall seconds,
                                      * mean over the ranks that could read it (-1 unknown); measured, not in host_bound */
    int    host_bound;
    size_t local_batch;              /* each worker's batch */
} h_emu_sum_t;

/* all: R records of stride bytes, each with a double CPU-seconds at off_cpu, wall-seconds at off_wall and run-delay
 * seconds at off_wait (< 0: unknown).
 * sps: measured samples/s summed over the P workers; step50 / comp50: the slowest worker's p50 (ms). */
void h_emu_summarize(const struct emu *e, const h_emu_cfg_t *o, int P, double sps, double step50, double system_busy,
                     const void *all, int R, size_t stride, size_t off_cpu, size_t off_wall, size_t off_wait,
                     h_emu_sum_t *out);
/* Rank 0: the emulated table on stdout, and a line naming the host as the bound when it is. */
void h_emu_print(const h_emu_cfg_t *o, const char *name, const char *impl, int P, int has_servers, int nbuckets,
                 const h_emu_sum_t *E);
/* The emulated run's fields of its result line (NULL when out of memory). */
json_t *h_emu_json(const h_emu_cfg_t *o, const h_emu_sum_t *E);

#endif
