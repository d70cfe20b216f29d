/* opts.h: the harness command line as parsed (h_opts_t): every option of every mode, read only by cli/
 * (which builds each mode's own configuration from it, cli/modecfg.h), the driver and main. */
#ifndef SB_HARNESS_CLI_OPTS_H
#define SB_HARNESS_CLI_OPTS_H
#include <stddef.h>
#include <stdio.h>
#include "core/dtype.h"
#include "harness/registry/engines.h"

#define H_MAX_SCALING 16
#define H_MAX_FILES   64

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
    const char *master;               /* --master HOST:PORT (or made from --master-addr/--master-port) */
    const char *master_addr;          /* --master-addr A (torchrun's spelling) */
    const char *master_port;          /* --master-port P (default 29500 with --master-addr) */
    const char *init_method;          /* --init-method */
    const char *ifname;               /* --ifname */
    const char *transport;            /* --transport auto|shm|tcp */
    const char *bind;                 /* --bind core|none */
    int   timeout_s;                  /* --timeout (default 60) */
    int   require_auth;               /* --require-auth: refuse to run without a job secret */
    int   scaling[H_MAX_SCALING];     /* --scaling 1,2,4 */
    int   nscaling;
    int   rounds;                     /* --rounds N: run: repeat the comparison, engines alternating (default 3) */
    /* bench */
    size_t size_min, size_max;        /* --sizes MIN:MAX */
    double factor;                    /* --factor */
    int   iters, warmup;              /* --iters, --warmup */
    dtype_t dtype;                    /* --dtype */
    redop_t op;                       /* --op sum|avg */
    int   check;                      /* --check 0|1 (correctness check in bench, default 1) */
    int   in_place;                   /* --in-place (bench: the result over the input, as the public API's) */
    int   average;                    /* nccl-tests' -a 0|1|2|3 (bench, run): an iteration's time over the workers:
                                       * rank 0's, the mean, the min, the max (default 3, the slowest) */
    int   ngpus, nthreads;            /* nccl-tests' -g G, -t T (bench; 0: not given): --gpus (-np N or 1) x T x G */
    size_t seg_bytes;                 /* --seg-kb */
    /* train */
    const char *model;                /* --model mlp:784-1024-1024-10 */
    const char *data;                 /* --data PATH | synthetic */
    int   batch;                      /* --batch (global batch, split across workers) */
    int   batch_per_gpu;              /* --batch-per-gpu (each worker's; 0: not given) */
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
    /* the emulated GPU cluster (--model NAME of a real model: trainer/workload.h; harness/cluster.h) */
    const char *emu_device;           /* --device SPEC: preset, throughput=X or tflops=X */
    double shrink, dilate;            /* --shrink S (0: auto), --dilate K (default 1) */
    int   nodes, gpus_per_node;       /* --nodes N --gpus-per-node G */
    int   server_nodes;               /* --server-nodes K: dedicated PS servers on CPU machines of their own */
    double lat_us;                    /* --lat US (simulate; < 0: not given) */
    double intra_bps;                 /* --intra RATE (simulate; 0: PCIe 3.0 x16) */
    const char *spread;               /* --spread DIST (simulate: the GPUs' compute spread; NULL: its default) */
    int   sim_groups;                 /* --sim-groups G (simulate; default 64, 0: no merging) */
    int   sim_streams;                /* --sim-streams M (simulate; -1: auto, 0: every transfer its own) */
    int   sim_join;                   /* --sim-join J (simulate; 1: streams join, experimental; 0: never) */
    int   sim_bundles;                /* --sim-bundles Q (simulate; 0: every fan-out transfer its own) */
    double server_rate;               /* --server-rate MBPS (simulate: a server core's bytes a second, x 1e6; < 0: not
                                       * given, 0: infinite) */
    int   server_cores;               /* --server-cores C (simulate: cores a server's host gives its work; 0: 1) */
    const char *fabric;               /* --fabric star|fattree:R:O (simulate: the switch fabric; NULL: star) */
    int   engine_all;                 /* --engine all (simulate: every layout) */
    int   sim_emulated;               /* --emulated (simulate: check against the emulated runs of the files) */
    char *sim_check_from;             /* --check-from FILE (--emulated: check points from this file only) */
    /* the engines' own options (engine_ops_t.options), one blob per engine of the table, by index */
    void *eopts[H_MAX_ENGINES];
    const char *eopt_given[H_MAX_ENGOPTS]; /* engine option k (h_engine_opt) as given: its value, "on" for a
                                            * switch, NULL when not on the command line */
    int   device;                     /* inside a rank with --gpus: this rank's CUDA device */
    /* output */
    const char *json;                 /* --json FILE|- */
    const char *label;                /* --label NAME: the run's name in every JSON line; report: keep only it */
    const char *timeline;             /* --timeline FILE */
    const char *timeline_tag;         /* --timeline-tag TAG (set by the driver: FILE.TAG.json) */
    const char *net;                  /* --net bw=1gbit[,per=node] */
    int   quiet;
    int   verbose;                    /* --verbose: errors say where in the source they passed */
    const char *list_values;          /* --list-values OPT|all: the values OPT takes (shell completion) */
    int   peers;                      /* --peers: also the peer engines (mpi) and PyTorch DDP / gloo (harness/peers.h) */
    const char *format;               /* --format text|json|md|csv (report) */
    const char *plots_dir;            /* --plots DIR (report) */
    const char *table;                /* --table bench|train|model (report) */
    const char *csv_dir;              /* --csv DIR (report): one CSV file per table */
    char *measured[H_MAX_FILES];      /* report / model: results files (positional ones, then --measured) */
    int   nmeasured;
    int   no_check;                   /* --no-check (model): no check against the measured files' runs */
    const char *model_action;         /* model: "fit" or "check" (the first positional argument), or NULL */
    int   help;                       /* --help or -h was given (parsing stopped there) */
    int   version;                    /* --version was given (parsing stopped there) */
    unsigned long long given[8];      /* bit i: option i of opts.c's table was on the command line */
    /* raw command line (for result metadata) */
    int   argc;
    char **argv;
    /* positional args (report files) */
    char **pos;
    int   npos;
} h_opts_t;

/* The command line (opts.c): defaults, then argv; 0, or ERR_INVAL / ERR_NOMEM with the message in
 * err_detail() (a usage error: exit 2). On --help it stops there with o->help set; h_opts_usage prints
 * the help text made from the same option table. */
int  h_opts_parse(h_opts_t *o, int argc, char **argv);
void h_opts_usage(FILE *f);
/* `harness MODE --help`: the options that concern MODE, then their defaults */
void h_opts_usage_mode(FILE *f, const char *mode);
/* The options given that the mode does not use: a warning on stderr for each (unless --quiet), or
 * ERR_INVAL for a combination where one would be dropped (--scaling with --procs). For the process the
 * user started, not for the ranks. */
int  h_opts_check_mode(const h_opts_t *o);
/* 1 if the option of this (long) name, or one of its aliases, was on the command line */
int  h_opts_given(const h_opts_t *o, const char *name);
/* --list-values: the values option opt takes, one a line, from the tables the parser reads (the workload
 * registry, the device presets, the engine registry and its layouts, a choice's words); "all": a line for
 * each option that has such values, "SPELLINGS<TAB>VALUES" (SPELLINGS: --NAME|-C|--ALIAS, VALUES space
 * separated), for scripts/gen-completion. 0, or ERR_INVAL for an option without a list. */
int  h_opts_list_values(FILE *f, const char *opt);

#endif
