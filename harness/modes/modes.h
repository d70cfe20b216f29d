/* modes.h: the modes that run on every rank of a launched world (`harness bench`, `harness train`) and
 * `harness run`'s own checks, each with the small configuration it reads (built from the command line
 * by cli/modecfg.c; nothing here sees the whole option set). */
#ifndef SB_HARNESS_MODES_H
#define SB_HARNESS_MODES_H
#include <stddef.h>
#include <stdio.h>
#include "core/comm.h"
#include "core/dtype.h"
#include "harness/registry/engines.h"
#include "harness/record/result.h"
#include "harness/emulate/train_emu.h"

/* `harness bench`: the collective microbenchmark, one engine after another */
typedef struct {
    const char *engines[H_MAX_ENGINES];
    int nengines;
    size_t size_min, size_max;        /* --sizes MIN:MAX, bytes */
    double factor;                    /* --factor: the next size is this times the last */
    int iters, warmup;                /* --iters, --warmup */
    dtype_t dtype;                    /* --dtype */
    redop_t op;                       /* --op */
    int check;                        /* --check: verify every element */
    int in_place;                     /* --in-place: one buffer, the result over the input */
    int time_ranks;                   /* -a: an iteration's time over the workers: 0 rank 0's, 1 mean, 2 min, 3 max */
    int timeout_s;                    /* --timeout */
    int quiet;                        /* --quiet: no progress lines within a long size */
    h_emu_cfg_t emu;                  /* the emulated machines the ranks are placed on (emu.nodes > 0) */
    const char *net;                  /* --net: the emulated network (NULL: none) */
    h_engset_t es;                    /* what each engine's configuration is made from */
    h_out_t out;                      /* where result lines go */
} h_bench_cfg_t;
/* h_bench: 0 or a negative code; *wrong set when some results were wrong (err_detail says which,
 * on rank 0: "bench: N wrong elements with engine E", one such line per engine). */
int h_bench(const h_bench_cfg_t *o, comm_t *comm, int *wrong);

/* `harness train`: every worker trains the shared model under one engine after another */
typedef struct {
    const char *engines[H_MAX_ENGINES];
    int nengines;
    const char *model, *data;         /* --model, --data */
    int batch;                        /* --batch (global; 0: not given) */
    int batch_per_gpu;                /* --batch-per-gpu (0: not given) */
    int steps, warmup_steps;          /* --steps, --warmup-steps */
    const char *optim;                /* --optim */
    dtype_t grad_dtype;               /* --grad-dtype */
    double bucket_mb;                 /* --bucket-mb */
    int no_overlap;                   /* --no-overlap */
    int check_every;                  /* --check-every */
    const char *save, *resume;        /* --save, --resume */
    const char *const *eopt_given;    /* the engines' own options as given (h_opts_t.eopt_given, H_MAX_ENGOPTS) */
    int drop_last;                    /* --drop-last */
    unsigned long long seed;          /* --seed */
    const char *straggler;            /* --straggler RANK:MS */
    const char *emu_device;           /* --device: the emulated device of a real model */
    double shrink, dilate;            /* --shrink, --dilate */
    int gpus;                         /* --gpus (0: the CPU model) */
    int tf32;                         /* --tf32 */
    int timeout_s;                    /* --timeout */
    int quiet;                        /* --quiet */
    h_emu_cfg_t emu;                  /* the emulated cluster's layout (emulated real models) */
    h_engset_t es;
    h_out_t out;
} h_train_cfg_t;
int h_train(const h_train_cfg_t *o, comm_t *comm);

/* `harness run` (run.c): warn on out when the load average exceeds the cores or the ranks outnumber them
 * (1 if it warned); after the rounds (and after `harness train` of several engines: who "run" or "train"),
 * the train samples/s per engine (an emulated run's: the emulated cluster's; median, min - max) from the
 * results file and a verdict line: who leads, and whether the ranking is within the spread (0, or -1
 * when the file cannot be read). */
typedef struct {
    const char *engines[H_MAX_ENGINES];
    int nengines;
    int procs;                        /* the CPU ranks of each launch */
    h_engset_t es;                    /* for the ranks each engine adds (dedicated servers) */
} h_run_cfg_t;
int h_run_load_check(const h_run_cfg_t *o, FILE *out);
/* Every mode that launches ranks (run, and the driver's launches): when the ranks on this host outnumber its
 * cores, one warning line on out after prefix ("# ", "harness: "), once per process; 1 when they do. */
int h_oversub_warn(int ranks, FILE *out, const char *prefix);
int h_run_summary(const char *json, const char *who, FILE *out);

#endif
