/* harness.h: the harness program's shared pieces: parsed options, the engine table, the launcher,
 * and the modes (bench, train, model, report) that main() dispatches to. */
#ifndef SB_HARNESS_H
#define SB_HARNESS_H
#include <stddef.h>
#include <stdio.h>
#include "core/comm.h"
#include "core/engine.h"

#define H_MAX_ENGINES 8
#define H_MAX_SCALING 16

typedef struct {
    /* mode and engines */
    const char *mode;                 /* "train" (default), "bench", "run", "model", "report" */
    const char *engines[H_MAX_ENGINES];
    int   nengines;
    const char *impl;                 /* --impl / --tree-impl / --ring-impl: engine implementation */
    /* ranks */
    int   procs;                      /* --procs N: local CPU ranks (workers) started by the launcher */
    int   gpus;                       /* --gpus N */
    int   ranks_per_gpu;              /* --ranks-per-gpu K (0 = 1): world = gpus * K, local rank r on GPU r / K */
    int   tf32;                       /* --tf32: the GPU trainer's cuBLAS GEMMs may use TF32 tensor cores */
    int   nnodes, node_rank;          /* --nnodes, --node-rank */
    const char *master;               /* --master HOST:PORT */
    const char *init_method;          /* --init-method */
    const char *ifname;               /* --ifname */
    const char *transport;            /* --transport auto|shm|tcp */
    const char *bind;                 /* --bind core|none */
    int   timeout_s;                  /* --timeout (default 60) */
    int   scaling[H_MAX_SCALING];     /* --scaling 1,2,4 */
    int   nscaling;
    /* bench */
    size_t size_min, size_max;        /* --sizes MIN:MAX */
    double factor;                    /* --factor */
    int   iters, warmup;              /* --iters, --warmup */
    dtype_t dtype;                    /* --dtype */
    redop_t op;                       /* --op sum|avg */
    int   check;                      /* --check 0|1 (correctness check in bench, default 1) */
    size_t seg_bytes;                 /* --seg-kb */
    /* train */
    const char *model;                /* --model mlp:784-1024-1024-10 */
    const char *data;                 /* --data PATH | synthetic */
    int   batch;                      /* --batch (global batch, split across workers) */
    int   steps, warmup_steps;        /* --steps, --warmup-steps */
    const char *optim;                /* --optim sgd:lr=...  */
    dtype_t grad_dtype;               /* --grad-dtype */
    double bucket_mb;                 /* --bucket-mb */
    int   no_overlap;                 /* --no-overlap */
    int   check_every;                /* --check-every */
    const char *save, *resume;        /* --save, --resume */
    int   drop_last;                  /* --drop-last */
    unsigned long long seed;          /* --seed */
    const char *straggler;            /* --straggler RANK:MS */
    /* ps */
    int   ps_servers;                 /* --servers */
    int   ps_colocate;                /* --ps-colocate */
    int   ps_mode, ps_ssp_k;          /* --ps-mode sync|async|ssp:K */
    size_t ps_partition_bytes;        /* --ps-partition-kb */
    /* output */
    const char *json;                 /* --json FILE|- */
    const char *timeline;             /* --timeline FILE */
    const char *net;                  /* --net bw=1gbit[,per=node] */
    int   quiet;
    const char *format;               /* --format text|json|md|csv (report) */
    /* raw command line (for result metadata) */
    int   argc;
    char **argv;
    /* positional args (report files) */
    char **pos;
    int   npos;
} h_opts_t;

/* engine table */
const engine_ops_t *h_engine_find(const char *name);
const char *h_engine_names(void);     /* "ring, tree, ps" for help text */
/* The engine configuration for `engine` in this world from the options: nworkers is the world minus
 * dedicated PS servers (SYNCBENCH_SERVERS from the driver, or --servers when ranks were started by
 * torchrun/srun/mpirun); device from --gpus and the local rank. */
void h_engine_cfg(const h_opts_t *o, const comm_t *comm, const char *engine, engine_cfg_t *cfg);
/* 1 if this rank is a dedicated PS server for cfg (rank >= nworkers). */
static inline int h_is_server(const comm_t *comm, const engine_cfg_t *cfg) { return comm->rank >= cfg->nworkers; }

/* metadata for JSON results: host, git sha, timestamp, command line, topology, library versions */
typedef struct {
    char host[128];
    char git_sha[48];
    char timestamp[40];
    char cmdline[2048];
    char topo[256];
    char cpu[128];
    char versions[256];
} h_meta_t;
void h_meta_fill(h_meta_t *m, int argc, char **argv);

/* Append whole lines to a results file atomically enough: one write() of the whole buffer with
 * O_APPEND; "-" writes to stdout. Errors (full disk, ...) are reported, never half a line. */
int h_json_append(const char *path, const char *lines, size_t len);
/* JSON string escaping into buf. */
void h_json_str(char *buf, size_t len, const char *s);

/* modes: each runs on one rank inside the launched world */
int h_bench(const h_opts_t *o, comm_t *comm);
int h_train(const h_opts_t *o, comm_t *comm);

#endif
